"""Issue 50 inside train(): the count-matched controls route and keep, step by step and source by
source, exactly what routeV does in short runs of the tiny student (the fixture and helpers of
tests/train/test_train.py); with vact.withhold_pool no arm trains on a pool row of the held-out modes and
an arm and its controls see the same rows; an antithetic pair under the cosine score routes complementary
rows; seed 004's cosines are what a direct computation under the masks gives."""
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


HELD = ["exit_code", "stdout_marker"]


def _withheld(arm):
    """The withheld modes train_run gives `arm` in a run set with vact.withhold_pool on."""
    p = config.Params(vact=config.Vact(withhold_pool=True, heldout_modes=HELD),
                      train=config.Train(arms=["none", "heldoutV", "uniform"], yoked=[]),
                      gate=config.Gate(cut_rule="step", yoke_to=[]))
    return train.train_run(p, arm, 0).withheld


def test_withholding_is_a_property_of_the_run_set_not_of_an_arm():
    """vact.withhold_pool withholds the held-out modes' pool rows in every arm of the run set: a held-out
    arm and its controls (none, the count-matched ones, a yoked copy) differ in the direction alone."""
    p = config.Params(vact=config.Vact(withhold_pool=True),
                      train=config.Train(arms=["none", "routeV", "heldout", "heldoutV"], yoked=["placebo"]),
                      gate=config.Gate(yoke_to=["heldout"]))
    held = sorted(p.vact.heldout_modes)
    assert {a: train.train_run(p, a, 0).withheld for a in p.run_arms} == {a: held for a in p.run_arms}
    matched = config.Params(vact=config.Vact(withhold_pool=True),
                            train=config.Train(arms=["none", "heldoutV", "uniform", "nll", "oracleMatched",
                                                     "placeboV1p", "placeboV1n"], yoked=[]),
                            gate=config.Gate(cut_rule="step", yoke_to=[]))
    assert all(train.train_run(matched, a, 0).withheld == held for a in matched.run_arms)
    # off (the default, as the committed runs were trained): every arm sees every pool row
    assert all(train.train_run(config.Params(), a, 0).withheld == [] for a in ("none", "heldout", "heldoutV"))
    run = train.train_run(p, "heldoutV", 0)
    assert run.space == "grad" and run.direction.name == "v_grad_heldout.safetensors"
    assert set(run.pair_modes) == {"overwrite_tests", "hardcode"}


def test_with_withholding_an_arm_and_its_matched_control_train_on_the_same_rows(setup):
    """heldoutV and its count-matched control (uniform) and none, withholding on: at every step the same
    problems, the same rows of each source per problem, and no pool row of a held-out mode (student rows
    take their places, so each group keeps its size)."""
    import shutil
    from collections import Counter
    root, model_dir = setup
    shutil.copyfile(root / "vact" / "v_grad.safetensors", root / "vact" / "v_grad_heldout.safetensors")
    kw = dict(steps=3, ckpt_every=3, warmup=2, prompts_per_step=4, cut_rule="step")
    logs = {}
    for arm in ("heldoutV", "uniform", "none"):
        assert _withheld(arm) == HELD
        cfg = dataclasses.replace(_cfg(root, model_dir, f"w_{arm}", arm=arm, **kw), withheld=_withheld(arm))
        rows = [json.loads(line) for line in open(train.train(cfg, progress=False) / "rollouts.jsonl")]
        logs[arm] = {step: Counter((r["problem_id"], r["mode"], r["source"]) for r in rows if r["step"] == step)
                     for step in range(3)}
        assert not [r for r in rows if r["mode"] in HELD and r["source"] == "teacher"]
        assert any(r["mode"] in HELD for r in rows), "no problem of a held-out mode was sampled: the test proves nothing"
        assert any(r["source"] == "teacher" for r in rows if r["mode"] not in HELD)  # the other modes keep theirs
        for k in range(0, len(rows), 4):  # the groups keep their size
            group = rows[k:k + 4]
            assert len({r["problem_id"] for r in group}) == 1
            assert sum(r["source"] == "teacher" for r in group) == (0 if group[0]["mode"] in HELD else 1)
    assert logs["heldoutV"] == logs["uniform"] == logs["none"]


