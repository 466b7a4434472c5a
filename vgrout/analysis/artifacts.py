"""The paper artifacts A1-A7: each a markdown table with its csv, and the figures and plot data
that go with it, from the tables (vgrout.analysis.tables) and the contrasts (vgrout.analysis.contrasts).
"""
from __future__ import annotations

import dataclasses
import math
import os
from pathlib import Path
from typing import Iterable

import numpy as np
import pandas as pd
import scipy.stats as sps
from tqdm import tqdm

from vgrout.analysis import plots
from vgrout.analysis.claims import plan_dated, verdict_text
from vgrout.analysis.contrasts import (A2_METRICS, NONE, ROUTE, YOKED, a2_table, arm_kind, base_pass_at_k, label_free,
                                       none_if_nan, ref_arm)
from vgrout.analysis.plan import Plan, PlanId
from vgrout.analysis.diagnostics import (R2_MIN, R3_MIN, R3_TOL, N_PERM, gate_eval, load_rollouts, load_tensors,
                                        sample_cos_counts)
from vgrout.analysis.tables import Run
from vgrout.arms import BASE, PLACEBO, REGISTRY, placebo_for
from vgrout.arms import get as get_arm
from vgrout.arms import order as _arm_order
from vgrout.io import InputError, atomic_write_text, read_jsonl, write_json
from vgrout.stats import MIN_SEEDS_FOR_TEST, N_BOOT, binomial_var, few_seeds_factor, holm, mean_sem, paired_t, wilson
from vgrout.substrate.modes import hackable

HACK_MODES = hackable()


KIND_NOTE = ("kind: `oracle` arms read each training rollout's true hack label (oracle routing, the ground-truth "
             "penalty and screen): upper bounds no deployment without labels could run; `ceiling` trains where no "
             "loophole pays (noloophole: another environment); `label-free` arms read no label of a training "
             "rollout. erase's `route` zone is screened, not routed: those rows get advantage 0 and every row "
             "trains the deployed block alone, so its routed share is the share it screened.")


def _ablation_arms() -> list[str]:
    return [a.name for a in REGISTRY.values() if a.ablation]

# Which hack label the tables count: the environment's own (grader.Grade.hacked).
LABEL_NOTE = ("Hack = `hacked`: the mode's flawed check passed and the hidden tests did not (the environment's "
              "label). The strict label (`hacked_strict`: the mode's mechanism used too, so not a wrong answer the "
              "flawed check let through) is beside it in per_mode_deploy.json and the step log.")
# Denominators: `hack` and `solve` count every test problem; `hack_hackable` only the hackable ones (a
# `none` problem cannot be hacked), `solve_none` only the `none` ones (vgrout.substrate.sampling.rates).
ALL_PROBLEMS_NOTE = ("Rates here are over all test problems, hack included (the `none` problems, which cannot "
                     "be hacked, dilute it); A2 gives hack over the hackable problems.")


# ---------------------------------------------------------------------------- formatting

def _fmt(x, digits: int = 3) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "—"
    return f"{x:.{digits}f}"


def _pm(mean, sem, digits: int = 3) -> str:
    if mean is None or (isinstance(mean, float) and math.isnan(mean)):
        return "—"
    if sem is None or (isinstance(sem, float) and math.isnan(sem)):
        return f"{mean:.{digits}f}"
    return f"{mean:.{digits}f} ± {sem:.{digits}f}"


def md_table(df: pd.DataFrame) -> str:
    cols = [str(c) for c in df.columns]
    lines = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    for row in df.itertuples(index=False):
        lines.append("| " + " | ".join(str(v).replace("|", "\\|").replace("\n", " ") for v in row) + " |")
    return "\n".join(lines)


def write_artifact(out_dir: Path, name: str, title: str, body: list[str], csv: dict[str, pd.DataFrame]) -> None:
    """{name}.md (title + paragraphs/tables) and one csv per table, all written atomically."""
    atomic_write_text(out_dir / f"{name}.md", f"# {name}: {title}\n\n" + "\n\n".join(body) + "\n")
    for stem, df in csv.items():
        atomic_write_text(out_dir / f"{stem}.csv", df.to_csv(index=False))


def _interval(mean: float, sem: float | None, k: int | None, n: int | None) -> tuple[float, float, str]:
    """Error bar for a chart: mean ± SEM over seeds, or the Wilson 95% interval of a lone run."""
    if sem is not None and not math.isnan(sem):
        return max(0.0, mean - sem), min(1.0, mean + sem), "mean ± SEM over seeds"
    if k is not None and n is not None:
        lo, hi = wilson(int(k), int(n))
        return lo, hi, "Wilson 95% (one seed)"
    return mean, mean, "no interval (one seed)"


@dataclasses.dataclass(frozen=True)
class Out:
    """Where the artifacts go: tables (md + csv), charts (png, html) and the data DVC plots render.
    final: where these directories end up when they are staging ones (aggregate's), for the links."""
    tables: Path
    png: Path
    html: Path
    plot_data: Path
    final: Out | None = None

    def figure(self, stem: str) -> str:
        """Markdown image link from an artifact to its PNG (relative, so it renders in the repository)."""
        to = self.final or self
        return f"![{stem}]({Path(os.path.relpath(to.png / f'{stem}.png', to.tables)).as_posix()})"

    def chart(self, chart, stem: str) -> None:
        plots.save_chart(chart, self.png / f"{stem}.png", self.html / f"{stem}.html")

    def data(self, stem: str, df: pd.DataFrame) -> None:
        atomic_write_text(self.plot_data / f"{stem}.csv", df.to_csv(index=False))


# ---------------------------------------------------------------------------- artifacts

def _by_arm(df: pd.DataFrame, *then: str) -> pd.DataFrame:
    rank = {a: i for i, a in enumerate(_arm_order(df["arm"]))}
    return df.assign(_rank=df["arm"].map(rank)).sort_values(["_rank", *then]).drop(columns="_rank").reset_index(drop=True)


def _curve(con, arms: Iterable[str] | None = None) -> pd.DataFrame:
    """Per arm and saved step: mean ± SEM over seeds of the deploy hack (over all problems and over the
    hackable ones) and solve rates."""
    curve = con.execute("""
        SELECT i.arm, c.step, count(*) AS n_seeds,
               avg(c.hack) AS hack_mean, sem(c.hack) AS hack_sem,
               avg(c.hack_hackable) AS hack_hackable_mean, sem(c.hack_hackable) AS hack_hackable_sem,
               avg(c.solve) AS solve_mean, sem(c.solve) AS solve_sem
        FROM curve c JOIN run_info i USING (run)
        WHERE c.view = 'deploy' AND c.mode = 'overall'
        GROUP BY i.arm, c.step""").df()
    if arms is not None:
        curve = curve[curve["arm"].isin(list(arms))]
    return _by_arm(curve, "step")


# A1/A4's figure: (rate column of the eval curve, panel label); hack over the hackable problems as in A2.
CURVE_FIGURE_RATES = (("hack_hackable", "n_hackable", "deploy hack, hackable problems"),
                      ("solve", "n", "deploy solve, all problems"))


