"""The fan-out (vgrout.fanout): the CI preset's run stages as tasks on a local Ray cluster give
what a serial `dvc repro` gives, survive a killed task and a killed fan-out, and refuse bad input
before any task starts."""
from __future__ import annotations

import json
import multiprocessing
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.workspace import ci_copy, env_for, sh
from vgrout import config, fanout
from vgrout.io import InputError

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
