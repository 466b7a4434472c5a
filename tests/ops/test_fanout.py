"""The fan-out (vgrout.ops.fanout): the CI preset's run stages as tasks on a local Ray cluster give
what a serial `dvc repro` gives, survive a killed task and a killed fan-out, and refuse bad input
before any task starts."""
from __future__ import annotations

import json
import multiprocessing
import sys
from pathlib import Path

import pytest
import yaml

from tests.workspace import sh
from vgrout import config
from vgrout.io import InputError
from vgrout.ops import fanout

# ---------------------------------------------------------------------------- the lock file


def _merge_many(root: str, prefix: str, n: int, barrier) -> None:
    barrier.wait()  # both writers start together
    for i in range(n):
        fanout.merge_lock_entry(Path(root), f"train@{prefix}-{i}",
                                {"cmd": f"python stages/train.py {prefix} {i}", "outs": [{"path": f"x/{prefix}{i}",
                                                                                           "md5": "0" * 32}]})


def test_two_writers_finishing_together_lose_no_lock_entry(tmp_path):
    (tmp_path / "dvc.lock").write_text("schema: '2.0'\nstages:\n  model:\n    cmd: python stages/model.py\n")
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(2)
    procs = [ctx.Process(target=_merge_many, args=(str(tmp_path), p, 30, barrier)) for p in ("a", "b")]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    stages = yaml.safe_load((tmp_path / "dvc.lock").read_text())["stages"]
    assert set(stages) == {"model"} | {f"train@{p}-{i}" for p in "ab" for i in range(30)}
    assert stages["train@b-7"]["outs"][0]["path"] == "x/b7"
    assert not list(tmp_path.glob(".dvc.lock.*"))  # no temporary file left behind


# ---------------------------------------------------------------------------- bad input


def _params(tmp_path: Path, **blocks) -> Path:
    data = config.Params().model_dump()
    for block, values in blocks.items():
        data[block] = {**data[block], **values}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(data))
    return tmp_path


@pytest.mark.parametrize("blocks, address, message", [
    ({"fanout": {"gpu_share": 1.5}}, None, "fanout.gpu_share"),
    ({"train": {"arms": ["none", "routeZ"]}}, None, "routeZ"),
    ({}, "127.0.0.1:9", "no Ray cluster answers"),
    ({}, "nowhere", "HOST:PORT"),
])
def test_bad_input_is_an_error_before_any_task_starts(tmp_path, blocks, address, message):
    root = _params(tmp_path, **blocks)
    with pytest.raises(InputError, match=message):
        fanout.fanout(root, address=address)
    assert not (root / ".dvc").exists()  # nothing was started or written


# ---------------------------------------------------------------------------- through a DVC remote

TOY = """\
stages:
  prep:
    cmd: python step.py prep x
    deps: [step.py]
    outs: [data/x.txt]
  train:
    matrix: {arm: [a, b]}
    cmd: python step.py train ${item.arm}
    deps: [step.py, data/x.txt]
    outs:
      - runs/train/${item.arm}: {persist: true}
    metrics:
      - metrics/${item.arm}.json: {cache: false, persist: true}
  eval:
    matrix: {arm: [a, b]}
    cmd: python step.py eval ${item.arm}
    deps: [step.py, 'runs/train/${item.arm}']
    metrics:
      - metrics/eval-${item.arm}.json: {cache: false, persist: true}
"""
STEP = """\
import json, pathlib, sys
kind, arm = sys.argv[1:]
P = pathlib.Path
if kind == "prep":
    P("data").mkdir(exist_ok=True)
    P("data/x.txt").write_text("x")
elif kind == "train":
    P(f"runs/train/{arm}").mkdir(parents=True, exist_ok=True)
    P(f"runs/train/{arm}/w.txt").write_text(P("data/x.txt").read_text() + arm)
    P("metrics").mkdir(exist_ok=True)
    P(f"metrics/{arm}.json").write_text("{}")
else:
    P(f"metrics/eval-{arm}.json").write_text(json.dumps({"w": P(f"runs/train/{arm}/w.txt").read_text()}))
"""