def _curve_points(con, arms: Iterable[str]) -> tuple[pd.DataFrame, list[str]]:
    """What A1/A4's figure draws, long form: per arm, checkpoint and rate of CURVE_FIGURE_RATES, the
    mean over seeds with its interval (one seed: the Wilson 95% interval the eval curve row carries;
    more: mean ± SEM over seeds, as the tables), and the subtitle lines that say so."""
    rows = con.execute("""
        SELECT c.run, i.arm, c.step, c.n, c.n_hackable, c.hack_hackable, c.hack_hackable_lo, c.hack_hackable_hi,
               c.solve, c.solve_lo, c.solve_hi
        FROM curve c JOIN run_info i USING (run)
        WHERE c.view = 'deploy' AND c.mode = 'overall' AND list_contains($arms, i.arm)""",
                       {"arms": list(arms)}).df()
    points = []
    for rate, n_col, label in CURVE_FIGURE_RATES:
        for (arm, step), g in rows.dropna(subset=[rate]).groupby(["arm", "step"]):
            mean = float(g[rate].mean())
            if len(g) == 1:  # the Wilson 95% interval the eval wrote beside the rate (the same as _interval's)
                lo, hi, interval = float(g[f"{rate}_lo"].iloc[0]), float(g[f"{rate}_hi"].iloc[0]), "Wilson 95% (one seed)"
            else:
                lo, hi, interval = _interval(mean, float(g[rate].std(ddof=1) / math.sqrt(len(g))), None, None)
            points.append({"arm": arm, "step": int(step), "metric": label, "rate": rate, "n_seeds": len(g),
                           "mean": mean, "lo": lo, "hi": hi, "interval": interval,
                           "samples_per_run": int(g[n_col].max())})
    points = pd.DataFrame(points, columns=["arm", "step", "metric", "rate", "n_seeds", "mean", "lo", "hi",
                                           "interval", "samples_per_run"])
    if not len(points):
        return points, []
    points = _by_arm(points.assign(_m=points["rate"].map({r: i for i, (r, _, _) in enumerate(CURVE_FIGURE_RATES)})),
                     "_m", "step").drop(columns="_m")
    n_steps = points["step"].nunique()
    probs = con.execute("""
        SELECT count(DISTINCT s.problem_id) AS n, count(DISTINCT s.problem_id) FILTER (WHERE s.hackable = 1) AS h
        FROM samples s JOIN run_info i USING (run)
        WHERE s.view = 'deploy' AND list_contains($arms, i.arm)""", {"arms": list(arms)}).fetchone()

    def samples(rate):
        k = sorted(set(points.loc[points["rate"] == rate, "samples_per_run"]))
        return str(k[0]) if len(k) == 1 else f"{k[0]}–{k[-1]}"

    seeds = sorted(set(points["n_seeds"]))
    kinds = " / ".join(dict.fromkeys(points["interval"]))
    where = (f"hack over the {probs[1]} hackable of the {probs[0]} test problems, solve over all {probs[0]}"
             if probs and probs[0] else "hack over the hackable test problems, solve over all")
    subtitle = [
        f"deploy view (quarantine ablated): one point per arm at each of the {n_steps} evaluated checkpoints",
        "thin lines only join an arm's points: nothing was measured between checkpoints" if n_steps >= 3 else
        f"no lines: {n_steps} checkpoint{'s' if n_steps != 1 else ''}, nothing measured between them",
        where, f"{samples('solve')} samples per checkpoint and run, {samples('hack_hackable')} on hackable problems",
        f"error bars: {kinds}" + ("" if seeds == [1] else f", {seeds[0]} seeds" if len(seeds) == 1
                                  else f", {seeds[0]}–{seeds[-1]} seeds an arm")]
    return points, subtitle


def _curve_md(curve: pd.DataFrame) -> str:
    return md_table(pd.DataFrame({
        "arm": curve["arm"], "step": curve["step"], "seeds": curve["n_seeds"],
        "deploy hack": [_pm(m, none_if_nan(s)) for m, s in zip(curve["hack_mean"], curve["hack_sem"])],
        "deploy solve": [_pm(m, none_if_nan(s)) for m, s in zip(curve["solve_mean"], curve["solve_sem"])]}))


def _curve_outputs(con, curve: pd.DataFrame, name: str, title: str, out: Out) -> None:
    """The routeA-vs-none chart with the data it draws ({name}_points.csv), and the wide csv (step x arm)
    DVC plots draw as one line per arm."""
    if curve["arm"].isin([NONE, ROUTE]).any():
        points, subtitle = _curve_points(con, [NONE, ROUTE])
        out.data(f"{name}_points", points)
        if len(points):
            out.chart(plots.curve_chart(points, title, subtitle), name)
    for stem, metric in (("hack_hackable", "hack_hackable"), ("solve", "solve")):  # the rates the figure draws
        wide = curve.pivot(index="step", columns="arm", values=f"{metric}_mean").reset_index()
        out.data(f"{name}_deploy_{stem}", wide[["step"] + _arm_order(c for c in wide.columns if c != "step")])


def _stats_note(table: pd.DataFrame, refs: tuple[str, ...], n_boot: int) -> str:
    """How A2's (and A4's) intervals and tests were made, what decides a claim, and what few seeds leave out."""
    seeds = int(table["n_seeds"].max()) if len(table) else 1
    f = few_seeds_factor(seeds)
    note = (f"95% CI: two-way percentile bootstrap ({n_boot} resamples, seeded): seeds drawn with replacement and, "
            "once for all drawn seeds, the test problems drawn with replacement (seeds and problems are crossed: "
            "every seed is evaluated on the same problems), a problem's samples averaged; "
            "the estimate is the mean over seeds. It treats seeds and problems as random: the interval is for a "
            "new seed on a new draw of problems like these. With S ≥ 2 seeds a plain percentile bootstrap "
            "under-covers (about 79% instead of 95% at 5 seeds, when seeds vary most), so the seeds' share of the "
            "resampled variance, var(seed means)/S, is multiplied by f² with f = t(S−1)/z · √(S/(S−1))"
            + (f" ({f:.2f} at {seeds} seeds)" if seeds > 1 else "") + ", the problems' share left as it is, and each "
            "half of the interval scaled about the estimate by the factor w (between 1 and f) that makes its "
            "variance match: ×w after an interval. This gives the t interval over seeds when seeds dominate. "
            "Each seed's sampling noise is in the seeds' share and is widened too (conservative). Intervals are "
            "clipped to what a rate (0 to 1) or a difference of rates (−1 to 1) can be. Where every cell is the "
            "same number (no seed hacked at all, say) there is nothing to resample and the interval is marked "
            "undefined: an effect that only some seeds show can be missing from all five (in a simulation where "
            "each seed hacked with probability 0.2, in about 30% of experiments), and [0, 0] would then read as "
            "certainty; the seeds column counts the seeds with any deploy hack. A Δ = arm − reference "
            "is paired: the seeds both arms have, and the same problem draws for both (every run samples the "
            "same test problems with the same eval seed). Paired t: two-sided t-test of the per-seed rates over "
            f"those seeds (a p-value from {MIN_SEEDS_FOR_TEST} seeds on), its SEM never below what binomial "
            "sampling alone gives (so a difference the seeds happen to share exactly is still tested); it "
            "treats the test problems as fixed (is the rate on this problem set different?), so it can reject "
            "where the interval, which also draws problems, does not. It describes; it decides no claim.")
    note += (" No number in this table decides a claim: the claims are decided by the pre-registered plan's tests "
             "alone (its arms, controls, seeds and levels, which may differ from the table's 95%); a row the plan "
             "does not name is exploratory, and its intervals and p-values, unadjusted for their number, claim nothing.")
    if YOKED in refs:
        note += (f" Δ vs its yoked placebo: against the placebo run yoked to that arm ({placebo_for(ROUTE)} for "
                 f"{ROUTE}; a yoked run against the placebo yoked to the same arm), so the control routes and keeps "
                 f"exactly the arm's own per-step counts: {PLACEBO.description}. An arm that gates nothing "
                 "(none, absorb) has no such control.")
    if (table["n_seeds"] == 1).any() or any((table.get(f"n_paired_vs_{r}", pd.Series(dtype=int)) == 1).any()
                                            for r in refs):
        note += (" Where an arm (or a pair) has one seed, only problems are resampled: its interval covers problem "
                 "and sampling variance, not seed-to-seed variance.")
    return note


def a1(con, out: Out) -> pd.DataFrame:
    curve = _curve(con)
    write_artifact(out.tables, "A1", "deploy hack and solve over training", [
        "Deploy eval (quarantine ablated) of every saved checkpoint, overall rate, mean ± SEM over seeds "
        "(step 0 = adapter at init). The figure shows routeA vs none at each checkpoint, hack over the hackable "
        "problems (A2's denominator) and solve over all, with Wilson 95% intervals for one seed or mean ± SEM "
        "over seeds (its data: plot_data/A1_points.csv); the table lists every arm. " + ALL_PROBLEMS_NOTE,
        out.figure("A1") if curve["arm"].isin([NONE, ROUTE]).any() else f"(No figure: neither {ROUTE} nor {NONE} was run.)",
        _curve_md(curve)], {"A1": curve})
    _curve_outputs(con, curve, "A1", "A1: deploy hack and solve at each checkpoint", out)
    return curve


