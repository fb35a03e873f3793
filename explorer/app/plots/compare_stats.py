"""Two traces of one prompt (model A and model B) side by side: each layer's statistics before
and after LayerNorm with both models overlaid, one layer's distributions in two panels, and
the per-token heatmaps on one colour scale. Model A is drawn in blue, B in vermillion."""
from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ...probes import STAT_NAMES
from ...probes.compare import series_pair
from ..i18n import t
from .compare_model import COLORS
from .curves import activation_figure
from .labels import MAX_TOKEN_COLUMNS, point_label, token_axis
from .statistics import STAT_TITLES, _point_stats
from .style import (DIVERGING, LIGHT_BAR, MASK_COLOR, PALETTE, PURPLE, SEQUENTIAL_SCALE,
                    TICK_SIZE, _scale, clean, finish, lighter)

B_BARS = lighter(PURPLE, 0.55)   # B's real inputs under the activation curves

NORM_ROLE = {   # where norm1 sits, and what attention reads (the lecture point of pre vs post)
    "pre": "{name}: pre-LN, norm1 normalises the block input and attention reads its output",
    "post": "{name}: post-LN, attention reads the block input (not normalised); norm1 "
            "normalises the sum after attention",
    "none": "{name}: no LayerNorm, attention reads the block input; nothing is normalised",
}


def _translucent(color: str, alpha: float = 0.16) -> str:
    """'#rrggbb' as 'rgba(r,g,b,a)' (plotly.js 3 reads the comma form): both models' bands
    show through each other."""
    r, g, b = (int(color[i:i + 2], 16) for i in (1, 3, 5))
    return f"rgba({r},{g},{b},{alpha})"


def _layers_note(tr_a, tr_b) -> list[str]:
    la, lb = tr_a.n_layers, tr_b.n_layers
    if la == lb:
        return []
    who, first, last = ("A", lb, la - 1) if la > lb else ("B", la, lb - 1)
    return [t("A has {a} layers, B {b}: only {who} has layers {first}–{last} (not compared)",
              a=la, b=lb, who=who, first=first, last=last)]


def difference_note(tr_a, tr_b, points, stats=("mean", "std")) -> str:
    """The largest |A − B| of each statistic over the layers both models have."""
    parts, largest = [], 0.0
    for point in points:
        found = []
        for stat in stats:
            _, _, diff = series_pair(tr_a, tr_b, point, stat)
            if np.isfinite(diff).any():
                value = float(np.nanmax(np.abs(diff)))
                largest = max(largest, value)
                found.append(f"{stat} {value:.2g}")
        if found:
            parts.append(f"{point}: {', '.join(found)}")
    if not parts:
        return t("A − B: nothing both models recorded")
    if largest == 0:
        return t("A − B: zero at every layer (the two agree)")
    n = min(tr_a.n_layers, tr_b.n_layers)
    return t("largest |A − B| over layers 0–{last}: {parts}", last=n - 1,
             parts=" · ".join(parts))


