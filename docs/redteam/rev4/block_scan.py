"""Hidden tests that hold more than one assert, or an assert inside a loop (the request pattern after a failed assert
differs from after a passed one): per problem source."""
import ast, sys, collections, glob
from vgrout.substrate import problems as P
def multi(t):
    tree = ast.parse(t)
    n = sum(isinstance(x, ast.Assert) for x in ast.walk(tree))
    loop = any(isinstance(x, (ast.For, ast.While, ast.ListComp, ast.GeneratorExp)) and any(isinstance(y, ast.Assert) for y in ast.walk(x)) for x in ast.walk(tree))
    return n > 1 or loop
def report(label, ps):
    k = [p for p in ps if any(multi(t) for t in p.tests)]
    print(f"{label}: {len(ps)} problems, {len(k)} with a multi-assert/loop test", [p.id for p in k[:6]])
try:
    report("humaneval", P.humaneval_problems())
except Exception as e:
    print("humaneval: not loadable here:", type(e).__name__, str(e)[:200])
for f in sorted(glob.glob("../shared/data/leetcode/LeetCodeDataset*.jsonl.gz")):
    try:
        report(f.split("/")[-1], P.leetcodedataset_problems([f])[0])
    except Exception as e:
        print(f, "error", type(e).__name__, str(e)[:200])
from vgrout.substrate.easy import easy_problems
report("easy", easy_problems())
