"""Statistics of one or two traces of one prompt (model A and model B): across layers (lines
and min-max bands), one layer's distribution (histogram), and one statistic per token and layer
(heatmap). With two traces the models are told apart by colour (A blue, B vermillion) or by
panel, and the figure says how far apart they are (A − B)."""
from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from ...probes.compare import series_pair
from ..i18n import t
from .labels import MAX_TOKEN_COLUMNS, layers_text, point_label, token_axis
from .style import (GAPS, LAYER, DIVERGING_SCALE, HEATMAP_MIN, MASK_COLOR, MODEL_COLORS, PALETTE,
                    SEQUENTIAL_SCALE, both, clean, empty_figure, finish, lighter,
                    models, named, panels, translucent)

STAT_TITLES = {"mean": ("stat.mean", "Mean"), "std": ("stat.std", "Standard deviation"),
               "rms": ("stat.rms", "Root mean square"), "min": ("stat.min", "Minimum"),
               "max": ("stat.max", "Maximum"), "abs_mean": ("stat.abs_mean", "Mean absolute value"),
               "zero_frac": ("stat.zero_frac", "Fraction of exact zeros"),
               "nonfinite": ("stat.nonfinite", "Count of inf/NaN values")}

NORM_ROLE = {   # where norm1 sits, and what attention reads (the lecture point of pre vs post)
    "pre": ("statistics.role_pre", "{name}: pre-LN, norm1 normalises the block input and "
                                   "attention reads its output"),
    "post": ("statistics.role_post", "{name}: post-LN, attention reads the block input (not "
                                     "normalised); norm1 normalises the sum after attention"),
    "none": ("statistics.role_none", "{name}: no LayerNorm, attention reads the block input; "
                                     "nothing is normalised"),
}


def _point_stats(trace, point: str):
    """(PointStats or None, is_final) of a probe point."""
    if point in trace.final:
        return trace.final[point], True
    return trace.points.get(point), False


def _missing_note(points) -> str:
    if any(p.startswith(("ln", "final_norm")) for p in points):
        return t("statistics.not_in_this_model", "not in this model: {points} (no normalisation "
                 "layers)", points=", ".join(points))
    return t("statistics.not_recorded", "not recorded: {points}", points=", ".join(points))


def _layers_note(tr_a, tr_b) -> list[str]:
    la, lb = tr_a.n_layers, tr_b.n_layers
    if la == lb:
        return []
    who, first, last = ("A", lb, la - 1) if la > lb else ("B", la, lb - 1)
    return [t("statistics.has_layers_only_has", "A has {a} layers, B {b}: only {who} has layers "
              "{first}–{last} (not compared)", a=la, b=lb, who=who, first=first, last=last)]


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
        return t("statistics.nothing_both_models_recorded", "A − B: nothing both models recorded")
    if largest == 0:
        return t("statistics.zero_at_every_layer", "A − B: zero at every layer (the two agree)")
    n = min(tr_a.n_layers, tr_b.n_layers)
    return t("statistics.largest_over_layers_0",
             "largest |A − B| over layers 0–{last}: {parts}", last=n - 1,
             parts=" · ".join(parts))


def _series(trace, point):
    """(x, {mean, std, min, max}, layers with inf/NaN) of one probe point, or None."""
    stats, is_final = _point_stats(trace, point)
    if stats is None:
        return None
    series = {}
    bad_layers = set(np.flatnonzero(stats.overall["nonfinite"]).tolist())
    for stat in ("mean", "std", "min", "max"):
        series[stat], bad = clean(stats.overall[stat])
        if bad:
            bad_layers.update(np.flatnonzero(np.isnan(series[stat])).tolist())
    n = trace.n_layers
    if is_final:        # the final norm: one point, after the last layer
        return np.array([n - 1]), series, [n - 1] if bad_layers else []
    return np.arange(n), series, sorted(bad_layers)


