"""Failures lose nothing, and a stopped `dvc repro` stops its stage.

A stage that fails leaves every committed file it did not get to rewrite: DVC deletes a stage's
outputs before running it unless they are persist, so aggregate's directories are persist and
aggregate swaps in whole new ones only once all their files are written (io.staged_dirs).
DVC forwards no signal to the stage it runs; a stage watches DVC's process and sends itself SIGTERM
when it ends (vgrout.stage.stop_with_parent), so `kill` of `dvc repro` stops the stage too.
"""
from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.workspace import ROOT, env_for, sh
from vgrout import config
import vgrout.io
from vgrout.io import staged_dirs


def snapshot(root: Path, *dirs: str) -> dict[str, str]:
    """Every file under root/dirs (tracked by git or by DVC alike) -> its sha256."""
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for d in dirs for p in sorted((root / d).rglob("*")) if p.is_file()}


def commit_all(work: Path) -> None:
    sh("git add -A && git -c user.name=t -c user.email=t@t commit -qm outputs --allow-empty", work)


# ---------------------------------------------------------------------------- staged directories

@pytest.mark.parametrize("exchange", [True, False], ids=["renameat2", "two_renames"])
def test_staged_dirs_swap_whole_directories_or_none(tmp_path, monkeypatch, exchange):
    if not exchange:  # no renameat2 to call: the two renames
        monkeypatch.setattr(vgrout.io.ctypes, "CDLL", lambda *a, **k: (_ for _ in ()).throw(OSError("no libc")))
    a, b = tmp_path / "a", tmp_path / "sub" / "b"
    a.mkdir()
    (a / "old.txt").write_text("old")
    (a / "kept.txt").write_text("v1")
    with pytest.raises(RuntimeError):
        with staged_dirs(a, b) as (new_a, new_b):
            (new_a / "kept.txt").write_text("v2")
            (new_b / "x.txt").write_text("x")
            raise RuntimeError("fails half way")
    assert sorted(p.name for p in a.iterdir()) == ["kept.txt", "old.txt"] and (a / "kept.txt").read_text() == "v1"
    assert not b.exists() and [p.name for p in tmp_path.iterdir() if p.name != "sub"] == ["a"]
    assert list((tmp_path / "sub").iterdir()) == []  # nothing staged is left behind

    with staged_dirs(a, b) as (new_a, new_b):
        (new_a / "kept.txt").write_text("v2")
        (new_b / "x.txt").write_text("x")
        assert a.exists() and (a / "kept.txt").read_text() == "v1"  # nothing moves before the end
    assert sorted(p.name for p in a.iterdir()) == ["kept.txt"] and (a / "kept.txt").read_text() == "v2"
    assert [p.name for p in b.iterdir()] == ["x.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "sub"] and os.stat(a).st_mode & 0o777 != 0o700


def test_aggregate_directories_are_persist():
    """DVC deletes a non-persist output before the command runs, so a failed stage would lose it."""
    stage = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]["aggregate"]
    outs = [o for key in ("outs", "metrics", "plots") for o in stage.get(key, [])]
    loose = [o if isinstance(o, str) else next(iter(o)) for o in outs
             if isinstance(o, str) or not next(iter(o.values())).get("persist")]
    assert not loose, f"aggregate outputs without persist: true: {loose}"


# ---------------------------------------------------------------------------- a failed aggregate

