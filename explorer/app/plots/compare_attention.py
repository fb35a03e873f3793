"""Attention of two traces of one prompt (model A and model B): the same layer and head of both
with their difference A − B, every head of the layer for both, and both entropy maps."""
from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ...probes.compare import attention_difference
from ..i18n import t
from .attention import GRID_BUDGET_BYTES, GRID_MAX_HEADS, GRID_MAX_SIDE, _downsample_attention
from .labels import MAX_TOKEN_COLUMNS, token_axis
from .style import (DIVERGING_SCALE, FONT_SIZE, MASK_COLOR, SEQUENTIAL_SCALE, TICK_SIZE, clean,
                    empty_figure, finish, title_layout)


def _matrix(trace, layer, head):
    """(T, T) weights of one head (or the mean of the layer's heads), or the reason there are
    none in this model."""
    if layer >= trace.n_layers:
        return None, t("no layer {layer} (layers 0 to {last})", layer=layer,
                       last=trace.n_layers - 1)
    weights = trace.attention.get(layer)
    if weights is None:
        return None, t("layer {layer} was not kept", layer=layer)
    if head == "mean":
        return weights.mean(axis=0, dtype=np.float32), None
    if head >= weights.shape[0]:
        return None, t("no head {head} (heads 0 to {last})", head=head,
                       last=weights.shape[0] - 1)
    return np.asarray(weights[head], dtype=np.float32), None


def _masked(w, start):
    z = np.array(w[start:, start:], dtype=np.float32)           # (queries, keys), a copy
    z[np.triu(np.ones(z.shape, dtype=bool), k=1)] = np.nan
    return z


def _message(fig, text, col):
    fig.add_annotation(text=text, x=0.5, y=0.5, xref=f"x{col} domain" if col > 1 else
                       "x domain", yref=f"y{col} domain" if col > 1 else "y domain",
                       showarrow=False, font=dict(size=FONT_SIZE))


def attention_pair_figure(tr_a, tr_b, layer: int, head, names) -> go.Figure:
    """Three panels: A's weights, B's, and A − B (red: A attends more; blue: B does), for the
    same layer and head (or the mean over heads); the future is masked (grey)."""
    head_text = t("mean over heads") if head == "mean" else t("head {head}", head=head)
    fig = make_subplots(rows=1, cols=3, horizontal_spacing=0.075,
                        subplot_titles=[*names, t("A − B (difference)")])
    n_tokens = len(tr_a.token_ids)
    start = max(0, n_tokens - MAX_TOKEN_COLUMNS)
    cats, tickvals, ticktext = token_axis(tr_a.tokens[start:], start, ids=tr_a.token_ids[start:])
    notes = [t("each row: how much one query token attends to each earlier token")]
    if start:
        notes.append(t("the last {shown} of {n} tokens", shown=MAX_TOKEN_COLUMNS, n=n_tokens))
    matrices = []
    for col, (tr, name) in enumerate(zip((tr_a, tr_b), names), 1):
        w, missing = _matrix(tr, layer, head)
        matrices.append(w)
        if w is None:
            _message(fig, t("{name}: {why}", name=name, why=missing), col)
            notes.append(t("{name} has {why}: not compared", name=name, why=missing))
            continue
        fig.add_trace(go.Heatmap(z=_masked(w, start), x=cats, y=cats, coloraxis="coloraxis",
                                 hoverongaps=False,
                                 hovertemplate=name + "<br>" + t("query %{y}<br>key %{x}<br>"
                                                                 "weight %{z:.3f}")
                                               + "<extra></extra>"), row=1, col=col)
    diff = (attention_difference(*matrices) if all(m is not None for m in matrices) else None)
    if diff is None:
        _message(fig, t("no difference map: A and B do not both have this head"), 3)
        bound = 1.0
    else:
        z = _masked(diff, start)
        largest = float(np.nanmax(np.abs(z))) if np.isfinite(z).any() else 0.0
        bound = max(largest, 1e-6)
        notes.append(t("A − B is zero everywhere (the two attend alike)") if largest == 0 else
                     t("largest |A − B| {largest:.3g} (red: A attends more, blue: B does)",
                       largest=largest))
        fig.add_trace(go.Heatmap(z=z, x=cats, y=cats, coloraxis="coloraxis2", hoverongaps=False,
                                 hovertemplate=t("query %{y}<br>key %{x}<br>A − B %{z:.3f}")
                                               + "<extra></extra>"), row=1, col=3)
    most = max([float(np.nanmax(m)) for m in matrices if m is not None] or [1.0])
    axis = dict(type="category", tickvals=tickvals, ticktext=ticktext, showgrid=False)
    fig.update_xaxes(tickangle=-90, **axis)
    fig.update_yaxes(autorange="reversed", **axis)
    fig.update_yaxes(showticklabels=False, col=2)
    fig.update_yaxes(showticklabels=False, col=3)
    fig.update_xaxes(title_text=t("key (the token looked at)"), col=2)
    fig.update_yaxes(title_text=t("query (the token looking)"), col=1)
    bar = dict(thickness=14, len=0.8, tickfont=dict(size=TICK_SIZE))
    fig.update_layout(
        plot_bgcolor=MASK_COLOR,
        # no colour bar titles: the one between the panels would run into the third (the
        # panels' titles say what each bar measures)
        coloraxis=dict(colorscale=SEQUENTIAL_SCALE, cmin=0, cmax=most,
                       colorbar=dict(x=0.645, **bar)),
        coloraxis2=dict(colorscale=DIVERGING_SCALE, cmid=0, cmin=-bound, cmax=bound,
                        colorbar=dict(x=1.0, **bar)))
    n_shown = len(tickvals)
    return finish(fig, t("Attention in layer {layer}, {head}: A, B and A − B", layer=layer,
                         head=head_text), max(560, 330 + 8 * n_shown), notes=notes,
                  margin=dict(r=90), wrap=120)


