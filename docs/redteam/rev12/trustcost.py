"""rev12: how near its trusted-side CPU bound (TRUSTED_CPU_FACTOR * cpu_s = 0.5 s at cpu_s=1) is an HONEST row's
conversation (MANY's canonical, 400 one-call tests), alone and beside S spinning processes (pure Python loops at
this probe's nice, standing for another grading process's trusted sides or any load outside the run slots)?
TRUSTED_PROCESSES False (the conversation in a thread here, so its thread_time can be read); grade_batch as usual.
Usage: trustcost.py S REPS"""
import sys, time, os, subprocess
sys.path.insert(0, ".")
from tests.substrate import test_grader_attacks as T
from vgrout.substrate import grader, sandbox
S, REPS = int(sys.argv[1]), int(sys.argv[2])
grader.TRUSTED_PROCESSES = False
_ref, spent = grader._referee_a, []
def _timed(ch, g):
    t = time.thread_time()
    try: return _ref(ch, g)
    finally: spent.append(round(time.thread_time() - t, 3))
grader._referee_a = _timed
spin = [subprocess.Popen([sys.executable, "-c", "import time\nt=time.time()+120\nwhile time.time()<t: pass"]) for _ in range(S)]
time.sleep(0.5)
canon = T._completion(T.MANY.canonical_solution)
for r in range(REPS):
    spent.clear(); t = time.time()
    out = grader.grade_batch([T.MANY], [canon], progress=False, limits=sandbox.Limits(cpu_s=1))
    g = out[0]
    print(f"S={S} rep {r}: conversations' thread CPU {spent} (bound 0.5; >1 entry = regraded) wall {time.time()-t:.1f}s "
          f"-> gt_pass={g.gt_pass} error={g.error} tests={g.tests_passed}/400 load {os.getloadavg()[0]:.1f}", flush=True)
for p in spin: p.kill(); p.wait()
