"""Plotly figures (and one HTML diagram) made from plain data: a ``Trace``, a ``ParameterCount``,
next-token candidates, activation curves, gradient summaries. Nothing here runs the model.

Every figure goes through ``_finish``: one lean layout (no plotly template, our own fonts,
margins, grid and an explicit height) so that figures stay small on the wire and readable on a
projector. ``gr.Plot`` draws them with plotly.js 3.3.1, so colours are ``#rrggbb`` only and the
traces are Heatmap, Bar and Scatter. Arrays go in as float32 numpy (sent base64-encoded).
"""
from __future__ import annotations

import html
import math
import textwrap

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..book.config import GPTConfig, ParameterCount
from ..book.curves import ACTIVATION_LABELS
from ..book.probe_points import POINT_LABELS
from ..probes import STAT_NAMES

# ---------------------------------------------------------------------------------------------
# Style: the one source of truth for how every figure looks.
FONT_FAMILY = "Arial, Helvetica, sans-serif"
FONT_SIZE = 16          # axis titles, legend, hover
TICK_SIZE = 15          # tick labels: the smallest text on any figure
TITLE_SIZE = 19
NOTE_SIZE = 15          # the smaller lines under a title
TEXT_COLOR = "#222222"
GRID_COLOR = "#e2e2e2"
AXIS_COLOR = "#555555"
MASK_COLOR = "#dcdcdc"  # attention cells a query may not look at (future tokens)

# Okabe-Ito colours: distinguishable with colour-blindness and on a washed-out projector.
BLUE, ORANGE, GREEN, VERMILLION, PURPLE, SKY = (
    "#0072b2", "#e69f00", "#009e73", "#d55e00", "#cc79a7", "#56b4e9")
PALETTE = (BLUE, VERMILLION, GREEN, ORANGE, PURPLE, SKY)
GREY = "#8c8c8c"
LIGHT_BAR = "#c6d4e1"

VIRIDIS = ["#440154", "#482878", "#3e4989", "#31688e", "#26828e", "#1f9e89", "#35b779",
           "#6ece58", "#b5de2b", "#fde725"]
BLUES = ["#f7fbff", "#deebf7", "#c6dbef", "#9ecae1", "#6baed6", "#4292c6", "#2171b5",
         "#08519c", "#08306b"]
DIVERGING = ["#2166ac", "#67a9cf", "#d1e5f0", "#f7f7f7", "#fddbc7", "#ef8a62", "#b2182b"]


def _scale(colors: list[str]) -> list[list]:
    """A plotly colorscale [[0, c0], ..., [1, cN]] from evenly spaced '#rrggbb' colours."""
    n = len(colors) - 1
    return [[round(i / n, 4), c] for i, c in enumerate(colors)]


SEQUENTIAL_SCALE = _scale(VIRIDIS)
LIGHT_SCALE = _scale(BLUES)
DIVERGING_SCALE = _scale(DIVERGING)

STAT_TITLES = {"mean": "Mean", "std": "Standard deviation", "rms": "Root mean square",
               "min": "Minimum", "max": "Maximum", "abs_mean": "Mean absolute value",
               "zero_frac": "Fraction of exact zeros", "nonfinite": "Count of inf/NaN values"}

MAX_TOKEN_COLUMNS = 128   # token heatmap, attention: the last 128 tokens
MAX_TICK_LABELS = 40      # beyond this many tokens an axis labels every n-th
MAX_LENS_POSITIONS = 32
GRID_MAX_SIDE = 48        # attention grid: each head at most 48 x 48 cells ...
GRID_MAX_HEADS = 32       # ... of at most 32 heads
GRID_BUDGET_BYTES = 250_000   # ... and fewer when many heads would exceed this JSON budget
TOKEN_CHARS = 12          # longest token text on an axis before it is shortened


def _wrap(text: str, width: int = 68) -> str:
    """Break a long note into lines so it is not clipped on a narrow screen."""
    return "<br>".join(textwrap.wrap(text, width, break_long_words=False)) or text


def _title(title: str, notes=()) -> tuple[dict, int]:
    """Title dict (left-aligned, anchored to the top of the figure) with the notes as a
    smaller subtitle, and the top margin that it needs."""
    lines = [line for n in notes if n for line in _wrap(n).split("<br>")]
    title_dict = dict(text=f"<b>{title}</b>", x=0, xref="container", xanchor="left", y=1,
                      yref="container", yanchor="top", pad=dict(l=14, t=12),
                      font=dict(size=TITLE_SIZE))
    if lines:
        title_dict["subtitle"] = dict(text="<br>".join(lines), font=dict(size=NOTE_SIZE))
    # measured in plotly.js 3.3.1: the title ends at ~30 px, each note line adds ~19 px
    return title_dict, 48 + (30 + 19 * len(lines) if lines else 0)


# Axis look; a figure's own axis settings win over these.
AXIS_DEFAULTS = dict(showgrid=True, gridcolor=GRID_COLOR, zeroline=False, showline=True,
                     linecolor=AXIS_COLOR, ticks="outside", tickcolor=AXIS_COLOR,
                     automargin=True)


def _axis_defaults(axis) -> None:
    for key, value in AXIS_DEFAULTS.items():
        if axis[key] is None:
            axis[key] = value
    if axis.tickfont.size is None:
        axis.tickfont.size = TICK_SIZE
    if axis.title.font.size is None:
        axis.title.font.size = FONT_SIZE
    if axis.title.standoff is None:
        axis.title.standoff = 12   # with automargin: the title never overlaps tick labels


def _finish(fig: go.Figure, title: str, height: int, *, notes=(), x_title=None, y_title=None,
            legend: bool = False, margin=None, axes=True) -> go.Figure:
    """Apply the shared lean layout: no template, our font, white background, light grid,
    explicit height, title (with notes) that fits, axis titles and readable ticks."""
    title_dict, top = _title(title, notes)
    m = dict(l=80, r=30, t=top, b=40)
    m.update(margin or {})
    fig.update_layout(
        template="none", height=int(height), title=title_dict, margin=m,
        font=dict(family=FONT_FAMILY, size=FONT_SIZE, color=TEXT_COLOR),
        paper_bgcolor="#ffffff", plot_bgcolor=fig.layout.plot_bgcolor or "#ffffff",
        hoverlabel=dict(font=dict(size=FONT_SIZE)),
        showlegend=legend)
    if legend:
        # below the x axis title; plotly pushes the bottom margin to fit it
        fig.update_layout(legend=dict(orientation="h", x=0, xanchor="left", y=0,
                                      yref="container", yanchor="bottom",
                                      font=dict(size=FONT_SIZE)))
    if axes:
        for axis in (*fig.select_xaxes(), *fig.select_yaxes()):
            _axis_defaults(axis)
        if x_title:
            fig.layout.xaxis.title.text = x_title
        if y_title:
            fig.layout.yaxis.title.text = y_title
    return fig


