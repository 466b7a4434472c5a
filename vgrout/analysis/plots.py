"""Altair charts of the artifacts, saved as self-contained HTML (Vega JavaScript inlined, so
it opens offline) and PNG (rendered by vl-convert).

Every chart takes a long-form table that artifacts.py already wrote as csv, so a figure
never computes a number the tables do not show.

Every PNG is at most MAX_PNG_WIDTH pixels wide (the width a README or a laptop screen shows
at full size): save_chart renders at PNG_SCALE, or smaller where the chart would be wider, and
the charts are laid out (wrapped panels, horizontal bars, binned nulls) so that the scale
stays near PNG_SCALE and the text stays legible.
"""
from __future__ import annotations

import math
import zlib
from pathlib import Path

import altair as alt
import pandas as pd

from vgrout import arms
from vgrout.io import atomic_path

MAX_PNG_WIDTH = 1200  # pixels
PNG_SCALE = 2.0  # pixels per CSS pixel where the chart fits MAX_PNG_WIDTH at that scale


def _arm_names(names) -> list[str]:
    names = list(dict.fromkeys(names))
    return arms.order(n for n in names if n != arms.BASE) + ([arms.BASE] if arms.BASE in set(names) else [])


def _arm_color(names) -> alt.Scale:
    """Each arm's colour from the registry, so an arm looks the same in every figure."""
    names = _arm_names(names)
    return alt.Scale(domain=names, range=[arms.color(a) for a in names])


def _title(title: str, subtitle: str | list[str] = "") -> alt.TitleParams:
    """A subtitle given as one string is broken into lines at '; ' so it never sets the chart's width."""
    lines = [s for s in (subtitle.split("; ") if isinstance(subtitle, str) else subtitle) if s]
    return alt.TitleParams(title, subtitle=lines, anchor="start") if lines else alt.TitleParams(title, anchor="start")


def _style(chart):
    """Font sizes that stay legible when the PNG is shown at MAX_PNG_WIDTH or less."""
    return (chart.configure_axis(labelFontSize=11, titleFontSize=12)
            .configure_header(labelFontSize=12, titleFontSize=12)
            .configure_legend(labelFontSize=11, titleFontSize=12)
            .configure_title(fontSize=15, subtitleFontSize=12))


