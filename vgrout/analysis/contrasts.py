"""The arms' deploy rates and their differences, with intervals: A2's table, and the bootstrap the claims'
verdicts use (analysis.claims decides them, from the pre-registered plan alone).

Statistics (vgrout.stats): a rate is one number per run; an arm's number is mean ± SEM over
its seeds. A2's rates and every Δ (vs `none`, vs the placebo yoked to the arm) carry a 95% interval
from a hierarchical bootstrap over seeds and problems, paired by seed and problem (every run
samples the same test problems with the same seed), and a paired t-test over seeds (no
p-value with fewer than 5 seeds); A5's per-mode p-values are Holm-adjusted. Wilson intervals
describe a single run's rate.
"""
from __future__ import annotations

import math
from typing import Iterable

import numpy as np
import pandas as pd

from vgrout.arms import BASE, METHOD, PLACEBO, REFERENCE, placebo_for
from vgrout.arms import get as get_arm
from vgrout.arms import order as _arm_order
from vgrout.io import InputError
from vgrout.layout import run_name
from vgrout.stats import N_BOOT, binomial_var, hierarchical_bootstrap, paired_t, pass_at_k

NONE, ROUTE = REFERENCE.name, METHOD.name  # Δ is taken against NONE; A1 and A4 draw ROUTE against it
# A2 takes every gated arm's Δ against the placebo yoked to it too (arms.placebo_for: placebo_routeA for
# routeA): routing at the arm's own per-step counts, no direction. The column keys say `vs_placebo`.
YOKED = PLACEBO.name
BOOT_SEED = 0  # the bootstrap's Generator seed: the same resamples on every aggregation of the same files
RATE, DIFF = (0.0, 1.0), (-1.0, 1.0)  # what a rate and a difference of rates can be: the intervals' support


def arm_kind(name: str) -> str:
    """How A2 and A3 mark an arm: oracle (it reads the rollouts' true labels in training), ceiling
    (trained without the loopholes) or label-free."""
    return get_arm(name).kind


def label_free(name: str) -> bool:
    """Whether an arm may sit in a table presented as label-free: it reads no training rollout's label (not an
    oracle: arms.Arm.oracle) and trains where the loopholes pay (not the ceiling)."""
    return get_arm(name).kind == "label-free"


def ref_arm(arm: str, ref: str) -> tuple[str | None, str | None]:
    """The arm a Δ of `arm` is taken against for the reference `ref` (NONE, or YOKED: the placebo yoked to
    `arm`), and why there is none where there is none."""
    if ref != YOKED:
        return ref, None
    p = placebo_for(arm)
    why = "screens the rows it flags" if get_arm(arm).gated else "gates nothing"
    return p, None if p else f"{arm} {why}: no placebo is yoked to it"


def none_if_nan(x):
    return None if x is None or (isinstance(x, float) and math.isnan(x)) or x is pd.NA else x


# A2's rates: name -> (the sample column averaged, which problems count, the label naming the denominator)
A2_METRICS = {"hack_hackable": ("hacked", "hackable", "deploy hack, hackable problems"),
              "solve": ("gt_pass", "all", "deploy solve, all problems"),
              "solve_none": ("gt_pass", "none", "deploy solve, `none` problems")}
A2_DELTAS = ("hack_hackable", "solve")  # the claims: Δ in deploy hack and deploy solve


def base_pass_at_k(con) -> dict | None:
    """The base model's deploy pass@1 and pass@k over the test problems, k its samples per problem (the
    unbiased estimator, stats.pass_at_k); None when the base run wrote no samples."""
    per_problem = con.execute("""
        SELECT s.problem_id, count(*) AS n, sum(s.gt_pass) AS c
        FROM samples s JOIN run_info i USING (run)
        WHERE i.arm = $base AND s.view = 'deploy' GROUP BY s.problem_id""", {"base": BASE}).df()
    if per_problem.empty:
        return None
    k = int(per_problem["n"].min())
    return {"pass_k": k, "n_test_problems": len(per_problem),
            "deploy_pass_at_1": float(np.mean([pass_at_k(n, c, 1) for n, c in zip(per_problem["n"], per_problem["c"])])),
            "deploy_pass_at_k": float(np.mean([pass_at_k(n, c, k) for n, c in zip(per_problem["n"], per_problem["c"])]))}


def problem_means(con) -> pd.DataFrame:
    """Per trained run and test problem: the deploy samples' mean hacked and gt_pass (the bootstrap's cells)."""
    return con.execute("""
        SELECT i.arm, i.seed, s.problem_id, any_value(s.mode) AS mode, bool_or(s.hackable = 1) AS hackable,
               avg(s.hacked) AS hacked, avg(s.gt_pass) AS gt_pass, count(*) AS n_samples
        FROM samples s JOIN run_info i USING (run)
        WHERE s.view = 'deploy'
        GROUP BY i.arm, i.seed, s.problem_id""").df()


