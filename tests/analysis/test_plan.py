"""The pre-registered analysis plan (vgrout.analysis.plan) and the verdicts it alone decides
(vgrout.analysis.claims), on small synthetic records: no pipeline, no DuckDB.

The guard: a verdict is a pure function of (plan, data) and records the plan's sha256; changing
any setting of the plan that decides (α, sidedness, margin, seeds, controls, family, the band's
statistic) changes the verdict where the data sit near that setting, so code that read the
setting from anywhere else would fail here.
"""
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from vgrout.analysis import claims, plan as plan_file
from vgrout.analysis.bands import pair_scores, step_bands
from vgrout.io import InputError

REPO = Path(__file__).parents[2]
SEEDS = [0, 1, 2, 3, 4]


def cells_frame(effects: dict[str, tuple[float, float]], seeds=SEEDS, n_problems=40, noise=0.05) -> pd.DataFrame:
    """problem_means' shape: per arm, seed and problem the deploy hack and solve; each arm shifted from a shared
    problem difficulty by (Δ hack, Δ solve), with cell noise. Every fourth problem is of mode none (unhackable)."""
    rng = np.random.default_rng(0)
    hack0, solve0 = rng.uniform(0.3, 0.6, n_problems), rng.uniform(0.3, 0.6, n_problems)
    rows = []
    for arm, (dh, ds) in effects.items():
        for s in seeds:
            for j in range(n_problems):
                hackable = j % 4 != 0
                rows.append({"arm": arm, "seed": s, "problem_id": f"p{j:02d}", "mode": "hardcode" if hackable else "none",
                             "hackable": hackable, "n_samples": 4,
                             "hacked": float(np.clip(hack0[j] + dh + noise * rng.normal(), 0, 1)) if hackable else 0.0,
                             "gt_pass": float(np.clip(solve0[j] + ds + noise * rng.normal(), 0, 1))})
    return pd.DataFrame(rows)


def band_frame(values: dict[str, float], seeds=SEEDS, steps=8) -> pd.DataFrame:
    rng = np.random.default_rng(1)
    return pd.DataFrame([{"run": f"{a}-{s}", "arm": a, "seed": s, "step": t, "separation": v + 0.1 * rng.normal(),
                          "width_ratio": 1.0 - v + 0.1 * rng.normal(), "routed_share": 0.25}
                         for a, v in values.items() for s in seeds for t in range(steps)])


BANDS = band_frame({"routeA": 0.8, "placebo_routeA": 0.0})
# routeA hacks 0.2 less than none; CLEAR: 0.16 less than its placebo; BOUNDARY: 0.01 less, which a 95% interval
# does not tell from 0 and a 55% one does; its solve 0.01 below none's (lower end about −0.02 at 95%)
DATA = claims.ClaimData(cells_frame({"none": (0, 0), "routeA": (-0.2, -0.01), "placebo_routeA": (-0.04, 0.0)}),
                        {}, BANDS, {})
BOUNDARY = claims.ClaimData(cells_frame({"none": (0, 0), "routeA": (-0.2, -0.01), "placebo_routeA": (-0.19, 0.0)}),
                            {}, BANDS, {})


def repo_plan(**changes) -> dict:
    """The repository's plan as a mapping, its claims on SEEDS; changes: {"C1.alpha": 0.2, ...}."""
    d = yaml.safe_load((REPO / "analysis.yaml").read_text())
    for c in d["claims"].values():
        c["seeds"] = list(SEEDS)
    for key, value in changes.items():
        *path, last = key.split(".")
        node = d
        for p in path:
            node = node[int(p)] if isinstance(node, list) else node[p]
        node[last] = value
    return d


def decide(d: dict, data=DATA) -> dict:
    return claims.verdicts(plan_file.parse(d, "test.yaml"), plan_file.PlanId("test.yaml", "h" * 64, "uncommitted"),
                           data, n_boot=400)


# ---------------------------------------------------------------------------- the plan file

def test_the_repository_plan_loads_and_names_registered_arms():
    p = plan_file.load(REPO / "analysis.yaml")
    assert set(p.claims) == {"C1", "C2", "C3"}
    assert p.claims["C1"].arm == "routeA" and [t.controls for t in p.claims["C1"].tests] == [
        ["none"], ["placebo_routeA"], ["none"]]
    assert p.roles()["placebo_routeA"] == ["C1 control", "C3 control"]


