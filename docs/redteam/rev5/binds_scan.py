"""Tests that bind the entry point's name themselves (any Store/Del of it, a def/class/import of it, a for target):
_compile_test then runs the WHOLE test on trusted names (no request to the sandbox): such a test passes for any
response if it calls the canonical entry. Counts per source, and grades a constant-wrong response on a synthetic one."""
import ast, dataclasses
from vgrout.substrate import problems, easy, grader
def binds(entry, test):
    for n in ast.walk(ast.parse(test)):
        if isinstance(n, ast.Name) and n.id == entry and not isinstance(n.ctx, ast.Load): return True
        if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name == entry: return True
        if isinstance(n, ast.alias) and (n.asname or n.name) == entry: return True
    return False
for name, ps in {"humaneval": problems.humaneval_problems(), "easy": easy.easy_problems(),
                 "medhard": problems.load_any('../shared/data/leetcode/leetcode_test_medhard.jsonl.gz')}.items():
    hits = [(p.id, t[:100]) for p in ps for t in p.tests if binds(grader._entry_name(p), t)]
    print(name, "tests binding the entry name:", len(hits), hits[:3])
p = [p for p in easy.easy_problems() if p.id == "easy/is_multiple/6"][0]
for shape in ["for is_multiple in [is_multiple]:\n    assert is_multiple(7) == False",
              "assert (is_multiple := is_multiple)(7) == False",
              "def g(is_multiple=None):\n    return 1\nassert is_multiple(7) == False",
              "assert [is_multiple for is_multiple in [is_multiple]][0](7) == False"]:
    q = dataclasses.replace(p, id="synthetic/binds", tests=[shape], shown_tests=[shape])
    g = grader.grade(q, "```python\ndef is_multiple(n):\n    return True\n```", "none")
    print(repr(shape[:60]), "-> wrong response gt_pass", g.gt_pass, g.error)
