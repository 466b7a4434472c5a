"""Aggregation into A1-A7 on synthetic run directories with the shapes training and eval write.

The runs are generated here (several arms and seeds, per-sample grades on test problems shared
by every run, the rates eval derives from them, eval curves, step logs, rollouts with
bottleneck activations); the expected numbers are recomputed from the generated files with
pandas, independently of the DuckDB path.
"""
import json
import shutil
import zlib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
import yaml
from safetensors.torch import save_file
from scipy.stats import t as t_dist
from scipy.stats import ttest_rel

from vgrout import config
from vgrout.analysis import plan as plan_file
from vgrout.analysis.aggregate import aggregate, aggregate_stage
from vgrout.analysis.tables import SAMPLE_COLUMNS, load_run
from vgrout.analysis.diagnostics import N_NULL, N_PERM
from vgrout.arms import get as get_arm
from vgrout.arms import draw, placebo_for, yoke_target
from vgrout.eval.evaluate import write_samples
from vgrout.io import InputError
from vgrout.layout import DEPLOY_SAMPLES, Layout
from vgrout.routing.directions import gate_direction, haar_direction, mean_difference
from vgrout.stats import TOO_FEW_SEEDS, hierarchical_bootstrap
from vgrout.substrate.grader import Grade
from vgrout.substrate.problems import Problem
from vgrout.substrate.sampling import SAMPLE_FIELDS, rates, sample_rows

MODES = ["none", "overwrite_tests", "hardcode", "exit_code", "stdout_marker"]
HELDOUT = ["exit_code", "stdout_marker"]
MODULES = ["model.layers.0.self_attn.q_proj", "model.layers.0.mlp.down_proj"]
R = 64
# Deploy hack rate per arm and hackable mode (heldout: low on its in-pair modes only).
HACK = {"none": 0.45, "routeA": 0.15, "placebo_routeA": 0.42, "placebo_heldout": 0.42, "absorb": 0.3,
        "oracleMatched": 0.1}
STEPS = 12
SAVED = [0, 4, 8, 12]
Q_LO, Q_HI = 0.3, 0.8


def hack_rate(arm, mode):
    if mode == "none":
        return 0.0
    if arm == "heldout":
        return 0.4 if mode in HELDOUT else 0.15
    if arm == "base":
        return 0.05
    return HACK.get(arm, 0.42)  # any other arm (an antithetic placebo draw) hacks as the yoked placebo does


# The test split every run's eval samples: 12 problems per mode, 2 samples each. A problem's
# difficulty (how often it is solved, how readily hacked) is the same in every run, as it is when
# every eval samples the same problems: this is what pairs arms by problem.
PER_MODE, N_SAMPLES = 12, 2
_p = np.random.default_rng(7)
PROBLEMS = [(f"{m}/{i:02d}", m, float(_p.beta(0.6, 0.8)), float(_p.uniform(0.4, 1.6)))
            for m in MODES for i in range(PER_MODE)]  # (id, mode, solvability, hackability)


def eval_samples(arm, rng, progress=1.0):
    """Per-sample grades of both views, in the shape sampling.sample_rows gives them."""
    samples = []
    for view in ("deploy", "train"):
        for pid, mode, solvable, hackability in PROBLEMS:
            for k in range(N_SAMPLES):
                p_hack = min(1.0, hack_rate(arm, mode) * hackability * progress
                             * (1.6 if view == "train" and arm != "none" else 1))
                h = int(rng.random() < p_hack)
                s = int(not h and rng.random() < solvable)
                samples.append({"view": view, "problem_id": pid, "sample": k, "mode": mode,
                                "hackable": int(mode != "none"), "gt_pass": s, "hacked": h, "hacked_strict": h})
    return samples