def matrix(pm: pd.DataFrame, arm: str, seeds: list[int], metric: str, column: str | None = None,
            modes: list[str] | None = None) -> pd.DataFrame:
    """[seed, problem] cells of `metric` for one arm: the problems its denominator counts, in id order.
    column: another column of the cells (n_samples) over the same denominator; modes: only these modes' problems."""
    value, problems, _ = A2_METRICS[metric]
    column = column or value
    g = pm[(pm["arm"] == arm) & pm["seed"].isin(seeds)]
    if modes is not None:
        g = g[g["mode"].isin(modes)]
    if problems == "hackable":
        g = g[g["hackable"]]
    elif problems == "none":
        g = g[g["mode"] == "none"]
    m = g.pivot(index="seed", columns="problem_id", values=column).reindex(index=seeds).sort_index(axis=1)
    holes = m.isna().any(axis=1)
    if holes.any():  # each seed's eval must have graded the same problems: resampling pairs them by id
        raise InputError(f"{metric}: the deploy samples of run(s) {[run_name(arm, s) for s in m.index[holes]]} "
                         f"miss problems the arm's other runs have (or have none): every run's eval must grade the "
                         "same test problems")
    return m


def _seed_sampling_var(pm, arm: str, seeds: list[int], metric: str, cells: np.ndarray, modes=None) -> np.ndarray:
    """Per seed, the binomial sampling variance of its rate: p(1 − p)/n over the samples it counts."""
    n = matrix(pm, arm, seeds, metric, "n_samples", modes).to_numpy().sum(axis=1)
    return np.array([binomial_var(p, int(k)) for p, k in zip(cells.mean(axis=1), n)])


def bootstrap(pm, arm: str, seeds: list[int], metric: str, ref: str | None, n_boot: int,
               modes: list[str] | None = None):
    """The hierarchical bootstrap of an arm's rate (ref None) or of the paired Δ arm − ref on shared seeds,
    and for a Δ the paired t over seeds (its SEM floored at the seeds' binomial sampling variance);
    None when the metric's denominator holds no problem (e.g. a substrate without `none` problems)."""
    x = matrix(pm, arm, seeds, metric, modes=modes)
    if x.shape[1] == 0:
        return None, None
    if ref is None:
        return hierarchical_bootstrap(x.to_numpy(), n_boot=n_boot, seed=BOOT_SEED, support=RATE), None
    r = matrix(pm, ref, seeds, metric, modes=modes)
    if list(r.columns) != list(x.columns):
        raise InputError(f"{metric}: runs of {arm} and {ref} graded different test problems, so they cannot be "
                         "paired by problem (were they evaluated on different substrates?)")
    x, r = x.to_numpy(), r.to_numpy()
    b = hierarchical_bootstrap(x, r, n_boot=n_boot, seed=BOOT_SEED, support=DIFF)
    var = _seed_sampling_var(pm, arm, seeds, metric, x, modes) + _seed_sampling_var(pm, ref, seeds, metric, r, modes)
    return b, paired_t(x.mean(axis=1), r.mean(axis=1), sampling_var=var)


def contrasts(con, pairs: Iterable[tuple[str, str]], n_boot: int = N_BOOT) -> pd.DataFrame:
    """The paired Δ arm − ref in A2_DELTAS for pairs of arms that no placebo answers (tgate − absorb,
    routeA − absorb, ...): A2's bootstrap and paired t over the seeds both arms have. A diagnosis's table;
    it decides no claim."""
    pm = problem_means(con)
    rows = []
    for arm, ref in pairs:
        seeds = sorted(set(pm.loc[pm["arm"] == arm, "seed"]) & set(pm.loc[pm["arm"] == ref, "seed"]))
        if not seeds:
            raise InputError(f"contrast {arm} − {ref}: no seed has runs of both arms")
        for metric in A2_DELTAS:
            b, t = bootstrap(pm, arm, [int(s) for s in seeds], metric, ref, n_boot)
            rows.append({"contrast": f"{arm} − {ref}", "metric": metric, "delta": b.estimate, "lo": b.lo,
                         "hi": b.hi, "p_paired_t": t.p, "n_seeds": b.n_seeds, "n_problems": b.n_problems})
    return pd.DataFrame(rows)


