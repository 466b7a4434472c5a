"""The claims' verdicts: a pure function of the pre-registered plan (analysis.plan) and the runs' records.

Nothing here reads params, constants of the tables or what the runs happen to contain beyond the
plan's arms and seeds: every setting that decides (arm, controls, outcome, population, direction,
margin, seeds, α, sidedness, family, band quantiles) is the plan's, and each verdict records the
plan's sha256, so a verdict cannot change unless the plan's hash or the data does.

A test is A2's hierarchical bootstrap (contrasts) of the paired Δ arm − control over the plan's
seeds and the outcome's units (test problems; training steps for the band), its interval at the level
the claim's α gives (two-sided: 1 − α; one-sided: 1 − 2α, of which one bound decides), α divided as
Holm's step-down over the claims of the claim's family. A claim holds when every one of its tests
passes (intersection-union: no correction within a claim). An arm or control without a run for a
plan seed: "not run". Ran, but the outcome cannot be measured (the pairs' scores not logged, no
held-out modes recorded): "undecided", with why.
"""
from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from vgrout.analysis.contrasts import BOOT_SEED, DIFF, ci_text, matrix, problem_means
from vgrout.analysis.plan import Claim, Plan, PlanId, Test
from vgrout.io import InputError
from vgrout.layout import run_name
from vgrout.stats import hierarchical_bootstrap

# a test's outcome and population -> A2's metric (contrasts.A2_METRICS); band is C3's, from analysis.bands
METRIC = {("hack", "hackable"): "hack_hackable", ("hack", "heldout_modes"): "hack_hackable", ("solve", "all"): "solve"}
LABEL = {"hackable": "deploy hack, hackable problems", "heldout_modes": "deploy hack, held-out modes' problems",
         "all": "deploy solve, all problems", "student_rows": "score band (student rows, per step)"}


@dataclasses.dataclass(frozen=True)
class ClaimData:
    """What the verdicts read: per run and test problem the deploy cells (contrasts.problem_means), the
    held-out modes each arm's runs record, per run and step the score band (analysis.bands) and why a
    run's band is missing."""
    cells: pd.DataFrame
    held: dict[str, tuple[str, ...]]
    bands: pd.DataFrame
    band_missing: dict[str, str]

    @classmethod
    def of(cls, con, runs, bands: pd.DataFrame, band_missing: dict[str, str]) -> ClaimData:
        held = {r.arm: r.heldout_modes for r in runs if r.heldout_modes}
        return cls(problem_means(con), held, bands, band_missing)

    def ran(self, arm: str, seed: int) -> bool:
        return bool(((self.cells["arm"] == arm) & (self.cells["seed"] == seed)).any())


def _cells(data: ClaimData, claim: Claim, test: Test, arm: str, band: str) -> np.ndarray:
    """[seed, unit] cells of one arm for a test, in the plan's seed order; band: the band statistic's column."""
    if test.outcome == "band":
        g = data.bands[(data.bands["arm"] == arm) & data.bands["seed"].isin(claim.seeds)]
        m = g.pivot(index="seed", columns="step", values=band).reindex(index=claim.seeds).sort_index(axis=1)
        if m.isna().any().any():
            raise InputError(f"band of {arm}: the runs of seeds {claim.seeds} do not share their steps")
        return m.to_numpy(float)
    modes = list(data.held[claim.arm]) if test.population == "heldout_modes" else None
    return matrix(data.cells, arm, claim.seeds, METRIC[test.outcome, test.population], modes=modes).to_numpy()


def _not_measurable(data: ClaimData, claim: Claim) -> str | None:
    """Why a claim whose runs exist cannot be measured, or None."""
    for t in claim.tests:
        if t.population == "heldout_modes" and claim.arm not in data.held:
            return f"the runs of {claim.arm} record no held-out modes (heldout_modes in per_mode_deploy.json)"
        if t.outcome == "band":
            for arm in [claim.arm, *t.controls]:
                for s in claim.seeds:
                    why = data.band_missing.get(run_name(arm, s))
                    if why:
                        return why
    return None


def _test(data: ClaimData, claim: Claim, test: Test, alpha: float, band: str, n_boot: int) -> dict:
    """One test at level α (Holm's share of the family's): the paired Δ's interval and whether it passes."""
    x = _cells(data, claim, test, claim.arm, band)
    refs = [_cells(data, claim, test, c, band) for c in test.controls]
    if any(r.shape != x.shape for r in refs):
        raise InputError(f"{claim.arm} and {test.controls}: different units on seeds {claim.seeds}")
    level = 1 - alpha if claim.sidedness == "two-sided" else 1 - 2 * alpha
    b = hierarchical_bootstrap(x, np.mean(refs, axis=0), n_boot=n_boot, seed=BOOT_SEED, level=level,
                               support=None if test.outcome == "band" else DIFF)
    passes = {"lower": b.hi < 0, "higher": b.lo > 0, "noninferior": b.lo > -test.margin}[test.direction]
    return {"key": test.key, "outcome": test.outcome, "population": test.population, "direction": test.direction,
            "margin": test.margin, "controls": test.controls, "estimate": b.estimate, "lo": b.lo, "hi": b.hi,
            "widened_by": b.widened_by, "undefined": b.degenerate, "passes": bool(passes and not b.degenerate),
            "n_seeds": b.n_seeds, "n_units": b.n_problems}