def test_an_antithetic_pair_under_the_cosine_score_routes_complementary_rows_in_train(setup):
    """gate.score cosine inside train(): placeboV1p and placeboV1n start from the same adapter and draw
    the same step-0 rollouts; each normalises by its own direction's pair band, and at symmetric
    fractions the rows one routes the other keeps, in both sources (the band once cancelled the sign
    and both routed the same rows)."""
    root, model_dir = setup
    pair_files = [str(p) for p in sorted((__import__("pathlib").Path(__file__).parents[2] / "data" / "pairs").glob(
        "hack_*.md"))]
    zones, texts = {}, {}
    for k in "pn":
        name = f"placeboV1{k}"
        cfg = dataclasses.replace(_cfg(root, model_dir, f"anti_{name}", arm=name, steps=1, ckpt_every=1, warmup=0,
                                       cut_rule="step", score="cosine", teacher_zone="gate", mix=0.5,
                                       pair_files=pair_files), name=name)
        rows = [json.loads(line) for line in open(train.train(cfg, progress=False) / "rollouts.jsonl")]
        zones[k], texts[k] = [(r["source"], r["zone"]) for r in rows], [r["completion"] for r in rows]
        scores = [r["score"] for r in rows]
        if k == "p":
            plus = scores
    assert texts["p"] == texts["n"]
    assert scores == [-x for x in plus]
    for src in ("student", "teacher"):
        z = {k: [zz for s, zz in zones[k] if s == src] for k in "pn"}
        assert "route" in z["p"]
        assert [i for i, x in enumerate(z["p"]) if x == "route"] == [i for i, x in enumerate(z["n"]) if x == "keep"]
        assert [i for i, x in enumerate(z["p"]) if x == "keep"] == [i for i, x in enumerate(z["n"]) if x == "route"]


def test_routev_with_the_cosine_score_logs_the_band_normalised_cosine(setup):
    """gate.score cosine inside train(): every logged score is the band-normalised cosine of the row's
    logged probe gradient to v_grad, the band (logged per step) the pairs' mean cosines, its width unsigned
    (this fixture's Haar v_grad separates the pairs backwards: a signed width would reverse its ranking)."""
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
    direct = ((f @ u) / (f.norm(dim=1) * u.norm()) - band_clean) / abs(band_hack - band_clean)  # unsigned width
    assert torch.allclose(torch.tensor([r["score"] for r in rows], dtype=torch.float64), direct, atol=1e-4)


def _direct_cos(model_dir, state, seqs, zones, v):
    """Seed 004's cosines computed apart from train: one row at a time, the train forward's own masks
    (Lora2r.masked, ExactDelta) on a fresh copy of the adapter, the NLL's gradient into the real
    parameters, and the deployed bottleneck's gate gradient read off B: ∂L/∂c_j = Σ_o B[o, j]·∂L/∂B[o, j]
    over the deployed columns j < r (c scales h_j = (A_d·x)_j, which B_d's column j multiplies). zones
    None: no mask (absorb: both blocks, nothing detached). Returns (per-row cosines or None, step cosine)."""
    import torch

    from vgrout.engine import adapter as ad
    from vgrout.engine import logprob
    from vgrout.engine.model import load
    from vgrout.routing import directions
    model, _ = load(model_dir)
    lora = ad.attach(model, r=2, seed=0)
    lora.load_state_dict(state)
    grads = {m: [] for m in lora.modules}
    for i in range(len(seqs)):
        for p in lora.parameters():
            p.grad = None
        with lora.masked([zones[i] if zones else "absorb"]):
            logp, mask = logprob.reference_token_logprobs(lora.model, seqs.rows(slice(i, i + 1)))
        (-(logp * mask).sum() / mask.sum()).backward()
        for m, mod in lora.modules.items():
            grads[m].append((mod.B[:, :mod.r].detach() * mod.B.grad[:, :mod.r]).sum(0).double())
    g = {m: torch.stack(t) for m, t in grads.items()}
    norm = sum(t.pow(2).sum(-1) for t in g.values()).sqrt()
    rows = [float(c) if n > 0 else None for c, n in zip(directions.cosine(g, v), norm)]
    total = {m: t.sum(0, keepdim=True) for m, t in g.items()}
    return rows, float(directions.cosine(total, v)[0]), norm


