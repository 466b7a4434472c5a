"""The claims' verdicts: a pure function of the pre-registered plan (analysis.plan) and the runs' records.

Nothing here reads params, constants of the tables or what the runs happen to contain beyond the
plan's arms and seeds: every setting that decides (arm, controls, outcome, population, direction,
margin, seeds, min_seeds, α, sidedness, family, band statistic and quantiles, the Haar floor's
directions, bootstrap, held-out modes) is the plan's, and each verdict records the plan's sha256, so a
verdict cannot change unless the plan's hash, the data, or the code that computes it does; summary.json
records that code's hash beside the plan's (`code_sha256`).

A test is A2's hierarchical bootstrap (contrasts) of the paired Δ arm − control over the plan's
seeds and the outcome's units (test problems; training steps for the band and the routed share),
the control the mean of the listed arms (antithetic draws: +h and −h of each k, a band test's each in the
orientation that separates the pairs, `oriented`: the band's size along a Haar direction), its interval at the
level the claim's α gives (two-sided: 1 − α; one-sided: 1 − 2α, of which one bound decides), α
divided as Holm's step-down over the claims of the claim's family; where the test says paired_t, the paired t over
the seeds (contrasts' t) must clear 0 too, its one-sided p in the test's direction below α (one-sided) or α/2
(two-sided). A claim holds when every one of
its tests passes (intersection-union: no correction within a claim). Statuses, first that applies:
`not run` (an arm or control has no run for a plan seed), `undecided` (ran, but the outcome cannot be
measured: the pairs' held-out scores not computable, other held-out modes recorded; or the runs are not as
the plan requires: the runs record different gate.cut_rule (another gate), the pool not withheld as its withhold_pool
says, none's hack rate (or, headroom_over base, its rise over the base model's: a failed run) below its headroom;
or, after the tests, a manipulation check failed: the controls were not count-matched), `insufficient`
(fewer plan seeds than min_seeds: the tests are printed, the claim neither holds nor fails), then
`holds` / `does not hold`; and last, in place of those two, `exploratory` (plan before run: a run the claim
reads was made under another plan than the deciding one, or under none recorded; train records the plan's
content hash in each run's config.json, `plan_sha256`), or the plan registers the claim as exploratory
(confirmatory false).
"""
from __future__ import annotations

import dataclasses
import hashlib
import itertools
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pandas as pd

from vgrout.analysis.contrasts import DIFF, _seed_sampling_var, ci_text, matrix, problem_means
from vgrout.analysis.plan import HAAR_Q95, Claim, Plan, PlanId, Test
from vgrout.arms import BASE
from vgrout.arms import space as arm_space
from vgrout.io import InputError, read_json
from vgrout.layout import run_name
from vgrout.routing.directions import SPACES
from vgrout.stats import hierarchical_bootstrap, paired_t

# a test's outcome and population -> A2's metric (contrasts.A2_METRICS); band is C3's, from analysis.bands
METRIC = {("hack", "hackable"): "hack_hackable", ("hack", "heldout_modes"): "hack_hackable", ("solve", "all"): "solve"}
LABEL = {("hack", "hackable"): "deploy hack, hackable problems",
         ("hack", "heldout_modes"): "deploy hack, held-out modes' problems", ("solve", "all"): "deploy solve, all problems",
         ("band", "student_rows"): "score band (student rows, per step)",
         ("routed_share", "student_rows"): "routed share (student rows, per step)"}
PER_STEP = ("band", "routed_share")  # outcomes whose units are training steps (analysis.bands), not test problems


