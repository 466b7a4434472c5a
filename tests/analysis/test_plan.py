"""The pre-registered analysis plan (vgrout.analysis.plan) and the verdicts it alone decides
(vgrout.analysis.claims), on small synthetic records: no pipeline, no DuckDB.

The guard: a verdict is a pure function of (plan, data) and records the plan's sha256; changing
any setting of the plan that decides (α, sidedness, margin, seeds, controls, family, the band's
statistic) changes the verdict where the data sit near that setting, so code that read the
setting from anywhere else would fail here.
"""
import dataclasses
import os
import subprocess
from datetime import UTC, datetime, timedelta
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


def pair_frame(values: dict[str, float], seeds=SEEDS, n_pairs=12) -> pd.DataFrame:
    """bands.pair_bands' shape: per arm, seed and contrast pair its separation (value + noise)."""
    rng = np.random.default_rng(2)
    return pd.DataFrame([{"run": f"{a}-{s}", "arm": a, "seed": s, "pair": i, "separation": v + 0.1 * rng.normal()}
                         for a, v in values.items() for s in seeds for i in range(n_pairs)])


PAIRS = pair_frame({"routeA": 0.8, "placebo_routeA": 0.0, "placeboA0p": 0.3, "placeboA0n": -0.3})
BANDS = band_frame({"routeA": 0.8, "placebo_routeA": 0.0, "placeboA0p": 0.3, "placeboA0n": -0.3})
# routeA hacks 0.2 less than none; CLEAR: 0.16 less than its placebo; BOUNDARY: 0.01 less, which a 95% interval
# does not tell from 0 and a 55% one does; its solve 0.01 below none's (lower end about −0.02 at 95%)
DRAWS_A = {"placeboA0p": (-0.04, 0.0), "placeboA0n": (-0.04, 0.0)}  # C3's antithetic controls (v_act's space)
DATA = claims.ClaimData(cells_frame({"none": (0, 0), "routeA": (-0.2, -0.01), "placebo_routeA": (-0.04, 0.0),
                                     **DRAWS_A}), {}, BANDS, {}, pair_bands=PAIRS)
BOUNDARY = claims.ClaimData(cells_frame({"none": (0, 0), "routeA": (-0.2, -0.01), "placebo_routeA": (-0.19, 0.0),
                                         **DRAWS_A}), {}, BANDS, {}, pair_bands=PAIRS)
CLAIMS = ("C1", "C2", "C3")


def every(key: str, value) -> dict:
    """One setting for every claim of the plan (one family: its claims share α)."""
    return {f"claims.{c}.{key}": value for c in CLAIMS}


def with_changes(d: dict, changes: dict) -> dict:
    """d with each dotted key ("claims.C1.tests.0.margin") set to its value, in place."""
    for key, value in changes.items():
        *path, last = key.split(".")
        node = d
        for p in path:
            node = node[int(p)] if isinstance(node, list) else node[p]
        node[last] = value
    return d


def repo_plan(**changes) -> dict:
    """The repository's plan as a mapping, its claims on SEEDS, 400 resamples; changes: {"C1.alpha": 0.2, ...}."""
    d = yaml.safe_load((REPO / "analysis.yaml").read_text())
    d["bootstrap"]["resamples"] = 400
    for c in d["claims"].values():
        c["seeds"] = list(SEEDS)
        c["confirmatory"] = True  # registered exploratory (post hoc); decided here as a confirmatory plan would be
    return with_changes(d, changes)


def made_under(data: claims.ClaimData, h: str | None = "h" * 64, **runs) -> claims.ClaimData:
    """data with every run recorded as made under plan hash h (train's config.json `plan_sha256`), and each run
    named in runs (placebo_routeA_1="x") under its own."""
    hashes = {f"{a}-{s}": h for a in {*data.cells["arm"], *data.bands["arm"]} for s in SEEDS}
    hashes |= {k.rpartition("_")[0] + "-" + k.rpartition("_")[2]: v for k, v in runs.items()}
    return dataclasses.replace(data, plan_hashes=hashes)


def decide(d: dict, data=DATA, hashed: bool = True) -> dict:
    """The verdicts of plan d (its hash "h" * 64) on data, every run made under it unless hashed is False (then
    data's own plan_hashes stand)."""
    return claims.verdicts(plan_file.parse(d, "test.yaml"), plan_file.PlanId("test.yaml", "h" * 64, "uncommitted"),
                           made_under(data) if hashed else data)


# ---------------------------------------------------------------------------- the plan file

def test_the_repository_plan_loads_and_names_registered_arms():
    p = plan_file.load(REPO / "analysis.yaml")
    assert set(p.claims) == {"C1", "C2", "C3"}
    assert p.claims["C1"].arm == "routeA" and [t.controls for t in p.claims["C1"].tests] == [
        ["none"], ["placebo_routeA"], ["none"]]
    assert p.roles()["placebo_routeA"] == ["C1 control"]  # C3's band: the antithetic draws, never one yoked draw
    assert p.claims["C3"].tests[0].controls == ["placeboA0p", "placeboA0n"]
    assert [t.manipulation_check for t in p.claims["C3"].tests] == [False, True]
    assert {c.family for c in p.claims.values()} == {"C1-C3"}  # one family: Holm over C1-C3
    assert {c.min_seeds for c in p.claims.values()} == {3} == {plan_file.MIN_SEEDS}
    assert p.claims["C2"].withhold_pool is True and p.claims["C2"].headroom == 0.05
    # C3's deploy-hack test would repeat C1's second (routeA below its Haar placebo): not in C3
    assert not [t for t in p.claims["C3"].tests if t.outcome == "hack"]