def layer_stats_pair_figure(tr_a, tr_b, names, points=("ln1_in", "ln1_out")) -> go.Figure:
    """One panel per probe point (norm1's input and output: before and after LayerNorm), both
    models in each: mean (solid), std (dashed), min to max (light band), per layer."""
    fig = make_subplots(rows=1, cols=len(points), horizontal_spacing=0.09,
                        subplot_titles=[point_label(p) for p in points])
    notes = [t("solid: mean · dashed: standard deviation · band: min to max"),
             difference_note(tr_a, tr_b, points)]
    missing, lines = [], []
    for col, point in enumerate(points, 1):
        for tr, name, color in zip((tr_a, tr_b), names, COLORS):
            stats, is_final = _point_stats(tr, point)
            if stats is None:
                missing.append(t("{name} has no {point}", name=name, point=point))
                continue
            series = {s: clean(stats.overall[s])[0] for s in ("mean", "std", "min", "max")}
            x = np.array([tr.n_layers - 1]) if is_final else np.arange(tr.n_layers)
            # the bands first (both models'), so that no band hides a line
            fig.add_trace(go.Scatter(x=x, y=series["max"], mode="lines", showlegend=False,
                                     legendgroup=name, line=dict(width=1, color=color),
                                     hoverinfo="skip"), row=1, col=col)
            fig.add_trace(go.Scatter(
                x=x, y=series["min"], mode="lines", line=dict(width=1, color=color),
                legendgroup=name, fill="tonexty", fillcolor=_translucent(color),
                showlegend=False, customdata=series["max"],
                hovertemplate=t("layer %{x}: min %{y:.3g}, max %{customdata:.3g}")
                              + f"<extra>{name}</extra>"), row=1, col=col)
            lines.append((col, x, series, name, color))
    for col, x, series, name, color in lines:
        fig.add_trace(go.Scatter(x=x, y=series["mean"], mode="lines+markers", name=name,
                                 showlegend=col == 1, legendgroup=name,
                                 line=dict(color=color, width=3.5), marker=dict(size=8),
                                 hovertemplate=t("layer %{x}: mean %{y:.4g}")
                                               + f"<extra>{name}</extra>"), row=1, col=col)
        fig.add_trace(go.Scatter(x=x, y=series["std"], mode="lines+markers", name=name,
                                 showlegend=False, legendgroup=name,
                                 line=dict(color=color, width=3.5, dash="dash"),
                                 marker=dict(size=8, symbol="square"),
                                 hovertemplate=t("layer %{x}: std %{y:.4g}")
                                               + f"<extra>{name}</extra>"), row=1, col=col)
    placements = (tr_a.config["norm_placement"], tr_b.config["norm_placement"])
    if placements[0] != placements[1]:
        notes += [t(NORM_ROLE[p], name=name) for p, name in zip(placements, names)]
    notes += _layers_note(tr_a, tr_b) + missing
    most = max(tr_a.n_layers, tr_b.n_layers)
    fig.update_xaxes(dtick=1 if most <= 16 else None, tickformat="d", range=[-0.3, most - 0.7],
                     title_text=t("layer (transformer block)"))
    fig.update_yaxes(title_text=t("value"), col=1)
    return finish(fig, t("Statistics across layers: A and B"), 560, notes=notes, legend=True,
                  wrap=120)


def _density_bars(fig, tr, layer, points, col):
    """One panel of the distribution pair: each point's density in one layer."""
    for i, point in enumerate(points):
        stats, is_final = _point_stats(tr, point)
        if stats is None:
            continue
        row = 0 if is_final else layer
        counts = np.asarray(stats.hist_counts[row], dtype=np.float64)
        edges = np.asarray(stats.hist_edges[row], dtype=np.float64)
        total = counts.sum()
        if total == 0:
            continue
        widths = np.diff(edges)
        fig.add_trace(go.Bar(
            x=((edges[:-1] + edges[1:]) / 2).astype(np.float32),
            y=(counts / (total * widths)).astype(np.float32), width=widths.astype(np.float32),
            name=point_label(point), legendgroup=point, showlegend=col == 1,
            marker=dict(color=PALETTE[i % len(PALETTE)], line=dict(width=0)), opacity=0.55,
            hovertemplate=t("value %{x:.3g}: density %{y:.3g}") + f"<extra>{point}</extra>"),
            row=1, col=col)


def histogram_pair_figure(tr_a, tr_b, layer: int, names, points=("ln1_in", "ln1_out")
                          ) -> go.Figure:
    """One layer's distributions of A (left) and B (right), on one x range."""
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.08, subplot_titles=list(names))
    notes = []
    for col, (tr, name) in enumerate(zip((tr_a, tr_b), names), 1):
        final_only = all(p in tr.final for p in points)
        if not final_only and layer >= tr.n_layers:
            notes.append(t("{name} has no layer {layer} (its layers: 0 to {last})", name=name,
                           layer=layer, last=tr.n_layers - 1))
            continue
        if all(_point_stats(tr, p)[0] is None for p in points):
            notes.append(t("{name} has no {points} (no LayerNorm)", name=name,
                           points=", ".join(points)))
            continue
        _density_bars(fig, tr, layer, points, col)
    fig.update_xaxes(matches="x", title_text=t("activation value"))
    fig.update_yaxes(title_text=t("density"), col=1)
    fig.update_layout(barmode="overlay", bargap=0)
    final_only = all(p in tr_a.final for p in points)
    title = (t("Distribution of values at the final norm: A and B") if final_only
             else t("Distribution of values in layer {layer}: A and B", layer=layer))
    return finish(fig, title, 500, notes=notes, legend=True, wrap=120)


