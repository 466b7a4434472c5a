"""Scan humaneval, easy and test_medhard for the round-6 leaking shapes (trace6.py) and count what a whitelist rule
would refuse. Categories (a test may be in several):
 outside_assert: the entry name is read outside every assert's condition (alias g = f, s = Solution(), a helper def
   or lambda calling it, for/match/try/with driven by an answer kept in a variable)
 in_def_lambda: the entry name inside a def or lambda of the test;  in_comprehension: inside a comprehension/genexp
 multi_in_assert: one assert's condition reads the entry name twice or more (an exception between the calls)
 walrus: a := anywhere;  match/try/with: statements of those kinds;  in_generator: `x in <genexp>`
 attr_call_in_assert: an assert's condition calls a method of a name the test binds (state the condition may change)
RULE (proposed whitelist): every read of the entry name is in an assert's condition (or is the callee of a statement
`v = E(...)` whose v is read only in assert conditions), at most one per condition unless the condition is
`W(E(..)) == W(E(..))` (W: tuple/list/sorted/set/str/len or nothing), not in a def, lambda or comprehension; no := in the test; no def/lambda/class in the test; an assert's condition calls no
method of a name the test binds. Prints per source: tests, per-category counts, examples, and RULE refusals."""
import ast, collections
from vgrout.substrate import problems, easy, grader
COMPS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
def parents(tree):
    par = {}
    for n in ast.walk(tree):
        for c in ast.iter_child_nodes(n): par[c] = n
    return par
WRAP = {"tuple", "list", "sorted", "set", "str", "len", "frozenset"}
def plain_call(node, entry):
    """E(args) or Solution().m(args), optionally inside one of WRAP(...), args free of the entry name."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in WRAP and len(node.args) == 1:
        node = node.args[0]
    if not isinstance(node, ast.Call): return False
    f = node.func
    if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Call): f = f.value.func
    return isinstance(f, ast.Name) and f.id == entry and not any(isinstance(m, ast.Name) and m.id == entry for a in node.args + [k.value for k in node.keywords] for m in ast.walk(a))
def cats(entry, test):
    tree = ast.parse(test); par = parents(tree); out = set()
    imported = {(a.asname or a.name).split(".")[0] for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom)) for a in n.names}
    bound = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)}
    bound |= {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    # answer variables: `v = E(...)` statements (a simple name target) whose v is read only in assert conditions
    keep = {}
    for n in ast.walk(tree):
        if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name) and isinstance(n.value, ast.Call) \
                and any(isinstance(m, ast.Name) and m.id == entry for m in ast.walk(n.value.func)):
            keep[n.value] = n.targets[0].id
    for v in set(keep.values()):
        for m in ast.walk(tree):
            if isinstance(m, ast.Name) and m.id == v and isinstance(m.ctx, ast.Load):
                a = m
                while a in par and not isinstance(a, ast.Assert): a = par[a]
                if not isinstance(a, ast.Assert): keep = {k: x for k, x in keep.items() if x != v}; out.add("answer_var_outside_assert")
    for n in ast.walk(tree):
        if isinstance(n, ast.NamedExpr): out.add("walrus")
        if isinstance(n, ast.Match): out.add("match")
        if isinstance(n, ast.Try): out.add("try")
        if isinstance(n, ast.With): out.add("with")
        if isinstance(n, (ast.FunctionDef, ast.Lambda, ast.ClassDef, ast.AsyncFunctionDef)): out.add("defines")
        if isinstance(n, ast.Compare) and any(isinstance(o, (ast.In, ast.NotIn)) for o in n.ops) and any(isinstance(c, ast.GeneratorExp) for c in n.comparators): out.add("in_generator")
        if isinstance(n, ast.Assert):
            refs = [m for m in ast.walk(n.test) if isinstance(m, ast.Name) and m.id == entry]
            ok_pair = (isinstance(n.test, ast.Compare) and len(n.test.ops) == 1 and isinstance(n.test.ops[0], ast.Eq)
                       and all(plain_call(side, entry) for side in (n.test.left, n.test.comparators[0])))
            if len(refs) > 1 and not ok_pair: out.add("multi_in_assert")
            if any(isinstance(m, ast.Call) and isinstance(m.func, ast.Attribute) and isinstance(m.func.value, ast.Name) and m.func.value.id in bound - imported for m in ast.walk(n.test)):
                out.add("attr_call_in_assert")
        if isinstance(n, ast.Name) and n.id == entry:
            a, in_assert = n, False
            while a in par:
                a = par[a]
                if isinstance(a, (ast.FunctionDef, ast.Lambda, ast.AsyncFunctionDef)): out.add("in_def_lambda")
                if isinstance(a, COMPS): out.add("in_comprehension")
                if isinstance(a, ast.Assert) or a in keep: in_assert = True
            if not in_assert: out.add("outside_assert")
    rule = bool(out & {"answer_var_outside_assert", "outside_assert", "in_def_lambda", "in_comprehension", "multi_in_assert", "walrus", "defines", "attr_call_in_assert"})
    return out, rule
for name, ps in {"humaneval": problems.humaneval_problems(), "easy": easy.easy_problems(),
                 "test_medhard": problems.load_any('../shared/data/leetcode/leetcode_test_medhard.jsonl.gz')}.items():
    c = collections.Counter(); ex = {}; n = refused = cur = 0; shapes = collections.Counter()
    for p in ps:
        entry = grader._entry_name(p)
        for t in dict.fromkeys(p.tests + [s for s in (p.shown_tests or []) if s not in p.tests]):
            n += 1; out, rule = cats(entry, t); shapes[grader.test_shape(t)] += 1
            cur += grader._test_refusal(entry, t) is not None
            for k in out:
                c[k] += 1; ex.setdefault(k, (p.id, t[:120]))
            if rule: refused += 1; ex.setdefault("RULE", (p.id, t[:160]))
    print(f"{name}: {n} tests {dict(shapes)}; refused now {cur}; categories {dict(c)}; RULE refuses {refused}")
    for k, v in ex.items(): print("   e.g.", k, v)

import importlib.util, sys
spec = importlib.util.spec_from_file_location("t6", "docs/redteam/rev6/trace6.py")
src = open("docs/redteam/rev6/trace6.py").read(); S = {}
exec(src[src.index("P = "):src.index("only = ")], {"S": S}, l := {}); S = l["S"]
OPEN = {"open: variable into if-raise": "r = is_multiple(7)\nif r != False:\n    raise ValueError\nassert is_multiple(0)",
        "open: index with answer": "x = [0][is_multiple(7) != False]\nassert is_multiple(0)",
        "open: loop if-break": "for x, y in [(7, False), (0, True)]:\n    r = is_multiple(x)\n    if r != y:\n        break",
        "remote answer's methods in one assert": "assert check(Solution().make(1))",
        "assert mutating test state": "seen = []\nassert seen.append(is_multiple(7) == False) is None\nfor _ in seen * seen[0]:\n    assert is_multiple(0)"}
for k, t in {**S, **OPEN}.items():
    entry = "Solution" if "Solution" in t else "is_multiple"
    print(f"RULE on {k!r}: {'refused' if cats(entry, t)[1] else 'ALLOWED'}")