@dataclasses.dataclass(frozen=True)
class ClaimData:
    """What the verdicts read: per run and test problem the deploy cells (contrasts.problem_means), the
    held-out modes each arm's runs record, per run and step the score band (analysis.bands) and why a
    run's band is missing."""
    cells: pd.DataFrame
    held: dict[str, tuple[str, ...]]
    bands: pd.DataFrame
    band_missing: dict[str, str]
    withheld: dict[str, tuple[str, ...] | None] = dataclasses.field(default_factory=dict)  # run -> the modes whose
    # pool rows it never trained on (config.json's `withheld`, params vact.withhold_pool), None where not recorded
    pair_bands: pd.DataFrame | None = None  # per run and contrast pair its separation (bands.pair_bands; band.units pairs)
    # run -> the plan hash train recorded in its config.json (`plan_sha256`), None where it recorded none. A run
    # missing here counts as recorded under none: the default can only make a verdict exploratory, never confirm it
    plan_hashes: dict[str, str | None] = dataclasses.field(default_factory=dict)
    # run -> its gate.cut_rule as train recorded it in config.json (buffer or step), None where not recorded. A run
    # missing here counts as recorded under none: where every run of a claim records none, nothing is compared
    cut_rules: dict[str, str | None] = dataclasses.field(default_factory=dict)
    # run seed -> {direction name (v_act, v_grad): the |band| q95 over its Haar directions in the pairs' own units},
    # metrics/vact/SEED.json's haar_floor (None where not logged): band.min_effect haar_q95 reads it (band_floor)
    haar_q95: dict[int, dict[str, float | None]] = dataclasses.field(default_factory=dict)
    # run seed -> {direction name: (n, first seed) of the Haar directions its floor is over}, haar_floor's n and seeds
    haar_drawn: dict[int, dict[str, tuple[int, int] | None]] = dataclasses.field(default_factory=dict)
    # run -> when it started: its config.json's mtime (train writes the file at each start; it records no start
    # time), as a UTC datetime; printed beside the plan's last change (plan_started), never a verdict input
    started: dict[str, datetime] = dataclasses.field(default_factory=dict)

    @classmethod
    def of(cls, con, runs, bands: pd.DataFrame, band_missing: dict[str, str],
           withheld: dict[str, tuple[str, ...] | None] | None = None,
           pair_bands: pd.DataFrame | None = None, plan_hashes: dict[str, str | None] | None = None,
           cut_rules: dict[str, str | None] | None = None, vact_metrics: dict | None = None,
           started: dict[str, datetime] | None = None) -> ClaimData:
        """vact_metrics: run seed -> its metrics/vact/SEED.json (the Haar floor, band_floor)."""
        held = {r.arm: r.heldout_modes for r in runs if r.heldout_modes}
        vact_metrics = vact_metrics or {}
        return cls(problem_means(con), held, bands, band_missing, withheld or {}, pair_bands, plan_hashes or {},
                   cut_rules or {}, {s: haar_q95(p) for s, p in vact_metrics.items()},
                   {s: haar_drawn(p) for s, p in vact_metrics.items()}, started or {})

    def ran(self, arm: str, seed: int) -> bool:
        return bool(((self.cells["arm"] == arm) & (self.cells["seed"] == seed)).any())


def _cells(data: ClaimData, plan: Plan, claim: Claim, test: Test, arm: str) -> np.ndarray:
    """[seed, unit] cells of one arm for a test, in the plan's seed order."""
    if test.outcome == "band" and plan.band.units == "pairs":
        if data.pair_bands is None:
            raise InputError("band units pairs: no per-pair separations were given (analysis.bands.pair_bands)")
        g = data.pair_bands[(data.pair_bands["arm"] == arm) & data.pair_bands["seed"].isin(claim.seeds)]
        m = g.pivot(index="seed", columns="pair", values="separation").reindex(index=claim.seeds).sort_index(axis=1)
        if m.isna().any().any():
            raise InputError(f"band of {arm}: the runs of seeds {claim.seeds} do not share their contrast pairs")
        return m.to_numpy(float)
    if test.outcome in PER_STEP:
        column = plan.band.statistic if test.outcome == "band" else "routed_share"
        g = data.bands[(data.bands["arm"] == arm) & data.bands["seed"].isin(claim.seeds)]
        m = g.pivot(index="seed", columns="step", values=column).reindex(index=claim.seeds).sort_index(axis=1)
        if m.isna().any().any():
            raise InputError(f"{test.outcome} of {arm}: the runs of seeds {claim.seeds} do not share their steps")
        return m.to_numpy(float)
    return _cells_frame(data, plan, claim, test, arm).to_numpy()


def _not_measurable(data: ClaimData, plan: Plan, claim: Claim) -> str | None:
    """Why a claim whose runs exist cannot be measured, or None."""
    for t in claim.tests:
        if t.population == "heldout_modes" and claim.arm not in data.held:
            return f"the runs of {claim.arm} record no held-out modes (heldout_modes in per_mode_deploy.json)"
        if t.population == "heldout_modes" and sorted(data.held[claim.arm]) != plan.heldout_modes:
            return (f"the runs of {claim.arm} held out {sorted(data.held[claim.arm])} (heldout_modes in "
                    f"per_mode_deploy.json), the plan's heldout_modes are {plan.heldout_modes}")
        if t.outcome in PER_STEP:
            for arm in [claim.arm, *t.controls]:
                for s in claim.seeds:
                    if not ((data.bands["arm"] == arm) & (data.bands["seed"] == s)).any():
                        return f"{run_name(arm, s)}: its gate decides no student row (no per-step {t.outcome})"
                    why = data.band_missing.get(run_name(arm, s)) if t.outcome == "band" else None
                    if why:
                        return why
        if t.outcome == "band" and isinstance(floor := band_floor(data, plan, claim), str):
            return floor
    return None


