"""Within-mode AUROC of the score each run logged for its student rows (arm none and uniform: v_act's dot
product; routeV: v_grad's), hacked over not hacked, per loophole mode; descriptive, no null (exploratory:
chosen after the runs). Run from the repository root:
  python docs/runs/2026-11-29-real-student-pilot/round5/by_mode.py > docs/runs/2026-11-29-real-student-pilot/round5/by_mode.json"""
import gzip, json
from collections import defaultdict
from pathlib import Path
from vgrout import stats

here = Path(__file__).parent
out = {}
for run in ("none-1", "none-2", "routeV-1", "uniform-1"):
    by = defaultdict(list)
    for r in map(json.loads, gzip.open(here / f"pool_{run}/rollouts.jsonl.gz", "rt")):
        if r["source"] == "student":
            by[r["mode"]].append(r)
    out[run] = {m: {"n": len(rs), "n_hacked": sum(bool(r["hacked"]) for r in rs),
                    "auroc": stats.auroc([r["score"] for r in rs], [bool(r["hacked"]) for r in rs])
                    if 0 < sum(bool(r["hacked"]) for r in rs) < len(rs) else None}
                for m, rs in sorted(by.items())}
print(json.dumps(out, indent=1))
