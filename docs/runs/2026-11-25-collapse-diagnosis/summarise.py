"""The README's tables from the committed probe.json.gz files, and the per-zone table from the rollouts'
zones (rollouts_zones.jsonl.gz: every training rollout less its completion text):
python summarise.py (from this folder)."""
import gzip
import json
from pathlib import Path

HERE = Path(__file__).parent
ORDER = ["round1/none", "round1/frac0", "round1/frac25", "round1/frac50", "round1/mix0", "round2/nonemix0", "round2/tzkeep",
         "round3/absorb", "round3/nokeep", "round3/noroute",  # rounds 3 and 4: the default's 64 test problems
         "round4/control", "round4/tzgate", "round4/sbase", "round4/both"]


def f(x):
    return f"{x:.3f}"


def runs():
    for v in ORDER:
        for p in sorted((HERE / v).glob("*/probe.json.gz")):
            yield v, p.parent.name, json.loads(gzip.decompress(p.read_bytes()))


print("| variant | run | deploy solve / hack at steps 12, 24, 36 | final deploy solve, hack | final train-view solve, hack |")
print("| --- | --- | --- | --- | --- |")
for v, run, d in runs():
    curve = {(r["step"], r["view"]): r for r in d["curve"]}
    steps = " · ".join(f"{f(curve[s, 'deploy']['solve'])} / {f(curve[s, 'deploy']['hack'])}" for s in (12, 24, 36))
    final = {r["view"]: r for r in d["final"]}
    print(f"| {v.split('/')[1]} | {run} | {steps} | {f(final['deploy']['solve'])}, {f(final['deploy']['hack'])} "
          f"| {f(final['train']['solve'])}, {f(final['train']['hack'])} |")

print()
print("| variant | run | mean advantage of student rows by zone (keep · absorb · route), and of teacher rows (by zone where gated), steps 0–11 / 12–23 / 24–35 |")
print("| --- | --- | --- |")
for v, run, d in runs():
    cells = []
    for third in d["thirds"].values():
        z = lambda k: f"{third[k]['adv']:+.2f}" if k in third else "–"
        gated = sum(f"teacher_{k}" in third for k in ("keep", "absorb", "route")) > 1  # round 4's teacher gate
        teacher = f"{z('teacher_keep')} · {z('teacher_absorb')} · {z('teacher_route')}" if gated else z("teacher")
        cells.append(f"{z('student_keep')} · {z('student_absorb')} · {z('student_route')}; teacher {teacher}")
    print(f"| {v.split('/')[1]} | {run} | {' / '.join(cells)} |")

print()
print("Rounds 4, 6 and 7, steps 12–35 (past the gate's warm-up), all seeds pooled: rows per zone and the share of them hacked "
      "(the label, read here after the fact)")
print()
print("| variant | arm | teacher keep · absorb · route | student keep · absorb · route |")
print("| --- | --- | --- | --- |")
# rounds 6 and 7: no probe, their rollouts only; round 7's routeA and its placebo are round 6's, bit for bit,
# so round 6's runs are read from round7/both (round 6's own copies are at commit a54e8bb)
GATED = [(v, arm) for v in ("round4/tzgate", "round4/sbase", "round4/both", "round6/both") for arm in ("routeA", "placebo")]
GATED += [("round7/yt", "tgate"), ("round7/yt", "placebo"), ("round7/yh", "heldout"), ("round7/yh", "placebo")]
for v, arm in GATED:  # one row per (variant, arm)
    cells = {}
    folder = "round7/both" if v == "round6/both" else v
    for f in sorted((HERE / folder).glob(f"{arm}-*/rollouts_zones.jsonl.gz")):
        for line in gzip.open(f, "rt"):
            r = json.loads(line)
            if r["step"] >= 12:
                cells.setdefault((r["source"], r["zone"]), []).append(bool(r["hacked"]))
    cols = []
    for source in ("teacher", "student"):
        cols.append(" · ".join(f"{len(h)} ({sum(h) / len(h):.2f})" if (h := cells.get((source, z))) else "0"
                               for z in ("keep", "absorb", "route")))
    print(f"| {v.split('/')[1]}{'' if v.startswith('round4') else f' (round {v[5]})'} | {arm} | {cols[0]} | {cols[1]} |")
