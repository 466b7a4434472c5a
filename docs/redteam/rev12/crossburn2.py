"""rev12: as crossburn.py, with B's rows burning for their whole slot life: each B run's 2 children spin (1 CPU
quota) until its CPU limit BL ends the run (`timeout`: the slot comes back within ~BL s), while every reply it
sends is a HEAVY line (its grading process reads until its bound, 0.5*BL thread CPU s: cpu_spent, so B regrades
each row alone: more burning). A (here, DELAY s after B starts): NA rows of MANY's canonical, Limits(cpu_s=1):
its conversations' bound 0.5 s. A's first round and its alone regrade (a fresh pool of 1: a cold process) both
run beside B's burning. RT12_CONV_LOG logs each conversation's thread CPU. Usage: crossburn2.py NA NB BL DELAY"""
import sys, time, os, dataclasses, subprocess
sys.path.insert(0, ".")
from tests.substrate import test_grader_attacks as T
from vgrout.substrate import grader, sandbox
NA, NB, BL, DELAY = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
burner = ("import os, sys, json\nLINE = (json.dumps({'v': list(range(1, 240_000))}) + '\\n').encode()\n"
          "for i in range(2):\n    if os.fork() == 0:\n        while True:\n            pass\n"
          "def ident(x):\n    os.write(int(sys.argv[1]), LINE)\n    return x\n")
if sys.argv[-1] == "B":
    t = time.time()
    out = grader.grade_batch([dataclasses.replace(T.MANY, id="burner", cpu_limit_s=BL)] * NB, [T._completion(burner)] * NB,
                             progress=False, limits=sandbox.Limits(cpu_s=1))
    print(f"B: {NB} burner rows done in {time.time()-t:.1f}s: {[(g.gt_pass, g.error) for g in out]}", flush=True)
    sys.exit()
from common import log_grade_rows
calls = log_grade_rows(grader)
canon = [T._completion(T.MANY.canonical_solution)] * NA
def grade_a(tag):
    calls.clear(); t = time.time()
    out = grader.grade_batch([T.MANY] * NA, canon, progress=False, limits=sandbox.Limits(cpu_s=1))
    print(f"A {tag}: {time.time()-t:.1f}s, load {os.getloadavg()[0]:.1f}; calls (idx, s, {{row: (wall_stopped, cpu_spent)}}):", flush=True)
    for c in calls: print("    ", c, flush=True)
    for i, g in enumerate(out):
        print(f"   row {i}: gt_pass={g.gt_pass} error={g.error} tests={g.tests_passed}/{g.tests_total}", flush=True)
if "nocontrol" not in sys.argv:
    grade_a("alone (control)")
b = subprocess.Popen([sys.executable, *sys.argv, "B"])
time.sleep(DELAY)
grade_a(f"beside B ({NB} burner rows, cpu_limit_s {BL})")
b.wait()
