"""Charts render to a non-empty PNG at most 1,200 px wide and under 200 KB, and a self-contained
HTML file that carries the data; A1 draws what the tables count (hack over hackable problems)."""
import json
import re
import zlib

import numpy as np
import pandas as pd
import pytest

from tests.analysis.test_aggregate import make_pipeline
from vgrout import arms
from vgrout.analysis import plots
from vgrout.analysis.aggregate import aggregate_stage
from vgrout.analysis.artifacts import _curve_points
from vgrout.analysis.tables import load_run, load_tables
from vgrout.layout import Layout
from vgrout.stats import wilson

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
MAX_WIDTH, MAX_BYTES = 1200, 200_000  # README shows every PNG at most this wide, each under 200 KB


def png_size(path):
    data = path.read_bytes()
    assert data[:8] == PNG_MAGIC
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


def assert_fits(path):
    """At most MAX_WIDTH pixels wide, under MAX_BYTES, and a PNG whose every chunk's CRC holds."""
    w, h = png_size(path)
    assert w <= MAX_WIDTH, f"{path.name} is {w} px wide"
    assert path.stat().st_size < MAX_BYTES, f"{path.name} is {path.stat().st_size} bytes"
    data, i = path.read_bytes(), 8
    while i < len(data):  # the recompressed file is a well-formed PNG
        n = int.from_bytes(data[i:i + 4], "big")
        assert zlib.crc32(data[i + 4:i + 8 + n]) == int.from_bytes(data[i + 8 + n:i + 12 + n], "big")
        i += 12 + n
    return w, h


def assert_self_contained(path, must_contain):
    html = path.read_text()
    assert not re.search(r"<script[^>]*\bsrc=", html), "HTML loads a script from elsewhere"
    assert "vegaEmbed" in html or "vega-embed" in html
    assert len(html) > 100_000  # the Vega, Vega-Lite and vega-embed bundles are inlined
    for text in must_contain:
        assert text in html


@pytest.fixture(scope="module")
def curve():
    rows = []
    for arm, slope in (("none", 0.02), ("routeA", 0.01)):
        for step in (0, 10, 20, 30):
            for metric, mean in (("deploy hack, hackable problems", slope * step), ("deploy solve, all problems", 0.3)):
                rows.append({"arm": arm, "step": step, "metric": metric, "mean": mean,
                             "lo": max(0, mean - 0.02), "hi": mean + 0.02, "n_seeds": 3})
    return pd.DataFrame(rows)


def test_curve_chart(tmp_path, curve):
    plots.save_chart(plots.curve_chart(curve, "A1 test", ["deploy view", "mean ± SEM"]),
                     tmp_path / "a1.png", tmp_path / "a1.html")
    w, h = assert_fits(tmp_path / "a1.png")
    assert w > 800 and h > 400  # drawn at about twice its CSS size, not shrunk
    assert_self_contained(tmp_path / "a1.html", ["A1 test", "routeA", "deploy solve, all problems"])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a1.html", "a1.png"]  # no temp files left
    spec = plots.curve_chart(curve, "A1 test").to_dict()
    hack_panel = spec["hconcat"][0]
    # the y axis is fitted to the data and starts at 0; a line joins an arm's points (4 checkpoints)
    assert hack_panel["layer"][0]["encoding"]["y"]["scale"]["domain"] == [0, pytest.approx(0.7)]  # max hi 0.62
    assert [layer["mark"]["type"] for layer in hack_panel["layer"]] == ["rule", "line", "point"]
    # two checkpoints: points and error bars only, no line "over training" between them
    two = plots.curve_chart(curve[curve["step"].isin([0, 30])], "A1 test").to_dict()
    assert [layer["mark"]["type"] for layer in two["hconcat"][0]["layer"]] == ["rule", "point"]


def test_bar_charts(tmp_path):
    many = [*arms.REGISTRY][:14]  # A3 with every comparison arm: wrapped panels, not one 4,000 px row
    rows = [{"arm": arm, "metric": metric, "mean": m, "lo": m - 0.05, "hi": m + 0.05, "interval": "SEM"}
            for arm, m in zip(many, np.linspace(0.1, 0.5, len(many)))
            for metric in ("deploy hack", "deploy solve", "train-view hack", "qmass (student rows routed)")]
    plots.save_chart(plots.bar_chart(pd.DataFrame(rows), "arm", "A3 test"), tmp_path / "a3.png", tmp_path / "a3.html")
    assert assert_fits(tmp_path / "a3.png")[0] > 900
    assert_self_contained(tmp_path / "a3.html", ["A3 test", many[-1]])

    rows = [{"arm": arm, "mode": mode, "mean": 0.2, "lo": 0.1, "hi": 0.3, "interval": "Wilson 95% (one seed)"}
            for arm in ("none", "routeA", "heldout") for mode in ("hardcode", "exit_code (held out)")]
    plots.save_chart(plots.bar_chart(pd.DataFrame(rows), "mode", "A5 test", column=None),
                     tmp_path / "a5.png", tmp_path / "a5.html")
    assert assert_fits(tmp_path / "a5.png")[0] > 200
    assert_self_contained(tmp_path / "a5.html", ["exit_code (held out)", "Wilson 95% (one seed)"])


