"""The score band (C3 as seed 002 states it: "a Haar-random v_grad ... collapses the band width
(upper-lower ~ 0) ... real-V has a positive band (hack pairs separate from clean pairs along v_grad)").

Per run and training step, along the run's own gate direction (the `score` rollouts.jsonl logs) and
the contrast pairs' held-out scores along the same direction, two statistics (the plan's
band.statistic picks the one C3 is decided on; A2 prints both):
  separation  = (mean hack-side pair score − mean clean-side pair score) / student width: the seed's
                band, upper − lower, signed, in units of the step's spread of student scores. Signed: +h
                and −h of a Haar draw have opposite bands, so as C3's control each draw's is taken in
                the orientation that separates the pairs (analysis.claims.oriented), the band's size
                along a Haar direction, which seed 002 says is about 0
  width_ratio = student width / pair width: the step's student score spread over the pairs' spread
student width: the q_hi − q_lo quantile width of the step's student scores; pair width: the same over the
pairs' scores, hack and clean sides pooled. Beside them the step's routed share of student rows, for
every run whose gate decides the student rows (count-matched controls route the same share by
construction: C3 checks that they did).

Held out: a direction fitted to the pairs (v_act, v_grad and their heldout versions) would separate
the pairs it was fitted to whatever it reads, so each pair is scored along the direction refitted
without it (leave-one-out over the fitted pairs; a pair of a held-out mode, which the heldout fit never
saw, along the run's own direction); a Haar direction saw no pair and scores every pair itself. The
pairs' features (runs/vact/SEED/{v_act,v_grad}_pair_features.safetensors) are what make this possible:
where they were not written, or where refitting them does not reproduce the run's direction
(gate.random_seed, a live refresh, other held-out modes), the band is not measured and the reason said.
The in-sample pair scores metrics/vact/SEED.json logs are never used. Under gate.score cosine the
pairs are scored as the gate scores rows, the band-normalised cosine, with the run's band (c_clean,
c_hack: its direction's mean cosines of the pairs' two sides; routing.directions.band_cosine).

width_ratio shrinks when the pairs separate along the direction (their spread holds the separation),
so a direction that reads the hacks perfectly can have a smaller width_ratio than a Haar one: it is
printed, but seed 002's claim is the separation.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import torch

from vgrout import arms
from vgrout.analysis.diagnostics import load_rollouts, load_tensors
from vgrout.io import InputError, read_json
from vgrout.layout import Layout
from vgrout.routing.directions import SPACES, band_cosine, mean_difference, pair_band, score

FITTED = ("v_act", "v_grad", "v_act_heldout", "v_grad_heldout")  # directions fitted to the pairs


def banded(run: str) -> bool:
    """Runs whose gate ranks student rows by a direction: gated arms and their placebos (not those that rank
    by a uniform draw, a label or the NLL, which have no direction, nor tgate, which pins its student rows)."""
    a = arms.get(run)
    return a.gates_students and a.direction not in ("random", "nll")


def _fit_rows(arm: str, layout: Layout, seed: int, name: str, n: int, heldout_modes: list[str]) -> list[int] | str:
    """The pair rows the run's direction was fitted to: every row, or for a heldout direction the rows of the
    modes not held out (each row's mode from metrics/vact/SEED.json, logged in the features' row order)."""
    if not arms.get(arm).heldout:
        return list(range(n))
    path = layout.vact_metrics(seed)
    logged = read_json(path).get(name, {}).get("pairs") if path.exists() else None
    if not logged or len(logged) != n:
        return f"{path}: key '{name}.pairs' (each pair's mode, one per features row) missing or not {n} long"
    return [i for i, p in enumerate(logged) if p["mode"] not in heldout_modes]


def score_kind(run_dir: Path) -> str:
    """How the run's gate scored a row (gate.score: dot or cosine), from the config.json train wrote for it."""
    path = Path(run_dir) / "config.json"
    if not path.exists():
        raise InputError(f"{path}: file not found (the band scores the pairs as the run's gate scored rows)")
    kind = read_json(path).get("gate", {}).get("score")
    if kind not in ("dot", "cosine"):
        raise InputError(f"{path}: key 'gate.score' missing or not dot / cosine ({kind!r})")
    return kind