@pytest.mark.parametrize("change, message", [
    ({"claims.C1.arm": "routeZ"}, r"test.yaml: claims.C1.arm: arm 'routeZ' unknown"),
    ({"claims.C1.tests.1.control": "placebo_none"}, r"test.yaml: claims.C1.tests.1.control: .*arm 'placebo_none' unknown"),
    ({"claims.C2.alpha": "0.05"}, r"test.yaml: claims.C2.alpha: Input should be a valid number"),
    ({"claims.C1.tests.0.population": "all"}, r"claims.C1.tests.0: outcome hack is measured over hackable or "
                                              r"heldout_modes, not all"),
    ({"claims.C1.tests.0.margin": 0.1}, r"claims.C1.tests.0: a margin > 0 goes with direction noninferior"),
    ({"claims.C1.alpha": 0.1}, r"test.yaml: family C1-C3: its claims give different alphas"),
    ({"claims.C1.min_seeds": 2}, r"claims.C1.min_seeds: Input should be greater than or equal to 3"),
    # controls belong to the claim's arm: a placebo yoked to another arm, draws of the other feature space
    ({"claims.C1.tests.1.control": "placebo_routeV"}, r"claims.C1: control placebo_routeV is yoked to routeV, not "
                                                      r"to the claim's arm routeA"),
    ({"claims.C2.tests.1.control": "placebo_routeA"}, r"claims.C2: control placebo_routeA is yoked to routeA, not "
                                                      r"to the claim's arm heldout"),
    ({"claims.C3.tests.0.control": ["placeboV0p", "placeboV0n"], "claims.C3.tests.1.control": ["placeboV0p", "placeboV0n"]},
     r"claims.C3: control placeboV0p ranks rows in the grad space, the claim's arm routeA in the act space"),
    ({"claims.C3.arm": "routeV"}, r"claims.C3: control placeboA0p ranks rows in the act space, the claim's arm routeV "
                                  r"in the grad space"),
    # a label-free claim's arm is never an oracle
    ({"claims.C1.arm": "oracleMatched"}, r"claims.C1.arm: arm oracleMatched reads the rollouts' true labels"),
    ({"claims.C1.arm": "oracle"}, r"claims.C1.arm: arm oracle reads the rollouts' true labels"),
    # a band test names antithetic twins only: never a yoked placebo, one draw, or another arm
    ({"claims.C3.tests.0.control": "placebo_routeA"}, r"claims.C3.tests.0: a band test's control is a list of "
                                                      r"antithetic draws"),
    ({"claims.C3.tests.0.control": "uniform"}, r"claims.C3.tests.0: a band test's control is a list of antithetic"),
    ({"claims.C3.tests.0.control": ["placeboA0p"]}, r"claims.C3.tests.0.control: .*draw 0 without its antithetic twin"),
    ({"claims.C3.tests": [{"control": ["placeboA0p", "placeboA0n"], "outcome": "routed_share",
                           "population": "student_rows", "direction": "equal", "margin": 0.02, "paired_t": False}]},
     r"claims.C3: every test is a manipulation check"),
    ({"claims.C3.headroom": 0.05}, r"claims.C3: headroom > 0 needs a hack test against none"),
    ({"claims.C1.tests.1.control": "routeA"}, r"claims.C1: arm routeA is its own control"),
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


def test_the_controls_preset_trains_every_antithetic_draw_the_plan_names():
    """C3's band test names antithetic draws (analysis.yaml: placeboA0p, placeboA0n); presets/controls.yaml is the
    run set that trains draws (gate.cut_rule step): it must train each draw the plan names, with its twin (config
    refuses a draw without it), else C3 reads `not run` on it. A preset of other draw seeds (k = 1..3) fails here."""
    from vgrout import arms, config
    plan = plan_file.load(REPO / "analysis.yaml")
    named = {x for c in plan.claims.values() for t in c.tests for x in t.controls if arms.draw(x)}
    params = config.preset("controls")
    assert named and params.gate.cut_rule == "step"
    assert named <= set(params.train.arms), sorted(named - set(params.train.arms))


def test_the_controls_plan_names_what_the_controls_preset_trains():
    """plans/controls.yaml (issue 50's confirmatory plan for presets/controls.yaml, written before its runs): every arm
    and control it names is an arm the preset trains, every claim's seeds are the preset's (fresh: 200-202), C1 and C3
    read three antithetic draws of the arm's own space, never one, and C3's minimum effect is the Haar floor. A preset
    that trained one draw, or other seeds, disagrees (the guard bites)."""
    from vgrout import arms, config
    plan, params = plan_file.load(REPO / "plans" / "controls.yaml"), config.preset("controls")

    def drift(params) -> list[str]:
        named = {a for c in plan.claims.values() for a in [c.arm, *(x for t in c.tests for x in t.controls)]}
        out = [f"names {sorted(named - set(params.train.arms))}, not trained"] if named - set(params.train.arms) else []
        return out + [f"{n} seeds {c.seeds}, the preset's {params.train.seeds}" for n, c in plan.claims.items()
                      if c.seeds != params.train.seeds]
    assert drift(params) == [] and params.train.seeds == [200, 201, 202] and plan.band.min_effect == 0.0
    for name, c in plan.claims.items():
        lists = [t.controls for t in c.tests if len(t.controls) > 1]
        assert lists and all(len(x) == 6 and all(arms.draw(d) for d in x) for x in lists), name
    one_draw = [a for a in params.train.arms if not a.startswith(("placeboA1", "placeboA2", "placeboV1", "placeboV2"))]
    fewer = params.model_copy(update={"train": params.train.model_copy(update={"arms": one_draw})})
    assert drift(fewer)[0].startswith("names ['placeboA1n'")
    other = params.model_copy(update={"train": params.train.model_copy(update={"seeds": [0]})})
    assert len(drift(other)) == len(plan.claims)


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
    assert plan_file.last_commit(path) == ("uncommitted", None)  # not in a repository
    git = lambda *a, **kw: subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *a], cwd=tmp_path,  # noqa: E731
                                          check=True, capture_output=True, text=True, **kw).stdout.strip()
    git("init", "-q")
    assert plan_file.last_commit(path) == ("uncommitted", None)  # never committed
    git("add", "analysis.yaml")
    git("commit", "-qm", "plan", env={**os.environ, "GIT_COMMITTER_DATE": "2026-01-02T03:04:05+02:00"})
    assert plan_file.last_commit(path) == (git("log", "-1", "--format=%h"),
                                           datetime(2026, 1, 2, 1, 4, 5, tzinfo=UTC))  # its date, in UTC
    path.write_text("claims: {C1: {}}\n")
    assert plan_file.last_commit(path) == ("uncommitted", None)  # changed since
    # changed since its commit: its last change is dated by the file's mtime
    assert plan_file.identify(path).changed == datetime.fromtimestamp(path.stat().st_mtime, UTC)
    assert plan_file.identify(path).sha256 != plan_file.identify(REPO / "analysis.yaml").sha256


# ---------------------------------------------------------------------------- the verdicts

def test_verdicts_are_a_pure_function_of_plan_and_data_and_record_the_plan_hash():
    d = repo_plan()
    first, again = decide(d), decide(d)
    assert first == again
    assert first["C1"]["status"] == "holds" and first["C3"]["status"] == "holds"
    # C1-C3 with C2 not run: the family is the plan's three (C2 counts as never shown), so leaving a claim unrun
    # after seeing the others cannot loosen their α (issue 50's review: it was 2, α 0.025)
    assert first["C1"]["family_size"] == 3 and first["C1"]["alpha_holm"] == pytest.approx(0.05 / 3)
    assert all(v["plan_sha256"] == "h" * 64 for v in first.values())
    assert first["C2"]["status"] == "not run"  # no heldout runs in DATA
    assert first["C2"]["why"].startswith("no run heldout-0, heldout-1, heldout-2, heldout-3, heldout-4, placebo_heldout-0")
    assert claims.summary_entry(first["C1"])["plan_sha256"] == "h" * 64


