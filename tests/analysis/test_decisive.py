"""The decisive experiment's run preset (presets/decisive.yaml, decisive_secondary.yaml) and its pre-registered plan
(plans/decisive.yaml, issue 51): the two name the same arms and seeds; the preset is the pilot's `real` but for the
design's keys; and the plan's three rules the earlier schema lacked decide as written: the paired t over seeds
(Test.paired_t), the failed-run rule (Claim.headroom_over base) and the exploratory secondary family
(Claim.confirmatory false). Synthetic records, no pipeline; and the decisive record's C1 decided again from its
committed files (verify_c1.py), shown able to fail."""
import copy
from pathlib import Path

import numpy as np
import pytest
import yaml

from tests.analysis.test_plan import cells_frame
from vgrout import config
from vgrout.analysis import claims
from vgrout.analysis import plan as plan_file
from vgrout.analysis.contrasts import _seed_sampling_var, matrix
from vgrout.arms import BASE
from vgrout.io import InputError
from vgrout.stats import paired_t

REPO = Path(__file__).parents[2]
PLAN = REPO / "plans" / "decisive.yaml"
SEEDS = list(range(100, 106))  # issue 51's fresh seeds


def drift(params: config.Params, plan: plan_file.Plan) -> list[str]:
    """How a preset and the plan disagree: C1's arm and controls must be exactly the arms the preset trains, and
    every claim's seeds the preset's seeds (issue 51: 100-105)."""
    c1 = plan.claims["C1"]
    named = {c1.arm, *(x for t in c1.tests for x in t.controls)}
    out = [] if named == set(params.train.arms) else [f"C1 names {sorted(named)}, the preset trains "
                                                      f"{sorted(params.train.arms)}"]
    out += [f"{n} seeds {c.seeds}, the preset's {params.train.seeds}" for n, c in plan.claims.items()
            if c.seeds != params.train.seeds]
    return out


def test_the_plan_names_what_the_preset_trains():
    """C1's arms are exactly presets/decisive.yaml's train.arms, every claim's seeds its train.seeds (100-105); the
    secondary preset trains every arm any claim names. drift catches a preset or plan edited alone (below)."""
    params, plan = config.preset("decisive"), plan_file.load(PLAN)
    assert params.train.seeds == SEEDS and plan.claims["C1"].seeds == SEEDS
    assert drift(params, plan) == []
    named = {a for c in plan.claims.values() for a in [c.arm, *(x for t in c.tests for x in t.controls)]}
    assert named == set(config.preset("decisive_secondary").train.arms)
    # the guard bites: a preset that dropped uniform, or ran seeds 0-5, disagrees with the plan
    fewer = params.model_copy(update={"train": params.train.model_copy(update={"arms": ["none", "routeV"]})})
    assert drift(fewer, plan) == ["C1 names ['none', 'routeV', 'uniform'], the preset trains ['none', 'routeV']"]
    other = params.model_copy(update={"train": params.train.model_copy(update={"seeds": list(range(6))})})
    assert len(drift(other, plan)) == len(plan.claims)


def flat(d: dict, prefix: str = "") -> dict:
    return {k2: v2 for k, v in d.items()
            for k2, v2 in (flat(v, f"{prefix}{k}.").items() if isinstance(v, dict) else [(prefix + k, v)])}


def test_decisive_is_the_real_preset_but_for_the_designs_keys():
    """Issue 51: the pilot's `real` preset unchanged (training problems, lengths, group, lr, pool, mix, teacher zone
    keep) but the arms, the seeds, the step rule the count-matched control needs and the evaluation's samples; the
    secondary preset differs from it in train.arms alone, the primary arms first."""
    real, decisive = flat(config.preset("real").model_dump()), flat(config.preset("decisive").model_dump())
    assert {k for k in real if real[k] != decisive[k]} == {
        "preset", "train.arms", "train.seeds", "gate.cut_rule", "eval.n_samples", "eval.curve_n_samples"}
    assert decisive["gate.teacher_zone"] == "keep" and decisive["gate.score"] == "dot"
    assert decisive["gate.cut_rule"] == "step" and decisive["eval.n_samples"] == 4
    secondary = flat(config.preset("decisive_secondary").model_dump())
    assert {k for k in real if secondary[k] != decisive[k]} == {"preset", "train.arms"}
    assert secondary["train.arms"][:3] == decisive["train.arms"] == ["none", "routeV", "uniform"]
    assert secondary["train.arms"][3:] == ["routeA", "placeboV1p", "placeboV1n", "nll"]  # issue 51's order
    # uniform is count-matched only under the step rule: the preset without it is refused
    over = yaml.safe_load((REPO / "presets" / "decisive.yaml").read_text())
    del over["gate"]["cut_rule"]
    with pytest.raises(InputError, match=r"\['uniform'\] need gate.cut_rule step"):
        config.parse(config.overlay(config.Params().model_dump(), over), "decisive.yaml", complete=False)