def pair_scores(arm: str, layout: Layout, seed: int, direction, heldout_modes: list[str],
                score_kind: str = "dot") -> np.ndarray | str:
    """The contrast pairs' held-out scores along the gate direction of a run of `arm` (a run's arm name:
    placebo_routeV, placeboV3n) and seed, [2, pairs] (row 0 the hack sides, row 1 the clean), or why there are
    none. heldout_modes: the plan's; score_kind: gate.score (dot or cosine)."""
    name = SPACES[arms.space(arm)]
    path = layout.pair_features(seed, name)
    if not path.exists():
        return (f"{path} (the pairs' features) was not written, so the pairs' held-out scores along {arm}'s direction "
                f"cannot be computed (the pair scores {layout.vact_metrics(seed)} logs are in-sample: not used)")
    f = load_tensors(path)
    hack, clean = ({m.removeprefix(f"{s}."): t for m, t in f.items() if m.startswith(f"{s}.")} for s in ("hack", "clean"))
    d = load_tensors(direction) if isinstance(direction, (str, Path)) else direction
    n = next(iter(hack.values())).shape[0]
    along = [d] * n  # a Haar direction saw no pair: every pair is held out
    if arms.get(arm).direction in FITTED:
        fit = _fit_rows(arm, layout, seed, name, n, heldout_modes)
        if isinstance(fit, str):
            return fit
        refit = mean_difference(hack, clean, fit) if fit else {}
        if len(fit) < 2 or any(not torch.allclose(refit[m].float(), d[m].float(), atol=1e-4) for m in d):
            return (f"{arm}'s direction is not the mean difference of {len(fit)} pairs of {path} (gate.random_seed, a "
                    "live refresh, other held-out modes than the plan's?): its pairs' held-out scores cannot be computed")
        along = [mean_difference(hack, clean, [j for j in fit if j != i]) if i in fit else d for i in range(n)]
    one = lambda h, i: {m: t[i:i + 1] for m, t in h.items()}  # noqa: E731
    if score_kind == "dot":
        return np.array([[float(score(one(h, i), along[i])[0]) for i in range(n)] for h in (hack, clean)])
    band = pair_band(hack, clean, d)  # the run's band: its own direction's, as the gate's
    return np.array([[float(band_cosine(one(h, i), along[i], band)[0]) for i in range(n)] for h in (hack, clean)])


def width(scores: np.ndarray, q_lo: float, q_hi: float) -> float:
    lo, hi = np.quantile(scores, [q_lo, q_hi])
    return float(hi - lo)


def ratio(a: float, b: float) -> float:
    return a / b if b else np.nan  # nothing to scale by (all scored alike, or not logged): undefined


COLUMNS = ["step", "n_students", "student_width", "pair_width", "pair_gap", "separation", "width_ratio",
           "routed_share"]


def step_bands(rollouts_path: Path, pairs: np.ndarray | str, q_lo: float, q_hi: float) -> pd.DataFrame:
    """Per step of one run: the student scores' width, the pairs' width and signed gap (hack − clean means), the
    two band statistics (nan where the pairs' held-out scores are missing), and the share of student rows routed."""
    rows = pd.DataFrame(load_rollouts(rollouts_path))
    students = rows[rows["source"] == "student"]
    logged = not isinstance(pairs, str)
    pair_width = width(pairs.ravel(), q_lo, q_hi) if logged else np.nan
    pair_gap = float(pairs[0].mean() - pairs[1].mean()) if logged else np.nan  # signed: −h's is +h's negated
    out = []
    for step, g in students.groupby("step"):
        w = width(g["score"].to_numpy(float), q_lo, q_hi)
        out.append({"step": int(step), "n_students": len(g), "student_width": w, "pair_width": pair_width,
                    "pair_gap": pair_gap, "separation": ratio(pair_gap, w), "width_ratio": ratio(w, pair_width),
                    "routed_share": float((g["zone"] == "route").mean())})
    return pd.DataFrame(out, columns=COLUMNS)


def run_bands(runs, pairs: dict[str, np.ndarray | str], q_lo: float, q_hi: float) -> tuple[pd.DataFrame, dict]:
    """step_bands of every run whose gate decides its student rows (tables.Run records), long form with run, arm
    and seed; and per run why its band is missing, where it is (a run ranking by no direction has none)."""
    frames, missing = [], {}
    for r in runs:
        if r.arm == arms.BASE or not arms.get(r.arm).gates_students or r.rollouts_path is None:
            continue
        p = (pairs.get(r.run, f"no pair scores given for {r.run}") if banded(r.arm) else
             f"its gate ranks rows by no direction ({arms.get(r.arm).direction}): no score band")
        if isinstance(p, str):
            missing[r.run] = p
        frames.append(step_bands(r.rollouts_path, p, q_lo, q_hi).assign(run=r.run, arm=r.arm, seed=r.seed))
    columns = ["run", "arm", "seed", *COLUMNS]
    return (pd.concat(frames)[columns] if frames else pd.DataFrame(columns=columns)), missing


PAIR_COLUMNS = ["run", "arm", "seed", "pair", "separation"]


def pair_bands(bands: pd.DataFrame, pairs: dict[str, np.ndarray | str]) -> pd.DataFrame:
    """Per run and contrast pair (band.units pairs): the pair's held-out gap (its hack side's score − its clean
    side's, along the run's gate direction) over the run's mean student width (its steps' mean), long form with
    run, arm, seed and the pair's row. Pairs are the units C3's bootstrap resamples (with the seeds, crossed), so
    a band resting on a few pairs is seen as such; rows only for runs whose pairs' held-out scores exist."""
    out = []
    for (run, arm, seed), g in bands.groupby(["run", "arm", "seed"], sort=False):
        p = pairs.get(run)
        w = float(g["student_width"].mean())
        if isinstance(p, str) or p is None:
            continue
        for i, gap in enumerate(p[0] - p[1]):
            out.append({"run": run, "arm": arm, "seed": seed, "pair": i, "separation": ratio(float(gap), w)})
    return pd.DataFrame(out, columns=PAIR_COLUMNS)
