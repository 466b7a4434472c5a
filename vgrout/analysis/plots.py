"""Altair charts of the artifacts, saved as self-contained HTML (Vega JavaScript inlined, so
it opens offline) and PNG (rendered by vl-convert).

Every chart takes a long-form table that aggregate.py already wrote as csv, so a figure
never computes a number the tables do not show.
"""
from __future__ import annotations

from pathlib import Path

import altair as alt
import pandas as pd

from vgrout import arms
from vgrout.io import atomic_path


def _arm_color(names) -> alt.Scale:
    """Each arm's colour from the registry, so an arm looks the same in every figure."""
    names = arms.order(n for n in names if n != arms.BASE) + ([arms.BASE] if arms.BASE in set(names) else [])
    return alt.Scale(domain=names, range=[arms.color(a) for a in names])


def _title(title: str, subtitle: str) -> alt.TitleParams:
    return alt.TitleParams(title, subtitle=subtitle) if subtitle else alt.TitleParams(title)


def save_chart(chart: alt.TopLevelMixin, png_path: str | Path, html_path: str | Path) -> None:
    """Write the chart as PNG and as HTML with the JavaScript inlined, each atomically."""
    with atomic_path(png_path) as tmp:
        chart.save(tmp, format="png", scale_factor=2)
    with atomic_path(html_path) as tmp:
        chart.save(tmp, format="html", inline=True)


def curve_chart(df: pd.DataFrame, title: str, subtitle: str = "") -> alt.FacetChart:
    """A1/A4: mean line with a mean ± SEM band over seeds, one panel per metric.

    df columns: arm, step, metric, mean, lo, hi (lo/hi = mean ∓ SEM; equal to mean for one seed).
    """
    # One colour encoding shared by the band, line and point layers, so they merge into one legend.
    color = alt.Color("arm:N", scale=_arm_color(df["arm"]), title="arm", legend=alt.Legend(symbolType="stroke", symbolOpacity=1, symbolStrokeWidth=3))
    base = alt.Chart().encode(x=alt.X("step:Q", title="training step", axis=alt.Axis(format="d", tickMinStep=1)))
    band = base.mark_area(opacity=0.25).encode(y=alt.Y("lo:Q", title="rate", scale=alt.Scale(domain=[0, 1])),
                                               y2="hi:Q", color=color)
    # Dashes tell the arms apart where their lines coincide (e.g. both at zero early on).
    line = base.mark_line().encode(
        y="mean:Q", color=color, strokeDash=alt.StrokeDash("arm:N", legend=None))
    points = base.mark_point(filled=True, size=40).encode(
        y="mean:Q", color=color,
        tooltip=["arm", "step", "metric", alt.Tooltip("mean:Q", format=".3f"), "n_seeds"])
    return (alt.layer(band, line, points, data=df)
            .properties(width=300, height=220)
            .facet(column=alt.Column("metric:N", title=None))
            .properties(title=_title(title, subtitle)))


def bar_chart(df: pd.DataFrame, x: str, title: str, subtitle: str = "", column: str | None = "metric",
              y_title: str = "rate") -> alt.Chart:
    """A3/A5: bars of `mean` with lo..hi error bars, grouped along `x`, coloured (and offset) by arm.

    df columns: arm, `x`, mean, lo, hi, interval (what lo..hi is: SEM over seeds or Wilson 95%),
    and `column` when given (one panel per value).
    """
    color = alt.Color("arm:N", scale=_arm_color(df["arm"]), title="arm")
    x_enc = alt.X(f"{x}:N", title=None, sort=list(dict.fromkeys(df[x])))
    if x == "arm":
        base, step = alt.Chart().encode(x=x_enc), 34
    else:  # side-by-side bars of each arm within a group
        base, step = alt.Chart().encode(x=x_enc, xOffset=alt.XOffset("arm:N", sort=[*arms.REGISTRY, arms.BASE])), 18
    bars = base.mark_bar().encode(
        y=alt.Y("mean:Q", title=y_title, scale=alt.Scale(domain=[0, 1])), color=color,
        tooltip=["arm", x, alt.Tooltip("mean:Q", format=".3f"), alt.Tooltip("lo:Q", format=".3f"),
                 alt.Tooltip("hi:Q", format=".3f"), "interval"])
    errs = base.mark_rule(strokeWidth=1.5, color="black").encode(y="lo:Q", y2="hi:Q")
    chart = alt.layer(bars, errs, data=df).properties(width=alt.Step(step), height=220)
    if column is not None:
        chart = chart.facet(column=alt.Column(f"{column}:N", title=None, sort=list(dict.fromkeys(df[column]))))
    return chart.properties(title=_title(title, subtitle))


def gate_null_chart(null_df: pd.DataFrame, real_df: pd.DataFrame, title: str, subtitle: str = "") -> alt.Chart:
    """A7: per run, the AUROC of each Haar null direction (grey ticks) and of the run's own
    direction (a coloured diamond), with the chance line at 0.5.

    null_df columns: run, arm, auroc (one row per null direction); real_df: run, arm, auroc, percentile.
    """
    arm_rank = {a: i for i, a in enumerate([*arms.REGISTRY, arms.BASE])}
    runs = list(real_df.assign(rank=real_df["arm"].map(arm_rank).fillna(len(arm_rank)))
                .sort_values(["rank", "run"])["run"])
    y = alt.Y("run:N", sort=runs, title=None)
    x = alt.X("auroc:Q", title="score AUROC vs hack label (student rollouts)", scale=alt.Scale(domain=[0, 1]))
    ticks = alt.Chart(null_df).mark_tick(color="#aaa", opacity=0.7, thickness=1.5).encode(x=x, y=y)
    real = alt.Chart(real_df).mark_point(shape="diamond", size=140, filled=True).encode(
        x=x, y=y, color=alt.Color("arm:N", scale=_arm_color(real_df["arm"])),
        tooltip=["run", "arm", alt.Tooltip("auroc:Q", format=".3f"), alt.Tooltip("percentile:Q", format=".0f")])
    chance = alt.Chart(pd.DataFrame({"auroc": [0.5]})).mark_rule(strokeDash=[4, 4], color="black").encode(x="auroc:Q")
    return (alt.layer(ticks, chance, real)
            .properties(width=360, height=alt.Step(22),
                        title=_title(title, subtitle)))