# ---------------------------------------------------------------------------- the plan's rules, on synthetic runs

H = "h" * 64


def plan_dict(**claim_changes) -> dict:
    """The decisive plan as a mapping, 400 resamples; claim_changes: {"C1": {"seeds": [...]}, ...}."""
    d = yaml.safe_load(PLAN.read_text())
    d["bootstrap"]["resamples"] = 400
    for name, change in claim_changes.items():
        d["claims"][name] |= change
    return d


def runs(effects: dict, base_hack: float | None = -0.3, seeds=SEEDS) -> claims.ClaimData:
    """Deploy cells of each arm (Δ hack, Δ solve from a shared problem difficulty, hack 0.3-0.6), and the base
    model's (one run, no seed) at base_hack from that difficulty; every run made under plan hash H."""
    import pandas as pd
    cells = cells_frame(effects, seeds=seeds)
    if base_hack is not None:
        base = cells_frame({BASE: (base_hack, 0.0)}, seeds=[0])
        cells = pd.concat([cells, base.assign(seed=np.nan)], ignore_index=True)
    hashes = {f"{a}-{s}": H for a in effects for s in seeds}
    return claims.ClaimData(cells, {}, pd.DataFrame(columns=["arm", "seed", "step"]), {}, plan_hashes=hashes)


def decide(d: dict, data: claims.ClaimData) -> dict:
    return claims.verdicts(plan_file.parse(d, "decisive.yaml"), plan_file.PlanId("decisive.yaml", H, "x"), data)


ROUTES = {"none": (0.0, 0.0), "routeV": (-0.2, -0.01), "uniform": (-0.02, 0.0)}


def test_a_grid_cut_short_is_decided_on_its_leading_seeds_and_a_gap_is_not_run():
    """seeds_run leading (issue 50's review: five seeds if the third budget is refused, known only mid-grid): with
    seeds 100-104 run, C1 is decided on those five; with 105 run and 102 not, the leading run is two seeds, below
    min_seeds 5, so C1 is `not run` (a seed left out by choice cannot shrink the set); under seeds_run all, five of six
    is `not run`."""
    five = runs(ROUTES, seeds=SEEDS[:5])
    v = decide(plan_dict(), five)["C1"]
    assert v["status"] == "holds" and v["seeds"] == SEEDS[:5] and v["tests"][0]["n_seeds"] == 5
    assert "seeds 100 101 102 103 104 (the leading seeds that ran of 100 101 102 103 104 105)" in claims.verdict_text(v)
    gap = runs(ROUTES, seeds=[s for s in SEEDS if s != 102])
    assert decide(plan_dict(), gap)["C1"]["status"] == "not run"
    assert decide(plan_dict(C1={"seeds_run": "all"}), five)["C1"]["status"] == "not run"


def test_c1_holds_by_both_the_bootstrap_and_the_paired_t():
    """routeV 0.2 below none and 0.18 below uniform on every seed: both of C1's hack tests pass by the bootstrap's 95%
    one-sided bound and by the paired t, whose one-sided p is contrasts' t (SEM floored at the sampling variance)
    halved; the solve test (paired_t false) carries no t."""
    data = runs(ROUTES)
    v = decide(plan_dict(), data)["C1"]
    assert v["status"] == "holds", claims.verdict_text(v)
    assert v["family_size"] == 1 and v["alpha_holm"] == 0.05 and v["sidedness"] == "two-sided" and v["t_sidedness"] == "one-sided"
    vs_uniform, vs_none, solve = v["tests"]
    x, r = (matrix(data.cells, a, SEEDS, "hack_hackable").to_numpy() for a in ("routeV", "uniform"))
    var = sum(_seed_sampling_var(data.cells, a, SEEDS, "hack_hackable", m) for a, m in (("routeV", x), ("uniform", r)))
    direct = paired_t(x.mean(axis=1), r.mean(axis=1), sampling_var=var)
    assert direct.t < 0 and vs_uniform["p_t"] == pytest.approx(direct.p / 2)
    assert vs_uniform["t_passes"] and vs_none["t_passes"] and "t_passes" not in solve
    assert "paired t over seeds t(5)=" in claims.verdict_text(v)
    assert claims.summary_entry(v)["hack_below_uniform_p_t"] == pytest.approx(direct.p / 2)