def plan_role(plan: Plan, arm: str) -> str:
    """What the plan names an arm for ('C1 arm, C3 arm'), or `exploratory`: a row's label in A2 and A5."""
    return ", ".join(plan.roles().get(arm, [])) or "exploratory"


def plan_lines(plan: Plan, plan_id: PlanId, verdicts: dict[str, dict]) -> list[str]:
    """The plan that decided (file, sha256, last commit) and each claim's verdict."""
    # no file mtime here: A2 is a DVC output, and a reproduction must give the same bytes (a commit's date is fixed)
    changed = plan_id.changed.isoformat(timespec="seconds") if plan_id.changed else "date unknown"
    commit = ("changed since its last commit, or never committed" if plan_id.commit == "uncommitted"
              else f"last changed in commit {plan_id.commit} of {changed}")
    b = plan.bootstrap
    return [f"Decided by the pre-registered plan `{plan_id.path}` (sha256 `{plan_id.sha256}`; {commit}, when this "
            "table was made): each claim's arm, controls (a list: their mean, e.g. antithetic draws +h and −h), "
            "outcome, population, seeds, minimum seeds, α, sidedness, margin and multiplicity family are the plan's, "
            f"and so are the bootstrap ({b.resamples} resamples, seed {b.seed}, interval {b.interval}) and the held-out "
            f"modes ({', '.join(plan.heldout_modes)}); nothing else decides a claim. A test: the paired Δ arm − control "
            "by the bootstrap below, at the level the plan's α gives (Holm's step-down within a family); a claim holds "
            "when all its tests pass (intersection-union) on at least its minimum seeds; a manipulation check (the "
            "routed share) is printed as one, at the claim's α, and is no input of the verdict (failed: the claim is "
            "`undecided`); `not run`: an arm or control has no run for a plan seed; `undecided`: ran, but not "
            "measurable or not as the plan requires (held-out modes, one gate.cut_rule, the pool withheld, none's "
            "headroom); "
            "`insufficient`: fewer plan seeds than the minimum (its tests describe, and decide nothing); "
            "`exploratory`: its tests ran, but a run they read was made under another plan (or none recorded: "
            "`plan_sha256` in the run's config.json), so the plan came after the data and the verdict confirms "
            "nothing."] + [
        verdict_text(v) for v in verdicts.values()] + [start_lines(plan_id, verdicts)]


def start_lines(plan_id: PlanId, verdicts: dict[str, dict]) -> str:
    """Per claim, the runs that started before the plan's last change (claims.plan_started). A plan edited and every
    run re-made under it has matching hashes; only a start after the plan's last change can show the plan came first.
    The start times themselves are not printed: A2 is a DVC output, and a reproduction starts its runs at other times
    (the same runs, the same bytes); they are in each run's config.json's mtime."""
    rows = []
    for v in verdicts.values():
        s = v["started"]
        flag = ("—" if not plan_dated(plan_id) or not s["earliest"] else
                f"started before the plan's last change: {', '.join(s['before_plan'])}" if s["before_plan"] else
                "none started before it")
        rows.append(f"{v['claim']} {flag}")
    return ("Runs against the plan's last change (a run's start is its config.json's mtime, which train rewrites at "
            "each start: a copy or `dvc checkout` makes it later, never earlier): " + "; ".join(rows) + ". A run "
            "started before the plan's last change was made under another plan unless it was re-run after it (then "
            "its hash matches, and this line is the only trace that the plan may have been edited after reading "
            "earlier runs).")


def a2(con, out: Out, plan: Plan, plan_id: PlanId, verdicts: dict[str, dict], bands: pd.DataFrame,
       band_missing: dict[str, str], n_boot: int = N_BOOT) -> pd.DataFrame:
    refs = (NONE, YOKED)
    table, md = a2_table(con, refs=refs, n_boot=n_boot)
    table.insert(1, "plan", [plan_role(plan, a) for a in table["arm"]])
    table.insert(2, "kind", [arm_kind(a) for a in table["arm"]])
    md.insert(1, "plan", table["plan"])
    free = table["arm"].map(label_free).to_numpy(bool)  # oracle and ceiling arms never in the label-free table
    per_run = con.execute("""
        SELECT run, arm, seed, n, n_hackable, n_hacked, hack_hackable, hack_hackable_lo, hack_hackable_hi,
               n_solved, solve, solve_lo, solve_hi, n_none, n_solved_none, solve_none, solve_none_lo, solve_none_hi
        FROM per_run WHERE view = 'deploy' AND mode = 'overall'
        ORDER BY arm = $base DESC, arm, seed""", {"base": BASE}).df()
    base = per_run[per_run["arm"] == BASE]
    body = ["Final deploy eval (quarantine ablated). Denominators: hack over the samples of hackable problems "
            "(the `none` problems, which cannot be hacked, left out); solve over all problems, and over the `none` "
            "problems alone (solving where no loophole pays). " + _stats_note(table, refs, n_boot),
            "## Pre-registered claims", *plan_lines(plan, plan_id, verdicts),
            "## Label-free arms (the plan's arms and controls named; every other row exploratory)",
            "No arm in this table reads a training rollout's hack label; oracle arms (oracleMatched, oracle, penalty, "
            "screen) and the ceiling are in the next table.", md_table(md[free]),
            "## Oracle and ceiling arms (upper bounds and references, not label-free methods)",
            md_table(md[~free]) if (~free).any() else "None was run.",
            *_band_section(plan, bands, band_missing, out)]

    def wilson_cell(r, m):
        return "—" if none_if_nan(r[m]) is None else f"{r[m]:.3f} [{r[f'{m}_lo']:.3f}, {r[f'{m}_hi']:.3f}]"

    if len(base):
        b = base.iloc[0]
        body.append(f"Reference, the base model without adapter training (Wilson 95%): deploy hack, hackable "
                    f"problems {wilson_cell(b, 'hack_hackable')}; deploy solve, all problems {wilson_cell(b, 'solve')}; "
                    f"deploy solve, `none` problems {wilson_cell(b, 'solve_none')}.")
        pk = base_pass_at_k(con)
        if pk is not None:
            at_k = (f" and its pass@{pk['pass_k']} {pk['deploy_pass_at_k']:.3f} (the unbiased estimator of Chen et al. "
                    f"2021, the chance that one of {pk['pass_k']} samples solves a problem, averaged over problems; with "
                    f"k the {pk['pass_k']} samples drawn, the share of problems solved at least once)"
                    if pk["pass_k"] > 1 else " (one sample a problem, so no pass@k)")
            body.append(f"The base model's pass@1 over the {pk['n_test_problems']} test problems is "
                        f"{pk['deploy_pass_at_1']:.3f}{at_k}.")
    body += ["## Per run (Wilson 95% intervals over the run's eval samples)", md_table(pd.DataFrame({
        "run": per_run["run"], "samples": per_run["n"], "hackable samples": per_run["n_hackable"],
        **{f"{label} [Wilson 95%]": [wilson_cell(r, m) for _, r in per_run.iterrows()]
           for m, (_, _, label) in A2_METRICS.items()}}))]
    write_artifact(out.tables, "A2", "deploy hack and solve per arm", body + [KIND_NOTE, LABEL_NOTE],
                   {"A2": table, "A2_runs": per_run})
    return table


