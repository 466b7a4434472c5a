"""rev10 DISTURB probes on grader round 9 (7ab4534). Usage:
disturb10.py PROBLEM N AT WORKERS(0=default) CPU_S(0=problem's) VARIANT [VARIANT...]
Neighbour (canonical) alone, then beside N hostile copies (grade_batch), neighbour at position AT. Logs which rows
grade_batch re-grades alone (round 9's `again`)."""
import sys, time, os
from vgrout.substrate import grader, problems, sandbox
ps = {p.id: p for p in problems.load_any("../shared/data/leetcode/leetcode_test_medhard.jsonl.gz")}
pid, N, AT, W, CPU = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]) or None, float(sys.argv[5])
P = H = ps[pid]  # H: the hostiles' problem (its own limit, default 4 s)
if CPU:
    import dataclasses; P = dataclasses.replace(P, cpu_limit_s=CPU)
canon = "```python\n" + P.canonical_solution + "\n```"
exec(open(os.path.join(os.path.dirname(__file__), "disturb_variants.py")).read())
exec(open(os.path.join(os.path.dirname(__file__), "variants10.py")).read())
_orig = grader._grade_rows
calls = []
def _logged(rows, idx, workers, bar):
    calls.append(list(idx)); return _orig(rows, idx, workers, bar)
grader._grade_rows = _logged
def show(tag, g, t):
    print(f"{tag}: gt_pass={g.gt_pass} error={g.error} tests={g.tests_passed}/{g.tests_total} cpu_s={g.cpu_s} "
          f"(batch wall {t:.1f}s) regraded={calls[1:]}", flush=True)
def alone(tag):
    calls.clear(); t = time.time(); (g,) = grader.grade_batch([P], [canon], workers=W, progress=False); show(tag, g, time.time() - t)
print("problem", pid, "cpu_limit_s", P.cpu_limit_s, "N", N, "AT", AT, "workers", W, "load", os.getloadavg(), flush=True)
alone("alone")
for v in sys.argv[6:]:
    comps = ["```python\n" + V[v] + "```"] * N; comps.insert(AT, canon)
    calls.clear(); t = time.time(); out = grader.grade_batch([H] * AT + [P] + [H] * (N - AT), comps, workers=W, progress=False)
    show(f"beside {N} {v}", out[AT], time.time() - t)
    print(f"  {v} hostile labels:", sorted({(g.gt_pass, g.error, g.cpu_s and round(g.cpu_s, 1)) for i, g in enumerate(out) if i != AT}), flush=True)
    alone("alone")
