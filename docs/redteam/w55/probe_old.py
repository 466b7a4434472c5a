import sys; sys.path.insert(0, "tests/substrate")
import test_grader_attacks as t
from vgrout.substrate import sandbox
print(sandbox.__file__)
print(sandbox.run({"s.py": t.SIGNALS_PROBE}, "s.py").stdout, sandbox.run({"p.py": t.PIPE_PROBE}, "p.py").stdout)