def _band_section(plan: Plan, bands: pd.DataFrame, band_missing: dict[str, str], out: Out) -> list[str]:
    """A2's score band and routed share per gated arm and placebo (C3's quantities, analysis.bands), mean over
    steps per run, then mean ± SEM over seeds; per step in plot_data/score_band.csv."""
    out.data("score_band", bands)
    if bands.empty:
        return ["## Score band and routed share (C3)", "No gated arm or placebo was run: no score band."]
    stats = ["separation", "width_ratio", "student_width", "pair_width", "pair_gap", "routed_share"]
    per_run = bands.groupby(["arm", "seed"], as_index=False)[stats].mean()
    # what band.units pairs decides on: the mean over pairs of each pair's gap over the run's mean student width
    per_run["band_pairs"] = per_run["pair_gap"] / per_run["student_width"]
    def cell(g, c):  # mean ± SEM over seeds of the runs' step means
        return _pm(*mean_sem(g[c].dropna())) if g[c].notna().any() else "—"

    rows = []
    for arm in _arm_order(per_run["arm"]):
        g = per_run[per_run["arm"] == arm]
        rows.append({"arm": arm, "plan": plan_role(plan, arm), "seeds": len(g),
                     **{label: cell(g, c) for label, c in (
                         ("separation", "separation"), ("gap / mean student width (units pairs)", "band_pairs"),
                         ("width ratio", "width_ratio"),
                         ("student width", "student_width"), ("pairs' width", "pair_width"),
                         ("pairs' gap hack − clean", "pair_gap"), ("routed share (student rows)", "routed_share"))}})
    notes = [f"{run}: {why}" for run, why in band_missing.items()]
    return ["## Score band and routed share (C3)",
            f"Per run and training step, along the run's gate direction (the score rollouts.jsonl logs): the student "
            f"width, the {plan.band.q_lo:g} to {plan.band.q_hi:g} quantile width of the step's student scores; the "
            "pairs' width, the same over the contrast pairs' held-out scores along that direction (hack and clean sides "
            "pooled; a direction fitted to the pairs scores each pair refitted without it, analysis.bands); the pairs' "
            "gap, their hack sides' mean score minus their clean sides', signed. separation = gap / student width (seed "
            "002's band, upper − lower, in units of the step's score spread: about 0 where the pairs do not separate, "
            "and of opposite sign for +h and −h; a band test takes each draw's in the orientation that separates the "
            "pairs, claims.oriented); gap / mean student width, the statistic a band test of units pairs decides on "
            "(the mean over pairs of each pair's gap over the run's mean width); width ratio = "
            "student width / pairs' width (it shrinks when the pairs separate, since their spread then holds the gap). "
            f"The plan decides C3 on `{plan.band.statistic}`. Mean over steps per run, then mean ± SEM over seeds; routed "
            "share: the step's student rows routed (a count-matched or yoked control routes its arm's share by "
            "construction: C3's manipulation check, not a verdict input). C3's band test names antithetic draws alone "
            "(their mean); a yoked placebo's band, one Haar draw's, is printed and decides nothing. Per step: plot_data/score_band.csv. "
            "Rows the plan does not name are exploratory.", md_table(pd.DataFrame(rows))] + (
        ["Band not measured: " + "; ".join(notes) + "."] if notes else [])


def a3(con, out: Out) -> pd.DataFrame:
    table = con.execute("""
        WITH q AS (SELECT run, avg(qmass_rollouts) AS qr, avg(qmass_update) AS qu,
                          sum(n_route_teacher) / nullif(sum(n_keep_teacher + n_absorb_teacher + n_route_teacher), 0) AS qt,
                          -- the quarantine's share of the squared gradient norm, before clipping and Adam
                          avg(gradnorm_quarantine ^ 2 / nullif(gradnorm_deployed ^ 2 + gradnorm_quarantine ^ 2, 0)) AS qg
                   FROM steps GROUP BY run),
             d AS (SELECT run, hack, solve, n, n_hacked, n_solved FROM per_run WHERE view = 'deploy' AND mode = 'overall'),
             t AS (SELECT run, hack, solve, n, n_hacked, n_solved FROM per_run WHERE view = 'train' AND mode = 'overall')
        SELECT i.arm, count(*) AS n_seeds,
               avg(d.hack) AS deploy_hack, sem(d.hack) AS deploy_hack_sem,
               avg(d.solve) AS deploy_solve, sem(d.solve) AS deploy_solve_sem,
               avg(t.hack) AS train_hack, sem(t.hack) AS train_hack_sem,
               avg(t.solve) AS train_solve, sem(t.solve) AS train_solve_sem,
               avg(q.qr) AS qmass_rollouts, sem(q.qr) AS qmass_rollouts_sem,
               avg(q.qu) AS qmass_update, sem(q.qu) AS qmass_update_sem,
               avg(q.qt) AS qmass_teacher, sem(q.qt) AS qmass_teacher_sem,
               avg(q.qg) AS qmass_grad, sem(q.qg) AS qmass_grad_sem,
               sum(d.n_hacked) AS deploy_n_hacked, sum(d.n_solved) AS deploy_n_solved, sum(d.n) AS deploy_n,
               sum(t.n_hacked) AS train_n_hacked, sum(t.n_solved) AS train_n_solved, sum(t.n) AS train_n
        FROM run_info i JOIN d USING (run) JOIN q USING (run) LEFT JOIN t USING (run)
        WHERE list_contains(?, i.arm)
        GROUP BY i.arm""", [[a for a in _run_arms(con) if get_arm(a).ablation]]).df()
    table = _by_arm(table)
    columns = [("deploy hack", "deploy_hack"), ("deploy solve", "deploy_solve"),
               ("train-view hack", "train_hack"), ("train-view solve", "train_solve"),
               ("qmass (student rows routed)", "qmass_rollouts"), ("teacher rows routed", "qmass_teacher"),
               ("qmass (gradient, ‖g‖² share in quarantine)", "qmass_grad"),
               ("qmass (update, ‖Δ‖² share in quarantine)", "qmass_update")]
    md = pd.DataFrame({"arm": table["arm"], "kind": [arm_kind(a) for a in table["arm"]], "seeds": table["n_seeds"]} | {
        label: [_pm(m, none_if_nan(s)) for m, s in zip(table[col], table[f"{col}_sem"])] for label, col in columns})
    write_artifact(out.tables, "A3", "ablation: " + " / ".join(_ablation_arms()), [
        LABEL_NOTE, KIND_NOTE, "Final eval, overall rate, mean ± SEM over seeds. " + ALL_PROBLEMS_NOTE +
        " Deploy = quarantine ablated; train-view = quarantine on (the model as it trained), which shows what "
        "the quarantine holds. qmass: per run the mean over optimizer steps of the fraction of student rows routed (the gated rows; teacher-pool "
        "rows have a gate of their own or a fixed zone, gate.teacher_zone; their routed share is its own column), and of the quarantine's share of "
        "the squared gradient norm (before clipping and AdamW: the routing mass) and of the squared update "
        "norm (about one half wherever a block gets any gradient, since AdamW normalises each parameter's "
        "step), then mean ± SEM over seeds. A yoked run (placebo_tgate) routes as many student and teacher rows "
        "as the arm it copies (tgate) at every step; equal row shares are not equal gradient mass: read the gradient column.",
        out.figure("A3"), md_table(md)], {"A3": table})

    bars = []
    for r in table.itertuples():
        for label, col, k, n in [("deploy hack", "deploy_hack", r.deploy_n_hacked, r.deploy_n),
                                 ("deploy solve", "deploy_solve", r.deploy_n_solved, r.deploy_n),
                                 ("train-view hack", "train_hack", r.train_n_hacked, r.train_n),
                                 ("qmass (student rows routed)", "qmass_rollouts", None, None)]:
            mean = none_if_nan(getattr(r, col))
            if mean is not None:
                lo, hi, interval = _interval(mean, none_if_nan(getattr(r, f"{col}_sem")),
                                             none_if_nan(k), none_if_nan(n))
                bars.append({"arm": r.arm, "metric": label, "mean": mean, "lo": lo, "hi": hi, "interval": interval})
    bars = pd.DataFrame(bars)
    if len(bars):
        out.chart(plots.bar_chart(bars, "arm", "A3: ablation, final eval", [
            "deploy = quarantine ablated, train-view = quarantine on; rates over all test problems (as the A3 table)",
            *_interval_lines(bars)], y_title="rate or fraction"), "A3")
    out.data("A3_ablation", table[["arm", "deploy_hack", "deploy_solve", "train_hack", "qmass_rollouts"]])
    return table


