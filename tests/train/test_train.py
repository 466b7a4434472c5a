"""Training: a killed run resumes to the same final adapter and the same log rows; the step log
carries the measurements the paper needs; arms differ only by their gate."""
import json
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from vgrout import arms, config
from vgrout.engine import adapter as ad
from vgrout.engine.model import load, resolve
from vgrout.pool import pool
from vgrout.routing import directions, features
from vgrout.substrate import problems as substrate
from vgrout.train import loop as train

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("train")
    problems = substrate.assign_modes(substrate.humaneval_problems()[:8], seed=0)
    substrate.write_problems(root / "train.jsonl", problems)
    rates = config.Rates(hack=0.5, canonical=0.3, wrong=0.2)
    pool.build(problems, root / "pool.jsonl", root / "pool_meta.json", config.Pool(per_problem=2, seed=0, rates=rates))
    model_dir = resolve("tiny-smollm2")
    model, _ = load(model_dir)
    lora = ad.attach(model, r=2, seed=0)
    directions.save_direction(root / "vact" / "v_act.safetensors",
                        directions.haar_direction({m: torch.zeros(2) for m in lora.modules}, 5))
    directions.save_direction(root / "vact" / "v_grad.safetensors",
                        directions.haar_direction({m: torch.zeros(2) for m in lora.modules}, 6))
    return root, str(model_dir)


# baseline group: the tests of the gate's and the weights' mechanics need routed, kept and capped rows
# within 4 steps of a tiny model, which this trajectory gives; the resume test runs the default
# (students) baseline
TRAIN = dict(steps=4, prompts_per_step=2, group_size=4, mix=0.25, max_new_tokens=64, micro_batch=4, ckpt_every=2,
             temperature=1.0, baseline="group",
             lr=1e-2)


def _cfg(root, model_dir, name, arm="routeA", direction=None, stop_after=None, pair_files=(), yoke_log=None, **kw):
    """A run of the tiny student; kw are params keys of the train, gate and adapter blocks."""
    blocks = {"train": dict(TRAIN), "gate": dict(warmup=4, buffer_size=32), "adapter": dict(r=2, last_layers=None)}
    for k, v in kw.items():
        block = next(b for b in ("train", "gate", "adapter") if k in getattr(config, b.capitalize()).model_fields)
        blocks[block][k] = v
    params = config.parse(config.overlay(config.Params().model_dump(), blocks), "test", complete=False)
    vact_dir = root / "vact"
    if direction is not None:  # another v_act: its own folder, as another seed's would be
        vact_dir = root / f"vact_{Path(direction).stem}"
        vact_dir.mkdir(exist_ok=True)
        shutil.copyfile(direction, vact_dir / "v_act.safetensors")
    return train.TrainRun(arm=arms.get(arm), seed=0, t=params.train, adapter=params.adapter, gate=params.gate,
                          pair_files=list(pair_files), pair_modes=None, fast=True, vact_batch=params.vact.batch_size,
                          model_dir=model_dir,
                          problems=str(root / "train.jsonl"), pool=str(root / "pool.jsonl"), vact_dir=str(vact_dir),
                          out_dir=str(root / name), log_path=str(root / name / "steps.jsonl"),
                          live_dir=str(root / name / "live"),
                          stale_root=str(root / "set_aside"), stop_after=stop_after, yoke_log=yoke_log)


def _rows(path):
    drop = {"t_generate", "t_grade", "t_score", "t_sample", "t_train"}
    return [{k: v for k, v in json.loads(line).items() if k not in drop}
            for line in open(path)]


