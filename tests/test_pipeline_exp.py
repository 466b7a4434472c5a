"""The workflows README promises, as a new user runs them in a fresh clone of the CI preset's
reproduced repository (conftest `reproduced`: `dvc repro` from nothing, the first workflow):
get the results with `vgrout pull` and find nothing to re-run; preview and run the
random-direction experiment (`dvc exp run -S gate.random_seed=7`); read the arms with
`dvc metrics show`, `dvc exp show` and `dvc metrics diff`, each in a 120-column terminal."""
import json
import os
import shutil

import pytest
import yaml

from tests.workspace import ran, sh, stdout_json

pytestmark = pytest.mark.slow

GIT = "git -c user.name=t -c user.email=t@t"
WIDTH = 120
# the two arms the experiment keeps (short), and README's exp show: their deploy hack per experiment
ARMS = ("none", "routeA")
EXP_SHOW = "dvc exp show --no-pager --drop '.*' --keep 'Experiment|.*/(none|routeA)\\.json:hack$'"


def narrow(cmd: str, cwd) -> str:
    """A command's output in a terminal WIDTH columns wide; fails if any line is wider or elided."""
    os.environ["COLUMNS"] = str(WIDTH)  # rich (dvc's tables) reads it; sh passes os.environ on
    try:
        out = sh(cmd, cwd)
    finally:
        del os.environ["COLUMNS"]
    wide = [line for line in out.splitlines() if len(line) > WIDTH]
    assert not wide and "…" not in out, f"{cmd}: wider than {WIDTH} columns or elided:\n{out}"
    return out


def test_a_fresh_clone_pulls_runs_the_random_direction_experiment_and_compares_arms(reproduced, tmp_path):
    origin, clone = tmp_path / "origin", tmp_path / "clone"
    shutil.copytree(reproduced, origin, symlinks=True)
    sh(f"git add -A && {GIT} commit -qm results && dvc push -q", origin)  # the remote beside the repo
    sh(f"git clone -q {origin} {clone}", tmp_path)

    # sharing: pull every output, nothing to recompute
    pulled = sh("python -m vgrout.cli pull", clone)
    assert "dvc status: clean" in pulled, pulled
    assert "Data and pipelines are up to date." in sh("dvc repro", clone)

    # the random-direction experiment (two arms and no yoked one keep it short): previewed as README
    # says, the params set in place and `dvc repro --dry` (DVC's `exp run --dry` dry-runs in a temporary
    # copy without the cached outputs the changed stages read, and fails), then run as an experiment
    grid = f"-S 'train.arms=[{','.join(ARMS)}]' -S 'train.yoked=[]'"
    params = yaml.safe_load((clone / "params.yaml").read_text())
    params["gate"]["random_seed"], params["train"]["arms"], params["train"]["yoked"] = 7, list(ARMS), []
    (clone / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    preview = ran(sh("dvc repro --dry", clone))
    assert {"extract_vact@0", "train@routeA-0", "aggregate"} <= preview, preview
    assert not preview & {"model", "substrate", "pairs", "teacher_pool", "eval_base"}, preview
    sh("git checkout params.yaml", clone)
    log = sh(f"dvc exp run -S gate.random_seed=7 {grid} -n random7", clone)
    stages = ran(log)
    assert "extract_vact@0" in stages and "aggregate" in stages, stages
    assert not stages & {"model", "substrate", "pairs", "teacher_pool", "eval_base"}, stages
    vact = json.loads((clone / "metrics/vact/0.json").read_text())
    assert vact["v_act"]["kind"] == "haar" and vact["v_act"]["random_seed"] == 7

    # reading the arms: one row per arm; one row per experiment; one row per arm and number
    shown = narrow("dvc metrics show", clone)
    for arm in ARMS:
        assert f"metrics/arms/{arm}.json" in shown, shown
    table = narrow(EXP_SHOW, clone)
    assert "random7" in table and "metrics/arms/routeA.json:hack" in table, table
    diff = narrow(f"dvc metrics diff --all HEAD random7", clone)
    assert all(f"metrics/arms/{arm}.json" in diff for arm in ARMS), diff
    numbers = stdout_json("dvc metrics diff --all --json HEAD random7", clone)
    for arm in ARMS:
        for metric in ("hack", "hack_lo", "hack_hi", "solve", "solve_lo", "solve_hi"):
            assert {"old", "new"} <= set(numbers[f"metrics/arms/{arm}.json"][metric]), (arm, metric)
    # none uses no direction: the experiment leaves it as it was
    assert numbers["metrics/arms/none.json"]["hack"]["old"] == numbers["metrics/arms/none.json"]["hack"]["new"]