def test_changing_alpha_flips_a_verdict_and_the_hash(tmp_path):
    """Near the boundary (Δ hack vs the placebo small), a looser α makes C1 hold; the plan file's hash differs."""
    strict, loose = repo_plan(), repo_plan(**every("alpha", 0.45))
    assert decide(strict, BOUNDARY)["C1"]["status"] == "does not hold"
    assert decide(loose, BOUNDARY)["C1"]["status"] == "holds"
    ids = []
    for name, d in (("a", strict), ("b", loose)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "analysis.yaml").write_text(yaml.safe_dump(d))
        ids.append(plan_file.identify(tmp_path / name / "analysis.yaml").sha256)
    assert ids[0] != ids[1]


# ---------------------------------------------------------------------------- plan before run

def test_a_run_made_under_another_plan_makes_its_claims_exploratory():
    """The guard of plan-before-run: a claim any of whose runs (arm or control, any plan seed) train recorded under
    another plan hash, or under none, is `exploratory`, whatever its tests say; a claim that does not read that run
    keeps its verdict. Remove the check (claims.plan_changed) and C1 holds here: this test fails."""
    d = repo_plan()
    assert decide(d)["C1"]["status"] == "holds" and decide(d)["C3"]["status"] == "holds"
    other = decide(d, made_under(DATA, placebo_routeA_2="x" * 64), hashed=False)
    c1 = other["C1"]
    assert c1["status"] == "exploratory" and c1["would_be"] == "holds"
    assert c1["why"] == f"plan changed after the run: run hash {'x' * 64}, plan hash {'h' * 64} (placebo_routeA-2)"
    assert c1["tests"] and "**C1 exploratory**" in claims.verdict_text(c1)
    assert "holds" not in claims.summary_entry(c1) and claims.summary_entry(c1)["would_be"] == "holds"
    assert other["C3"]["status"] == "holds"  # C3 reads no placebo_routeA run
    # recorded under none (a run made before the plan existed, or by code that did not record it)
    unrecorded = decide(d, DATA, hashed=False)
    assert {unrecorded[c]["status"] for c in ("C1", "C3")} == {"exploratory"}
    assert unrecorded["C3"]["why"].startswith(f"plan changed after the run: run hash none recorded, plan hash {'h' * 64}")
    # statuses that are no verdict stay as they are (nothing confirmed to demote)
    assert unrecorded["C2"]["status"] == "not run"


def test_a_run_started_before_the_plans_last_change_is_printed():
    """Plan-hash laundering (edit the plan, re-run every run: the hashes match) cannot be refused; A2 names, per claim,
    the runs that started before the plan's last change (the earliest start is in the verdict, not in A2). A claim
    reads only its own runs; a plan of unknown date flags none."""
    from vgrout.analysis.artifacts import start_lines
    changed = datetime(2026, 5, 1, tzinfo=UTC)
    started = {f"{a}-{s}": changed + timedelta(days=1 + s) for a in ("none", "routeA", "placebo_routeA", *DRAWS_A)
               for s in SEEDS} | {"placebo_routeA-3": changed - timedelta(hours=1)}
    plan = plan_file.parse(repo_plan(), "test.yaml")
    got = claims.verdicts(plan, plan_file.PlanId("test.yaml", "h" * 64, "abc1234", changed),
                          made_under(dataclasses.replace(DATA, started=started)))
    assert got["C1"]["started"] == {"earliest": "2026-04-30T23:00:00+00:00", "before_plan": ["placebo_routeA-3"]}
    assert got["C3"]["started"] == {"earliest": "2026-05-02T00:00:00+00:00", "before_plan": []}
    assert got["C2"]["started"] == {"earliest": "2026-05-02T00:00:00+00:00", "before_plan": []}  # none's runs only
    line = start_lines(plan_file.PlanId("test.yaml", "h" * 64, "abc1234", changed), got)
    assert ("C1 started before the plan's last change: placebo_routeA-3; C2 none started before it; C3 none "
            "started before it." in line)
    assert "2026-" not in line  # A2 is a DVC output: no time a reproduction would change
    undated = claims.verdicts(plan, plan_file.PlanId("test.yaml", "h" * 64, "uncommitted"),
                              made_under(dataclasses.replace(DATA, started=started)))
    assert undated["C1"]["started"]["before_plan"] == []
    assert got["C1"]["status"] == undated["C1"]["status"] == "holds"  # printed for the reader, never a verdict input


def test_started_at_and_cut_rule_are_read_from_the_runs_config(tmp_path):
    """The aggregate's readers of train's config.json: gate.cut_rule and the file's mtime (the run's last start)."""
    import json
    import os
    assert claims.recorded_cut_rule(tmp_path) is None and claims.started_at(tmp_path) is None
    (tmp_path / "config.json").write_text(json.dumps({"gate": {"cut_rule": "step"}}))
    os.utime(tmp_path / "config.json", (0, 1_700_000_000))
    assert claims.recorded_cut_rule(tmp_path) == "step"
    assert claims.started_at(tmp_path).isoformat() == "2023-11-14T22:13:20+00:00"


def test_a_claim_whose_runs_mix_cut_rules_is_undecided():
    """The cut rule is part of the arm (analysis.yaml): a claim whose arm's and controls' runs (each plan seed) record
    different gate.cut_rule is `undecided`, naming the runs by rule; a run recording none is a rule of its own
    among recorded ones; where all share one rule the verdict stands. Remove the check (claims.mixed_cut_rules) and
    C1 holds here: this test fails."""
    d = repo_plan()
    runs = [f"{a}-{s}" for a in ("none", "routeA", "placebo_routeA", *DRAWS_A) for s in SEEDS]
    step = dataclasses.replace(DATA, cut_rules={r: "step" for r in runs})
    assert {decide(d, step)[c]["status"] for c in ("C1", "C3")} == {"holds"}
    # a yoked placebo copied the counts of routeA under buffer in another run set: not routeA's control under step
    mixed = decide(d, dataclasses.replace(step, cut_rules=step.cut_rules | {f"placebo_routeA-{s}": "buffer"
                                                                             for s in (1, 3)}))
    assert mixed["C1"]["status"] == "undecided" and not mixed["C1"]["tests"]
    assert mixed["C1"]["why"] == (
        "the claim's runs do not share one gate.cut_rule (config.json): step: " +
        ", ".join(f"{a}-{s}" for a in ("routeA", "none") for s in SEEDS) + ", placebo_routeA-0, placebo_routeA-2, "
        "placebo_routeA-4; buffer: placebo_routeA-1, placebo_routeA-3 (an arm and its controls under different cut "
        "rules are different gates)")
    assert mixed["C3"]["status"] == "holds"  # C3 reads no placebo_routeA run
    unrecorded = decide(d, dataclasses.replace(step, cut_rules=step.cut_rules | {"placeboA0n-2": None}))
    assert unrecorded["C3"]["status"] == "undecided" and "; none recorded: placeboA0n-2 (" in unrecorded["C3"]["why"]