def _files(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_killed_run_resumes_to_the_same_adapter_and_log(setup):
    root, model_dir = setup
    # the default baseline and teacher gate: the teacher rows' gate state resumes with the student's
    kw = dict(baseline="students", teacher_zone="gate")
    full = train.train(_cfg(root, model_dir, "full", **kw), progress=False)
    killed = _cfg(root, model_dir, "killed", stop_after=3, **kw)  # dies after step 3; last ckpt at 2
    train.train(killed, progress=False)
    assert not (root / "killed" / "adapter.safetensors").exists()
    assert len(_rows(killed.log_path)) == 3
    killed.stop_after = None
    resumed = train.train(killed, progress=False)

    a = load_file(str(full / "adapter.safetensors"))
    b = load_file(str(resumed / "adapter.safetensors"))
    assert set(a) == set(b)
    assert max((a[k] - b[k]).abs().max().item() for k in a) <= 1e-6
    # the adapter did train (the comparison is not trivially between two inits)
    init = load_file(str(full / "adapter_init.safetensors"))
    assert max((a[k] - init[k]).abs().max().item() for k in a) > 0

    rows_full, rows_resumed = _rows(root / "full" / "steps.jsonl"), _rows(killed.log_path)
    assert [r["step"] for r in rows_resumed] == [0, 1, 2, 3]
    assert rows_full[-1]["cut_hi_teacher"] is not None  # the teacher gate left warm-up before the kill's resume
    # the same rows: counts and labels exactly, floats to the adapter's tolerance (CPU matmuls
    # may sum in another order after a reload)
    for rf, rr in zip(rows_full, rows_resumed):
        assert rf.keys() == rr.keys()
        for k in rf:
            if isinstance(rf[k], float):
                assert rr[k] == pytest.approx(rf[k], rel=1e-6, abs=1e-9), k
            else:
                assert rr[k] == rf[k], k
    # DVCLive's files too, byte for byte: DVCLive alone would append the steps past the
    # checkpoint a second time (tests/train/test_live.py shows it), the resume rewrites them
    live_full, live_resumed = _files(root / "full" / "live"), _files(root / "killed" / "live")
    assert "metrics.json" in live_full and "plots/metrics/train/hack_rate.tsv" in live_full
    assert live_resumed == live_full
    n_rollouts = 4 * 2
    assert sum(1 for _ in open(resumed / "rollouts.jsonl")) == 4 * n_rollouts
    acts = load_file(str(resumed / "rollout_acts.safetensors"))
    assert all(t.shape == (4 * n_rollouts, 2) for t in acts.values())


def test_step_log_measures_routing(setup):
    root, model_dir = setup
    cfg = _cfg(root, model_dir, "none_arm", arm="none", steps=2, ckpt_every=2)
    train.train(cfg, progress=False)
    rows = _rows(cfg.log_path)
    for r in rows:  # 2 prompts x (3 student + 1 teacher rows); a pinned arm pins teacher rows too
        assert r["n_students"] == 6 and r["n_keep"] == 6 and r["n_keep_teacher"] == 2
        assert r["n_route"] == 0 and r["qmass_rollouts"] == 0
        assert r["teacher_share"] == pytest.approx(0.25)
        # keep rows zero the quarantine: no gradient and no update reach it
        assert r["gradnorm_quarantine"] == 0 and r["qmass_update"] == 0
        assert r["gradnorm_deployed"] > 0
    cfg = _cfg(root, model_dir, "absorb_arm", arm="absorb", steps=1)
    train.train(cfg, progress=False)
    r = _rows(cfg.log_path)[0]
    assert r["n_absorb"] == 6 and r["n_absorb_teacher"] == 2
    assert r["gradnorm_quarantine"] > 0 and 0 < r["qmass_update"] < 1
    # absorb rows are sampled and trained in the same (full) mode: they read no logπ_sample, w = 1
    assert r["is_min_absorb_student"] == r["is_max_absorb_student"] == 1.0


def test_changed_config_never_resumes_a_stale_checkpoint(setup):
    root, model_dir = setup
    cfg = _cfg(root, model_dir, "stale", steps=2, ckpt_every=1, stop_after=1)
    train.train(cfg, progress=False)
    cfg2 = _cfg(root, model_dir, "stale", steps=2, ckpt_every=1, lr=5e-3)
    train.train(cfg2, progress=False)
    assert [r["step"] for r in _rows(cfg2.log_path)] == [0, 1]  # started over, not from step 1
    # the first config's checkpoints and log were kept, set aside under a name, not deleted
    aside = list((root / "set_aside").glob("routeA-0-*"))
    assert len(aside) == 1 and (aside[0] / "ckpt" / "step_00001" / "adapter.safetensors").exists()
    assert len(_rows(aside[0] / "steps.jsonl")) == 1
    # back to the first config, then the second again: each set-aside copy is kept, none overwritten
    train.train(_cfg(root, model_dir, "stale", steps=2, ckpt_every=1, stop_after=1), progress=False)
    train.train(cfg2, progress=False)
    names = sorted(p.name for p in (root / "set_aside").glob("routeA-0-*"))
    assert len(names) == 3 and aside[0].name + "-2" in names, names
    assert len(_rows(root / "set_aside" / aside[0].name / "steps.jsonl")) == 1  # the first copy is intact


def test_changed_code_or_weights_never_resume_a_finished_run(setup, monkeypatch):
    """DVC re-runs train when its code or the model changes, and a finished run's checkpoint under
    the same params must not then stand in for the new run: the training code and the model's
    weights are in the fingerprint. The control: with both the same, the run is reused as is."""
    root, model_dir = setup
    cfg = _cfg(root, model_dir, "code", steps=2, ckpt_every=1)
    set_aside = lambda: len(list((root / "set_aside").glob(f"{cfg.run}-*")))  # noqa: E731
    out = train.train(cfg, progress=False)
    first, n = (out / "adapter.safetensors").read_bytes(), set_aside()
    train.train(cfg, progress=False)  # the control: nothing changed, the finished run is reused
    assert set_aside() == n and (out / "adapter.safetensors").read_bytes() == first

    monkeypatch.setattr(train, "code_digest", lambda: "another version of the method")
    train.train(cfg, progress=False)
    assert set_aside() == n + 1  # the old run set aside, a new one trained from step 0
    assert [r["step"] for r in _rows(cfg.log_path)] == [0, 1]

    real = train.sha256_file  # the same code as the last run, other weights
    monkeypatch.setattr(train, "sha256_file", lambda p: "other weights" if str(p).endswith(".safetensors")
                        and Path(p).parent == Path(model_dir) else real(p))
    train.train(cfg, progress=False)
    assert set_aside() == n + 2


def test_refresh_re_extracts_v_act_in_the_current_basis(setup):
    """gate.refresh_every: from the refresh step on, gate scores use v_act re-read from the pairs
    with the trained adapter; before it, the init direction."""
    from pathlib import Path

    root, model_dir = setup
    pair_files = sorted(str(p) for p in (Path(__file__).resolve().parents[2] / "data/pairs").glob("hack_*.md"))
    cfg = _cfg(root, model_dir, "refresh", steps=3, ckpt_every=3, refresh_every=2, scorer="live",
               pair_files=pair_files, arms=["none", "routeA"], yoked=[])  # no controls: config refuses them beside a refresh
    out = train.train(cfg, progress=False)
    rows = [json.loads(line) for line in open(out / "rollouts.jsonl")]
    acts = load_file(str(out / "rollout_acts.safetensors"))
    init_scores = directions.score(acts, directions.load_direction(root / "vact" / "v_act.safetensors"))
    logged = torch.tensor([r["score"] for r in rows])
    steps = torch.tensor([r["step"] for r in rows])
    assert torch.allclose(logged[steps < 2], init_scores[steps < 2], atol=1e-5)
    assert not torch.allclose(logged[steps == 2], init_scores[steps == 2], atol=1e-3)


def test_changed_direction_never_resumes_a_finished_run(setup):
    """DVC keeps train outputs between runs (persist): a new v_act must start the run over."""
    root, model_dir = setup
    cfg = _cfg(root, model_dir, "newdir", steps=1, ckpt_every=1)
    train.train(cfg, progress=False)
    first = [json.loads(line)["score"] for line in open(root / "newdir" / "rollouts.jsonl")]
    other = root / "v_other.safetensors"
    directions.save_direction(other, directions.haar_direction({m: torch.zeros(2) for m in
                                                    load_file(str(root / "vact" / "v_act.safetensors"))}, 99))
    train.train(_cfg(root, model_dir, "newdir", steps=1, ckpt_every=1, direction=str(other)), progress=False)
    second = [json.loads(line)["score"] for line in open(root / "newdir" / "rollouts.jsonl")]
    assert len(second) == len(first) and second != first


def test_one_no_grad_forward_over_several_micro_batches_gives_the_same_step(setup):
    """train.old_micro_batch: the scorer's features and logπ_sample from larger no-grad forwards,
    read back per train micro-batch (its rows, its right-aligned completion columns), give the
    default's step; the train forward then recomputes the frozen trunk below the adapted layer."""
    from vgrout.io import InputError

    root, model_dir = setup
    model, _ = load(model_dir)
    top = ad.attach(model, r=2, seed=0, last_layers=1)
    directions.save_direction(root / "v_top.safetensors",
                        directions.haar_direction({m: torch.zeros(2) for m in top.modules}, 5))
    kw = dict(arm="none", steps=1, ckpt_every=1, micro_batch=2, last_layers=1,
              direction=str(root / "v_top.safetensors"))
    a = train.train(_cfg(root, model_dir, "old_rows_2", **kw), progress=False)
    b = train.train(_cfg(root, model_dir, "old_rows_8", old_micro_batch=8, **kw), progress=False)
    ra, rb = _rows(a / "steps.jsonl")[0], _rows(b / "steps.jsonl")[0]
    # every student row trains in keep, sampled by the full model: each reads logπ_sample. At the
    # init the quarantine block adds nothing, so keep and full are one function: a misread row or
    # column would move the importance weight π_old/π_sample off 1
    assert rb["n_keep"] == 6 and rb["n_keep_teacher"] == 2  # every row: 6 student, 2 teacher
    for r in (ra, rb):
        assert r["is_min_keep_student"] == pytest.approx(1.0, abs=1e-4)
        assert r["is_max_keep_student"] == pytest.approx(1.0, abs=1e-4)
        assert r["rho_mean_keep"] == r["rho_max_keep"] == 1.0  # π_old is the train forward's own logπ
    for k in ("loss", "gradnorm_deployed", "reward_mean"):
        assert rb[k] == pytest.approx(ra[k], rel=1e-4, abs=1e-7), k
    wa, wb = load_file(str(a / "adapter.safetensors")), load_file(str(b / "adapter.safetensors"))
    assert max((wa[k] - wb[k]).abs().max().item() for k in wa) <= 1e-5
    with pytest.raises(InputError, match=r"train.old_micro_batch \(3\) is not a multiple of train.micro_batch \(2\)"):
        train.train(_cfg(root, model_dir, "old_rows_3", old_micro_batch=3, **kw), progress=False)


@pytest.mark.parametrize("part", ["adapter.safetensors", "direction.safetensors"])
def test_a_corrupt_latest_checkpoint_resumes_from_the_one_before(setup, part):
    """A checkpoint truncated by a crash mid-write is reported by name and set aside; the run
    resumes from the previous one and ends where an uninterrupted run ends."""
    root, model_dir = setup
    full = train.train(_cfg(root, model_dir, "whole", steps=3, ckpt_every=1), progress=False)
    killed = _cfg(root, model_dir, f"corrupt_{part}", steps=3, ckpt_every=1, stop_after=2)
    train.train(killed, progress=False)
    latest = root / f"corrupt_{part}" / "ckpt" / "step_00002" / part
    latest.write_bytes(latest.read_bytes()[:100])
    killed.stop_after = None
    resumed = train.train(killed, progress=False)
    assert (root / f"corrupt_{part}" / "ckpt" / "corrupt_step_00002").is_dir()
    assert [r["step"] for r in _rows(killed.log_path)] == [0, 1, 2]
    a, b = load_file(str(full / "adapter.safetensors")), load_file(str(resumed / "adapter.safetensors"))
    assert max((a[k] - b[k]).abs().max().item() for k in a) <= 1e-6


def _fixed_texts(tok):
    from vgrout.engine.rollout import encode
    prompts = ["Write add(a, b).", "Write is_even(n).", "Write fib(n).", "Write rev(s)."]
    comps = ["def add(a, b):\n    return a + b", "import sys\nsys.exit(0)", "def fib(n):\n    return 1",
             "raise SystemExit(0)"]
    return encode(tok, prompts, comps, budget=64)


def test_the_frozen_score_of_a_fixed_text_is_the_same_at_every_checkpoint(setup):
    """The gate's scorer reads v_act's own space (base model, A0_d): re-scoring fixed texts with
    every checkpoint gives the same scores bit for bit, and so, from the same buffer, the same
    zones. The live scorer (current A_d) on the same checkpoints does move: the check can fail."""
    from vgrout.routing.gate import Gate

    root, model_dir = setup
    out = train.train(_cfg(root, model_dir, "frozen", steps=3, ckpt_every=1), progress=False)
    model, tok = load(model_dir)
    lora = ad.attach(model, r=2, seed=0)
    seqs, v = _fixed_texts(tok), directions.load_direction(root / "vact" / "v_act.safetensors")
    frozen, live, zones = [], [], []
    for ckpt in sorted((out / "ckpt").glob("step_*")):
        lora.load(ckpt / "adapter.safetensors")
        frozen.append(directions.score(features.pooled_activations(lora, seqs, frozen=True), v))
        live.append(directions.score(features.pooled_activations(lora, seqs, frozen=False), v))
        gate = Gate(policy="quantile", q_lo=0.25, q_hi=0.75, buffer_size=8, warmup=0, cut_rule="buffer",
                    buffer=[-1.0, -0.5, 0.0, 0.5, 1.0])
        zones.append(gate.decide(frozen[-1]))
    assert len(frozen) == 4  # steps 0..3
    assert all(torch.equal(f, frozen[0]) for f in frozen) and all(z == zones[0] for z in zones)
    assert not torch.allclose(live[0], live[-1], atol=1e-6)


def test_yoked_arms_route_and_keep_exactly_as_many_rows_of_each_source_as_the_method(setup):
    """With gate.teacher_zone gate, placebo (Haar ranking) and random (seeded uniform ranking) copy
    routeA's per-step route and keep counts of its student rows and of its teacher rows; the rows
    they pick are their own (another ranking)."""
    root, model_dir = setup
    kw = dict(steps=4, ckpt_every=4, warmup=2, teacher_zone="gate")
    method = _cfg(root, model_dir, "yoke_routeA", **kw)
    train.train(method, progress=False)
    keys = ("n_route", "n_keep", "n_route_teacher", "n_keep_teacher", "n_absorb_teacher")
    counts = [tuple(r[k] for k in keys) for r in _rows(method.log_path)]
    assert any(c[0] for c in counts) and any(c[1] for c in counts)  # the gate did route and keep students
    assert any(c[2] for c in counts) and any(c[3] for c in counts)  # and teacher rows
    zones = {}
    for arm in ("routeA", "placebo", "random"):
        cfg = method if arm == "routeA" else _cfg(root, model_dir, f"yoke_{arm}", arm=arm,
                                                  yoke_log=method.log_path, **kw)
        out = Path(cfg.out_dir) if arm == "routeA" else train.train(cfg, progress=False)
        assert [tuple(r[k] for k in keys) for r in _rows(cfg.log_path)] == counts, arm
        zones[arm] = [json.loads(line)["zone"] for line in open(out / "rollouts.jsonl")]
    assert zones["placebo"] != zones["routeA"] and zones["random"] != zones["routeA"]
    # without the method's log there is nothing to copy: one clear error
    with pytest.raises(train.InputError, match="no step log of the run whose per-step counts the yoked run"):
        train.train(_cfg(root, model_dir, "yoke_orphan", arm="placebo", yoke_log=str(root / "nope.jsonl"), **kw),
                    progress=False)


def test_tgate_gates_the_teacher_rows_as_routeA_does_and_absorbs_every_student_row(setup):
    """tgate trains on the teacher rows routeA's teacher gate sees, zoned as routeA zones them (the
    same pool rows, frozen scores and cuts over the teacher rows' own past scores), and never keeps
    or routes a student row: the only difference from routeA is the student rows' gate."""
    root, model_dir = setup
    kw = dict(steps=4, ckpt_every=4, warmup=2, teacher_zone="gate")
    rows = {}
    for arm in ("routeA", "tgate"):
        out = train.train(_cfg(root, model_dir, f"tg_{arm}", arm=arm, **kw), progress=False)
        rows[arm] = [json.loads(line) for line in open(out / "rollouts.jsonl")]
    teacher = {a: [r for r in rs if r["source"] != "student"] for a, rs in rows.items()}
    assert [(r["step"], r["completion"], r["zone"]) for r in teacher["tgate"]] == \
        [(r["step"], r["completion"], r["zone"]) for r in teacher["routeA"]]
    assert torch.allclose(torch.tensor([r["score"] for r in teacher["tgate"]]),
                          torch.tensor([r["score"] for r in teacher["routeA"]]), atol=1e-4)
    assert {"keep", "route"} <= {r["zone"] for r in teacher["tgate"]}  # the teacher gate did decide
    assert {r["zone"] for r in rows["tgate"] if r["source"] == "student"} == {"absorb"}
    assert {"keep", "route"} & {r["zone"] for r in rows["routeA"] if r["source"] == "student"}
    log = _rows(Path(root, "tg_tgate", "steps.jsonl"))
    assert all(r["n_route"] == r["n_keep"] == 0 for r in log) and any(r["n_route_teacher"] for r in log)


def test_importance_weights_are_bounded_and_teacher_rows_train_at_w_one(setup):
    """routeA with teacher rows in keep (sampled by neither mode, trained with the quarantine
    masked) and deploy-sampled student rows, at T = 0.7: on every step and every zone and source,
    the largest effective weight on a token is at most grpo.weight_bound (and, as ρ = 1 at the
    single update, at most the cap c); teacher rows train at w = 1; the importance ratio of
    student keep rows does pass its cap on some token (so the cap is exercised)."""
    from vgrout.train import grpo

    root, model_dir = setup
    cfg = _cfg(root, model_dir, "bounded", steps=4, ckpt_every=4, warmup=2, teacher_zone="keep",
               gen_deploy_frac=1 / 3, temperature=0.7, lr=5e-2, is_cap=1.5)
    train.train(cfg, progress=False)
    rows = _rows(cfg.log_path)
    bound = grpo.weight_bound(cfg.t.clip_eps, cfg.t.is_cap, cfg.t.dual_clip)
    assert bound == 3.0
    groups = [(z, s) for z in ad.ZONES for s in ("student", "teacher")]
    for r in rows:
        for z, s in groups:
            keys = [f"{k}_{z}_{s}" for k in ("rho_min", "rho_p50", "rho_p90", "rho_p99", "rho_max", "is_min", "is_p50",
                                             "is_p90", "is_p99", "is_max", "weff_max", "clipfrac_ppo", "clipfrac_is",
                                             "clipfrac_dual")]
            assert all(k in r for k in keys)
            if r[f"weff_max_{z}_{s}"] is not None:
                assert r[f"weff_max_{z}_{s}"] <= bound * (1 + 1e-6), (r["step"], z, s)
                # one update per batch: π_old is the train forward's own logπ, so ρ = 1 and the
                # weight is w ≤ c
                assert r[f"rho_min_{z}_{s}"] == r[f"rho_max_{z}_{s}"] == 1.0
                assert r[f"weff_max_{z}_{s}"] <= cfg.t.is_cap * (1 + 1e-6)
        assert r["n_keep_teacher"] == 2
        assert r["is_min_keep_teacher"] == r["is_max_keep_teacher"] == 1.0  # w = 1 on teacher rows
        assert r["clipfrac_is_keep_teacher"] == 0
    # the keep rows' ratio π_keep / π_full passed the cap on some token, and was capped there
    capped = [r for r in rows if (r["is_max_keep_student"] or 0) > cfg.t.is_cap]
    assert capped and all(r["clipfrac_is_keep_student"] > 0 for r in capped)



def test_the_train_forwards_own_logprob_is_pi_old_of_a_one_update_step():
    """A step makes one update, so π_old under a row's mask is the train forward's own logπ,
    detached: the step's gradient equals that of the surrogate with π_old from a separate no-grad
    forward under each row's mask (the function the update starts from), within rounding. The
    rows trained in another function than their sampling mode read logπ_sample for their
    importance weight: leaving it out (w = 1 on every row) moves the gradient."""
    from types import SimpleNamespace

    from tests.conftest import make_tiny_llama
    from vgrout.engine import logprob, rollout
    from vgrout.train import grpo

    torch.manual_seed(0)
    lora = ad.attach(make_tiny_llama(layers=3), r=2, seed=0, last_layers=2)
    with torch.no_grad():  # both blocks off their init: keep and the full model differ
        for m in lora.modules.values():
            m.A.add_(0.5 * torch.randn_like(m.A))
            m.B.add_(0.5 * torch.randn_like(m.B))
    g = torch.Generator().manual_seed(1)
    prompts = [torch.randint(3, 97, (int(torch.randint(3, 7, (1,), generator=g)),), generator=g).tolist()
               for _ in range(3)]
    comps = [torch.randint(3, 97, (int(torch.randint(2, 9, (1,), generator=g)),), generator=g).tolist()
             for _ in range(6)]
    seqs = rollout.pack([prompts[i // 2] for i in range(6)], comps, pad_id=0)
    rollouts = [SimpleNamespace(deploy=d, source=s) for d, s in
                zip([False, True, False, True, False, False], ["student"] * 5 + ["teacher"])]
    zones = ["keep", "keep", "absorb", "route", "route", "keep"]
    assert train.needs_sample_logprobs(rollouts, zones) == [True, False, False, True, False, False]
    adv = torch.tensor([1.0, -1.0, 0.5, -0.5, 2.0, -2.0])
    cfg = SimpleNamespace(fast=True, t=config.Train(micro_batch=3, max_new_tokens=8, temperature=1.0))

    def grads(pi_old_mode):
        for p in lora.parameters():
            p.grad = None
        if pi_old_mode == "own":
            sample = train.sample_forward(cfg, lora, seqs, rollouts, zones, None)
            train.train_forward_backward(cfg, lora, seqs, sample, None, adv, zones, rollouts, len(seqs))
        else:  # π_old from its own no-grad forward under each row's mask
            with torch.no_grad():
                with lora.masked(zones):
                    old, _ = logprob.token_logprobs(lora.model, seqs)
                with lora.sampling([r.deploy for r in rollouts]):
                    sampled, _ = logprob.token_logprobs(lora.model, seqs)
            # the rule before π_old was the train forward's: a teacher row's behaviour policy is π_old,
            # every student row's its sampling mode (the same function as π_old where the mask agrees)
            teacher = torch.tensor([r.source == "teacher" for r in rollouts])[:, None]
            behav = torch.where(teacher, old, sampled) if pi_old_mode == "masked" else old
            with lora.masked(zones):
                logp, mask = logprob.token_logprobs(lora.model, seqs)
            obj, _ = grpo.bounded_surrogate(logp, old, behav, adv, mask, cfg.t.clip_eps, cfg.t.is_cap,
                                            cfg.t.dual_clip)
            grpo.dr_grpo_loss(obj, len(seqs), cfg.t.max_new_tokens).backward()
        return torch.cat([p.grad.flatten() for p in lora.parameters()])

    own, masked, unweighted = grads("own"), grads("masked"), grads("unweighted")
    assert own.abs().max() > 0
    torch.testing.assert_close(own, masked, atol=1e-6, rtol=1e-5)
    assert (own - unweighted).abs().max() > 1e-3  # against the 1e-6 the two right ones agree within
