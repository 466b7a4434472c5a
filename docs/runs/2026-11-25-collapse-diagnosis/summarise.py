"""The README's tables from the committed probe.json files: python summarise.py (from this folder)."""
import json
from pathlib import Path

HERE = Path(__file__).parent
ORDER = ["round1/none", "round1/frac0", "round1/frac25", "round1/frac50", "round1/mix0", "round2/nonemix0", "round2/tzkeep",
         "round3/absorb", "round3/nokeep", "round3/noroute"]  # round 3: the default's 64 test problems


def f(x):
    return f"{x:.3f}"


def runs():
    for v in ORDER:
        for p in sorted((HERE / v).glob("*/probe.json")):
            yield v, p.parent.name, json.loads(p.read_text())


print("| variant | run | deploy solve / hack at steps 12, 24, 36 | final deploy solve, hack | final train-view solve, hack |")
print("| --- | --- | --- | --- | --- |")
for v, run, d in runs():
    curve = {(r["step"], r["view"]): r for r in d["curve"]}
    steps = " · ".join(f"{f(curve[s, 'deploy']['solve'])} / {f(curve[s, 'deploy']['hack'])}" for s in (12, 24, 36))
    final = {r["view"]: r for r in d["final"]}
    print(f"| {v.split('/')[1]} | {run} | {steps} | {f(final['deploy']['solve'])}, {f(final['deploy']['hack'])} "
          f"| {f(final['train']['solve'])}, {f(final['train']['hack'])} |")

print()
print("| variant | run | mean advantage of student rows by zone (keep · absorb · route), and of teacher rows, steps 0–11 / 12–23 / 24–35 |")
print("| --- | --- | --- |")
for v, run, d in runs():
    cells = []
    for third in d["thirds"].values():
        z = lambda k: f"{third[k]['adv']:+.2f}" if k in third else "–"
        cells.append(f"{z('student_keep')} · {z('student_absorb')} · {z('student_route')}; teacher {z('teacher')}")
    print(f"| {v.split('/')[1]} | {run} | {' / '.join(cells)} |")
