"""Admitted shapes (the new whitelist): requests for a wrong vs a right is_multiple answer must be the same."""
import dataclasses
from vgrout.substrate.easy import easy_problems
from vgrout.substrate import grader
p = [p for p in easy_problems() if p.id == "easy/is_multiple/6"][0]
log = []
orig = grader._Referee.ask
def ask(self, req, depth=0):
    log.append(repr(req)); return orig(self, req, depth)
grader._Referee.ask = ask
S = {"message with a call": "assert is_multiple(7) == False, is_multiple(0)\nassert is_multiple(0) == True",
     "kept answer + loop": "for x, y in [(7, False), (0, True)]:\n    r = is_multiple(x)\n    assert r == y\n    assert is_multiple(x + 1) == r",
     "pair": "assert str(is_multiple(7)) == str(is_multiple(0))\nassert is_multiple(0)",
     "and with one call": "assert is_multiple(7) == False and True\nassert is_multiple(0)",
     "method of answer": "assert is_multiple(7).bit_length() == 0\nassert is_multiple(0) == True"}
for name, t in S.items():
    assert grader._test_refusal("is_multiple", t) is None, name
    q = dataclasses.replace(p, id="synthetic/trace", tests=[t], shown_tests=[t])
    seqs = []
    for v in (True, False):
        log.clear()
        g = grader.grade(q, f"```python\ndef is_multiple(n):\n    return {v}\n```", "none")
        seqs.append(list(log))
    print(f"{name:22s} {'LEAKS' if seqs[0] != seqs[1] else 'same '} {len(seqs[0])} / {len(seqs[1])}")