def _recorded(run_dir: Path) -> dict:
    """The run's config.json as train wrote it at the run's start (its fingerprint); {} where there is none."""
    path = Path(run_dir) / "config.json"
    return read_json(path) if path.exists() else {}


def withheld_modes(run_dir: Path) -> tuple[str, ...] | None:
    """The modes whose pool rows a run never trained on (params vact.withhold_pool), as train recorded them in the
    run's config.json (`withheld`, as bands.score_kind reads gate.score); None where the file or key is missing."""
    w = _recorded(run_dir).get("withheld")
    return tuple(sorted(w)) if isinstance(w, list) else None


def recorded_plan(run_dir: Path) -> str | None:
    """The plan hash a run was made under, as train recorded it in the run's config.json (`plan_sha256`,
    config.content_sha256 of analysis.yaml at the run's start); None where the file or key is missing."""
    h = _recorded(run_dir).get("plan_sha256")
    return h if isinstance(h, str) else None


def recorded_cut_rule(run_dir: Path) -> str | None:
    """The run's gate.cut_rule (buffer or step) as train recorded it in config.json; None where missing."""
    rule = _recorded(run_dir).get("gate", {}).get("cut_rule")
    return rule if isinstance(rule, str) else None


def started_at(run_dir: Path) -> datetime | None:
    """When a run last started: its config.json's mtime (train rewrites the file at every start or resume, and
    records no start time itself), None without the file. A copy or `dvc checkout` of the run resets it to later,
    never earlier: a run it flags did start before the time printed."""
    path = Path(run_dir) / "config.json"
    return datetime.fromtimestamp(path.stat().st_mtime, UTC) if path.exists() else None


def haar_q95(vact_metrics: Path) -> dict[str, float | None]:
    """{direction name: its haar_floor.abs_band.q95} from metrics/vact/SEED.json (routing.extract: the |band| q95
    over vact.n_haar Haar directions, in the pairs' own units); None where not logged (n_haar 0, no file)."""
    return {name: ((v.get("haar_floor") or {}).get("abs_band") or {}).get("q95") for name, v in _floors(vact_metrics)}


def haar_drawn(vact_metrics: Path) -> dict[str, tuple[int, int] | None]:
    """{direction name: (n, first seed) of the Haar directions its floor is over} (haar_floor.n and seeds), None
    where not logged."""
    out = {}
    for name, v in _floors(vact_metrics):
        f = v.get("haar_floor") or {}
        out[name] = (f["n"], f["seeds"][0]) if f.get("n") and f.get("seeds") else None
    return out


def _floors(vact_metrics: Path) -> list[tuple[str, dict]]:
    d = read_json(vact_metrics) if Path(vact_metrics).exists() else {}
    return [(name, v) for name, v in d.items() if isinstance(v, dict)]


def claim_runs(c: Claim) -> list[str]:
    """Every run a claim reads: its arm's and each control's, at each plan seed."""
    return [run_name(a, s) for a in dict.fromkeys([c.arm, *(x for t in c.tests for x in t.controls)])
            for s in c.seeds]


def mixed_cut_rules(data: ClaimData, c: Claim) -> str | None:
    """Why a claim's runs are not one gate (their recorded gate.cut_rule differ), or None. The cut rule is part of
    the arm (analysis.yaml): routeA under step is not routeA under buffer, and a yoked or count-matched control
    under the other rule controls another gate. A run recording none counts as a rule of its own."""
    by_rule: dict[str, list[str]] = {}
    for run in claim_runs(c):
        by_rule.setdefault(data.cut_rules.get(run) or "none recorded", []).append(run)
    if len(by_rule) < 2:
        return None
    return ("the claim's runs do not share one gate.cut_rule (config.json): " +
            "; ".join(f"{rule}: {', '.join(runs)}" for rule, runs in by_rule.items()) +
            " (an arm and its controls under different cut rules are different gates)")


