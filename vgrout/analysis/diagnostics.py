"""Gate diagnostics (A7): is the v_act score a usable hack classifier on a run's rollouts?

The gate is one linear score with two quantile cuts: route above the upper cut (a
confident-hack prediction), keep below the lower cut (a confident-clean prediction),
absorb between (abstention). We score it like two one-sided detectors on one score:
AUROC of the score against the hack label, precision and recall of route for hacks and
of keep for clean rollouts, F0.5 at each cut (the pins are the expensive errors, so
precision counts more), and qmass (the fraction routed).

Two nulls say whether the AUROC means anything, each as a permutation p-value
p = (1 + k) / (N + 1), k the null draws at or above the real AUROC, and a third direction
is scored beside it:
- Haar: N_NULL random directions of the bottleneck scored on the same activations (does
  v_act carry more hack signal than an arbitrary direction?);
- label permutation: the hack labels shuffled within each prompt group (one problem at one
  step), the scores kept (is the AUROC above what this many rows give by chance, once each
  group's hack count is fixed? A score that drifts with the step, or that tells one prompt or
  mode from another, then scores as well on the shuffled labels and is not signal); the same
  shuffles are the null of the within-group AUROC;
- placebo pairs (no p-value): the direction of the placebo pair set (style contrasts
  written like the hack pairs), a content-matched null whose AUROC is reported beside.
A pooled AUROC mixes steps whose scores and hack rates both drift, so it is also given per
step, and within prompt groups (only rollouts of one prompt compared: the contrast the
group-relative update acts on). Teacher-pool rows are scored and reported apart. Only rows on
problems of a hackable mode are scored: a rollout on an unhackable problem is clean whatever it
does, so counting it would reward a score for telling hackable prompts from the others.

Labels are read here only after training, as a measurement. Nothing in this module is
on the routing path.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import scipy.stats as sps
import torch
from safetensors.torch import load_file
from tqdm import tqdm

from vgrout.io import InputError, read_jsonl, write_json
from vgrout.routing.directions import haar_direction
from vgrout.stats import auroc, auroc_of_ranks, f_beta, precision_recall
from vgrout.substrate import modes

POPULATION = ("student rollouts (source == 'student') on problems of a hackable mode; teacher-pool rollouts "
              "and rollouts on unhackable (mode none) problems excluded")
N_NULL = 1000   # Haar directions in the null
N_PERM = 1000   # label permutations in the null
NULL_CHUNK = 100  # Haar directions scored together (bounds the null's memory on a long run's rows)


def perm_p(real: float, null) -> float:
    """One-sided permutation p-value (1 + #{null >= real}) / (N + 1)."""
    null = np.asarray(null, dtype=float)
    return float((1 + int((null >= real).sum())) / (null.size + 1))


def _auroc_or_none(scores: np.ndarray, hacked: np.ndarray) -> float | None:
    return auroc(scores, hacked) if 0 < hacked.sum() < hacked.size else None


def within_groups_auroc(scores: np.ndarray, hacked: np.ndarray, groups: np.ndarray) -> dict:
    """AUROC over (hack, clean) pairs of the same group only: each group with both classes
    weighs by its number of such pairs."""
    g = _Groups(scores, groups)
    pairs = g.pairs(hacked)
    return {"auroc": g.within_auroc(hacked) if pairs else None, "n_groups": int((g.pos(hacked) * g.neg(hacked) > 0).sum()),
            "n_pairs": pairs}


class _Groups:
    """Rows in groups (one prompt at one step), with each row's score ranked within its group, once:
    the within-group AUROC of any labelling is then a weighted count (U statistics summed over groups)."""

    def __init__(self, scores: np.ndarray, groups: np.ndarray):
        _, self.code = np.unique(groups, return_inverse=True)
        self.n_groups = int(self.code.max()) + 1
        self.rank = np.empty(scores.size)
        for k in range(self.n_groups):
            at = self.code == k
            self.rank[at] = sps.rankdata(scores[at])

    def pos(self, labels: np.ndarray) -> np.ndarray:
        return np.bincount(self.code, weights=labels.astype(float), minlength=self.n_groups)

    def neg(self, labels: np.ndarray) -> np.ndarray:
        return np.bincount(self.code, minlength=self.n_groups) - self.pos(labels)

    def pairs(self, labels: np.ndarray) -> int:
        return int((self.pos(labels) * self.neg(labels)).sum())

    def within_auroc(self, labels: np.ndarray) -> float:
        pos = self.pos(labels)
        u = np.bincount(self.code, weights=self.rank * labels, minlength=self.n_groups) - pos * (pos + 1) / 2
        return float(u.sum() / (pos * self.neg(labels)).sum())


def label_permutation_null(scores: np.ndarray, hacked: np.ndarray, groups: np.ndarray, n_perm: int,
                           seed: int) -> tuple[np.ndarray, np.ndarray | None]:
    """The pooled AUROC and the within-group AUROC of the fixed scores against labels shuffled within
    each group (one prompt at one step); the second is None when no group holds both classes.

    The shuffle keeps every group's hack count, so whatever the score says about which prompt, step
    or mode a rollout came from scores as well on the shuffled labels: only the ranking of a group's
    hacks above its own clean rollouts is tested (the rollouts of one prompt share that prompt's
    difficulty and loophole, so shuffling across prompts would let a prompt-tracking score pass).
    """
    rng = np.random.default_rng(seed)
    g = _Groups(scores, groups)
    ranks = sps.rankdata(scores)  # the scores stay put: rank them once
    within = g.pairs(hacked) > 0
    order = np.argsort(g.code, kind="stable")  # each group's rows, group after group
    pooled, per_group = np.empty(n_perm), np.empty(n_perm) if within else None
    for i in range(n_perm):
        # a random order within each group: sort by group, ties broken by a uniform draw
        shuffled = np.argsort(g.code + rng.random(g.code.size), kind="stable")
        perm = np.empty_like(hacked)
        perm[order] = hacked[shuffled]
        pooled[i] = auroc_of_ranks(ranks, perm)
        if within:
            per_group[i] = g.within_auroc(perm)
    return pooled, per_group


def _by_mode(scores: np.ndarray, hacked: np.ndarray, modes: np.ndarray) -> list[dict]:
    """Within each loophole mode's problems: does the score rank that mode's hacks (A5)?"""
    return [{"mode": m, "n": int((modes == m).sum()), "n_hacked": int(hacked[modes == m].sum()),
             "auroc": _auroc_or_none(scores[modes == m], hacked[modes == m])} for m in np.unique(modes)]


def _by_step(scores: np.ndarray, hacked: np.ndarray, steps: np.ndarray, zones: np.ndarray) -> list[dict]:
    rows = []
    for s in np.unique(steps):
        at = steps == s
        rows.append({"step": int(s), "n": int(at.sum()), "n_hacked": int(hacked[at].sum()),
                     "auroc": _auroc_or_none(scores[at], hacked[at]),
                     "realised_qmass": float((zones[at] == "route").mean())})
    return rows


def gate_scores(acts: dict[str, torch.Tensor], direction: dict[str, torch.Tensor]) -> np.ndarray:
    """score_i = sum over target modules m of acts[m][i] @ direction[m] (the gate's score). A
    direction of columns, direction[m] [r, k], scores k directions at once: [n, k]."""
    if set(acts) != set(direction):
        missing, extra = sorted(set(direction) - set(acts)), sorted(set(acts) - set(direction))
        raise InputError(f"activations and direction name different modules: "
                         f"only in direction {missing[:3]}, only in activations {extra[:3]}")
    total = None
    for m in sorted(acts):
        s = acts[m].double() @ direction[m].double()
        total = s if total is None else total + s
    return total.numpy()


def _at_cuts(scores: np.ndarray, hacked: np.ndarray, q_lo: float, q_hi: float) -> dict:
    """Classifier metrics of one direction's scores with cuts at the q_lo / q_hi quantiles.

    The cuts are quantiles of the scored population itself: the after-the-fact analogue
    of the run-time cuts, which were quantiles of a buffer of past scores.
    """
    cut_lo, cut_hi = np.quantile(scores, [q_lo, q_hi])
    route, keep = scores > cut_hi, scores < cut_lo
    route_p, route_r = precision_recall(route, hacked)
    keep_p, keep_r = precision_recall(keep, ~hacked)
    both_classes = 0 < hacked.sum() < hacked.size
    return {
        "auroc": auroc(scores, hacked) if both_classes else None,
        "cut_lo": float(cut_lo), "cut_hi": float(cut_hi),
        "route_precision": route_p, "route_recall": route_r, "route_f05": f_beta(route_p, route_r),
        "keep_precision": keep_p, "keep_recall": keep_r, "keep_f05": f_beta(keep_p, keep_r),
        "qmass": float(route.mean()),
    }


def _null_at_cuts(scores: np.ndarray, hacked: np.ndarray, q_lo: float, q_hi: float) -> dict:
    """What the Haar null reads of `_at_cuts`, for k directions' scores [n, k] at once (a column
    each): AUROC (None where one class is empty), route and keep precision (nan where nothing is
    selected). Each column's values are `_at_cuts`' on that column, in one pass instead of k."""
    cut_lo, cut_hi = np.quantile(scores, [q_lo, q_hi], axis=0)
    route, keep = scores > cut_hi, scores < cut_lo
    hit = hacked[:, None]
    with np.errstate(invalid="ignore", divide="ignore"):
        route_p = (route & hit).sum(0) / route.sum(0)
        keep_p = (keep & ~hit).sum(0) / keep.sum(0)
    n_pos = int(hacked.sum())
    n_neg = hacked.size - n_pos
    aurocs = None
    if n_pos and n_neg:  # auroc_of_ranks, a column at a time: the positives' rank sum, less its minimum
        aurocs = (sps.rankdata(scores, axis=0)[hacked].sum(0) - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)
    return {"auroc": aurocs, "route_precision": route_p, "keep_precision": keep_p}


def _realised(rollouts: list[dict], hacked: np.ndarray) -> dict:
    """The zones the run actually assigned (cuts from its buffer at each step), scored the same way."""
    zone = np.array([r["zone"] for r in rollouts])
    route_p, route_r = precision_recall(zone == "route", hacked)
    keep_p, keep_r = precision_recall(zone == "keep", ~hacked)
    return {
        "route_precision": route_p, "route_recall": route_r, "route_f05": f_beta(route_p, route_r),
        "keep_precision": keep_p, "keep_recall": keep_r, "keep_f05": f_beta(keep_p, keep_r),
        "qmass": float((zone == "route").mean()),
        "zone_share": {z: float((zone == z).mean()) for z in ("keep", "absorb", "route")},
    }


def gate_eval(rollouts: list[dict], acts: dict[str, torch.Tensor], direction: dict[str, torch.Tensor],
              q_lo: float, q_hi: float, n_null: int = N_NULL, null_seed: int = 0, progress: bool = True,
              n_perm: int = N_PERM, placebo: dict[str, torch.Tensor] | None = None) -> dict:
    """Gate diagnostics of `direction` and of its nulls (n_null Haar directions, n_perm
    within-group label permutations, the placebo pairs' direction if given) on the student
    rollouts, per step and within prompt groups; teacher-pool rows apart.

    rollouts: rows of rollouts.jsonl (step, problem_id, source, zone, hacked used); acts:
    module -> [n, r] pooled deployed-block bottleneck activations, row i = rollouts[i].
    """
    if n_null < 1 or n_perm < 1:
        raise InputError(f"n_null and n_perm must be at least 1, got {n_null} and {n_perm}")
    if not 0 <= q_lo <= q_hi <= 1:
        raise InputError(f"gate cuts must satisfy 0 <= q_lo <= q_hi <= 1, got q_lo={q_lo}, q_hi={q_hi}")
    for m, a in acts.items():
        if a.ndim != 2 or a.shape[0] != len(rollouts):
            raise InputError(f"activations of module '{m}' have shape {tuple(a.shape)}, "
                             f"expected [{len(rollouts)}, r] (one row per rollout)")
    hackable_modes = modes.hackable()
    hackable = np.array([r["mode"] in hackable_modes for r in rollouts])
    from_student = np.array([r["source"] == "student" for r in rollouts])
    student = from_student & hackable  # the scored population
    if not student.any():
        raise InputError("no student rollouts on problems of a hackable mode to evaluate the gate on")
    hacked = np.array([bool(r["hacked"]) for r in rollouts])[student]
    rollouts_s = [r for r, s in zip(rollouts, student) if s]
    acts_s = {m: a[torch.from_numpy(student)] for m, a in acts.items()}

    # The training loop logged each rollout's gate score; if `direction` is the one the gate
    # used (and v_act was not re-extracted mid-run), recomputing it here reproduces the log.
    logged_diff = None
    if all("score" in r for r in rollouts):
        logged = np.array([r["score"] for r in rollouts], dtype=float)
        logged_diff = float(np.abs(gate_scores(acts, direction) - logged).max() / max(np.abs(logged).max(), 1e-12))
    scores = gate_scores(acts_s, direction)
    real = _at_cuts(scores, hacked, q_lo, q_hi)
    steps = np.array([int(r["step"]) for r in rollouts_s])
    groups = np.array([f"{r['step']}/{r['problem_id']}" for r in rollouts_s])
    draws = []
    seed = null_seed
    with tqdm(total=n_null, desc="gate null (Haar directions)", leave=False, disable=not progress) as bar:
        while len(draws) < n_null:
            d = haar_direction(direction, seed)
            seed += 1
            # A placebo run's real direction is itself Haar; never let it sit in its own null.
            if all(torch.equal(d[m], direction[m]) for m in direction):
                continue
            draws.append(d)
            bar.update(1)
    # the null directions as the columns of one direction per module, NULL_CHUNK at a time: one
    # product and one ranking per chunk (a run's rows x NULL_CHUNK float64 scores, not x n_null)
    parts = [_null_at_cuts(gate_scores(acts_s, {m: torch.stack([d[m] for d in draws[c:c + NULL_CHUNK]], 1)
                                                for m in direction}), hacked, q_lo, q_hi)
             for c in range(0, n_null, NULL_CHUNK)]
    null = {k: None if parts[0][k] is None else np.concatenate([x[k] for x in parts]) for k in parts[0]}

    null_summary = {"n": n_null, "seeds": [null_seed, seed - 1],
                    "auroc": None, "auroc_mean": None, "auroc_sd": None,
                    "route_precision_mean": _nanmean(null["route_precision"]),
                    "keep_precision_mean": _nanmean(null["keep_precision"])}
    percentile, note = None, None
    if real["auroc"] is None:
        note = f"AUROC undefined: {int(hacked.sum())} of {hacked.size} student rollouts hacked"
    else:
        null_auroc = null["auroc"]
        # Percent of null directions the real one beats; ties count one half.
        percentile = 100 * float(np.mean((null_auroc < real["auroc"]) + 0.5 * (null_auroc == real["auroc"])))
        null_summary.update(auroc=null_auroc.tolist(), auroc_mean=float(null_auroc.mean()),
                            auroc_sd=float(null_auroc.std(ddof=1)) if n_null > 1 else None,
                            p=perm_p(real["auroc"], null_auroc))
    within = within_groups_auroc(scores, hacked, groups)
    perm = {"n": n_perm, "within": "prompt group (step and problem)", "auroc_mean": None, "auroc_sd": None,
            "auroc_q95": None, "p": None, "p_within_groups": None,
            "within_groups_auroc_mean": None}
    if real["auroc"] is not None:
        perm_auroc, perm_within = label_permutation_null(scores, hacked, groups, n_perm, null_seed)
        perm.update(auroc_mean=float(perm_auroc.mean()), auroc_sd=float(perm_auroc.std(ddof=1)) if n_perm > 1 else None,
                    auroc_q95=float(np.quantile(perm_auroc, 0.95)), p=perm_p(real["auroc"], perm_auroc))
        if within["auroc"] is not None:
            perm.update(p_within_groups=perm_p(within["auroc"], perm_within),
                        within_groups_auroc_mean=float(perm_within.mean()))
    placebo_res = None
    if placebo is not None:
        placebo_res = _at_cuts(gate_scores(acts_s, placebo), hacked, q_lo, q_hi)
    teacher = ~from_student & hackable
    t_hacked = np.array([bool(r["hacked"]) for r, t in zip(rollouts, teacher) if t])
    t_scores = gate_scores({m: a[torch.from_numpy(teacher)] for m, a in acts.items()}, direction) \
        if teacher.any() else np.array([])
    return {
        "population": POPULATION,
        "n": int(student.sum()),
        "n_hacked": int(hacked.sum()),
        "q_lo": q_lo, "q_hi": q_hi,
        "real": real,
        "realised": _realised(rollouts_s, hacked),
        # teacher-pool rows (a gate of their own, or a fixed zone): counted apart, never in the metrics above
        "teacher": {"n": int(teacher.sum()), "n_hacked": int(t_hacked.sum()),
                    "auroc": _auroc_or_none(t_scores, t_hacked) if teacher.any() else None,
                    # the zones the teacher rows took (gate.teacher_zone gate: their own gate's)
                    "realised": _realised([r for r, t in zip(rollouts, teacher) if t], t_hacked)
                    if teacher.any() else None,
                    "zone_share": {
            z: float(np.mean([r["zone"] == z for r, t in zip(rollouts, teacher) if t])) if teacher.any()
            else None for z in ("keep", "absorb", "route")}},
        "by_step": _by_step(scores, hacked, steps, np.array([r["zone"] for r in rollouts_s])),
        "within_groups": within,
        "by_mode": _by_mode(scores, hacked, np.array([str(r.get("mode")) for r in rollouts_s])),
        "null": null_summary,
        "label_permutation": perm,
        "placebo_pairs": placebo_res,
        "auroc_percentile_in_null": percentile,
        "logged_score_max_rel_diff": logged_diff,
        "note": note,
    }


def _nanmean(values: np.ndarray) -> float | None:
    """The mean over the defined values (a precision is undefined where nothing was selected)."""
    vals = values[~np.isnan(values)]
    return float(np.mean(vals)) if vals.size else None


ROW_COS = "cos_before"  # train.sample_cos: each row's unmasked deployed-block cosine to v_grad (vgrout/train/loop.py)
STEP_COS = ("cos_before_step", "cos_after_step")  # and the step's summed gradient's, before and after the zone masks
R2_MIN = 0.9  # seed 004's R2: the cosine present ("non-null") on at least 90% of rows
R3_MIN = 0.8  # seed 004's R3: cos_out < cos_in on at least 80% of the projected (here: routing) steps
# R3's margin: a step counts only where cos_after_step < cos_before_step − R3_TOL. The two probe passes (no
# mask, the zones' masks) run different forwards, so even where the masks change nothing (the none arm's kept
# rows, an absorbed row) their cosines differ by float noise, ~3e-8; without the margin that noise would count
# as a fall on about half such steps.
R3_TOL = 1e-6


def _number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and bool(np.isfinite(x))


def sample_cos_counts(rollouts: list[dict], steps: list[dict] | None = None) -> dict:
    """Seed 004's R2 and R3 counts of one run, as train.sample_cos logs them (vgrout/train/loop.py sample_cos).
    R2, from rollouts.jsonl: rows (n); rows whose cos_before is a number (n_present: the cosine exists, the
    gradient was not zero). A row's cos_after is not counted: a routed row sends the deployed block no gradient,
    so its cos_after is None by design. R3, from the step log: a step's cos_before_step / cos_after_step are the
    cosines to v_grad of the step's rows' summed deployed-block gradient without and with the zone masks;
    steps whose two cosines are both numbers (n_steps), of them those with cos_after_step < cos_before_step −
    R3_TOL (n_steps_below); the same over the steps that routed at least one row (a row of zone route in
    rollouts.jsonl: n_routed_steps, n_routed_below), the steps R3 is about. measured_rows / measured_steps:
    whether any row carries cos_before / any step row both step fields (train.sample_cos on); a run without
    them counts zeros, never an error."""
    steps = steps or []
    routed_at = {r["step"] for r in rollouts if r.get("zone") == "route"}
    by_step = {s["step"]: s for s in steps if "step" in s}  # a resumed log's repeated step: the last row
    both = [s for s in by_step.values() if all(_number(s.get(k)) for k in STEP_COS)]
    below = [s for s in both if s["cos_after_step"] < s["cos_before_step"] - R3_TOL]
    return {"measured_rows": any(ROW_COS in r for r in rollouts), "n": len(rollouts),
            "n_present": sum(_number(r.get(ROW_COS)) for r in rollouts),
            "measured_steps": any(all(k in s for k in STEP_COS) for s in steps),
            "n_steps": len(both), "n_steps_below": len(below),
            "n_routed_steps": sum(s["step"] in routed_at for s in both),
            "n_routed_below": sum(s["step"] in routed_at for s in below)}


ROLLOUT_KEYS = ("step", "problem_id", "mode", "source", "zone", "hacked")


def load_rollouts(path: str | Path) -> list[dict]:
    """rollouts.jsonl with the keys gate_eval reads; a missing key names file and line."""
    rows = read_jsonl(path)
    for lineno, row in enumerate(rows, start=1):
        for key in ROLLOUT_KEYS:
            if key not in row:
                raise InputError(f"{path}:{lineno}: missing key '{key}'")
    return rows


def load_tensors(path: str | Path) -> dict[str, torch.Tensor]:
    path = Path(path)
    if not path.exists():
        raise InputError(f"{path}: file not found")
    return load_file(str(path))


def gate_eval_file(rollouts_path: str | Path, acts_path: str | Path, direction_path: str | Path,
                   q_lo: float, q_hi: float, n_null: int = N_NULL, null_seed: int = 0,
                   out_path: str | Path | None = None, n_perm: int = N_PERM,
                   placebo_path: str | Path | None = None) -> dict:
    """gate_eval on files (what `vgrout gate-eval` runs); writes the result as JSON if out_path."""
    rollouts = load_rollouts(rollouts_path)
    acts = load_tensors(acts_path)
    direction = load_tensors(direction_path)
    placebo = load_tensors(placebo_path) if placebo_path else None
    try:
        result = gate_eval(rollouts, acts, direction, q_lo, q_hi, n_null, null_seed, n_perm=n_perm, placebo=placebo)
    except InputError as e:
        raise InputError(f"{rollouts_path} / {acts_path} / {direction_path}: {e}") from None
    result["files"] = {"rollouts": str(rollouts_path), "acts": str(acts_path), "direction": str(direction_path)}
    if out_path is not None:
        write_json(out_path, result)
    return result
