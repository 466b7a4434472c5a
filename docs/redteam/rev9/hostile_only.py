import sys
from vgrout.substrate import grader, problems
exec(open("docs/redteam/rev9/disturb_variants.py").read())
ps = {p.id: p for p in problems.load_any("../shared/data/leetcode/leetcode_test_medhard.jsonl.gz")}
P = ps[sys.argv[1]]; v = sys.argv[2]; n = int(sys.argv[3])
out = grader.grade_batch([P] * n, ["```python\n" + V[v] + "```"] * n, workers=2, progress=False)
print(v, sorted({(g.gt_pass, g.error) for g in out}))
