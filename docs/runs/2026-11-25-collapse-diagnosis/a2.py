"""A2 of round 4 or 6 with the project's statistics (hierarchical bootstrap over seeds and problems,
95% intervals; hack over hackable problems), one table per comparison, from the committed files.
Each comparison puts a fix's routed arms beside the `none` and `absorb` runs that share its
advantage baseline. Run from the repository root:
    python docs/runs/2026-11-25-collapse-diagnosis/a2.py 4   (or 6, 7)"""
import json
import sys
import tempfile
from pathlib import Path

from vgrout import aggregate as agg

ROUNDS = {  # round -> comparison name -> the variant folder each arm's runs come from
    "4": {"tzgate": {"none": "control", "absorb": "control", "routeA": "tzgate", "placebo": "tzgate"},
          "sbase": {"none": "sbase", "routeA": "sbase", "placebo": "sbase"},
          "both": {"none": "sbase", "routeA": "both", "placebo": "both"}},
    "6": {"both": {"none": "both", "routeA": "both", "placebo": "both"}},  # fresh seeds 3-7
    "7": {"both": {"none": "both", "routeA": "both", "placebo": "both", "tgate": "both", "absorb": "both"}},
}
ROUND = sys.argv[1] if len(sys.argv) > 1 else "4"
HERE = Path(__file__).parent / f"round{ROUND}"
COMPARISONS = ROUNDS[ROUND]

claims = {}
for name, arms in COMPARISONS.items():
    with tempfile.TemporaryDirectory() as tmp:
        metrics = Path(tmp)
        for arm, variant in arms.items():
            for run in sorted((HERE / variant).glob(f"{arm}-*")):
                (metrics / run.name).symlink_to(run.resolve())
        runs = [agg.load_run(metrics, metrics, r, gate_inputs=False) for r in agg.find_runs(metrics)]
        con = agg.load_tables(runs)
        out_root = HERE / "a2" / name
        out = agg.Out(tables=out_root, png=out_root / "png", html=out_root / "html", plot_data=out_root / "plot_data")
        claims[name] = agg.claim_c1(agg.a2(con, out))
(HERE / "a2" / "claims.json").write_text(json.dumps(claims, indent=1) + "\n")
print(json.dumps(claims, indent=1))
