"""Attention of a trace: one head's weights, every head of a layer as small multiples, and the
entropy of every head."""
from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..i18n import t
from .labels import MAX_TOKEN_COLUMNS, layers_text, token_axis
from .style import (FONT_SIZE, MASK_COLOR, SEQUENTIAL_SCALE, TICK_SIZE, clean, empty_figure,
                    finish, title_layout)

GRID_MAX_SIDE = 48        # attention grid: each head at most 48 x 48 cells ...
GRID_MAX_HEADS = 32       # ... of at most 32 heads
GRID_BUDGET_BYTES = 250_000   # ... and fewer when many heads would exceed this JSON budget


def _token_axis_height(n_labels: int) -> int:
    """Height that gives each labelled row of a token axis ~15 px."""
    return max(560, 250 + 15 * n_labels)


def _attention_layer(trace, layer) -> np.ndarray:
    if isinstance(layer, bool) or not isinstance(layer, (int, np.integer)) \
            or layer not in trace.attention:
        kept = sorted(trace.attention)
        have = (t("attention patterns were kept for {layers}", layers=layers_text(kept))
                if kept else t("no attention patterns were kept for this input"))
        raise ValueError(t("Layer {layer!r} has no attention pattern in this trace: {have}. "
                           "Trace again with attention_layers=[{layer}].", layer=layer,
                           have=have))
    return trace.attention[layer]


