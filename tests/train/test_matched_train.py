"""Issue 50 inside train(): the count-matched controls route and keep, step by step and source by
source, exactly what routeV does in short runs of the tiny student (the fixture and helpers of
tests/train/test_train.py), and a held-out arm with vact.withhold_pool trains on no pool row of the
held-out modes."""
import dataclasses
import json

import pytest

from tests.train.test_train import _cfg, _rows, setup  # noqa: F401 (setup: the module's fixture)
from vgrout import arms, config
from vgrout.train import loop as train

pytestmark = pytest.mark.slow
COUNTS = ("n_students", "n_route", "n_keep", "n_absorb", "n_route_teacher", "n_keep_teacher", "n_absorb_teacher")


def test_count_matched_controls_match_routev_per_step_and_source(setup):
    """Every run trains on its own rollouts (its own updates), so their scores differ; the counts
    do not. Written to the step logs, as aggregate reads them."""
    root, model_dir = setup
    kw = dict(steps=3, ckpt_every=3, warmup=2, teacher_zone="gate", cut_rule="step", mix=0.5)
    logs = {}
    for name in ("routeV", "uniform", "nll", "oracleMatched", "placeboV1p", "placeboV1n"):
        cfg = dataclasses.replace(_cfg(root, model_dir, f"m_{name}", arm=name, **kw),
                                  name=name if arms.draw(name) else None)
        out = train.train(cfg, progress=False)
        logs[name] = [{k: r[k] for k in COUNTS} for r in _rows(cfg.log_path)]
        if name == "nll":  # its logged score is the frozen NLL: positive, not a dot product
            assert all(json.loads(line)["score"] > 0 for line in open(out / "rollouts.jsonl"))
    assert all(log == logs["routeV"] for log in logs.values()), logs
    assert sum(r["n_route"] + r["n_route_teacher"] for r in logs["routeV"]) > 0  # past warm-up: rows did route


def test_a_heldout_arm_trains_on_no_pool_row_of_the_heldout_modes(setup):
    import shutil
    root, model_dir = setup
    shutil.copyfile(root / "vact" / "v_grad.safetensors", root / "vact" / "v_grad_heldout.safetensors")
    held = ["exit_code", "stdout_marker"]
    kw = dict(steps=3, ckpt_every=3, warmup=2, prompts_per_step=4)
    cfg = dataclasses.replace(_cfg(root, model_dir, "w_heldoutV", arm="heldoutV", **kw), withheld=held)
    rows = [json.loads(line) for line in open(train.train(cfg, progress=False) / "rollouts.jsonl")]
    withheld = [r for r in rows if r["mode"] in held]
    assert withheld, "no problem of a held-out mode was sampled: the test proves nothing"
    assert all(r["source"] == "student" for r in withheld)
    assert any(r["source"] == "teacher" for r in rows if r["mode"] not in held)  # the other modes keep theirs
    # the groups keep their size: student rows take the pool rows' places
    for k in range(0, len(rows), 4):
        group = rows[k:k + 4]
        assert len({r["problem_id"] for r in group}) == 1
        assert sum(r["source"] == "teacher" for r in group) == (0 if group[0]["mode"] in held else 1)


def test_withholding_is_read_by_the_heldout_arms_and_their_yoked_copies_only():
    p = config.Params(vact=config.Vact(withhold_pool=True),
                      train=config.Train(arms=["none", "routeV", "heldout", "heldoutV"], yoked=["placebo"]),
                      gate=config.Gate(yoke_to=["heldout"]))
    held = sorted(p.vact.heldout_modes)
    assert {a: train.train_run(p, a, 0).withheld for a in ("none", "routeV", "heldout", "heldoutV",
                                                           "placebo_heldout")} == \
        {"none": [], "routeV": [], "heldout": held, "heldoutV": held, "placebo_heldout": held}
    assert train.train_run(config.Params(), "heldoutV", 0).withheld == []  # opt-in: the committed runs saw every row
    run = train.train_run(p, "heldoutV", 0)
    assert run.space == "grad" and run.direction.name == "v_grad_heldout.safetensors"
    assert set(run.pair_modes) == {"overwrite_tests", "hardcode"}


def test_routev_with_the_cosine_score_logs_the_band_normalised_cosine(setup):
    """gate.score cosine inside train(): every logged score is the band-normalised cosine of the row's
    logged probe gradient to v_grad, the band (logged per step) the pairs' mean cosines."""
    import torch
    from safetensors.torch import load_file

    from vgrout.routing import directions
    root, model_dir = setup
    pair_files = [str(p) for p in sorted((__import__("pathlib").Path(__file__).parents[2] / "data" / "pairs").glob(
        "hack_*.md"))]
    cfg = _cfg(root, model_dir, "cos_routeV", arm="routeV", steps=2, ckpt_every=2, warmup=2, score="cosine",
               pair_files=pair_files)
    out = train.train(cfg, progress=False)
    rows = [json.loads(line) for line in open(out / "rollouts.jsonl")]
    log = _rows(cfg.log_path)
    band_clean, band_hack = log[0]["band_clean"], log[0]["band_hack"]
    assert band_clean != band_hack
    acts = load_file(str(out / "rollout_acts.safetensors"))
    v = directions.load_direction(root / "vact" / "v_grad.safetensors")
    f = torch.cat([acts[m] for m in sorted(v)], 1).double()
    u = torch.cat([v[m] for m in sorted(v)]).double()
    direct = ((f @ u) / (f.norm(dim=1) * u.norm()) - band_clean) / (band_hack - band_clean)
    assert torch.allclose(torch.tensor([r["score"] for r in rows], dtype=torch.float64), direct, atol=1e-4)


@pytest.mark.parametrize("arm", ["routeV", "routeA"])
def test_seed_004s_per_sample_cosines_are_in_the_rollout_log(setup, arm):
    """train.sample_cos: every row has cos_before (R2: present on at least 90% of rows) and cos_after,
    which is 0 on a routed row (the deployed block gets no gradient from it) and cos_before elsewhere;
    cos_before is the cosine of the row's probe gradient to v_grad, read from the gate's own
    features in routeV (checked against the logged ones) and from a probe pass in routeA."""
    import torch
    from safetensors.torch import load_file

    from vgrout.routing import directions
    root, model_dir = setup
    cfg = _cfg(root, model_dir, f"cos_{arm}", arm=arm, steps=2, ckpt_every=2, warmup=2, sample_cos=True)
    out = train.train(cfg, progress=False)
    rows = [json.loads(line) for line in open(out / "rollouts.jsonl")]
    assert sum(r["cos_before"] is not None for r in rows) >= 0.9 * len(rows)
    assert {"route", "keep"} <= {r["zone"] for r in rows}
    for r in rows:
        assert r["cos_after"] == (0.0 if r["zone"] == "route" else r["cos_before"])
    if arm == "routeV":
        acts = load_file(str(out / "rollout_acts.safetensors"))
        v = directions.load_direction(root / "vact" / "v_grad.safetensors")
        assert torch.allclose(torch.tensor([r["cos_before"] for r in rows]), directions.cosine(acts, v), atol=1e-5)
    assert "cos_before" not in json.loads(open(root / "m_routeV" / "rollouts.jsonl").readline()) \
        if (root / "m_routeV").exists() else True  # off by default
