"""A placebo experiment with `dvc exp run` on a copy of the reproduced CI repository (conftest
`reproduced`), and `dvc exp show` and `dvc metrics diff` over it."""
import json

import pytest

from tests.workspace import ran, sh, stdout_json

pytestmark = pytest.mark.slow


def test_placebo_experiment_and_metrics_diff(reproduced_copy):
    """`dvc exp run -S gate.random_seed=7` swaps v_act for a Haar direction: extract_vact and
    everything downstream of it re-run (never model, substrate, pairs or teacher_pool), and
    `dvc exp show` and `dvc metrics diff` carry each arm's deploy hack and solve."""
    repo = reproduced_copy
    sh("git add -A && git -c user.name=t -c user.email=t@t commit -qm results --allow-empty", repo)
    # two arms and no yoked one keep it short (test_fanout_gives_what_a_serial_repro_gives runs the grid)
    log = sh("dvc exp run -S gate.random_seed=7 -S 'train.arms=[none,routeA]' -S 'train.yoked=[]' -n placebo7", repo)
    stages = ran(log)
    assert "extract_vact@0" in stages and "aggregate" in stages, stages
    assert not stages & {"model", "substrate", "pairs", "teacher_pool", "eval_base"}, stages
    vact = json.loads((repo / "metrics/vact/0.json").read_text())
    assert vact["v_act"]["kind"] == "haar" and vact["v_act"]["random_seed"] == 7

    shown = json.dumps(stdout_json("dvc exp show --json", repo))
    assert "placebo7" in shown and "routeA" in shown and "deploy_hack" in shown

    # the two arms' deploy hack and solve, the experiment's (workspace) against the v_act run's (HEAD)
    diff = stdout_json("dvc metrics diff --all --json HEAD", repo)["metrics/summary.json"]
    for arm in ("none", "routeA"):
        for metric in ("deploy_hack", "deploy_solve"):
            assert {"old", "new"} <= set(diff[f"{arm}.{metric}"]), (arm, metric)
    # none uses no direction: the placebo experiment leaves it as it was
    assert diff["none.deploy_hack"]["old"] == diff["none.deploy_hack"]["new"]
