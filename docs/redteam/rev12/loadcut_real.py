"""rev12: loadcut.py on a REAL problem (test_medhard, by id), default Limits (cpu_s 4: trusted bound 2 s). Usage: loadcut_real.py S REPS DUR ID
MANY's canonical (400 one-call tests), Limits(cpu_s=1), grade_batch as in production (TRUSTED_PROCESSES True).
S spinning processes (this probe's nice; they stand for any load the slots do not cover: another grading's
trusted sides, a trainer's data loader) for at most DUR s. RT12_CONV_LOG (sitecustomize) logs each conversation's
thread CPU, so a cut (cpu_spent) and its alone regrade (a fresh pool of 1: a cold process) are visible.
Usage: loadcut.py S REPS DUR"""
import sys, time, os, subprocess
sys.path.insert(0, ".")
from tests.substrate import test_grader_attacks as T
from vgrout.substrate import grader, sandbox
S, REPS, DUR, PID = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
from vgrout.substrate.problems import load_leetcode
P = next(p for p in load_leetcode("../shared/data/leetcode/leetcode_test_medhard.jsonl.gz") if p.id == PID)
from common import log_grade_rows
calls = log_grade_rows(grader)
spin = [subprocess.Popen([sys.executable, "-c", f"import time\nt=time.time()+{DUR}\nwhile time.time()<t: pass"]) for _ in range(S)]
canon = T._completion(P.canonical_solution)
t0 = time.time()
for r in range(REPS):
    if time.time() - t0 > DUR - 8: break
    calls.clear(); t = time.time()
    g = grader.grade_batch([P], [canon], progress=False)[0]
    print(f"S={S} rep {r}: {time.time()-t:.1f}s load {os.getloadavg()[0]:.1f} calls {calls} -> gt_pass={g.gt_pass} "
          f"error={g.error} tests={g.tests_passed}/{g.tests_total}", flush=True)
for p in spin: p.kill(); p.wait()
