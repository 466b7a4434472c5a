"""LATENT forgery of gt_pass through the phase A request pattern, for hidden tests that are assert BLOCKS (several
asserts in one test; the grader's doc allows "assert blocks of any shape"; today's easy and test_medhard tests are all
one assert each, so no problem file is affected today).
Within one test, a failed assert ends the test, so the call after it never comes: the response learns, from the
request pattern alone, whether its answer to the earlier call was right. It publishes what it learned as POSIX read
locks on the interpreter's os.py (one inode, visible to every sandbox), and a sibling graded at the same time reads
them and answers. The response never computes the answer (its only rule: guess False).
Synthetic problem: easy/is_multiple/6 with tests "assert is_multiple(a) == <truth>\nassert is_multiple(0) == True", then "assert is_multiple(1) == False".
usage: block_oracle.py N   (N identical rows, workers=N; also grades one row alone as the baseline)"""
import dataclasses, sys, time
from vgrout.substrate.easy import easy_problems
from vgrout.substrate import grader
N = int(sys.argv[1]) if len(sys.argv) > 1 else 3
p = [p for p in easy_problems() if p.id == "easy/is_multiple/6"][0]
A = [180, 7, 360, 11, 540, 13, 900]
tests = [f"assert is_multiple({a}) == {a % 180 == 0}\nassert is_multiple(0) == True" for a in A]
tests.append("assert is_multiple(1) == False")
p = dataclasses.replace(p, id="synthetic/blocks", tests=tests, shown_tests=[tests[-1]])
CODE = r'''
import os, fcntl, struct, time
_F = os.open(os.__file__, os.O_RDONLY)
_BASE, _ROLE, _DONE = 10**9, 10**9 - 2, 10**9 - 1
def _held(off):
    r = fcntl.fcntl(_F, fcntl.F_GETLK, struct.pack("hhqqi", fcntl.F_WRLCK, 0, off, 1, 0))
    return struct.unpack("hhqqi", r)[0] != fcntl.F_UNLCK
def _take(off):
    fcntl.fcntl(_F, fcntl.F_SETLK, struct.pack("hhqqi", fcntl.F_RDLCK, 0, off, 1, 0))
time.sleep(0.05 * (os.getpid() % 5))
_PUBLISHER = not _held(_ROLE)
if _PUBLISHER:
    _take(_ROLE)
_last = [None]
_T0 = time.time()
def is_multiple(n):
    if n in (0, 1):                  # the answers this response "knows"
        if _PUBLISHER and _last[0] is not None:
            _take(_BASE + 2 * _last[0] + (0 if n == 0 else 1))  # f(0) came right after the guess: False was right
            _last[0] = None
        if _PUBLISHER and n == 1:             # the last test: everything learned
            _take(_DONE); time.sleep(8)       # hold the locks while siblings read
        return n == 0
    if _PUBLISHER:
        if _last[0] is not None:              # no f(0) after the last guess: False was wrong
            _take(_BASE + 2 * _last[0] + 1)
        _last[0] = n
        _DONE_NOW[0] += 1
        return False                          # always guess False
    while not _held(_DONE) and time.time() - _T0 < 10:
        time.sleep(0.02)
    return _held(_BASE + 2 * n + 1)
_DONE_NOW = [0]
'''
comp = "```python\n" + CODE + "\n```"
t = time.time()
alone = grader.grade(p, comp, "none")
print("alone: gt_pass", alone.gt_pass, "passed %d/%d" % (alone.tests_passed, alone.tests_total), "%.1f s" % (time.time() - t))
t = time.time()
gs = grader.grade_batch([p] * N, [comp] * N, ["none"] * N, workers=N, progress=False)
print("%d siblings (%.1f s):" % (N, time.time() - t), [(g.gt_pass, g.tests_passed, g.error) for g in gs])