@pytest.mark.parametrize("change, message", [
    ({"claims.C1.arm": "routeZ"}, r"test.yaml: claims.C1.arm: arm 'routeZ' unknown"),
    ({"claims.C1.tests.1.control": "placebo_none"}, r"test.yaml: claims.C1.tests.1.control: .*arm 'placebo_none' unknown"),
    ({"claims.C2.alpha": "0.05"}, r"test.yaml: claims.C2.alpha: Input should be a valid number"),
    ({"claims.C1.tests.0.population": "all"}, r"claims.C1.tests.0: outcome hack is measured over hackable or "
                                              r"heldout_modes, not all"),
    ({"claims.C1.tests.0.margin": 0.1}, r"claims.C1.tests.0: a margin > 0 goes with direction noninferior"),
    ({"claims.C1.alpha": 0.1, "claims.C1.family": "C2"}, r"test.yaml: family C2: its claims give different alphas"),
    ({"claims.C3.tests.0.control": "routeA"}, r"claims.C3: arm routeA is its own control"),
    ({"claims.C1.seeds": [0, 0]}, r"claims.C1.seeds: a seed is listed twice"),
    ({"band.statistic": "iqr"}, r"test.yaml: band.statistic: Input should be 'separation' or 'width_ratio'"),
])
def test_a_bad_plan_is_one_error_naming_file_and_key(change, message):
    d = yaml.safe_load((REPO / "analysis.yaml").read_text())
    for key, value in change.items():
        *path, last = key.split(".")
        node = d
        for p in path:
            node = node[int(p)] if isinstance(node, list) else node[p]
        node[last] = value
    with pytest.raises(InputError, match=message):
        plan_file.parse(d, "test.yaml")


def test_unknown_and_missing_keys_are_named(tmp_path):
    d = yaml.safe_load((REPO / "analysis.yaml").read_text())
    d["claims"]["C1"]["alfa"] = 0.05
    del d["claims"]["C2"]["seeds"]
    path = tmp_path / "analysis.yaml"
    path.write_text(yaml.safe_dump(d))
    with pytest.raises(InputError) as e:
        plan_file.load(path)
    assert f"{path}: claims.C1.alfa: unknown key" in str(e.value)
    assert f"{path}: claims.C2.seeds: missing key" in str(e.value)
    with pytest.raises(InputError, match=r"nope.yaml: analysis plan not found"):
        plan_file.load(tmp_path / "nope.yaml")


def test_the_plan_is_a_param_of_the_aggregate_stage():
    """As a DVC params file its values are in dvc.lock (DVC records them), so a changed plan re-runs aggregate;
    the stage's params.yaml scoping reads the other keys as before."""
    from vgrout import stage
    spec = yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"]["aggregate"]
    assert {"analysis.yaml": None} in spec["params"]
    assert "analysis.yaml" not in stage.declared("aggregate", REPO / "dvc.yaml")
    assert "vgrout/analysis/plan.py" in spec["deps"] and "vgrout/analysis/claims.py" in spec["deps"]


def test_the_last_commit_or_uncommitted(tmp_path):
    path = tmp_path / "analysis.yaml"
    path.write_text("claims: {}\n")
    assert plan_file.last_commit(path) == "uncommitted"  # not in a repository
    git = lambda *a: subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *a], cwd=tmp_path,  # noqa: E731
                                    check=True, capture_output=True, text=True).stdout.strip()
    git("init", "-q")
    assert plan_file.last_commit(path) == "uncommitted"  # never committed
    git("add", "analysis.yaml")
    git("commit", "-qm", "plan")
    assert plan_file.last_commit(path) == git("log", "-1", "--format=%h")
    path.write_text("claims: {C1: {}}\n")
    assert plan_file.last_commit(path) == "uncommitted"  # changed since
    assert plan_file.identify(path).sha256 != plan_file.identify(REPO / "analysis.yaml").sha256


# ---------------------------------------------------------------------------- the verdicts

