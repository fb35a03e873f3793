"""Statistics of a trace: across layers (lines and min-max bands), one layer's distribution
(histogram), and one statistic per token and layer (heatmap)."""
from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from ...book.probe_points import POINT_LABELS
from ...probes import STAT_NAMES
from ..i18n import t
from .labels import MAX_TOKEN_COLUMNS, layers_text, point_label, token_axis
from .style import (DIVERGING_SCALE, MASK_COLOR, PALETTE, SEQUENTIAL_SCALE, TICK_SIZE, clean,
                    empty_figure, finish, lighter)

STAT_TITLES = {"mean": "Mean", "std": "Standard deviation", "rms": "Root mean square",
               "min": "Minimum", "max": "Maximum", "abs_mean": "Mean absolute value",
               "zero_frac": "Fraction of exact zeros", "nonfinite": "Count of inf/NaN values"}


def _point_stats(trace, point: str):
    """(PointStats or None, is_final) for a probe point name; ValueError for unknown names."""
    if point not in POINT_LABELS:
        raise ValueError(f"Unknown probe point {point!r}; choose from "
                         f"{', '.join(POINT_LABELS)}.")
    if point in trace.final:
        return trace.final[point], True
    return trace.points.get(point), False


def _missing_note(points) -> str:
    if any(p.startswith(("ln", "final_norm")) for p in points):
        return t("not in this model: {points} (no normalisation layers)",
                 points=", ".join(points))
    return t("not recorded: {points}", points=", ".join(points))


def _check_layer(trace, layer) -> int:
    n = trace.n_layers
    if isinstance(layer, bool) or not isinstance(layer, (int, np.integer)) \
            or not 0 <= layer < n:
        raise ValueError(f"Layer {layer!r} does not exist: this model has layers 0 to {n - 1}.")
    return int(layer)


def layer_stats_figure(trace, points=("ln1_in", "ln1_out")) -> go.Figure:
    """Mean (solid) and std (dashed) of each probe point across layers, with the min-max
    range as a light band behind them."""
    notes, missing, nonfinite = [], [], []
    n_layers = trace.n_layers
    found = []
    for point in points:
        stats, is_final = _point_stats(trace, point)
        if stats is None:
            missing.append(point)
            continue
        series = {}
        bad_layers = set(np.flatnonzero(stats.overall["nonfinite"]).tolist())
        for stat in ("mean", "std", "min", "max"):
            series[stat], bad = clean(stats.overall[stat])
            if bad:
                bad_layers.update(np.flatnonzero(np.isnan(series[stat])).tolist())
        if bad_layers:
            where = [n_layers - 1] if is_final else sorted(bad_layers)
            nonfinite.append(t("{point}: inf/NaN in {layers}", point=point_label(point),
                               layers=layers_text(where)))
        x = np.array([n_layers - 1]) if is_final else np.arange(n_layers)
        color = PALETTE[len(found) % len(PALETTE)]
        found.append((point, x, series, color))
    title = t("Statistics across layers")
    if missing:
        notes.append(_missing_note(missing))
    if not found:
        return empty_figure(title, t("None of these probe points was recorded for this model."),
                            notes=notes)
    fig = go.Figure()
    # bands first (the widest at the back), so every band edge and every line stays visible
    widths = [np.nanmean(s["max"] - s["min"]) if np.isfinite(s["max"] - s["min"]).any()
              else 0.0 for _, _, s, _ in found]
    for i in np.argsort(widths)[::-1]:
        point, x, series, color = found[i]
        fig.add_trace(go.Scatter(x=x, y=series["max"], mode="lines", showlegend=False,
                                 line=dict(width=1, color=color), hoverinfo="skip"))
        fig.add_trace(go.Scatter(
            x=x, y=series["min"], mode="lines", line=dict(width=1, color=color),
            fill="tonexty", fillcolor=lighter(color), showlegend=False,
            customdata=series["max"],
            hovertemplate=t("layer %{x}: min %{y:.3g}, max %{customdata:.3g}")
                          + "<extra>" + point + "</extra>"))
    for point, x, series, color in found:
        label = point_label(point)
        fig.add_trace(go.Scatter(x=x, y=series["mean"], mode="lines+markers", name=label,
                                 legendgroup=point, line=dict(color=color, width=3.5),
                                 marker=dict(size=9),
                                 hovertemplate=t("layer %{x}: mean %{y:.4g}") + "<extra>"
                                               + point + "</extra>"))
        fig.add_trace(go.Scatter(x=x, y=series["std"], mode="lines+markers", name=label,
                                 legendgroup=point, showlegend=False,
                                 line=dict(color=color, width=3.5, dash="dash"),
                                 marker=dict(size=9, symbol="square"),
                                 hovertemplate=t("layer %{x}: std %{y:.4g}") + "<extra>"
                                               + point + "</extra>"))
    notes.insert(0, t("solid line: mean · dashed line: standard deviation · light band: "
                      "min to max"))
    if nonfinite:
        notes += nonfinite + [t("(inf/NaN values are shown as gaps)")]
    fig.update_xaxes(dtick=1 if n_layers <= 30 else None, tickformat="d",
                     range=[-0.3, n_layers - 0.7])
    return finish(fig, title, 540, notes=notes, x_title=t("layer (transformer block)"),
                  y_title=t("value"), legend=True, wrap=120)   # as wide as the page


