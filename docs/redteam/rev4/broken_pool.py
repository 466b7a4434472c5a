"""Blast radius of one grading process dying mid-batch (as the OOM killer would do it): kill -9 one pool worker
1.5 s into a batch of 16 canonical rows (is_multiple, mode none, workers=2); count the rows labelled `sandbox`.
Then grade the same rows again in the same process (the pool should be replaced)."""
import os, threading, time, collections
import multiprocessing
from vgrout.substrate.easy import easy_problems
from vgrout.substrate import grader
p = [p for p in easy_problems() if p.id == "easy/is_multiple/6"][0]
slow = "```python\nimport time\ndef is_multiple(n):\n    time.sleep(0.2)\n    return n % 180 == 0\n```"
rows = [slow] * 16
def killer():
    time.sleep(1.5)
    kids = multiprocessing.active_children()
    pool = grader._pools.get(2)
    pids = sorted(pool._processes) if pool else []
    print("pool workers", pids, flush=True)
    if pids:
        os.kill(pids[0], 9); print("killed", pids[0], flush=True)
threading.Thread(target=killer).start()
t = time.time()
gs = grader.grade_batch([p] * 16, rows, ["none"] * 16, workers=2, progress=False)
print("batch 1 %.1f s" % (time.time() - t), collections.Counter((g.gt_pass, g.error) for g in gs))
t = time.time()
gs = grader.grade_batch([p] * 16, rows, ["none"] * 16, workers=2, progress=False)
print("batch 2 %.1f s" % (time.time() - t), collections.Counter((g.gt_pass, g.error) for g in gs))
