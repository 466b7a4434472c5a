"""rev10 CROSS-PROCESS: round 9's quota is the host's CPUs over THIS batch's runs; a second grade_batch on the
same host (another grader process: an eval beside training, two trainers, the test suite) gives its runs their
own quota, so the quotas together exceed the host and the run cgroups (siblings under the same parent
/sys/fs/cgroup/cpu/vgrout) fall back to equal cpu.shares, which rev9 showed do not hold against 63 tasks.
The honest row's `alone` regrade runs after ITS batch, not after the other process's.
Usage: cross.py HONEST_CPU_S HOSTILE_ROWS HOSTILE_CPU_S. Hostile process: grade_batch of HOSTILE_ROWS spinT rows
(problem 3472 with cpu_limit_s HOSTILE_CPU_S), 2 workers. Honest: 3472 canonical, cpu_limit_s HONEST_CPU_S."""
import sys, time, os, subprocess, dataclasses
from vgrout.substrate import grader, problems
ps = {p.id: p for p in problems.load_any("../shared/data/leetcode/leetcode_test_medhard.jsonl.gz")}
HC, HR, XC = float(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
if sys.argv[4:] == ["hostile"]:
    exec(open(os.path.join(os.path.dirname(__file__), "disturb_variants.py")).read())
    H = dataclasses.replace(ps["3472"], cpu_limit_s=XC)
    t = time.time()
    out = grader.grade_batch([H] * HR, ["```python\n" + V[os.environ.get("HV", "spinT")] + "```"] * HR, workers=2, progress=False)
    print("hostile process done", round(time.time() - t, 1), [(g.error, g.cpu_s) for g in out], flush=True)
    sys.exit()
P = dataclasses.replace(ps["3472"], cpu_limit_s=HC)
canon = "```python\n" + P.canonical_solution + "\n```"
_orig = grader._grade_rows
calls = []
def _logged(rows, idx, workers, bar):
    t = time.time(); r = _orig(rows, idx, workers, bar); calls.append((list(idx), round(time.time() - t, 1))); return r
grader._grade_rows = _logged
def honest(tag):
    calls.clear(); t = time.time(); (g,) = grader.grade_batch([P], [canon], workers=2, progress=False)
    print(f"{tag}: gt_pass={g.gt_pass} error={g.error} tests={g.tests_passed}/{g.tests_total} cpu_s={g.cpu_s} "
          f"wall {time.time()-t:.1f}s grade_rows calls {calls} load {os.getloadavg()[0]:.1f}", flush=True)
print("honest limit", HC, "backstop", grader.sandbox.Limits().with_cpu(HC).wall, flush=True)
honest("alone")
hp = subprocess.Popen([sys.executable, __file__, *sys.argv[1:4], "hostile"])
time.sleep(float(os.environ.get("WAIT", "12")))
print("run cgroups under the parent now:", len([d for d in os.listdir(grader.sandbox._cpu_cgroup_parent()) if d.startswith("run-")]), flush=True)
try:
    honest("beside another process's hostile batch")
finally:
    hp.kill(); hp.wait()  # its sandboxes die with it (--die-with-parent)
honest("alone again")
