"""rev12: rev11's finding 3 (slots = affinity in a 1-CPU quota) on round 12, inside container12.sh's 1-CPU cgroup.
H hostile rows (MANY, cpu_limit_s=HL: 61 processes spin SPIN s on the clock, then sleep: wall_stopped) submitted
first, then MANY's canonical under Limits(cpu_s=1) (backstop 8 s). Usage: container12.py H HL SPIN"""
import sys, time, os, dataclasses
sys.path.insert(0, ".")
from tests.substrate import test_grader_attacks as T
from vgrout.substrate import grader, sandbox
H, HL, SPIN = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
hostile = (f"import os, time\nend = time.monotonic() + {SPIN}\nfor i in range(60):\n    if os.fork() == 0:\n        break\n"
           "while time.monotonic() < end:\n    pass\ntime.sleep(1000)\n")
HP = dataclasses.replace(T.MANY, cpu_limit_s=HL)
from common import log_grade_rows
calls = log_grade_rows(grader)
cg = [l.strip() for l in open("/proc/self/cgroup") if ":cpu:" in l or ":cpu," in l][0].split(":")[2]
print(f"cpu cgroup {cg} quota {open(f'/sys/fs/cgroup/cpu{cg}/cpu.cfs_quota_us').read().strip()}; affinity "
      f"{len(os.sched_getaffinity(0))} -> _run_slots() {sandbox._run_slots()}; load {os.getloadavg()[0]:.1f}", flush=True)
canon = T._completion(T.MANY.canonical_solution)
t = time.time()
out = grader.grade_batch([HP] * H + [T.MANY], [T._completion(hostile)] * H + [canon], progress=False, limits=sandbox.Limits(cpu_s=1))
print(f"{H} hostile + honest (row {H}): wall {time.time()-t:.1f}s calls {calls}", flush=True)
for i, g in enumerate(out):
    print(f"   row {i}: gt_pass={g.gt_pass} error={g.error} tests={g.tests_passed}/{g.tests_total} cpu_s={g.cpu_s}", flush=True)