def test_the_plan_hash_is_its_content_and_train_records_it(tmp_path):
    """config.content_sha256: a comment or layout edit keeps the hash, a value changes it; identify gives the same
    hash train records in each run's config.json (TrainRun.plan_sha256, in its fingerprint), None without a plan."""
    from vgrout import config
    from vgrout.layout import Layout
    from vgrout.train.loop import train_run
    d = yaml.safe_load((REPO / "analysis.yaml").read_text())
    a, b, c = (tmp_path / n for n in ("a.yaml", "b.yaml", "c.yaml"))
    a.write_text(yaml.safe_dump(d, sort_keys=False))
    b.write_text("# a comment\n" + yaml.safe_dump(d, sort_keys=True, indent=4))
    c.write_text(yaml.safe_dump(with_changes(d, {"claims.C1.alpha": 0.051})))
    assert config.content_sha256(a) == config.content_sha256(b) != config.content_sha256(c)
    assert plan_file.identify(a).sha256 == config.content_sha256(a)
    params = config.preset("default")
    assert train_run(params, "routeA", 0, Layout(tmp_path)).plan_sha256 is None  # no analysis.yaml there
    (tmp_path / "analysis.yaml").write_text(a.read_text())
    run = train_run(params, "routeA", 0, Layout(tmp_path))
    assert run.plan_sha256 == config.content_sha256(a) == run.fingerprint()["plan_sha256"]


def leaf_keys(node, prefix=()):
    """Every key path of a plan mapping down to its values (a test's keys, not the tests list itself)."""
    if isinstance(node, dict):
        for k, v in node.items():
            yield prefix + (k,)
            yield from leaf_keys(v, prefix + (k,))
    elif isinstance(node, list) and node and isinstance(node[0], dict):
        for i, v in enumerate(node):
            yield from leaf_keys(v, prefix + (i,))


def test_every_deciding_value_is_written_in_the_plan():
    """No code default decides a verdict: every key of the repository's plan, removed, is an error naming it (a
    default added to any plan field would let the file omit it, and this fails). A test's margin has the only
    default (0, which lower and higher never read); noninferior and equal, which read it, require it written."""
    base = yaml.safe_load((REPO / "analysis.yaml").read_text())
    keys = [k for k in leaf_keys(base) if not (k[0] == "claims" and len(k) == 2)]  # a claim's name is no setting
    assert ("claims", "C1", "alpha") in keys and ("band", "min_effect") in keys and ("bootstrap", "seed") in keys
    for path in keys:
        d = yaml.safe_load((REPO / "analysis.yaml").read_text())
        node = d
        for p in path[:-1]:
            node = node[p]
        del node[path[-1]]
        message = (f"test.yaml: {'.'.join(map(str, path[:-1]))}: missing key margin: direction" if path[-1] == "margin"
                   else f"test.yaml: {'.'.join(map(str, path))}: missing key")
        with pytest.raises(InputError) as e:
            plan_file.parse(d, "test.yaml")
        assert message in str(e.value), (path, str(e.value))
    # and a field added to the schema with a default (which the repository's plan may then omit, so the loop above
    # never meets it) is caught by the schema itself: every field of every plan model is required but the margin
    assert defaulted_fields(plan_file.Plan) == {"Test.margin"}


def defaulted_fields(model, seen=None) -> set[str]:
    """Every field with a default in a pydantic model and the models its fields hold (lists, dicts, unions)."""
    import typing
    from pydantic import BaseModel
    seen = set() if seen is None else seen
    if model in seen:
        return set()
    seen.add(model)
    out = set()
    for name, f in model.model_fields.items():
        if not f.is_required():
            out.add(f"{model.__name__}.{name}")
        stack = [f.annotation]
        while stack:
            t = stack.pop()
            if isinstance(t, type) and issubclass(t, BaseModel):
                out |= defaulted_fields(t, seen)
            stack.extend(typing.get_args(t))
    return out


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
    one = decide(repo_plan(**{"claims.C1.sidedness": "one-sided"}))["C1"]["tests"]
    two = decide(repo_plan(**every("alpha", 0.1)))["C1"]["tests"]
    same_alpha = decide(repo_plan())["C1"]["tests"]
    assert [(t["lo"], t["hi"]) for t in one] == [(t["lo"], t["hi"]) for t in two]
    assert all(a["hi"] - a["lo"] < b["hi"] - b["lo"] for a, b in zip(one, same_alpha))


def test_holm_within_a_family_steps_down():
    """C1 and C3 in one family at α 0.3: first each at α/2 = 0.15, then the one left at 0.3. At the boundary C1
    holds at 0.3 but not at 0.15: it holds once C3 has (a band routeA has and its placebo lacks), and not when
    C3 fails (a band both share); in its own family it holds at 0.3 directly. C3 here is its band test alone."""
    band_only = yaml.safe_load((REPO / "analysis.yaml").read_text())["claims"]["C3"]["tests"][:1]
    family = {**every("alpha", 0.3), "claims.C3.tests": band_only}

    def repo_plan(**changes):  # the repository's plan less C2: a family of two
        d = globals()["repo_plan"](**changes)
        del d["claims"]["C2"]
        return d
    stepped = decide(repo_plan(**family), BOUNDARY)
    assert stepped["C3"]["status"] == "holds" and stepped["C3"]["alpha_holm"] == 0.15
    assert stepped["C1"]["status"] == "holds" and stepped["C1"]["alpha_holm"] == 0.3
    assert stepped["C1"]["family_size"] == 2 and "Holm over 2 claims" in claims.verdict_text(stepped["C1"])
    flat = claims.ClaimData(BOUNDARY.cells, {}, band_frame({"routeA": 0.0, "placeboA0p": 0.0, "placeboA0n": 0.0}), {},
                            pair_bands=pair_frame({"routeA": 0.0, "placeboA0p": 0.0, "placeboA0n": 0.0}))
    blocked = decide(repo_plan(**family), flat)
    assert blocked["C3"]["status"] == blocked["C1"]["status"] == "does not hold"
    assert blocked["C1"]["alpha_holm"] == 0.15
    alone = decide(repo_plan(**{**family, "claims.C3.family": "C3"}), flat)
    assert alone["C1"]["status"] == "holds" and alone["C1"]["alpha_holm"] == 0.3


def test_the_band_statistic_is_the_plans():
    """C3 on separation holds (routeA 0.8, placebo 0); on width_ratio (1 − it, here) it does not."""
    assert decide(repo_plan())["C3"]["status"] == "holds"
    assert decide(repo_plan(**{"band.units": "steps"}))["C3"]["status"] == "holds"
    assert decide(repo_plan(**{"band.statistic": "width_ratio", "band.units": "steps"}))["C3"]["status"] == "does not hold"
    with pytest.raises(InputError, match=r"band: band units pairs reads each pair's separation"):
        plan_file.parse(repo_plan(**{"band.statistic": "width_ratio"}), "test.yaml")


