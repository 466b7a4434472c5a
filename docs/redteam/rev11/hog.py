"""rev11 SLOT HOGGING ACROSS PROCESSES: a run holds its slot until its wall backstop whether or not it uses
CPU, and the slots are the host's, so rows that WAIT (sleep, Event.wait) in one grading process delay every
other grading process of the host (each of its runs: phase A, phase B's pass and fail runs).
Process B (a subprocess): grade_batch of N `time.sleep(1000)` rows (3472, Limits(cpu_s=1): backstop 8 s),
workers 4. Process A (this one): 3472's canonical, default limits, workers 2, alone and then beside B.
Usage: RT11_SLOTS=... RT11_LOG=... hog.py N [WAIT]"""
import sys, time, os, subprocess
from vgrout.substrate import grader, problems, sandbox
ps = {p.id: p for p in problems.load_any("../shared/data/leetcode/leetcode_test_medhard.jsonl.gz")}
P = ps["3472"]
if sys.argv[2:3] == ["hostile"]:
    N = int(sys.argv[1]); t = time.time()
    out = grader.grade_batch([P] * N, ["```python\nimport time\ntime.sleep(1000)\n```"] * N, workers=4,
                             progress=False, limits=sandbox.Limits(cpu_s=1))
    print(f"  [B] {N} sleepers graded in {time.time()-t:.1f} s: {sorted(set((g.error, g.gt_pass) for g in out))}", flush=True)
    sys.exit()
N, WAIT = int(sys.argv[1]), float(sys.argv[2]) if len(sys.argv) > 2 else 3
canon = "```python\n" + P.canonical_solution + "\n```"
def honest(tag):
    t = time.time(); (g,) = grader.grade_batch([P], [canon], workers=2, progress=False)
    print(f"{tag}: gt_pass={g.gt_pass} error={g.error} tests={g.tests_passed}/{g.tests_total} cpu_s={g.cpu_s} "
          f"wall {time.time()-t:.1f}s load {os.getloadavg()[0]:.1f}", flush=True)
print("B's backstop", sandbox.Limits(cpu_s=1).with_cpu(P.cpu_limit_s).wall, "A's", sandbox.Limits().with_cpu(P.cpu_limit_s).wall,
      "slots", sandbox._run_slots(1.0), "at", time.time(), flush=True)
honest("A alone")
t0 = time.time()
hp = subprocess.Popen([sys.executable, __file__, str(N), "hostile"])
time.sleep(WAIT)
honest(f"A beside B's {N} sleepers (started {WAIT} s after B)")
hp.wait()
print(f"B done {time.time()-t0:.1f} s after it started", flush=True)
