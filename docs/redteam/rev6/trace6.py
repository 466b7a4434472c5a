"""Round-6 shapes vs _test_refusal at 6b50c5e. For each shape (synthetic tests on easy/is_multiple/6, pairs (7,False),
(0,True)): is it refused at prepare (_test_refusal)? If not, grade two responses (is_multiple always True / always
False: the first is wrong on 7, the second right) and compare the requests the grader sent (recorded by wrapping
_Referee.ask). 'LEAKS' = not refused and the request sequences differ, i.e. whether a later call comes tells the
sandbox whether its earlier answer was right."""
import dataclasses, sys
from vgrout.substrate.easy import easy_problems
from vgrout.substrate import grader
p = [p for p in easy_problems() if p.id == "easy/is_multiple/6"][0]
log = []
orig = grader._Referee.ask
def ask(self, req):
    log.append(repr(req)); return orig(self, req)
grader._Referee.ask = ask
P = "[(7, False), (0, True)]"
S = {
 "alias and": "g = is_multiple\nassert g(7) == False and g(0) == True",
 "helper def and": "def c(x, y):\n    return is_multiple(x) == y\nassert c(7, False) and c(0, True)",
 "lambda and": "c = lambda x, y: is_multiple(x) == y\nassert c(7, False) and c(0, True)",
 "generator def + all": f"def g():\n    for x, y in {P}:\n        yield is_multiple(x) == y\nassert all(g())",
 "`in` on a generator": f"assert False not in (is_multiple(x) == y for x, y in {P})",
 "builtins.all": f"import builtins\nassert builtins.all(is_multiple(x) == y for x, y in {P})",
 "all aliased": f"a = all\nassert a(is_multiple(x) == y for x, y in {P})",
 "for over range(answer)": "for _ in range(is_multiple(7) == False):\n    assert is_multiple(0) == True",
 "comprehension over range(answer)": "assert [is_multiple(0) for _ in range(is_multiple(7) == False)] == [True]",
 "walrus in assert + for": "assert (r := is_multiple(7)) == False\nfor _ in range(r == False):\n    assert is_multiple(0) == True",
 "match": "match is_multiple(7):\n    case False:\n        assert is_multiple(0) == True\n    case _:\n        assert False",
 "itertools.takewhile": f"import itertools\nassert len(list(itertools.takewhile(lambda p: is_multiple(p[0]) == p[1], {P}))) == 2",
 "next(filter(lambda))": f"assert next(filter(lambda p: is_multiple(p[0]) != p[1], {P}), None) is None",
 "zip stops at shortest": "assert len(list(zip(range(is_multiple(7) == False), map(is_multiple, [0])))) == 1",
 "exception inside one assert": "assert ({False: 0}[is_multiple(7)], is_multiple(0)) == (0, True)",
 "list.index inside one assert": "assert [False].index(is_multiple(7)) + is_multiple(0) == 1",
 "try/except around calls": "try:\n    {False: 0}[is_multiple(7)]\n    r = is_multiple(0)\nexcept KeyError:\n    r = None\nassert r == True",
 "with suppress": "import contextlib\nwith contextlib.suppress(KeyError):\n    {False: 0}[is_multiple(7)]\n    assert is_multiple(0) == True",
 "loop try/except break": f"for x, y in {P}:\n    try:\n        {{y: 0}}[is_multiple(x)]\n    except KeyError:\n        break",
 "helper def with if-return": "def c(x, y):\n    if is_multiple(x) != y:\n        return False\n    return True\nassert c(7, False) and c(0, True)",
 "comparison raising TypeError": "assert (is_multiple(7) < 'a', is_multiple(0)) == (1, True)",
 "assert message (side effect)": "assert is_multiple(7) == False, is_multiple(0)\nassert True",
 "f-string": "assert f'{is_multiple(7)}{is_multiple(0)}' == 'FalseTrue'",
 "except AssertionError": "try:\n    assert is_multiple(7) == False\nexcept AssertionError:\n    is_multiple(1)\nassert is_multiple(0)",
 "sum(generator)": f"assert sum(is_multiple(x) == y for x, y in {P}) == 2",
 "control: and (round 5)": "assert is_multiple(7) == False and is_multiple(0) == True",
}
only = sys.argv[1:]
for name, t in S.items():
    if only and name not in only: continue
    why = grader._test_refusal("is_multiple", t)
    if why:
        print(f"{name:34s} REFUSED"); continue
    q = dataclasses.replace(p, id="synthetic/trace", tests=[t], shown_tests=[t])
    seqs = []
    for v in (True, False):
        log.clear()
        g = grader.grade(q, f"```python\ndef is_multiple(n):\n    return {v}\n```", "none")
        seqs.append((list(log), g.gt_pass))
    leak = seqs[0][0] != seqs[1][0]
    print(f"{name:34s} {'LEAKS' if leak else 'same '} requests: wrong-answer {len(seqs[0][0])} / right-answer {len(seqs[1][0])}")
