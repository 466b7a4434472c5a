"""The neighbour's own wall time (margin to its 17 s backstop), alone and beside a hostile variant.
A background thread grades N copies of the variant one after another (grade_batch, workers=1); the main
thread grades the canonical with grader.grade (trusted side in this thread) K times, timing each.
Usage: wall.py PROBLEM K VARIANT [VARIANT...]  (variant 'none' = alone)"""
import sys, time, threading, importlib.util
from vgrout.substrate import grader, problems
spec = importlib.util.spec_from_file_location("d", "docs/redteam/rev9/disturb_variants.py"); d = importlib.util.module_from_spec(spec); spec.loader.exec_module(d)
ps = {p.id: p for p in problems.load_any("../shared/data/leetcode/leetcode_test_medhard.jsonl.gz")}
P = ps[sys.argv[1]]; K = int(sys.argv[2])
canon = "```python\n" + P.canonical_solution + "\n```"
for v in sys.argv[3:]:
    stop = threading.Event()
    def bg():
        while not stop.is_set():
            grader.grade_batch([P], ["```python\n" + d.V[v] + "```"], workers=1, progress=False)
    th = None
    if v != "none":
        th = threading.Thread(target=bg, daemon=True); th.start(); time.sleep(1.0)
    rows = []
    for k in range(K):
        t = time.time(); g = grader.grade(P, canon); w = time.time() - t
        rows.append(f"{g.gt_pass}/{g.error}/{g.tests_passed} cpu={g.cpu_s:.2f} wall={w:.2f}")
    stop.set()
    print(f"{v}: " + " | ".join(rows), flush=True)
    if th: th.join()
