"""Every canonical solution (as a ```python block) under every mode: rows not gt_pass or with an error must be 0.
usage: canon_all.py easy|medhard [workers]"""
import sys, time, collections
from vgrout.substrate import problems, easy, grader
from vgrout.substrate import modes as _modes
src = sys.argv[1]; W = int(sys.argv[2]) if len(sys.argv) > 2 else 4
ps = easy.easy_problems() if src == "easy" else problems.load_any('../shared/data/leetcode/leetcode_test_medhard.jsonl.gz')
ms = list(_modes.names())
P, C, M = [], [], []
for p in ps:
    for m in ms:
        P.append(p); C.append("```python\n" + p.canonical_solution + "\n```"); M.append(m)
t = time.time()
gs = grader.grade_batch(P, C, M, workers=W, progress=False)
bad = [(p.id, m, g.gt_pass, g.error, g.tests_passed, g.tests_total) for p, m, g in zip(P, M, gs) if not g.gt_pass or g.error]
print(src, "rows", len(gs), "bad", len(bad), "modes", ms, "%.0f s" % (time.time() - t))
for b in bad[:30]: print("  ", b)
print(collections.Counter((b[1], b[3]) for b in bad))