def _grid_of(trace, layer, budget):
    weights = trace.attention.get(layer) if layer < trace.n_layers else None
    if weights is None:
        return None, None
    weights = weights[:GRID_MAX_HEADS]
    n_heads = weights.shape[0]
    cells = (budget - 10_000 - 600 * n_heads) / (6.4 * n_heads)
    side = min(GRID_MAX_SIDE, int(math.sqrt(max(cells, 64))))
    return _downsample_attention(weights, side)


def attention_grid_pair_figure(tr_a, tr_b, layer: int, names) -> go.Figure:
    """Every head of one layer for A (top rows) and B (rows below), one colour scale; each
    model's heads within half the single view's JSON budget."""
    grids = [_grid_of(tr, layer, GRID_BUDGET_BYTES / 2) for tr in (tr_a, tr_b)]
    shown = [g for g in grids if g[0] is not None]
    title = t("Every head of layer {layer}: A and B", layer=layer)
    if not shown:
        return empty_figure(title, t("Neither model has attention for layer {layer}.",
                                     layer=layer))
    cols = min(6, max(g[0].shape[0] for g in shown))
    rows_of = [math.ceil(g[0].shape[0] / cols) if g[0] is not None else 1 for g in grids]
    titles = []
    for (z, _), name, rows in zip(grids, names, rows_of):
        heads = [] if z is None else [f"{name.split(' ')[0]} · " + t("head {head}", head=h)
                                      for h in range(z.shape[0])]
        if z is None:
            heads = [t("{name}: no layer {layer}", name=name, layer=layer)]
        titles += heads + [""] * (rows * cols - len(heads))
    fig = make_subplots(rows=sum(rows_of), cols=cols, subplot_titles=titles,
                        horizontal_spacing=0.02, vertical_spacing=0.3 / sum(rows_of))
    notes = [t("top: {a}; below: {b}", a=names[0], b=names[1]),
             t("queries top to bottom, keys left to right; grey = future tokens (masked)")]
    first_row = 1
    for (z, starts), name, rows in zip(grids, names, rows_of):
        if z is not None:
            for h in range(z.shape[0]):
                fig.add_trace(go.Heatmap(
                    z=z[h], x=starts.astype(np.int32), y=starts.astype(np.int32),
                    coloraxis="coloraxis", hoverongaps=False,
                    hovertemplate=name + " · " + t("head {head}", head=h)
                                  + "<br>" + t("query %{y}, key %{x}<br>weight %{z:.3f}")
                                  + "<extra></extra>"),
                    row=first_row + h // cols, col=h % cols + 1)
            if len(starts) < len(tr_a.token_ids):
                notes.append(t("{name}: neighbouring tokens averaged into {side} × {side} cells",
                               name=name, side=len(starts)))
        first_row += rows
    bare = dict(showticklabels=False, showgrid=False, zeroline=False, ticks="", showline=False)
    fig.update_xaxes(**bare)
    fig.update_yaxes(autorange="reversed", **bare)
    fig.update_layout(plot_bgcolor=MASK_COLOR, coloraxis=dict(
        colorscale=SEQUENTIAL_SCALE, cmin=0,
        colorbar=dict(title=dict(text=t("weight"), side="right"), tickfont=dict(size=TICK_SIZE))))
    fig.update_annotations(font=dict(size=FONT_SIZE - 2))
    _, top = title_layout("", notes)
    row_px = 170 if cols >= 5 else 210
    return finish(fig, title, top + 40 + sum(rows_of) * row_px, notes=notes,
                  margin=dict(l=30, r=30, b=30), axes=False)


def entropy_pair_figure(tr_a, tr_b, names) -> go.Figure:
    """A's and B's entropy maps (layers × heads, mean bits per query) on one colour scale."""
    title = t("Attention entropy per head (bits): A and B")
    ents = [np.asarray(tr.attention_entropy) for tr in (tr_a, tr_b)]
    if any(e.ndim != 3 or e.size == 0 for e in ents):
        return empty_figure(title, t("No attention entropy recorded."))
    n_tokens = ents[0].shape[2]
    most = float(np.mean(np.log2(np.arange(1, n_tokens + 1))))
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.1, subplot_titles=["A", "B"])
    zs = []
    for col, (ent, name) in enumerate(zip(ents, names), 1):
        z, _ = clean(ent.mean(axis=-1))
        zs.append(z)
        n_layers, n_heads = z.shape
        label_cells = n_layers * n_heads <= 150 and n_heads <= 6
        fig.add_trace(go.Heatmap(
            z=z, x=np.arange(n_heads), y=np.arange(n_layers), coloraxis="coloraxis",
            hoverongaps=False, texttemplate="%{z:.2f}" if label_cells else None,
            textfont=dict(size=TICK_SIZE),
            hovertemplate=name + "<br>" + t("layer %{y}, head %{x}<br>mean entropy %{z:.3f} bits")
                          + "<extra></extra>"), row=1, col=col)
        fig.update_xaxes(dtick=1 if n_heads <= 16 else None, title_text=t("head"), row=1,
                         col=col)
    notes = [t("left: {a} · right: {b}", a=names[0], b=names[1]),
             t("0 = looks at one token; {most:.2f} = spread evenly over all earlier tokens "
               "(mean over {n} queries)", most=most, n=n_tokens)]
    if zs[0].shape == zs[1].shape:
        largest = float(np.nanmax(np.abs(zs[0] - zs[1]))) if zs[0].size else 0.0
        notes.append(t("A − B is zero for every head") if largest == 0 else
                     t("largest |A − B| {largest:.3g} bits", largest=largest))
    else:
        notes.append(t("A has {la} layers × {ha} heads, B {lb} × {hb}: compared side by side "
                       "only", la=zs[0].shape[0], ha=zs[0].shape[1], lb=zs[1].shape[0],
                       hb=zs[1].shape[1]))
    fig.update_yaxes(showgrid=False, tickformat="d",
                     dtick=1 if max(z.shape[0] for z in zs) <= 24 else None)
    fig.update_yaxes(title_text=t("layer"), col=1)
    fig.update_layout(plot_bgcolor=MASK_COLOR, coloraxis=dict(
        colorscale=SEQUENTIAL_SCALE, cmin=0, cmax=max(most, 1e-6),
        colorbar=dict(title=dict(text=t("bits"), side="right"), tickfont=dict(size=TICK_SIZE))))
    n_layers = max(z.shape[0] for z in zs)
    return finish(fig, title, max(380, min(950, 220 + 36 * n_layers)), notes=notes)
