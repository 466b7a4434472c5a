"""Per-run memory cgroups bound each run, not their sum. Run INSIDE a v1 memory cgroup child of this session's own
(limit L, standing in for a trainer's cgroup or a host with less than workers x Limits.ram free):
  C=/sys/fs/cgroup/memory$(grep memory: /proc/self/cgroup | cut -d: -f3)/rev4; mkdir -p $C; echo $((L<<30)) > $C/memory.limit_in_bytes
  cd . && nice -n 19 sh -c "echo \$\$ > $C/cgroup.procs && exec .venv/bin/python docs/redteam/rev4/oom_sum.py H GB"
H hostile rows each holding GB GiB in unmapped memfds (under their own run limit, Limits().ram = 1.13 GiB), beside
8 - H canonical rows, workers=4. Expected of a bound that protects neighbours: hostile rows fail alone."""
import sys, time
from vgrout.substrate.easy import easy_problems
from vgrout.substrate import grader, sandbox
H = int(sys.argv[1]); GB_ = float(sys.argv[2])
p = [p for p in easy_problems() if p.id == "easy/is_multiple/6"][0]
HOSTILE = f'''
import os, time
_fds, _n, _chunk = [], 0, b"x" * ((4 << 20) - 4096)
while _n < {GB_} * (1 << 30):
    _fd = os.memfd_create("m"); os.write(_fd, _chunk); _fds.append(_fd); _n += len(_chunk)
def is_multiple(n):
    time.sleep(1)
    return n % 180 == 0
'''
canon = "```python\n" + p.canonical_solution + "\n```"
rows = ["```python\n" + HOSTILE + "\n```"] * H + [canon] * (8 - H)
print("grading", H, "hostile of", GB_, "GiB +", 8 - H, "canonical; run limit %.2f GiB" % (sandbox.Limits().ram / 2**30), flush=True)
t = time.time()
try:
    gs = grader.grade_batch([p] * len(rows), rows, ["none"] * len(rows), workers=4, progress=False)
    print("returned after %.1f s" % (time.time() - t), [(g.gt_pass, g.error) for g in gs], flush=True)
except BaseException as e:
    print("grade_batch raised after %.1f s: %s: %s" % (time.time() - t, type(e).__name__, e), flush=True)
