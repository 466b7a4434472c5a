"""`vgrout fanout` on a local Ray cluster, from the head a serial `dvc repro` of the CI preset
left (conftest `reproduced`): what it writes is what the serial repro wrote."""
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.workspace import ARMS, env_for, sh, stage_of

pytestmark = pytest.mark.slow


def _stage_pids(cmd: str, cwd: Path) -> list[int]:
    """Processes running `cmd` with cwd, or a directory under it, as their working directory."""
    pids = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and cmd in (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode() \
                    and Path(os.readlink(proc / "cwd")).resolve().is_relative_to(cwd.resolve()):
                pids.append(int(proc.name))
        except OSError:
            pass
    return pids


def _status(head: Path) -> dict:
    try:
        return json.loads((head / ".dvc/tmp/fanout/status.json").read_text())["stages"]
    except (OSError, ValueError):
        return {}


def _until(what, cond, proc, timeout=600):
    t0 = time.time()
    while not cond():
        assert proc.poll() is None, f"the fan-out ended before {what}:\n{Path(proc.args_log).read_text()[-3000:]}"
        assert time.time() - t0 < timeout, f"no {what} in {timeout} s"
        time.sleep(0.2)


def _attempts(head: Path, stage: str) -> int:
    log = head / ".dvc/tmp/fanout/logs" / f"{stage}.log"
    return log.read_text().count("\n=== ") if log.exists() else 0


def _comparable(root: Path) -> dict:
    """dvc.lock's run and aggregate entries, less the hashes of files that hold wall-clock
    timings (the step logs, and the directories and stages that contain or read them)."""
    from vgrout.ops import fanout
    timed = lambda path: path.endswith("steps.jsonl") or path in ("metrics/runs",)  # noqa: E731
    out = {}
    for name, e in yaml.safe_load((root / "dvc.lock").read_text())["stages"].items():
        if fanout.is_run_stage(name) or name == "aggregate":
            out[name] = {"cmd": e["cmd"], "params": e.get("params"),
                         **{k: {d["path"]: d.get("md5") for d in e.get(k, []) if not timed(d["path"])}
                            for k in ("deps", "outs")}}
    return out


def _untimed_steps(path: Path) -> list[dict]:
    return [{k: v for k, v in json.loads(line).items() if not k.startswith("t_")} for line in open(path)]


def test_fanout_gives_what_a_serial_repro_gives(reproduced, tmp_path):
    """The CI grid through `vgrout fanout` on a local Ray cluster, from the head a serial repro
    left, less routeA's and its yoked placebo's run stages: a run stage killed mid-run is retried;
    the fan-out killed with kill -9 and started again redoes no adopted stage; the lock entries,
    metrics and artifacts equal the serial `dvc repro`'s (timings aside); `dvc status` is clean
    and a third fan-out would run nothing."""
    from vgrout.ops import fanout
    repo = reproduced  # read only: the serial repro to compare with
    head = tmp_path / "vgrout"
    shutil.copytree(repo, head, symlinks=True)
    # the run stages of routeA (retried after a kill) and of the placebo yoked to it (it waits for
    # routeA's run), with aggregate, lose their lock entries and outputs; none's and heldout's stay
    # current, as a fan-out resumed over an earlier one finds them (and the suite stays short)
    redo = {stage_of(k, a) for k in ("train", "eval") for a in ("routeA", "placebo_routeA")} | {"aggregate"}
    lock = yaml.safe_load((head / "dvc.lock").read_text())
    for name in redo:
        for out in lock["stages"][name].get("outs", []):
            p = head / out["path"]
            shutil.rmtree(p) if p.is_dir() else p.unlink()
    lock["stages"] = {k: v for k, v in lock["stages"].items() if k not in redo}
    (head / "dvc.lock").write_text(yaml.safe_dump(lock, sort_keys=False))
    assert {r.name for r in fanout.stale(head, fanout.plan(head).runs)} == redo - {"aggregate"}
    env = env_for(head)
    def start(name):
        proc = subprocess.Popen([sys.executable, "-m", "vgrout.cli", "fanout"], cwd=head, env=env,
                                stdout=open(tmp_path / name, "w"), stderr=subprocess.STDOUT)
        proc.args_log = tmp_path / name
        return proc

    first = start("first.log")
    # kill routeA's training process once it has checkpointed step 2 of 4: Ray retries the stage
    wd = head / ".dvc/tmp/fanout/runs/routeA-0"
    _until("routeA's step-2 checkpoint", lambda: (wd / "runs/train/routeA-0/ckpt/step_00002").exists(), first)
    pids = _stage_pids("stages/train.py routeA 0", wd)
    assert pids, "routeA's stage process"
    for pid in pids:
        os.kill(pid, signal.SIGKILL)
    _until("the retried routeA adopted", lambda: _status(head).get("train@routeA-0", {}).get("state") == "done", first)
    assert _attempts(head, "train@routeA-0") == 2
    # kill -9 the fan-out itself once two more stages are adopted
    _until("three adopted stages", lambda: sum(r["state"] == "done" for r in _status(head).values()) >= 3, first)
    first.kill()
    first.wait()
    adopted = {n for n in yaml.safe_load((head / "dvc.lock").read_text())["stages"] if fanout.is_run_stage(n)}
    attempts = {n: _attempts(head, n) for n in adopted}
    # the retry resumed from the step-2 checkpoint: its progress starts at 2 of 4
    retry = (head / ".dvc/tmp/fanout/logs/train@routeA-0.log").read_text().split("\n=== ")[2]
    assert "| 2/4 [" in retry and "| 1/4 [" not in retry, retry[-2000:]

    second = start("second.log")
    second.wait(timeout=900)
    out = (tmp_path / "second.log").read_text()
    assert second.returncode == 0, out[-3000:]
    n_runs = len(fanout.plan(head).runs)
    assert f"{n_runs - len(adopted)} of {n_runs} run stages to run" in out, out[-3000:]
    assert {n: _attempts(head, n) for n in adopted} == attempts  # no adopted stage ran again
    assert not _stage_pids("stages/", head / ".dvc/tmp/fanout/runs")  # nothing the kill -9 cut off runs on

    # what a serial `dvc repro` of the same params wrote
    assert _comparable(head) == _comparable(repo)
    for arm in ARMS:
        m, r = head / f"metrics/runs/{arm}-0", repo / f"metrics/runs/{arm}-0"
        for f in ("per_mode_deploy.json", "eval_curve.json"):
            assert (m / f).read_bytes() == (r / f).read_bytes(), (arm, f)
        assert _untimed_steps(m / "steps.jsonl") == _untimed_steps(r / "steps.jsonl"), arm
    assert (head / "metrics/summary.json").read_bytes() == (repo / "metrics/summary.json").read_bytes()
    assert json.loads(sh("dvc status --json", head)) == {}

    # a third fan-out would find nothing to run: its plan's stale stages (what it runs) are none
    assert fanout.stale(head, fanout.plan(head).runs) == []