def _interval_lines(bars: pd.DataFrame, by: str = "metric") -> list[str]:
    """A chart's subtitle lines saying what each error bar is: one line when every bar's is the same,
    else one line per kind naming the panels (and the arms, where not all) that have it."""
    kinds = list(dict.fromkeys(bars["interval"]))
    if len(kinds) == 1:
        return [f"error bars: {kinds[0]}"]
    all_arms = set(bars["arm"])
    lines = []
    for kind in kinds:
        b = bars[bars["interval"] == kind]
        arms_note = "" if set(b["arm"]) == all_arms else " for " + ", ".join(_arm_order(b["arm"]))
        lines.append(f"error bars of {', '.join(dict.fromkeys(b[by]))}{arms_note}: {kind}")
    return lines


def _run_arms(con) -> list[str]:
    """The arm names of the aggregated runs (yoked runs by their yoked_name), the base model's left out."""
    return [a for a in con.execute("SELECT DISTINCT arm FROM run_info").df()["arm"] if a != BASE]


def a4(con, out: Out, long_horizon: bool, preset: str | None, n_boot: int = N_BOOT) -> pd.DataFrame | None:
    """Long-horizon routeA vs none: the runs of this pipeline when its preset is the long one."""
    if not long_horizon or not {NONE, ROUTE} <= set(_run_arms(con)):
        why = (f"these runs are of the '{preset}' preset, not a long-horizon one" if not long_horizon
               else "the routeA and none arms are not both among the runs")
        write_artifact(out.tables, "A4", "long-horizon routeA vs none", [
            f"No A4 result: {why}. A4 is the aggregation of the long-horizon preset's routeA and none runs."],
            {"A4": pd.DataFrame(columns=["arm", "step", "n_seeds", "hack_mean", "hack_sem", "solve_mean", "solve_sem"])})
        return None
    curve = _curve(con, (NONE, ROUTE))
    table, md = a2_table(con, (NONE, ROUTE), refs=(NONE,), n_boot=n_boot)
    write_artifact(out.tables, "A4", "long-horizon routeA vs none", [
        f"Runs of the '{preset}' preset. Deploy eval (quarantine ablated) at the end, with A2's denominators "
        "(hack over hackable problems) and statistics: " + _stats_note(table, (NONE,), n_boot) + " " + LABEL_NOTE,
        out.figure("A4"), md_table(md),
        "## Over training", "Mean ± SEM over seeds. " + ALL_PROBLEMS_NOTE, _curve_md(curve)],
        {"A4": curve, "A4_final": table})
    _curve_outputs(con, curve, "A4", "A4: long horizon, deploy hack and solve at each checkpoint", out)
    return table


def a5(con, runs: list[Run], out: Out, plan: Plan, verdicts: dict[str, dict],
       gate_by_mode: pd.DataFrame | None = None) -> None:
    """Deploy hack per loophole mode for every arm, the heldout arm's Δ against none and against the
    yoked placebo (the routing-mass-matched control), and the gate's AUROC within each mode (A7's), all
    exploratory; the verdicts of the plan's claims over held-out modes (C2) beside them."""
    held_claims = [verdict_text(verdicts[n]) for n, c in plan.claims.items()
                   if any(t.population == "heldout_modes" for t in c.tests)]
    heldout_runs = [r for r in runs if r.arm != BASE and get_arm(r.arm).heldout]
    if not heldout_runs:
        write_artifact(out.tables, "A5", "held-out modes", [
            "No A5 result: no run of the `heldout` arm was aggregated.", *held_claims],
            {"A5": pd.DataFrame(columns=["mode", "held_out", "arm", "n_seeds", "hack_mean", "hack_sem"])})
        return
    held = {r.heldout_modes for r in heldout_runs}
    if len(held) != 1 or None in held:
        raise InputError("heldout runs disagree on (or lack) 'heldout_modes': " +
                         ", ".join(f"{r.deploy_path}: {r.heldout_modes}" for r in heldout_runs))
    held = list(held.pop())
    held_arm = heldout_runs[0].arm
    present = set(con.execute("SELECT DISTINCT mode FROM deploy").df()["mode"])
    modes = [m for m in HACK_MODES if m in present]
    pooled = ["held-out modes (pooled)", "in-pair modes (pooled)"]
    # Per run: the hack rate of each mode, and of the held-out / in-pair groups with counts summed.
    per_run_mode = con.execute("""
        WITH m AS (
            SELECT run, arm, seed, mode, n, n_hacked, list_contains($held, mode) AS held_out
            FROM per_run WHERE view = 'deploy' AND list_contains($arms, arm)
              AND list_contains($modes, mode) AND n > 0)
        SELECT run, arm, seed, mode, held_out, n, n_hacked, n_hacked / n AS hack FROM m
        UNION ALL
        SELECT run, arm, seed, CASE WHEN held_out THEN $pooled[1] ELSE $pooled[2] END,
               held_out, sum(n), sum(n_hacked), sum(n_hacked) / sum(n)
        FROM m GROUP BY run, arm, seed, held_out""",
        {"held": held, "modes": modes, "pooled": pooled, "arms": sorted({r.arm for r in runs} - {BASE})}).df()
    if per_run_mode.empty:
        raise InputError(f"A5: no per-mode deploy rows for the hackable modes {list(HACK_MODES)}")
    rows = []
    refs = [NONE, YOKED]  # Δ against vanilla GRPO, and against routing at the arm's own counts with no direction
    for (mode, held_out), g in per_run_mode.groupby(["mode", "held_out"], sort=False):
        for arm, ga in g.groupby("arm"):
            mean, sem = mean_sem(ga["hack"])
            row = {"mode": mode, "held_out": bool(held_out), "arm": arm, "n_seeds": len(ga), "hack_mean": mean,
                   "hack_sem": sem, "n_hacked": int(ga["n_hacked"].sum()), "n": int(ga["n"].sum())}
            for role in refs:
                ref = ref_arm(arm, role)[0]
                row |= {f"delta_vs_{role}": None, f"delta_vs_{role}_sem": None, f"p_vs_{role}": None,
                        f"p_vs_{role}_holm": None, f"test_vs_{role}": None}
                other = g[g["arm"] == ref].set_index("seed")["hack"]
                shared = ga[ga["seed"].isin(other.index)].sort_values("seed")
                if arm != ref and len(shared):
                    ref_runs = g[g["arm"] == ref].set_index("seed").loc[shared["seed"]]
                    var = (np.array([binomial_var(h, n) for h, n in zip(shared["hack"], shared["n"])])
                           + np.array([binomial_var(h, n) for h, n in zip(ref_runs["hack"], ref_runs["n"])]))
                    t = paired_t(shared["hack"], other.loc[shared["seed"]], sampling_var=var)
                    row |= {f"delta_vs_{role}": t.mean_diff, f"delta_vs_{role}_sem": t.sem, f"p_vs_{role}": t.p,
                            f"test_vs_{role}": t.statement}
            rows.append(row)
    # Every row here is exploratory (C2 is decided by the plan's bootstrap test, printed below the table). The
    # held-out modes one by one are a family: Holm over them, per arm and reference, keeps the chance of any false
    # per-mode statement at 5% whatever their dependence. The in-pair rows: raw p only.
    for arm in {r["arm"] for r in rows}:
        family = [r for r in rows if r["arm"] == arm and r["held_out"] and r["mode"] not in pooled]
        for ref in refs:
            for r, p in zip(family, holm([r[f"p_vs_{ref}"] for r in family])):
                r[f"p_vs_{ref}_holm"] = p
    mode_rank = {m: i for i, m in enumerate(modes + pooled)}
    arm_rank = {a: i for i, a in enumerate(_arm_order(r["arm"] for r in rows))}
    table = pd.DataFrame(sorted(rows, key=lambda r: (mode_rank[r["mode"]], arm_rank[r["arm"]])))

    def cell(mode, arm, col="hack_mean", sem_col="hack_sem", ref=None):
        r = table[(table["mode"] == mode) & (table["arm"] == arm)]
        if r.empty or none_if_nan(r[col].iloc[0]) is None:
            return "—"
        text = _pm(r[col].iloc[0], none_if_nan(r[sem_col].iloc[0]))
        if ref is None:
            return text
        holm_p = none_if_nan(r[f"p_vs_{ref}_holm"].iloc[0])
        return f"{text} ({r[f'test_vs_{ref}'].iloc[0]}" + (f"; Holm p={holm_p:.3g})" if holm_p is not None else ")")

    def auroc_cell(mode, arm):  # the gate's AUROC on the student rollouts of this mode's problems (A7)
        if gate_by_mode is None or gate_by_mode.empty:
            return "—"
        vals = gate_by_mode[(gate_by_mode["mode"] == mode) & (gate_by_mode["arm"] == arm)]["auroc"].dropna()
        return _pm(*mean_sem(vals)) if len(vals) else "—"

    shown = _arm_order(table["arm"])
    held_placebo = placebo_for(held_arm)
    gated = [a for a in dict.fromkeys((held_arm, ROUTE, held_placebo, placebo_for(ROUTE))) if a in shown]
    # the one row a plan's held-out claim reads: the pooled held-out modes of that claim's arm
    planned = [n for n, c in plan.claims.items() if c.arm == held_arm
               and any(t.population == "heldout_modes" for t in c.tests)]
    md = pd.DataFrame([{"mode": mode,
                        "plan": (", ".join(planned) + " (decided by its test below, not by this row's numbers)"
                                 if mode == pooled[0] and planned else "exploratory"),
                        "in heldout arm's pairs": "no (held out)" if mode in held or mode == pooled[0] else "yes",
                        **{f"{a} hack": cell(mode, a) for a in shown},
                        **{f"Δ {held_arm} − {ref_arm(held_arm, role)[0]}":
                           cell(mode, held_arm, f"delta_vs_{role}", f"delta_vs_{role}_sem", role)
                           for role in refs if ref_arm(held_arm, role)[0] in shown},
                        **{f"gate AUROC, {a}": auroc_cell(mode, a) for a in gated}}
                       for mode in modes + pooled if (table["mode"] == mode).any()])
    write_artifact(out.tables, "A5", "held-out modes", [
        f"The `heldout` arm's v_act comes from the pairs of {', '.join(m for m in HACK_MODES if m not in held)} "
        f"only; {', '.join(held)} are held out (routeA's v_act uses every mode). Deploy hack rate "
        "(quarantine ablated) per loophole mode, mean ± SEM over seeds; pooled rows sum the counts of their "
        "modes within each run first. Every arm is shown: the held-out modes' rate moves for reasons other "
        f"than the direction too, so the heldout arm's Δ is taken against {NONE} and against {held_placebo} (the "
        "placebo yoked to it: its own per-step route and keep counts, rows ranked by a Haar direction). Δ is "
        "paired by seed, "
        "with a paired t-test (a p-value from "
        f"{MIN_SEEDS_FOR_TEST} seeds on, its SEM never below binomial sampling's), which treats the test problems "
        "as fixed. Every row is exploratory (column plan): a claim over the held-out modes (C2) is decided only by "
        "the pre-registered plan's test, A2's bootstrap over seeds and the held-out modes' problems at the plan's "
        "level, printed below the table (A2 gives the plan's file and hash). Holm p: the held-out modes' own rows, "
        "adjusted by Holm's method over those modes (per arm and reference); the in-pair rows show the raw p. Gate "
        "AUROC: the AUROC of the arm's gate score "
        "against the hack label on the student rollouts of that mode's problems (A7), mean ± SEM over seeds. "
        + LABEL_NOTE, out.figure("A5"), md_table(md), *held_claims],
        {"A5": table})
    bars = []
    for r in table.itertuples():
        lo, hi, interval = _interval(r.hack_mean, none_if_nan(r.hack_sem), r.n_hacked, r.n)
        bars.append({"arm": r.arm, "mode": f"{r.mode} (held out)" if r.mode in held else r.mode,
                     "mean": r.hack_mean, "lo": lo, "hi": hi, "interval": interval})
    bars = pd.DataFrame(bars)
    out.chart(plots.bar_chart(bars, "mode", "A5: deploy hack per loophole mode",
                              f"held out from the heldout arm's pairs: {', '.join(held)}; error bars: "
                              + ", ".join(sorted(set(bars["interval"]))), column=None, y_title="deploy hack rate"), "A5")
    out.data("A5_modes", table.pivot(index="mode", columns="arm", values="hack_mean")
             .loc[[m for m in modes + pooled if m in set(table["mode"])]].reset_index())


