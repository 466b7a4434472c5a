"""Round-4 oom_sum under a894206 (RLIMIT_NOFILE 64 caps one process at ~60 memfds x 4 MiB (RLIMIT_FSIZE), so the
hostile row forks 4 children holding 240 MiB of unmapped memfds each: 960 MiB, under its run's own 1.13 GiB).
Run INSIDE a v1 memory cgroup child with limit 2 GiB (as in docs/redteam/rev4/oom_sum.py):
  C=/sys/fs/cgroup/memory$(grep memory: /proc/self/cgroup | cut -d: -f3)/rev5; mkdir -p $C; echo $((2<<30)) > $C/memory.limit_in_bytes
  sh -c "echo \$\$ > $C/cgroup.procs && exec nice -n 19 env PYTHONPATH=. python docs/redteam/rev5/oom_sum5.py H"
H hostile rows beside 8 - H canonical, workers=4: does the caller survive, and which rows lose (neighbours?)"""
import sys, time
from vgrout.substrate.easy import easy_problems
from vgrout.substrate import grader
H = int(sys.argv[1])
p = [p for p in easy_problems() if p.id == "easy/is_multiple/6"][0]
HOSTILE = '''
import os, time
for k in range(4):
    if os.fork() == 0:
        fds = []
        try:
            for i in range(60):
                fd = os.memfd_create("m"); os.write(fd, b"x" * ((4 << 20) - 4096)); fds.append(fd)
        except OSError:
            pass
        time.sleep(20); os._exit(0)
time.sleep(3)
def is_multiple(n):
    time.sleep(0.5)
    return n % 180 == 0
'''
canon = "```python\nimport time\n" + p.canonical_solution.replace("def is_multiple(n):", "def is_multiple(n):\n    time.sleep(0.3)") + "\n```"
rows = ["```python\n" + HOSTILE + "\n```"] * H + [canon] * (8 - H)
t = time.time()
gs = grader.grade_batch([p] * len(rows), rows, ["none"] * len(rows), workers=4, progress=False)
print("H", H, "returned after %.1f s" % (time.time() - t), [(g.gt_pass, g.error) for g in gs], flush=True)