# ---------------------------------------------------------------------------------------------
# Small helpers
def human_count(n: int) -> str:
    """38_597_376 -> '38.6 M' (three significant digits; K, M, B)."""
    n = int(n)
    for div, unit in ((1e9, "B"), (1e6, "M"), (1e3, "K")):
        value = float(f"{n / div:.3g}")          # 999_999 -> 1.00 M, not 1000 K
        if abs(value) >= 1:
            digits = 2 if abs(value) < 10 else 1 if abs(value) < 100 else 0
            return f"{value:.{digits}f} {unit}"
    return str(n)


def visible_token(piece: str, max_chars: int = TOKEN_CHARS) -> str:
    """A token's text made visible: spaces as '␣', newlines as '↵', tabs as '⇥', long pieces
    shortened with '…'."""
    shown = (piece.replace(" ", "␣").replace("\n", "↵").replace("\r", "␍")
             .replace("\t", "⇥"))
    if not shown:
        shown = "∅"
    if len(shown) > max_chars:
        shown = shown[:max_chars - 1] + "…"
    return shown


def token_label(piece: str, max_chars: int = TOKEN_CHARS) -> str:
    """``visible_token``, safe for plotly's HTML-like labels and for HTML: '<' '&' escaped."""
    return html.escape(visible_token(piece, max_chars), quote=False)


def _token_axis(tokens: list[str], start: int, max_chars: int = TOKEN_CHARS):
    """Category values '#pos token' (unique per position, shown in hovers) and the tick
    values/texts: every token up to MAX_TICK_LABELS tokens; beyond that every n-th, at most
    half as many, so that the labels stay apart on a laptop screen too."""
    labels = [token_label(t, max_chars) for t in tokens]
    cats = [f"#{start + i} {lab}" for i, lab in enumerate(labels)]
    most = MAX_TICK_LABELS if len(cats) <= MAX_TICK_LABELS else MAX_TICK_LABELS // 2
    step = max(1, math.ceil(len(cats) / most))
    # label the last token (the one being predicted from) and every step-th before it
    idx = list(range(len(cats) - 1, -1, -step))[::-1]
    return cats, [cats[i] for i in idx], [labels[i] for i in idx]


def percent(share: float) -> str:
    return "< 0.1 %" if 0 < share < 0.001 else f"{100 * share:.1f} %"


def _clean(a) -> tuple[np.ndarray, bool]:
    """float32 copy with inf/NaN replaced by NaN (plotly draws NaN as a gap); and whether any
    value was not finite."""
    a = np.asarray(a, dtype=np.float64)
    bad = ~np.isfinite(a)
    out = a.astype(np.float32)   # values beyond float32's range become inf
    bad |= ~np.isfinite(out)
    out[bad] = np.nan
    return out, bool(bad.any())


def _layers_text(layers) -> str:
    layers = [int(i) for i in layers]
    if len(layers) > 6:
        return f"{len(layers)} layers from {layers[0]} to {layers[-1]}"
    return ("layer " if len(layers) == 1 else "layers ") + ", ".join(map(str, layers))


def _point_stats(trace, point: str):
    """(PointStats or None, is_final) for a probe point name; ValueError for unknown names."""
    if point not in POINT_LABELS:
        raise ValueError(f"Unknown probe point {point!r}; choose from "
                         f"{', '.join(POINT_LABELS)}.")
    if point in trace.final:
        return trace.final[point], True
    return trace.points.get(point), False


def _missing_note(points) -> str:
    return (f"not in this model: {', '.join(points)} "
            f"(no normalisation layers)" if any(p.startswith(("ln", "final_norm"))
                                                for p in points)
            else f"not recorded: {', '.join(points)}")


def _check_layer(trace, layer) -> int:
    n = trace.n_layers
    if isinstance(layer, bool) or not isinstance(layer, (int, np.integer)) \
            or not 0 <= layer < n:
        raise ValueError(f"Layer {layer!r} does not exist: this model has layers 0 to {n - 1}.")
    return int(layer)


def _empty(title: str, message: str, height: int = 320, notes=()) -> go.Figure:
    fig = go.Figure()
    fig.add_annotation(text=message, x=0.5, y=0.5, xref="paper", yref="paper",
                       showarrow=False, font=dict(size=FONT_SIZE + 2, color=GREY))
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    return _finish(fig, title, height, notes=notes, axes=False)


def _token_axis_height(n_labels: int) -> int:
    """Height that gives each labelled row of a token axis ~15 px."""
    return max(560, 250 + 15 * n_labels)


# ---------------------------------------------------------------------------------------------
# Parameters
def parameter_figure(counts: ParameterCount) -> go.Figure:
    """Horizontal bars: parameters per component (zero ones skipped), largest on top."""
    parts = [(name, n) for name, n in counts.breakdown().items() if n > 0]
    parts.sort(key=lambda item: item[1])
    names = [name for name, _ in parts]
    values = [n for _, n in parts]
    total = counts.total
    text = [f"{human_count(n)}  ({percent(n / total)})" for n in values]
    fig = go.Figure(go.Bar(
        x=values, y=names, orientation="h", marker_color=BLUE, text=text,
        textposition="outside", cliponaxis=False, textfont=dict(size=FONT_SIZE),
        hovertemplate="%{y}: %{x:,} parameters<extra></extra>"))
    fig.update_xaxes(range=[0, max(values) * 1.35], tickformat="~s")
    notes = []
    if counts.output_head:
        notes.append(f"{human_count(counts.total_without_output_head)} without the output head "
                     f"(the book's count with weight tying)")
    else:
        notes.append("the output head shares the token embedding (tied weights)")
    return _finish(fig, f"Parameters: {human_count(total)} in total ({total:,})",
                   170 + 52 * len(parts), notes=notes, x_title="parameters",
                   y_title="component")


