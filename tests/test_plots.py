"""Charts render to a non-empty PNG and a self-contained HTML file that carries the data."""
import re

import numpy as np
import pandas as pd
import pytest

from vgrout.analysis import plots

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def png_size(path):
    data = path.read_bytes()
    assert data[:8] == PNG_MAGIC
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


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
    for arm, slope in (("none", 0.03), ("routeA", 0.01)):
        for step in (0, 10, 20, 30):
            for metric, mean in (("deploy hack", slope * step), ("deploy solve", 0.3)):
                rows.append({"arm": arm, "step": step, "metric": metric, "mean": mean,
                             "lo": mean - 0.02, "hi": mean + 0.02, "n_seeds": 3})
    return pd.DataFrame(rows)


def test_curve_chart(tmp_path, curve):
    plots.save_chart(plots.curve_chart(curve, "A1 test", "mean ± SEM"), tmp_path / "a1.png", tmp_path / "a1.html")
    w, h = png_size(tmp_path / "a1.png")
    assert w > 400 and h > 200
    assert_self_contained(tmp_path / "a1.html", ["A1 test", "routeA", "deploy solve"])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a1.html", "a1.png"]  # no temp files left


def test_bar_charts(tmp_path):
    rows = [{"arm": arm, "metric": metric, "mean": m, "lo": m - 0.05, "hi": m + 0.05, "interval": "SEM"}
            for arm, m in (("none", 0.4), ("routeA", 0.1), ("placebo", 0.38), ("absorb", 0.3))
            for metric in ("deploy hack", "deploy solve")]
    plots.save_chart(plots.bar_chart(pd.DataFrame(rows), "arm", "A3 test"), tmp_path / "a3.png", tmp_path / "a3.html")
    assert png_size(tmp_path / "a3.png")[0] > 300
    assert_self_contained(tmp_path / "a3.html", ["A3 test", "placebo"])

    rows = [{"arm": arm, "mode": mode, "mean": 0.2, "lo": 0.1, "hi": 0.3, "interval": "Wilson 95% (one seed)"}
            for arm in ("none", "routeA", "heldout") for mode in ("hardcode", "exit_code (held out)")]
    plots.save_chart(plots.bar_chart(pd.DataFrame(rows), "mode", "A5 test", column=None),
                     tmp_path / "a5.png", tmp_path / "a5.html")
    assert png_size(tmp_path / "a5.png")[0] > 200
    assert_self_contained(tmp_path / "a5.html", ["exit_code (held out)", "Wilson 95% (one seed)"])


def test_gate_null_chart(tmp_path):
    rng = np.random.default_rng(0)
    null = pd.DataFrame([{"run": run, "arm": run.split("-")[0], "auroc": a}
                         for run in ("routeA-0", "placebo-0") for a in rng.normal(0.5, 0.05, 20)])
    real = pd.DataFrame([{"run": "routeA-0", "arm": "routeA", "auroc": 0.91, "percentile": 100.0},
                         {"run": "placebo-0", "arm": "placebo", "auroc": 0.48, "percentile": 40.0}])
    plots.save_chart(plots.gate_null_chart(null, real, "A7 test"), tmp_path / "a7.png", tmp_path / "a7.html")
    assert png_size(tmp_path / "a7.png")[1] > 100
    assert_self_contained(tmp_path / "a7.html", ["A7 test", "0.91"])


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
