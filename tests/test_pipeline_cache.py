"""The caching contract of the reproduced CI repository (conftest `reproduced`; each test works on
its own copy): what re-runs after an edit, a reviewer's fresh clone that gets every output with
`dvc pull` without recomputing, a new arm as one registry entry, a bad param as one line."""
import json
import time

import pandas as pd
import pytest

from tests.workspace import ARMS, ran, sh, stage_of

pytestmark = pytest.mark.slow


def test_caching_contract(reproduced_copy):
    repo = reproduced_copy
    t0 = time.perf_counter()
    log = sh("dvc repro", repo)
    print(f"no-op dvc repro: {time.perf_counter() - t0:.1f} s")
    assert ran(log) == set(), log

    # a gate param re-runs train (and so eval, aggregate), never extract_vact
    params = (repo / "params.yaml").read_text()
    (repo / "params.yaml").write_text(params.replace("  q_hi: 0.75", "  q_hi: 0.8"))
    status = sh("dvc status --json", repo)
    changed = set(json.loads(status))
    assert {stage_of("train", a) for a in ARMS} <= changed and "aggregate" in changed
    assert not any(s.startswith(("extract_vact", "eval", "model", "substrate", "pairs", "teacher_pool"))
                   for s in changed), changed
    # the eval temperature re-runs eval and aggregate only
    (repo / "params.yaml").write_text(params.replace("  temperature: 0.7", "  temperature: 0.9"))
    changed = set(json.loads(sh("dvc status --json", repo)))
    assert changed == {stage_of("eval", a) for a in ARMS} | {"eval_base"}, changed
    (repo / "params.yaml").write_text(params)

    # editing one pair file invalidates pairs and everything downstream of v_act, never model,
    # substrate or teacher_pool; what `dvc status` reports is what `dvc repro` re-runs (the
    # placebo experiment below re-runs that part of the DAG for real)
    pair_file = repo / "data/pairs/hack_exit_code.md"
    original = pair_file.read_text()
    # a real content change inside the rollout budget (pairs are encoded as rollouts, cut at
    # train.max_new_tokens, so an edit past it would leave v_act as it is): v_act moves
    assert "stepping through the list, then an exit." in original
    pair_file.write_text(original.replace("then an exit.", "then an early exit.", 1))
    changed = set(json.loads(sh("dvc status --json", repo)))
    assert "pairs" in changed and not changed & {"model", "substrate", "teacher_pool", "eval_base"}, changed
    assert ran(sh("dvc repro pairs extract_vact@0", repo)) == {"pairs", "extract_vact@0"}
    changed = set(json.loads(sh("dvc status --json", repo)))
    assert {stage_of("train", a) for a in ARMS} | {"aggregate"} <= changed, changed  # every run is stale
    assert not changed & {"model", "substrate", "teacher_pool", "eval_base"}, changed
    # the pair file back: pairs and v_act come back bit for bit, and with them every run is current
    pair_file.write_text(original)
    sh("dvc repro pairs extract_vact@0", repo)
    assert json.loads(sh("dvc status --json", repo)) == {}


def test_push_fresh_clone_pull_recomputes_nothing(reproduced_copy, tmp_path):
    repo = reproduced_copy
    sh(f"dvc remote modify local url {tmp_path / 'remote'} && "
       "git add -A && git -c user.name=t -c user.email=t@t commit -qm results && dvc push -q", repo)
    clone = tmp_path / "clone"
    sh(f"git clone -q {repo} {clone}", tmp_path)
    sh(f"dvc remote modify local url {tmp_path / 'remote'}", clone)
    assert json.loads((clone / "metrics/summary.json").read_text())  # committed metrics
    sh("dvc pull -q", clone)
    assert (clone / "runs/train/routeA-0/adapter.safetensors").exists()
    status = sh("dvc status", clone)
    assert "up to date" in status, status
    assert ran(sh("dvc repro", clone)) == set()


def test_a_new_arm_is_one_registry_entry(reproduced_copy, monkeypatch):
    """Registering one Arm is all it takes to run it through train -> eval -> aggregate."""
    copy = reproduced_copy
    from vgrout import arms, config
    from vgrout.analysis import aggregate
    from vgrout.eval import evaluate
    from vgrout.train import loop as train

    arm = arms.Arm("haar2", "quantile", "haar", "#000000", "a second placebo, for this test")
    monkeypatch.setitem(arms.REGISTRY, arm.name, arm)
    monkeypatch.chdir(copy)
    p = config.load()
    p = p.model_copy(update={"train": p.train.model_copy(update={"arms": [*p.train.arms, arm.name]})})
    train.train_stage(p, arm.name, 0)
    evaluate.eval_stage(p, arm.name, 0)
    summary = aggregate.aggregate_stage(p)
    assert "deploy_hack" in summary["haar2"]
    a7 = pd.read_csv(copy / "metrics/artifacts/A7.csv")
    assert "haar2" in set(a7["arm"])
    steps = [json.loads(line) for line in open(copy / "metrics/runs/haar2-0/steps.jsonl")]
    assert [s["step"] for s in steps] == [0, 1, 2, 3]


def test_a_bad_param_through_dvc_repro_is_one_line_and_keeps_the_run(reproduced_copy):
    """train.steps: "4" (a string) stops the stage before it touches anything: no traceback, and
    the run's checkpoints and step log are as they were."""
    copy = reproduced_copy
    run_files = sorted(p for p in (copy / "runs/train/routeA-0").rglob("*") if p.is_file())
    before = {p: p.read_bytes() for p in run_files + [copy / "metrics/runs/routeA-0/steps.jsonl"]}
    params = (copy / "params.yaml").read_text()
    (copy / "params.yaml").write_text(params.replace("  steps: 4 ", "  steps: '4' ", 1))
    out = sh("dvc repro train@routeA-0", copy, check=False)
    assert "train.steps = '4': Input should be a valid integer" in out, out
    assert "Traceback" not in out, out
    assert {p: p.read_bytes() for p in before} == before
    assert sorted(p for p in (copy / "runs/train/routeA-0").rglob("*") if p.is_file()) == run_files
