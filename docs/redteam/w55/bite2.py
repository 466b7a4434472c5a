import sys
from vgrout.substrate import grader
from vgrout.substrate.problems import Problem
setup = "def check(r):\n    return r.make(1) == 1 and r.make(2) == 2\n"
problem = Problem(id="remote", messages=[], entry_point="Solution().make", mode="none",
                  tests=["assert check(Solution().make(1))"], setup_code=setup,
                  canonical_solution="class Solution:\n    def make(self, x):\n        return x\n")
objects = """import sys
class Answer:
    def make(self, x):
        return x
class Solution:
    def __init__(self):  # called by the harness's answer(): let its references go on past the method
        for cell in sys._getframe(1).f_locals["keeper"].__closure__:
            if isinstance(cell.cell_contents, dict) and cell.cell_contents.get("class") == "instance":
                cell.cell_contents["instance"] = "instance"
    def make(self, x):
        return Answer()
"""
print("with the depth bound:", grader.grade(problem, f"```python\n{objects}\n```", "none"))
orig = grader._Referee.__init__
def init(self, *a, **k):
    orig(self, *a, **k); self.remote_depth = 99
grader._Referee.__init__ = init
print("without:", grader.grade(problem, f"```python\n{objects}\n```", "none"))
