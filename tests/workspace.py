"""Throwaway copies of the project's tracked tree, for tests that run DVC end to end.

A copy gets its own git repository and, through `sh`, subprocesses that import the copy's
own `vgrout` (PYTHONPATH is the copy's root), never the checkout that pytest runs from.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUTPUTS = ["dvc.lock", "metrics", "plots"]  # the default preset's committed outputs


def sh(cmd: str, cwd: Path, check: bool = True) -> str:
    """Run a shell command in a copy (cwd is its root); stdout + stderr, AssertionError on failure."""
    out = subprocess.run(cmd, cwd=cwd, shell=True, capture_output=True, text=True, env=env_for(cwd))
    if check and out.returncode:
        raise AssertionError(f"{cmd} failed ({out.returncode}):\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}")
    return out.stdout + out.stderr


def env_for(root: Path) -> dict:
    """This interpreter's bin first on PATH (`dvc`, `python`), and `vgrout` imported from root."""
    pythonpath = os.pathsep.join([str(root)] + [p for p in [os.environ.get("PYTHONPATH")] if p])
    return dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
                PYTHONPATH=pythonpath)


def copy_tracked_tree(dest: Path, drop=DEFAULT_OUTPUTS) -> Path:
    """Copy the files git tracks (and untracked, unignored ones) to dest, less `drop`."""
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT,
                           capture_output=True, text=True, check=True).stdout.split()
    for f in files:
        if (ROOT / f).is_file():
            (dest / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / f, dest / f)
    for junk in drop:
        p = dest / junk
        shutil.rmtree(p, ignore_errors=True) if p.is_dir() else p.unlink(missing_ok=True)
    return dest


def ci_copy(dest: Path) -> Path:
    """A tracked-tree copy in its own git repository, switched to the CI preset, nothing run yet."""
    copy_tracked_tree(dest)
    sh("git init -q && git add -A && git -c user.name=t -c user.email=t@t commit -qm init", dest)
    sh(f"{sys.executable} -m vgrout.cli preset ci", dest)
    return dest


def ran(log: str) -> set[str]:
    """The stages a `dvc repro` (or `dvc exp run`) log says it ran."""
    return set(re.findall(r"Running stage '([^']+)'", log))


def reproduce_ci_once(shared: Path) -> Path:
    """shared/ci/vgrout: a CI-preset copy after a full `dvc repro`, built by whichever process asks
    first; the others wait on the lock and reuse it (the build is the suite's longest step, and
    xdist workers share nothing else). A failed build is recorded, so a second worker reports it
    instead of spending minutes failing again."""
    from filelock import FileLock

    home = shared / "ci"
    work, failed = home / "vgrout", home / "failed.txt"
    home.mkdir(parents=True, exist_ok=True)
    with FileLock(str(home / "build.lock")):
        if failed.exists():
            raise AssertionError(f"the shared CI repro failed:\n{failed.read_text()}")
        if not (home / "done").exists():
            try:
                ci_copy(work)
                log = sh("dvc repro", work)
                assert {"model", "substrate", "pairs", "teacher_pool", "aggregate"} <= ran(log), log[-3000:]
            except BaseException as e:
                failed.write_text(str(e))
                raise
            (home / "done").touch()
    return work


ARMS = ["none", "routeA", "placebo_routeA", "heldout"]  # the CI preset's runs; placebo is yoked to routeA


def stage_of(kind: str, arm: str) -> str:
    """`train@routeA-0`, `train_yoked@placebo-routeA-0`, `eval_yoked@placebo-routeA-0`, ..."""
    from vgrout import arms
    to = arms.yoke_target(arm)
    return f"{kind}_yoked@{arms.get(arm).name}-{to}-0" if to else f"{kind}@{arm}-0"


def stdout_json(cmd: str, cwd: Path):
    """A command's stdout, parsed as JSON (stderr apart: DVC's warnings go there)."""
    out = subprocess.run(cmd, cwd=cwd, shell=True, capture_output=True, text=True, env=env_for(cwd))
    if out.returncode:
        raise AssertionError(f"{cmd} failed ({out.returncode}):\n{out.stderr[-3000:]}")
    return json.loads(out.stdout)