def layer_stats_figure(traces, names=None, points=("ln1_in", "ln1_out")) -> go.Figure:
    """Mean (solid) and std (dashed) of each probe point across layers, with the min-max
    range as a light band behind them. One model: every point in one panel, a colour per
    point. Two: a panel per point (norm1's input and output: before and after LayerNorm),
    a colour per model, and the largest |A − B|."""
    traces, names = models(traces, names)
    alone = len(traces) == 1
    cols = 1 if alone else len(points)
    fig = panels(cols, horizontal_spacing=0.09, subplot_titles=[point_label(p) for p in points])
    notes, missing, nonfinite, found = [], [], [], []
    for tr, name, model_color in zip(traces, names, MODEL_COLORS):
        lacks = []
        for i, point in enumerate(points):
            got = _series(tr, point)
            if got is None:
                lacks.append(point)
                continue
            x, series, bad = got
            if bad:
                nonfinite += named([t("statistics.inf_nan_in", "{point}: inf/NaN in {layers}",
                                       point=point_label(point), layers=layers_text(bad))],
                                    name, alone)
            # one model: a colour per point; two: a colour per model, a panel per point
            color = PALETTE[len(found) % len(PALETTE)] if alone else model_color
            found.append(dict(col=1 if alone else i + 1, x=x, series=series, color=color,
                              label=point_label(point) if alone else name,
                              group=point if alone else name))
        if lacks:
            missing += ([_missing_note(lacks)] if alone else
                        [t("statistics.has_no", "{name} has no {point}", name=name, point=p)
                         for p in lacks])
    title = both(t("statistics.statistics_across_layers", "Statistics across layers"), alone)
    if not found:
        return empty_figure(title, t("statistics.none_these_probe_points", "None of these probe "
                                     "points was recorded for this model."),
                            notes=missing)
    # bands first (the widest at the back), so every band edge and every line stays visible
    widths = [np.nanmean(f["series"]["max"] - f["series"]["min"])
              if np.isfinite(f["series"]["max"] - f["series"]["min"]).any() else 0.0
              for f in found]
    for i in np.argsort(widths, kind="stable")[::-1]:
        f = found[i]
        series, line = f["series"], dict(width=1, color=f["color"])
        fig.add_trace(go.Scatter(x=f["x"], y=series["max"], mode="lines", showlegend=False,
                            legendgroup=f["group"], line=line, hoverinfo="skip"), row=1, col=f["col"])
        fig.add_trace(go.Scatter(
            x=f["x"], y=series["min"], mode="lines", line=line, legendgroup=f["group"],
            fill="tonexty", showlegend=False, customdata=series["max"],
            # two models' bands overlap: each shows through the other
            fillcolor=lighter(f["color"]) if alone else translucent(f["color"]),
            hovertemplate=t("statistics.layer_min_max",
                            "layer %{x}: min %{y:.3g}, max %{customdata:.3g}")
                          + f"<extra>{f['group']}</extra>"), row=1, col=f["col"])
    lines = (("mean", None, None, t("statistics.layer_mean", "layer %{x}: mean %{y:.4g}")),
             ("std", "dash", "square", t("statistics.layer_std", "layer %{x}: std %{y:.4g}")))
    for f in found:
        for stat, dash, symbol, hover in lines:
            fig.add_trace(go.Scatter(
                x=f["x"], y=f["series"][stat], mode="lines+markers", name=f["label"],
                legendgroup=f["group"], showlegend=False if stat == "std" or f["col"] > 1
                else None, line=dict(color=f["color"], width=3.5, dash=dash),
                marker=dict(size=9, symbol=symbol),
                hovertemplate=hover + f"<extra>{f['group']}</extra>"), row=1, col=f["col"])
    notes.append(t("statistics.solid_line_mean_dashed", "solid line: mean · dashed line: "
                   "standard deviation · light band: min to max"))
    if not alone:
        tr_a, tr_b = traces
        notes.append(difference_note(tr_a, tr_b, points))
        placements = [tr.config["norm_placement"] for tr in traces]
        if placements[0] != placements[1]:
            notes += [t(*NORM_ROLE[p], name=name) for p, name in zip(placements, names)]
        notes += _layers_note(tr_a, tr_b)
    notes += missing
    if nonfinite:
        notes += nonfinite + [t("statistics.inf_nan_values_are",
                                "(inf/NaN values are shown as gaps)")]
    most = max(tr.n_layers for tr in traces)
    fig.update_xaxes(dtick=1 if most * cols <= 30 else None, tickformat="d",
                     range=[-0.3, most - 0.7], title_text=t("statistics.layer_transformer_block",
                                                            "layer (transformer block)"))
    fig.update_yaxes(col=1, title_text=t("statistics.value", "value"))
    return finish(fig, title, 540, notes=notes, legend=True, wrap=120)   # as wide as the page


