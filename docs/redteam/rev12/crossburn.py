"""rev12: rows cut by the trusted CPU bound (cpu_spent) are regraded ALONE -- alone in their batch only. Does a
neighbour in ANOTHER grading process (its conversations' trusted-side CPU, which no run slot bounds) cut an honest
row's conversation again in its alone regrade, so its final label is output_limit / gt_pass False?
B (background process): NB rows of HEAVY (replies costly to read) on MANY with cpu_limit_s=BL (trusted bound
0.5*BL CPU s per conversation), default workers. A (here), after B has started: NA rows of MANY's canonical,
Limits(cpu_s=1) (trusted bound 0.5 s per conversation; 400 one-call tests). Also A alone first (control).
Usage: crossburn.py NA NB BL"""
import sys, time, os, dataclasses, subprocess
sys.path.insert(0, ".")
from tests.substrate import test_grader_attacks as T
from vgrout.substrate import grader, sandbox
NA, NB, BL = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
if sys.argv[-1] == "B":
    t = time.time()
    out = grader.grade_batch([dataclasses.replace(T.MANY, cpu_limit_s=BL)] * NB, [T._completion(T.HEAVY)] * NB,
                             progress=False, limits=sandbox.Limits(cpu_s=1))
    print(f"B: {NB} HEAVY rows done in {time.time()-t:.1f}s: {[(g.gt_pass, g.error) for g in out]}", flush=True)
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
grade_a("alone (control)")
b = subprocess.Popen([sys.executable, *sys.argv, "B"])
time.sleep(4)
grade_a(f"beside B ({NB} HEAVY rows, cpu_limit_s {BL})")
b.wait()