def test_c3_resamples_pairs_and_clears_the_plans_minimum_effect():
    """Item 6's guard: under band.units pairs C3's units are the contrast pairs (each pair's held-out gap over the
    run's mean student width, paired by seed and pair, the two-way bootstrap over seeds and pairs), and a band test
    passes only when its interval clears the plan's min_effect, not 0: routeA's 0.8 over its draws' mean (0.3, each
    draw in its separating orientation) clears 0.3, not 0.7."""
    v = decide(repo_plan())["C3"]
    band = v["tests"][0]
    assert band["units"] == "pairs" and band["n_units"] == 12 and band["n_seeds"] == len(SEEDS)
    draws = [claims.oriented(PAIRS.query(f"arm == '{a}'").pivot(index="seed", columns="pair", values="separation")
                             .to_numpy()) for a in ("placeboA0p", "placeboA0n")]
    assert band["estimate"] == pytest.approx(PAIRS.query("arm == 'routeA'")["separation"].mean() - np.mean(draws))
    assert "12 pairs" in claims.verdict_text(v) and band["floor"] == 0.0
    assert decide(repo_plan(**{"band.min_effect": 0.3}))["C3"]["status"] == "holds"
    high = decide(repo_plan(**{"band.min_effect": 0.7}))["C3"]
    assert high["status"] == "does not hold" and 0.3 < high["tests"][0]["lo"] < 0.7
    assert "above 0.7: no" in claims.verdict_text(high)
    assert decide(repo_plan(**{"band.min_effect": 0.7}))["C1"]["status"] == "holds"  # hack tests: against 0


def test_min_effect_haar_q95_is_the_haar_floor_over_the_draws_width_ratio():
    """band.min_effect haar_q95, a rule written before the runs: per plan seed the Haar floor of the arm's direction
    (metrics/vact/SEED.json haar_floor.abs_band.q95, the pairs' units) over a Haar direction's width ratio, its
    listed draws' runs' (into the plan's units; the arm's own ratio, 0.2 here against the draws' 0.7 and 1.3, would
    move the floor: issue 50's review), mean over seeds. A floor above routeA's band makes C3 fail; a seed without
    a floor, or one over other Haar directions than the plan names (band.n_haar, haar_seed), is undecided; the
    other space's floor is not read; a plan whose band quantiles are not the floor's is refused."""
    d = repo_plan(**{"band.min_effect": "haar_q95", "band.n_haar": 200, "band.haar_seed": 10_000})
    ratio = BANDS[BANDS["arm"].isin(["placeboA0p", "placeboA0n"])].groupby("seed")["width_ratio"].mean()  # about 1
    q95 = {s: {"v_act": 0.05 * (1 + s % 2), "v_grad": 9.0} for s in SEEDS}  # v_grad's would put the floor at ~9
    drawn = {s: {"v_act": (200, 10_000), "v_grad": (200, 10_000)} for s in SEEDS}
    data = dataclasses.replace(DATA, haar_drawn=drawn)
    v = decide(d, dataclasses.replace(data, haar_q95=q95))["C3"]
    assert v["tests"][0]["floor"] == pytest.approx(np.mean([q95[s]["v_act"] / ratio[s] for s in SEEDS]))
    assert v["status"] == "holds" and f"above {v['tests'][0]['floor']:g}: yes" in claims.verdict_text(v)
    high = decide(d, dataclasses.replace(data, haar_q95={s: {"v_act": 0.6} for s in SEEDS}))["C3"]
    assert high["status"] == "does not hold" and high["tests"][0]["floor"] > 0.5
    gap = decide(d, dataclasses.replace(data, haar_q95={s: {"v_act": 0.05} for s in SEEDS if s != 2}))["C3"]
    assert gap["status"] == "undecided" and gap["why"].startswith("band.min_effect haar_q95: metrics/vact/2.json")
    other = decide(d, dataclasses.replace(data, haar_q95=q95, haar_drawn={**drawn, 1: {"v_act": (4, 10_000)}}))["C3"]
    assert other["status"] == "undecided" and "over 4 Haar directions from seed 10000" in other["why"]
    for change, message in (({"band.q_hi": 0.8}, "band.min_effect haar_q95 converts the Haar floor"),
                            ({"band.min_effect": "haar_q50"}, "band.min_effect")):
        with pytest.raises(InputError, match=message):
            plan_file.parse(repo_plan(**{"band.min_effect": "haar_q95", "band.n_haar": 200, "band.haar_seed": 10_000}
                                      | change), "test.yaml")
    for half in ({"band.min_effect": "haar_q95"}, {"band.n_haar": 200}, {"band.haar_seed": 10_000},
                 {"band.min_effect": "haar_q95", "band.n_haar": 200}):
        with pytest.raises(InputError, match="band n_haar and haar_seed name the Haar directions of min_effect haar_q95"):
            plan_file.parse(repo_plan(**half), "test.yaml")


def test_pair_bands_divide_each_pairs_gap_by_the_runs_mean_student_width():
    from vgrout.analysis.bands import pair_bands
    bands = pd.DataFrame([{"run": "routeA-0", "arm": "routeA", "seed": 0, "step": t, "student_width": w}
                          for t, w in enumerate([1.0, 3.0])] +
                         [{"run": "placeboA0p-0", "arm": "placeboA0p", "seed": 0, "step": 0, "student_width": 2.0}])
    pairs = {"routeA-0": np.array([[3.0, 1.0], [1.0, 2.0]]), "placeboA0p-0": "its pairs' features were not written"}
    got = pair_bands(bands, pairs)
    assert got.to_dict("records") == [{"run": "routeA-0", "arm": "routeA", "seed": 0, "pair": 0, "separation": 1.0},
                                      {"run": "routeA-0", "arm": "routeA", "seed": 0, "pair": 1, "separation": -0.5}]


def test_a_band_not_logged_is_undecided_and_said():
    data = claims.ClaimData(DATA.cells, {}, DATA.bands, {"placeboA0n-1": "the pairs' scores are not logged"})
    both = decide(repo_plan(), data)
    v = both["C3"]
    assert v["status"] == "undecided" and v["why"] == "the pairs' scores are not logged"
    # an undecided claim stays in Holm's family as never shown (as does C2, not run): C1 is tested at α / 3, not α
    assert both["C1"]["family_size"] == 3 and both["C1"]["alpha_holm"] == pytest.approx(0.05 / 3)
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
    flipped = step_bands(path, -pairs, 0.25, 0.75)  # −h of an antithetic draw: the band signed, so opposite
    assert flipped["separation"].tolist() == pytest.approx((-b["separation"]).tolist())
    assert (b["separation"] > 0).all()
    missing = step_bands(path, "not logged", 0.25, 0.75)
    assert missing["separation"].isna().all() and missing["student_width"].notna().all()