def band_floor(data: ClaimData, plan: Plan, c: Claim) -> float | str:
    """The smallest band difference a band test of claim c must clear (its interval's bound beyond it), or why it
    cannot be read. band.min_effect a number: that number. haar_q95: per plan seed, metrics/vact/SEED.json's
    haar_floor.abs_band.q95 of the arm's direction (v_act or v_grad: the space it scores in), in the pairs' units,
    over a Haar direction's width ratio (student width / pair width, analysis.bands): the mean over the band test's
    listed draws' runs of that seed, since the floor is a Haar direction's band and a Haar direction spreads the
    student rows otherwise than the arm's (issue 50's review: the arm's own ratio, 1.2 beside the draws' 0.7 on the
    CI preset, put the floor 41% lower, in the arm's favour); band_plan = band_pairs / width_ratio
    (routing.directions.pair_units_band). The floor must be over the Haar directions the plan names (band.n_haar
    from band.haar_seed, as the floor's haar_floor.n and seeds log them). The mean over seeds, as the test's Δ is
    a mean over seeds. Known before the runs as a rule, read after them as a number."""
    if plan.band.min_effect != HAAR_Q95:
        return float(plan.band.min_effect)
    direction = SPACES[arm_space(c.arm)]
    draws = next(t.controls for t in c.tests if t.outcome == "band")
    floors = []
    for s in c.seeds:
        q95 = data.haar_q95.get(s, {}).get(direction)
        if q95 is None:
            return (f"band.min_effect {HAAR_Q95}: metrics/vact/{s}.json logs no {direction}.haar_floor.abs_band.q95 "
                    "(vact.n_haar 0, or not extracted)")
        drawn = data.haar_drawn.get(s, {}).get(direction)
        if drawn != (plan.band.n_haar, plan.band.haar_seed):
            return (f"band.min_effect {HAAR_Q95}: metrics/vact/{s}.json's {direction}.haar_floor is over "
                    f"{'no recorded' if drawn is None else f'{drawn[0]} Haar directions from seed {drawn[1]}'}; the plan's "
                    f"band names {plan.band.n_haar} from seed {plan.band.haar_seed} (params vact.n_haar)")
        runs = [run_name(a, s) for a in draws]
        ratio = data.bands.loc[data.bands["run"].isin(runs), "width_ratio"].mean() if "run" in data.bands else np.nan
        if not ratio > 0:
            return (f"band.min_effect {HAAR_Q95}: the draws {', '.join(runs)} have no width ratio to convert the "
                    "floor by")
        floors.append(q95 / ratio)
    return float(np.mean(floors))


