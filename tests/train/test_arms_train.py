"""The comparison arms and routeV in short runs of the tiny student (the fixture and helpers of
tests/train/test_train.py): each arm does its one thing inside train(), not only in its unit."""
import dataclasses
import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from tests.train.test_train import _cfg, _fixed_texts, _rows, setup  # noqa: F401 (setup: the module's fixture)
from vgrout import config
from vgrout.engine import adapter as ad
from vgrout.engine.model import load
from vgrout.routing import directions
from vgrout.substrate import problems as substrate
from vgrout.train import loop as train

pytestmark = pytest.mark.slow
def _adapter(out: Path) -> dict[str, torch.Tensor]:
    return load_file(str(out / "adapter.safetensors"))


def test_routev_gates_on_the_probe_gradient_and_its_placebo_ranks_in_the_same_space(setup):
    """routeV's logged score of every row is its probe gradient in the frozen model against v_grad
    (recomputed here from the logged features), its gate routes and keeps; placebo_routeV copies its
    counts with a Haar direction scored on the same gradients."""
    root, model_dir = setup
    kw = dict(steps=3, ckpt_every=3, warmup=2, teacher_zone="gate")
    cfg = _cfg(root, model_dir, "rv_routeV", arm="routeV", **kw)
    assert cfg.space == "grad" and cfg.direction.name == "v_grad.safetensors"
    out = train.train(cfg, progress=False)
    rows = [json.loads(line) for line in open(out / "rollouts.jsonl")]
    acts = load_file(str(out / "rollout_acts.safetensors"))
    direction = directions.load_direction(Path(cfg.vact_dir) / "v_grad.safetensors")
    assert torch.allclose(directions.score(acts, direction), torch.tensor([r["score"] for r in rows]), atol=1e-5)
    assert {"keep", "route"} <= {r["zone"] for r in rows}
    placebo = _cfg(root, model_dir, "rv_placebo", arm="placebo", yoke_log=cfg.log_path, **kw)
    placebo = dataclasses.replace(placebo, name="placebo_routeV")
    assert placebo.space == "grad"
    p_out = train.train(placebo, progress=False)
    p_acts = load_file(str(p_out / "rollout_acts.safetensors"))
    keys = ("n_route", "n_keep", "n_route_teacher", "n_keep_teacher")
    assert [tuple(r[k] for k in keys) for r in _rows(placebo.log_path)] == [tuple(r[k] for k in keys) for r in _rows(cfg.log_path)]
    # step 0 samples the same rollouts from the same init: the same gradient features
    n0 = sum(r["step"] == 0 for r in rows)
    assert all(torch.allclose(p_acts[m][:n0], acts[m][:n0], atol=1e-6) for m in acts)


def test_erase_screens_its_flagged_rows_and_never_touches_the_quarantine(setup):
    root, model_dir = setup
    out = train.train(_cfg(root, model_dir, "erase", arm="erase", steps=3, ckpt_every=3, warmup=2,
                           teacher_zone="gate"), progress=False)
    log = _rows(Path(out, "steps.jsonl"))
    assert sum(r["n_route"] + r["n_route_teacher"] for r in log) > 0  # the gate did flag rows
    assert [r["n_screened"] for r in log] == [r["n_route"] + r["n_route_teacher"] for r in log]
    assert all(r["gradnorm_quarantine"] == 0 and r["qmass_update"] == 0 and r["gradnorm_deployed"] > 0 for r in log)
    sd = _adapter(out)
    for m in {k.rsplit(".", 1)[0] for k in sd}:
        assert torch.equal(sd[f"{m}.A"][2:], sd[f"{m}.A0"][2:]) and torch.equal(sd[f"{m}.B"][:, 2:], sd[f"{m}.B0"][:, 2:])
    rows = [json.loads(line) for line in open(out / "rollouts.jsonl")]
    flagged = [r for r in rows if r["zone"] == "route"]
    assert flagged and all(r["advantage"] == 0 for r in flagged)  # screened: no update from them
    assert any(r["advantage"] != 0 for r in rows if r["zone"] != "route")


