import sys; sys.path.insert(0, "tests/substrate")
from vgrout.substrate import grader
from vgrout.substrate.problems import Problem
orig = grader._Referee.__init__
def init(self, *a, **k):
    orig(self, *a, **k); self.remote_depth = 99
grader._Referee.__init__ = init
setup = "def check(r):\n    return r.one() == 1 and r.two() == 2\n"
problem = Problem(id="remote", messages=[], entry_point="Solution().make", mode="none",
                  tests=["assert check(Solution().make(1))"], setup_code=setup,
                  canonical_solution="class Solution:\n    def make(self, x):\n        return x\n")
objects = ("class Answer:\n    def one(self):\n        return 1\n    def two(self):\n        return 2\n"
           "class Solution:\n    def make(self, x):\n        return Answer()\n")
print("without the depth bound:", grader.grade(problem, f"```python\n{objects}\n```", "none").gt_pass)
log = []
o = grader._Referee.ask
def ask(self, req, depth=0):
    try:
        v = o(self, req, depth); log.append((req, depth, repr(v))); return v
    except BaseException as e:
        log.append((req, depth, repr(e))); raise
grader._Referee.ask = ask
print(grader.grade(problem, f"```python\n{objects}\n```", "none"))
for l in log: print(l)