def _density(stats, row):
    """(bar centres, densities, widths) of one layer's histogram, or None: no finite values."""
    counts = np.asarray(stats.hist_counts[row], dtype=np.float64)
    edges = np.asarray(stats.hist_edges[row], dtype=np.float64)
    widths = np.diff(edges)
    total = counts.sum()
    if total == 0:
        return None
    return (((edges[:-1] + edges[1:]) / 2).astype(np.float32),
            (counts / (total * widths)).astype(np.float32), widths.astype(np.float32))


def histogram_figure(traces, layer, points=("ln1_in", "ln1_out"), names=None) -> go.Figure:
    """Distribution of each probe point's values in one layer, as densities (so different
    ranges compare), overlaid with transparency; two models side by side on one x range."""
    traces, names = models(traces, names)
    alone = len(traces) == 1
    final_only = all(p in traces[0].final for p in points)
    fig = panels(len(traces), horizontal_spacing=0.08, subplot_titles=list(names))
    notes, shown = [], 0
    for col, (tr, name) in enumerate(zip(traces, names), 1):
        if not final_only and layer >= tr.n_layers:   # A's layer, beyond B's
            notes.append(t("statistics.has_no_layer_its", "{name} has no layer {layer} (its "
                           "layers: 0 to {last})", name=name, layer=layer, last=tr.n_layers - 1))
            continue
        missing, own = [], []
        for i, point in enumerate(points):
            stats, is_final = _point_stats(tr, point)
            if stats is None:
                missing.append(point)
                continue
            row = 0 if is_final else layer
            bars = _density(stats, row)
            if bars is None:
                own.append(t("statistics.no_finite_values", "{point}: no finite values",
                             point=point))
                continue
            x, y, width = bars
            shown += 1
            fig.add_trace(go.Bar(x=x, y=y, width=width, name=point_label(point), legendgroup=point,
                            showlegend=False if col > 1 else None,
                            marker=dict(color=PALETTE[i % len(PALETTE)], line=dict(width=0)),
                            opacity=0.55,
                            hovertemplate=t("statistics.value_density",
                                            "value %{x:.3g}: density %{y:.3g}")
                                          + f"<extra>{point}</extra>"), row=1, col=col)
            if stats.overall["nonfinite"][row]:
                own.append(t("statistics.inf_nan_values_left",
                             "{point}: {n} inf/NaN values left out", point=point,
                             n=int(stats.overall["nonfinite"][row])))
        if missing:
            own.append(_missing_note(missing))
        notes += named(own, name, alone)
    title = (t("statistics.distribution_values_at_final",
               "Distribution of values at the final norm") if final_only
             else t("statistics.distribution_values_in_layer",
                    "Distribution of values in layer {layer}", layer=layer))
    title = both(title, alone)
    if not shown:
        return empty_figure(title, t("statistics.nothing_show_for_these",
                                     "Nothing to show for these probe points."), notes=notes)
    fig.update_layout(barmode="overlay", bargap=0)
    fig.update_xaxes(title_text=t("statistics.activation_value", "activation value"),
                     **({} if alone else dict(matches="x")))
    fig.update_yaxes(col=1, title_text=t("statistics.density", "density"))
    return finish(fig, title, 500, notes=notes, legend=True, wrap=120)   # as wide as the page