def attention_figure(trace, layer, head) -> go.Figure:
    """One head's attention weights (or the mean over heads): queries on y, keys on x; the
    future tokens each query may not see are masked (grey)."""
    weights = _attention_layer(trace, layer)
    n_heads, n_tokens = weights.shape[0], weights.shape[1]
    if head == "mean":
        w = weights.mean(axis=0, dtype=np.float32)
        head_text = t("mean over {n} heads", n=n_heads)
    elif isinstance(head, bool) or not isinstance(head, (int, np.integer)) \
            or not 0 <= head < n_heads:
        raise ValueError(t("Head {head!r} does not exist: layer {layer} has heads 0 to {last} "
                           "(or 'mean').", head=head, layer=layer, last=n_heads - 1))
    else:
        w = weights[head]
        head_text = t("head {head}", head=int(head))
    start = max(0, n_tokens - MAX_TOKEN_COLUMNS)
    z = np.array(w[start:, start:], dtype=np.float32)          # (queries, keys), a copy
    n = z.shape[0]
    future = np.triu(np.ones((n, n), dtype=bool), k=1)
    z[future] = np.nan
    mask = np.full((n, n), np.nan, dtype=np.float32)
    mask[future] = 0.0
    notes = [t("each row: how much one query token attends to each earlier token")]
    if start:
        notes = [t("the last {shown} of {n} tokens; keys before token {start} are hidden, so "
                   "rows sum to less than 1", shown=MAX_TOKEN_COLUMNS, n=n_tokens, start=start)]
    cats, tickvals, ticktext = token_axis(trace.tokens[start:], start,
                                          ids=trace.token_ids[start:])
    fig = go.Figure([
        go.Heatmap(z=z, x=cats, y=cats, colorscale=SEQUENTIAL_SCALE, zmin=0,
                   hoverongaps=False, name=t("weight"),
                   colorbar=dict(title=dict(text=t("weight"), side="right"),
                                 tickfont=dict(size=TICK_SIZE)),
                   hovertemplate=t("query %{y}<br>key %{x}<br>weight %{z:.3f}")
                                 + "<extra></extra>"),
        go.Heatmap(z=mask, x=cats, y=cats, colorscale=[[0, MASK_COLOR], [1, MASK_COLOR]],
                   showscale=False, hoverongaps=False, name=t("masked"),
                   hovertemplate=t("query %{y}<br>key %{x}<br>masked (future token)")
                                 + "<extra></extra>"),
    ])
    axis = dict(type="category", tickvals=tickvals, ticktext=ticktext, showgrid=False)
    fig.update_xaxes(tickangle=-90, **axis)
    fig.update_yaxes(autorange="reversed", **axis)
    fig.update_layout(plot_bgcolor=MASK_COLOR)
    return finish(fig, t("Attention in layer {layer}, {head}", layer=layer, head=head_text),
                  _token_axis_height(len(tickvals)), notes=notes,
                  x_title=t("key (the token looked at)"), y_title=t("query (the token looking)"))


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
    fig = make_subplots(rows=rows, cols=cols, subplot_titles=[t("head {head}", head=h)
                                                              for h in range(n_heads)],
                        horizontal_spacing=0.03, vertical_spacing=0.25 / rows)
    blocky = len(starts) < n_tokens
    what = t("mean weight") if blocky else t("weight")
    hover = (t("queries from %{y}, keys from %{x}<br>mean weight %{z:.4f}") if blocky else
             t("query %{y}, key %{x}<br>weight %{z:.3f}"))
    for h in range(n_heads):
        fig.add_trace(go.Heatmap(z=z[h], x=starts.astype(np.int32), y=starts.astype(np.int32),
                                 coloraxis="coloraxis", hoverongaps=False,
                                 hovertemplate=t("head {head}", head=h) + "<br>" + hover
                                               + "<extra></extra>"),
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
    notes = [t("queries top to bottom, keys left to right; grey = future tokens (masked)")]
    if all_heads > n_heads:
        notes.append(t("the first {n} of {all} heads (see one head at a time for the others)",
                       n=n_heads, all=all_heads))
    if blocky:
        size = n_tokens / len(starts)
        notes.append(t("{n} tokens shown as {side} × {side} cells per head (neighbouring "
                       "tokens averaged, ~{size:.0f} per cell)", n=n_tokens, side=len(starts),
                       size=size))
    _, top = title_layout("", notes)
    row_px = 230 if cols == 4 else 300
    shown = (t("all {n} heads", n=n_heads) if n_heads == all_heads
             else t("heads 0–{last} of {all}", last=n_heads - 1, all=all_heads))
    fig = finish(fig, t("Attention in layer {layer}: {shown}", layer=layer, shown=shown),
                 top + 40 + rows * row_px, notes=notes, margin=dict(l=30, r=30, b=30),
                 axes=False)
    return fig


def entropy_figure(trace) -> go.Figure:
    """Layers x heads: how spread out each head's attention is (mean entropy in bits)."""
    ent = np.asarray(trace.attention_entropy)
    title = t("Attention entropy per head (bits)")
    if ent.ndim != 3 or ent.size == 0:
        return empty_figure(title, t("No attention entropy recorded."))
    z, bad = clean(ent.mean(axis=-1))
    n_layers, n_heads, n_tokens = ent.shape
    # The largest possible mean: every query spreads evenly over all tokens it may see.
    most = float(np.mean(np.log2(np.arange(1, n_tokens + 1))))
    notes = [t("0 = looks at one token; {most:.2f} = spread evenly over all earlier tokens "
               "(mean over {n} queries)", most=most, n=n_tokens)]
    if bad:
        notes.append(t("inf/NaN values shown as gaps (grey)"))
    label_cells = n_layers * n_heads <= 300 and n_heads <= 8  # wider grids: hover instead
    fig = go.Figure(go.Heatmap(
        z=z, x=np.arange(n_heads), y=np.arange(n_layers), colorscale=SEQUENTIAL_SCALE,
        zmin=0, zmax=max(most, 1e-6), hoverongaps=False,
        texttemplate="%{z:.2f}" if label_cells else None,
        textfont=dict(size=TICK_SIZE),
        colorbar=dict(title=dict(text=t("bits"), side="right"), tickfont=dict(size=TICK_SIZE)),
        hovertemplate=t("layer %{y}, head %{x}<br>mean entropy %{z:.3f} bits")
                      + "<extra></extra>"))
    fig.update_xaxes(dtick=1 if n_heads <= 25 else None, showgrid=False)
    fig.update_yaxes(dtick=1 if n_layers <= 24 else None, showgrid=False)
    fig.update_layout(plot_bgcolor=MASK_COLOR)
    height = max(380, min(950, 200 + 36 * n_layers))
    return finish(fig, title, height, notes=notes, x_title=t("head"), y_title=t("layer"))
