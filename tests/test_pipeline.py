"""The DVC pipeline end to end on the CI preset (tiny student, few problems and steps): every
artifact is produced and well-formed. The repository reproduced here (conftest `reproduced`, one
build for the session) is what tests/test_pipeline_*.py work on: the caching contract and a
reviewer's fresh clone that gets every output with `dvc pull` without recomputing (_cache), the
placebo experiment (_exp), the fan-out (_fanout)."""
import json

import pandas as pd
import pytest

from tests.workspace import ARMS

pytestmark = pytest.mark.slow


def test_every_artifact_exists_and_is_well_formed(reproduced):
    repo = reproduced
    for arm in ARMS:
        res = json.loads((repo / f"metrics/runs/{arm}-0/per_mode_deploy.json").read_text())
        views = {(r["view"], r["mode"]) for r in res["rows"]}
        assert ("deploy", "overall") in views and ("train", "overall") in views
        for r in res["rows"]:
            assert 0 <= r["hack_lo"] <= r["hack"] <= r["hack_hi"] <= 1
            assert r["n_hacked"] <= r["n"] and r["n_solved"] <= r["n"]
        curve = json.loads((repo / f"metrics/runs/{arm}-0/eval_curve.json").read_text())
        assert {r["step"] for r in curve["rows"]} == {0, 2, 4}  # ckpt_every 2, steps 4
        steps = [json.loads(line) for line in open(repo / f"metrics/runs/{arm}-0/steps.jsonl")]
        assert [s["step"] for s in steps] == [0, 1, 2, 3]
    assert json.loads((repo / "metrics/runs/base/per_mode_deploy.json").read_text())["rows"]
    # the substrate's check ends with the base model's headroom on the test split
    base = json.loads((repo / "metrics/substrate_check.json").read_text())["base"]
    n_test = sum(1 for _ in open(repo / "data/substrate/test.jsonl"))
    assert base["n_problems"] == n_test and base["n_samples"] == 8
    assert 0 <= base["pass@1"] <= base["pass@8"] <= 1
    assert base["headroom"]["within"] == (0.1 <= base["pass@1"] <= 0.6)
    for a in ["A1", "A2", "A3", "A4", "A5", "A6", "A7"]:
        md = (repo / f"metrics/artifacts/{a}.md").read_text()
        assert md.startswith("#") and len(md) > 100, a
        pd.read_csv(repo / f"metrics/artifacts/{a}.csv")  # parses
    a3 = pd.read_csv(repo / "metrics/artifacts/A3.csv")
    assert set(a3["arm"]) == {"none", "routeA", "placebo_routeA"}  # the CI grid's ablation arms (absorb: tests/train/test_train.py)
    summary = json.loads((repo / "metrics/summary.json").read_text())
    assert set(ARMS) <= set(summary)
    assert summary["none"]["qmass"] == 0  # the none arm never routes
    a6 = (repo / "metrics/artifacts/A6.md").read_text()
    for mode in ["overwrite_tests", "hardcode", "exit_code", "stdout_marker"]:
        assert mode in a6
    for png in (repo / "plots/png").glob("*.png"):
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    for html in (repo / "plots/html").glob("*.html"):
        assert "<script src=" not in html.read_text()  # JavaScript inlined: works offline
    assert (repo / "dvc.lock").exists()