def png_size(path: str | Path) -> tuple[int, int]:
    """(width, height) in pixels from a PNG's header."""
    with open(path, "rb") as f:
        head = f.read(24)
    if head[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError(f"{path}: not a PNG")
    return int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")


def _recompress_png(path: Path) -> None:
    """Deflate the PNG's pixel data again at zlib's best level: lossless (the same pixels), and a
    fifth of the size vl-convert's fast compression leaves."""
    data = path.read_bytes()
    chunks, i = [], 8
    while i < len(data):
        n = int.from_bytes(data[i:i + 4], "big")
        chunks.append((data[i + 4:i + 8], data[i + 8:i + 8 + n]))
        i += 12 + n
    idat = zlib.compress(zlib.decompress(b"".join(d for t, d in chunks if t == b"IDAT")), 9)

    def chunk(kind: bytes, body: bytes) -> bytes:
        return len(body).to_bytes(4, "big") + kind + body + zlib.crc32(kind + body).to_bytes(4, "big")

    out, wrote_idat = [data[:8]], False
    for kind, body in chunks:
        if kind != b"IDAT":
            out.append(chunk(kind, body))
        elif not wrote_idat:  # the first IDAT's place, for all of them
            out.append(chunk(b"IDAT", idat))
            wrote_idat = True
    path.write_bytes(b"".join(out))


def save_chart(chart: alt.TopLevelMixin, png_path: str | Path, html_path: str | Path,
               max_width: int = MAX_PNG_WIDTH) -> None:
    """Write the chart as PNG (at PNG_SCALE, or less so that it is at most max_width pixels wide,
    deflated at the best level) and as HTML with the JavaScript inlined, each atomically."""
    with atomic_path(png_path) as tmp:
        chart.save(tmp, format="png", scale_factor=1)
        width = png_size(tmp)[0]  # CSS pixels, rounded up
        scale = min(PNG_SCALE, math.floor(100 * max_width / width) / 100)
        chart.save(tmp, format="png", scale_factor=scale)
        _recompress_png(tmp)
    with atomic_path(html_path) as tmp:
        chart.save(tmp, format="html", inline=True)


def _nice_max(x: float) -> float:
    """The top of a rate axis that starts at 0: just above x on a 0.05 (0.1 above 0.3) grid, at most 1."""
    x = max(float(x), 0.0)
    step = 0.05 if x <= 0.3 else 0.1
    return min(1.0, max(step, math.ceil(x * 1.02 / step - 1e-9) * step))


def curve_chart(df: pd.DataFrame, title: str, subtitle: str | list[str] = "") -> alt.HConcatChart:
    """A1/A4: one point per arm at each evaluated checkpoint with its lo..hi interval as an error bar,
    one panel per metric (panel order as in df), each with its own 0-based y axis fitted to the data.
    Points of one arm are joined by a thin line only where there are at least three checkpoints.

    df columns: arm, step, metric, mean, lo, hi, n_seeds, and optionally interval (what lo..hi is).
    """
    arm_names = _arm_names(df["arm"])
    steps = sorted(set(df["step"]))
    color = alt.Color("arm:N", scale=_arm_color(df["arm"]), title="arm",
                      legend=alt.Legend(symbolType="circle", symbolOpacity=1))
    tooltip = ["arm", "step", "metric", alt.Tooltip("mean:Q", format=".3f"), alt.Tooltip("lo:Q", format=".3f"),
               alt.Tooltip("hi:Q", format=".3f"), "n_seeds"] + (["interval"] if "interval" in df else [])
    panels = []
    for metric in dict.fromkeys(df["metric"]):
        d = df[df["metric"] == metric]
        y_scale = alt.Scale(domain=[0, _nice_max(pd.concat([d["hi"], d["mean"]]).max())], nice=False)
        # Checkpoints on a band axis, the arms side by side in each band, so coinciding points
        # (every arm at step 0 starts from the same adapter init) and their bars stay visible.
        base = alt.Chart(d).encode(
            x=alt.X("step:O", sort=steps, title="checkpoint (training step)", axis=alt.Axis(labelAngle=0)),
            xOffset=alt.XOffset("arm:N", sort=arm_names, scale=alt.Scale(paddingOuter=0.6)))
        layers = [base.mark_rule(strokeWidth=2).encode(
            y=alt.Y("lo:Q", scale=y_scale, title="rate"), y2="hi:Q", color=color)]
        if len(steps) >= 3:
            layers.append(base.mark_line(strokeWidth=1, opacity=0.5).encode(
                y=alt.Y("mean:Q", scale=y_scale), color=color))
        layers.append(base.mark_point(filled=True, size=70, opacity=1).encode(
            y=alt.Y("mean:Q", scale=y_scale), color=color, tooltip=tooltip))
        panels.append(alt.layer(*layers).properties(width=max(160, 60 * len(steps)), height=220,
                                                    title=alt.TitleParams(metric, fontSize=13)))
    return _style(alt.hconcat(*panels, spacing=30).properties(title=_title(title, subtitle)))


def bar_chart(df: pd.DataFrame, x: str, title: str, subtitle: str | list[str] = "", column: str | None = "metric",
              y_title: str = "rate", columns: int = 2) -> alt.Chart:
    """A3/A5: bars of `mean` with lo..hi error bars, coloured by arm; the value axis starts at 0 and
    is fitted to the data.

    x == "arm" (A3): horizontal bars, one per arm (its name on the axis, so no legend), one panel
    per value of `column`, wrapped into rows of `columns` panels. Otherwise (A5): vertical bars of
    each arm side by side within each value of `x`.

    df columns: arm, `x`, mean, lo, hi, interval (what lo..hi is: SEM over seeds or Wilson 95%),
    and `column` when given.
    """
    tooltip = ["arm", x, alt.Tooltip("mean:Q", format=".3f"), alt.Tooltip("lo:Q", format=".3f"),
               alt.Tooltip("hi:Q", format=".3f"), "interval"]
    value = alt.Scale(zero=True, nice=True)
    if x == "arm":
        color = alt.Color("arm:N", scale=_arm_color(df["arm"]), legend=None)
        base = alt.Chart().encode(y=alt.Y("arm:N", title=None, sort=_arm_names(df["arm"])))
        bars = base.mark_bar().encode(x=alt.X("mean:Q", title=y_title, scale=value), color=color, tooltip=tooltip)
        errs = base.mark_rule(strokeWidth=1.5, color="black").encode(x="lo:Q", x2="hi:Q")
        chart = alt.layer(bars, errs, data=df).properties(width=230, height=alt.Step(16))
        if column is not None:
            chart = chart.facet(facet=alt.Facet(f"{column}:N", title=None, sort=list(dict.fromkeys(df[column]))),
                                columns=columns, spacing={"row": 20, "column": 20})
    else:  # side-by-side bars of each arm within a group
        color = alt.Color("arm:N", scale=_arm_color(df["arm"]), title="arm")
        groups = list(dict.fromkeys(df[x]))
        base = alt.Chart().encode(
            # a label breaks before its parenthesis ("exit_code" / "(held out)"), so it can lie flat
            x=alt.X(f"{x}:N", title=None, sort=groups,
                    axis=alt.Axis(labelAngle=0, labelExpr="split(replace(datum.label, ' (', '\\n('), '\\n')")),
            xOffset=alt.XOffset("arm:N", sort=_arm_names(df["arm"])))
        bars = base.mark_bar().encode(y=alt.Y("mean:Q", title=y_title, scale=value), color=color, tooltip=tooltip)
        errs = base.mark_rule(strokeWidth=1.5, color="black").encode(y="lo:Q", y2="hi:Q")
        chart = alt.layer(bars, errs, data=df).properties(width=alt.Step(max(8, min(18, 96 // df["arm"].nunique()))),
                                                          height=220)
        if column is not None:
            chart = chart.facet(facet=alt.Facet(f"{column}:N", title=None, sort=list(dict.fromkeys(df[column]))),
                                columns=columns)
    return _style(chart.properties(title=_title(title, subtitle)))


def gate_null_chart(null_df: pd.DataFrame, real_df: pd.DataFrame, title: str, subtitle: str | list[str] = "",
                    bin_step: float = 0.02) -> alt.Chart:
    """A7: per run, the AUROCs of its Haar null directions as a grey histogram strip (darker: more
    null directions in that AUROC bin of width bin_step) and the AUROC of the run's own direction
    (a coloured diamond), with the chance line at 0.5.

    null_df columns: run, arm, auroc (one row per null direction); real_df: run, arm, auroc, percentile.
    """
    arm_rank = {a: i for i, a in enumerate([*arms.REGISTRY, arms.BASE])}
    runs = list(real_df.assign(rank=real_df["arm"].map(arm_rank).fillna(len(arm_rank)))
                .sort_values(["rank", "run"])["run"])
    y = alt.Y("run:N", sort=runs, title=None)
    x_title = "score AUROC vs hack label (student rollouts)"
    domain = alt.Scale(domain=[0, 1])
    # One rect per run and bin (the binning and counting are Vega's, in the chart), not one tick per
    # null direction: a thousand anti-aliased ticks a run made a half-megabyte PNG.
    null = alt.Chart(null_df).mark_rect().encode(
        x=alt.X("auroc:Q", bin=alt.Bin(extent=[0, 1], step=bin_step), title=x_title, scale=domain,
                axis=alt.Axis(values=[i / 10 for i in range(11)], format=".1f")),
        y=y,
        color=alt.Color("count():Q", title=["null directions", f"per {bin_step:g} bin"],
                        scale=alt.Scale(scheme="greys", domainMin=0), legend=alt.Legend(orient="right", gradientLength=90)),
        tooltip=["run", alt.Tooltip("auroc:Q", bin=alt.Bin(extent=[0, 1], step=bin_step), title="AUROC bin"),
                 alt.Tooltip("count():Q", title="null directions")])
    real = alt.Chart(real_df).mark_point(shape="diamond", size=150, filled=True, opacity=1,
                                         stroke="white", strokeWidth=1).encode(
        x=alt.X("auroc:Q", scale=domain), y=y, color=alt.Color("arm:N", scale=_arm_color(real_df["arm"]), title="arm"),
        tooltip=["run", "arm", alt.Tooltip("auroc:Q", format=".3f"), alt.Tooltip("percentile:Q", format=".0f")])
    chance = alt.Chart(pd.DataFrame({"auroc": [0.5]})).mark_rule(strokeDash=[4, 4], color="black").encode(
        x=alt.X("auroc:Q", scale=domain))
    return _style(alt.layer(null, chance, real)
                  .resolve_scale(color="independent")
                  .properties(width=420, height=alt.Step(22), title=_title(title, subtitle)))
