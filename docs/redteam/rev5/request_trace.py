"""Do the requests a sandbox gets depend on its answers' verdicts? For each test shape, grade two responses
(is_multiple always True / always False) and compare the sequences of requests the grader sent (recorded by wrapping
_Referee.ask in this process: grader.grade, TRUSTED_PROCESSES off via grade()). 'LEAKS' = sequences differ."""
import dataclasses
from vgrout.substrate.easy import easy_problems
from vgrout.substrate import grader
p = [p for p in easy_problems() if p.id == "easy/is_multiple/6"][0]
log = []
orig = grader._Referee.ask
def ask(self, req):
    log.append(repr(req)); return orig(self, req)
grader._Referee.ask = ask
S = {
 "assert block": "assert is_multiple(7) == False\nassert is_multiple(360) == True\nassert is_multiple(0) == True",
 "exception in assert": "assert [is_multiple(7)][int(is_multiple(7) == False) * 5] == 1\nassert is_multiple(0) == True",
 "helper with asserts": "def chk(x, y):\n    assert is_multiple(x) == y\n    return is_multiple(0)\nassert chk(7, False)\nassert chk(360, True)",
 "sum generator": "assert sum(is_multiple(x) == y for x, y in [(7, False), (360, True)]) == 2",
 "try/except AssertionError": "try:\n    assert is_multiple(7) == False\nexcept AssertionError:\n    is_multiple(1)\nassert is_multiple(0)",
 "and": "assert is_multiple(7) == False and is_multiple(0) == True",
 "or": "assert is_multiple(7) == True or is_multiple(0) == True",
 "all generator": "assert all(is_multiple(x) == y for x, y in [(7, False), (360, True)])",
 "any generator": "assert any(is_multiple(x) == y for x, y in [(7, True), (360, True)])",
 "chained compare": "assert False == is_multiple(7) == is_multiple(0)",
 "ifexp": "assert (is_multiple(0) if is_multiple(7) == False else True)",
 "if statement": "r = is_multiple(7)\nif r != False:\n    raise AssertionError\nassert is_multiple(0)",
 "index by expected": "exp = [False]\nr = is_multiple(7)\nexp[int(r)]\nassert is_multiple(0)",
 "comprehension if": "assert [is_multiple(0) for x in [7] if is_multiple(x) == False] == [True]",
}
for name, t in S.items():
    q = dataclasses.replace(p, id="synthetic/trace", tests=[t], shown_tests=[t])
    seqs = []
    for ans in ("True", "False"):
        log.clear()
        grader.grade(q, f"```python\ndef is_multiple(n):\n    return {ans}\n```", "none")
        seqs.append([x for x in log])
    print("%-26s %s  (calls: True-answer %d, False-answer %d)" % (name, "LEAKS" if seqs[0] != seqs[1] else "same", len(seqs[0]), len(seqs[1])))
