"""rev11 SLOTS COUNT AFFINITY, NOT CPU: _run_slots is len(sched_getaffinity) / cpus. In a container whose CPU is
bounded by a cgroup quota (docker --cpus, a k8s limit, a slurm cgroup) the affinity still lists every CPU of the
node, so the slots (and workers = 2 * cpu_count) overstate the CPU the runs have; the runs' quotas together ask
more than there is, equal shares decide again (rev9: they do not hold against many tasks), and round 10's
"together" regrade puts the starved honest row beside the same neighbour again, when that neighbour was
wall-stopped too (it spins for most of its own, larger, CPU limit, then waits).
Run INSIDE a cpu cgroup with a quota (container.sh makes one of 1 CPU on this 2-CPU host) and outside (control).
Batch: MANY's canonical (tests/substrate/test_grader_attacks.py: sleeps 0.5 s, then 400 one-call tests) under
Limits(cpu_s=1) (backstop 8 s), and H hostile rows (MANY with cpu_limit_s=10: backstop 35 s) whose 21 processes
x 3 tasks spin until 9 s after start, then sleep.  Usage: container.py H"""
import sys, time, os, dataclasses
sys.path.insert(0, ".")
from tests.substrate import test_grader_attacks as T
from vgrout.substrate import grader, sandbox
H = int(sys.argv[1])
# 61 processes (no threads: one GIL each, so every task is runnable), spinning until 12 s after the start
hostile = ("import os, time\nend = time.monotonic() + 12\nfor i in range(60):\n    if os.fork() == 0:\n        break\n"
           "while time.monotonic() < end:\n    pass\ntime.sleep(1000)\n")
HP = dataclasses.replace(T.MANY, cpu_limit_s=14)
lim = sandbox.Limits(cpu_s=1)
_orig = grader._grade_rows
calls = []
def _logged(rows, idx, workers, bar):
    t = time.time(); r = _orig(rows, idx, workers, bar); calls.append((list(idx), round(time.time() - t, 1))); return r
grader._grade_rows = _logged
with open("/proc/self/cgroup") as f:
    cg = [l.strip() for l in f if ":cpu:" in l or ":cpu," in l]
q = open(f"/sys/fs/cgroup/cpu{cg[0].split(':')[2]}/cpu.cfs_quota_us").read().strip()
print(f"cpu cgroup {cg} quota_us {q}; affinity {len(os.sched_getaffinity(0))} CPUs -> slots {sandbox._run_slots(1.0)}, "
      f"workers {2 * os.cpu_count()}; load {os.getloadavg()[0]:.1f}", flush=True)
canon = T._completion(T.MANY.canonical_solution)
def show(tag, out, t):
    print(f"{tag}: wall {time.time()-t:.1f}s calls {calls}", flush=True)
    for i, g in enumerate(out):
        print(f"   row {i}: gt_pass={g.gt_pass} error={g.error} tests={g.tests_passed}/{g.tests_total} cpu_s={g.cpu_s}", flush=True)
calls.clear(); t = time.time()
show("honest alone", grader.grade_batch([T.MANY], [canon], progress=False, limits=lim), t)
calls.clear(); t = time.time()
show(f"{H} hostile (rows 0..{H-1}, submitted first) + honest (row {H})",
     grader.grade_batch([HP] * H + [T.MANY], [T._completion(hostile)] * H + [canon], progress=False, limits=lim), t)