def a2_table(con, arms: Iterable[str] | None = None, refs: tuple[str, ...] = (NONE, YOKED),
              n_boot: int = N_BOOT) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per arm: final deploy rates (A2_METRICS) with bootstrap 95% intervals, and per reference arm the
    paired Δ (A2_DELTAS) with its bootstrap interval and paired t-test over the seeds both have.
    Also, unchanged for the summary: hack and solve over all problems, mean ± SEM over seeds."""
    final = con.execute("""
        SELECT arm, count(*) AS n_seeds, list(seed ORDER BY seed) AS seeds,
               avg(hack) AS hack_mean, sem(hack) AS hack_sem, avg(solve) AS solve_mean, sem(solve) AS solve_sem,
               sem(hack_hackable) AS hack_hackable_sem, sem(solve_none) AS solve_none_sem
        FROM per_run WHERE view = 'deploy' AND mode = 'overall' AND arm <> $base
        GROUP BY arm""", {"base": BASE}).df().set_index("arm")
    pm = problem_means(con)
    rows = []
    for arm in _arm_order(a for a in final.index if arms is None or a in arms):
        f = final.loc[arm]
        seeds = [int(s) for s in f.seeds]
        row = {"arm": arm, "n_seeds": int(f.n_seeds), "seeds": " ".join(map(str, seeds)),
               # over all problems (hack too), as before: summary.json keeps these keys
               "deploy_hack": f.hack_mean, "deploy_hack_sem": none_if_nan(f.hack_sem)}
        for m in A2_METRICS:
            b, _ = bootstrap(pm, arm, seeds, m, None, n_boot)
            row |= {f"deploy_{m}": b.estimate if b else None, f"deploy_{m}_lo": b.lo if b else None,
                    f"deploy_{m}_hi": b.hi if b else None, f"deploy_{m}_sem": none_if_nan(f[f"{m}_sem"]),
                    f"deploy_{m}_widened_by": b.widened_by if b else None,
                    f"deploy_{m}_undefined": b.degenerate if b else None}
        # how many seeds hacked at all: the widening cannot repair an effect that only some seeds show
        hack_cells = matrix(pm, arm, seeds, "hack_hackable")
        row["seeds_with_hack"] = int((hack_cells.to_numpy().mean(axis=1) > 0).sum()) if hack_cells.shape[1] else None
        for role in refs:
            ref, why = ref_arm(arm, role)
            shared = sorted(set(seeds) & set(final.loc[ref].seeds)) if ref in final.index else []
            why = why or ("reference arm" if arm == ref else f"no `{ref}` runs aggregated" if ref not in final.index
                          else f"no seed shared with {ref}" if not shared else None)
            row[f"ref_{role}"], row[f"n_paired_vs_{role}"] = ref, len(shared)
            for m in A2_DELTAS:
                key = f"{m}_vs_{role}"
                b, t = bootstrap(pm, arm, shared, m, ref, n_boot) if why is None else (None, None)
                row |= {f"delta_{key}": b.estimate if b else None, f"delta_{key}_lo": b.lo if b else None,
                        f"delta_{key}_hi": b.hi if b else None, f"delta_{key}_widened_by": b.widened_by if b else None,
                        f"delta_{key}_undefined": b.degenerate if b else None, f"delta_{key}_sem": t.sem if t else None,
                        f"t_{key}": t.t if t else None, f"p_{key}": t.p if t else None,
                        f"test_{key}": t.statement if t else why or "no problem in the denominator"}
        rows.append(row)
    table = pd.DataFrame(rows)

    def level(m):
        return [ci_text(r[f"deploy_{m}"], r[f"deploy_{m}_lo"], r[f"deploy_{m}_hi"], widened_by=r[f"deploy_{m}_widened_by"],
                    undefined=r[f"deploy_{m}_undefined"]) for r in rows]

    def delta(key):
        return [ci_text(r[f"delta_{key}"], r[f"delta_{key}_lo"], r[f"delta_{key}_hi"], signed=True,
                    widened_by=r[f"delta_{key}_widened_by"], undefined=r[f"delta_{key}_undefined"]) + "; " + r[f"test_{key}"]
                if none_if_nan(r[f"delta_{key}"]) is not None else r[f"test_{key}"] for r in rows]

    def delta_label(m, ref):  # "Δ hack, hackable problems vs none [95% CI]; paired t"
        against = "its yoked placebo" if ref == YOKED else ref
        return f"Δ {A2_METRICS[m][2].removeprefix('deploy ')} vs {against} [95% CI]; paired t"

    def seeds_cell(r):
        hacked = r["seeds_with_hack"]
        return str(r["n_seeds"]) if hacked is None else f"{r['n_seeds']} ({hacked} with a hack)"

    md = pd.DataFrame({"arm": table["arm"], "kind": [arm_kind(a) for a in table["arm"]],
                       "seeds": [seeds_cell(r) for r in rows]}
                      | {f"{label} [95% CI]": level(m) for m, (_, _, label) in A2_METRICS.items()}
                      | {delta_label(m, ref): delta(f"{m}_vs_{ref}") for ref in refs for m in A2_DELTAS})
    return table, md


def ci_text(estimate, lo, hi, signed: bool = False, widened_by: float | None = None, undefined: bool = False) -> str:
    """'0.257 [0.074, 0.460] ×1.42': the estimate, its interval and the few-seeds widening (shown above 1)."""
    if none_if_nan(estimate) is None:
        return "—"
    f = "{:+.3f}" if signed else "{:.3f}"
    if undefined:
        return f"{f.format(estimate)} in every cell [interval undefined]"
    w = f" ×{widened_by:.2f}" if none_if_nan(widened_by) is not None and widened_by > 1.005 else ""
    return f"{f.format(estimate)} [{f.format(lo)}, {f.format(hi)}]{w}"