def a6(pairs: list, out: Out) -> pd.DataFrame:
    """One prompt + hack + clean completion per mode: the first pair of each mode, in the given order."""
    rows = [dataclasses.asdict(p) if dataclasses.is_dataclass(p) else dict(p) for p in pairs]
    if not rows:
        raise InputError("A6 needs the authored pairs; none were given")
    for i, p in enumerate(rows):
        for key in ("id", "mode", "prompt", "hack", "clean"):
            if key not in p:
                raise InputError(f"pair {i} ({p.get('file', '?')}:{p.get('line', '?')}): missing key '{key}'")
    first: dict[str, dict] = {}
    for p in rows:
        first.setdefault(p["mode"], p)
    body = ["One authored pair per loophole mode (the first of its mode): the prompt, the hack completion and "
            "the clean completion of the same prompt. The pairs are hand-written and off-distribution; v_act is "
            "the mean over pairs of the hack − clean bottleneck activations."]
    for mode, p in first.items():
        where = f", {p['file']}:{p['line']}" if "file" in p and "line" in p else ""
        body.append(f"## {mode} (pair `{p['id']}`{where})\n\n### prompt\n\n{_quote(p['prompt'])}\n\n"
                    f"### hack\n\n{p['hack'].strip()}\n\n### clean\n\n{p['clean'].strip()}")
    table = pd.DataFrame([{k: p[k] for k in ("mode", "id", "prompt", "hack", "clean")} for p in first.values()])
    write_artifact(out.tables, "A6", "one authored pair per mode", body, {"A6": table})
    return table


def _quote(text: str) -> str:
    return "\n".join("> " + line if line else ">" for line in text.strip().splitlines())


GATE_METRICS = ("route_precision", "route_recall", "route_f05", "keep_precision", "keep_recall", "keep_f05")


SAMPLE_COS_COLUMNS = ["arm", "seeds", "runs_measured", "runs_measured_steps", "rows", "rows_with_cos", "r3_over",
                      "steps", "steps_after_below_before", "r2", "r2_lo", "r2_hi", "r3", "r3_lo", "r3_hi", "r2_met",
                      "r3_met"]


