"""A2 and A5 of this run re-made with the statistics of a later commit, from the files committed here
(per_mode_deploy.json, deploy_samples.csv, eval_curve.json and steps.jsonl of every run). A7 needs the
rollouts' activations, which were not brought back, so A7 and A5's per-mode gate AUROC are not re-made.
Run from the repository root: python docs/runs/2026-11-24-replication-h200x2/reaggregate.py"""
import json
from pathlib import Path

from vgrout import aggregate as agg

HERE = Path(__file__).parent
metrics, out_root = HERE / "metrics" / "runs", HERE / "reaggregated"
runs = [agg.load_run(metrics, HERE / "runs", name, gate_inputs=False) for name in agg.find_runs(metrics)]
con = agg.load_tables(runs)
out = agg.Out(tables=out_root, png=out_root / "png", html=out_root / "html", plot_data=out_root / "plot_data")
a2 = agg.a2(con, out)
c2 = agg.a5(con, runs, out)
claims = {"C1": agg.claim_c1(a2), "C2": c2}
(out_root / "claims.json").write_text(json.dumps(claims, indent=1) + "\n")
print(json.dumps(claims, indent=1))