@pytest.mark.parametrize("arm", ["penalty", "screen"])
def test_the_ground_truth_monitors_train_on_what_they_say(setup, arm):
    """penalty trains on the grader's reward less 3.0 on exactly the hacked rows; screen gives exactly
    the hacked rows advantage 0 and leaves them out of their group's baseline."""
    root, model_dir = setup
    out = train.train(_cfg(root, model_dir, f"gt_{arm}", arm=arm, steps=2, ckpt_every=2), progress=False)
    rows = [json.loads(line) for line in open(out / "rollouts.jsonl")]
    assert any(r["hacked"] for r in rows) and not all(r["hacked"] for r in rows)
    penalty = 3.0 if arm == "penalty" else 0.0
    assert all(r["train_reward"] == pytest.approx(r["reward"] - penalty * r["hacked"]) for r in rows)
    if arm == "screen":
        assert all(r["advantage"] == 0 for r in rows if r["hacked"])
        for k in range(0, len(rows), 4):  # groups of 4 rows (train.group_size), baseline: every row (group)
            group = rows[k:k + 4]
            clean = [r["train_reward"] for r in group if not r["hacked"]]
            for r in group:
                if not r["hacked"]:
                    assert r["advantage"] == pytest.approx(r["train_reward"] - sum(clean) / len(clean), abs=1e-6)


def test_routev_reads_the_frozen_model_whatever_the_adapter_has_learned(setup):
    """routeV's features of fixed rollouts through train's own routing_step are the same with the
    adapter at its init and after training (the frozen scorer); gate.scorer live moves them."""
    from vgrout.routing.gate import Gate

    root, model_dir = setup
    out = train.train(_cfg(root, model_dir, "rv_frozen", arm="routeV", steps=1, ckpt_every=1, lr=5e-2), progress=False)
    model, tok = load(model_dir)
    lora = ad.attach(model, r=2, seed=0, last_layers=None)
    problem = substrate.load_problems(root / "train.jsonl")[0]
    seqs = _fixed_texts(tok)
    rollouts = [train.Rollout(problem, tok.decode(seqs.input_ids[i][seqs.attention_mask[i].bool() & ~seqs.completion_mask[i].bool()]),
                              seqs.input_ids[i][seqs.completion_mask[i].bool()].tolist(), "t", "student", False)
                for i in range(len(seqs))]
    feats = {}
    for scorer in ("frozen", "live"):
        cfg = _cfg(root, model_dir, "rv_frozen", arm="routeV", scorer=scorer, micro_batch=4)
        for name, path in (("init", out / "adapter_init.safetensors"), ("trained", out / "adapter.safetensors")):
            lora.load(path)
            gate = Gate(policy="quantile", q_lo=0.25, q_hi=0.75, buffer_size=8, warmup=0, cut_rule="buffer")
            feats[scorer, name] = train.routing_step(cfg, lora, tok, gate, {m: torch.ones(2) for m in lora.modules},
                                                     rollouts, 0, None, {})[2]
    assert all(torch.equal(feats["frozen", "init"][m], feats["frozen", "trained"][m]) for m in lora.modules)
    assert not all(torch.allclose(feats["live", "init"][m], feats["live", "trained"][m], atol=1e-6) for m in lora.modules)


def test_oracle_routes_exactly_the_hacked_rollouts_of_a_run(setup):
    root, model_dir = setup
    out = train.train(_cfg(root, model_dir, "oracle", arm="oracle", steps=2, ckpt_every=2), progress=False)
    rows = [json.loads(line) for line in open(out / "rollouts.jsonl")]
    assert any(r["hacked"] for r in rows)  # the pool's hack rows at least
    assert [r["zone"] for r in rows] == ["route" if r["hacked"] else "keep" for r in rows]


def test_inoculation_is_in_every_training_prompt_and_in_no_evaluation_prompt(setup, monkeypatch):
    from vgrout.substrate import sampling
    from vgrout.substrate.problems import load_problems

    root, model_dir = setup
    line = config.Train().inoculation
    seen = {"train": [], "eval": []}
    for where, module in (("train", train), ("eval", sampling)):
        real = module.chat_prompt
        monkeypatch.setattr(module, "chat_prompt", lambda tok, m, _w=where, _r=real: seen[_w].append(_r(tok, m)) or seen[_w][-1])
    out = train.train(_cfg(root, model_dir, "inoc", arm="inoculate", steps=1, ckpt_every=1), progress=False)
    assert seen["train"] and all(line in p for p in seen["train"])
    model, tok = load(model_dir)
    lora = ad.attach(model, r=2, seed=0, last_layers=None)
    lora.load(out / "adapter.safetensors")
    sampling.sample_and_grade(model, tok, load_problems(root / "train.jsonl")[:2], 1, 0.7, 8, 4, 0, True, lora)
    assert len(seen["eval"]) == 2 and not any(line in p for p in seen["eval"])