def _toy(root: Path) -> Path:
    root.mkdir()
    (root / "dvc.yaml").write_text(TOY)
    (root / "step.py").write_text(STEP)
    (root / "params.yaml").write_text(config.render(config.Params()))
    sh("git init -q && dvc init -q && git add -A && git -c user.name=t -c user.email=t@t commit -qm toy", root)
    return root


@pytest.mark.slow
def test_through_a_dvc_remote_the_tasks_share_no_cache_and_the_lock_equals_a_serial_repro(tmp_path):
    serial, head = _toy(tmp_path / "serial"), _toy(tmp_path / "head")
    sh("dvc repro -q", serial)
    sh(f"dvc remote add store {tmp_path / 'store'}", head)
    out = sh(f"{sys.executable} -m vgrout.cli fanout --remote store", head)
    assert "4 of 4 run stages to run" in out, out
    lock = lambda root: yaml.safe_load((root / "dvc.lock").read_text())["stages"]  # noqa: E731
    assert lock(head) == lock(serial)
    assert json.loads((head / "metrics/eval-b.json").read_text()) == {"w": "xb"}
    assert (head / "runs/train/a/w.txt").read_text() == "xa"  # pulled back from the remote
    assert json.loads(sh("dvc status --json", head)) == {}
    # each task had its own cache: what it made reached the head only through the remote
    assert (head / ".dvc/tmp/fanout/runs/a/.dvc/cache").is_dir()
    assert sh("dvc status -c -r store --json", head).strip() in ("{}", "")


def test_inputs_digest_moves_with_params_and_code_not_with_what_the_pipeline_writes(tmp_path):
    head = _toy(tmp_path / "head")
    sh("dvc repro -q prep", head)
    outputs = fanout.plan(head).outputs
    before = fanout.inputs_digest(head, outputs)
    (head / "dvc.lock").write_text((head / "dvc.lock").read_text() + "\n")
    (head / "data/x.txt").unlink()
    (head / "metrics").mkdir()
    (head / "metrics/a.json").write_text('{"n": 1}')
    assert fanout.inputs_digest(head, outputs) == before
    (head / "step.py").write_text((head / "step.py").read_text() + "\n# edited\n")
    (head / "run.log").write_text("a log written inside the tree, not ignored by git\n")
    assert fanout.changed_files(before, fanout.inputs_digest(head, outputs)) == ["run.log", "step.py"]


def test_a_second_fanout_on_the_same_checkout_is_refused(tmp_path):
    root = _params(tmp_path)
    with fanout.only_fanout(root):
        with pytest.raises(InputError, match="another `vgrout fanout` runs"):
            fanout.fanout(root)


def test_the_tasks_start_seed_by_seed():
    """A budget that ends mid-grid leaves whole leading seeds (plans/decisive.yaml decides on those: seeds_run
    leading): the run stages go to Ray seed by seed, each seed's in DVC's topological order, eval_base (no seed)
    first. A stage reading another seed's stage keeps the topological order as it was."""
    R = fanout.RunStage
    topo = [R("eval_base", (), (), ()), *(R(f"train@{a}-{s}", (), (), ()) for a in ("none", "routeV") for s in (100, 101)),
            *(R(f"eval@{a}-{s}", (), (f"train@{a}-{s}",), ()) for a in ("none", "routeV") for s in (100, 101))]
    assert [r.name for r in fanout.seed_major(topo)] == [
        "eval_base", "train@none-100", "train@routeV-100", "eval@none-100", "eval@routeV-100",
        "train@none-101", "train@routeV-101", "eval@none-101", "eval@routeV-101"]
    across = [*topo, R("eval@x-100", (), ("train@none-101",), ())]
    assert fanout.seed_major(across) == across
