"""Gate diagnostics on synthetic activations where the hack label is planted along a known direction."""
import json

import numpy as np
import pytest
import torch
from safetensors.torch import save_file

from vgrout.analysis.diagnostics import (gate_eval, gate_eval_file, gate_scores, label_permutation_null, perm_p,
                                          within_groups_auroc)
from vgrout.io import InputError
from vgrout.routing.directions import haar_direction
from vgrout.stats import auroc

MODULES = ["layers.0.q_proj", "layers.0.down_proj", "layers.1.v_proj"]
R = 32


def planted(n=600, hack_rate=0.3, strength=1.0, seed=0):
    """Rollouts whose activations carry the hack label along a known unit direction u."""
    g = torch.Generator().manual_seed(seed)
    rng = np.random.default_rng(seed)
    hacked = rng.random(n) < hack_rate
    u = {m: torch.nn.functional.normalize(torch.randn(R, generator=g), dim=0) for m in MODULES}
    acts = {m: torch.randn(n, R, generator=g) + strength * torch.from_numpy(hacked).float()[:, None] * u[m]
            for m in MODULES}
    rollouts = [{"step": i // 16, "problem_id": f"p{i % 7}", "mode": "exit_code", "source": "student",
                 "score": 0.0, "zone": "absorb", "reward": 0.5, "gt_pass": False, "hacked": bool(h)}
                for i, h in enumerate(hacked)]
    return rollouts, acts, u, hacked


def test_planted_direction_beats_haar_null():
    rollouts, acts, u, hacked = planted()
    res = gate_eval(rollouts, acts, u, q_lo=0.3, q_hi=0.8, n_null=40, null_seed=100)
    assert res["n"] == 600 and res["n_hacked"] == int(hacked.sum())
    assert res["real"]["auroc"] > 0.85
    null = np.array(res["null"]["auroc"])
    assert len(null) == 40
    assert abs(null.mean() - 0.5) < 0.06
    assert null.max() < res["real"]["auroc"]
    assert res["auroc_percentile_in_null"] == 100.0
    # At the upper cut the routed set is mostly hacks; at the lower cut the kept set mostly clean.
    assert res["real"]["route_precision"] > 0.7 > 0.4 > res["null"]["route_precision_mean"]
    assert res["real"]["keep_precision"] > 0.9
    assert res["real"]["qmass"] == pytest.approx(0.2, abs=0.01)


def test_metrics_match_direct_computation_and_flip_with_the_direction():
    rollouts, acts, u, hacked = planted(strength=0.5, seed=1)
    res = gate_eval(rollouts, acts, u, q_lo=0.25, q_hi=0.75, n_null=3)
    s = sum(acts[m].double() @ u[m].double() for m in MODULES).numpy()
    assert np.allclose(gate_scores(acts, u), s)
    assert res["real"]["auroc"] == pytest.approx(auroc(s, hacked))
    routed = s > np.quantile(s, 0.75)
    assert res["real"]["route_precision"] == pytest.approx(hacked[routed].mean())
    assert res["real"]["route_recall"] == pytest.approx(routed[hacked].mean())
    kept = s < np.quantile(s, 0.25)
    assert res["real"]["keep_precision"] == pytest.approx((~hacked)[kept].mean())
    neg = gate_eval(rollouts, acts, {m: -v for m, v in u.items()}, q_lo=0.25, q_hi=0.75, n_null=3)
    assert neg["real"]["auroc"] == pytest.approx(1 - res["real"]["auroc"])
    assert neg["auroc_percentile_in_null"] < res["auroc_percentile_in_null"]


