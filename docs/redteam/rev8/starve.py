"""DISTURB probe: a hostile completion that forks 60 CPU-bound processes, each in a session of its own (os.setsid: with sched_autogroup each session is one CFS group, so 60 sessions outweigh the neighbour's one) (each sandbox may hold nproc=64) takes
nearly all of the host's CPU for its whole CPU limit (4 s here, counted over all its processes), and the next
hostile grading in the other worker does the same. A neighbour's canonical solution then gets ~1/60 of the
CPU: its CPU seconds do not change, but its wall-clock backstop (3*cpu_s+5 = 17 s) does not care.
Labels: the neighbour alone, then beside N hostile copies (grade_batch, 2 workers)."""
import sys, time
from vgrout.substrate import grader, problems

ps = {p.id: p for p in problems.load_any("../shared/data/leetcode/leetcode_test_medhard.jsonl.gz")}
pid = sys.argv[1] if len(sys.argv) > 1 else "3474"
N = int(sys.argv[2]) if len(sys.argv) > 2 else 8
AT = int(sys.argv[3]) if len(sys.argv) > 3 else 0  # the neighbour's place in the batch
P = ps[pid]
if len(sys.argv) > 4:  # the calibrated limit selfcheck.calibrate gives: max(4, CPU_FACTOR 5 x canonical CPU)
    import dataclasses; P = dataclasses.replace(P, cpu_limit_s=float(sys.argv[4]))
print("problem", pid, "cpu_limit_s", P.cpu_limit_s, flush=True)
canon = "```python\n" + P.canonical_solution + "\n```"
import os as _os
HOSTILE = ("```python\nimport os\nfor i in range(60):\n    if os.fork() == 0:\n        os.setsid()\n        while True:\n            pass\n"
           "while True:\n    pass\n```")
if _os.environ.get("NOSETSID"):  # the control: the same spinners in the sandbox's one session
    HOSTILE = HOSTILE.replace("        os.setsid()\n", "")
print("hostile setsid:", "os.setsid()" in HOSTILE, flush=True)

def show(tag, g, t):
    print(f"{tag}: gt_pass={g.gt_pass} error={g.error} tests={g.tests_passed}/{g.tests_total} cpu_s={g.cpu_s} "
          f"(batch wall {t:.1f}s)", flush=True)

t = time.time(); (alone,) = grader.grade_batch([P], [canon], workers=2, progress=False); show("alone", alone, time.time() - t)
t = time.time()
comps = [HOSTILE] * N; comps.insert(AT, canon)
out = grader.grade_batch([P] * (N + 1), comps, workers=2, progress=False)
show(f"beside {N} hostile (at {AT})", out[AT], time.time() - t)
print("hostile labels:", sorted({(g.gt_pass, g.error) for i, g in enumerate(out) if i != AT}))
t = time.time(); (again,) = grader.grade_batch([P], [canon], workers=2, progress=False); show("alone again", again, time.time() - t)
