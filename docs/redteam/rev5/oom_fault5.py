"""Does a hostile row that fills memory by PAGE FAULTS (memfd pages touched through a small mmap window, then
unmapped: charged to the run, but not in the process's RSS, so not in its OOM badness) make the OOM killer of a
memory cgroup ABOVE the runs (their sum is not bounded) take a NEIGHBOUR's sandbox instead? Run inside a v1 memcg child
with memory.limit_in_bytes = memory.memsw.limit_in_bytes = 2 GiB (commands as in oom_sum5.py). H hostile + 8-H canonical."""
import sys, time
from vgrout.substrate.easy import easy_problems
from vgrout.substrate import grader
H = int(sys.argv[1])
p = [p for p in easy_problems() if p.id == "easy/is_multiple/6"][0]
HOSTILE = '''
import os, time, mmap
time.sleep(0.5)
for k in range(4):
    if os.fork() == 0:
        fds = []
        try:
            for i in range(58):
                fd = os.memfd_create("m"); os.ftruncate(fd, (4 << 20) - 4096); fds.append(fd)
                m = mmap.mmap(fd, (4 << 20) - 4096)
                for j in range(0, (4 << 20) - 4096, 4096): m[j] = 1
                m.close()
        except OSError:
            pass
        time.sleep(20); os._exit(0)
time.sleep(4)
def is_multiple(n):
    return n % 180 == 0
'''
canon = "```python\nimport time\n" + p.canonical_solution.replace("def is_multiple(n):", "def is_multiple(n):\n    time.sleep(0.4)") + "\n```"
rows = ["```python\n" + HOSTILE + "\n```"] * H + [canon] * (8 - H)
t = time.time()
gs = grader.grade_batch([p] * len(rows), rows, ["none"] * len(rows), workers=4, progress=False)
print("H", H, "returned after %.1f s" % (time.time() - t), [(g.gt_pass, g.error) for g in gs], flush=True)