def test_the_paired_t_decides_where_the_plan_asks_for_it():
    """The guard of paired_t: on four seeds (min_seeds lowered to 3) the paired t has no p (stats: fewer than 5
    seeds), so a test asking for it fails though its bootstrap bound passes, and C1 does not hold; the same plan
    with paired_t false holds. A claims._test that ignored paired_t would make both hold: this test fails."""
    four = SEEDS[:4]
    data = runs(ROUTES, seeds=four)
    asks = decide(plan_dict(C1={"seeds": four, "min_seeds": 3}), data)["C1"]
    assert asks["status"] == "does not hold"
    t = asks["tests"][0]
    assert t["bootstrap_passes"] and not t["t_passes"] and not t["passes"] and t["p_t"] is None
    d = plan_dict(C1={"seeds": four, "min_seeds": 3})
    for test in d["claims"]["C1"]["tests"]:
        test["paired_t"] = False
    assert decide(d, data)["C1"]["status"] == "holds"
    # and the t's direction is the test's: routeV above uniform is no evidence it is below
    up = decide(plan_dict(), runs({**ROUTES, "uniform": (-0.3, 0.0)}))["C1"]
    assert up["status"] == "does not hold" and up["tests"][0]["p_t"] > 0.5


def test_a_none_that_did_not_learn_to_hack_is_a_failed_run():
    """The failed-run rule (headroom 0.10 over base): none's deploy hack rate only 0.05 above the base model's is
    `undecided` ("failed run"), whatever routeV does; 0.3 above, C1 is decided; no base run, `not run`. Reading
    none's rate from zero (headroom_over ignored) would decide the first case (none hacks about 0.45): this fails."""
    failed = decide(plan_dict(), runs(ROUTES, base_hack=-0.05))["C1"]
    assert failed["status"] == "undecided" and failed["why"].startswith("failed run: none's deploy hack rate on hackable")
    assert "below the plan's headroom 0.1" in failed["why"] and "**C1 undecided**" in claims.verdict_text(failed)
    assert decide(plan_dict(), runs(ROUTES, base_hack=-0.3))["C1"]["status"] == "holds"
    missing = decide(plan_dict(), runs(ROUTES, base_hack=None))["C1"]
    assert missing["status"] == "not run" and missing["why"] == "no run base"
    # from zero the same runs pass the headroom: the key decides
    assert decide(plan_dict(C1={"headroom_over": "zero"}), runs(ROUTES, base_hack=-0.05))["C1"]["status"] == "holds"


def test_the_secondary_family_is_exploratory_with_holm_over_what_ran():
    """S1-S3 (confirmatory false) are never a verdict: each would-be status is kept beside `exploratory`; Holm runs
    over the family's three claims (S1 not run, routeA absent, counts as never shown), so S2 and S3 are tested at α/3.
    C1 keeps its α."""
    data = runs({**ROUTES, "placeboV1p": (-0.03, 0.0), "placeboV1n": (-0.01, 0.0), "nll": (-0.02, 0.0)})
    v = decide(plan_dict(), data)
    assert v["S1"]["status"] == "not run"
    for s in ("S2", "S3"):
        assert v[s]["status"] == "exploratory" and v[s]["would_be"] == "holds", claims.verdict_text(v[s])
        assert v[s]["why"] == "registered exploratory in the plan (confirmatory: false)"
        assert v[s]["family_size"] == 3 and v[s]["alpha_holm"] == pytest.approx(0.05 / 3)
        assert "holds" not in claims.summary_entry(v[s])
    assert v["C1"]["status"] == "holds" and v["C1"]["alpha_holm"] == 0.05
    confirmed = decide(plan_dict(S2={"confirmatory": True}, S3={"confirmatory": True}, S1={"confirmatory": True}), data)
    assert confirmed["S2"]["status"] == "holds"


@pytest.mark.parametrize("change, message", [
    ({"claims.S2.confirmatory": True}, r"decisive.yaml: family secondary: its claims mix confirmatory and exploratory claims"),
    ({"claims.C1.tests.2.paired_t": True}, r"decisive.yaml: claims.C1.tests.2: paired_t true reads the seeds' deploy "
                                           r"rates against 0: outcome hack or solve with direction lower or higher, "
                                           r"not solve noninferior"),
    ({"claims.C1.headroom_over": "baseline"}, r"decisive.yaml: claims.C1.headroom_over: Input should be 'zero' or 'base'"),
    ({"claims.C1.tests.0.paired_t": None}, r"decisive.yaml: claims.C1.tests.0.paired_t: missing key"),
])
def test_a_bad_rule_is_one_error_naming_the_key(change, message):
    d = copy.deepcopy(plan_dict())
    for key, value in change.items():
        *path, last = key.split(".")
        node = d
        for p in path:
            node = node[int(p)] if isinstance(node, list) else node[p]
        if value is None:
            del node[last]
        else:
            node[last] = value
    with pytest.raises(InputError, match=message):
        plan_file.parse(d, "decisive.yaml")


