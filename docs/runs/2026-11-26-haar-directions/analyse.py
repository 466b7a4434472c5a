"""routeA and tgate against the mean of three placebos yoked to each, one per Haar direction
(gate.placebo_seed 1, 101, 201), paired by seed and problem with A2's bootstrap (vgrout.stats);
and each direction's placebo per seed beside the arm. The placebo_seed 1 runs are those of
../2026-11-26-replication-h100 (routeA's placebo) and ../2026-11-26-replication-yoked (tgate's);
101 and 201 are this run's. Writes metrics/haar_directions.csv. Run from the repository root:
    python docs/runs/2026-11-26-haar-directions/analyse.py"""
from pathlib import Path

import numpy as np
import pandas as pd

from vgrout.analysis.contrasts import BOOT_SEED, DIFF, RATE
from vgrout.layout import DEPLOY_SAMPLES
from vgrout.stats import hierarchical_bootstrap, paired_t

HERE = Path(__file__).parent
RUNS = {"replication": HERE.parent / "2026-11-26-replication-h100" / "metrics" / "runs",
        "yoked": HERE.parent / "2026-11-26-replication-yoked" / "metrics" / "runs", "here": HERE / "metrics" / "runs"}
SEEDS = [0, 1, 2, 3, 4]
# (arm, placebo_seed) -> where its run of seed s sits
PLACEBOS = {"routeA": {1: (RUNS["replication"], "placebo-{s}"), 101: (RUNS["here"], "ps101_placebo_routeA-{s}"),
                       201: (RUNS["here"], "ps201_placebo_routeA-{s}")},
            "tgate": {1: (RUNS["yoked"], "placebo_tgate-{s}"), 101: (RUNS["here"], "ps101_placebo_tgate-{s}"),
                      201: (RUNS["here"], "ps201_placebo_tgate-{s}")}}


def cells(root: Path, name: str) -> pd.Series:
    """Per hackable test problem, the deploy samples' mean hacked (A2's cells)."""
    d = pd.read_csv(root / name / f"{DEPLOY_SAMPLES}.gz")  # committed gzipped
    d = d[(d["view"] == "deploy") & (d["hackable"] == 1)]
    return d.groupby("problem_id")["hacked"].mean().sort_index()


def matrix(runs: list[tuple[Path, str]]) -> np.ndarray:
    rows = [cells(root, name) for root, name in runs]
    assert all(list(r.index) == list(rows[0].index) for r in rows), "runs graded different problems"
    return np.stack([r.to_numpy() for r in rows])


table = []
for arm, placebos in PLACEBOS.items():
    x = matrix([(RUNS["replication"], f"{arm}-{s}") for s in SEEDS])
    per_dir = {ps: matrix([(root, name.format(s=s)) for s in SEEDS]) for ps, (root, name) in placebos.items()}
    mean_placebo = np.mean(list(per_dir.values()), axis=0)  # per seed and problem: the directions' mean
    b = hierarchical_bootstrap(x, mean_placebo, seed=BOOT_SEED, support=DIFF)
    level = hierarchical_bootstrap(mean_placebo, seed=BOOT_SEED, support=RATE)
    below = sum(int(x[i].mean() < p[i].mean()) for p in per_dir.values() for i in range(len(SEEDS)))
    t = paired_t(x.mean(axis=1), mean_placebo.mean(axis=1))  # over seeds: no sampling floor (a mean of 3 runs)
    table.append({"arm": arm, "arm_hack": x.mean(), "placebo_mean_hack": level.estimate, "placebo_lo": level.lo,
                  "placebo_hi": level.hi, "delta": b.estimate, "delta_lo": b.lo, "delta_hi": b.hi,
                  "widened_by": b.widened_by, "t": t.t, "p_paired_t": t.p, "arm_below_placebo": f"{below}/{len(SEEDS) * len(per_dir)}",
                  **{f"seed{s}_arm": x[i].mean() for i, s in enumerate(SEEDS)},
                  **{f"seed{s}_ps{ps}": p[i].mean() for ps, p in per_dir.items() for i, s in enumerate(SEEDS)}})
out = pd.DataFrame(table)
out.to_csv(HERE / "metrics" / "haar_directions.csv", index=False)
print(out.T.to_string(float_format=lambda v: f"{v:.3f}"))
