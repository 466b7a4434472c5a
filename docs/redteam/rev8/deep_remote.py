"""Round 7's depth bound (`_Referee.ask`) counts requests, not what a reply holds: the reply to `Solution()`
(depth 1, where a reference is still allowed) may be a setup class's instance (ListNode) whose field named
like the entry method is a reference. `Solution().m` is then a plain attribute read (no request), and the
call of that reference is asked at depth 2, whose reply may again hold references: the answer of the graded
call carries response objects into trusted code. Replayed on the round-7 regression test's own problem
(tests/substrate/test_grader_attacks.py: `assert check(Solution().make(1))`, check(r) = r.make(1) == 1 and
r.make(2) == 2) with a ListNode class in its setup (every LeetCode problem's setup has one)."""
import dataclasses, sys
from vgrout.substrate import grader
from vgrout.substrate.problems import Problem

setup = ("class ListNode:\n    def __init__(self, val=0, next=None):\n        self.val = val\n        self.next = next\n"
         "def check(r):\n    return r.make(1) == 1 and r.make(2) == 2\n")
problem = Problem(id="remote", messages=[{"role": "user", "content": "x and should pass all tests"}],
                  entry_point="Solution().make", mode="none", tests=["assert check(Solution().make(1))"],
                  setup_code=setup, canonical_solution="class Solution:\n    def make(self, x):\n        return x\n")

SERVER = r'''
import sys, os, json, posix, signal
up, down = int(sys.argv[1]), int(sys.argv[2])
def send(o): posix.write(up, (json.dumps(o) + "\n").encode())
inbox = os.fdopen(down, "r")
send({"load": "pass", "entry": True})
WRONG_FIRST = %r
seen = []
while True:
    line = inbox.readline()
    if not line: break
    req = json.loads(line); seen.append(req)
    if req["op"] == "get": send({"v": {"r": 0}})
    elif req["op"] == "call" and req["r"] == 0:   # Solution(): a ListNode whose field `make` is a reference
        send({"v": {"o": ["ListNode", {"make": {"r": 1}}]}})
    elif req["op"] == "call" and req["r"] == 1:   # Solution().make(1): again a ListNode holding a reference
        send({"v": {"o": ["ListNode", {"make": {"r": 2}}]}})
    elif req["op"] == "call" and req["r"] == 2:   # check's r.make(k): trusted code calling the response
        k = req["args"][0]
        send({"v": k + 1 if (WRONG_FIRST and k == 1) else k})
    else: send({"x": "TypeError", "builtin": True})
print("REQUESTS", json.dumps(seen), flush=True)
os.kill(os.getpid(), signal.SIGKILL)
'''

def run(wrong_first):
    completion = "```python\nclass Solution:\n    def make(self, x):\n        return x\n" + SERVER % wrong_first + "```"
    g = grader._prepare(problem, completion, "none", grader.sandbox.Limits(), grader.MAX_COMPLETION_CHARS)
    assert grader._test_refusal("Solution", problem.tests[0]) is None
    grader._grade(g)
    r = grader._finish(g)
    reqs = [l for l in g.a.stdout.splitlines() if l.startswith("REQUESTS")]
    print(f"wrong_first={wrong_first}: gt_pass={r.gt_pass} tests={r.tests_passed}/{r.tests_total} error={r.error}")
    print("  sandbox saw:", reqs[0] if reqs else g.a.stdout[-500:])

run(False)
run(True)
