"""rev10: the trusted-side CPU regrade (round 9's `cpu_spent`): can a hostile trigger it on purpose, what does it cost?
HEAVY (tests/substrate/test_grader_attacks.py: replies costly to read) on MANY (400 tests). Usage: trusted.py K CPU_S"""
import sys, time, os, resource
sys.path.insert(0, ".")
from tests.substrate import test_grader_attacks as T
from vgrout.substrate import grader, sandbox
K, C = int(sys.argv[1]), float(sys.argv[2])
_orig = grader._grade_rows
calls = []
def _logged(rows, idx, workers, bar):
    t = time.time(); r = _orig(rows, idx, workers, bar); calls.append((list(idx), round(time.time() - t, 1))); return r
grader._grade_rows = _logged
def cpu():
    a, b = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return a.ru_utime + a.ru_stime + b.ru_utime + b.ru_stime
lim = sandbox.Limits(cpu_s=C)
for tag, rows in (("canonical only", [T._completion(T.MANY.canonical_solution)]),
                  (f"{K} HEAVY + canonical", [T._completion(T.HEAVY)] * K + [T._completion(T.MANY.canonical_solution)])):
    calls.clear(); c0 = cpu(); t0 = time.time()
    out = grader.grade_batch([T.MANY] * len(rows), rows, progress=False, limits=lim)
    print(f"{tag}: wall {time.time()-t0:.1f}s, grader-side+sandbox CPU {cpu()-c0:.1f}s (sandbox CPU in run cgroups is"
          f" not in RUSAGE_CHILDREN of bwrap'd runs? see note), _grade_rows calls {calls}", flush=True)
    print("   labels:", [(g.gt_pass, g.error, g.tests_passed) for g in out], flush=True)
