import sys, glob, importlib.util, dataclasses
sys.path.insert(0, "tests/substrate"); sys.path.insert(0, "tests")
from vgrout.substrate import grader
from vgrout.substrate.problems import Problem
for f in sorted(glob.glob("tests/substrate/*.py")):
    try:
        spec = importlib.util.spec_from_file_location("m_" + f.split("/")[-1][:-3], f); m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
    except Exception as e:
        print("skip", f, type(e).__name__); continue
    for k, v in vars(m).items():
        ps = [v] if isinstance(v, Problem) else [x for x in v if isinstance(x, Problem)] if isinstance(v, (list, tuple)) else []
        for p in ps:
            for t in p.tests + list(p.shown_tests or []):
                w = grader._test_refusal(grader._entry_name(p), t)
                if w: print(f, k, p.id, repr(t[:100]), w)