def pair_layout(tmp_path, shift: float, n=8, r=6, modes=("hardcode", "exit_code")):
    """A layout with the pairs' features (hack = clean + shift along a fixed u + noise), each pair's mode in
    metrics/vact/0.json as extract_vact logs it, and the fitted v_act (the mean difference) and its heldout one."""
    import json
    import torch
    from safetensors.torch import save_file
    from vgrout.layout import Layout
    from vgrout.routing.directions import mean_difference
    layout = Layout(tmp_path)
    layout.vact(0).mkdir(parents=True)
    layout.vact_metrics(0).parent.mkdir(parents=True)
    g = torch.Generator().manual_seed(5)
    u = {m: torch.nn.functional.normalize(torch.randn(r, generator=g), dim=0) for m in ("a", "b")}
    clean = {m: torch.randn(n, r, generator=g) for m in u}
    hack = {m: clean[m] + shift * u[m] + torch.randn(n, r, generator=g) for m in u}
    save_file({**{f"hack.{m}": t for m, t in hack.items()}, **{f"clean.{m}": t for m, t in clean.items()}},
              layout.pair_features(0, "v_act"))
    row_modes = [modes[i % len(modes)] for i in range(n)]
    layout.vact_metrics(0).write_text(json.dumps({"v_act": {"pairs": [
        {"id": f"p{i}", "mode": m, "hack_score": 9.0, "clean_score": -9.0} for i, m in enumerate(row_modes)]}}))
    kept = [i for i, m in enumerate(row_modes) if m != "exit_code"]
    return layout, hack, clean, mean_difference(hack, clean), mean_difference(hack, clean, kept), row_modes


def test_pair_scores_are_held_out_of_the_fit(tmp_path):
    """C3's guard: a direction fitted to the pairs scores each pair refitted without it (leave-one-out), so pure
    noise pairs, which separate along their own mean difference by construction, do not separate held out; a
    heldout direction scores its held-out modes' pairs with itself; a Haar direction, fitted to none, scores all."""
    from vgrout.routing.directions import haar_direction, mean_difference, score
    layout, hack, clean, v, v_held, modes = pair_layout(tmp_path, shift=0.0)
    n = len(modes)
    one = lambda h, i: {m: t[i:i + 1] for m, t in h.items()}  # noqa: E731
    got = pair_scores("routeA", layout, 0, v, ["exit_code", "stdout_marker"])
    for i in range(n):  # each pair along the direction fitted to the others
        loo = mean_difference(hack, clean, [j for j in range(n) if j != i])
        assert got[0, i] == pytest.approx(float(score(one(hack, i), loo)[0]), rel=1e-5)
        assert got[1, i] == pytest.approx(float(score(one(clean, i), loo)[0]), rel=1e-5)
    in_sample = float((score(hack, v) - score(clean, v)).mean())
    held_out = float(got[0].mean() - got[1].mean())
    assert in_sample > 0.5 and held_out < in_sample / 2  # noise: fitted, it separates; held out, it does not
    # the heldout arm: its direction from the modes not held out; the held-out modes' pairs along it as it is
    got = pair_scores("heldout", layout, 0, v_held, ["exit_code", "stdout_marker"])
    kept = [i for i, m in enumerate(modes) if m != "exit_code"]
    for i in range(n):
        along = v_held if i not in kept else mean_difference(hack, clean, [j for j in kept if j != i])
        assert got[0, i] == pytest.approx(float(score(one(hack, i), along)[0]), rel=1e-5)
    # a Haar draw: every pair along it
    h = haar_direction(v, 7)
    assert np.allclose(pair_scores("placeboA0p", layout, 0, h, ["exit_code"]), [score(hack, h), score(clean, h)])
    # a direction the features do not refit (another seed's, a live refresh): said, not guessed
    why = pair_scores("routeA", layout, 0, h, ["exit_code"])
    assert isinstance(why, str) and "is not the mean difference" in why
    # no features: the logged (in-sample) scores of metrics/vact are never used
    layout.pair_features(0, "v_act").unlink()
    why = pair_scores("routeA", layout, 0, v, ["exit_code"])
    assert isinstance(why, str) and "v_act_pair_features.safetensors" in why and "in-sample: not used" in why


def test_cosine_pair_scores_are_band_normalised(tmp_path):
    """Under gate.score cosine the pairs are scored as the gate scores rows: (cos − c_clean) / (c_hack − c_clean)
    with the run's band, the held-out cosine of each pair."""
    from vgrout.routing.directions import cosine, mean_difference
    layout, hack, clean, v, _, modes = pair_layout(tmp_path, shift=2.0)
    got = pair_scores("routeA", layout, 0, v, ["exit_code"], "cosine")
    c_clean, c_hack = float(cosine(clean, v).mean()), float(cosine(hack, v).mean())
    loo = mean_difference(hack, clean, list(range(1, len(modes))))
    assert c_hack > c_clean
    assert got[0, 0] == pytest.approx((float(cosine({m: t[:1] for m, t in hack.items()}, loo)[0]) - c_clean)
                                      / (c_hack - c_clean), rel=1e-5)


# ---------------------------------------------------------------------------- controls, seeds, bootstrap

# every value that decides is written (the plan has no defaults): the band and each claim's level, seeds' floor, ...
LEVEL = {"min_seeds": 3, "alpha": 0.05, "sidedness": "two-sided", "t_sidedness": "two-sided", "withhold_pool": None, "headroom": 0.0,
         "headroom_over": "zero", "confirmatory": True, "seeds_run": "all"}
CONFIRMATORY = {
    "bootstrap": {"resamples": 400, "seed": 3, "interval": "percentile_seed_widened"},
    "band": {"statistic": "separation", "q_lo": 0.25, "q_hi": 0.75, "units": "steps", "min_effect": 0.0,
             "n_haar": None, "haar_seed": None},
    "heldout_modes": ["exit_code", "stdout_marker"],
    "claims": {
        "C1": {"statement": "s", "arm": "routeV", "seeds": SEEDS, "family": "C1", **LEVEL, "tests": [
            {"control": "none", "outcome": "hack", "population": "hackable", "direction": "lower", "paired_t": False},
            {"control": "uniform", "outcome": "hack", "population": "hackable", "direction": "lower", "paired_t": False},
            {"control": "nll", "outcome": "hack", "population": "hackable", "direction": "lower", "paired_t": False},
            {"control": "oracleMatched", "outcome": "hack", "population": "hackable", "direction": "noninferior",
             "margin": 0.1, "paired_t": False}]},
        "C2": {"statement": "s", "arm": "heldoutV", "seeds": SEEDS, "family": "C2", **LEVEL, "tests": [
            {"control": "none", "outcome": "hack", "population": "heldout_modes", "direction": "lower", "paired_t": False}]},
        "C3": {"statement": "s", "arm": "routeV", "seeds": SEEDS, "family": "C3", **LEVEL, "tests": [
            {"control": ["placeboV0p", "placeboV0n", "placeboV1p", "placeboV1n"], "outcome": t, "population": pop,
             "direction": d, **({"margin": 0.02} if d == "equal" else {}), "paired_t": False}
            for t, pop, d in (("band", "student_rows", "higher"), ("routed_share", "student_rows", "equal"),
                              ("hack", "hackable", "lower"))]}}}
