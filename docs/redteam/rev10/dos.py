"""rev10 DoS: a row that waits until its wall backstop is graded twice (once in the batch, once alone after it,
serially). Usage: dos.py N WORKERS. Limits(cpu_s=1): backstop 3*1+5 = 8 s. One honest row (3472 canonical,
limit 4 s via the problem... no: ADD-like cheap problem = 3472 canonical with cpu_s from problem) + N sleepers."""
import sys, time, os
from vgrout.substrate import grader, problems, sandbox
ps = {p.id: p for p in problems.load_any("../shared/data/leetcode/leetcode_test_medhard.jsonl.gz")}
N, W = int(sys.argv[1]), int(sys.argv[2]) or None
P = ps["3472"]
canon = "```python\n" + P.canonical_solution + "\n```"
lim = sandbox.Limits(cpu_s=1)
kinds = {"sleep": "import time\ntime.sleep(1000)\n",
         "event": "import threading\nthreading.Event().wait()\n",
         "stdin": "import sys\nsys.stdin.read()\nimport time\ntime.sleep(1000)\n",
         "input": "x = input()\n"}
_orig = grader._grade_rows
calls = []
def _logged(rows, idx, workers, bar):
    t = time.time(); r = _orig(rows, idx, workers, bar); calls.append((list(idx), round(time.time() - t, 1))); return r
grader._grade_rows = _logged
print("wall backstop", lim.with_cpu(P.cpu_limit_s).wall, "load", os.getloadavg(), flush=True)
for kind in sys.argv[3:]:
    comps = [canon] + ["```python\n" + kinds[kind] + "```"] * N
    calls.clear(); t = time.time()
    out = grader.grade_batch([P] * (N + 1), comps, workers=W, progress=False, limits=lim)
    wall = time.time() - t
    print(f"{kind} N={N} workers={W}: batch wall {wall:.1f}s; _grade_rows calls (rows, s): {calls}", flush=True)
    print("   labels:", [(g.gt_pass, g.error) for g in out], flush=True)
