"""rev12: an HONEST row's trusted-side conversation bound (0.5 * cpu_s thread CPU s) vs load outside the run slots.
MANY's canonical (400 one-call tests), Limits(cpu_s=1), grade_batch as in production (TRUSTED_PROCESSES True).
S spinning processes (this probe's nice; they stand for any load the slots do not cover: another grading's
trusted sides, a trainer's data loader) for at most DUR s. RT12_CONV_LOG (sitecustomize) logs each conversation's
thread CPU, so a cut (cpu_spent) and its alone regrade (a fresh pool of 1: a cold process) are visible.
Usage: loadcut.py S REPS DUR"""
import sys, time, os, subprocess
sys.path.insert(0, ".")
from tests.substrate import test_grader_attacks as T
from vgrout.substrate import grader, sandbox
S, REPS, DUR = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
from common import log_grade_rows
calls = log_grade_rows(grader)
spin = [subprocess.Popen([sys.executable, "-c", f"import time\nt=time.time()+{DUR}\nwhile time.time()<t: pass"]) for _ in range(S)]
canon = T._completion(T.MANY.canonical_solution)
t0 = time.time()
for r in range(REPS):
    if time.time() - t0 > DUR - 8: break
    calls.clear(); t = time.time()
    g = grader.grade_batch([T.MANY], [canon], progress=False, limits=sandbox.Limits(cpu_s=1))[0]
    print(f"S={S} rep {r}: {time.time()-t:.1f}s load {os.getloadavg()[0]:.1f} calls {calls} -> gt_pass={g.gt_pass} "
          f"error={g.error} tests={g.tests_passed}/400", flush=True)
for p in spin: p.kill(); p.wait()