def verdicts(plan: Plan, plan_id: PlanId, data: ClaimData, n_boot: int) -> dict[str, dict]:
    """{claim name: its verdict}, every claim of the plan, in the plan's order."""
    out: dict[str, dict] = {}
    for name, c in plan.claims.items():
        missing = [run_name(a, s) for a in dict.fromkeys([c.arm, *(x for t in c.tests for x in t.controls)])
                   for s in c.seeds if not data.ran(a, s)]
        why = _not_measurable(data, c) if not missing else None
        out[name] = {"claim": name, "statement": c.statement, "arm": c.arm, "seeds": c.seeds, "alpha": c.alpha,
                     "sidedness": c.sidedness, "family": c.family, "plan_sha256": plan_id.sha256,
                     "band_statistic": plan.band.statistic,
                     "status": "not run" if missing else "undecided" if why else None,
                     "why": f"no run {', '.join(missing)}" if missing else why, "tests": []}
    # Holm's step-down within each family: the claims not yet shown are tested at α / (those left); any
    # that now hold leave, and the rest are tried again at the larger share, until none more holds
    for family in dict.fromkeys(c.family for c in plan.claims.values()):
        open_ = [n for n, c in plan.claims.items() if c.family == family and out[n]["status"] is None]
        size, shown = len(open_), []
        while open_:
            alpha = plan.claims[open_[0]].alpha / len(open_)
            for n in open_:
                out[n] |= {"alpha_holm": alpha, "family_size": size,
                           "tests": [_test(data, plan.claims[n], t, alpha, plan.band.statistic, n_boot)
                                     for t in plan.claims[n].tests]}
            now = [n for n in open_ if all(t["passes"] for t in out[n]["tests"])]
            if not now:
                break
            shown += now
            open_ = [n for n in open_ if n not in now]
        for n in [m for m, c in plan.claims.items() if c.family == family and out[m]["status"] is None]:
            out[n]["status"] = "holds" if n in shown else "does not hold"
    return out


DIRECTION_WORDS = {"lower": "below 0", "higher": "above 0"}


def verdict_text(v: dict) -> str:
    """One paragraph: the verdict, what decided it, each test's interval and whether it passed."""
    head = (f"**{v['claim']} {v['status']}** ({v['claim']}: {v['statement']}). Arm {v['arm']}, seeds "
            f"{' '.join(map(str, v['seeds']))}, α {v['alpha']:g} {v['sidedness']}, family {v['family']}")
    if v["status"] in ("not run", "undecided"):
        return f"{head}: {v['why']}."
    level = 1 - v["alpha_holm"] if v["sidedness"] == "two-sided" else 1 - 2 * v["alpha_holm"]
    holm = (f" (Holm over {v['family_size']} claims: this round at α {v['alpha_holm']:.4g})" if v["family_size"] > 1
            else "")
    parts = []
    for t in v["tests"]:
        null = f"above −{t['margin']:g}" if t["direction"] == "noninferior" else DIRECTION_WORDS[t["direction"]]
        label = LABEL[t["population"]] + (f", {v['band_statistic']}" if t["outcome"] == "band" else "")
        parts.append(f"Δ {label} vs {' + '.join(t['controls'])} "
                     f"{ci_text(t['estimate'], t['lo'], t['hi'], signed=True, widened_by=t['widened_by'], undefined=t['undefined'])}"
                     f" {null}: {'yes' if t['passes'] else 'no'} ({t['n_seeds']} seed(s) × {t['n_units']} "
                     f"{'steps' if t['outcome'] == 'band' else 'problems'})")
    one_seed = min(t["n_seeds"] for t in v["tests"]) < 2
    return (f"{head}{holm}; {100 * level:.4g}% intervals: " + "; ".join(parts) + "."
            + (" One seed: its intervals leave out seed-to-seed variance, so this verdict is not the claim's test."
               if one_seed else ""))


def summary_entry(v: dict) -> dict:
    """summary.json's claim_NAME: the status, holds (1/0, decided claims only), each test's pass and
    interval, the seeds counted, α, and the plan's sha256."""
    out = {"status": v["status"], "plan_sha256": v["plan_sha256"], "alpha": v["alpha"], "n_seeds": len(v["seeds"])}
    if v["status"] in ("holds", "does not hold"):
        out["holds"] = int(v["status"] == "holds")
        for t in v["tests"]:
            out |= {t["key"]: int(t["passes"]), f"{t['key']}_delta": t["estimate"], f"{t['key']}_lo": t["lo"],
                    f"{t['key']}_hi": t["hi"]}
            if t["direction"] == "noninferior":
                out[f"{t['key']}_margin"] = t["margin"]
    else:
        out["why"] = v["why"]
    return out
