"""Which hidden tests still have control flow (not an assert) that decides whether a later call of the response comes:
a BoolOp (and/or), a chained comparison, IfExp, if/while, comprehension ifs, all()/any(), break/return/raise, whose
governed part calls the entry point. Prints counts per source and example ids/tests."""
import ast, sys, collections
from vgrout.substrate import problems, easy, grader
def risky(entry, test):
    tree = ast.parse(test); why = set()
    def calls_entry(n):
        return any(isinstance(m, ast.Name) and m.id == entry for m in ast.walk(n))
    for n in ast.walk(tree):
        if isinstance(n, ast.BoolOp) and any(calls_entry(v) for v in n.values[1:]): why.add("boolop")
        if isinstance(n, ast.Compare) and len(n.ops) > 1 and any(calls_entry(c) for c in n.comparators[1:]): why.add("chain")
        if isinstance(n, ast.IfExp) and (calls_entry(n.body) or calls_entry(n.orelse)): why.add("ifexp")
        if isinstance(n, (ast.If, ast.While)) and calls_entry(n.test) and any(calls_entry(b) for b in n.body + n.orelse): why.add("if/while")
        if isinstance(n, (ast.If, ast.While)) and any(isinstance(m, (ast.Break, ast.Return, ast.Raise, ast.Continue)) for b in n.body for m in ast.walk(b)) and calls_entry(tree): why.add("if-jump")
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in ("all", "any") and calls_entry(n): why.add("all/any")
        if isinstance(n, ast.comprehension) and n.ifs and calls_entry(n.ifs[0]): why.add("comp-if")
    return why
srcs = {"humaneval": problems.humaneval_problems(), "easy": easy.easy_problems(),
        "medhard": problems.load_any('../shared/data/leetcode/leetcode_test_medhard.jsonl.gz')}
for name, ps in srcs.items():
    c = collections.Counter(); ex = []
    for p in ps:
        entry = grader._entry_name(p); hit = set()
        for t in p.tests:
            w = risky(entry, t)
            if w: hit |= w; ex.append((p.id, sorted(w), t[:160].replace("\n", " | ")))
        for w in hit: c[w] += 1
    print(name, len(ps), "problems; problems with each shape:", dict(c), "tests:", len(ex))
    for e in ex[:6]: print("   ", e)
