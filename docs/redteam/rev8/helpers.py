import collections, ast
from vgrout.substrate import problems
ps = problems.load_any("../shared/data/leetcode/leetcode_test_medhard.jsonl.gz")
print(len(ps), "problems")
setups = collections.Counter(p.setup_code for p in ps)
print(len(setups), "distinct setup codes")
for s, n in setups.most_common(3):
    print("=====", n); print(s[:6000])
calls = collections.Counter()
for p in ps:
    for t in p.tests:
        for n in ast.walk(ast.parse(t)):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name): calls[n.func.id] += 1
print(calls.most_common(40))
print(collections.Counter(p.mode for p in ps))
print(ps[0].entry_point, ps[0].tests[:2])