def histogram_figure(trace, layer, points=("ln1_in", "ln1_out")) -> go.Figure:
    """Distribution of each probe point's values in one layer, as densities (so different
    ranges compare), overlaid with transparency."""
    layer = _check_layer(trace, layer)
    fig = go.Figure()
    notes, missing = [], []
    shown = 0
    for point in points:
        stats, is_final = _point_stats(trace, point)
        if stats is None:
            missing.append(point)
            continue
        row = 0 if is_final else layer
        counts = np.asarray(stats.hist_counts[row], dtype=np.float64)
        edges = np.asarray(stats.hist_edges[row], dtype=np.float64)
        widths = np.diff(edges)
        total = counts.sum()
        if total == 0:
            notes.append(t("{point}: no finite values", point=point))
            continue
        density = counts / (total * widths)
        color = PALETTE[shown % len(PALETTE)]
        shown += 1
        name = point_label(point)
        fig.add_trace(go.Bar(
            x=((edges[:-1] + edges[1:]) / 2).astype(np.float32),
            y=density.astype(np.float32), width=widths.astype(np.float32), name=name,
            marker=dict(color=color, line=dict(width=0)), opacity=0.55,
            hovertemplate=t("value %{x:.3g}: density %{y:.3g}") + "<extra>" + point
                          + "</extra>"))
        if stats.overall["nonfinite"][row]:
            notes.append(t("{point}: {n} inf/NaN values left out", point=point,
                           n=int(stats.overall["nonfinite"][row])))
    if missing:
        notes.append(_missing_note(missing))
    final_only = all(p in trace.final for p in points)
    title = (t("Distribution of values at the final norm") if final_only
             else t("Distribution of values in layer {layer}", layer=layer))
    if not shown:
        return empty_figure(title, t("Nothing to show for these probe points."), notes=notes)
    fig.update_layout(barmode="overlay", bargap=0)
    return finish(fig, title, 500, notes=notes, x_title=t("activation value"),
                  y_title=t("density"), legend=True)


def token_heatmap_figure(trace, point="resid_pre", stat="std") -> go.Figure:
    """Layers (y) x token positions (x), colour = a per-token statistic of one probe point."""
    if stat not in STAT_NAMES:
        raise ValueError(f"Unknown statistic {stat!r}; choose from {', '.join(STAT_NAMES)}.")
    stats, is_final = _point_stats(trace, point)
    title = t("{stat} per token", stat=t(STAT_TITLES[stat]))
    where = t("measured at: {label} ({point})", label=point_label(point), point=point)
    if stats is None:
        return empty_figure(title, _missing_note([point]), notes=[where])
    z, bad = clean(stats.per_token[stat])
    n_tokens = z.shape[1]
    start = max(0, n_tokens - MAX_TOKEN_COLUMNS)
    z = np.ascontiguousarray(z[:, start:])
    notes = [where]
    if start:
        notes.append(t("the last {shown} of {n} tokens", shown=MAX_TOKEN_COLUMNS, n=n_tokens))
    if bad:
        notes.append(t("inf/NaN values shown as gaps (grey)"))
    cats, tickvals, ticktext = token_axis(trace.tokens[start:], start,
                                          ids=trace.token_ids[start:])
    layers = [trace.n_layers - 1] if is_final else list(range(z.shape[0]))
    scale = dict(colorscale=DIVERGING_SCALE, zmid=0) if stat == "mean" else \
        dict(colorscale=SEQUENTIAL_SCALE)
    fig = go.Figure(go.Heatmap(
        z=z, x=cats, y=layers, hoverongaps=False, **scale,
        colorbar=dict(title=dict(text=stat, side="right"), tickfont=dict(size=TICK_SIZE)),
        hovertemplate=t("layer %{y}, token %{x}") + "<br>" + stat
                      + " %{z:.4g}<extra></extra>"))
    fig.update_xaxes(type="category", tickvals=tickvals, ticktext=ticktext,
                     tickangle=-90 if len(tickvals) > 12 else 0,
                     showgrid=False)
    fig.update_yaxes(dtick=1 if len(layers) <= 24 else None, tickformat="d", showgrid=False)
    height = max(420, min(900, 260 + 34 * len(layers)))
    fig.update_layout(plot_bgcolor=MASK_COLOR)
    return finish(fig, title, height, notes=notes, x_title=t("token"),
                  y_title=t("layer (final norm)") if is_final else t("layer"))
