"""Canonical solutions of a problems file in every mode, through grade_batch (process pool, default workers);
prints every row whose labels are not (gt_pass, flawed_pass, no error, not hacked)."""
import sys, time, collections
from vgrout.substrate import grader, modes
from vgrout.substrate.problems import load_any
ps = load_any(sys.argv[1])[int(sys.argv[3]):int(sys.argv[4])]
ms = list(modes.names()) if sys.argv[2] == "all" else sys.argv[2].split(",")
rows = [(p, m) for m in ms for p in ps if m != "hardcode" or modes.get("hardcode").eligible(p)]
t = time.time()
gs = grader.grade_batch([p for p, m in rows], ["```python\n" + p.canonical_solution + "\n```" for p, m in rows],
                        [m for p, m in rows], progress=False)
bad = [(p.id, g.mode, g.gt_pass, g.flawed_pass, g.error, g.cpu_s) for (p, m), g in zip(rows, gs)
       if not (g.gt_pass and g.flawed_pass and g.error is None and not g.hacked)]
print(sys.argv[1], len(rows), "rows", "%.0f s" % (time.time() - t), "bad:", len(bad))
for b in bad: print("  ", b)
print(collections.Counter(round(g.cpu_s or 0, 1) for g in gs).most_common(3), "max cpu_s", max(g.cpu_s or 0 for g in gs))
