"""Aggregation, the DVC stage: every run's records (vgrout.analysis.tables) into the paper artifacts
A1-A7 (vgrout.analysis.artifacts), metrics/summary.json, the per-arm metric files DVC prints, plot
data and charts, all swapped in at once (io.staged_dirs) so a failure leaves the old ones.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from vgrout.analysis import plan as plan_file
from vgrout.analysis.artifacts import Out, a1, a2, a3, a4, a5, a6, a7
from vgrout.analysis.bands import banded, pair_bands, pair_scores, run_bands, score_kind
from vgrout.analysis.claims import (ClaimData, code_sha256, recorded_cut_rule, recorded_plan, started_at,
                                    summary_entry, verdicts, withheld_modes)
from vgrout.analysis.contrasts import A2_DELTAS, A2_METRICS, NONE, YOKED, base_pass_at_k, none_if_nan
from vgrout.analysis.diagnostics import N_NULL, N_PERM
from vgrout.analysis.tables import find_runs, load_run, load_tables
from vgrout.arms import BASE, run_arms
from vgrout.arms import order as _arm_order
from vgrout.arms import space as arm_space
from vgrout.io import InputError, read_json, staged_dirs, write_json
from vgrout.layout import Layout, run_name
from vgrout.routing.directions import SPACES, gate_direction

# ---------------------------------------------------------------------------- entry points

def _summary(a2_table: pd.DataFrame, a3_table: pd.DataFrame, a7_table: pd.DataFrame, cos_table: pd.DataFrame,
             bands: pd.DataFrame, base: dict | None, band_statistic: str) -> dict:
    out: dict[str, dict] = {}
    for r in a2_table.to_dict("records"):
        # deploy_hack and deploy_solve (over all problems) keep their meaning, so `dvc metrics diff` against
        # older results compares like with like; the claims are the hackable-denominator rate and the Δs.
        out[r["arm"]] = {k: r[k] for k in ("n_seeds", "deploy_hack", "deploy_hack_sem", "deploy_solve", "deploy_solve_sem")}
        out[r["arm"]] |= {f"deploy_{m}{end}": r[f"deploy_{m}{end}"] for m in A2_METRICS for end in ("", "_lo", "_hi")}
        out[r["arm"]] |= {f"{kind}_{m}_vs_{ref}{end}": r[f"{kind}_{m}_vs_{ref}{end}"]
                          for ref in (NONE, YOKED) for m in A2_DELTAS
                          for kind, end in (("delta", ""), ("delta", "_lo"), ("delta", "_hi"), ("p", ""))}
    for r in a3_table.to_dict("records"):
        out[r["arm"]] |= {"train_hack": r["train_hack"], "qmass": r["qmass_rollouts"], "qmass_update": r["qmass_update"]}
    for r in a7_table.to_dict("records"):
        out[r["arm"]] |= {"gate_auroc": r["auroc"], "gate_auroc_percentile": r["auroc_percentile_in_null"],
                          "gate_p_haar": r["p_haar"], "gate_p_labels": r["p_labels"],
                          "gate_p_haar_fisher": r["p_haar_fisher"], "gate_p_labels_fisher": r["p_labels_fisher"],
                          "gate_p_labels_within": r["p_labels_within"],
                          "gate_p_labels_within_fisher": r["p_labels_within_fisher"],
                          "gate_auroc_within_groups": r["auroc_within_groups"]}
    # seed 004's R2 (share of rows with cos_before) and R3 (share of routing steps whose summed gradient's cosine to
    # v_grad the masks lowered by more than R3_TOL; none: over all its steps, the null), each with its Wilson
    # interval; left out where not measured (the None is dropped below)
    for r in cos_table.to_dict("records"):
        out[r["arm"]] |= {f"sample_cos_{k}": r[k] for k in ("r2", "r2_lo", "r2_hi", "r3", "r3_lo", "r3_hi")}
    # C3's quantities per gated arm and placebo: mean over steps per run, then over seeds
    per_arm = bands.groupby(["arm", "seed"])[[band_statistic, "routed_share"]].mean().groupby("arm").mean()
    for arm, r in per_arm.iterrows():
        out.setdefault(arm, {}).update(score_band=r[band_statistic], routed_share=r["routed_share"])
    if base is not None:
        out[BASE] = base
    # DVC metrics: numbers only; a missing value is left out rather than written as null.
    return {arm: {k: round(float(v), 6) if isinstance(v, float) else int(v) for k, v in m.items()
                  if none_if_nan(v) is not None} for arm, m in out.items()}


# The per-arm metric files' keys -> summary.json's: deploy hack over hackable problems and solve over all
# problems, each with A2's 95% interval (the tables' numbers, nothing recomputed).
ARM_METRICS = {"hack": "deploy_hack_hackable", "hack_lo": "deploy_hack_hackable_lo",
               "hack_hi": "deploy_hack_hackable_hi", "solve": "deploy_solve", "solve_lo": "deploy_solve_lo",
               "solve_hi": "deploy_solve_hi", "n_seeds": "n_seeds"}


def arm_metrics(summary: dict) -> dict[str, dict]:
    """{arm: its ARM_METRICS} from summary.json, one small file each (metrics/arms/ARM.json): what
    `dvc metrics show` prints as one row per arm, and `dvc metrics diff` compares between experiments."""
    return {arm: {k: m[src] for k, src in ARM_METRICS.items() if src in m}
            for arm, m in summary.items() if not arm.startswith("claim_") and arm != "plan"}


def aggregate(metrics_root: str | Path = "metrics/runs", runs_root: str | Path = "runs/train",
              out_dir: str | Path = "metrics/artifacts", summary_path: str | Path = "metrics/summary.json",
              plots_dir: str | Path = "plots", arms_dir: str | Path = "metrics/arms", *, runs: list[str] | None = None, pairs: list,
              directions: dict, q_lo: float, q_hi: float, n_null: int = N_NULL, null_seed: int = 0,
              long_horizon: bool = False, preset: str | None = None, n_boot: int | None = None,
              placebos: dict | None = None, n_perm: int = N_PERM, plan: plan_file.Plan, plan_id: plan_file.PlanId,
              pairs_scores: dict | None = None, vact_metrics: dict[int, Path] | None = None) -> dict:
    """Write A1-A7 (markdown + csv) under out_dir, metrics/summary.json, one json per arm under
    arms_dir (arm_metrics: DVC's metrics), charts under plots_dir/png and plots_dir/html, and the
    csv DVC plots render under out_dir/plot_data. out_dir, arms_dir, plots_dir/png and
    plots_dir/html are replaced whole, and only once every file is written (io.staged_dirs): a
    failure leaves them as they were, a success holds this run's files alone.

    runs: run names (default: every run under metrics_root; `base` is the reference run);
    pairs: the authored pairs (A6); directions: run -> the direction its gate used, as a
    safetensors path or a dict of tensors (A7); placebos: run -> the placebo pairs' direction
    (A7's content-matched null; optional); q_lo/q_hi: the gate's quantile cuts;
    n_null/null_seed/n_perm: the Haar and label-permutation nulls of A7; long_horizon: these runs are of the long-horizon
    preset (A4 is made from them, else A4 says why there is none); preset: its name, for the text;
    n_boot: resamples of A2's and A4's descriptive bootstrap (default: the plan's bootstrap.resamples; the
    verdicts always use the plan's); plan, plan_id: the pre-registered analysis plan and which file it is
    (analysis.plan), the only source of the claims' verdicts; pairs_scores: run -> the contrast pairs' held-out
    scores along its gate direction, or why there are none (analysis.bands: the score band); vact_metrics: run seed
    -> its metrics/vact/SEED.json (the Haar floor band.min_effect haar_q95 reads; claims.band_floor).
    """
    n_boot = plan.bootstrap.resamples if n_boot is None else n_boot
    metrics_root, runs_root, plots_dir = Path(metrics_root), Path(runs_root), Path(plots_dir)
    final = Out(tables=Path(out_dir), png=plots_dir / "png", html=plots_dir / "html",
                plot_data=Path(out_dir) / "plot_data")
    runs = find_runs(metrics_root) if runs is None else list(runs)
    loaded = [load_run(metrics_root, runs_root, r) for r in runs]
    con = load_tables(loaded)
    # the claims first, from the plan and the records alone; the artifacts print them
    bands, band_missing = run_bands(loaded, pairs_scores or {}, plan.band.q_lo, plan.band.q_hi)
    withheld = {r.run: withheld_modes(runs_root / r.run) for r in loaded if r.arm != BASE}
    plan_hashes = {r.run: recorded_plan(runs_root / r.run) for r in loaded if r.arm != BASE}
    cut_rules = {r.run: recorded_cut_rule(runs_root / r.run) for r in loaded if r.arm != BASE}
    started = {r.run: t for r in loaded if r.arm != BASE and (t := started_at(runs_root / r.run)) is not None}
    per_pair = pair_bands(bands, pairs_scores or {})
    claims = verdicts(plan, plan_id, ClaimData.of(con, loaded, bands, band_missing, withheld, per_pair, plan_hashes,
                                                  cut_rules, vact_metrics, started))

    with staged_dirs(final.tables, final.png, final.html, Path(arms_dir)) as (tables, png, html, arms):
        out = Out(tables=tables, png=png, html=html, plot_data=tables / "plot_data", final=final)
        a1(con, out)
        a2_table = a2(con, out, plan, plan_id, claims, bands, band_missing, n_boot)
        a3_table = a3(con, out)
        a4(con, out, long_horizon, preset, n_boot)
        a7_table, gate_by_mode, cos_table = a7(con, loaded, directions, q_lo, q_hi, n_null, null_seed, out, placebos, n_perm)
        a5(con, loaded, out, plan, claims, gate_by_mode)
        a6(pairs, out)
        # Training-time student hack rate per arm (mean over seeds), the DVC plot of the step logs.
        train_hack = con.execute("""SELECT i.arm, s.step, avg(s.hack_rate) AS hack_rate
                                    FROM steps s JOIN run_info i USING (run) GROUP BY i.arm, s.step""").df()
        train_hack = train_hack.pivot(index="step", columns="arm", values="hack_rate").reset_index()
        out.data("train_hack_rate", train_hack[["step"] + _arm_order(c for c in train_hack.columns if c != "step")])

        base = con.execute("SELECT hack AS deploy_hack, solve AS deploy_solve, hack_hackable AS deploy_hack_hackable, "
                           "solve_none AS deploy_solve_none FROM per_run "
                           "WHERE arm = $base AND view = 'deploy' AND mode = 'overall'", {"base": BASE}).df()
        base = base.iloc[0].to_dict() | (base_pass_at_k(con) or {}) if len(base) else None
        summary = _summary(a2_table, a3_table, a7_table, cos_table, bands, base, plan.band.statistic)
        summary |= {f"claim_{name}": summary_entry(v) for name, v in claims.items()}
        summary["plan"] = {"path": plan_id.path, "sha256": plan_id.sha256, "commit": plan_id.commit,
                           "code_sha256": code_sha256()}
        for arm, m in arm_metrics(summary).items():
            write_json(arms / f"{arm}.json", m)
        write_json(summary_path, summary)  # before the swap: a failure here leaves every output as it was
    return summary


LONG_HORIZON_PRESET = "long"
NULL_SEED = 1_000_000  # Haar null seeds start here, far from the placebo arm's small seeds


def left_out(plan, seeds: list[int], arm_names: list[str], layout: Layout) -> None:
    """Refuse a grid that leaves out a plan seed whose runs were evaluated: a claim decided on the leading seeds
    that ran (seeds_run leading) must read every listed seed that did, so that cutting params train.seeds after
    the results cannot choose its seeds (issue 50's review). A seed whose runs never finished their evaluation
    (the budget ended) may be left out. Only the files' existence is read, to refuse, never to compute."""
    if not any(c.seeds_run == "leading" for c in plan.claims.values()):
        return
    listed = dict.fromkeys(s for c in plan.claims.values() if c.seeds_run == "leading" for s in c.seeds)
    evaluated = [layout.run_metrics(run_name(a, s)) / "per_mode_deploy.json"
                 for s in listed if s not in seeds for a in arm_names]
    ran = [str(p) for p in evaluated if p.exists()]
    if ran:
        raise InputError(f"params train.seeds {seeds} leaves out plan seeds whose runs were evaluated ({', '.join(ran[:3])}"
                         f"{' ...' if len(ran) > 3 else ''}): a claim with seeds_run leading reads every listed seed "
                         "that ran; list them in train.seeds")


def aggregate_stage(params, layout: Layout = Layout()) -> dict:
    """DVC stage aggregate: the arm x seed grid of params in the pipeline's layout."""
    seeds = params.train.seeds
    arm_names = run_arms(params.train.arms, params.train.yoked, params.gate.yoke_to)
    plan = plan_file.load(layout.plan)
    left_out(plan, seeds, arm_names, layout)
    runs = [run_name(a, s) for a in arm_names for s in seeds]
    if (layout.run_metrics(BASE) / "per_mode_deploy.json").exists():
        runs = [BASE] + runs
    directions = {run_name(a, s): gate_direction(a, layout.vact(s), s, params.gate.placebo_seed)
                  for a in arm_names for s in seeds}
    placebos = {run_name(a, s): layout.vact(s) / f"{SPACES[arm_space(a)]}_placebo.safetensors"
                for a in arm_names for s in seeds}
    placebos = {run: path for run, path in placebos.items() if path.exists()}  # none without placebo pair files
    pairs_scores = {run_name(a, s): pair_scores(a, layout, s, directions[run_name(a, s)], plan.heldout_modes,
                                                score_kind(layout.run(run_name(a, s))))
                    for a in arm_names for s in seeds if banded(a)}
    pairs = read_json(layout.pairs)
    if "pairs" not in pairs:
        raise InputError(f"{layout.pairs}: missing key 'pairs'")
    preset = params.preset
    return aggregate(layout.run_metrics_root, layout.runs, layout.artifacts, layout.summary, layout.plots,
                     layout.arm_metrics, runs=runs, pairs=pairs["pairs"], directions=directions, q_lo=params.gate.q_lo,
                     q_hi=params.gate.q_hi, null_seed=NULL_SEED, placebos=placebos,
                     long_horizon=preset == LONG_HORIZON_PRESET, preset=preset, plan=plan,
                     plan_id=plan_file.identify(layout.plan), pairs_scores=pairs_scores,
                     vact_metrics={s: layout.vact_metrics(s) for s in seeds})
