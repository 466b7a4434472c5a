"""DVCLive's view of the step log (train.LIVE_GROUPS): a tsv row per step and metric holding the
value steps.jsonl holds, metrics.json the last step's values, no timing. A resume rewrites the
files from the kept step rows (tests/train/test_train.py: they end byte for byte as an uninterrupted
run's); without the rewrite, DVCLive would log the resumed steps twice."""
import csv
import json
from pathlib import Path

import pytest

from tests.train.test_train import _cfg, setup  # noqa: F401 (setup: the tiny student's fixture)
from vgrout.io import read_jsonl
from vgrout.train import loop as train


def _curves(live_dir) -> dict[str, list[tuple[int, str]]]:
    """DVCLive name -> its tsv's (step, value) rows, the header checked."""
    plots = Path(live_dir) / "plots" / "metrics"
    out = {}
    for tsv in sorted(plots.rglob("*.tsv")):
        name = tsv.relative_to(plots).with_suffix("").as_posix()
        header, *rows = list(csv.reader(open(tsv, newline=""), delimiter="\t"))
        assert header == ["step", tsv.stem], tsv
        out[name] = [(int(s), v) for s, v in rows]
    return out


def _assert_mirrors_the_step_log(cfg) -> None:
    rows = read_jsonl(cfg.log_path)
    assert any(k.startswith("t_") for k in rows[0])  # the step log has timings; the live files must not
    expected: dict[str, list] = {}
    for r in rows:
        for field, v in r.items():
            if train.live_name(field) is not None and v is not None:
                expected.setdefault(train.live_name(field), []).append((r["step"], v))
    curves = _curves(cfg.live_dir)
    assert set(curves) == set(expected)
    assert not [n for n in curves if n.split("/")[1].startswith("t_")]
    for name, points in expected.items():  # the same value: a float as JSON wrote it, an int as an int
        assert [(s, json.loads(v)) for s, v in curves[name]] == points, name
    steps = [r["step"] for r in rows]
    assert [s for s, _ in curves["train/hack_rate"]] == steps  # one row per step
    summary: dict = {"step": steps[-1]}
    for name, points in expected.items():
        group, field = name.split("/")
        summary.setdefault(group, {})[field] = points[-1][1]
    assert json.loads((Path(cfg.live_dir) / "metrics.json").read_text()) == summary


def test_every_result_field_has_a_group_and_timings_none():
    assert train.live_name("hack_rate") == "train/hack_rate"
    assert train.live_name("n_students") == "train/n_students"
    assert train.live_name("n_route_teacher") == "route/n_route_teacher"
    assert train.live_name("qmass_update") == "route/qmass_update"
    assert train.live_name("rho_p99_route_student") == "ratio/rho_p99_route_student"
    assert train.live_name("gradnorm_quarantine") == "optim/gradnorm_quarantine"
    assert train.live_name("step") is None and train.live_name("t_train") is None
    with pytest.raises(KeyError, match="'new_field' is in no group"):
        train.live_name("new_field")


@pytest.mark.slow
def test_a_run_writes_the_step_log_results_to_dvclive(setup):
    root, model_dir = setup
    cfg = _cfg(root, model_dir, "live", steps=2, ckpt_every=2)
    train.train(cfg, progress=False)
    _assert_mirrors_the_step_log(cfg)


@pytest.mark.slow
def test_a_resume_without_the_rewrite_logs_the_resumed_steps_twice(setup, monkeypatch):
    """The guard on the rewrite: a run killed after step 0 (its last checkpoint: step 0's start)
    resumes with train.rewrite_live a no-op, and DVCLive appends the resumed steps to the killed
    run's files: step 0 comes twice. The rewrite, run then, leaves the files the step log's."""
    root, model_dir = setup
    cfg = _cfg(root, model_dir, "live_twice", steps=2, ckpt_every=2, stop_after=1)
    train.train(cfg, progress=False)
    assert [s for s, _ in _curves(cfg.live_dir)["train/hack_rate"]] == [0]
    rewrite = train.rewrite_live
    monkeypatch.setattr(train, "rewrite_live", lambda cfg, rows: None)
    cfg.stop_after = None
    train.train(cfg, progress=False)
    assert [r["step"] for r in read_jsonl(cfg.log_path)] == [0, 1]  # the step log itself was truncated
    assert [s for s, _ in _curves(cfg.live_dir)["train/hack_rate"]] == [0, 0, 1]
    rewrite(cfg, read_jsonl(cfg.log_path))
    _assert_mirrors_the_step_log(cfg)