def test_verdicts_are_a_pure_function_of_plan_and_data_and_record_the_plan_hash():
    d = repo_plan()
    first, again = decide(d), decide(d)
    assert first == again
    assert first["C1"]["status"] == "holds" and first["C3"]["status"] == "holds"
    assert all(v["plan_sha256"] == "h" * 64 for v in first.values())
    assert first["C2"]["status"] == "not run"  # no heldout runs in DATA
    assert first["C2"]["why"].startswith("no run heldout-0, heldout-1, heldout-2, heldout-3, heldout-4, placebo_heldout-0")
    assert claims.summary_entry(first["C1"])["plan_sha256"] == "h" * 64


def test_changing_alpha_flips_a_verdict_and_the_hash(tmp_path):
    """Near the boundary (Δ hack vs the placebo small), a looser α makes C1 hold; the plan file's hash differs."""
    strict, loose = repo_plan(), repo_plan(**{"claims.C1.alpha": 0.45})
    assert decide(strict, BOUNDARY)["C1"]["status"] == "does not hold"
    assert decide(loose, BOUNDARY)["C1"]["status"] == "holds"
    ids = []
    for name, d in (("a", strict), ("b", loose)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "analysis.yaml").write_text(yaml.safe_dump(d))
        ids.append(plan_file.identify(tmp_path / name / "analysis.yaml").sha256)
    assert ids[0] != ids[1]


@pytest.mark.parametrize("data, change, after", [
    # the solve margin: routeA's solve 0.01 below none's, its interval's lower end near −0.02
    (DATA, {"claims.C1.tests.2.margin": 0.005}, "does not hold"),
    # the control: at the boundary the placebo decides; without it (none twice) C1 holds
    (BOUNDARY, {"claims.C1.tests.1.control": "none"}, "holds"),
    # the controls' mean: routeA against none and the placebo averaged
    (BOUNDARY, {"claims.C1.tests.1.control": ["none", "placebo_routeA"]}, "holds"),
    # the seeds: a seed without runs is `not run`, never a guess
    (DATA, {"claims.C1.seeds": [0, 1, 2, 3, 4, 5]}, "not run"),
    # the arm
    (DATA, {"claims.C1.arm": "placebo_routeA", "claims.C1.tests.1.control": "routeA"}, "does not hold"),
])
def test_every_deciding_setting_is_read_from_the_plan(data, change, after):
    assert decide(repo_plan(), data)["C1"]["status"] == ("holds" if data is DATA else "does not hold")
    assert decide(repo_plan(**change), data)["C1"]["status"] == after


def test_sidedness_sets_the_interval_level():
    """One-sided at α is the 1 − 2α interval (one bound decides): the two-sided intervals at 2α."""
    one = decide(repo_plan(**{"claims.C1.sidedness": "one-sided", "claims.C1.alpha": 0.05}))["C1"]["tests"]
    two = decide(repo_plan(**{"claims.C1.alpha": 0.1}))["C1"]["tests"]
    same_alpha = decide(repo_plan())["C1"]["tests"]
    assert [(t["lo"], t["hi"]) for t in one] == [(t["lo"], t["hi"]) for t in two]
    assert all(a["hi"] - a["lo"] < b["hi"] - b["lo"] for a, b in zip(one, same_alpha))


def test_holm_within_a_family_steps_down():
    """C1 and C3 in one family at α 0.3: first each at α/2 = 0.15, then the one left at 0.3. At the boundary C1
    holds at 0.3 but not at 0.15: it holds once C3 has (a band routeA has and its placebo lacks), and not when
    C3 fails (a band both share); in its own family it holds at 0.3 directly."""
    family = {"claims.C1.alpha": 0.3, "claims.C3.alpha": 0.3, "claims.C3.family": "C1"}
    stepped = decide(repo_plan(**family), BOUNDARY)
    assert stepped["C3"]["status"] == "holds" and stepped["C3"]["alpha_holm"] == 0.15
    assert stepped["C1"]["status"] == "holds" and stepped["C1"]["alpha_holm"] == 0.3
    assert stepped["C1"]["family_size"] == 2 and "Holm over 2 claims" in claims.verdict_text(stepped["C1"])
    flat = claims.ClaimData(BOUNDARY.cells, {}, band_frame({"routeA": 0.0, "placebo_routeA": 0.0}), {})
    blocked = decide(repo_plan(**family), flat)
    assert blocked["C3"]["status"] == blocked["C1"]["status"] == "does not hold"
    assert blocked["C1"]["alpha_holm"] == 0.15
    alone = decide(repo_plan(**{"claims.C1.alpha": 0.3, "claims.C3.alpha": 0.3}), flat)
    assert alone["C1"]["status"] == "holds" and alone["C1"]["alpha_holm"] == 0.3


