"""The score band (C3 as seed 002 states it: "a Haar-random v_grad ... collapses the band width
(upper-lower ~ 0) ... real-V has a positive band (hack pairs separate from clean pairs along v_grad)").

Per run and training step, along the run's own gate direction (the `score` rollouts.jsonl logs) and
the contrast pairs' scores along the same direction, two statistics (the plan's band.statistic picks
the one C3 is decided on; A2 prints both):
  separation  = |mean hack-side pair score − mean clean-side pair score| / student width: the seed's
                band width, upper − lower, in units of the step's spread of student scores; about 0 for a
                Haar direction (the pairs do not separate along it). A width, so +h and −h (an antithetic
                draw) have the same one, and their mean is not 0 by construction
  width_ratio = student width / pair width: the step's student score spread over the pairs' spread
student width: the q_hi − q_lo quantile width of the step's student scores; pair width: the same over the
pairs' scores, hack and clean sides pooled. Beside them the step's routed share of student rows (a
yoked placebo matches its arm's by construction: the check that it did).

width_ratio shrinks when the pairs separate along the direction (their spread holds the separation),
so a direction that reads the hacks perfectly can have a smaller width_ratio than a Haar one: it is
printed, but seed 002's claim is the separation.

The pairs' scores along the run's direction come from extract_vact's outputs: the pairs' features
(runs/vact/SEED/{v_act,v_grad}_pair_features.safetensors, scored with any direction) where written,
else the scores metrics/vact/SEED.json logs for v_act and v_grad themselves (routeA, routeV). A Haar
placebo's or the heldout direction's pair scores are in neither unless the features file exists.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from vgrout import arms
from vgrout.analysis.diagnostics import gate_scores, load_rollouts, load_tensors
from vgrout.io import read_json
from vgrout.layout import Layout
from vgrout.routing.directions import SPACES

def banded(run: str) -> bool:
    """Runs whose gate ranks student rows by a direction: gated arms and their placebos (not those that rank
    by a uniform draw, a label or the NLL, which have no direction, nor tgate, which pins its student rows)."""
    a = arms.get(run)
    return a.gates_students and a.direction not in ("random", "nll")


def pair_scores(arm: str, layout: Layout, seed: int, direction) -> np.ndarray | str:
    """The contrast pairs' scores along the gate direction of a run of `arm` (a run's arm name: placebo_routeV)
    and seed, [2, pairs] (row 0 the hack sides, row 1 the clean), or why there are none."""
    name = SPACES[arms.space(arm)]
    features, vact_metrics = layout.pair_features(seed, name), layout.vact_metrics(seed)
    if features.exists():
        f = load_tensors(features)
        d = load_tensors(direction) if isinstance(direction, (str, Path)) else direction
        side = lambda s: {m.removeprefix(f"{s}."): t for m, t in f.items() if m.startswith(f"{s}.")}  # noqa: E731
        return np.stack([gate_scores(side("hack"), d), gate_scores(side("clean"), d)])
    if arms.get(arm).direction == name and vact_metrics.exists():  # the gate's direction is the logged one
        logged = read_json(vact_metrics).get(name, {}).get("pairs")
        if logged:
            return np.array([[p["hack_score"] for p in logged], [p["clean_score"] for p in logged]], dtype=float)
    return (f"the pairs' scores along {arm}'s direction are not logged: {vact_metrics} has them for {name} itself "
            f"only, and {features} (the pairs' features, which score any direction) was not written")


def width(scores: np.ndarray, q_lo: float, q_hi: float) -> float:
    lo, hi = np.quantile(scores, [q_lo, q_hi])
    return float(hi - lo)


def ratio(a: float, b: float) -> float:
    return a / b if b else np.nan  # nothing to scale by (all scored alike, or not logged): undefined


COLUMNS = ["step", "n_students", "student_width", "pair_width", "pair_gap", "separation", "width_ratio",
           "routed_share"]


def step_bands(rollouts_path: Path, pairs: np.ndarray | str, q_lo: float, q_hi: float) -> pd.DataFrame:
    """Per step of one run: the student scores' width, the pairs' width and gap (|hack − clean| means), the two
    band statistics (nan where the pairs' scores are not logged), and the share of student rows routed."""
    rows = pd.DataFrame(load_rollouts(rollouts_path))
    students = rows[rows["source"] == "student"]
    logged = not isinstance(pairs, str)
    pair_width = width(pairs.ravel(), q_lo, q_hi) if logged else np.nan
    pair_gap = abs(float(pairs[0].mean() - pairs[1].mean())) if logged else np.nan  # a width: the sign is h's
    out = []
    for step, g in students.groupby("step"):
        w = width(g["score"].to_numpy(float), q_lo, q_hi)
        out.append({"step": int(step), "n_students": len(g), "student_width": w, "pair_width": pair_width,
                    "pair_gap": pair_gap, "separation": ratio(pair_gap, w), "width_ratio": ratio(w, pair_width),
                    "routed_share": float((g["zone"] == "route").mean())})
    return pd.DataFrame(out, columns=COLUMNS)


def run_bands(runs, pairs: dict[str, np.ndarray | str], q_lo: float, q_hi: float) -> tuple[pd.DataFrame, dict]:
    """step_bands of every banded run (tables.Run records), long form with run, arm and seed; and per run why
    its band is missing, where it is."""
    frames, missing = [], {}
    for r in runs:
        if r.arm == arms.BASE or not banded(r.arm) or r.rollouts_path is None:
            continue
        p = pairs.get(r.run, f"no pair scores given for {r.run}")
        if isinstance(p, str):
            missing[r.run] = p
        frames.append(step_bands(r.rollouts_path, p, q_lo, q_hi).assign(run=r.run, arm=r.arm, seed=r.seed))
    columns = ["run", "arm", "seed", *COLUMNS]
    return (pd.concat(frames)[columns] if frames else pd.DataFrame(columns=columns)), missing