def _colour_range(zs, stat) -> dict:
    """The colour scale: diverging around 0 for the mean, else sequential; several panels
    share one, from the smallest to the largest finite value of all (one panel: plotly's
    own range, the same)."""
    if len(zs) == 1:
        return dict(colorscale=DIVERGING_SCALE, zmid=0) if stat == "mean" else \
            dict(colorscale=SEQUENTIAL_SCALE)
    finite = np.concatenate([z[np.isfinite(z)] for z in zs])
    if stat == "mean":
        bound = float(np.max(np.abs(finite))) if finite.size else 1.0
        return dict(colorscale=DIVERGING_SCALE, zmin=-bound, zmax=bound)
    return dict(colorscale=SEQUENTIAL_SCALE, zmin=float(finite.min()) if finite.size else 0.0,
                zmax=float(finite.max()) if finite.size else 1.0)


def token_heatmap_figure(traces, point="resid_pre", stat="std", names=None) -> go.Figure:
    """Layers (y) x token positions (x), colour = a per-token statistic of one probe point;
    two models side by side on one colour scale."""
    traces, names = models(traces, names)
    alone = len(traces) == 1
    title = both(t("statistics.per_token", "{stat} per token", stat=t(*STAT_TITLES[stat])),
                 alone)
    notes = [t("statistics.measured_at", "measured at: {label} ({point})",
               label=point_label(point), point=point)
             if alone else t("statistics.measured_at_one_colour",
                             "measured at: {label} ({point}); one colour scale for both",
                             label=point_label(point), point=point)]
    panels_of, missing = [], []
    for col, (tr, name) in enumerate(zip(traces, names), 1):
        stats, is_final = _point_stats(tr, point)
        if stats is None:
            missing.append(_missing_note([point]) if alone else
                           t("statistics.has_no", "{name} has no {point}", name=name, point=point))
            continue
        z, bad = clean(stats.per_token[stat])
        n_tokens = z.shape[1]
        start = max(0, n_tokens - MAX_TOKEN_COLUMNS)
        if start:
            notes.append(t("statistics.last_tokens", "the last {shown} of {n} tokens",
                           shown=MAX_TOKEN_COLUMNS, n=n_tokens))
        if bad:
            notes.append(t(*GAPS))
        layers = [tr.n_layers - 1] if is_final else list(range(z.shape[0]))
        panels_of.append((col, tr, name, np.ascontiguousarray(z[:, start:]), start, layers,
                          is_final))
    if not panels_of:
        return empty_figure(title, missing[0] if alone else "; ".join(missing), notes=notes)
    fig = panels(len(traces), horizontal_spacing=0.06, subplot_titles=list(names))
    scale = _colour_range([p[3] for p in panels_of], stat)
    for col, tr, name, z, start, layers, _ in panels_of:
        cats, tickvals, ticktext = token_axis(tr.tokens[start:], start, ids=tr.token_ids[start:])
        fig.add_trace(go.Heatmap(
            z=z, x=cats, y=layers, hoverongaps=False, **scale,
            showscale=False if col > 1 else None,     # one colour bar for every panel
            colorbar=dict(title=dict(text=stat, side="right")),
            hovertemplate=("" if alone else name + " · ")
                          + t("statistics.layer_token", "layer %{y}, token %{x}")
                          + "<br>" + stat + " %{z:.4g}<extra></extra>"), row=1, col=col)
        fig.update_xaxes(col=col, type="category", tickvals=tickvals, ticktext=ticktext,
             tickangle=-90 if len(tickvals) * len(traces) > 12 else 0, showgrid=False)
    most = max(len(p[5]) for p in panels_of)
    fig.update_yaxes(dtick=1 if most <= 24 else None, tickformat="d", showgrid=False)
    fig.update_yaxes(col=1,
         title_text=t("statistics.layer_final_norm", "layer (final norm)") if panels_of[0][6]
                    else t(*LAYER))
    fig.update_xaxes(title_text=t("statistics.token", "token"))
    fig.update_layout(plot_bgcolor=MASK_COLOR)
    height = max(420, min(900, 260 + 20 * (len(traces) - 1) + 34 * most))
    return finish(fig, title, height, notes=list(dict.fromkeys(notes + missing)), wrap=120,
                  plot_min=HEATMAP_MIN)