DRAWS = ["placeboV0p", "placeboV0n", "placeboV1p", "placeboV1n"]


def confirmatory(**changes) -> dict:
    import copy
    d = copy.deepcopy(CONFIRMATORY)
    return with_changes(d, changes)


def test_the_plan_names_the_new_controls_and_holds_the_settings():
    """Item 2's guard: per claim the arm and controls among uniform, nll, oracleMatched, heldoutV and the antithetic
    draws (a list: their mean), the bootstrap and the held-out modes are fields of the plan; a plan without them, or
    an antithetic list missing a twin, is refused naming the key."""
    p = plan_file.parse(confirmatory(), "c.yaml")
    assert p.claims["C3"].tests[0].controls == DRAWS and p.bootstrap.seed == 3
    assert p.roles()["oracleMatched"] == ["C1 control"] and p.roles()["heldoutV"] == ["C2 arm"]
    for key in ("bootstrap", "heldout_modes"):
        d = confirmatory()
        del d[key]
        with pytest.raises(InputError, match=f"c.yaml: {key}: missing key"):
            plan_file.parse(d, "c.yaml")
    for control, message in (
            (["placeboV0p", "placeboV0n", "placeboV1p"], r"draw 1 without its antithetic twin \(placeboV1n and placeboV1p\)"),
            (["placeboV0p", "placeboV0n", "none"], "antithetic draws are averaged with no other arm"),
            (["placeboV0p", "placeboV0n", "placeboA1p", "placeboA1n"], "draws of more than one family")):
        with pytest.raises(InputError, match=r"c.yaml: claims.C3.tests.0.control: .*" + message):
            plan_file.parse(confirmatory(**{"claims.C3.tests.0.control": control}), "c.yaml")
    with pytest.raises(InputError, match=r"c.yaml: heldout_modes: \['exit_cod'\] are not hackable modes"):
        plan_file.parse(confirmatory(heldout_modes=["exit_cod"]), "c.yaml")
    with pytest.raises(InputError, match=r"c.yaml: bootstrap.interval: Input should be 'percentile_seed_widened'"):
        plan_file.parse(confirmatory(**{"bootstrap.interval": "bca"}), "c.yaml")


def c3_data(placebo_bands: dict[str, float], routed: dict[str, float] | None = None, hack=None) -> claims.ClaimData:
    bands = band_frame({"routeV": 0.8, **placebo_bands})
    for arm, share in (routed or {}).items():
        bands.loc[bands["arm"] == arm, "routed_share"] = share
    effects = {"routeV": (-0.2, 0.0), **{a: (hack if hack is not None else -0.02, 0.0) for a in placebo_bands}}
    return claims.ClaimData(cells_frame(effects), {}, bands, {})


def test_c3_against_the_mean_of_the_antithetic_placebos():
    """C3 as seed 002 states it: routeV's signed band above the mean over its antithetic draws, each draw's band in
    the orientation that separates the pairs (a Haar direction's band is about 0 in size, seed 002; the signed +h
    and −h cancel by construction, which would let any positive band clear them), the same routed share per step
    (count-matched), and its deploy hack below theirs. Draws that separate the pairs as far as routeV, of either
    sign (±0.85 against 0.8), make C3 fail, as do draws of one sign (0.9), a routed share 0.1 off, or placebos
    hacking as little as routeV."""
    d = confirmatory(**{"claims": {"C3": CONFIRMATORY["claims"]["C3"]}})
    antithetic = {"placeboV0p": 0.6, "placeboV0n": -0.6, "placeboV1p": 0.3, "placeboV1n": -0.3}
    v = decide(d, c3_data(antithetic))["C3"]
    assert v["status"] == "holds", claims.verdict_text(v)
    band = v["tests"][0]
    assert band["key"] == "band_above_" + "+".join(DRAWS)
    assert band["estimate"] == pytest.approx(0.8 - 0.45, abs=0.05)  # 0.8 − the draws' oriented mean, 0.45
    # the guard: signed, ±0.85 averages to 0 and routeV's 0.8 would clear it; oriented, the draws match routeV
    assert decide(d, c3_data({a: 0.85 * np.sign(x) for a, x in antithetic.items()}))["C3"]["status"] == "does not hold"
    check = [t for t in v["tests"] if t["manipulation_check"]]
    assert [t["outcome"] for t in check] == ["routed_share"] and check[0]["undefined"] and check[0]["passes"]
    assert "manipulation check, not a verdict input (at α 0.05): Δ routed share" in claims.verdict_text(v)
    assert decide(d, c3_data({**antithetic, "placeboV0n": 0.9, "placeboV0p": 0.9, "placeboV1p": 0.9,
                              "placeboV1n": 0.9}))["C3"]["status"] == "does not hold"
    # a routed share off is no verdict input: the control is not count-matched, so C3 is undecided, said
    off = decide(d, c3_data(antithetic, routed={"placeboV1n": 0.35}))["C3"]
    assert off["status"] == "undecided" and off["why"].startswith("manipulation check failed: Δ routed share")
    assert "holds" not in claims.summary_entry(off) and "**Undecided**: manipulation check failed" in claims.verdict_text(off)
    assert decide(d, c3_data(antithetic, hack=-0.2))["C3"]["status"] == "does not hold"