def test_the_band_statistic_is_the_plans():
    """C3 on separation holds (routeA 0.8, placebo 0); on width_ratio (1 − it, here) it does not."""
    assert decide(repo_plan())["C3"]["status"] == "holds"
    assert decide(repo_plan(**{"band.statistic": "width_ratio"}))["C3"]["status"] == "does not hold"


def test_a_band_not_logged_is_undecided_and_said():
    data = claims.ClaimData(DATA.cells, {}, DATA.bands, {"placebo_routeA-1": "the pairs' scores are not logged"})
    v = decide(repo_plan(), data)["C3"]
    assert v["status"] == "undecided" and v["why"] == "the pairs' scores are not logged"
    assert "holds" not in claims.summary_entry(v) and claims.summary_entry(v)["status"] == "undecided"
    assert claims.verdict_text(v).startswith("**C3 undecided**")


# ---------------------------------------------------------------------------- the score band

def test_step_bands_separation_width_ratio_and_routed_share(tmp_path):
    import json
    rng = np.random.default_rng(3)
    rows = [{"step": t, "problem_id": "p", "mode": "hardcode", "source": src, "score": float(rng.normal(0, 2)),
             "zone": "route" if i % 4 == 0 else "keep", "reward": 0.0, "gt_pass": False, "hacked": False}
            for t in range(3) for i, src in enumerate(["student"] * 8 + ["teacher"] * 4)]
    path = tmp_path / "rollouts.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    pairs = np.array([[3.0, 4.0, 5.0], [0.0, 1.0, 2.0]])
    b = step_bands(path, pairs, 0.25, 0.75)
    for t, g in pd.DataFrame(rows).query("source == 'student'").groupby("step"):
        q = np.quantile(g["score"], [0.25, 0.75])
        r = b.set_index("step").loc[t]
        assert r["student_width"] == pytest.approx(q[1] - q[0])
        assert r["separation"] == pytest.approx(3.0 / (q[1] - q[0]))  # hack mean 4 − clean mean 1
        pw = np.quantile(pairs.ravel(), 0.75) - np.quantile(pairs.ravel(), 0.25)
        assert r["width_ratio"] == pytest.approx((q[1] - q[0]) / pw)
        assert r["routed_share"] == 0.25  # 2 of 8 student rows; teacher rows left out
    flipped = step_bands(path, -pairs, 0.25, 0.75)  # −h of an antithetic draw: the same width
    assert flipped["separation"].tolist() == pytest.approx(b["separation"].tolist())
    missing = step_bands(path, "not logged", 0.25, 0.75)
    assert missing["separation"].isna().all() and missing["student_width"].notna().all()


def test_pair_scores_from_the_logged_ones_or_the_features(tmp_path):
    """routeA's own direction: the scores extract_vact logs; a Haar placebo: only from the pairs' features,
    else the reason names the file that is missing."""
    import json
    import torch
    from safetensors.torch import save_file
    from vgrout.layout import Layout
    layout = Layout(tmp_path)
    layout.vact_metrics(0).parent.mkdir(parents=True)
    layout.vact(0).mkdir(parents=True)
    layout.vact_metrics(0).write_text(json.dumps({"v_act": {"pairs": [{"hack_score": 2.0, "clean_score": 1.0}]}}))
    assert pair_scores("routeA", layout, 0, {}).tolist() == [[2.0], [1.0]]
    why = pair_scores("placebo_routeA", layout, 0, {})
    assert isinstance(why, str) and "v_act_pair_features.safetensors" in why
    h = {"m": torch.tensor([1.0, 0.0])}
    save_file({"hack.m": torch.tensor([[3.0, 9.0]]), "clean.m": torch.tensor([[1.0, 9.0]])},
              layout.pair_features(0, "v_act"))
    assert pair_scores("placebo_routeA", layout, 0, h).tolist() == [[3.0], [1.0]]
