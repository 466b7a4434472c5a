"""`memory` label when the response's main process is the OOM victim of its run's memory cgroup (main 900 MiB,
child 400 MiB: sum over the run's bound ~1.1 GiB), in modes none and exit_code."""
from vgrout.substrate.easy import easy_problems
from vgrout.substrate import grader
p = [p for p in easy_problems() if p.id == "easy/is_multiple/6"][0]
OOM = '''import os, time
if os.fork() == 0:
    c = bytearray(400 << 20)
    for j in range(0, len(c), 4096): c[j] = 1
    time.sleep(8); os._exit(0)
time.sleep(1)
b = bytearray(900 << 20)
for j in range(0, len(b), 4096): b[j] = 1
def is_multiple(n):
    return n % 180 == 0'''
gs = grader.grade_batch([p] * 2, ["```python\n" + OOM + "\n```"] * 2, ["none", "exit_code"], workers=2, progress=False)
for m, g in zip(["none", "exit_code"], gs):
    print(m, "gt", g.gt_pass, "error", g.error, "cpu_s", g.cpu_s)