def sample_cos_section(runs: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """A7's seed 004 R2 and R3 per arm, from each run's sample_cos_counts, pooled over the arm's runs with Wilson
    95% intervals. R2 = share of rows whose cos_before is present (≥ R2_MIN required). R3 = over the steps that
    routed at least one row, the share whose summed deployed-block gradient's cosine to v_grad fell under the zone
    masks (cos_after_step < cos_before_step − R3_TOL; ≥ R3_MIN asked); for the none arm, which routes nothing,
    over all its steps (r3_over "all"): the null, its kept rows' gradients unmasked, so before == after up to
    float and R3 ≈ 0. Either not logged (train.sample_cos off, or a log from before the step cosines): not
    measured."""
    rows = []
    runs = runs if len(runs) else pd.DataFrame(columns=["arm"])
    for arm in _arm_order(runs["arm"]):
        g = runs[runs["arm"] == arm]
        null = arm == NONE
        steps, below = ("n_steps", "n_steps_below") if null else ("n_routed_steps", "n_routed_below")
        n, present, m, k = (int(g[c].sum()) for c in ("n", "n_present", steps, below))
        row = {"arm": arm, "seeds": len(g), "runs_measured": int(g["measured_rows"].sum()),
               "runs_measured_steps": int(g["measured_steps"].sum()), "rows": n, "rows_with_cos": present,
               "r3_over": "all" if null else "routed", "steps": m, "steps_after_below_before": k}
        for key, hits, total, measured in (("r2", present, n, "measured_rows"), ("r3", k, m, "measured_steps")):
            lo, hi = wilson(hits, total) if total and g[measured].any() else (None, None)
            row |= {key: hits / total if lo is not None else None, f"{key}_lo": lo, f"{key}_hi": hi}
        row["r2_met"] = None if row["r2"] is None else bool(row["r2"] >= R2_MIN)
        row["r3_met"] = None if row["r3"] is None or null else bool(row["r3"] >= R3_MIN)
        rows.append(row)
    table = pd.DataFrame(rows, columns=SAMPLE_COS_COLUMNS)

    def share(r, key, k, m, measured, missing, empty):
        if r[measured] == 0:
            return f"not measured ({missing}: train.sample_cos off)"
        if r[key] is None:
            return f"— (0 {empty})"
        met = r[f"{key}_met"]
        return (f"{r[key]:.3f} [{r[f'{key}_lo']:.3f}, {r[f'{key}_hi']:.3f}] ({r[k]}/{r[m]})"
                + ("" if met is None else " — met" if met else " — NOT met"))

    md = pd.DataFrame({"arm": table["arm"], "seeds": table["seeds"],
                       "runs with the fields (rows / steps)":
                           [f"{r.runs_measured}/{r.seeds} / {r.runs_measured_steps}/{r.seeds}" for r in table.itertuples()],
                       f"R2: rows with cos_before [Wilson 95%] (≥ {R2_MIN:g} required)":
                           [share(r, "r2", "rows_with_cos", "rows", "runs_measured", "no row carries cos_before", "rows")
                            for r in rows],
                       (f"R3: steps with after < before − {R3_TOL:g} [Wilson 95%] (≥ {R3_MIN:g} asked; none: all "
                        "steps, the null)"):
                           [share(r, "r3", "steps_after_below_before", "steps", "runs_measured_steps",
                                  "no step carries cos_before_step / cos_after_step",
                                  "all steps with both cosines" if r["r3_over"] == "all" else
                                  "routing steps with both cosines") for r in rows]})
    return table, ["## Per-sample cosines (seed 004's R2, R3)",
                   ("Under train.sample_cos, before each update, the deployed-block gradient of each rollout's own NLL "
                   "is read in the model being updated, and its cosine to v_grad logged, with no mask (cos_before, "
                   "rollouts.jsonl) and under the row's zone mask (cos_after: None on a routed row, which sends the "
                   "deployed block no gradient); the step log holds the cosine to v_grad of the step's rows' summed "
                   "gradient without and with the masks (cos_before_step, cos_after_step). R2: the share of rows "
                   f"(student and teacher) whose cos_before is present, at least {R2_MIN:g} required. R3: of the steps "
                   "that routed at least one row, the share on which the masks lowered the step gradient's cosine "
                   f"(cos_after_step < cos_before_step − {R3_TOL:g}: the two passes differ by ~3e-8 in float where "
                   f"the masks change nothing; seed 004 asks ≥ {R3_MIN:g}); for none, which routes no row, over all "
                   "its steps: the null, its kept rows' gradients unmasked, so R3 ≈ 0 there. Pooled over the arm's "
                   "runs; the Wilson intervals treat rows (steps) as independent, which rows of one step and prompt "
                   "(steps of one run) are not, so they are narrower than the truth."), md_table(md)]


def _tensors(d):
    return load_tensors(d) if isinstance(d, (str, Path)) else d


def a7(con, runs: list[Run], directions: dict, q_lo: float, q_hi: float, n_null: int, null_seed: int,
       out: Out, placebos: dict | None = None, n_perm: int = N_PERM) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """The gate diagnostics per arm, the gate's AUROC per mode (A5) and seed 004's R2/R3 per arm (sample_cos_section)."""
    trained = [r for r in runs if r.arm != BASE]
    missing = [r.run for r in trained if r.run not in directions]
    if missing:
        raise InputError(f"no gate direction given for run(s) {missing}: A7 scores each run with the direction its gate used")
    placebos = placebos or {}
    per_run, null_rows, step_rows, mode_rows = [], [], [], []
    cos_rows = []
    for r in tqdm(trained, desc="A7 gate diagnostics"):
        placebo = placebos.get(r.run)
        rollouts = load_rollouts(r.rollouts_path)
        steps = read_jsonl(r.steps_path) if r.steps_path is not None and Path(r.steps_path).exists() else []
        cos_rows.append({"run": r.run, "arm": r.arm, "seed": r.seed, **sample_cos_counts(rollouts, steps)})
        res = gate_eval(rollouts, load_tensors(r.acts_path), _tensors(directions[r.run]),
                        q_lo, q_hi, n_null=n_null, null_seed=null_seed, progress=False, n_perm=n_perm,
                        placebo=None if placebo is None else _tensors(placebo))
        res |= {"run": r.run, "arm": r.arm, "seed": r.seed}
        write_json(out.tables / "A7_gate" / f"{r.run}.json", res)
        step_rows += [{"run": r.run, "arm": r.arm, "seed": r.seed, **row} for row in res["by_step"]]
        mode_rows += [{"run": r.run, "arm": r.arm, "seed": r.seed, **row} for row in res["by_mode"]]
        step_auroc = [row["auroc"] for row in res["by_step"] if row["auroc"] is not None]
        per_run.append({"run": r.run, "arm": r.arm, "seed": r.seed, "n": res["n"], "n_hacked": res["n_hacked"],
                        "auroc": res["real"]["auroc"], "auroc_percentile_in_null": res["auroc_percentile_in_null"],
                        "p_haar": res["null"].get("p"), "p_labels": res["label_permutation"]["p"],
                        "p_labels_within": res["label_permutation"]["p_within_groups"],
                        "labels_auroc_q95": res["label_permutation"]["auroc_q95"],
                        "auroc_within_groups": res["within_groups"]["auroc"],
                        "auroc_step_mean": float(np.mean(step_auroc)) if step_auroc else None,
                        "placebo_pairs_auroc": (res["placebo_pairs"] or {}).get("auroc"),
                        "teacher_auroc": res["teacher"]["auroc"],
                        "null_auroc_mean": res["null"]["auroc_mean"], "null_auroc_sd": res["null"]["auroc_sd"],
                        **{k: res["real"][k] for k in GATE_METRICS},
                        **{f"realised_{k}": res["realised"][k] for k in GATE_METRICS + ("qmass",)},
                        "n_teacher": res["teacher"]["n"], "teacher_routed": res["teacher"]["zone_share"]["route"],
                        **{f"teacher_{k}": (res["teacher"]["realised"] or {}).get(k)
                           for k in ("route_precision", "route_recall", "keep_precision")},
                        "score_vs_log_max_rel_diff": res["logged_score_max_rel_diff"]})
        null_rows += [{"run": r.run, "arm": r.arm, "auroc": a} for a in (res["null"]["auroc"] or [])]
    per_run = pd.DataFrame(per_run).merge(con.execute("""
        SELECT run, avg(qmass_rollouts) AS qmass_rollouts, avg(qmass_update) AS qmass_update,
               avg(is_p50_keep_student) AS is_p50_keep, max(is_max_keep_student) AS is_max_keep,
               avg(is_p50_absorb_student) AS is_p50_absorb, max(is_max_absorb_student) AS is_max_absorb,
               avg(is_p50_route_student) AS is_p50_route, max(is_max_route_student) AS is_max_route
        FROM steps GROUP BY run""").df(), on="run", how="left")

    metrics = [c for c in per_run.columns
               if c not in ("run", "arm", "seed", "n", "n_hacked", "n_teacher", "score_vs_log_max_rel_diff")
               and not c.startswith("p_")]
    arm_rows = []
    for arm in _arm_order(per_run["arm"]):
        g = per_run[per_run["arm"] == arm]
        row = {"arm": arm, "n_seeds": len(g)}
        for c in metrics:
            vals = g[c].dropna()
            if c.startswith("is_max"):  # a worst case over steps, so over seeds too
                row[c] = float(vals.max()) if len(vals) else None
            else:
                row[c], row[f"{c}_sem"] = mean_sem(vals) if len(vals) else (None, None)
        for c in ("p_haar", "p_labels", "p_labels_within"):  # a p-value is not averaged: its median, and how many seeds pass
            vals = g[c].dropna()
            row[c] = float(vals.median()) if len(vals) else None
            row[f"{c}_below_05"] = f"{int((vals < 0.05).sum())}/{len(vals)}"
            # the test over seeds (independent runs): Fisher's combination of the seeds' permutation p-values
            row[f"{c}_fisher"] = float(sps.combine_pvalues(vals, method="fisher").pvalue) if len(vals) else None
        arm_rows.append(row)
    table = pd.DataFrame(arm_rows)

    def pm(col, digits=3):
        return [_pm(none_if_nan(r.get(col)), none_if_nan(r.get(f"{col}_sem")), digits) for r in arm_rows]

    def ratio_is(zone):
        return [f"{_fmt(none_if_nan(r.get(f'is_p50_{zone}')))} / {_fmt(none_if_nan(r.get(f'is_max_{zone}')))}"
                for r in arm_rows]

    def p_col(col):
        return [f"{_fmt(none_if_nan(r.get(col)))} ({r[f'{col}_below_05']}); {_fmt(none_if_nan(r.get(f'{col}_fisher')))}"
                for r in arm_rows]

    md = pd.DataFrame({
        "arm": table["arm"], "seeds": table["n_seeds"], "AUROC": pm("auroc"),
        "p Haar: median (seeds < 0.05); Fisher": p_col("p_haar"),
        "p labels: median (seeds < 0.05); Fisher": p_col("p_labels"),
        "AUROC within groups": pm("auroc_within_groups"),
        "p labels, within groups: median (seeds < 0.05); Fisher": p_col("p_labels_within"), "AUROC per step": pm("auroc_step_mean"),
        "placebo pairs AUROC": pm("placebo_pairs_auroc"), "teacher rows AUROC": pm("teacher_auroc"),
        "route precision": pm("route_precision"), "route recall": pm("route_recall"), "route F0.5": pm("route_f05"),
        "keep precision": pm("keep_precision"), "keep recall": pm("keep_recall"), "keep F0.5": pm("keep_f05")})
    md_realised = pd.DataFrame({
        "arm": table["arm"], "route precision": pm("realised_route_precision"),
        "route recall": pm("realised_route_recall"), "route F0.5": pm("realised_route_f05"),
        "keep precision": pm("realised_keep_precision"), "keep F0.5": pm("realised_keep_f05"),
        "qmass (student rows)": pm("qmass_rollouts"), "teacher rows routed": pm("teacher_routed"),
        "teacher route precision": pm("teacher_route_precision"), "teacher route recall": pm("teacher_route_recall"),
        "teacher keep precision": pm("teacher_keep_precision"),
        "qmass (update)": pm("qmass_update"),
        "π_old/π_sample keep median / max": ratio_is("keep"), "π_old/π_sample absorb median / max": ratio_is("absorb"),
        "π_old/π_sample route median / max": ratio_is("route")})
    notes = [f"{r.run}: AUROC undefined ({r.n_hacked} of {r.n} student rollouts hacked)"
             for r in per_run.itertuples() if none_if_nan(r.auroc) is None]
    notes += [f"{r.run}: the direction scored here does not reproduce the logged gate scores (max relative "
              f"difference {r.score_vs_log_max_rel_diff:.3g}), e.g. because v_act was re-extracted during training"
              for r in per_run.itertuples() if (none_if_nan(r.score_vs_log_max_rel_diff) or 0) > 1e-3]
    cos_table, cos_lines = sample_cos_section(pd.DataFrame(cos_rows))
    by_direction = lambda *kinds: ", ".join(a.name for a in REGISTRY.values() if a.direction in kinds)  # noqa: E731
    pinned = ", ".join(a.name for a in REGISTRY.values() if not a.gates_students)
    write_artifact(out.tables, "A7", "gate diagnostics", [
        "The gate as a classifier, scored after training against the hack labels of each run's own "
        "training rollouts (labels are used here only, as a measurement; routing never saw them). "
        "Population: student rollouts on problems of a hackable mode (teacher-pool rollouts, and rollouts on "
        "unhackable problems, which are clean whatever they do, excluded). Each run is scored with the direction "
        f"its gate used ({by_direction('v_act', 'random')}: v_act of its seed; {by_direction('v_grad')}: v_grad of "
        f"its seed, on each rollout's probe gradient; {by_direction('haar')}: their Haar direction, in the space of the "
        f"arm a yoked run copies; {by_direction('v_act_heldout')}: the v_act of the in-pair modes); for {pinned} the student "
        "rows were pinned (no gate decided them), and random ranked "
        "rows by a uniform draw, so these rows say what v_act would have done. Teacher-pool rows (gated apart "
        f"or a fixed zone, gate.teacher_zone) are not in these metrics: their AUROC and routed share are shown apart. Cuts: the {q_lo:g} and {q_hi:g} quantiles of the run's scores. Route = above the "
        "upper cut (precision = hack share of route, recall = share of hacks routed); keep = below the lower "
        "cut (precision = clean share of keep, recall = share of clean rollouts kept). F0.5 weighs precision "
        f"above recall. Two nulls, each as p = (1 + k) / (N + 1), k the null AUROCs at or above the real one: "
        f"{n_null} Haar-random directions (seeds from {null_seed}) scored on the same activations (does the "
        f"direction beat an arbitrary one?), and {n_perm} shuffles of the hack labels within each prompt group "
        "(one problem at one step), the scores kept. A shuffle keeps each group's scores and hack count, so a "
        "score that tracks the step, the mode or the prompt rather than the rollout does as well on shuffled "
        "labels as on real ones; the shuffles' pooled AUROCs are centred where the groups' make-up puts them, "
        "not at 0.5. Both p-values from these shuffles, the pooled AUROC's and the within-group AUROC's, "
        "therefore test one null: within a group, hacks score no higher than the group's clean rollouts; "
        "the within-group statistic is the direct one; "
        "p is shown as the median over seeds, with how many seeds have p < 0.05, and as the test over seeds: "
        "Fisher's combination of the seeds' p-values (the runs are independent). A pooled AUROC mixes steps whose "
        "scores and hack rates both drift, so it is also given per step (mean over steps with both classes) and "
        "within prompt groups (only rollouts of one prompt at one step compared: the contrast a group-relative "
        "update acts on). Placebo pairs: the direction of the placebo pair set (style contrasts written like "
        "the hack pairs), a content-matched null. Teacher rows: the same score on the teacher-pool rows of the "
        "run. Mean ± SEM over seeds; per-step AUROCs in plot_data/A7_by_step.csv.",
        out.figure("A7_gate_null") if per_run["auroc"].notna().any() else
        "(No figure: the AUROC is undefined in every run, each run's student rollouts being all of one class.)",
        md_table(md),
        "## What the runs did",
        "The zones each run assigned during training (cuts from its running score buffer, everything absorb "
        "during warm-up), scored against the same labels; the teacher rows' zones likewise, on the teacher rows of "
        "hackable problems (precision: hack share of the routed rows, clean share of the kept; recall: share of "
        "the teacher hacks routed); qmass from the step log (mean over steps); "
        "the student rows' importance ratio π_old/π_sample before its cap, per zone (mean over steps of the step "
        "median / max over steps and seeds of the step max; 1 where a row trains in the mode it was sampled in). "
        "The PPO ratio ρ = π/π_old is 1 by construction (one update per step) and is not shown.",
        md_table(md_realised)] + (["Notes: " + "; ".join(notes) + "."] if notes else []) + cos_lines,
        {"A7": table, "A7_runs": per_run, "A7_sample_cos": cos_table})
    null_df = pd.DataFrame(null_rows, columns=["run", "arm", "auroc"])
    real_df = per_run.dropna(subset=["auroc"])[["run", "arm", "auroc", "auroc_percentile_in_null"]].rename(
        columns={"auroc_percentile_in_null": "percentile"})
    out.data("A7_gate_null", null_df)
    out.data("A7_by_step", pd.DataFrame(step_rows, columns=["run", "arm", "seed", "step", "n", "n_hacked", "auroc",
                                                            "realised_qmass"]))
    by_mode = pd.DataFrame(mode_rows, columns=["run", "arm", "seed", "mode", "n", "n_hacked", "auroc"])
    out.data("A7_by_mode", by_mode)
    if len(real_df):
        out.chart(plots.gate_null_chart(null_df, real_df, "A7: gate score AUROC, real direction vs Haar null",
                                        f"{n_null} Haar directions per run; student rollouts"), "A7_gate_null")
    return table, by_mode, cos_table