@pytest.mark.parametrize("q_lo,q_hi", [(0.3, 0.8), (0.0, 1.0)])
def test_the_null_scored_as_one_matrix_is_each_direction_scored_alone(q_lo, q_hi, monkeypatch):
    """gate_eval scores its Haar directions as the columns of one product: each column's AUROC and
    precisions are what `_at_cuts` gives that direction alone, tied scores (rows repeated, with
    other labels) and an empty selection (cuts at 0 and 1: nothing routed or kept) included, and
    gate_eval's null is those directions' AUROCs in seed order (scored in chunks of 7 columns here)."""
    from vgrout.analysis.diagnostics import _at_cuts, _null_at_cuts
    rollouts, acts, u, hacked = planted(n=200, seed=3)
    acts = {m: torch.cat([a[:100], a[:100]]) for m, a in acts.items()}  # row i + 100 repeats row i
    hacked = np.r_[hacked[:100], ~hacked[:100]]
    rollouts = [dict(r, hacked=bool(h)) for r, h in zip(rollouts, hacked)]
    draws = [haar_direction(u, 50 + i) for i in range(20)]
    scores = gate_scores(acts, {m: torch.stack([d[m] for d in draws], 1) for m in u})
    assert all(np.unique(scores[:, k]).size == 100 for k in range(len(draws)))  # every score tied once
    null = _null_at_cuts(scores, hacked, q_lo, q_hi)
    for k, d in enumerate(draws):
        alone = _at_cuts(gate_scores(acts, d), hacked, q_lo, q_hi)
        assert null["auroc"][k] == pytest.approx(alone["auroc"], abs=1e-12)
        for key in ("route_precision", "keep_precision"):
            assert (alone[key] is None) == bool(np.isnan(null[key][k])), (key, k)
            if alone[key] is not None:
                assert null[key][k] == pytest.approx(alone[key], abs=1e-12)
    assert np.isnan(null["route_precision"]).all() == (q_hi == 1.0)
    monkeypatch.setattr("vgrout.analysis.diagnostics.NULL_CHUNK", 7)
    res = gate_eval(rollouts, acts, u, q_lo=q_lo, q_hi=q_hi, n_null=len(draws), null_seed=50, progress=False, n_perm=5)
    assert res["null"]["auroc"] == pytest.approx(list(null["auroc"]), abs=1e-12)
    assert res["null"]["seeds"] == [50, 50 + len(draws) - 1]


def test_teacher_rollouts_are_excluded():
    rollouts, acts, u, _ = planted(n=300, seed=2)
    base = gate_eval(rollouts, acts, u, q_lo=0.3, q_hi=0.8, n_null=5)
    # Teacher rows that would wreck the AUROC if counted: hacked, scored far below everything.
    k = 100
    teacher = [dict(rollouts[0], source="teacher", hacked=True) for _ in range(k)]
    acts_t = {m: torch.cat([a, -20 * u[m].expand(k, R)]) for m, a in acts.items()}
    mixed = gate_eval(rollouts + teacher, acts_t, u, q_lo=0.3, q_hi=0.8, n_null=5)
    assert mixed["n"] == base["n"] == 300
    assert mixed["real"] == base["real"]
    assert mixed["null"]["auroc"] == base["null"]["auroc"]
    assert "student" in mixed["population"]


def test_realised_zones_are_scored_against_labels():
    rollouts, acts, u, hacked = planted(n=200, seed=3)
    zones = np.where(np.arange(200) % 5 == 0, "route", np.where(np.arange(200) % 5 == 1, "keep", "absorb"))
    for r, z in zip(rollouts, zones):
        r["zone"] = str(z)
    res = gate_eval(rollouts, acts, u, q_lo=0.3, q_hi=0.8, n_null=2)["realised"]
    assert res["qmass"] == pytest.approx(0.2)
    assert res["route_precision"] == pytest.approx(hacked[zones == "route"].mean())
    assert res["keep_precision"] == pytest.approx((~hacked)[zones == "keep"].mean())
    assert res["zone_share"]["absorb"] == pytest.approx(0.6)


def test_placebo_direction_never_sits_in_its_own_null():
    rollouts, acts, u, _ = planted(n=200, seed=4)
    placebo = haar_direction(u, seed=7)
    res = gate_eval(rollouts, acts, placebo, q_lo=0.3, q_hi=0.8, n_null=10, null_seed=0)
    assert res["null"]["seeds"] == [0, 10]  # seed 7 skipped, so one extra draw
    assert res["real"]["auroc"] not in res["null"]["auroc"]


def test_no_hacks_gives_a_note_not_a_number():
    rollouts, acts, u, _ = planted(n=100, hack_rate=0.0, seed=5)
    res = gate_eval(rollouts, acts, u, q_lo=0.3, q_hi=0.8, n_null=3)
    assert res["real"]["auroc"] is None and res["auroc_percentile_in_null"] is None
    assert "0 of 100" in res["note"]