def token_heatmap_pair_figure(tr_a, tr_b, names, point="resid_pre", stat="std") -> go.Figure:
    """A's and B's per-token statistic, side by side on one colour scale."""
    if stat not in STAT_NAMES:
        raise ValueError(f"Unknown statistic {stat!r}; choose from {', '.join(STAT_NAMES)}.")
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.06, subplot_titles=list(names))
    notes = [t("measured at: {label} ({point}); one colour scale for both",
               label=point_label(point), point=point)]
    zs, most_layers = [], 1
    for col, tr in enumerate((tr_a, tr_b), 1):
        stats, is_final = _point_stats(tr, point)
        if stats is None:
            notes.append(t("{name} has no {point}", name=names[col - 1], point=point))
            continue
        z, _ = clean(stats.per_token[stat])
        start = max(0, z.shape[1] - MAX_TOKEN_COLUMNS)
        z = np.ascontiguousarray(z[:, start:])
        zs.append(z)
        cats, tickvals, ticktext = token_axis(tr.tokens[start:], start, ids=tr.token_ids[start:])
        layers = [tr.n_layers - 1] if is_final else list(range(z.shape[0]))
        most_layers = max(most_layers, len(layers))
        fig.add_trace(go.Heatmap(z=z, x=cats, y=layers, coloraxis="coloraxis",
                                 hoverongaps=False,
                                 hovertemplate=names[col - 1] + " · " + t("layer %{y}, token %{x}")
                                               + "<br>" + stat + " %{z:.4g}<extra></extra>"),
                      row=1, col=col)
        fig.update_xaxes(type="category", tickvals=tickvals, ticktext=ticktext,
                         tickangle=-90 if len(tickvals) > 8 else 0, showgrid=False,
                         row=1, col=col)
        if start:
            notes.append(t("the last {shown} of {n} tokens", shown=MAX_TOKEN_COLUMNS,
                           n=z.shape[1] + start))
    finite = [z[np.isfinite(z)] for z in zs]
    finite = np.concatenate(finite) if finite else np.zeros(1)
    if stat == "mean":
        bound = float(np.max(np.abs(finite))) if finite.size else 1.0
        axis = dict(colorscale=_scale(DIVERGING), cmid=0, cmin=-bound, cmax=bound)
    else:
        axis = dict(colorscale=SEQUENTIAL_SCALE,
                    cmin=float(finite.min()) if finite.size else 0.0,
                    cmax=float(finite.max()) if finite.size else 1.0)
    fig.update_layout(coloraxis=dict(**axis, colorbar=dict(
        title=dict(text=stat, side="right"), tickfont=dict(size=TICK_SIZE))),
        plot_bgcolor=MASK_COLOR)
    fig.update_yaxes(dtick=1 if most_layers <= 24 else None, tickformat="d", showgrid=False,
                     title_text=t("layer"))
    fig.update_yaxes(title_text=None, col=2)
    height = max(420, min(900, 280 + 34 * most_layers))
    return finish(fig, t("{stat} per token: A and B", stat=t(STAT_TITLES[stat])), height,
                  notes=list(dict.fromkeys(notes)), wrap=120)


def activation_pair_figure(curves: dict, show, derivatives, hist_a, hist_b, names
                           ) -> go.Figure:
    """The activation curves over both models' real feed-forward inputs in the chosen layer
    (``curves.activation_figure`` with B's histogram beside A's). A histogram is
    (counts, edges), or None where that model has no such layer."""
    fig = activation_figure(curves, show=show, derivatives=derivatives,
                            ff_pre_hist=hist_a if hist_a is not None else hist_b)
    bars = [trace for trace in fig.data if trace.type == "bar"]
    if not bars:
        return fig
    # The curves take the palette's first colours (blue, vermillion ...): the bars keep the
    # single view's grey-blue for A, and a light purple (no curve's colour) for B.
    first = bars[0]
    first.name = t("real feed-forward inputs of {name}", name=names[0 if hist_a is not None
                                                                    else 1])
    first.marker.color = LIGHT_BAR if hist_a is not None else B_BARS
    first.opacity = 0.7
    if hist_a is not None and hist_b is not None:
        counts, edges = (np.asarray(a, dtype=np.float64) for a in hist_b)
        total = counts.sum()
        if total > 0:
            fig.add_trace(go.Bar(
                x=((edges[:-1] + edges[1:]) / 2).astype(np.float32),
                y=(counts / total).astype(np.float32), width=np.diff(edges).astype(np.float32),
                name=t("real feed-forward inputs of {name}", name=names[1]), opacity=0.7,
                marker=dict(color=B_BARS, line=dict(width=0)),
                hovertemplate=t("input %{x:.3g}: %{y:.1%} of values")
                              + f"<extra>{names[1]}</extra>"))
            # drawn under the curves, as A's bars are: move it next to them
            fig.data = (fig.data[0], fig.data[-1], *fig.data[1:-1])
    return fig
