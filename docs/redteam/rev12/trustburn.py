"""rev12: the CPU that run slots do not bound: a run's TRUSTED side (its grading process; TRUSTED_CPU_FACTOR 0.5 of
the row's CPU limit per conversation) spins beside its quota'd sandbox. Hostile row (MANY, cpu_limit_s=HL): a child
spins SPIN s on the clock (under its CPU limit), the module writes K costly lines (a HEAVY line each, ~47 ms of the
trusted side's thread CPU: K*0.047 stays under its bound, so the row is not `cpu_spent` and is not sent "alone"),
then the program sleeps: wall_stopped, so it is regraded TOGETHER with any honest row its neighbours stopped.
Honest: MANY's canonical (400 one-call tests), Limits(cpu_s=1): backstop 8 s. Usage: trustburn.py H HL SPIN K"""
import sys, time, os, dataclasses
sys.path.insert(0, ".")
from tests.substrate import test_grader_attacks as T
from vgrout.substrate import grader, sandbox
H, HL, SPIN, K = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
hostile = (f"import os, sys, time, json\nLINE = (json.dumps({{'v': list(range(1, 240_000))}}) + '\\n').encode()\n"
           f"end = time.monotonic() + {SPIN}\nfor i in range(3):\n    if os.fork() == 0:\n"
           f"        while time.monotonic() < end:\n            pass\n        time.sleep(1000)\nN = [0]\n"
           f"def ident(x):\n    N[0] += 1\n    if N[0] <= {K}:\n        os.write(int(sys.argv[1]), LINE)\n"
           f"    if N[0] >= 399:\n        time.sleep(1000)\n    return x\n")
HP = dataclasses.replace(T.MANY, cpu_limit_s=HL)
lim = sandbox.Limits(cpu_s=1)
from common import log_grade_rows
calls = log_grade_rows(grader)
print(f"slots {sandbox._run_slots()} (dir {sandbox.RUN_SLOTS_DIR}), load {os.getloadavg()[0]:.1f}, t0={time.time():.2f}", flush=True)
canon = T._completion(T.MANY.canonical_solution)
t = time.time()
out = grader.grade_batch([HP] * H + [T.MANY], [T._completion(hostile)] * H + [canon], progress=False, limits=lim)
print(f"{H} hostile + honest (row {H}): wall {time.time()-t:.1f}s; _grade_rows calls (idx, s, {{row: (wall_stopped, cpu_spent)}}):", flush=True)
for c in calls: print("  ", c, flush=True)
for i, g in enumerate(out):
    print(f"   row {i}: gt_pass={g.gt_pass} error={g.error} tests={g.tests_passed}/{g.tests_total} cpu_s={g.cpu_s}", flush=True)