@pytest.mark.parametrize("arm", ["routeA", "routeV"])
def test_seed_004s_cosines_are_a_direct_computation_under_the_masks(setup, monkeypatch, arm):
    """train.sample_cos: per row, cos_before (no mask) and cos_after (the row's training mask) of its
    deployed-block NLL gradient to v_grad, in the model the step updates; None after the mask on a routed
    row (exactly zero: its deployed output is detached); per step the summed gradients' cosines. Each
    equals the direct computation of _direct_cos on the adapter train held at that step (recorded at the
    call), R2 holds (cos_before on at least 90% of rows), and by the second step the masks matter on kept
    rows too (the quarantine has trained, so the deploy model is another function)."""
    import torch

    from vgrout.routing import directions
    root, model_dir = setup
    seen = []
    real = train.sample_cos

    def recorder(cfg, lora, seqs, masks):
        seen.append(({k: t.clone() for k, t in lora.state_dict().items()}, seqs, list(masks)))
        return real(cfg, lora, seqs, masks)
    monkeypatch.setattr(train, "sample_cos", recorder)
    cfg = _cfg(root, model_dir, f"cos_{arm}", arm=arm, steps=2, ckpt_every=2, warmup=2, sample_cos=True)
    out = train.train(cfg, progress=False)
    rows = [json.loads(line) for line in open(out / "rollouts.jsonl")]
    log = _rows(cfg.log_path)
    assert len(seen) == 2 and sum(r["cos_before"] is not None for r in rows) >= 0.9 * len(rows)  # R2
    assert {"route", "keep"} <= {r["zone"] for r in rows}
    v = directions.load_direction(root / "vact" / "v_grad.safetensors")
    differs = False
    for step, (state, seqs, masks) in enumerate(seen):
        got = [r for r in rows if r["step"] == step]
        assert masks == [r["zone"] for r in got]
        before, step_before, _ = _direct_cos(model_dir, state, seqs, None, v)
        after, step_after, norm = _direct_cos(model_dir, state, seqs, masks, v)
        for r, b, a, n, z in zip(got, before, after, norm, masks):
            assert r["cos_before"] == pytest.approx(b, abs=1e-4)
            if z == "route":
                assert float(n) == 0.0 and a is None and r["cos_after"] is None
            else:
                assert r["cos_after"] == pytest.approx(a, abs=1e-4)
                differs |= z == "keep" and abs(a - b) > 1e-3
        assert log[step]["cos_before_step"] == pytest.approx(step_before, abs=1e-4)
        assert log[step]["cos_after_step"] == pytest.approx(step_after, abs=1e-4)
    assert differs  # the masks were computed, not copied: a kept row's deployed gradient moved
    if arm == "routeV":  # at step 0 the unmasked current model is the frozen scorer's: the gate's own features
        from safetensors.torch import load_file
        acts = load_file(str(out / "rollout_acts.safetensors"))
        n0 = sum(r["step"] == 0 for r in rows)
        cos0 = directions.cosine({m: a[:n0] for m, a in acts.items()}, v)
        assert torch.allclose(torch.tensor([r["cos_before"] for r in rows[:n0]]), cos0, atol=1e-4)
    off = _cfg(root, model_dir, f"nocos_{arm}", arm=arm, steps=1, ckpt_every=1, warmup=2)
    first = json.loads(open(train.train(off, progress=False) / "rollouts.jsonl").readline())
    assert "cos_before" not in first and "cos_before_step" not in _rows(off.log_path)[0]  # off by default


def test_r3_fails_when_the_mask_leaves_a_routed_rows_gradient_in(setup, monkeypatch, tmp_path):
    """R3 (seed 004: the step's gradient aligns less with v_grad after the mechanism than before) holds
    where the routed rows are those pointing along v_grad, and fails when the route mask is broken (the
    routed rows' deployed output not detached): the step's gradient is then unchanged."""
    import torch
    from types import SimpleNamespace

    from vgrout.engine import adapter as ad
    from vgrout.engine.model import load
    from vgrout.routing import directions
    _, model_dir = setup
    model, tok = load(model_dir)
    lora = ad.attach(model, r=2, seed=0)
    texts = ["def f(x):\n    return x + 1", "import sys\nsys.exit(0)", "print('PASS')", "def g(a, b):\n    return a * b",
             "x = [i for i in range(3)]", "assert True"]
    rollouts = [SimpleNamespace(prompt=f"Task {i}: write code.", completion_ids=tok(t)["input_ids"])
                for i, t in enumerate(texts)]
    seqs = train.to_seqs(tok, rollouts)
    g = train.masked_probe_gradients(lora, seqs, None, 4, True)
    v = {m: (t[0] + t[1]) / (t[0] + t[1]).norm() for m, t in g.items()}  # rows 0 and 1 point along v_grad
    directions.save_direction(tmp_path / "v_grad.safetensors", v)
    cfg = SimpleNamespace(vact_dir=str(tmp_path), t=SimpleNamespace(old_rows=4), fast=True)
    masks = ["route", "route", "keep", "keep", "absorb", "absorb"]
    rows, step = train.sample_cos(cfg, lora, seqs, masks)
    assert rows["cos_after"][:2] == [None, None] and all(c is not None for c in rows["cos_before"])
    assert step["cos_after_step"] < step["cos_before_step"] - 0.05  # R3 holds, by far more than float noise

    real = train.MaskedProbe.forward

    def leaky(mod, x):  # the route mask broken: the deployed output is never detached
        with mod.state.scope(d=None):
            return real(mod, x)
    monkeypatch.setattr(train.MaskedProbe, "forward", staticmethod(leaky))
    broken_rows, broken = train.sample_cos(cfg, lora, seqs, masks)
    # R3 fails: the step's gradient is the unmasked one (to float noise: the passes differ in their masks' kernels)
    assert broken["cos_after_step"] == pytest.approx(broken["cos_before_step"], abs=1e-6)
    assert broken_rows["cos_after"][:2] != [None, None]
