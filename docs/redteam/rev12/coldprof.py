"""rev12: where the FIRST conversation of a process spends its thread CPU (MANY's canonical, cpu_s=1): cProfile of
_referee_a, first vs second grading in one process (TRUSTED_PROCESSES False)."""
import sys, time, cProfile, pstats, io
sys.path.insert(0, ".")
from tests.substrate import test_grader_attacks as T
from vgrout.substrate import grader, sandbox
grader.TRUSTED_PROCESSES = False
_ref = grader._referee_a
for rep in range(2):
    prof = cProfile.Profile()
    def _p(ch, g):
        t = time.thread_time(); prof.enable()
        try: return _ref(ch, g)
        finally: prof.disable(); print(f"rep {rep}: thread CPU {time.thread_time()-t:.3f}", flush=True)
    grader._referee_a = _p
    grader.grade_batch([T.MANY], [T._completion(T.MANY.canonical_solution)], progress=False, limits=sandbox.Limits(cpu_s=1))
    s = io.StringIO(); pstats.Stats(prof, stream=s).sort_stats("cumulative").print_stats(14); print(s.getvalue()[-2600:])
