"""Hostile rows whose run hits its memory cgroup's limit (memfd pages held by a forked child, so the OOM killer
picks the harness or the child) beside canonical rows, in every mode; the canonical rows' labels are compared with
the same rows graded alone. Also prints the hostile rows' labels."""
import time
from vgrout.substrate.easy import easy_problems
from vgrout.substrate import grader, modes
p = [p for p in easy_problems() if p.id == "easy/is_multiple/6"][0]
HOSTILE = '''
import os, time
def _fill():
    fds, chunk = [], b"x" * ((4 << 20) - 4096)
    while True:
        fd = os.memfd_create("m"); os.write(fd, chunk); fds.append(fd)
if os.fork() == 0:
    _fill()
def is_multiple(n):
    time.sleep(0.3)
    return n % 180 == 0
'''
HOSTILE_B = '''
import os, sys, time
_calls = [0]
def is_multiple(n):
    _calls[0] += 1
    if _calls[0] == 3 and os.fork() == 0:   # later in the run (phase A and phase B alike)
        fds, chunk = [], b"x" * ((4 << 20) - 4096)
        while True:
            fd = os.memfd_create("m"); os.write(fd, chunk); fds.append(fd)
    time.sleep(0.2)
    return n % 180 == 0
'''
canon = "```python\n" + p.canonical_solution + "\n```"
ms = [m for m in modes.names() if m != "hardcode" or modes.get("hardcode").eligible(p)]
rows = []
for m in ms:
    rows += [(HOSTILE, m), (HOSTILE_B, m), (None, m), (None, m)]
comps = ["```python\n" + h + "\n```" if h else canon for h, m in rows]
t = time.time()
gs = grader.grade_batch([p] * len(rows), comps, [m for h, m in rows], workers=3, progress=False)
print("batch %.1f s" % (time.time() - t))
alone = {m: grader.grade(p, canon, m) for m in ms}
key = lambda g: (g.gt_pass, g.flawed_pass, g.hacked, g.hacked_strict, g.error, g.tests_passed, g.reward, g.defined_run_tests, g.exited_early, g.printed_marker)
for (h, m), g in zip(rows, gs):
    tag = "HOSTILE_A" if h is HOSTILE else "HOSTILE_B" if h else "canon"
    same = "" if h else ("same as alone" if key(g) == key(alone[m]) else f"DIFFERS from alone {key(alone[m])}")
    print(m, tag, key(g), "cpu_s", g.cpu_s, same)