# ---------------------------------------------------------------------------------------------
# Statistics across layers
def _lighter(color: str, amount: float = 0.78) -> str:
    """'#rrggbb' mixed with white (amount 0..1): an opaque light version of a colour."""
    rgb = [int(color[i:i + 2], 16) for i in (1, 3, 5)]
    return "#" + "".join(f"{round(c + (255 - c) * amount):02x}" for c in rgb)


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
            series[stat], bad = _clean(stats.overall[stat])
            if bad:
                bad_layers.update(np.flatnonzero(np.isnan(series[stat])).tolist())
        if bad_layers:
            where = [n_layers - 1] if is_final else sorted(bad_layers)
            nonfinite.append(f"{POINT_LABELS[point]}: inf/NaN in {_layers_text(where)}")
        x = np.array([n_layers - 1]) if is_final else np.arange(n_layers)
        color = PALETTE[len(found) % len(PALETTE)]
        found.append((point, x, series, color))
    title = "Statistics across layers"
    if missing:
        notes.append(_missing_note(missing))
    if not found:
        return _empty(title, "None of these probe points was recorded for this model.",
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
            fill="tonexty", fillcolor=_lighter(color), showlegend=False,
            customdata=series["max"],
            hovertemplate="layer %{x}: min %{y:.3g}, max %{customdata:.3g}<extra>"
                          + point + "</extra>"))
    for point, x, series, color in found:
        label = POINT_LABELS[point]
        fig.add_trace(go.Scatter(x=x, y=series["mean"], mode="lines+markers", name=label,
                                 legendgroup=point, line=dict(color=color, width=3.5),
                                 marker=dict(size=9),
                                 hovertemplate="layer %{x}: mean %{y:.4g}<extra>" + point
                                               + "</extra>"))
        fig.add_trace(go.Scatter(x=x, y=series["std"], mode="lines+markers", name=label,
                                 legendgroup=point, showlegend=False,
                                 line=dict(color=color, width=3.5, dash="dash"),
                                 marker=dict(size=9, symbol="square"),
                                 hovertemplate="layer %{x}: std %{y:.4g}<extra>" + point
                                               + "</extra>"))
    notes.insert(0, "solid line: mean · dashed line: standard deviation · light band: "
                    "min to max")
    if nonfinite:
        notes += nonfinite + ["(inf/NaN values are shown as gaps)"]
    fig.update_xaxes(dtick=1 if n_layers <= 30 else None, tickformat="d",
                     range=[-0.3, n_layers - 0.7])
    return _finish(fig, title, 540, notes=notes, x_title="layer (transformer block)",
                   y_title="value", legend=True)


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
            notes.append(f"{point}: no finite values")
            continue
        density = counts / (total * widths)
        color = PALETTE[shown % len(PALETTE)]
        shown += 1
        name = POINT_LABELS[point]
        fig.add_trace(go.Bar(
            x=((edges[:-1] + edges[1:]) / 2).astype(np.float32),
            y=density.astype(np.float32), width=widths.astype(np.float32), name=name,
            marker=dict(color=color, line=dict(width=0)), opacity=0.55,
            hovertemplate="value %{x:.3g}: density %{y:.3g}<extra>" + point + "</extra>"))
        if stats.overall["nonfinite"][row]:
            notes.append(f"{point}: {int(stats.overall['nonfinite'][row])} inf/NaN values "
                         f"left out")
    if missing:
        notes.append(_missing_note(missing))
    final_only = all(p in trace.final for p in points)
    title = "Distribution of values " + ("at the final norm" if final_only
                                         else f"in layer {layer}")
    if not shown:
        return _empty(title, "Nothing to show for these probe points.", notes=notes)
    fig.update_layout(barmode="overlay", bargap=0)
    return _finish(fig, title, 500, notes=notes, x_title="activation value",
                   y_title="density", legend=True)


def token_heatmap_figure(trace, point="resid_pre", stat="std") -> go.Figure:
    """Layers (y) x token positions (x), colour = a per-token statistic of one probe point."""
    if stat not in STAT_NAMES:
        raise ValueError(f"Unknown statistic {stat!r}; choose from {', '.join(STAT_NAMES)}.")
    stats, is_final = _point_stats(trace, point)
    title = f"{STAT_TITLES[stat]} per token"
    where = f"measured at: {POINT_LABELS[point]} ({point})"
    if stats is None:
        return _empty(title, _missing_note([point]), notes=[where])
    z, bad = _clean(stats.per_token[stat])
    n_tokens = z.shape[1]
    start = max(0, n_tokens - MAX_TOKEN_COLUMNS)
    z = np.ascontiguousarray(z[:, start:])
    notes = [where]
    if start:
        notes.append(f"the last {MAX_TOKEN_COLUMNS} of {n_tokens} tokens")
    if bad:
        notes.append("inf/NaN values shown as gaps (grey)")
    cats, tickvals, ticktext = _token_axis(trace.tokens[start:], start)
    layers = [trace.n_layers - 1] if is_final else list(range(z.shape[0]))
    scale = dict(colorscale=DIVERGING_SCALE, zmid=0) if stat == "mean" else \
        dict(colorscale=SEQUENTIAL_SCALE)
    fig = go.Figure(go.Heatmap(
        z=z, x=cats, y=layers, hoverongaps=False, **scale,
        colorbar=dict(title=dict(text=stat, side="right"), tickfont=dict(size=TICK_SIZE)),
        hovertemplate="layer %{y}, token %{x}<br>" + stat + " %{z:.4g}<extra></extra>"))
    fig.update_xaxes(type="category", tickvals=tickvals, ticktext=ticktext,
                     tickangle=-90 if len(tickvals) > 12 else 0,
                     showgrid=False)
    fig.update_yaxes(dtick=1 if len(layers) <= 24 else None, tickformat="d", showgrid=False)
    height = max(420, min(900, 260 + 34 * len(layers)))
    fig.update_layout(plot_bgcolor=MASK_COLOR)
    return _finish(fig, title, height, notes=notes, x_title="token",
                   y_title="layer" + (" (final norm)" if is_final else ""))