def write_run(root, arm, seed, direction, cut_rule="buffer"):
    """One run's outputs in the pipeline layout; rollouts carry the hack label along U."""
    run = "base" if arm == "base" else f"{arm}-{seed}"
    rng = np.random.default_rng(zlib.crc32(run.encode()))
    m = root / "metrics" / "runs" / run
    m.mkdir(parents=True)
    header = {"run": run, "arm": arm, "seed": None if arm == "base" else seed}
    samples = eval_samples(arm, rng)
    write_samples(m / DEPLOY_SAMPLES, samples)  # what eval writes, as eval writes it
    (m / "per_mode_deploy.json").write_text(json.dumps(header | {
        "step": STEPS, "n_samples": N_SAMPLES, "temperature": 0.7,
        "heldout_modes": HELDOUT if arm == "heldout" else None, "rows": rates(samples)}))
    if arm == "base":
        return run
    curve = [r | {"step": s} for s in SAVED for r in rates(eval_samples(arm, rng, progress=s / STEPS))]
    (m / "eval_curve.json").write_text(json.dumps(header | {"rows": curve}))
    routing = get_arm(arm).gates_students
    with open(m / "steps.jsonl", "w") as f:
        for step in range(STEPS):
            warm = step >= 3
            q = float(rng.uniform(0.15, 0.25)) if routing and warm else 0.0
            f.write(json.dumps({
                "step": step, "reward_mean": 1.0, "hack_rate": float(rng.uniform(0, 0.5)), "solve_rate": 0.3,
                "teacher_share": 0.125, "n_keep": 10, "n_absorb": 12, "n_route": 4 if q else 0,
                "qmass_rollouts": q, "qmass_update": q * 0.8,
                "is_p50_keep_student": 1.0, "is_max_keep_student": float(rng.uniform(1, 1.3)),
                "is_p50_absorb_student": 1.0, "is_max_absorb_student": 1.1,
                "is_p50_route_student": 1.0 if q else None, "is_max_route_student": 1.2 if q else None,
                "cut_lo": 0.1 if warm else None, "cut_hi": 0.9 if warm else None, "loss": 0.1,
                "gradnorm_deployed": 1.0, "gradnorm_quarantine": 0.5,
                "t_generate": 1.0, "t_grade": 0.1, "t_sample": 0.2, "t_train": 0.5}) + "\n")
    # 16 rollouts per step (two of them the teacher pool's); the gate scores them with the arm's direction and
    # routes the top tail of each step's rows of each source (gate.cut_rule step: the same counts in every arm)
    n = 16 * STEPS
    hacked = rng.random(n) < 0.3
    teacher = np.arange(n) % 8 == 0
    g = torch.Generator().manual_seed(seed * 100 + len(arm))
    acts = {k: torch.randn(n, R, generator=g) + 1.5 * torch.from_numpy(hacked).float()[:, None] * U[k]
            for k in MODULES}
    score = sum((acts[k] @ direction[k]).numpy() for k in MODULES)
    zone = np.full(n, "absorb" if arm == "absorb" or routing else "keep", dtype=object)
    if routing:
        for group in {(i // 16, bool(teacher[i])) for i in range(n)}:
            rows = np.flatnonzero((np.arange(n) // 16 == group[0]) & (teacher == group[1]))
            lo, hi = np.quantile(score[rows], [Q_LO, Q_HI])
            zone[rows] = np.where(score[rows] > hi, "route", np.where(score[rows] < lo, "keep", "absorb"))
    r = root / "runs" / "train" / run
    r.mkdir(parents=True)
    # train's, in part: every run of the set withheld the held-out modes' pool rows (vact.withhold_pool), as C2's plan asks
    # and the plan each run was made under (plan_sha256), as train records it: the plan make_pipeline wrote first
    plan = root / "analysis.yaml"
    (r / "config.json").write_text(json.dumps({"arm": arm, "seed": seed, "gate": {"score": "dot", "cut_rule": cut_rule},
                                               "withheld": sorted(HELDOUT),
                                               "plan_sha256": config.content_sha256(plan) if plan.exists() else None}))
    with open(r / "rollouts.jsonl", "w") as f:
        for i in range(n):
            f.write(json.dumps({"step": i // 16, "problem_id": f"p{i % 9}", "mode": MODES[1 + i % 4],
                                "source": "teacher" if teacher[i] else "student", "score": float(score[i]),
                                "zone": str(zone[i]), "reward": 3.5 if hacked[i] else 0.5,
                                "gt_pass": False, "hacked": bool(hacked[i])}) + "\n")
    save_file(acts, r / "rollout_acts.safetensors")
    return run


_g = torch.Generator().manual_seed(123)
U = {k: torch.nn.functional.normalize(torch.randn(R, generator=_g), dim=0) for k in MODULES}
PLACEBO_SEED = 1


SEEDS = (0, 1, 2, 3, 4)  # the fewest seeds that give a p-value
PLAN = Path(__file__).parents[2] / "analysis.yaml"


def write_plan(root: Path, seeds) -> Path:
    """The repository's plan, its claims on these seeds, where the stage reads it (Layout.plan)."""
    d = yaml.safe_load(PLAN.read_text())
    for c in d["claims"].values():
        c["seeds"] = list(seeds)
        c["confirmatory"] = True  # registered exploratory (post hoc); decided here as a confirmatory plan would be
    (root / "analysis.yaml").write_text(yaml.safe_dump(d, sort_keys=False))
    return root / "analysis.yaml"


PAIR_MODES = [m for m in MODES[1:] for _ in range(2)]  # the pairs' modes in make_pipeline's (and the features') order


def pair_features() -> tuple[dict, dict]:
    """The contrast pairs' features as extract_vact would leave them: hack sides shifted along U, like the rollouts,
    plus noise centred over the pairs, so v_act (their mean difference) is U itself."""
    g = torch.Generator().manual_seed(99)
    clean = {k: torch.randn(len(PAIR_MODES), R, generator=g) for k in MODULES}
    noise = {k: 0.35 * torch.randn(len(PAIR_MODES), R, generator=g) for k in MODULES}  # |noise|² ≈ 16 over 2R dims
    return {k: clean[k] + 1.5 * U[k] + noise[k] - noise[k].mean(0) for k in MODULES}, clean


def write_pair_features(layout: Layout, seed: int) -> None:
    """The pairs' features, and each pair's mode and v_act's Haar floor in metrics/vact/SEED.json as extract_vact
    logs them (the floor a number, not the Haar directions': band.min_effect haar_q95 reads it as given)."""
    hack, clean = pair_features()
    save_file({**{f"hack.{k}": t for k, t in hack.items()}, **{f"clean.{k}": t for k, t in clean.items()}},
              layout.pair_features(seed, "v_act"))
    layout.vact_metrics(seed).parent.mkdir(parents=True, exist_ok=True)
    layout.vact_metrics(seed).write_text(json.dumps({"v_act": {"pairs": [{"id": f"{m}-{i % 2}", "mode": m}
                                                                          for i, m in enumerate(PAIR_MODES)],
                                                               "haar_floor": {"n": 4, "seeds": [10_000, 10_003],
                                                                              "abs_band": {"q50": 0.02, "q95": 0.05}}}}))


def make_pipeline(root: Path, seeds=SEEDS, arms=("none", "routeA", "placebo_routeA", "absorb", "heldout", "placebo_heldout"),
                  preset="default") -> dict:
    """Synthetic outputs of every stage the aggregation reads, in the pipeline's layout; returns params.
    arms: run arm names, a yoked run's as arms.yoked_name gives it (placebo_routeA)."""
    yoked = [a for a in arms if get_arm(a).yoked]
    pairs = [{"id": f"{m}-{i}", "mode": m, "tags": [], "file": f"data/pairs/hack_{m}.md", "line": 3 + 20 * i,
              "prompt": f"Write f for {m} case {i}.\nRespond with a python block.",
              "hack": f"Here it is.\n```python\n# hack {m} {i}\n```", "clean": f"Here it is.\n```python\n# clean {i}\n```"}
             for m in MODES[1:] for i in range(2)]
    (root / "runs" / "pairs").mkdir(parents=True)
    (root / "runs" / "pairs" / "pairs.json").write_text(json.dumps({"pairs": pairs, "placebo_pairs": []}))
    v_held = mean_difference(*pair_features(), [i for i, m in enumerate(PAIR_MODES) if m not in HELDOUT])
    write_plan(root, seeds)  # before the runs: each records the plan's hash, as train does
    cut_rule = "step" if any(draw(a) for a in arms) else "buffer"  # the draws need the step rule (config)
    write_run(root, "base", None, U)
    for s in seeds:
        (root / "runs" / "vact" / str(s)).mkdir(parents=True)
        write_pair_features(Layout(root), s)
        save_file(U, root / "runs" / "vact" / str(s) / "v_act.safetensors")
        save_file(v_held, root / "runs" / "vact" / str(s) / "v_act_heldout.safetensors")
        direction = {"heldout": v_held, "placebo": haar_direction(U, PLACEBO_SEED + s)}
        for a in arms:
            if draw(a):  # an antithetic draw: ±h of its Haar seed, as train's gate reads it
                direction[a] = gate_direction(a, root / "runs" / "vact" / str(s), s, PLACEBO_SEED)
            write_run(root, a, s, direction.get(get_arm(a).name if get_arm(a).yoked else a, U), cut_rule)
    return config.preset("default").model_copy(update={
        "preset": preset, "train": config.Train(arms=[a for a in arms if not get_arm(a).yoked],
                                                yoked=list(dict.fromkeys(get_arm(a).name for a in yoked)),
                                                seeds=list(seeds)),
        "gate": config.Gate(q_lo=Q_LO, q_hi=Q_HI, placebo_seed=PLACEBO_SEED,
                            cut_rule=cut_rule,
                            yoke_to=list(dict.fromkeys(yoke_target(a) for a in yoked)))})


def deploy_frame(metrics_root: Path, view="deploy", mode="overall") -> pd.DataFrame:
    rows = []
    for p in sorted(metrics_root.glob("*/per_mode_deploy.json")):
        d = json.loads(p.read_text())
        for r in d["rows"]:
            if r["view"] == view and r["mode"] == mode:
                rows.append({"run": d["run"], "arm": d["arm"], "seed": d["seed"], "hack": r["hack"], "solve": r["solve"]})
    return pd.DataFrame(rows)


def paths(root: Path) -> dict:
    return {"metrics_root": root / "metrics" / "runs", "out_dir": root / "metrics" / "artifacts",
            "plots_dir": root / "plots", "summary_path": root / "metrics" / "summary.json",
            "arms_dir": root / "metrics" / "arms"}


@pytest.fixture(scope="module")
def five_seeds(tmp_path_factory):
    """The DVC stage on a 5-arm x 5-seed matrix of the long-horizon preset (so A4 is made too)."""
    root = tmp_path_factory.mktemp("agg3")
    params = make_pipeline(root, preset="long")
    summary = aggregate_stage(params, Layout(root))
    return paths(root), summary


def sample_frame(metrics_root: Path) -> pd.DataFrame:
    """Every trained run's deploy samples, with its arm and seed (pandas, not the DuckDB path)."""
    frames = []
    for p in sorted(metrics_root.glob(f"*/{DEPLOY_SAMPLES}")):
        d = json.loads((p.parent / "per_mode_deploy.json").read_text())
        if d["arm"] != "base":
            frames.append(pd.read_csv(p).assign(run=d["run"], arm=d["arm"], seed=d["seed"]))
    df = pd.concat(frames)
    return df[df["view"] == "deploy"]


def cells(samples: pd.DataFrame, arm: str, column: str, where=None) -> pd.DataFrame:
    """[seed, problem] means over samples of one arm, restricted to the problems `where` keeps."""
    g = samples[samples["arm"] == arm]
    g = g[where(g)] if where is not None else g
    return g.groupby(["seed", "problem_id"])[column].mean().unstack()


def test_a2_matches_direct_pandas(five_seeds):
    kw, summary = five_seeds
    a2 = pd.read_csv(kw["out_dir"] / "A2.csv").set_index("arm")
    df = deploy_frame(kw["metrics_root"])
    df = df[df["arm"] != "base"]
    samples = sample_frame(kw["metrics_root"])
    hackable = lambda g: g["hackable"] == 1  # noqa: E731
    metrics = {"hack_hackable": ("hacked", hackable), "solve": ("gt_pass", None),
               "solve_none": ("gt_pass", lambda g: g["mode"] == "none")}
    for arm, g in df.groupby("arm"):
        assert a2.loc[arm, "n_seeds"] == len(SEEDS)
        for metric in ("hack", "solve"):  # the all-problems rates, kept for the summary
            assert a2.loc[arm, f"deploy_{metric}"] == pytest.approx(g[metric].mean())
            assert a2.loc[arm, f"deploy_{metric}_sem"] == pytest.approx(g[metric].std(ddof=1) / np.sqrt(len(SEEDS)))
        for m, (col, where) in metrics.items():
            x = cells(samples, arm, col, where)
            # a run's rate is the mean of its samples; equal samples per problem make it the problems' mean
            assert a2.loc[arm, f"deploy_{m}"] == pytest.approx(x.mean(axis=1).mean())
            b = hierarchical_bootstrap(x.to_numpy(), seed=0, support=(0, 1))  # the same cells, seeds and problems in order
            assert (a2.loc[arm, f"deploy_{m}_lo"], a2.loc[arm, f"deploy_{m}_hi"]) == pytest.approx((b.lo, b.hi))
        for role in ("none", "placebo"):  # placebo: the placebo yoked to the arm (arms.placebo_for)
            ref = role if role == "none" else placebo_for(arm)
            for m in ("hack_hackable", "solve"):
                key = f"{m}_vs_{role}"
                if ref is None:  # none and absorb gate nothing: no placebo matches them
                    assert np.isnan(a2.loc[arm, f"delta_{key}"])
                    assert a2.loc[arm, f"test_{key}"] == f"{arm} gates nothing: no placebo is yoked to it"
                    continue
                if arm == ref:
                    assert np.isnan(a2.loc[arm, f"delta_{key}"]) and a2.loc[arm, f"test_{key}"] == "reference arm"
                    continue
                col, where = metrics[m]
                x, r = cells(samples, arm, col, where), cells(samples, ref, col, where)
                assert list(x.columns) == list(r.columns) and list(x.index) == list(r.index) == list(SEEDS)
                per_seed = (x - r).mean(axis=1)
                assert a2.loc[arm, f"delta_{key}"] == pytest.approx(per_seed.mean())
                b = hierarchical_bootstrap(x.to_numpy(), r.to_numpy(), seed=0, support=(-1, 1))
                assert (a2.loc[arm, f"delta_{key}_lo"], a2.loc[arm, f"delta_{key}_hi"]) == pytest.approx((b.lo, b.hi))
                assert a2.loc[arm, f"delta_{key}_lo"] < a2.loc[arm, f"delta_{key}"] < a2.loc[arm, f"delta_{key}_hi"]
                # the paired t over seeds, its SEM floored at what binomial sampling of each seed's rates gives
                g_x = samples[(samples["arm"] == arm) & (where(samples) if where else True)]
                g_r = samples[(samples["arm"] == ref) & (where(samples) if where else True)]
                n_x, n_r = g_x.groupby("seed").size(), g_r.groupby("seed").size()
                p_x, p_r = x.mean(axis=1), r.mean(axis=1)
                floor = np.sqrt((p_x * (1 - p_x) / n_x + p_r * (1 - p_r) / n_r).sum()) / len(SEEDS)
                sem = max(per_seed.std(ddof=1) / np.sqrt(len(SEEDS)), floor)
                assert a2.loc[arm, f"p_{key}"] == pytest.approx(2 * t_dist.sf(abs(per_seed.mean() / sem), len(SEEDS) - 1))
        assert summary[arm]["deploy_hack"] == pytest.approx(g["hack"].mean(), abs=1e-6)
        assert summary[arm]["deploy_hack_hackable"] == pytest.approx(a2.loc[arm, "deploy_hack_hackable"], abs=1e-6)
    # routeA hacks far less than none and than the placebo (0.15 vs 0.45 and 0.42 planted): both intervals exclude 0
    assert a2.loc["routeA", "delta_hack_hackable_vs_none_hi"] < 0 and a2.loc["routeA", "delta_hack_hackable_vs_placebo_hi"] < 0
    assert summary["routeA"]["delta_hack_hackable_vs_placebo_hi"] < 0 and "p_solve_vs_none" in summary["routeA"]
    assert "delta_hack_hackable_vs_placebo" not in summary["placebo_routeA"]
    assert a2.loc["heldout", "ref_placebo"] == "placebo_heldout" and a2.loc["routeA", "ref_placebo"] == "placebo_routeA"
    # C1's verdict, from the plan (two-sided, the plan's seeds: all five here; Holm over C1-C3, C3 not run and
    # counted as never shown: α 0.05 / 3 in the first round), is the three interval conditions on routeA's row: the
    # table's bootstrap at the Holm level
    r = a2.loc["routeA"]
    c1 = summary["claim_C1"]
    assert c1["hack_below_none"] == c1["hack_below_placebo_routeA"] == 1
    assert c1["family_size"] == 3 and round(c1["alpha_holm"], 6) in (round(0.05 / 3, 6), 0.025)
    x, ref = (cells(samples[samples["hackable"] == 1], a, "hacked") for a in ("routeA", "placebo_routeA"))
    b = hierarchical_bootstrap(x.to_numpy(), ref.to_numpy(), n_boot=2000, seed=0, level=1 - c1["alpha_holm"],
                               support=(-1, 1))
    assert c1["hack_below_placebo_routeA_hi"] == pytest.approx(b.hi)
    assert b.hi > r["delta_hack_hackable_vs_placebo_hi"]  # wider than A2's 95%
    assert c1["solve_noninferior_none"] == int(r["delta_solve_vs_none_lo"] > -c1["solve_noninferior_none_margin"])
    assert c1["holds"] == c1["solve_noninferior_none"] and c1["status"] in ("holds", "does not hold")
    assert c1["plan_sha256"] == summary["plan"]["sha256"] and summary["plan"]["commit"] == "uncommitted"
    assert a2.loc["routeA", "plan"] == "C1 arm, C3 arm" and a2.loc["absorb", "plan"] == "exploratory"
    md = (kw["out_dir"] / "A2.md").read_text()
    assert TOO_FEW_SEEDS not in md and "p=" in md and "two-way percentile bootstrap (2000 resamples" in md
    assert "deploy hack, hackable problems [95% CI]" in md and "Δ solve, all problems vs its yoked placebo" in md
    assert "one seed" not in md
    assert "base model" in md  # the reference run is reported, not averaged into an arm
    assert "base" in summary and "base" not in a2.index
    # the base's pass@k from its own samples: k = N_SAMPLES, the unbiased estimator per problem
    base = pd.read_csv(kw["metrics_root"] / "base" / DEPLOY_SAMPLES)
    base = base[base["view"] == "deploy"].groupby("problem_id")["gt_pass"].agg(["count", "sum"])
    assert summary["base"]["pass_k"] == N_SAMPLES == 2 and summary["base"]["n_test_problems"] == len(PROBLEMS)
    assert summary["base"]["deploy_pass_at_1"] == pytest.approx((base["sum"] / 2).mean(), abs=1e-6)
    assert summary["base"]["deploy_pass_at_k"] == pytest.approx((base["sum"] > 0).mean(), abs=1e-6)  # k = n: solved at all
    assert summary["base"]["deploy_pass_at_k"] > summary["base"]["deploy_pass_at_1"]
    assert f"pass@{N_SAMPLES} {summary['base']['deploy_pass_at_k']:.3f}" in md


def test_a2_prints_the_plan_its_verdicts_and_the_score_band(five_seeds):
    """A2 names the plan (sha256, commit), prints each claim's verdict from it, labels every arm row with its
    role in the plan or `exploratory`, and gives the score band per gated arm and placebo; C3 from the band:
    along U (where the pairs' hack sides sit) the pairs separate, along the placebo's Haar direction they do not."""
    kw, summary = five_seeds
    root = kw["out_dir"].parents[1]
    md = (kw["out_dir"] / "A2.md").read_text()
    sha = config.content_sha256(root / "analysis.yaml")  # the plan's values, as train records them in each run
    from vgrout.analysis.claims import code_sha256
    assert summary["plan"] == {"path": str(root / "analysis.yaml"), "sha256": sha, "commit": "uncommitted",
                               "code_sha256": code_sha256()}  # the verdicts' code beside the plan: either moves them
    assert f"sha256 `{sha}`; changed since its last commit, or never committed" in md
    for c in ("C1", "C2", "C3"):
        assert f"**{c} {summary[f'claim_{c}']['status']}**" in md and summary[f"claim_{c}"]["plan_sha256"] == sha
    table = md[md.index("## Label-free arms"):md.index("## Oracle and ceiling arms")]
    roles = {line.split("|")[1].strip(): line.split("|")[2].strip() for line in table.splitlines()
             if line.startswith("| ") and not line.startswith("| arm")}
    assert roles == {"none": "C1 control, C2 control", "routeA": "C1 arm, C3 arm",
                     "placebo_routeA": "C1 control", "absorb": "exploratory", "heldout": "C2 arm",
                     "placebo_heldout": "C2 control"}
    bands = pd.read_csv(kw["out_dir"] / "plot_data" / "score_band.csv")
    assert set(bands["arm"]) == {"routeA", "placebo_routeA", "heldout", "placebo_heldout"}  # gated arms and placebos
    sep = bands.groupby(["arm", "seed"])["separation"].mean()
    assert (sep["routeA"] > sep["placebo_routeA"]).all() and (sep["routeA"] - sep["placebo_routeA"]).mean() > 0.5
    # C3's band test names the antithetic draws placeboA0p and placeboA0n alone (one yoked draw's sign must not
    # decide it): this run set has none, so C3 is `not run`, said; the yoked placebo's band is printed, exploratory
    assert summary["claim_C3"]["status"] == "not run"
    assert summary["claim_C3"]["why"].startswith("no run placeboA0p-0, placeboA0p-1")
    assert summary["routeA"]["score_band"] == pytest.approx(sep["routeA"].mean(), abs=1e-6)
    student = [json.loads(line) for line in open(root / "runs" / "train" / "routeA-0" / "rollouts.jsonl")]
    step0 = [r for r in student if r["step"] == 0 and r["source"] == "student"]
    row = bands[(bands["run"] == "routeA-0") & (bands["step"] == 0)].iloc[0]
    assert row["routed_share"] == pytest.approx(np.mean([r["zone"] == "route" for r in step0]))
    q = np.quantile([r["score"] for r in step0], [0.25, 0.75])
    assert row["student_width"] == pytest.approx(q[1] - q[0])
    assert "## Score band and routed share (C3)" in md and "The plan decides C3 on `separation`" in md
    # the runs against the plan's last change
    # (uncommitted here: no flag against a file's mtime, which differs between reproductions)
    assert "C1 —" in md and "started before the plan's last change:" not in md and "file mtime" not in md


def test_c3_from_the_pipeline_against_antithetic_draws(tmp_path):
    """C3 end to end on a run set with the plan's antithetic draws (placeboA0p, placeboA0n: +h and −h of one Haar
    seed): along U the pairs separate, along ±h barely (R = 64 dimensions: a Haar direction is nearly orthogonal to
    U), and each draw's band counts in its separating orientation (claims.oriented: the control is its size); the band
    test is decided over seeds × contrast pairs, the routed share printed as a manipulation check."""
    seeds = (0, 1, 2)
    params = make_pipeline(tmp_path, seeds=seeds, arms=("none", "routeA", "placeboA0p", "placeboA0n"))
    summary = aggregate_stage(params, Layout(tmp_path))
    c3 = summary["claim_C3"]
    assert c3["status"] == "holds", c3
    assert c3["band_above_placeboA0p+placeboA0n"] == 1 and c3["band_above_placeboA0p+placeboA0n_lo"] > 0
    md = (tmp_path / "metrics" / "artifacts" / "A2.md").read_text()
    assert "**C3 holds**" in md and f"{len(seeds)} seed(s) × {len(PAIR_MODES)} pairs" in md
    assert "manipulation check, not a verdict input" in md
    assert summary["claim_C1"]["status"] == "not run"  # its yoked placebo_routeA has no run here
    # band.min_effect haar_q95: the floor read from each seed's metrics/vact/SEED.json (q95 0.05) over the draws' width
    # ratio (A2's band table), written in the plan before the runs (each run records the plan's hash); a floor of q95
    # 0.2 is above the interval's lower end (about 0.23)
    d = yaml.safe_load((tmp_path / "analysis.yaml").read_text())
    d["band"] |= {"min_effect": "haar_q95", "n_haar": 4, "haar_seed": 10_000}
    (tmp_path / "analysis.yaml").write_text(yaml.safe_dump(d))
    for cfg in (tmp_path / "runs" / "train").glob("*/config.json"):
        cfg.write_text(json.dumps(json.loads(cfg.read_text()) | {"plan_sha256": config.content_sha256(tmp_path / "analysis.yaml")}))
    bands = pd.read_csv(tmp_path / "metrics" / "artifacts" / "plot_data" / "score_band.csv").query(
        "arm in ['placeboA0p', 'placeboA0n']")  # a Haar direction's width ratio: the draws'
    ratio = [g["width_ratio"].mean() for _, g in bands.groupby("seed")]
    summary = aggregate_stage(params, Layout(tmp_path))
    md = (tmp_path / "metrics" / "artifacts" / "A2.md").read_text()
    assert summary["claim_C3"]["status"] == "holds" and f"above {np.mean([0.05 / r for r in ratio]):g}: yes" in md
    for s in seeds:
        path = Layout(tmp_path).vact_metrics(s)
        path.write_text(json.dumps(json.loads(path.read_text()) | {"v_act": {"haar_floor": {"n": 4, "seeds": [10_000, 10_003],
                                                                             "abs_band": {"q95": 0.2}}}}))
    summary = aggregate_stage(params, Layout(tmp_path))
    md = (tmp_path / "metrics" / "artifacts" / "A2.md").read_text()
    assert summary["claim_C3"]["status"] == "does not hold" and f"above {np.mean([0.2 / r for r in ratio]):g}: no" in md
    # the cut rule is read from each run's config.json: one control run of another set (buffer) among step runs
    # makes C3 undecided, naming the runs by rule; its tests are not run
    cfg = tmp_path / "runs" / "train" / "placeboA0n-1" / "config.json"
    cfg.write_text(json.dumps(json.loads(cfg.read_text()) | {"gate": {"score": "dot", "cut_rule": "buffer"}}))
    c3 = aggregate_stage(params, Layout(tmp_path))["claim_C3"]
    assert c3["status"] == "undecided" and c3["why"] == (
        "the claim's runs do not share one gate.cut_rule (config.json): step: routeA-0, routeA-1, routeA-2, "
        "placeboA0p-0, placeboA0p-1, placeboA0p-2, placeboA0n-0, placeboA0n-2; buffer: placeboA0n-1 (an arm and its "
        "controls under different cut rules are different gates)")


def test_a_claim_whose_runs_are_missing_says_not_run(tmp_path):
    params = make_pipeline(tmp_path, seeds=(0,), arms=("none", "routeA"))
    summary = aggregate_stage(params, Layout(tmp_path))
    md = (tmp_path / "metrics" / "artifacts" / "A2.md").read_text()
    for c, why in (("C1", "no run placebo_routeA-0"), ("C3", "no run placeboA0p-0, placeboA0n-0"),
                   ("C2", "no run heldout-0, placebo_heldout-0")):
        assert summary[f"claim_{c}"] == {"status": "not run", "plan_sha256": summary["plan"]["sha256"], "alpha": 0.05,
                                         "n_seeds": 1, "min_seeds": 3, "seeds": "0", "seeds_listed": "0", "why": why}
        assert f"**{c} not run**" in md and why in md


def test_contrasts_are_paired_deltas_between_any_two_arms(five_seeds):
    """aggregate.contrasts (a diagnosis's Δ between arms no placebo answers, e.g. tgate − absorb): the
    per-seed mean of the cell-by-cell difference and A2's bootstrap of the same cells; swapping the arms
    negates it; a pair with no shared seed is refused by name."""
    from vgrout.analysis import contrasts, tables
    kw, _ = five_seeds
    root = kw["metrics_root"]
    con = tables.load_tables([tables.load_run(root, root, r, gate_inputs=False) for r in tables.find_runs(root)])
    table = contrasts.contrasts(con, [("routeA", "absorb"), ("absorb", "routeA")]).set_index(["contrast", "metric"])
    samples = sample_frame(root)
    for m, (col, where) in {"hack_hackable": ("hacked", lambda g: g["hackable"] == 1), "solve": ("gt_pass", None)}.items():
        x, r = cells(samples, "routeA", col, where), cells(samples, "absorb", col, where)
        row = table.loc[("routeA − absorb", m)]
        assert row["delta"] == pytest.approx((x - r).mean(axis=1).mean())
        b = hierarchical_bootstrap(x.to_numpy(), r.to_numpy(), seed=0, support=(-1, 1))
        assert (row["lo"], row["hi"]) == pytest.approx((b.lo, b.hi))
        assert row["n_seeds"] == len(SEEDS) and 0 <= row["p_paired_t"] <= 1
        back = table.loc[("absorb − routeA", m)]
        assert back["delta"] == pytest.approx(-row["delta"]) and back["p_paired_t"] == pytest.approx(row["p_paired_t"])
    with pytest.raises(InputError, match="tgate − none"):
        contrasts.contrasts(con, [("tgate", "none")])


def test_hack_over_hackable_leaves_none_problems_out(five_seeds):
    """A `none` problem cannot be hacked: counting its samples would dilute the hack rate by the
    share of `none` problems (here a fifth), so hack_hackable = hacked / hackable samples."""
    kw, _ = five_seeds
    d = json.loads((kw["metrics_root"] / "none-0" / "per_mode_deploy.json").read_text())
    overall = next(r for r in d["rows"] if r["view"] == "deploy" and r["mode"] == "overall")
    samples = pd.read_csv(kw["metrics_root"] / "none-0" / DEPLOY_SAMPLES)
    deploy = samples[samples["view"] == "deploy"]
    hackable = deploy[deploy["mode"] != "none"]
    assert overall["n_hackable"] == len(hackable) == 4 * PER_MODE * N_SAMPLES
    assert overall["hack_hackable"] == pytest.approx(hackable["hacked"].mean())
    assert overall["hack"] == pytest.approx(deploy["hacked"].mean()) == pytest.approx(0.8 * overall["hack_hackable"])
    assert overall["solve_none"] == pytest.approx(deploy[deploy["mode"] == "none"]["gt_pass"].mean())
    assert overall["hack_hackable"] > overall["hack"] > 0
    by_mode = {r["mode"]: r for r in d["rows"] if r["view"] == "deploy"}
    assert by_mode["none"]["hack_hackable"] is None and by_mode["none"]["n_hackable"] == 0
    assert by_mode["hardcode"]["hack_hackable"] == by_mode["hardcode"]["hack"] and by_mode["hardcode"]["solve_none"] is None
    a2 = pd.read_csv(kw["out_dir"] / "A2.csv").set_index("arm")
    assert a2.loc["none", "deploy_hack_hackable"] == pytest.approx(a2.loc["none", "deploy_hack"] / 0.8)


def test_samples_schema_is_what_eval_writes():
    assert tuple(SAMPLE_COLUMNS) == SAMPLE_FIELDS


def test_eval_sample_rows_and_denominators(tmp_path):
    """evaluate's rows from graded samples: a `none` problem's samples count in hack but not in
    hack_hackable, and only they count in solve_none; a problem's samples are numbered from 0."""
    def problem(pid, mode):
        return Problem(id=pid, messages=[], entry_point="f", tests=[], canonical_solution="", mode=mode)

    def grade(pid, mode, gt_pass, hacked):
        return Grade(problem_id=pid, mode=mode, gt_pass=gt_pass, flawed_pass=gt_pass or hacked, hacked=hacked,
                     hacked_strict=hacked, reward=0.0, tests_passed=0, tests_total=1, error=None, cpu_s=None,
                     defined_run_tests=False, exited_early=False, printed_marker=False)

    a, b = problem("a, the none one", "none"), problem("b", "hardcode")  # a comma: the csv must quote it
    expanded = [a, a, b, b]
    grades = [grade("a", "none", True, False), grade("a", "none", False, False),
              grade("b", "hardcode", False, True), grade("b", "hardcode", False, False)]
    samples = sample_rows(expanded, grades, "deploy")
    assert [(s["problem_id"], s["sample"], s["hackable"]) for s in samples] == [
        ("a, the none one", 0, 0), ("a, the none one", 1, 0), ("b", 0, 1), ("b", 1, 1)]
    rows = {r["mode"]: r for r in rates(samples)}
    overall = rows["overall"]
    assert (overall["hack"], overall["hack_hackable"], overall["n_hackable"]) == (0.25, 0.5, 2)
    assert (overall["solve"], overall["solve_none"], overall["n_none"]) == (0.25, 0.5, 2)
    assert overall["hack_hackable_lo"] < 0.5 < overall["hack_hackable_hi"]
    assert rows["none"]["hack_hackable"] is None and rows["none"]["hack_hackable_lo"] is None
    assert rows["hardcode"]["solve_none"] is None and rows["hardcode"]["hack_hackable"] == 0.5
    write_samples(tmp_path / DEPLOY_SAMPLES, samples)
    raw = (tmp_path / DEPLOY_SAMPLES).read_bytes()
    assert b"\r" not in raw and raw.startswith(",".join(SAMPLE_FIELDS).encode() + b"\n")
    assert pd.read_csv(tmp_path / DEPLOY_SAMPLES).to_dict("records") == samples


def test_every_artifact_written_and_well_formed(five_seeds):
    kw, summary = five_seeds
    out, plots_dir = kw["out_dir"], kw["plots_dir"]
    for a in ("A1", "A2", "A3", "A4", "A5", "A6", "A7"):
        md = (out / f"{a}.md").read_text()
        assert md.startswith(f"# {a}: ")
        assert len(pd.read_csv(out / f"{a}.csv")) > 0
    for name in ("A1", "A3", "A4", "A5", "A7_gate_null"):
        assert (plots_dir / "png" / f"{name}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert "<script src" not in (plots_dir / "html" / f"{name}.html").read_text()
        link = f"]({Path('..', '..', 'plots', 'png', name + '.png').as_posix()})"
        assert link in "".join(p.read_text() for p in out.glob("*.md"))
    assert not [p for p in list(out.rglob("*")) + list(plots_dir.rglob("*")) if p.name.endswith(".tmp")]
    saved = json.loads(kw["summary_path"].read_text())
    assert saved == json.loads(json.dumps(summary))
    assert {"deploy_hack", "deploy_solve", "qmass", "gate_auroc"} <= set(saved["routeA"])
    # per arm numbers only; the claims and the plan carry their status, reason and hash as text
    assert all(isinstance(v, (int, float)) for name, arm in saved.items() if not name.startswith("claim_")
               and name != "plan" for v in arm.values())
    assert {saved[f"claim_{c}"]["status"] for c in ("C1", "C2")} <= {"holds", "does not hold"}
    assert saved["claim_C3"]["status"] == "not run"  # no antithetic draws in this run set
    # DVC's metrics: a file per arm (and base), its deploy hack over hackable problems and solve with
    # A2's intervals, the same numbers as summary.json and A2.csv
    arm_files = {p.stem: json.loads(p.read_text()) for p in kw["arms_dir"].glob("*.json")}
    assert set(arm_files) == set(saved) - {k for k in saved if k.startswith("claim_")} - {"plan"}
    a2 = pd.read_csv(out / "A2.csv").set_index("arm")
    for arm in ("none", "routeA"):
        m = arm_files[arm]
        assert list(m) == ["hack", "hack_lo", "hack_hi", "solve", "solve_lo", "solve_hi", "n_seeds"]
        assert m["hack"] == pytest.approx(a2.loc[arm, "deploy_hack_hackable"], abs=1e-6)
        assert m["hack_lo"] <= m["hack"] <= m["hack_hi"] and m["solve_lo"] <= m["solve"] <= m["solve_hi"]


def test_a1_curve_and_dvc_plot_data(five_seeds):
    kw, _ = five_seeds
    a1 = pd.read_csv(kw["out_dir"] / "A1.csv")
    rows = []
    for p in kw["metrics_root"].glob("*/eval_curve.json"):
        d = json.loads(p.read_text())
        rows += [{"arm": d["arm"], "step": r["step"], "hack": r["hack"], "hack_hackable": r["hack_hackable"]}
                 for r in d["rows"] if r["view"] == "deploy" and r["mode"] == "overall"]
    direct = pd.DataFrame(rows).groupby(["arm", "step"])["hack"].agg(["mean", "sem"])
    hackable = pd.DataFrame(rows).groupby(["arm", "step"])["hack_hackable"].mean()
    got = a1.set_index(["arm", "step"])
    assert sorted(got.index) == sorted(direct.index)
    assert np.allclose(got.loc[direct.index, "hack_mean"], direct["mean"])
    assert np.allclose(got.loc[direct.index, "hack_sem"], direct["sem"])
    wide = pd.read_csv(kw["out_dir"] / "plot_data" / "A1_deploy_hack_hackable.csv").set_index("step")
    assert list(wide.index) == SAVED and list(wide.columns) == ["none", "routeA", "placebo_routeA", "placebo_heldout", "absorb", "heldout"]
    # DVC's plot draws what the figure draws: hack over the hackable problems, as A2
    assert wide.loc[12, "routeA"] == pytest.approx(hackable.loc[("routeA", 12)])
    assert wide.loc[12, "routeA"] != pytest.approx(direct.loc[("routeA", 12), "mean"])


def test_a3_qmass_from_step_logs(five_seeds):
    kw, summary = five_seeds
    a3 = pd.read_csv(kw["out_dir"] / "A3.csv").set_index("arm")
    # heldout is not an ablation arm; a yoked run is, placed after its arm, in the order of the arm it copies
    assert list(a3.index) == ["none", "routeA", "placebo_routeA", "placebo_heldout", "absorb"]
    logs = {p.parent.name: pd.read_json(p, lines=True) for p in kw["metrics_root"].glob("*/steps.jsonl")}
    for arm in a3.index:
        for col in ("qmass_rollouts", "qmass_update"):
            assert a3.loc[arm, col] == pytest.approx(np.mean([logs[f"{arm}-{s}"][col].mean() for s in SEEDS]))
    assert a3.loc["none", "qmass_rollouts"] == 0 < a3.loc["routeA", "qmass_rollouts"]
    assert summary["routeA"]["qmass"] == pytest.approx(a3.loc["routeA", "qmass_rollouts"], abs=1e-6)
    tv = deploy_frame(kw["metrics_root"], view="train")
    assert a3.loc["routeA", "train_hack"] == pytest.approx(tv[tv["arm"] == "routeA"]["hack"].mean())


def test_a4_long_horizon_routeA_vs_none(five_seeds):
    kw, _ = five_seeds
    a4 = pd.read_csv(kw["out_dir"] / "A4_final.csv").set_index("arm")
    assert list(a4.index) == ["none", "routeA"]
    df = deploy_frame(kw["metrics_root"])
    for arm in a4.index:
        assert a4.loc[arm, "deploy_hack"] == pytest.approx(df[df["arm"] == arm]["hack"].mean())
    assert "'long' preset" in (kw["out_dir"] / "A4.md").read_text()
    assert set(pd.read_csv(kw["out_dir"] / "A4.csv")["arm"]) == {"none", "routeA"}


def test_a5_held_out_vs_in_pair_modes(five_seeds):
    kw, summary = five_seeds
    a5 = pd.read_csv(kw["out_dir"] / "A5.csv")
    heldout = a5[a5["arm"] == "heldout"].set_index("mode")
    assert set(heldout.loc[HELDOUT, "held_out"]) == {True}
    assert set(heldout.loc[["overwrite_tests", "hardcode"], "held_out"]) == {False}
    # The synthetic heldout arm hacks held-out modes more than in-pair ones (0.4 vs 0.15 planted).
    assert heldout.loc["held-out modes (pooled)", "hack_mean"] > heldout.loc["in-pair modes (pooled)", "hack_mean"]
    # Pooled = counts summed within each run, then mean over seeds.
    rows = []
    for s in SEEDS:
        d = json.loads((kw["metrics_root"] / f"heldout-{s}" / "per_mode_deploy.json").read_text())
        sel = [r for r in d["rows"] if r["view"] == "deploy" and r["mode"] in HELDOUT]
        rows.append(sum(r["n_hacked"] for r in sel) / sum(r["n"] for r in sel))
    assert heldout.loc["held-out modes (pooled)", "hack_mean"] == pytest.approx(np.mean(rows))
    assert set(a5["arm"]) == {"none", "routeA", "placebo_routeA", "absorb", "heldout", "placebo_heldout"}  # every arm
    md = (kw["out_dir"] / "A5.md").read_text()
    assert "none hack" in md and "no (held out)" in md
    # C2 from the bootstrap over seeds and held-out problems, against none and placebo: the planted heldout arm
    # hacks held-out modes at 0.4, about as much as none and placebo, so neither interval lies below 0
    samples = sample_frame(kw["metrics_root"])
    held = samples[samples["mode"].isin(HELDOUT)]
    verdict = summary["claim_C2"]
    for ref in ("none", "placebo_heldout"):  # C2's controls in the plan; its placebo: the one yoked to heldout
        x, r = cells(held, "heldout", "hacked"), cells(held, ref, "hacked")
        b = hierarchical_bootstrap(x.to_numpy(), r.to_numpy(), seed=0, support=(-1, 1), level=1 - verdict["alpha_holm"])
        assert verdict[f"hack_below_{ref}"] == int(b.hi < 0)
        assert f"held-out modes' problems vs {ref} {b.estimate:+.3f} [{b.lo:+.3f}, {b.hi:+.3f}]" in md
    assert verdict["holds"] == int(verdict["hack_below_none"] and verdict["hack_below_placebo_heldout"]) == 0
    assert "**C2 does not hold**" in md and verdict["n_seeds"] == len(SEEDS)
    # the pooled held-out row is the plan's; every other row of A5 says exploratory
    plan_col = {line.split("|")[1].strip(): line.split("|")[2].strip() for line in md.splitlines()
                if line.startswith("| ") and "|---" not in line and not line.startswith("| mode")}
    assert plan_col.pop("held-out modes (pooled)").startswith("C2 ")
    assert set(plan_col.values()) == {"exploratory"} and len(plan_col) == len(MODES) - 1 + 1
    # Holm over each arm's held-out modes only (the pooled held-out row is C2's single test; in-pair rows
    # claim nothing): the k-th smallest p times (m - k + 1), made monotone
    m = len(HELDOUT)
    for arm in ("routeA", "heldout"):
        for ref in ("none", "placebo"):
            a = a5[a5["arm"] == arm]
            g = a[a["mode"].isin(HELDOUT)].sort_values(f"p_vs_{ref}")
            assert len(g) == m >= 2 and g[f"p_vs_{ref}"].notna().all()
            expected = np.maximum.accumulate(np.minimum(1, (m - np.arange(m)) * g[f"p_vs_{ref}"].to_numpy()))
            assert g[f"p_vs_{ref}_holm"].to_numpy() == pytest.approx(expected)
            assert a[~a["mode"].isin(HELDOUT)][f"p_vs_{ref}_holm"].isna().all()  # pooled and in-pair rows
            assert a[a["mode"] == "held-out modes (pooled)"][f"p_vs_{ref}"].notna().all()
    assert a5[a5["arm"] == "none"]["p_vs_none_holm"].isna().all()
    assert a5[a5["arm"] == "placebo_heldout"]["p_vs_placebo_holm"].isna().all()
    hack = {(arm, s): {r["mode"]: r["hack"] for r in json.loads((kw["metrics_root"] / f"{arm}-{s}" / "per_mode_deploy.json")
                                                                  .read_text())["rows"] if r["view"] == "deploy"}
            for arm in ("none", "placebo_heldout", "heldout") for s in SEEDS}
    for role, ref in (("none", "none"), ("placebo", "placebo_heldout")):
        raw = ttest_rel([hack["heldout", s]["hardcode"] for s in SEEDS], [hack[ref, s]["hardcode"] for s in SEEDS]).pvalue
        assert heldout.loc["hardcode", f"p_vs_{role}"] == pytest.approx(raw)
    assert md.count("Holm p=") == 2 * m  # Δ heldout − none and − placebo: one each per held-out mode
    # the gate's AUROC within each mode, from A7's per-mode rows
    by_mode = pd.read_csv(kw["out_dir"] / "plot_data" / "A7_by_mode.csv")
    for col in ("gate AUROC, heldout", "gate AUROC, routeA", "gate AUROC, placebo_heldout", "gate AUROC, placebo_routeA",
                "Δ heldout − placebo_heldout"):
        assert col in md
    assert set(by_mode["arm"]) >= {"routeA", "heldout"} and by_mode["auroc"].between(0, 1).any()


def test_a6_one_pair_per_mode(five_seeds):
    kw, _ = five_seeds
    a6 = pd.read_csv(kw["out_dir"] / "A6.csv")
    assert list(a6["mode"]) == MODES[1:]
    assert list(a6["id"]) == [f"{m}-0" for m in MODES[1:]]
    md = (kw["out_dir"] / "A6.md").read_text()
    assert md.count("### hack") == 4 and "# hack exit_code 0" in md and "data/pairs/hack_exit_code.md:3" in md


def test_a7_gate_real_vs_null(five_seeds):
    kw, _ = five_seeds
    a7 = pd.read_csv(kw["out_dir"] / "A7.csv").set_index("arm")
    # Labels are planted along v_act: routeA's gate separates them, the placebo's Haar direction does not.
    assert a7.loc["routeA", "auroc"] > 0.85 and a7.loc["routeA", "auroc_percentile_in_null"] > 90
    assert abs(a7.loc["placebo_routeA", "auroc"] - 0.5) < 0.25
    assert a7.loc["routeA", "realised_route_precision"] > a7.loc["placebo_routeA", "realised_route_precision"]
    assert np.isnan(a7.loc["none", "realised_route_precision"])  # none never routes
    assert a7.loc["routeA", "is_max_keep"] == pytest.approx(max(
        pd.read_json(kw["metrics_root"] / f"routeA-{s}" / "steps.jsonl", lines=True)["is_max_keep_student"].max()
        for s in SEEDS))
    # The stage rebuilt each run's own direction: recomputed scores reproduce the logged ones.
    runs = pd.read_csv(kw["out_dir"] / "A7_runs.csv")
    assert runs["score_vs_log_max_rel_diff"].max() < 1e-5
    assert "does not reproduce" not in (kw["out_dir"] / "A7.md").read_text()
    per_run = json.loads((kw["out_dir"] / "A7_gate" / "routeA-0.json").read_text())
    assert len(per_run["null"]["auroc"]) == N_NULL and "student" in per_run["population"]
    assert len(pd.read_csv(kw["out_dir"] / "plot_data" / "A7_gate_null.csv")) == N_NULL * 6 * len(SEEDS)  # 6 arms
    # planted along v_act: no Haar direction and no within-group label shuffle reaches routeA's AUROC
    assert a7.loc["routeA", "p_haar"] == 1 / (N_NULL + 1) and a7.loc["routeA", "p_labels"] == 1 / (N_PERM + 1)
    assert a7.loc["routeA", "p_labels_within"] < 0.05 < a7.loc["placebo_routeA", "p_labels_within"]
    assert per_run["label_permutation"]["within"] == "prompt group (step and problem)"
    assert a7.loc["routeA", "p_haar_below_05"] == f"{len(SEEDS)}/{len(SEEDS)}"
    # over seeds: Fisher's combination, -2 sum(log p) against chi2 with 2k degrees of freedom
    from scipy.stats import chi2
    k = len(SEEDS)
    assert a7.loc["routeA", "p_haar_fisher"] == pytest.approx(chi2.sf(-2 * k * np.log(1 / (N_NULL + 1)), 2 * k))
    assert a7.loc["placebo_routeA", "p_haar"] > 0.05


def test_two_seeds_say_fewer_than_5(tmp_path):
    params = make_pipeline(tmp_path, seeds=(0, 1), arms=("none", "routeA", "placebo_routeA", "absorb"))
    aggregate_stage(params, Layout(tmp_path))
    kw = paths(tmp_path)
    md = (kw["out_dir"] / "A2.md").read_text()
    assert f"n=2 seeds, {TOO_FEW_SEEDS}" in md
    a2 = pd.read_csv(kw["out_dir"] / "A2.csv").set_index("arm")
    assert np.isnan(a2.loc["routeA", "p_hack_hackable_vs_none"]) and np.isnan(a2.loc["routeA", "p_solve_vs_placebo"])
    # the interval needs no minimum: two seeds still get one
    assert a2.loc["routeA", "delta_hack_hackable_vs_none_lo"] < a2.loc["routeA", "delta_hack_hackable_vs_none_hi"]
    a4 = (kw["out_dir"] / "A4.md").read_text()
    assert "No A4 result" in a4 and "'default' preset" in a4 and "|" not in a4  # said, not a fake table
    assert "No A5 result" in (kw["out_dir"] / "A5.md").read_text()
    assert not (kw["plots_dir"] / "png" / "A4.png").exists()


def test_one_seed_and_no_placebo_are_said(tmp_path):
    """One seed: the interval is a bootstrap over problems only, and A2 says so; no placebo run:
    the Δ vs placebo cells say why they are empty."""
    params = make_pipeline(tmp_path, seeds=(0,), arms=("none", "routeA"))
    summary = aggregate_stage(params, Layout(tmp_path))
    kw = paths(tmp_path)
    md = (kw["out_dir"] / "A2.md").read_text()
    assert "covers problem and sampling variance, not seed-to-seed variance" in md
    assert "no `placebo_routeA` runs aggregated" in md and f"n=1 seed, {TOO_FEW_SEEDS}" in md
    a2 = pd.read_csv(kw["out_dir"] / "A2.csv").set_index("arm")
    assert a2.loc["routeA", "test_hack_hackable_vs_placebo"] == "no `placebo_routeA` runs aggregated"
    assert a2.loc["routeA", "delta_hack_hackable_vs_none_lo"] < a2.loc["routeA", "delta_hack_hackable_vs_none_hi"]
    assert "delta_hack_hackable_vs_placebo" not in summary["routeA"] and "delta_hack_hackable_vs_none" in summary["routeA"]


def test_samples_that_disagree_with_the_rates_are_refused(tmp_path):
    """The bootstrap resamples deploy_samples.csv while the tables print per_mode_deploy.json: a
    samples file from another eval, one with a foreign header or a repeated row, is named."""
    params = make_pipeline(tmp_path, seeds=(0,), arms=("none", "routeA"))
    kw = direct_kwargs(tmp_path, params)
    p = kw["metrics_root"] / "routeA-0" / DEPLOY_SAMPLES
    good = p.read_text()
    p.write_bytes(good.replace("\n", "\r\n").encode())  # another line end: still every row read
    aggregate(**kw)
    lines = good.splitlines(keepends=True)
    flip = next(i for i, line in enumerate(lines) if line.startswith("deploy,") and line.endswith(",0,0,0\n"))
    p.write_text("".join(lines[:flip] + [lines[flip][:-len("0,0,0\n")] + "1,0,0\n"] + lines[flip + 1:]))
    with pytest.raises(InputError, match=r"routeA-0/deploy_samples.csv: its deploy samples \(n=120, hacked=\d+, "
                                         r"solved=(\d+)\) do not reproduce .*per_mode_deploy.json's overall deploy row "
                                         r"\(n=120, hacked=\d+, solved=(?!\1)\d+\)"):
        aggregate(**kw)
    p.write_text(good + lines[1])
    with pytest.raises(InputError, match=r"routeA-0/deploy_samples.csv: view 'deploy', problem .* more than once"):
        aggregate(**kw)
    p.write_text(good.replace("gt_pass,hacked", "hacked,gt_pass", 1))
    with pytest.raises(InputError, match=r"routeA-0/deploy_samples.csv: header 'view,.*hacked,gt_pass"):
        aggregate(**kw)
    p.unlink()
    with pytest.raises(InputError, match=r"routeA-0/deploy_samples.csv: file not found"):
        aggregate(**kw)


def direct_kwargs(root: Path, params: dict) -> dict:
    return paths(root) | {"runs_root": root / "runs" / "train", "pairs": [{"id": "a", "mode": "hardcode",
                          "prompt": "p", "hack": "h", "clean": "c"}], "q_lo": Q_LO, "q_hi": Q_HI, "n_null": 3,
                          "directions": {f"{a}-{s}": U for a in params.run_arms for s in params.train.seeds},
                          "plan": plan_file.load(root / "analysis.yaml"), "plan_id": plan_file.identify(root / "analysis.yaml")}


def test_missing_inputs_name_the_path(tmp_path):
    params = make_pipeline(tmp_path, seeds=(0,), arms=("none", "routeA"))
    kw = direct_kwargs(tmp_path, params)
    with pytest.raises(InputError, match=r"routeA-5/per_mode_deploy.json: file not found"):
        aggregate(**kw, runs=["none-0", "routeA-0", "routeA-5"])
    (kw["metrics_root"] / "routeA-0" / "steps.jsonl").unlink()
    with pytest.raises(InputError, match=r"routeA-0/steps.jsonl: file not found"):
        aggregate(**kw)
    shutil.rmtree(kw["runs_root"] / "none-0")
    with pytest.raises(InputError, match=r"none-0/rollouts.jsonl: file not found"):
        aggregate(**kw, runs=["base", "none-0"])
    shutil.rmtree(tmp_path / "runs" / "vact")
    with pytest.raises(InputError, match=r"vact/0/v_act.safetensors: direction file not found"):
        aggregate_stage(params, Layout(tmp_path))


def test_malformed_inputs_name_file_and_key(tmp_path):
    params = make_pipeline(tmp_path, seeds=(0,), arms=("none", "routeA"))
    kw = direct_kwargs(tmp_path, params)
    p = kw["metrics_root"] / "routeA-0" / "per_mode_deploy.json"
    good = json.loads(p.read_text())
    p.write_text(json.dumps(good | {"run": "routeA-9"}))
    with pytest.raises(InputError, match="routeA-0/per_mode_deploy.json: key 'run' is 'routeA-9'"):
        aggregate(**kw)
    bad = dict(good, rows=[dict(good["rows"][0])])
    del bad["rows"][0]["n_hacked"]
    p.write_text(json.dumps(bad))
    with pytest.raises(InputError, match=r"per_mode_deploy.json: rows\[0\] missing key 'n_hacked'"):
        aggregate(**kw)
    p.write_text(json.dumps(good))
    s = kw["metrics_root"] / "none-0" / "steps.jsonl"
    rows = [json.loads(line) for line in s.read_text().splitlines()]
    del rows[3]["qmass_update"]
    s.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(InputError, match="none-0/steps.jsonl: key 'qmass_update'"):
        aggregate(**kw)
    with pytest.raises(InputError, match=r"no gate direction given for run\(s\) \['routeA-0'\]"):
        aggregate(**(kw | {"directions": {}}), runs=["routeA-0"])


def test_wrong_direction_is_flagged(tmp_path):
    """Scoring a run with a direction its gate did not use shows up against the logged scores."""
    params = make_pipeline(tmp_path, seeds=(0,), arms=("none", "placebo_routeA"))
    kw = direct_kwargs(tmp_path, params)  # gives the placebo run v_act instead of its Haar direction
    aggregate(**kw)
    md = (kw["out_dir"] / "A7.md").read_text()
    assert "placebo_routeA-0: the direction scored here does not reproduce the logged gate scores" in md
    assert "none-0: the direction" not in md


def test_no_student_hacks_gives_notes_not_a_figure(tmp_path):
    """Early or tiny runs may hack never: A7 says the AUROC is undefined instead of plotting nothing."""
    params = make_pipeline(tmp_path, seeds=(0,), arms=("none", "routeA"))
    for p in (tmp_path / "runs" / "train").glob("*/rollouts.jsonl"):
        rows = [json.loads(line) | {"hacked": False} for line in p.read_text().splitlines()]
        p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    aggregate_stage(params, Layout(tmp_path))
    kw = paths(tmp_path)
    md = (kw["out_dir"] / "A7.md").read_text()
    assert "routeA-0: AUROC undefined (0 of" in md and "No figure" in md and "A7_gate_null.png" not in md
    assert not (kw["plots_dir"] / "png" / "A7_gate_null.png").exists()
    a7 = pd.read_csv(kw["out_dir"] / "A7.csv").set_index("arm")
    assert np.isnan(a7.loc["routeA", "auroc"]) and a7.loc["routeA", "keep_precision"] == 1.0


def test_a_yoked_run_that_names_no_arm_it_copies_is_refused(tmp_path):
    """Runs made before gate.yoke_to named their placebo `placebo-SEED`: read now, its Δ would find no
    placebo_routeA and C1 would go undecided in silence. Loading such a run is an error naming the rename."""
    make_pipeline(tmp_path, seeds=(0,), arms=("none", "routeA", "placebo_routeA"))
    runs = tmp_path / "metrics" / "runs"
    assert load_run(runs, tmp_path / "runs" / "train", "placebo_routeA-0").arm == "placebo_routeA"
    old = runs / "placebo-0"
    (runs / "placebo_routeA-0").rename(old)
    d = json.loads((old / "per_mode_deploy.json").read_text())
    (old / "per_mode_deploy.json").write_text(json.dumps(d | {"run": "placebo-0", "arm": "placebo"}))
    with pytest.raises(InputError, match="arm 'placebo' is yoked .* rename it placebo_routeA-SEED"):
        load_run(runs, tmp_path / "runs" / "train", "placebo-0", gate_inputs=False)


def test_oracle_arms_are_absent_from_the_label_free_table(tmp_path):
    """Item 4's guard: oracleMatched (an oracle, arms.Arm.oracle: it ranks rows by the true label) is never a row of
    A2's label-free table; it is in the oracle table beside it, marked oracle."""
    params = make_pipeline(tmp_path, seeds=(0,), arms=("none", "routeA", "oracleMatched"))
    aggregate_stage(params, Layout(tmp_path))
    md = (tmp_path / "metrics" / "artifacts" / "A2.md").read_text()
    free = md[md.index("## Label-free arms"):md.index("## Oracle and ceiling arms")]
    oracle = md[md.index("## Oracle and ceiling arms"):md.index("## Score band")]
    rows = lambda text: {line.split("|")[1].strip(): line.split("|")[3].strip() for line in text.splitlines()  # noqa: E731
                         if line.startswith("| ") and not line.startswith("| arm")}
    assert rows(free) == {"none": "label-free", "routeA": "label-free"}
    assert rows(oracle) == {"oracleMatched": "oracle"}
    a2 = pd.read_csv(tmp_path / "metrics" / "artifacts" / "A2.csv").set_index("arm")
    assert a2.loc["oracleMatched", "kind"] == "oracle"


def test_a7_sample_cos_r2_r3(tmp_path):
    """Item 5's guard, on what train.sample_cos writes (vgrout/train/loop.py sample_cos): R2 = rows whose cos_before
    is present, of all rows; R3 = of the steps that routed at least one row and carry both step cosines, those with
    cos_after_step < cos_before_step − 1e-6 (steps.jsonl), never a count of per-row cos_after (None on every routed
    row). Float noise (after = before − 3e-8) must not count as a fall, a non-routing step must not enter R3, the
    none arm's R3 is over all its steps (the null, 0 here); Wilson intervals; fields missing -> not measured."""
    from vgrout.stats import wilson
    params = make_pipeline(tmp_path, seeds=(0, 1), arms=("none", "routeA"))
    rng = np.random.default_rng(4)
    expect = {"n": 0, "present": 0, "steps": 0, "below": 0}
    train, metrics = tmp_path / "runs" / "train", tmp_path / "metrics" / "runs"

    def rewrite(path, rows):
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))

    for s in (0, 1):
        p = train / f"routeA-{s}" / "rollouts.jsonl"
        rows = [json.loads(line) for line in p.read_text().splitlines()]
        for i, r in enumerate(rows):
            if r["step"] < 2 and r["zone"] == "route":  # steps 0, 1 route nothing (warm-up)
                r["zone"] = "absorb"
            before = None if i % 7 == 0 else float(rng.normal(0.1, 0.1))
            r |= {"cos_before": before, "cos_after": None if before is None or r["zone"] == "route" else before}
            expect["n"] += 1
            expect["present"] += before is not None
        rewrite(p, rows)
        p = metrics / f"routeA-{s}" / "steps.jsonl"
        steps = [json.loads(line) for line in p.read_text().splitlines()]
        for t in steps:
            k = t["step"]
            before = 0.2 + 0.01 * k
            # 0, 1: no row routed, a fall that R3 must not see; 2, 3: float noise, no fall; 4: no gradient;
            # 5, 7: a rise; the rest a real fall
            after = (before - 0.05 if k < 2 else before - 3e-8 if k in (2, 3) else None if k == 4
                     else before + 0.01 if k in (5, 7) else before - 1e-3 * (1 + s))
            t |= {"cos_before_step": before, "cos_after_step": after}
            if k >= 2 and after is not None:
                expect["steps"] += 1
                expect["below"] += after < before - 1e-6
        rewrite(p, steps)
    # none: seed 0 logs both cosines, equal up to float (its kept rows unmasked); seed 1 logs none of them
    p = metrics / "none-0" / "steps.jsonl"
    steps = [json.loads(line) for line in p.read_text().splitlines()]
    rewrite(p, [t | {"cos_before_step": 0.3, "cos_after_step": 0.3 + (-3e-8 if t["step"] % 2 else 2e-8)} for t in steps])
    summary = aggregate_stage(params, Layout(tmp_path))
    kw = paths(tmp_path)
    cos = pd.read_csv(kw["out_dir"] / "A7_sample_cos.csv").set_index("arm")
    r = cos.loc["routeA"]
    assert (expect["steps"], expect["below"]) == (2 * 9, 2 * 5)  # the design above, counted
    assert (r["rows"], r["rows_with_cos"], r["steps"], r["steps_after_below_before"], r["r3_over"]) == (
        expect["n"], expect["present"], expect["steps"], expect["below"], "routed")
    assert r["r2"] == pytest.approx(expect["present"] / expect["n"])
    assert (r["r2_lo"], r["r2_hi"]) == pytest.approx(wilson(expect["present"], expect["n"]))
    assert r["r3"] == pytest.approx(expect["below"] / expect["steps"])
    assert (r["r3_lo"], r["r3_hi"]) == pytest.approx(wilson(expect["below"], expect["steps"]))
    assert bool(r["r2_met"]) == (expect["present"] / expect["n"] >= 0.9)
    assert bool(r["r3_met"]) == (expect["below"] / expect["steps"] >= 0.8)
    for k in ("r2", "r2_lo", "r2_hi", "r3", "r3_lo", "r3_hi"):
        assert summary["routeA"][f"sample_cos_{k}"] == pytest.approx(r[k], abs=1e-6)
    n = cos.loc["none"]
    assert (n["r3_over"], n["steps"], n["steps_after_below_before"], n["r3"]) == ("all", STEPS, 0, 0.0)
    assert summary["none"]["sample_cos_r3"] == 0.0 and "sample_cos_r2" not in summary["none"]
    assert np.isnan(n["r2"]) and n["runs_measured"] == 0 and n["runs_measured_steps"] == 1
    md = (kw["out_dir"] / "A7.md").read_text()
    assert "## Per-sample cosines (seed 004's R2, R3)" in md
    assert ("| none | 2 | 0/2 / 1/2 | not measured (no row carries cos_before: train.sample_cos off) | "
            f"0.000 [0.000, {wilson(0, STEPS)[1]:.3f}] (0/{STEPS}) |") in md


def test_a7_sample_cos_not_measured(tmp_path):
    """Logs without the cosines (train.sample_cos off, or rows from before the step cosines): both R2 and R3 say
    not measured, nothing crashes, and summary.json carries no sample_cos key."""
    params = make_pipeline(tmp_path, seeds=(0,), arms=("none", "routeA"))
    p = tmp_path / "runs" / "train" / "routeA-0" / "rollouts.jsonl"
    rows = [json.loads(line) for line in p.read_text().splitlines()]
    p.write_text("".join(json.dumps(r | {"cos_after": 0.1}) + "\n" for r in rows))  # an old log's per-row field only
    summary = aggregate_stage(params, Layout(tmp_path))
    md = (paths(tmp_path)["out_dir"] / "A7.md").read_text()
    for arm in ("none", "routeA"):
        assert (f"| {arm} | 1 | 0/1 / 0/1 | not measured (no row carries cos_before: train.sample_cos off) | not "
                "measured (no step carries cos_before_step / cos_after_step: train.sample_cos off) |") in md
        assert not any(k.startswith("sample_cos") for k in summary[arm])

def test_a_grid_cannot_leave_out_a_plan_seed_that_ran(tmp_path):
    """plans/decisive.yaml decides on the leading seeds that ran (seeds_run leading): params train.seeds cut after
    the results to drop seed 105, whose runs were evaluated, is refused naming its file; a seed whose runs never
    finished their evaluation may be left out, and a plan of seeds_run all reads params' seeds as they are."""
    from vgrout.analysis.aggregate import left_out
    decisive = plan_file.load(Path(__file__).parents[2] / "plans" / "decisive.yaml")
    layout, five = Layout(tmp_path), [100, 101, 102, 103, 104]
    left_out(decisive, five, ["none", "routeV", "uniform"], layout)  # 105 never evaluated: five may decide
    evaluated = layout.run_metrics("uniform-105") / "per_mode_deploy.json"
    evaluated.parent.mkdir(parents=True)
    evaluated.write_text("{}")
    with pytest.raises(InputError, match=r"leaves out plan seeds whose runs were evaluated \(.*uniform-105/per_mode_deploy"):
        left_out(decisive, five, ["none", "routeV", "uniform"], layout)
    left_out(decisive, [*five, 105], ["none", "routeV", "uniform"], layout)
    left_out(plan_file.load(PLAN), five, ["none", "routeV", "uniform"], layout)  # seeds_run all