def _bad_params(work: Path) -> str:
    params = yaml.safe_load((work / "params.yaml").read_text())
    params["gate"]["q_lo"] = params["gate"]["q_hi"] + 0.1  # the case: a params error, before any write
    (work / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    return "exceeds gate.q_hi"


def _bad_rollouts(work: Path) -> str:
    """Every run's rollouts lose a key A7 reads, and the preset gets another name (A4's text quotes
    it): aggregate fails in A7, after A1-A4 are written, A4.md unlike the committed one."""
    params = yaml.safe_load((work / "params.yaml").read_text())
    params["preset"] = "renamed"
    (work / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    for path in sorted((work / "runs/train").glob("*/rollouts.jsonl")):
        rows = [json.loads(line) for line in path.read_text().splitlines()]
        del rows[0]["zone"]
        path.unlink()  # a new file, never a write into one DVC's cache may share
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return "missing key 'zone'"


@pytest.mark.slow
@pytest.mark.parametrize("breaks", [_bad_params, _bad_rollouts], ids=["params", "mid_write"])
def test_failed_aggregate_loses_nothing(reproduced_copy, breaks):
    """The reproduced CI copy, its outputs committed; aggregate made to fail on a real input error:
    git status of metrics/ and plots/ is clean and every file there (html, in DVC's cache, too) is
    byte for byte what it was, with no staging directory left."""
    work = reproduced_copy
    commit_all(work)
    before = snapshot(work, "metrics", "plots")
    assert any(p.startswith("metrics/artifacts/A7_gate/") for p in before) and any(
        p.startswith("plots/html/") for p in before), sorted(before)
    why = breaks(work)
    out = sh("dvc repro --single-item aggregate", work, check=False)
    assert "failed to reproduce 'aggregate'" in out and why in out, out[-3000:]
    status = sh("git status --porcelain --untracked-files=all -- metrics plots", work)
    assert status == "", status
    after = snapshot(work, "metrics", "plots")
    assert after == before, sorted(p for p in set(before) | set(after) if before.get(p) != after.get(p))


@pytest.mark.slow
def test_aggregate_leaves_exactly_its_new_files(reproduced_copy):
    """Files a previous aggregate wrote and this one does not (a run taken out of the matrix) go:
    persist keeps the directories, the swap replaces them whole."""
    work = reproduced_copy
    before = snapshot(work, "metrics/artifacts", "plots")
    stale = ["metrics/artifacts/A7_gate/gone-0.json", "plots/png/A9.png", "plots/html/A9.html"]
    for p in stale:
        (work / p).write_text("left by an older run\n")
    out = sh("dvc repro --single-item --force aggregate", work)
    assert "Running stage 'aggregate'" in out, out[-3000:]
    after = snapshot(work, "metrics/artifacts", "plots")
    left = [p for p in stale if (work / p).exists()]
    assert not left, left
    assert sorted(after) == sorted(before)
    assert "up to date" in sh("dvc status aggregate", work)


# ---------------------------------------------------------------------------- stopping dvc repro

SLEEPER = '''"""A stage that writes its output atomically and sleeps half way through."""
import os
import time

from vgrout import stage
from vgrout.io import atomic_path, atomic_write_text


def run(params):
    with atomic_path("out.txt") as tmp:
        tmp.write_text("half written")
        atomic_write_text("stage.pid", str(os.getpid()))
        time.sleep(300)


stage.main("sleep", run)
'''


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="pidfd is Linux's")
@pytest.mark.parametrize("how, shell", [("sigterm", "/bin/bash"), ("sigterm", None), ("ctrl_c", None)],
                         ids=["sigterm-bash", "sigterm-sh", "ctrl_c-sh"])
def test_stopping_dvc_repro_stops_the_stage(tmp_path, how, shell):
    """A throwaway DVC repository whose one stage imports vgrout.stage as ours do and sleeps with a
    half-written output. SIGTERM to `dvc repro` (sigterm), or SIGINT to its process group as a
    terminal's Ctrl-C sends it (ctrl_c): the stage is gone within seconds and its temporary file too.
    DVC runs the command through $SHELL, or /bin/sh where SHELL is unset (as on CI): bash execs the
    lone command, so DVC is the stage's parent; dash, Debian's sh, does not, so a shell sits between."""
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "sleep.py").write_text(SLEEPER)
    (repo / "params.yaml").write_text(config.render(config.preset("ci", ROOT / "presets")))
    (repo / "dvc.yaml").write_text(yaml.safe_dump(
        {"stages": {"sleep": {"cmd": "python sleep.py", "deps": ["sleep.py"], "outs": ["out.txt"]}}}))
    env = env_for(ROOT)
    env.pop("SHELL", None)
    if shell:
        env["SHELL"] = shell
    sh("git init -q && dvc init -q", repo)
    log = open(tmp_path / "dvc.log", "w")
    # SIGINT at its default, as under a terminal: a disposition of SIG_IGN is inherited through exec, and a
    # test process that ran other things first may carry one (two full-suite runs saw the stage ignore Ctrl-C)
    dvc = subprocess.Popen(["dvc", "repro"], cwd=repo, env=env, stdout=log, stderr=subprocess.STDOUT,
                           start_new_session=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    pid = None
    try:
        deadline = time.monotonic() + 60
        while not (repo / "stage.pid").exists():
            assert dvc.poll() is None, (tmp_path / "dvc.log").read_text()
            assert time.monotonic() < deadline, "the stage did not start"
            time.sleep(0.1)
        pid = int((repo / "stage.pid").read_text())
        assert alive(pid) and list(repo.glob(".out.txt.*.tmp"))
        if how == "sigterm":
            dvc.send_signal(signal.SIGTERM)
        else:
            os.killpg(dvc.pid, signal.SIGINT)
        dvc.wait(timeout=90)  # DVC's own exit; under a loaded suite it took over 30 s once (alone: < 2 s)
        deadline = time.monotonic() + 5
        while alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not alive(pid), f"the stage (pid {pid}) still runs 5 s after `dvc repro` got {how}"
        assert not list(repo.glob(".out.txt.*.tmp")) and not (repo / "out.txt").exists()
    finally:
        log.close()
        if dvc.poll() is None:
            dvc.kill()
        if pid is not None and alive(pid):
            os.kill(pid, signal.SIGKILL)