def test_gate_null_chart(tmp_path):
    rng = np.random.default_rng(0)
    runs = [f"{a}-{s}" for a in ("routeA", "placebo", "none", "absorb") for s in range(3)]
    # 1,000 null directions for each of 12 runs: drawn binned, it stays small
    null = pd.DataFrame([{"run": run, "arm": run.split("-")[0], "auroc": a}
                         for run in runs for a in rng.normal(0.5, 0.1, 1000).clip(0, 1)])
    real = pd.DataFrame([{"run": run, "arm": run.split("-")[0], "auroc": 0.91 if run.startswith("routeA") else 0.48,
                          "percentile": 50.0} for run in runs])
    plots.save_chart(plots.gate_null_chart(null, real, "A7 test"), tmp_path / "a7.png", tmp_path / "a7.html")
    assert assert_fits(tmp_path / "a7.png")[1] > 100
    assert_self_contained(tmp_path / "a7.html", ["A7 test", "0.91"])


def test_wide_chart_is_scaled_down_to_fit(tmp_path):
    df = pd.DataFrame({"arm": ["none"] * 40, "mode": [f"mode {i}" for i in range(40)], "mean": 0.3, "lo": 0.2,
                       "hi": 0.4, "interval": "SEM"})  # about 1,500 CSS px: would be 3,000 px at scale 2
    plots.save_chart(plots.bar_chart(df, "mode", "wide", column=None), tmp_path / "w.png", tmp_path / "w.html")
    assert 1100 < png_size(tmp_path / "w.png")[0] <= MAX_WIDTH


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory):
    """The aggregate stage on synthetic runs (tests/analysis/test_aggregate.py's): none, routeA and its
    yoked placebo, two seeds, eval curves at steps 0, 4, 8 and 12."""
    root = tmp_path_factory.mktemp("plots_pipeline")
    params = make_pipeline(root, seeds=(0, 1), arms=("none", "routeA", "placebo_routeA"))
    aggregate_stage(params, Layout(root))
    return root


def curve_rows(root, runs=None):
    rows = []
    for p in (root / "metrics" / "runs").glob("*/eval_curve.json"):
        d = json.loads(p.read_text())
        if runs is None or d["run"] in runs:
            rows += [{"run": d["run"], "arm": d["arm"]} | r for r in d["rows"]
                     if r["view"] == "deploy" and r["mode"] == "overall"]
    return pd.DataFrame(rows)


def test_every_written_png_fits(pipeline):
    pngs = sorted((pipeline / "plots" / "png").glob("*.png"))
    assert {"A1.png", "A3.png", "A7_gate_null.png"} <= {p.name for p in pngs}
    for p in pngs:
        assert_fits(p)


def test_a1_draws_hack_over_hackable_problems_with_intervals(pipeline):
    points = pd.read_csv(pipeline / "metrics" / "artifacts" / "plot_data" / "A1_points.csv")
    assert set(points["arm"]) == {"none", "routeA"}
    assert set(points["metric"]) == {"deploy hack, hackable problems", "deploy solve, all problems"}
    curve = curve_rows(pipeline)
    curve = curve[curve["arm"].isin(["none", "routeA"])]
    hack = points[points["rate"] == "hack_hackable"].set_index(["arm", "step"]).sort_index()
    direct = curve.groupby(["arm", "step"])["hack_hackable"].agg(["mean", "sem", "count"])
    assert list(hack.index) == list(direct.index)  # a point at every evaluated checkpoint
    assert np.allclose(hack["mean"], direct["mean"])  # hack over the hackable problems ...
    overall = curve.groupby(["arm", "step"])["hack"].mean()
    assert not np.allclose(hack["mean"], overall)  # ... not over all problems (the `none` ones dilute that)
    assert (hack["n_seeds"] == 2).all() and (hack["interval"] == "mean ± SEM over seeds").all()
    assert np.allclose(hack["lo"], (direct["mean"] - direct["sem"]).clip(lower=0))
    assert np.allclose(hack["hi"], (direct["mean"] + direct["sem"]).clip(upper=1))
    solve = points[points["rate"] == "solve"].set_index(["arm", "step"]).sort_index()
    assert np.allclose(solve["mean"], curve.groupby(["arm", "step"])["solve"].mean())
    md = (pipeline / "metrics" / "artifacts" / "A1.md").read_text()
    assert "hack over the hackable problems" in md and "A1_points.csv" in md


def test_a1_one_seed_has_the_wilson_intervals_of_the_curve(pipeline):
    runs = ["none-0", "routeA-0"]
    metrics = pipeline / "metrics" / "runs"
    con = load_tables([load_run(metrics, pipeline / "runs" / "train", r, gate_inputs=False) for r in runs])
    points, subtitle = _curve_points(con, ["none", "routeA"])
    curve = curve_rows(pipeline, runs).set_index(["arm", "step"]).sort_index()
    hack = points[points["rate"] == "hack_hackable"].set_index(["arm", "step"]).sort_index()
    assert (hack["interval"] == "Wilson 95% (one seed)").all()
    assert np.allclose(hack["mean"], curve["hack_hackable"])
    assert np.allclose(hack["lo"], curve["hack_hackable_lo"]) and np.allclose(hack["hi"], curve["hack_hackable_hi"])
    r = curve.iloc[-1]
    assert (r["hack_hackable_lo"], r["hack_hackable_hi"]) == pytest.approx(wilson(r["n_hacked_hackable"], r["n_hackable"]))
    text = " ".join(subtitle)
    assert "deploy view" in text and "hack over the 48 hackable of the 60 test problems" in text
    assert "error bars: Wilson 95% (one seed)" in text and "thin lines only join" in text


def test_failed_render_leaves_old_file_in_place(tmp_path):
    (tmp_path / "x.png").write_bytes(b"old")

    class Exploding:  # a renderer that dies half-way through writing
        def save(self, fp, **kw):
            open(fp, "wb").write(b"partial")
            raise RuntimeError("renderer died")

    with pytest.raises(RuntimeError):
        plots.save_chart(Exploding(), tmp_path / "x.png", tmp_path / "x.html")
    assert (tmp_path / "x.png").read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["x.png"]