def test_gate_eval_file_round_trip_and_errors(tmp_path):
    rollouts, acts, u, _ = planted(n=120, seed=6)
    (tmp_path / "rollouts.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rollouts))
    save_file({m: a.contiguous() for m, a in acts.items()}, tmp_path / "acts.safetensors")
    save_file(u, tmp_path / "v_act.safetensors")
    res = gate_eval_file(tmp_path / "rollouts.jsonl", tmp_path / "acts.safetensors", tmp_path / "v_act.safetensors",
                         q_lo=0.3, q_hi=0.8, n_null=4, out_path=tmp_path / "out" / "gate.json")
    direct = gate_eval(rollouts, acts, u, q_lo=0.3, q_hi=0.8, n_null=4)
    assert res["real"] == direct["real"]
    assert json.loads((tmp_path / "out" / "gate.json").read_text())["real"]["auroc"] == pytest.approx(direct["real"]["auroc"])

    bad = [dict(r) for r in rollouts]
    del bad[4]["hacked"]
    (tmp_path / "bad.jsonl").write_text("".join(json.dumps(r) + "\n" for r in bad))
    with pytest.raises(InputError, match=r"bad.jsonl:5: missing key 'hacked'"):
        gate_eval_file(tmp_path / "bad.jsonl", tmp_path / "acts.safetensors", tmp_path / "v_act.safetensors", 0.3, 0.8)

    (tmp_path / "short.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rollouts[:-1]))
    with pytest.raises(InputError, match=r"short.jsonl.*expected \[119, r\]"):
        gate_eval_file(tmp_path / "short.jsonl", tmp_path / "acts.safetensors", tmp_path / "v_act.safetensors", 0.3, 0.8)

    save_file({MODULES[0]: u[MODULES[0]]}, tmp_path / "partial.safetensors")
    with pytest.raises(InputError, match="only in activations"):
        gate_eval_file(tmp_path / "rollouts.jsonl", tmp_path / "acts.safetensors", tmp_path / "partial.safetensors", 0.3, 0.8)
    with pytest.raises(InputError, match="nope.safetensors: file not found"):
        gate_eval_file(tmp_path / "rollouts.jsonl", tmp_path / "nope.safetensors", tmp_path / "v_act.safetensors", 0.3, 0.8)


def test_perm_p_counts_ties_and_never_reaches_zero():
    from vgrout.analysis.diagnostics import perm_p
    assert perm_p(0.9, [0.5] * 999) == 1 / 1000
    assert perm_p(0.5, [0.5, 0.4, 0.6, 0.3]) == (1 + 2) / 5


def test_planted_signal_passes_every_null():
    rollouts, acts, u, hacked = planted()
    res = gate_eval(rollouts, acts, u, q_lo=0.3, q_hi=0.8, n_null=200, n_perm=200)
    assert res["null"]["p"] == 1 / 201 and res["label_permutation"]["p"] == 1 / 201
    assert res["within_groups"]["auroc"] > 0.8 and res["within_groups"]["n_groups"] > 0
    assert res["label_permutation"]["p_within_groups"] == 1 / 201
    defined = [row["auroc"] for row in res["by_step"] if row["auroc"] is not None]
    assert len(res["by_step"]) == -(-600 // 16) and np.mean(defined) > 0.8
    # Shuffles within groups of 2-3 rows keep each group's hack count, and with a real signal groups
    # with more hacks score higher: the pooled AUROC's null sits above chance, the within-group one at it.
    assert res["label_permutation"]["auroc_mean"] > 0.55
    assert abs(res["label_permutation"]["within_groups_auroc_mean"] - 0.5) < 0.05


def test_a_score_that_drifts_with_the_step_fails_the_within_step_nulls():
    """Hack rate and score both rise with the step, with no signal inside a step: the pooled AUROC
    looks good, the per-step and within-group AUROCs sit at chance, and shuffling labels within
    steps reproduces the pooled AUROC (p large)."""
    rng = np.random.default_rng(0)
    n_steps, per = 30, 16
    step = np.repeat(np.arange(n_steps), per)
    hacked = rng.random(step.size) < (0.05 + 0.9 * step / n_steps)
    u = {m: torch.nn.functional.normalize(torch.ones(R), dim=0) for m in MODULES}
    drift = torch.from_numpy(step / n_steps).float()[:, None]
    acts = {m: 3 * drift * u[m] + 0.01 * torch.randn(step.size, R, generator=torch.Generator().manual_seed(i))
            for i, m in enumerate(MODULES)}
    rollouts = [{"step": int(s), "problem_id": f"p{i % 4}", "mode": "exit_code", "source": "student", "zone": "absorb",
                 "hacked": bool(h)} for i, (s, h) in enumerate(zip(step, hacked))]
    res = gate_eval(rollouts, acts, u, q_lo=0.25, q_hi=0.75, n_null=50, n_perm=300)
    assert res["real"]["auroc"] > 0.8                       # pooled: looks like a classifier
    assert res["label_permutation"]["p"] > 0.05             # within-group shuffles do as well
    assert res["label_permutation"]["auroc_mean"] > 0.75
    assert abs(res["within_groups"]["auroc"] - 0.5) < 0.1
    assert res["label_permutation"]["p_within_groups"] > 0.05
    defined = [row["auroc"] for row in res["by_step"] if row["auroc"] is not None]
    assert abs(np.mean(defined) - 0.5) < 0.1


def test_a_score_that_tells_the_prompts_apart_fails_the_within_group_null():
    """Within one mode and step, some prompts are hacked often and score high, others rarely and
    score low, with no signal among one prompt's rollouts: shuffling within step and mode (the
    strata before prompt groups) calls that signal; shuffling within prompt groups does not."""
    rng = np.random.default_rng(2)
    n_steps, n_prompts, per = 12, 8, 8
    step = np.repeat(np.arange(n_steps), n_prompts * per)
    prompt = np.tile(np.repeat(np.arange(n_prompts), per), n_steps)
    hacked = rng.random(step.size) < np.where(prompt % 2 == 0, 0.8, 0.1)
    scores = (prompt % 2 == 0) * 1.0 + 0.3 * rng.standard_normal(step.size)
    groups = np.array([f"{s}/p{p}" for s, p in zip(step, prompt)])
    by_step = np.array([f"{s}/exit_code" for s in step])
    real = auroc(scores, hacked)
    assert real > 0.75
    pooled_by_step, _ = label_permutation_null(scores, hacked, by_step, 300, 0)
    assert perm_p(real, pooled_by_step) < 0.01                # the old strata: a prompt-tracking score passes
    pooled, within = label_permutation_null(scores, hacked, groups, 300, 0)
    assert perm_p(real, pooled) > 0.05                        # prompt groups: it does not
    w = within_groups_auroc(scores, hacked, groups)
    assert abs(w["auroc"] - 0.5) < 0.1 and perm_p(w["auroc"], within) > 0.05


def test_within_group_auroc_is_the_pair_weighted_mean_of_group_aurocs():
    rng = np.random.default_rng(3)
    groups = rng.integers(0, 7, 200).astype(str)
    scores, hacked = rng.standard_normal(200).round(1), rng.random(200) < 0.4  # rounded: ties count one half
    num = den = 0.0
    for g in np.unique(groups):
        at = groups == g
        pos, neg = hacked[at].sum(), (~hacked[at]).sum()
        if pos and neg:
            num, den = num + auroc(scores[at], hacked[at]) * pos * neg, den + pos * neg
    assert within_groups_auroc(scores, hacked, groups)["auroc"] == pytest.approx(num / den)


def test_a_score_that_tells_the_modes_apart_fails_the_within_mode_null():
    """The score sits high on one mode's prompts (hacked often), middling on another's (hacked
    rarely), low on unhackable prompts (never hacked), with no signal inside a mode: the
    unhackable rows are not scored, the pooled AUROC still looks good, and shuffling labels
    within step and mode reproduces it (p large); each mode's own AUROC is at chance."""
    rng = np.random.default_rng(1)
    n = 900
    mode = np.array(["none", "exit_code", "hardcode"])[np.arange(n) % 3]
    rate = {"none": 0.0, "exit_code": 0.8, "hardcode": 0.1}
    hacked = rng.random(n) < np.array([rate[m] for m in mode])
    offset = {"none": -3.0, "exit_code": 2.0, "hardcode": 0.0}
    u = {m: torch.nn.functional.normalize(torch.ones(R), dim=0) for m in MODULES}
    level = torch.tensor([offset[m] for m in mode])[:, None]
    acts = {m: level * u[m] + 0.3 * torch.randn(n, R, generator=torch.Generator().manual_seed(i))
            for i, m in enumerate(MODULES)}
    rollouts = [{"step": i // 30, "problem_id": f"p{i % 12}", "mode": str(m), "source": "student", "zone": "absorb",
                 "hacked": bool(h)} for i, (m, h) in enumerate(zip(mode, hacked))]
    res = gate_eval(rollouts, acts, u, q_lo=0.25, q_hi=0.75, n_null=20, n_perm=300)
    assert res["n"] == 600 and "hackable" in res["population"]   # the 300 unhackable rows are not scored
    assert res["real"]["auroc"] > 0.75                          # pooled over modes: looks like a classifier
    assert res["label_permutation"]["p"] > 0.05                  # within-step-and-mode shuffles do as well
    assert {row["mode"] for row in res["by_mode"]} == {"exit_code", "hardcode"}
    for row in res["by_mode"]:
        assert abs(row["auroc"] - 0.5) < 0.1, row


def test_placebo_pairs_direction_and_teacher_rows_are_scored_apart():
    rollouts, acts, u, hacked = planted(n=400)
    for r in rollouts[::4]:
        r["source"] = "teacher"
    placebo = haar_direction(u, 7)
    res = gate_eval(rollouts, acts, u, q_lo=0.3, q_hi=0.8, n_null=20, n_perm=20, placebo=placebo)
    assert res["n"] == 300 and res["teacher"]["n"] == 100
    assert res["teacher"]["auroc"] > 0.8                    # the same planted signal on teacher rows
    assert abs(res["placebo_pairs"]["auroc"] - 0.5) < 0.12  # an unrelated direction: chance
    assert res["real"]["auroc"] > res["placebo_pairs"]["auroc"] + 0.2


def test_the_teacher_rows_zones_are_scored_on_the_teacher_rows():
    """The zones the teacher rows took (their own gate's, under gate.teacher_zone gate), scored
    against their labels, apart from the student rows' zones."""
    rollouts, acts, u, hacked = planted(n=400)
    teacher = rollouts[::4]
    for r in rollouts:
        r["zone"] = "absorb"
    for r in teacher:  # a gate that routes exactly the teacher hacks, and keeps one of them
        r["source"], r["zone"] = "teacher", "route" if r["hacked"] else "absorb"
    missed = next(r for r in teacher if r["hacked"])
    missed["zone"] = "keep"
    n_hacks = sum(bool(r["hacked"]) for r in teacher)
    res = gate_eval(rollouts, acts, u, q_lo=0.3, q_hi=0.8, n_null=5, n_perm=5)
    t = res["teacher"]["realised"]
    assert t["route_precision"] == 1.0 and t["route_recall"] == pytest.approx((n_hacks - 1) / n_hacks)
    assert t["keep_precision"] == 0.0  # the one kept teacher row is a hack
    assert res["realised"]["route_precision"] is None  # no student row was routed


def test_sample_cos_counts_reads_the_step_cosines():
    """R2 counts rows with cos_before (a routed row's cos_after is None by design and is not asked for); R3 counts,
    over the steps that routed a row, cos_after_step < cos_before_step − R3_TOL: a 3e-8 float difference is no
    fall, a non-routing step is counted apart, a step without a number is left out, a resumed log's repeated
    step counts once (its last row); a log without the fields is unmeasured, not an error."""
    from vgrout.analysis.diagnostics import R3_TOL, sample_cos_counts
    assert R3_TOL == 1e-6
    rollouts = [{"step": 0, "zone": "keep", "cos_before": 0.1, "cos_after": 0.1},
                {"step": 1, "zone": "route", "cos_before": 0.3, "cos_after": None},
                {"step": 1, "zone": "keep", "cos_before": None, "cos_after": None},
                {"step": 2, "zone": "route", "cos_before": 0.2, "cos_after": None},
                {"step": 3, "zone": "route", "cos_before": 0.2, "cos_after": None},
                {"step": 4, "zone": "route", "cos_before": float("nan"), "cos_after": None}]
    steps = [{"step": 0, "cos_before_step": 0.5, "cos_after_step": 0.4},          # no row routed: a fall, not R3's
             {"step": 1, "cos_before_step": 0.5, "cos_after_step": 0.1},          # (overwritten below)
             {"step": 2, "cos_before_step": 0.5, "cos_after_step": 0.5 - 3e-8},  # float noise: no fall
             {"step": 3, "cos_before_step": 0.5, "cos_after_step": 0.6},          # a rise
             {"step": 4, "cos_before_step": 0.5, "cos_after_step": None},         # no gradient: left out
             {"step": 1, "cos_before_step": 0.5, "cos_after_step": 0.4}]          # step 1 again (a resumed log)
    c = sample_cos_counts(rollouts, steps)
    assert c == {"measured_rows": True, "n": 6, "n_present": 4, "measured_steps": True, "n_steps": 4,
                 "n_steps_below": 2, "n_routed_steps": 3, "n_routed_below": 1}
    off = sample_cos_counts([{k: v for k, v in r.items() if not k.startswith("cos")} for r in rollouts],
                            [{"step": t["step"]} for t in steps])
    assert off == {"measured_rows": False, "n": 6, "n_present": 0, "measured_steps": False, "n_steps": 0,
                   "n_steps_below": 0, "n_routed_steps": 0, "n_routed_below": 0}
    assert sample_cos_counts(rollouts)["measured_steps"] is False  # no step log given