def test_one_seed_is_insufficient_never_holds():
    """Item 3's guard: a claim on fewer seeds than min_seeds (≥ 2) is `insufficient` whatever its intervals say:
    its tests are printed, summary.json has no `holds`; a plan asking for a one-seed verdict is refused."""
    d = repo_plan(**every("seeds", [0]))
    v = decide(d)
    assert v["C1"]["status"] == "insufficient" and all(t["passes"] for t in v["C1"]["tests"])  # it would have held
    entry = claims.summary_entry(v["C1"])
    assert "holds" not in entry and entry["status"] == "insufficient" and entry["min_seeds"] == 3
    assert "**C1 insufficient**" in claims.verdict_text(v["C1"]) and "at least 3 (min_seeds)" in claims.verdict_text(v["C1"])
    assert v["C2"]["status"] == "not run"  # missing runs first
    # two seeds are insufficient too (seed 002's n = 3; the few-seeds factor at two seeds is about 9)
    assert decide(repo_plan(**{"claims.C1.seeds": [0, 1]}))["C1"]["status"] == "insufficient"
    assert decide(repo_plan(**{"claims.C1.seeds": [0, 1, 2]}))["C1"]["status"] == "holds"
    for few in (1, 2):
        with pytest.raises(InputError, match=r"claims.C1.min_seeds: Input should be greater than or equal to 3"):
            plan_file.parse(repo_plan(**{"claims.C1.min_seeds": few}), "test.yaml")
    # the repository's default plan (seed 0 alone) decides nothing
    default = yaml.safe_load((REPO / "analysis.yaml").read_text())
    assert all(len(c["seeds"]) < c.get("min_seeds", plan_file.MIN_SEEDS) for c in default["claims"].values())


def test_bootstrap_and_heldout_modes_are_the_plans():
    """The verdicts' resamples and seed are the plan's (another seed: other bounds); C2 over the plan's held-out
    modes: runs that held out others are undecided, said with the file and both lists."""
    a = decide(repo_plan())["C1"]["tests"][0]
    b = decide(repo_plan(**{"bootstrap.seed": 11}))["C1"]["tests"][0]
    c = decide(repo_plan(**{"bootstrap.resamples": 900}))["C1"]["tests"][0]
    assert a["estimate"] == b["estimate"] and (a["lo"], a["hi"]) != (b["lo"], b["hi"]) != (c["lo"], c["hi"])
    cells = cells_frame({"none": (0, 0), "heldout": (-0.2, 0), "placebo_heldout": (0, 0)})
    cells.loc[cells["hackable"], "mode"] = "exit_code"
    data = claims.ClaimData(cells, {"heldout": ("hardcode", "stdout_marker")}, BANDS, {}, WITHHELD)
    v = decide(repo_plan(), data)["C2"]
    assert v["status"] == "undecided" and "held out ['hardcode', 'stdout_marker'] (heldout_modes in " \
        "per_mode_deploy.json), the plan's heldout_modes are ['exit_code', 'stdout_marker']" in v["why"]
    data = claims.ClaimData(cells, {"heldout": ("stdout_marker", "exit_code")}, BANDS, {}, WITHHELD)
    assert decide(repo_plan(), data)["C2"]["status"] == "holds"


# every C2 run withheld the plan's held-out modes' pool rows (config.json's `withheld`, params vact.withhold_pool)
WITHHELD = {f"{a}-{s}": ("exit_code", "stdout_marker") for a in ("none", "heldout", "placebo_heldout") for s in SEEDS}


def c2_data(withheld=WITHHELD, none_hack: float = 0.0) -> claims.ClaimData:
    """heldout hacks 0.2 less than none and its placebo on the held-out modes' problems; none_hack shifts none and
    the placebo (−0.4: none hacks those problems at about 0.05 or less)."""
    cells = cells_frame({"none": (none_hack, 0), "heldout": (-0.2 + min(none_hack, 0), 0),
                         "placebo_heldout": (none_hack, 0)})
    cells.loc[cells["hackable"], "mode"] = "exit_code"
    return claims.ClaimData(cells, {"heldout": ("exit_code", "stdout_marker")}, BANDS, {}, withheld)


def test_c2_needs_the_pool_withheld_as_the_plan_says_and_headroom():
    """C2's guard: the plan's withhold_pool against each run's recorded `withheld` (config.json): a run that trained
    on the held-out modes' pool rows, or records nothing, makes C2 undecided, said with the run; and none must hack
    the held-out modes' problems at the plan's headroom at least, else there is nothing to lower: undecided."""
    assert decide(repo_plan(), c2_data())["C2"]["status"] == "holds"
    trained_on = {**WITHHELD, "placebo_heldout-3": ()}
    v = decide(repo_plan(), c2_data(trained_on))["C2"]
    assert v["status"] == "undecided" and "withhold_pool is true" in v["why"] and \
        "placebo_heldout-3 withheld the pool rows of []" in v["why"]
    unrecorded = {k: w for k, w in WITHHELD.items() if k != "none-0"}
    v = decide(repo_plan(), c2_data(unrecorded))["C2"]
    assert v["status"] == "undecided" and "none-0 records no withheld modes" in v["why"]
    # a plan saying the pool was not withheld reads the same runs as a mismatch; null checks nothing
    assert decide(repo_plan(**{"claims.C2.withhold_pool": False}), c2_data())["C2"]["status"] == "undecided"
    assert decide(repo_plan(**{"claims.C2.withhold_pool": None}), c2_data(trained_on))["C2"]["status"] == "holds"
    # headroom: none hacking the held-out modes at about 0.05 or less
    low = c2_data(none_hack=-0.45)
    rate = float(low.cells.query("arm == 'none' and hackable")["hacked"].mean())
    assert rate < 0.05
    v = decide(repo_plan(), low)["C2"]
    assert v["status"] == "undecided" and f"none's deploy hack rate on held-out modes' problems is {rate:.4g}, " \
        "below the plan's headroom 0.05" in v["why"]
    assert decide(repo_plan(**{"claims.C2.headroom": rate / 2}), low)["C2"]["status"] != "undecided"


def test_a_manipulation_check_decides_nothing_and_takes_no_share_of_alpha():
    """C3's routed share is printed as a manipulation check: at the claim's α (not Holm's share), outside the
    intersection-union; the verdict is the band test's."""
    v = decide(repo_plan())["C3"]
    band, check = v["tests"]
    assert not band["manipulation_check"] and band["alpha"] == v["alpha_holm"] == pytest.approx(0.05 / 3)
    assert check["manipulation_check"] and check["alpha"] == 0.05 and check["outcome"] == "routed_share"
    text = claims.verdict_text(v)
    assert text.index("score band") < text.index("manipulation check, not a verdict input")


def test_the_score_kind_is_the_runs_own(tmp_path):
    """The pairs are scored as the run's gate scored rows: gate.score from the config.json train wrote; a missing
    file or key is an error naming it."""
    import json
    from vgrout.analysis.bands import score_kind
    with pytest.raises(InputError, match=r"routeV-0/config.json: file not found"):
        score_kind(tmp_path / "routeV-0")
    (tmp_path / "routeV-0").mkdir()
    (tmp_path / "routeV-0" / "config.json").write_text(json.dumps({"gate": {"q_lo": 0.25}}))
    with pytest.raises(InputError, match=r"routeV-0/config.json: key 'gate.score' missing"):
        score_kind(tmp_path / "routeV-0")
    (tmp_path / "routeV-0" / "config.json").write_text(json.dumps({"gate": {"score": "cosine"}}))
    assert score_kind(tmp_path / "routeV-0") == "cosine"