# ---------------------------------------------------------------------------------------------
# Attention
def _attention_layer(trace, layer) -> np.ndarray:
    if isinstance(layer, bool) or not isinstance(layer, (int, np.integer)) \
            or layer not in trace.attention:
        kept = sorted(trace.attention)
        have = (f"attention patterns were kept for {_layers_text(kept)}" if kept
                else "no attention patterns were kept for this input")
        raise ValueError(f"Layer {layer!r} has no attention pattern in this trace: {have}. "
                         f"Trace again with attention_layers=[{layer}].")
    return trace.attention[layer]


def attention_figure(trace, layer, head) -> go.Figure:
    """One head's attention weights (or the mean over heads): queries on y, keys on x; the
    future tokens each query may not see are masked (grey)."""
    weights = _attention_layer(trace, layer)
    n_heads, n_tokens = weights.shape[0], weights.shape[1]
    if head == "mean":
        w = weights.mean(axis=0, dtype=np.float32)
        head_text = f"mean over {n_heads} heads"
    elif isinstance(head, bool) or not isinstance(head, (int, np.integer)) \
            or not 0 <= head < n_heads:
        raise ValueError(f"Head {head!r} does not exist: layer {layer} has heads 0 to "
                         f"{n_heads - 1} (or 'mean').")
    else:
        w = weights[head]
        head_text = f"head {int(head)}"
    start = max(0, n_tokens - MAX_TOKEN_COLUMNS)
    z = np.array(w[start:, start:], dtype=np.float32)          # (queries, keys), a copy
    n = z.shape[0]
    future = np.triu(np.ones((n, n), dtype=bool), k=1)
    z[future] = np.nan
    mask = np.full((n, n), np.nan, dtype=np.float32)
    mask[future] = 0.0
    notes = ["each row: how much one query token attends to each earlier token"]
    if start:
        notes = [f"the last {MAX_TOKEN_COLUMNS} of {n_tokens} tokens; keys before token "
                 f"{start} are hidden, so rows sum to less than 1"]
    cats, tickvals, ticktext = _token_axis(trace.tokens[start:], start)
    fig = go.Figure([
        go.Heatmap(z=z, x=cats, y=cats, colorscale=SEQUENTIAL_SCALE, zmin=0,
                   hoverongaps=False, name="weight",
                   colorbar=dict(title=dict(text="weight", side="right"),
                                 tickfont=dict(size=TICK_SIZE)),
                   hovertemplate="query %{y}<br>key %{x}<br>weight %{z:.3f}<extra></extra>"),
        go.Heatmap(z=mask, x=cats, y=cats, colorscale=[[0, MASK_COLOR], [1, MASK_COLOR]],
                   showscale=False, hoverongaps=False, name="masked",
                   hovertemplate="query %{y}<br>key %{x}<br>masked (future token)"
                                 "<extra></extra>"),
    ])
    axis = dict(type="category", tickvals=tickvals, ticktext=ticktext, showgrid=False)
    fig.update_xaxes(tickangle=-90, **axis)
    fig.update_yaxes(autorange="reversed", **axis)
    fig.update_layout(plot_bgcolor=MASK_COLOR)
    return _finish(fig, f"Attention in layer {layer}, {head_text}",
                   _token_axis_height(len(tickvals)), notes=notes,
                   x_title="key (the token looked at)", y_title="query (the token looking)")


def _block_edges(n: int, side: int) -> np.ndarray:
    return np.unique(np.linspace(0, n, side + 1).round().astype(np.int64))


def _downsample_attention(weights: np.ndarray, side: int):
    """Block-average each head's (T, T) weights to at most side x side, over allowed
    (non-future) cells only; blocks entirely in the future are NaN. Returns (z, block starts)."""
    n = weights.shape[-1]
    if n <= side:
        z = np.array(weights, dtype=np.float32)
        z[:, np.triu(np.ones((n, n), dtype=bool), k=1)] = np.nan
        return z, np.arange(n)
    edges = _block_edges(n, side)
    starts = edges[:-1]
    allowed = np.tril(np.ones((n, n), dtype=np.int32))
    counts = np.add.reduceat(np.add.reduceat(allowed, starts, axis=0), starts, axis=1)
    out = np.empty((weights.shape[0], len(starts), len(starts)), dtype=np.float32)
    with np.errstate(invalid="ignore", divide="ignore"):
        for h in range(weights.shape[0]):
            sums = np.add.reduceat(np.add.reduceat(weights[h].astype(np.float64), starts,
                                                   axis=0), starts, axis=1)
            out[h] = np.where(counts > 0, sums / counts, np.nan)
    return out, starts