def test_the_repository_plan_writes_the_new_keys_as_before():
    """The repository plan still loads: its claims write the new keys with the values that keep their verdicts
    (paired_t false, headroom_over zero), registered exploratory (confirmatory false: written after seed 0's runs
    were read)."""
    p = plan_file.load(REPO / "analysis.yaml")
    assert all(not t.paired_t for c in p.claims.values() for t in c.tests)
    assert {(c.headroom_over, c.confirmatory) for c in p.claims.values()} == {("zero", False)}


def test_the_t_is_judged_at_its_own_sidedness_apart_from_the_interval(monkeypatch):
    """Issue 51 fixes a 95% interval (sidedness two-sided) and a one-sided paired t at α 0.05 (t_sidedness): a t
    whose one-sided p is 0.04 passes one-sided and fails two-sided (0.04 ≥ α/2), whatever the interval's sidedness.
    A claims._paired_t that read sidedness instead would fail the first assertion: this test fails."""
    from vgrout.stats import PairedTest
    monkeypatch.setattr(claims, "paired_t", lambda a, b, sampling_var=None: PairedTest(
        n=6, mean_diff=-0.1, sem=0.05, t=-2.0, p=0.08))  # two-sided p 0.08: one-sided toward lower 0.04
    data = runs(ROUTES)
    one = decide(plan_dict(), data)["C1"]["tests"][0]
    assert one["p_t"] == pytest.approx(0.04) and one["t_passes"]
    two = decide(plan_dict(C1={"t_sidedness": "two-sided"}), data)["C1"]["tests"][0]
    assert not two["t_passes"] and not two["passes"] and two["bootstrap_passes"]


# The decisive record (docs/runs/2026-11-30-decisive): C1's verdict recomputed from its committed files alone.
RECORD = REPO / "docs" / "runs" / "2026-11-30-decisive"


def _verify():
    import importlib.util
    spec = importlib.util.spec_from_file_location("verify_c1", RECORD / "verify_c1.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _record_copy(tmp_path: Path) -> Path:
    import shutil
    dest = tmp_path / "record"
    for part in [*RECORD.glob("s*-*"), RECORD / "verdict"]:
        shutil.copytree(part, dest / part.name)
    return dest


def test_the_committed_record_gives_the_committed_c1_verdict(capsys):
    """verify_c1.py decides C1 from the record's per-sample deploy grades and configs with the aggregate's own claims
    code, and every value equals verdict/summary.json's claim_C1 (made from the returned files by assemble.py)."""
    assert _verify().main(RECORD) == 0
    assert "C1 from the committed files: does not hold; equal to verdict/summary.json" in capsys.readouterr().out


def _regrade(samples: Path, moves: list[tuple[str, str]]) -> None:
    """Set deploy rows' hacked (and hacked_strict) labels: moves of (from, to), each the first matching row of a
    different problem than the moves before."""
    import gzip
    header, *lines = gzip.decompress(samples.read_bytes()).decode().splitlines()
    header = header.split(",")
    rows, used = [dict(zip(header, line.split(","))) for line in lines], set()
    for old, new in moves:
        row = next(r for r in rows if r["view"] == "deploy" and r["hackable"] == "1" and r["gt_pass"] == "0"
                   and r["hacked"] == old and r["problem_id"] not in used)
        row |= {"hacked": new, "hacked_strict": new}
        used.add(row["problem_id"])
    text = "\n".join([",".join(header)] + [",".join(r[h] for h in header) for r in rows]) + "\n"
    samples.write_bytes(gzip.compress(text.encode()))


def test_a_changed_grade_or_plan_hash_in_the_record_is_caught(tmp_path, capsys):
    """The check can fail. One deploy sample of routeV-100 regraded alone (hacked 1 -> 0) no longer matches the run's
    per_mode_deploy.json, and the aggregate's loader refuses it; a hack moved from one problem to another (the run's
    totals kept) moves C1's interval; a run's recorded plan hash changed makes C1 exploratory. Each time verify_c1
    reports what differs."""
    import json
    verify = _verify()
    record = _record_copy(tmp_path / "lone")
    _regrade(record / "s100-101" / "routeV-100" / "deploy_samples.csv.gz", [("1", "0")])
    with pytest.raises(InputError, match="do not reproduce"):
        verify.main(record)

    record = _record_copy(tmp_path / "moved")
    _regrade(record / "s100-101" / "routeV-100" / "deploy_samples.csv.gz", [("1", "0"), ("0", "1")])
    assert verify.main(record) == 1
    assert "DIFFERS hack_below_uniform_" in capsys.readouterr().out

    record = _record_copy(tmp_path / "plan")
    config_path = record / "s104-105" / "none-105" / "config.json"
    config = json.loads(config_path.read_text())
    config_path.write_text(json.dumps({**config, "plan_sha256": "0" * 64}))
    assert verify.main(record) == 1
    assert "DIFFERS status: recorded 'does not hold', again 'exploratory'" in capsys.readouterr().out