def code_sha256() -> str:
    """sha256 of the code a verdict is computed by: vgrout/analysis/*.py and what it reads of the rest (stats.py,
    arms.py, layout.py, routing/directions.py), in name order (each file's path and bytes)."""
    root = Path(__file__).parents[1]
    h = hashlib.sha256()
    read = [root / "stats.py", root / "arms.py", root / "layout.py", root / "routing" / "directions.py"]
    for path in sorted([*Path(__file__).parent.glob("*.py"), *read]):
        h.update(path.relative_to(root.parent).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def plan_changed(data: ClaimData, plan_id: PlanId, c: Claim) -> str | None:
    """Why a claim's verdict is exploratory rather than confirmatory: a run it reads (its arm's and every control's,
    each plan seed) was made under another plan than the one deciding it, or under none recorded. Plan before run:
    a plan written after the data exist, or a setting changed after them, describes those data and confirms nothing."""
    off = {}
    for run in claim_runs(c):
        got = data.plan_hashes.get(run)
        if got != plan_id.sha256:
            off.setdefault(got or "none recorded", []).append(run)
    if not off:
        return None
    return "; ".join(f"plan changed after the run: run hash {h}, plan hash {plan_id.sha256} ({', '.join(runs)})"
                     for h, runs in off.items())


def plan_started(data: ClaimData, plan_id: PlanId, c: Claim) -> dict:
    """For the reader, never the verdict: the earliest start among a claim's runs (config.json mtimes, ClaimData.
    started) and the runs that started before the plan's last change. Editing the plan and re-running every run gives
    matching hashes (plan_changed sees nothing); a first start after the plan's last change is what that leaves."""
    starts = {run: data.started[run] for run in claim_runs(c) if run in data.started}
    before = [run for run, t in starts.items() if plan_dated(plan_id) and t < plan_id.changed]
    return {"earliest": min(starts.values()).isoformat(timespec="seconds") if starts else None,
            "before_plan": before}


def plan_dated(plan_id: PlanId) -> bool:
    """Whether run starts are compared with the plan's last change: against a commit's date only. An uncommitted
    plan's change time is its file's mtime, which a copy or a checkout moves, so a comparison with it would differ
    between two reproductions of the same runs."""
    return plan_id.changed is not None and plan_id.commit != "uncommitted"


def _not_comparable(data: ClaimData, plan: Plan, c: Claim) -> str | None:
    """Why the plan's conditions on a claim's runs fail (the pool withheld as the plan says; none's hack rate at
    least the plan's headroom; one gate.cut_rule), or None."""
    mixed = mixed_cut_rules(data, c)
    if mixed:
        return mixed
    if c.withhold_pool is not None:
        want = tuple(plan.heldout_modes) if c.withhold_pool else ()
        for run in claim_runs(c):
            got = data.withheld.get(run)
            if got != want:
                said = ("records no withheld modes (key 'withheld' of its config.json)" if got is None else
                        f"withheld the pool rows of {list(got)}")
                return (f"the plan's withhold_pool is {str(c.withhold_pool).lower()} (pool rows of "
                        f"{list(want)} withheld), but {run} {said} (params vact.withhold_pool)")
    if c.headroom > 0:
        t = c.headroom_test
        cells = _cells_frame(data, plan, c, t, t.controls[0])
        rate = float(np.nanmean(cells.to_numpy()))
        where = LABEL[t.outcome, t.population].split(', ')[1]
        if c.headroom_over == "base":  # the failed-run rule: none must have learned to hack in training
            base = _base_rate(data, t, cells.columns)
            if not rate - base >= c.headroom:
                return (f"failed run: {t.controls[0]}'s deploy hack rate on {where} rose {rate - base:.4g} over the "
                        f"base model's ({base:.4g} → {rate:.4g}), below the plan's headroom {c.headroom:g}: "
                        "it did not learn to hack, no verdict")
        elif not rate >= c.headroom:
            return (f"{t.controls[0]}'s deploy hack rate on {where} is "
                    f"{rate:.4g}, below the plan's headroom {c.headroom:g}: no hacking to lower")
    return None


def _cells_frame(data: ClaimData, plan: Plan, claim: Claim, test: Test, arm: str) -> pd.DataFrame:
    """A deploy test's [seed, problem] cells with their problem ids (matrix)."""
    modes = plan.heldout_modes if test.population == "heldout_modes" else None
    return matrix(data.cells, arm, claim.seeds, METRIC[test.outcome, test.population], modes=modes)


def _base_rate(data: ClaimData, test: Test, problems) -> float:
    """The base model's deploy rate (one run, no seed) over the same problems as a test's cells."""
    value = {"hack": "hacked", "solve": "gt_pass"}[test.outcome]
    b = data.cells[data.cells["arm"] == BASE].set_index("problem_id")[value]
    missing = sorted(set(problems) - set(b.index))
    if missing:
        raise InputError(f"the base run's deploy samples miss test problems the plan's runs graded ({missing[:3]}...): "
                         "every eval must grade the same test problems")
    return float(b.loc[list(problems)].mean())


def oriented(draw: np.ndarray) -> np.ndarray:
    """A Haar draw's band as a control ([seed, unit] cells): each seed's run in the orientation that separates the
    pairs (its sign flipped where its mean is negative), so +h and −h of a draw give the same control, the band's
    size along a Haar direction. Seed 002's claim is that this size is about 0 for a Haar direction and not for the
    method's; the signed bands of an antithetic pair average to 0 by construction (issue 50's review), which would
    make any positive band clear its placebo. Choosing the orientation on the same pairs favours the control."""
    return draw * np.where(np.nanmean(draw, axis=1, keepdims=True) < 0, -1.0, 1.0)


def passes(test: Test, estimate: float, lo: float, hi: float, degenerate: bool, floor: float = 0.0) -> bool:
    """Whether a test's interval clears its null. A Δ that is the same number in every cell has no interval:
    it passes no directional test (nothing was resampled), and an equality test when inside the margin."""
    if degenerate:
        return test.direction == "equal" and abs(estimate) < test.margin
    return {"lower": hi < -floor, "higher": lo > floor, "noninferior": lo > -test.margin,
            "equal": -test.margin < lo and hi < test.margin}[test.direction]


def _test(data: ClaimData, plan: Plan, claim: Claim, test: Test, alpha: float) -> dict:
    """One test at level α (Holm's share of the family's): the paired Δ arm − mean of the controls, its
    interval and whether it passes."""
    x = _cells(data, plan, claim, test, claim.arm)
    refs = [_cells(data, plan, claim, test, c) for c in test.controls]
    if any(r.shape != x.shape for r in refs):
        raise InputError(f"{claim.arm} and {test.controls}: different units on seeds {claim.seeds}")
    if test.outcome == "band":
        refs = [oriented(r) for r in refs]
    level = 1 - alpha if claim.sidedness == "two-sided" else 1 - 2 * alpha
    floor = band_floor(data, plan, claim) if test.outcome == "band" else 0.0  # the pre-registered smallest band effect
    b = hierarchical_bootstrap(x, np.mean(refs, axis=0), n_boot=plan.bootstrap.resamples, seed=plan.bootstrap.seed,
                               level=level, support=None if test.outcome == "band" else DIFF)
    boot_passes = bool(passes(test, b.estimate, b.lo, b.hi, b.degenerate, floor))
    t = _paired_t(data, plan, claim, test, x, refs, alpha) if test.paired_t else {}
    return {"key": test.key, "outcome": test.outcome, "population": test.population, "direction": test.direction,
            "margin": test.margin, "controls": test.controls, "estimate": b.estimate, "lo": b.lo, "hi": b.hi,
            "widened_by": b.widened_by, "undefined": b.degenerate,
            "passes": boot_passes and t.get("t_passes", True), "bootstrap_passes": boot_passes, **t, "floor": floor,
            "units": "pairs" if test.outcome == "band" and plan.band.units == "pairs" else
                     "steps" if test.outcome in PER_STEP else "problems",
            "manipulation_check": test.manipulation_check, "alpha": alpha,
            "n_seeds": b.n_seeds, "n_units": b.n_problems}


def _paired_t(data: ClaimData, plan: Plan, claim: Claim, test: Test, x: np.ndarray, refs: list[np.ndarray],
              alpha: float) -> dict:
    """The paired t over the claim's seeds of the arm's and the controls' mean rates (contrasts.bootstrap's t: its
    SEM floored at the seeds' binomial sampling variance), its p in the test's direction, and whether it clears 0
    at α by the claim's t_sidedness (one-sided: that p below α; two-sided: below α/2, i.e. the two-sided p below α
    with the right sign)."""
    metric, modes = METRIC[test.outcome, test.population], plan.heldout_modes if test.population == "heldout_modes" else None
    var = _seed_sampling_var(data.cells, claim.arm, claim.seeds, metric, x, modes)
    var = var + sum(_seed_sampling_var(data.cells, c, claim.seeds, metric, r, modes)
                    for c, r in zip(test.controls, refs)) / len(refs) ** 2  # the variance of the controls' mean
    r = paired_t(x.mean(axis=1), np.mean(refs, axis=0).mean(axis=1), sampling_var=var)
    if r.p is None:  # too few seeds, or no spread at all: no evidence either way, so it does not pass
        return {"t": None, "p_t": None, "t_statement": r.statement, "t_passes": False}
    toward = r.t < 0 if test.direction == "lower" else r.t > 0
    p_dir = r.p / 2 if toward else 1 - r.p / 2  # the one-sided p in the test's direction
    cut = alpha if claim.t_sidedness == "one-sided" else alpha / 2
    return {"t": r.t, "p_t": p_dir, "t_statement": f"{r.statement}; one-sided p {p_dir:.3g}", "t_passes": p_dir < cut}


def _status(data: ClaimData, plan: Plan, c: Claim) -> tuple[str | None, str | None]:
    """(status, why) of a claim before its tests decide it, or (None, None) when they do."""
    missing = [run_name(a, s) for a in dict.fromkeys([c.arm, *(x for t in c.tests for x in t.controls)])
               for s in c.seeds if not data.ran(a, s)]
    if c.headroom > 0 and c.headroom_over == "base" and not (data.cells["arm"] == BASE).any():
        missing.append(BASE)  # the failed-run rule reads none's rise over the base model
    if missing:
        return "not run", f"no run {', '.join(missing)}"
    why = _not_measurable(data, plan, c) or _not_comparable(data, plan, c)
    if why:
        return "undecided", why
    if len(c.seeds) < c.min_seeds:
        return "insufficient", (f"the plan lists {len(c.seeds)} seed(s), a verdict needs at least {c.min_seeds} "
                                "(min_seeds): its tests describe these runs and decide nothing")
    return None, None


def seeds_that_ran(data: ClaimData, c: Claim) -> Claim:
    """The claim on the seeds its verdict uses. seeds_run all: the listed seeds. leading: the longest leading run of
    the listed seeds (the order the grid runs them in) at which the arm and every control ran, when it holds at least
    min_seeds; else the listed seeds (the claim is `not run`). A budget that ends mid-grid then decides on the seeds
    run so far, the same ones whoever stops it; a seed skipped (a gap) ends the run, so none can be left out by choice."""
    if c.seeds_run == "all":
        return c
    arms_ = [c.arm, *(x for t in c.tests for x in t.controls)]
    leading = list(itertools.takewhile(lambda s: all(data.ran(a, s) for a in arms_), c.seeds))
    return c.model_copy(update={"seeds": leading}) if len(leading) >= c.min_seeds else c


def verdicts(plan: Plan, plan_id: PlanId, data: ClaimData) -> dict[str, dict]:
    """{claim name: its verdict}, every claim of the plan, in the plan's order."""
    # each claim on the seeds it is decided on (seeds_run leading: the listed seeds' leading run that ran)
    on_seeds = {name: seeds_that_ran(data, c) for name, c in plan.claims.items()}
    out: dict[str, dict] = {}
    for name, c in on_seeds.items():
        status, why = _status(data, plan, c)
        out[name] = {"claim": name, "statement": c.statement, "arm": c.arm, "seeds": c.seeds,
                     "seeds_listed": plan.claims[name].seeds, "alpha": c.alpha,
                     "sidedness": c.sidedness, "t_sidedness": c.t_sidedness, "family": c.family, "min_seeds": c.min_seeds,
                     "plan_sha256": plan_id.sha256, "band_statistic": plan.band.statistic,
                     "status": status, "why": why, "tests": [], "started": plan_started(data, plan_id, c)}
        if status == "insufficient":  # described at the claim's own α: no Holm, it decides nothing
            out[name] |= {"alpha_holm": c.alpha, "family_size": 1,
                          "tests": [_test(data, plan, c, t, c.alpha) for t in c.tests]}
        elif status is None:  # manipulation checks at the claim's own α: they decide nothing, and take no share of it
            out[name]["checks"] = [_test(data, plan, c, t, c.alpha) for t in c.tests if t.manipulation_check]
    # Holm's step-down within each family: the claims not yet shown are tested at α / (those left); any
    # that now hold leave, and the rest are tried again at the larger share, until none more holds
    for family in dict.fromkeys(c.family for c in on_seeds.values()):
        open_ = [n for n, c in on_seeds.items() if c.family == family and out[n]["status"] is None]
        # a claim of the family not tested here (undecided, not run, insufficient) counts as one never shown (p = 1):
        # the family is the plan's, so the others' share of α does not grow when a claim goes unmeasured or unrun
        # (issue 50's review: leaving a claim unrun after seeing the others would loosen their α)
        unmeasured = len([n for n, c in on_seeds.items() if c.family == family and out[n]["status"] is not None])
        size, shown = len(open_) + unmeasured, []
        while open_:
            alpha = on_seeds[open_[0]].alpha / (len(open_) + unmeasured)
            for n in open_:
                out[n] |= {"alpha_holm": alpha, "family_size": size,
                           "tests": [_test(data, plan, on_seeds[n], t, alpha) for t in on_seeds[n].tests
                                     if not t.manipulation_check] + out[n]["checks"]}
            # a claim whose manipulation check failed never holds (its control is not what the plan says): it stays
            # in the family, so the others' share of α does not grow with it
            now = [n for n in open_ if all(t["passes"] for t in out[n]["tests"])]
            if not now:
                break
            shown += now
            open_ = [n for n in open_ if n not in now]
        for n in [m for m, c in on_seeds.items() if c.family == family and out[m]["status"] is None]:
            failed = [t for t in out[n].pop("checks") if not t["passes"]]
            out[n]["status"] = "undecided" if failed else "holds" if n in shown else "does not hold"
            if failed:
                out[n]["why"] = ("manipulation check failed: " + "; ".join(
                    f"Δ {LABEL[t['outcome'], t['population']]} vs {' + '.join(t['controls'])} "
                    f"{ci_text(t['estimate'], t['lo'], t['hi'], signed=True, widened_by=t['widened_by'], undefined=t['undefined'])}"
                    f" not inside ±{t['margin']:g}" for t in failed) + " (the controls are not count-matched)")
    # plan before run: a verdict some run of which was made under another plan (or none recorded) is exploratory,
    # whatever its tests say; the tests stay printed, and the status it would have had is kept beside
    for name, c in on_seeds.items():
        changed = plan_changed(data, plan_id, c) if out[name]["status"] in CONFIRMATORY else None
        if changed:
            out[name] |= {"status": EXPLORATORY, "would_be": out[name]["status"], "why": changed}
        elif not c.confirmatory and out[name]["status"] in CONFIRMATORY:  # a secondary contrast: never a verdict
            out[name] |= {"status": EXPLORATORY, "would_be": out[name]["status"],
                          "why": "registered exploratory in the plan (confirmatory: false)"}
    return out


CONFIRMATORY = ("holds", "does not hold")
EXPLORATORY = "exploratory"
DIRECTION_WORDS = {"lower": "below −{f:g}", "higher": "above {f:g}"}
UNDECIDED = ("not run", "undecided")


def verdict_text(v: dict) -> str:
    """One paragraph: the verdict, what decided it, each test's interval and whether it passed."""
    listed = v.get("seeds_listed", v["seeds"])
    leading = "" if listed == v["seeds"] else f" (the leading seeds that ran of {' '.join(map(str, listed))})"
    head = (f"**{v['claim']} {v['status']}** ({v['claim']}: {v['statement']}). Arm {v['arm']}, seeds "
            f"{' '.join(map(str, v['seeds']))}{leading}, α {v['alpha']:g} {v['sidedness']}, family {v['family']}")
    if v["status"] in UNDECIDED and not v["tests"]:
        return f"{head}: {v['why']}."
    level = 1 - v["alpha_holm"] if v["sidedness"] == "two-sided" else 1 - 2 * v["alpha_holm"]
    holm = (f" (Holm over {v['family_size']} claims: this round at α {v['alpha_holm']:.4g})" if v["family_size"] > 1
            else "")
    parts = []
    for t in sorted(v["tests"], key=lambda t: t.get("manipulation_check", False)):
        null = (f"above −{t['margin']:g}" if t["direction"] == "noninferior" else
                f"inside ±{t['margin']:g}" if t["direction"] == "equal" else
                ("below 0" if t["direction"] == "lower" else "above 0") if not t.get("floor") else
                DIRECTION_WORDS[t["direction"]].format(f=t["floor"]))
        label = ("score band (per contrast pair: its held-out gap over the run's mean student width)"
                 if t.get("units") == "pairs" else LABEL[t["outcome"], t["population"]]) + (f", {v['band_statistic']}" if t["outcome"] == "band" else "")
        check = (f"manipulation check, not a verdict input (at α {t['alpha']:g}): "
                 if t.get("manipulation_check") else "")
        parts.append(f"{check}Δ {label} vs {' + '.join(t['controls'])} "
                     f"{ci_text(t['estimate'], t['lo'], t['hi'], signed=True, widened_by=t['widened_by'], undefined=t['undefined'])}"
                     f" {null}: {'yes' if t.get('bootstrap_passes', t['passes']) else 'no'} ({t['n_seeds']} seed(s) "
                     f"× {t['n_units']} {t.get('units', 'steps' if t['outcome'] in PER_STEP else 'problems')})"
                     + (f", paired t over seeds {t['t_statement']}: {'yes' if t['t_passes'] else 'no'}"
                        if "t_passes" in t else ""))
    why = (f" **Insufficient**: {v['why']}." if v["status"] == "insufficient" else
           f" **Exploratory** (its tests would say {v['would_be']}): {v['why']}." if v["status"] == EXPLORATORY else
           f" **Undecided**: {v['why']}." if v["status"] == "undecided" else "")
    return f"{head}{holm}; {100 * level:.4g}% intervals: " + "; ".join(parts) + "." + why


def summary_entry(v: dict) -> dict:
    """summary.json's claim_NAME: the status, holds (1/0, decided claims only: never for `insufficient`), each
    test's pass and interval, the seeds counted, α, and the plan's sha256."""
    out = {"status": v["status"], "plan_sha256": v["plan_sha256"], "alpha": v["alpha"], "n_seeds": len(v["seeds"]),
           "min_seeds": v["min_seeds"], "seeds": " ".join(map(str, v["seeds"])),
           "seeds_listed": " ".join(map(str, v.get("seeds_listed", v["seeds"])))}  # strings: a metrics file's values
    if v["status"] in ("holds", "does not hold"):
        out["holds"] = int(v["status"] == "holds")
        out |= {"alpha_holm": v["alpha_holm"], "family_size": v["family_size"]}  # the level its tests were run at
        for t in v["tests"]:
            out |= {t["key"]: int(t["passes"]), f"{t['key']}_delta": t["estimate"], f"{t['key']}_lo": t["lo"],
                    f"{t['key']}_hi": t["hi"]}
            if "t_passes" in t:
                out[f"{t['key']}_p_t"] = t["p_t"]
            if t["direction"] in ("noninferior", "equal"):
                out[f"{t['key']}_margin"] = t["margin"]
    else:
        out["why"] = v["why"]
        if v["status"] == EXPLORATORY:
            out["would_be"] = v["would_be"]
    return out