def attention_grid_figure(trace, layer) -> go.Figure:
    """Every head of one layer as small multiples with one shared colour scale."""
    weights = _attention_layer(trace, layer)
    all_heads, n_tokens = weights.shape[0], weights.shape[1]
    weights = weights[:GRID_MAX_HEADS]
    n_heads = weights.shape[0]
    # Measured: a float32 cell costs ~6.4 bytes of JSON (base64, plus to_json's '\/'
    # escapes), each head ~600 bytes besides, the layout ~20 KB. Fit all heads in the budget.
    cells = (GRID_BUDGET_BYTES - 20_000 - 600 * n_heads) / (6.4 * n_heads)
    side = min(GRID_MAX_SIDE, int(math.sqrt(max(cells, 64))))
    z, starts = _downsample_attention(weights, side)
    cols = min(4, n_heads)
    rows = math.ceil(n_heads / cols)
    fig = make_subplots(rows=rows, cols=cols, subplot_titles=[f"head {h}" for h in
                                                              range(n_heads)],
                        horizontal_spacing=0.03, vertical_spacing=0.25 / rows)
    blocky = len(starts) < n_tokens
    what = "mean weight" if blocky else "weight"
    hover = ("head %d<br>queries from %%{y}, keys from %%{x}<br>mean weight %%{z:.4f}"
             "<extra></extra>" if blocky else
             "head %d<br>query %%{y}, key %%{x}<br>weight %%{z:.3f}<extra></extra>")
    for h in range(n_heads):
        fig.add_trace(go.Heatmap(z=z[h], x=starts.astype(np.int32), y=starts.astype(np.int32),
                                 coloraxis="coloraxis", hoverongaps=False,
                                 hovertemplate=hover % h),
                      row=h // cols + 1, col=h % cols + 1)
    bare = dict(showticklabels=False, showgrid=False, zeroline=False, ticks="",
                showline=False)
    fig.update_xaxes(**bare)
    fig.update_yaxes(autorange="reversed", **bare)
    fig.update_layout(
        plot_bgcolor=MASK_COLOR,
        coloraxis=dict(colorscale=SEQUENTIAL_SCALE, cmin=0,
                       colorbar=dict(title=dict(text=what, side="right"),
                                     tickfont=dict(size=TICK_SIZE))))
    fig.update_annotations(font=dict(size=FONT_SIZE))
    notes = ["queries top to bottom, keys left to right; grey = future tokens (masked)"]
    if all_heads > n_heads:
        notes.append(f"the first {n_heads} of {all_heads} heads (see one head at a time for "
                     f"the others)")
    if blocky:
        size = n_tokens / len(starts)
        notes.append(f"{n_tokens} tokens shown as {len(starts)} × {len(starts)} cells per "
                     f"head (neighbouring tokens averaged, ~{size:.0f} per cell)")
    _, top = _title("", notes)
    row_px = 230 if cols == 4 else 300
    shown = (f"all {n_heads} heads" if n_heads == all_heads
             else f"heads 0–{n_heads - 1} of {all_heads}")
    fig = _finish(fig, f"Attention in layer {layer}: {shown}",
                  top + 40 + rows * row_px, notes=notes, margin=dict(l=30, r=30, b=30),
                  axes=False)
    return fig


def entropy_figure(trace) -> go.Figure:
    """Layers x heads: how spread out each head's attention is (mean entropy in bits)."""
    ent = np.asarray(trace.attention_entropy)
    title = "Attention entropy per head (bits)"
    if ent.ndim != 3 or ent.size == 0:
        return _empty(title, "No attention entropy recorded.")
    z, bad = _clean(ent.mean(axis=-1))
    n_layers, n_heads, n_tokens = ent.shape
    # The largest possible mean: every query spreads evenly over all tokens it may see.
    most = float(np.mean(np.log2(np.arange(1, n_tokens + 1))))
    notes = [f"0 = looks at one token; {most:.2f} = spread evenly over all earlier tokens "
             f"(mean over {n_tokens} queries)"]
    if bad:
        notes.append("inf/NaN values shown as gaps (grey)")
    label_cells = n_layers * n_heads <= 300 and n_heads <= 8  # wider grids: hover instead
    fig = go.Figure(go.Heatmap(
        z=z, x=np.arange(n_heads), y=np.arange(n_layers), colorscale=SEQUENTIAL_SCALE,
        zmin=0, zmax=max(most, 1e-6), hoverongaps=False,
        texttemplate="%{z:.2f}" if label_cells else None,
        textfont=dict(size=TICK_SIZE),
        colorbar=dict(title=dict(text="bits", side="right"), tickfont=dict(size=TICK_SIZE)),
        hovertemplate="layer %{y}, head %{x}<br>mean entropy %{z:.3f} bits<extra></extra>"))
    fig.update_xaxes(dtick=1 if n_heads <= 25 else None, showgrid=False)
    fig.update_yaxes(dtick=1 if n_layers <= 24 else None, showgrid=False)
    fig.update_layout(plot_bgcolor=MASK_COLOR)
    height = max(380, min(950, 200 + 36 * n_layers))
    return _finish(fig, title, height, notes=notes, x_title="head", y_title="layer")


# ---------------------------------------------------------------------------------------------
# Activation functions
def activation_figure(curves: dict, show=("gelu", "relu"), derivatives=False,
                      ff_pre_hist=None) -> go.Figure:
    """Activation curves (``explorer.curves.activation_curves``), optionally their derivatives
    (dashed), over a histogram of the model's real feed-forward inputs (right axis)."""
    if isinstance(show, str):
        show = (show,)
    functions = curves["functions"]
    for name in show:
        if name not in functions:
            raise ValueError(f"Activation {name!r} is not in these curves; they have "
                             f"{', '.join(functions)}.")
    x = np.asarray(curves["x"], dtype=np.float32)
    x_lo, x_hi = float(x[0]), float(x[-1])
    fig = go.Figure()
    notes = []
    curve_axis = "y"
    if ff_pre_hist is not None:
        counts, edges = (np.asarray(a, dtype=np.float64) for a in ff_pre_hist)
        if counts.ndim != 1 or edges.shape != (counts.size + 1,):
            raise ValueError("ff_pre_hist must be (counts, edges) of one layer, with one more "
                             "edge than counts.")
        total = counts.sum()
        if total > 0:
            # The histogram owns the base axis (drawn first, underneath); the curves go on
            # an overlaying axis on the left, drawn on top of the bars.
            curve_axis = "y2"
            centres = (edges[:-1] + edges[1:]) / 2
            fig.add_trace(go.Bar(
                x=centres.astype(np.float32), y=(counts / total).astype(np.float32),
                width=np.diff(edges).astype(np.float32), name="real feed-forward inputs",
                marker=dict(color=LIGHT_BAR, line=dict(width=0)),
                hovertemplate="input %{x:.3g}: %{y:.1%} of values<extra></extra>"))
            outside = counts[(centres < x_lo) | (centres > x_hi)].sum() / total
            if outside > 0.005:
                notes.append(f"{outside:.0%} of the real inputs lie outside the x range shown")
            fig.update_layout(
                yaxis=dict(side="right", showgrid=False, rangemode="tozero", tickformat=".0%",
                           title_text="share of real inputs (bars)"),
                yaxis2=dict(overlaying="y", side="left", title_text="output"))
        else:
            notes.append("the real feed-forward inputs are all inf/NaN: no histogram")
    for i, name in enumerate(show):
        f = functions[name]
        color = PALETTE[i % len(PALETTE)]
        fig.add_trace(go.Scatter(x=x, y=np.asarray(f["y"], dtype=np.float32), mode="lines",
                                 name=f["label"], line=dict(color=color, width=3.5),
                                 yaxis=curve_axis,
                                 hovertemplate="x %{x:.2f}: %{y:.3f}<extra>" + f["label"]
                                               + "</extra>"))
        if derivatives:
            fig.add_trace(go.Scatter(
                x=x, y=np.asarray(f["dy"], dtype=np.float32), mode="lines", yaxis=curve_axis,
                name=f"derivative of {f['label']}", line=dict(color=color, width=2.5,
                                                              dash="dash"),
                hovertemplate="x %{x:.2f}: slope %{y:.3f}<extra>" + f["label"] + "</extra>"))
    fig.update_xaxes(range=[x_lo, x_hi])
    fig.layout["yaxis2" if curve_axis == "y2" else "yaxis"].update(
        zeroline=True, zerolinecolor=GREY, zerolinewidth=1.5)
    fig.update_layout(barmode="overlay", bargap=0)
    title = "Activation functions" + (" and their derivatives" if derivatives else "")
    return _finish(fig, title, 540, notes=notes, x_title="input x",
                   y_title=None if curve_axis == "y2" else "output", legend=True,
                   margin=dict(r=90 if curve_axis == "y2" else 30))


# ---------------------------------------------------------------------------------------------
# Next token and logit lens
def next_token_bars_html(texts: list[str], probs: list[float], chosen: int | None = None
                         ) -> str:
    """Top-k candidates for the next token as plain HTML bars, most likely on top, the chosen
    one highlighted. Sent for every generated token: about 1 KB, and a browser redraws it in
    well under a millisecond, where a plotly chart took ~100 ms (6 steps/s at most)."""
    if len(texts) != len(probs):
        raise ValueError(f"texts and probs must have the same length "
                         f"({len(texts)} vs {len(probs)}).")
    if chosen is not None and not (isinstance(chosen, (int, np.integer))
                                   and 0 <= chosen < len(texts)):
        raise ValueError(f"chosen must be the index of one of the {len(texts)} candidates "
                         f"(got {chosen!r}).")
    top = max((float(p) for p in probs), default=0.0)
    rows = []
    for i, (text, p) in enumerate(zip(texts, probs)):
        # The likeliest fills the track; labels keep 3 digits, as small as they get (an
        # untrained model spreads its probability thinly: 0.0171 %).
        width = 100 * float(p) / top if top > 0 else 0.0
        chosen_one = i == chosen
        rows.append(f'<div><span>{token_label(text, 12)}</span><b><i'
                    f'{" class=c" if chosen_one else ""} style="width:{width:.1f}%"></i></b>'
                    f'<span>{100 * float(p):.3g} %{" ◀ chosen" if chosen_one else ""}</span></div>')
    return ('<section class="nt-bars"><h4>Next-token candidates <small>(probability)'
            '</small></h4>' + "".join(rows) + "</section>")


def table_html(headers: list[str], rows: list[list], caption: str = "",
               elem_class: str = "steps") -> str:
    """A plain HTML table; every cell is text, escaped. The browser lays out hundreds of rows
    in about a millisecond, where Gradio's Dataframe took ~100 ms per update."""
    title = f"<h4>{html.escape(caption)}</h4>" if caption else ""
    head = "".join(f"<th>{html.escape(str(h))}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>"
                   for row in rows)
    return (f'{title}<div class="{html.escape(elem_class)}"><table><thead><tr>{head}</tr>'
            f"</thead><tbody>{body}</tbody></table></div>")


# The bars' layout (lean markup above, the looks here); the app adds it to its style sheet.
NEXT_TOKEN_CSS = f"""
.nt-bars {{font-size: 16px; color: {TEXT_COLOR};}}
.nt-bars h4 {{font-weight: 700; margin: 0 0 6px 0;}}
.nt-bars h4 small {{font-weight: 400; color: {AXIS_COLOR};}}
.nt-bars div {{display: grid; grid-template-columns: 9.5em 1fr 8.5em; gap: 8px;
              align-items: center; margin: 3px 0;}}
.nt-bars div > span:first-child {{font-family: ui-monospace, monospace; text-align: right;
                                 white-space: pre; overflow: hidden;}}
.nt-bars b {{display: block; background: #eef1f5; height: 20px; border-radius: 3px;}}
.nt-bars i {{display: block; height: 100%; border-radius: 3px; background: {BLUE};}}
.nt-bars i.c {{background: {ORANGE};}}
.nt-bars div > span:last-child {{font-variant-numeric: tabular-nums; white-space: nowrap;}}
.steps {{max-height: 460px; overflow-y: auto; font-size: 15px;}}
.steps table {{border-collapse: collapse; width: 100%;}}
.steps th {{position: sticky; top: 0; background: #f3f4f6; text-align: left;}}
.steps th, .steps td {{padding: 3px 8px; border: none; border-bottom: 1px solid {GRID_COLOR};
                      font-variant-numeric: tabular-nums;}}
.steps td:nth-child(2) {{font-family: ui-monospace, monospace; white-space: pre;}}
"""


def logit_lens_figure(trace) -> go.Figure:
    """Every layer's top-1 guess for the next token (final norm + output head applied to
    the block output), at the lens positions; colour = that guess's probability."""
    title = "Logit lens: each layer's guess for the next token"
    positions = list(trace.lens_positions)
    if not positions:
        return _empty(title, "The logit lens was not read for this input.")
    keep = slice(max(0, len(positions) - MAX_LENS_POSITIONS), len(positions))
    positions = positions[keep]
    probs, bad = _clean(np.asarray(trace.lens_probs)[:, keep])
    final_probs, _ = _clean(np.asarray(trace.lens_final_probs)[:, keep])
    n_layers, n_pos = probs.shape
    notes = []
    if len(trace.lens_positions) > n_pos:
        notes.append(f"the last {n_pos} of {len(trace.lens_positions)} positions")
    if bad:
        notes.append("inf/NaN probabilities shown as gaps (grey)")
    # the last layer's lens is the model's own output: its guess is the final prediction
    final_text = [token_label(t) for t in trace.lens_texts[-1][keep]]
    # ~1000 px of plot width, ~8.5 px per character at 15 px: print guesses that fit
    chars = min(TOKEN_CHARS, int(1000 / n_pos / 8.5))
    if chars < 4:
        notes.append("too many positions to print the guesses in the cells: hover over a "
                     "cell to read it")
    cell_text = [[token_label(t, chars) if chars >= 4 and np.isfinite(probs[i, j]) else ""
                  for j, t in enumerate(row[keep])] for i, row in enumerate(trace.lens_texts)]
    full_text = [[token_label(t) for t in row[keep]] for row in trace.lens_texts]
    custom = [[[full_text[layer][j], float(np.nan_to_num(final_probs[layer, j])),
                final_text[j]] for j in range(n_pos)] for layer in range(n_layers)]
    input_tokens = [trace.tokens[p] for p in positions]
    labels = [token_label(t) for t in input_tokens]
    cats = [f"#{p} {lab}" for p, lab in zip(positions, labels)]
    fig = go.Figure(go.Heatmap(
        z=probs, x=cats, y=np.arange(n_layers), text=cell_text,
        texttemplate="%{text}" if chars >= 4 else None,
        textfont=dict(size=TICK_SIZE), customdata=custom, colorscale=LIGHT_SCALE, zmin=0,
        zmax=1, hoverongaps=False,
        colorbar=dict(title=dict(text="probability", side="right"),
                      tickfont=dict(size=TICK_SIZE)),
        hovertemplate=("layer %{y}, after input %{x}<br>top-1 guess: %{customdata[0]} "
                       "(p = %{z:.3f})<br>p of the final prediction %{customdata[2]}: "
                       "%{customdata[1]:.3f}<extra></extra>")))
    fig.update_xaxes(type="category", tickvals=cats, ticktext=labels,
                     tickangle=0 if n_pos <= 10 else -90, showgrid=False)
    fig.update_yaxes(dtick=1 if n_layers <= 24 else None, showgrid=False)
    fig.update_layout(plot_bgcolor=MASK_COLOR)
    height = max(400, min(1000, 230 + 34 * n_layers))
    return _finish(fig, title, height, notes=notes,
                   x_title="input token (the guess is for the token after it)",
                   y_title="layer")


# ---------------------------------------------------------------------------------------------
# Gradients (the book's section 4.4)
def _log_axis(fig, values) -> None:
    """Log-scale y axis, one labelled tick per power of ten when the data span two or more
    (plotly's in-between labels '2' and '5' are too small for a projector)."""
    good = [v for v in values if v > 0 and math.isfinite(v)]
    fig.update_yaxes(type="log", exponentformat="power")
    if good and math.log10(max(good) / min(good)) >= 2:
        fig.update_yaxes(dtick=1)


def gradient_figure(without: dict, with_: dict) -> go.Figure:
    """Mean |gradient| per layer of the book's 5-layer network, without and with shortcuts
    (``explorer.gradients.shortcut_demo``); log scale, so the vanishing shows."""
    names = list(dict.fromkeys([*without, *with_]))
    labels = [f"layer {i + 1}<br>{html.escape(n.removesuffix('.weight'))}"
              for i, n in enumerate(names)]
    fig = go.Figure()
    notes = []
    for data, name, color in ((without, "without shortcut", VERMILLION),
                              (with_, "with shortcut", BLUE)):
        values = [float(data.get(n, float("nan"))) for n in names]
        if any(not (v > 0 and math.isfinite(v)) for v in values):
            notes.append(f"{name}: zero or missing gradients are not drawn (log scale)")
        values = [v if v > 0 and math.isfinite(v) else None for v in values]
        fig.add_trace(go.Bar(x=labels, y=values, name=name, marker_color=color,
                             texttemplate="%{y:.2g}", textposition="outside",
                             cliponaxis=False, textfont=dict(size=TICK_SIZE),
                             hovertemplate="%{x}: %{y:.3g}<extra>" + name + "</extra>"))
    _log_axis(fig, [v for data in (without, with_) for v in data.values()])
    fig.update_layout(barmode="group", bargap=0.25)
    return _finish(fig, "Mean |gradient| per layer (book, section 4.4)", 500,
                   notes=notes or ["first layer on the left: gradients flow back from the "
                                   "loss on the right"],
                   x_title="layer (weight)", y_title="mean |gradient| (log scale)",
                   legend=True)


def gpt_gradient_figure(grads_a, grads_b, labels=("model A", "model B")) -> go.Figure:
    """Mean |gradient| along a GPT (embedding, every block, output head) for two
    ``GPTGradients``, e.g. with and without shortcut connections; log scale."""
    if len(labels) != 2:
        raise ValueError("labels must name the two gradient results, e.g. "
                         "('with shortcut', 'without shortcut').")
    fig = go.Figure()
    notes = []
    for grads, label, color, dash in ((grads_a, labels[0], BLUE, "solid"),
                                      (grads_b, labels[1], VERMILLION, "dash")):
        cats = ["embedding", *[f"block {i}" for i in range(len(grads.blocks))], "output head"]
        values = [grads.embedding, *grads.blocks, grads.output_head]
        if any(not (v > 0 and math.isfinite(v)) for v in values):
            notes.append(f"{html.escape(str(label))}: zero or inf/NaN gradients not drawn")
        values = [float(v) if v > 0 and math.isfinite(v) else None for v in values]
        name = f"{html.escape(str(label))} (loss {grads.loss:.2f})"
        fig.add_trace(go.Scatter(x=cats, y=values, mode="lines+markers", name=name,
                                 line=dict(color=color, width=3, dash=dash),
                                 marker=dict(size=9), connectgaps=False,
                                 hovertemplate="%{x}: %{y:.3g}<extra>" + html.escape(
                                     str(label)) + "</extra>"))
    fig.update_xaxes(type="category")   # plotly turns the labels when they would overlap
    _log_axis(fig, [grads_a.embedding, *grads_a.blocks, grads_a.output_head,
                    grads_b.embedding, *grads_b.blocks, grads_b.output_head])
    return _finish(fig, "Mean |gradient| from input to output", 500, notes=notes,
                   x_title="where in the model (input → output)",
                   y_title="mean |gradient| (log scale)", legend=True)


# ---------------------------------------------------------------------------------------------
# Architecture diagram (HTML)
_BOX_COLORS = {
    "embed": ("#ede7f6", "#7e57c2"),
    "drop": ("#f3f3f3", "#a0a0a0"),
    "norm": ("#fff4d6", "#c9971a"),
    "att": ("#e0ecfb", "#3b78c4"),
    "ff": ("#def5e6", "#2e9d5b"),
    "add": ("#fde3e3", "#c94a4a"),
    "out": ("#e6f4f4", "#2a8c8c"),
}
_SMALL = "font-size:15px;color:#444444"


def _box(kind, name, detail="", params=None, code=None) -> str:
    """One step of the diagram: bold name, the attribute name as code, details, and the
    parameter count on the right. Every text is escaped."""
    bg, border = _BOX_COLORS[kind]
    code_html = (f" <code style=\"font-size:15px;background:#ffffff;padding:0 4px;"
                 f"border-radius:4px\">{html.escape(code)}</code>" if code else "")
    params_html = (f"<span style=\"float:right;{_SMALL};margin-left:12px\">"
                   f"{html.escape(params)}</span>" if params else "")
    detail_html = (f"<span style=\"color:#333333\"> · {html.escape(detail)}</span>"
                   if detail else "")
    return (f"<div style=\"background:{bg};border:2px solid {border};border-radius:8px;"
            f"padding:5px 12px\">{params_html}<b>{html.escape(name)}</b>{code_html}"
            f"{detail_html}</div>")


def _arrow(label: str = "") -> str:
    text = f" <span style=\"{_SMALL}\">{html.escape(label)}</span>" if label else ""
    return (f"<div style=\"text-align:center;font-size:18px;line-height:1.5;"
            f"color:#666666\">↓{text}</div>")


def _params(counts, n) -> str | None:
    return None if counts is None else f"{human_count(n)} params"


def architecture_html(cfg, counts: ParameterCount | None = None) -> str:
    """A block diagram of the model a config builds (pure HTML with inline styles, no
    scripts): embeddings, the N transformer blocks with their steps in the order the chosen
    variant computes them, final norm and output head, with shapes and (if ``counts`` is
    given) parameter counts."""
    cfg = GPTConfig.from_dict(cfg)
    d, v, h = cfg.emb_dim, cfg.vocab_size, cfg.ff_hidden_dim
    c = counts
    drop = f"p = {cfg.drop_rate:g}"
    parts = [f"<div style=\"{_SMALL};text-align:center\">input: token ids, shape "
             f"(batch, T), T ≤ {cfg.context_length:,}</div>", _arrow()]
    parts.append(_box("embed", "Token embedding", f"{v:,} ids → {d}",
                      _params(c, c.token_embedding) if c else None, "tok_emb"))
    if cfg.pos_encoding == "learned":
        parts.append("<div style=\"text-align:center;font-size:18px;color:#666666\">+</div>")
        parts.append(_box("embed", "Positional embedding",
                          f"{cfg.context_length:,} positions → {d}",
                          _params(c, c.position_embedding) if c else None, "pos_emb"))
    else:
        parts.append(f"<div style=\"{_SMALL};text-align:center\">(no positional embedding: "
                     f"RoPE rotates queries and keys inside attention)</div>")
    parts += [_arrow(), _box("drop", "Dropout", drop, None, "drop_emb"),
              _arrow(f"(batch, T, {d})")]

    norms = {n: _box("norm", "LayerNorm", f"{d} features, scale and shift",
                     _params(c, c.norms_per_block // 2) if c else None, n)
             for n in ("norm1", "norm2")}
    rope = ", RoPE" if cfg.pos_encoding == "rope" else ""
    att = _box("att", "Masked multi-head attention",
               f"{d} → {cfg.n_heads} heads × {cfg.head_dim} → {d}{rope}",
               _params(c, c.attention_per_block) if c else None, "att")
    ff = _box("ff", "Feed-forward",
              f"{d} → {h} → {d}, {ACTIVATION_LABELS[cfg.activation]}",
              _params(c, c.feed_forward_per_block) if c else None, "ff")
    dropout = _box("drop", "Dropout", drop, None, "drop_shortcut")
    add = _box("add", "⊕ Add the shortcut", "x = x + shortcut")

    def sub_block(norm_name, core):
        steps = []
        if cfg.norm_placement == "pre":
            steps.append(norms[norm_name])
        steps += [core, dropout]
        if cfg.shortcut:
            steps.append(add)
        inner = _arrow().join(steps)
        if cfg.shortcut:
            # the shortcut path: a red line from the sub-block's input down to the ⊕
            inner = (f"<div style=\"border-left:4px solid {_BOX_COLORS['add'][1]};"
                     f"padding-left:10px;margin-left:2px\"><div style=\"{_SMALL};"
                     f"color:{_BOX_COLORS['add'][1]}\">shortcut = x (input of this part)</div>"
                     f"{inner}</div>")
        if cfg.norm_placement == "post":
            inner += _arrow() + norms[norm_name]
        return inner

    placement = {"pre": "pre-LayerNorm (the book, GPT-2)",
                 "post": "post-LayerNorm (the original Transformer)",
                 "none": "no normalisation"}[cfg.norm_placement]
    shortcut = "with shortcut connections" if cfg.shortcut else "no shortcut connections"
    block_params = (f"<span style=\"float:right;{_SMALL}\">{human_count(c.per_block)} "
                    f"params each, {human_count(c.per_block * c.n_layers)} in all</span>"
                    if c else "")
    parts.append(
        f"<div style=\"border:2px dashed #777777;border-radius:10px;padding:8px 12px 12px;"
        f"background:#fafafa\">{block_params}"
        f"<div><b>{cfg.n_layers} × TransformerBlock</b> <code style=\"font-size:15px\">"
        f"trf_blocks</code></div>"
        f"<div style=\"{_SMALL};margin-bottom:8px\">{html.escape(placement)}, {shortcut}"
        f"</div>{sub_block('norm1', att)}{_arrow()}{sub_block('norm2', ff)}</div>")
    parts.append(_arrow(f"(batch, T, {d})"))
    if cfg.norm_placement == "none":
        parts.append(_box("drop", "No final norm", "Identity (norm_placement none)", None,
                          "final_norm"))
    else:
        parts.append(_box("norm", "Final LayerNorm", f"{d} features",
                          _params(c, c.final_norm) if c else None, "final_norm"))
    parts.append(_arrow())
    tied = ", tied to tok_emb (shares its weights)" if cfg.tie_weights else ""
    parts.append(_box("out", "Output head", f"Linear {d} → {v:,}{tied}",
                      _params(c, c.output_head) if c and c.output_head else None, "out_head"))
    parts += [_arrow(), f"<div style=\"{_SMALL};text-align:center\">logits, shape "
                        f"(batch, T, {v:,})</div>"]
    if c:
        parts.append(f"<div style=\"margin-top:8px\"><b>Total:</b> {human_count(c.total)} "
                     f"parameters ({c.total:,})</div>")
    return ("<div style=\"font-family:Arial,Helvetica,sans-serif;font-size:16px;"
            "line-height:1.4;color:#222222;max-width:760px\">" + "".join(parts) + "</div>")
