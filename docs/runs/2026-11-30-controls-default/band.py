"""routeV's score band against its antithetic placebo pair, from a workspace's train outputs (no evaluation
needed), by the functions A2's band table and C3 use (analysis.bands, analysis.claims.oriented):
   python docs/runs/2026-11-30-controls-default/band.py WORKSPACE SEED
Prints per run the mean over steps of the separation, the band of units pairs (the pairs' mean held-out gap
over the run's mean student width) and the width ratio; then routeV's band minus the draws' oriented mean; then
seed 004's R2 (rows of rollouts.jsonl with cos_before) and R3 (routed steps of steps.jsonl whose cos_after_step is
below cos_before_step by more than analysis.diagnostics.R3_TOL) per run."""
import sys
from pathlib import Path

import numpy as np

from vgrout import config
from vgrout.analysis import plan as plan_file
from vgrout.analysis.bands import pair_bands, pair_scores, score_kind, step_bands
from vgrout.analysis.claims import oriented
from vgrout.analysis.diagnostics import R3_TOL
from vgrout.io import read_jsonl
from vgrout.layout import Layout, run_name
from vgrout.routing.directions import gate_direction


def main(ws: Path, seed: int) -> None:
    layout = Layout(ws)
    params = config.load(ws / "params.yaml")
    plan = plan_file.load(ws / "analysis.yaml")
    frames, scores = [], {}
    for arm in ("routeV", "placeboV0p", "placeboV0n"):
        run = run_name(arm, seed)
        direction = gate_direction(arm, layout.vact(seed), seed, params.gate.placebo_seed)
        scores[run] = pair_scores(arm, layout, seed, direction, plan.heldout_modes, score_kind(layout.run(run)))
        b = step_bands(layout.run(run) / "rollouts.jsonl", scores[run], plan.band.q_lo, plan.band.q_hi)
        frames.append(b.assign(run=run, arm=arm, seed=seed))
    import pandas as pd
    bands = pd.concat(frames)
    per_pair = pair_bands(bands, scores)
    for run, g in bands.groupby("run", sort=False):
        pairs = per_pair[per_pair["run"] == run]["separation"]
        print(f"{run}: separation {g['separation'].mean():+.3f}, band (units pairs) {pairs.mean():+.3f} over "
              f"{len(pairs)} pairs, width ratio {g['width_ratio'].mean():.3f}, routed share {g['routed_share'].mean():.3f}")
    cells = {a: per_pair[per_pair["arm"] == a].pivot(index="seed", columns="pair", values="separation").to_numpy()
             for a in ("routeV", "placeboV0p", "placeboV0n")}
    control = np.mean([oriented(cells["placeboV0p"]), oriented(cells["placeboV0n"])], axis=0)
    print(f"routeV − the draws' oriented mean (units pairs): {cells['routeV'].mean() - control.mean():+.3f}; "
          f"signed mean of the draws: {np.mean([cells['placeboV0p'], cells['placeboV0n']]):+.3f}")
    for run in scores:
        rows = read_jsonl(layout.run(run) / "rollouts.jsonl")
        steps = [s for s in read_jsonl(layout.run_metrics(run) / "steps.jsonl") if s["n_route"] > 0]
        below = sum(s["cos_after_step"] < s["cos_before_step"] - R3_TOL for s in steps)
        print(f"{run}: R2 {sum(r.get('cos_before') is not None for r in rows)} of {len(rows)} rows; "
              f"R3 {below} of {len(steps)} routed steps")


if __name__ == "__main__":
    main(Path(sys.argv[1]), int(sys.argv[2]))
