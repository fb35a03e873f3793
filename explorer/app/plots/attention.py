"""Attention of one or two traces of one prompt (model A and model B): one head's weights (with
their difference A − B for two models), every head of a layer as small multiples, and the
entropy of every head. Every weight map's colour scale starts at 0: a uniform 0.25 reads as a
quarter, not as the bottom of the scale."""
from __future__ import annotations

import html
import math

import numpy as np
import plotly.graph_objects as go

from ...probes.compare import attention_difference
from ..i18n import t
from ..prefs import current
from .labels import MAX_TOKEN_COLUMNS, TOKEN_CHARS, readable_tokens, token_axis, token_label
from .style import (GAPS, LAYER, DIVERGING_SCALE, FONT_SIZE, HEATMAP_MIN, MASK_COLOR, PLOT_MIN,
                    SCREEN_HEIGHT, SEQUENTIAL_SCALE, TICK_SIZE, _width, both, clean, empty_figure,
                    finish, lecture_chrome, models, named, panels, scaled, title_layout)

GRID_MAX_SIDE = 48        # attention grid: each head at most 48 x 48 cells ...
GRID_MAX_HEADS = 32       # ... of at most 32 heads
GRID_BUDGET_BYTES = 250_000   # ... and fewer when many heads would exceed this JSON budget
GRID_COLS = (4, 6)        # heads per row for one model, two (smaller, so both fit a screen)


def _weights(trace, layer, head) -> np.ndarray:
    """(T, T) weights of one head, or the mean over the layer's heads."""
    weights = trace.attention[layer]
    if head == "mean":
        return weights.mean(axis=0, dtype=np.float32)
    return np.asarray(weights[head], dtype=np.float32)


def _why_not(trace, layer, head) -> str | None:
    """Why a model shown beside another has no such layer or head, or None."""
    if layer >= trace.n_layers:
        return t("attention.no_layer_layers_0", "no layer {layer} (layers 0 to {last})",
                 layer=layer, last=trace.n_layers - 1)
    if layer not in trace.attention:
        return t("attention.layer_was_not_kept", "layer {layer} was not kept", layer=layer)
    n_heads = trace.attention[layer].shape[0]
    if head != "mean" and head >= n_heads:
        return t("attention.no_head_heads_0", "no head {head} (heads 0 to {last})", head=head,
                 last=n_heads - 1)
    return None


def _masked(w, start):
    """The weights shown, (queries, keys), with the future (a query may not see) NaN: drawn
    as a gap, the figure's grey background (as in the grid of heads). A grey trace of its own
    with a hover would cost as many bytes again (~100 KB a panel at 128 tokens)."""
    z = np.array(w[start:, start:], dtype=np.float32)           # a copy
    z[np.triu(np.ones(z.shape, dtype=bool), k=1)] = np.nan
    return z


def _message(fig, text, col):
    fig.add_annotation(text=text, x=0.5, y=0.5, xref=f"x{col} domain" if col > 1 else
                       "x domain", yref=f"y{col} domain" if col > 1 else "y domain",
                       showarrow=False, font=dict(size=scaled(FONT_SIZE)))


def _largest(zs) -> float:
    """The largest finite value of all ``zs``, the top of a colour scale from 0 (1 if none)."""
    finite = [float(np.nanmax(z)) for z in zs if z is not None and np.isfinite(z).any()]
    return max(finite + [1e-6]) if finite else 1.0


def knocked_out_notes(names, layer, head, removed) -> list[str]:
    """The notes on models whose interventions take this head's output away (``removed``):
    its pattern is what it still computes, which nothing reads any more."""
    notes = []
    for name, gone in zip(names, removed or ()):
        heads = sorted(h for l, h in gone if l == layer and (head == "mean" or h == head))
        if heads:
            notes.append(t("attention.knocked_out", "{name}: knocking out head {heads} of "
                           "layer {layer} removes its output, not its pattern: the weights "
                           "shown are what it still computes, and nothing reads them.",
                           name=name, heads=", ".join(map(str, heads)), layer=layer))
    return notes


def attention_figure(traces, layer, head, names=None, removed=None) -> go.Figure:
    """One head's attention weights (or the mean over heads): queries on y, keys on x, the
    future masked (grey). Two models: A's, B's and A − B. ``removed``: each model's
    knocked-out (layer, head) set; a knocked-out head shown keeps its pattern, and says so."""
    traces, names = models(traces, names)
    alone = len(traces) == 1
    n_panels = len(traces) + (not alone)          # two models: and their difference
    n_tokens = len(traces[0].token_ids)
    start = max(0, n_tokens - MAX_TOKEN_COLUMNS)
    x_ticks, turned = {}, True
    lecture = current().lecture
    if lecture:
        # Key labels across a panel (~950 px shared; a letter ~0.62 of the type size): level
        # where all of them fit a space apart (a short prompt's words, the copying task's 16
        # one-letter tokens); else turned, where all of them fit one line high each (the
        # figure has a screen's height for them: the page scrolls to it); else level, as many
        # as fit (a label at most ~4.2 type sizes, each as long as its share allows).
        panel = 950 / n_panels / scaled(TICK_SIZE)           # in type sizes
        shown = readable_tokens(traces[0].token_ids[start:], traces[0].tokens[start:])
        widths = [_width(html.unescape(token_label(tok))) for tok in shown]
        level = sum(0.62 * w + 0.35 for w in widths) <= panel
        turned = not level and 1.3 * len(shown) <= panel
        if level or turned:
            x_ticks = dict(most=len(shown))
        else:
            most = max(2, int(panel / min(4.2, 0.62 * max(widths) + 1.2)))
            room = panel / min(len(shown), most)
            x_ticks = dict(most=most, tick_chars=max(6, min(TOKEN_CHARS, int(room / 0.62) - 1)))
    tokens, ids = traces[0].tokens[start:], traces[0].token_ids[start:]
    cats, tickvals, ticktext = token_axis(tokens, start, ids=ids, **x_ticks)
    y_vals, y_text = tickvals, ticktext
    notes = [t("attention.each_row_how_much", "each row: how much one query token attends to "
               "each earlier token")]
    if start:
        notes = [t("attention.last_tokens_keys_before", "the last {shown} of {n} tokens; keys "
                   "before token {start} are hidden, so rows sum to less than 1",
                   shown=MAX_TOKEN_COLUMNS, n=n_tokens, start=start)]
    # (one model: the tab has checked its layer and head)
    whys = [None if alone else _why_not(tr, layer, head) for tr in traces]
    matrices = [None if why else _weights(tr, layer, head) for tr, why in zip(traces, whys)]
    notes += [t("attention.has_not_compared", "{name} has {why}: not compared", name=name,
                why=why) for name, why in zip(names, whys) if why]
    notes += knocked_out_notes(names, layer, head, removed)
    fig = panels(n_panels, horizontal_spacing=0.075,
                 subplot_titles=[*names, t("attention.difference", "A − B (difference)")])
    zs = [None if w is None else _masked(w, start) for w in matrices]
    top = _largest(zs)
    # one colour bar for the weights; beside two models' panels it has no title (it would run
    # into the third panel, whose title says what it measures)
    bar = (dict(title=dict(text=t("attention.weight", "weight"), side="right"))
           if alone else dict(x=0.645, thickness=14, len=0.8))
    for col, (z, why, name) in enumerate(zip(zs, whys, names), 1):
        if z is None:
            _message(fig, named([why], name, False)[0], col)
            continue
        fig.add_trace(go.Heatmap(z=z, x=cats, y=cats, colorscale=SEQUENTIAL_SCALE, zmin=0, zmax=top,
                            hoverongaps=False, name=t("attention.weight", "weight"), colorbar=bar,
                            showscale=False if col > 1 else None,
                            hovertemplate=("" if alone else name + "<br>")
                                          + t("attention.query_br_key_br",
                                              "query %{y}<br>key %{x}<br>weight %{z:.3f}")
                                          + "<extra></extra>"), row=1, col=col)
    if not alone:
        diff = (None if any(m is None for m in matrices)
                else attention_difference(*matrices))
        if diff is None:
            _message(fig, t("attention.no_difference_map_and", "no difference map: A and B do "
                            "not both have this head"), 3)
        else:
            z = _masked(diff, start)
            largest = float(np.nanmax(np.abs(z))) if np.isfinite(z).any() else 0.0
            bound = max(largest, 1e-6)
            notes.append(t("attention.is_zero_everywhere_two",
                           "A − B is zero everywhere (the two attend alike)") if largest == 0
                         else t("attention.largest_red_attends_more",
                                "largest |A − B| {largest:.3g} (red: A attends more, blue: B "
                                "does)", largest=largest))
            fig.add_trace(go.Heatmap(z=z, x=cats, y=cats, colorscale=DIVERGING_SCALE, zmid=0,
                                zmin=-bound, zmax=bound, hoverongaps=False, name="A − B",
                                colorbar=dict(x=1.0, thickness=14, len=0.8),
                                hovertemplate=t("attention.query_br_key_br_2",
                                                "query %{y}<br>key %{x}<br>A − B %{z:.3f}")
                                              + "<extra></extra>"), row=1, col=3)
    fig.update_xaxes(type="category", tickvals=tickvals, ticktext=ticktext, showgrid=False,
                     tickangle=-90 if turned else 0)
    fig.update_yaxes(type="category", tickvals=y_vals, ticktext=y_text, showgrid=False,
                     autorange="reversed")
    for col in range(2, n_panels + 1):
        fig.update_yaxes(col=col, showticklabels=False)      # the first panel names the queries
    fig.update_xaxes(col=1 if alone else 2,
         title_text=t("attention.key_token_looked_at", "key (the token looked at)"))
    fig.update_yaxes(col=1,
         title_text=t("attention.query_token_looking", "query (the token looking)"))
    fig.update_layout(plot_bgcolor=MASK_COLOR)
    heads = {tr.attention[layer].shape[0] for tr, w in zip(traces, matrices) if w is not None}
    head_text = (t("attention.head_n", "head {head}", head=int(head)) if head != "mean" else
                 t("attention.mean_over_heads", "mean over {n} heads",
                   n=heads.pop()) if len(heads) == 1 else
                 t("attention.mean_over_heads_2", "mean over heads"))
    title = (t("attention.attention_in_layer", "Attention in layer {layer}, {head}", layer=layer,
               head=head_text) if alone
             else t("attention.attention_in_layer_and",
                    "Attention in layer {layer}, {head}: A, B and A − B", layer=layer,
                    head=head_text))
    if not lecture:
        return finish(fig, title, max(560, 250 + 15 * len(y_vals)), notes=notes, wrap=120)
    # Lecture mode: every query label, 1.3 type sizes each, as far as the whole figure fits
    # a projector's screen (the page scrolls it into view: issue 47, item 7); the labels of
    # a longer prompt thinned to that. One heatmap keeps 250 px, A, B and A − B 120.
    row = 1.3 * scaled(TICK_SIZE)
    fit = int((SCREEN_HEIGHT - lecture_chrome(fig, title, notes, 120)) / row)
    _, y_vals, y_text = token_axis(tokens, start, ids=ids, most=max(2, fit))
    fig.update_yaxes(tickvals=y_vals, ticktext=y_text)
    rows_px = round(row * min(len(cats), fit))
    return finish(fig, title, SCREEN_HEIGHT, notes=notes, wrap=120,
                  plot_min=max(HEATMAP_MIN if alone else PLOT_MIN, rows_px))


def _downsample_attention(weights: np.ndarray, side: int):
    """Block-average each head's (T, T) weights to at most side x side, over allowed
    (non-future) cells only; blocks entirely in the future are NaN. Returns (z, block starts)."""
    n = weights.shape[-1]
    if n <= side:
        z = np.array(weights, dtype=np.float32)
        z[:, np.triu(np.ones((n, n), dtype=bool), k=1)] = np.nan
        return z, np.arange(n)
    starts = np.unique(np.linspace(0, n, side + 1).round().astype(np.int64))[:-1]
    allowed = np.tril(np.ones((n, n), dtype=np.int32))
    counts = np.add.reduceat(np.add.reduceat(allowed, starts, axis=0), starts, axis=1)
    out = np.empty((weights.shape[0], len(starts), len(starts)), dtype=np.float32)
    with np.errstate(invalid="ignore", divide="ignore"):
        for h in range(weights.shape[0]):
            sums = np.add.reduceat(np.add.reduceat(weights[h].astype(np.float64), starts,
                                                   axis=0), starts, axis=1)
            out[h] = np.where(counts > 0, sums / counts, np.nan)
    return out, starts


def _grid_of(trace, layer, budget):
    """(z (heads, side, side), block starts, heads of the layer) of at most GRID_MAX_HEADS
    heads within ``budget`` bytes of JSON."""
    weights = trace.attention[layer]
    all_heads = weights.shape[0]
    weights = weights[:GRID_MAX_HEADS]
    n_heads = weights.shape[0]
    # Measured: a float32 cell costs ~6.4 bytes of JSON (base64, plus to_json's '\/'
    # escapes), each head ~600 bytes besides, the layout ~20 KB. Fit all heads in the budget.
    cells = (budget - 600 * n_heads) / (6.4 * n_heads)
    side = min(GRID_MAX_SIDE, int(math.sqrt(max(cells, 64))))
    z, starts = _downsample_attention(weights, side)
    return z, starts, all_heads


def attention_grid_figure(traces, layer, names=None) -> go.Figure:
    """Every head of one layer as small multiples with one shared colour scale; two models:
    A's heads in the top rows, B's below, each within half the JSON budget."""
    traces, names = models(traces, names)
    alone = len(traces) == 1
    budget = (GRID_BUDGET_BYTES - 20_000) / len(traces)
    grids = [None if not alone and _why_not(tr, layer, "mean") else _grid_of(tr, layer, budget)
             for tr in traces]
    shown = [g for g in grids if g is not None]
    pair_title = t("attention.every_head_layer_and", "Every head of layer {layer}: A and B",
                   layer=layer)
    if not shown:
        return empty_figure(pair_title, t("attention.neither_model_has_attention",
                                          "Neither model has attention for layer {layer}.",
                                          layer=layer))
    cols = min(GRID_COLS[len(traces) - 1], max(g[0].shape[0] for g in shown))
    rows_of = [math.ceil(g[0].shape[0] / cols) if g is not None else 1 for g in grids]
    titles = []
    for grid, name, rows in zip(grids, names, rows_of):
        who = "" if alone else f"{name.split(' ')[0]} · "
        heads = ([t("attention.no_layer", "{name}: no layer {layer}", name=name, layer=layer)]
                 if grid is None else
                 [who + t("attention.head_n", "head {head}", head=h)
                  for h in range(grid[0].shape[0])])
        titles += heads + [""] * (rows * cols - len(heads))
    n_rows = sum(rows_of)
    fig = panels(cols, n_rows, subplot_titles=titles, horizontal_spacing=0.03 if alone else 0.02,
                 vertical_spacing=(0.25 if alone else 0.3) / n_rows)
    notes = [] if alone else [t("attention.top_below", "top: {a}; below: {b}", a=names[0],
                                b=names[1])]
    notes.append(t("attention.queries_top_bottom_keys", "queries top to bottom, keys left to "
                   "right; grey = future tokens (masked)"))
    first_row, blocky = 1, False
    for grid, tr, name, rows in zip(grids, traces, names, rows_of):
        if grid is None:
            first_row += rows
            continue
        z, starts, all_heads = grid
        n_tokens, n_heads = len(tr.token_ids), z.shape[0]
        blocky |= len(starts) < n_tokens
        hover = (t("attention.queries_from_keys_from",
                   "queries from %{y}, keys from %{x}<br>mean weight %{z:.4f}")
                 if len(starts) < n_tokens else
                 t("attention.query_key_br_weight", "query %{y}, key %{x}<br>weight %{z:.3f}"))
        who = "" if alone else name + " · "
        for h in range(n_heads):
            fig.add_trace(go.Heatmap(z=z[h], x=starts.astype(np.int32), y=starts.astype(np.int32),
                                coloraxis="coloraxis", hoverongaps=False,
                                hovertemplate=who + t("attention.head_n", "head {head}", head=h)
                                              + "<br>" + hover + "<extra></extra>"),
                row=first_row + h // cols, col=h % cols + 1)
        own = []
        if all_heads > n_heads:
            own.append(t("attention.first_heads_see_one", "the first {n} of {all} heads (see one "
                         "head at a time for the others)", n=n_heads, all=all_heads))
        if len(starts) < n_tokens:
            own.append(t("attention.tokens_shown_as_cells", "{n} tokens shown as {side} × {side} "
                         "cells per head (neighbouring tokens averaged, ~{size:.0f} per cell)",
                         n=n_tokens, side=len(starts), size=n_tokens / len(starts)))
        notes += named(own, name, alone)
        first_row += rows
    bare = dict(showticklabels=False, showgrid=False, zeroline=False, ticks="",
                showline=False)
    fig.update_xaxes(**bare)
    fig.update_yaxes(autorange="reversed", **bare)
    fig.update_layout(
        plot_bgcolor=MASK_COLOR,
        coloraxis=dict(colorscale=SEQUENTIAL_SCALE, cmin=0,
                       cmax=_largest([g[0] for g in shown]),
                       colorbar=dict(title=dict(text=t("attention.mean_weight", "mean weight")
                                                if blocky else t("attention.weight", "weight"),
                                                side="right"))))
    fig.update_annotations(font=dict(size=scaled(FONT_SIZE if alone else FONT_SIZE - 2)))
    _, top = title_layout("", notes, lecture=False)     # (finish adds lecture type's)
    row_px = 300 if cols < 4 else 230 if cols == 4 else 170
    title = pair_title
    if alone:          # (one model's grid is never None: ``shown`` has it)
        n_heads, all_heads = grids[0][0].shape[0], grids[0][2]
        title = t("attention.attention_in_layer_2", "Attention in layer {layer}: {shown}",
                  layer=layer, shown=t("attention.all_heads", "all {n} heads", n=n_heads)
                  if n_heads == all_heads else
                  t("attention.heads_0", "heads 0–{last} of {all}", last=n_heads - 1,
                    all=all_heads))
    return finish(fig, title, top + 40 + n_rows * row_px, notes=notes,
                  margin=dict(l=30, r=30, b=30), plot_min=150 * n_rows)


def entropy_figure(traces, names=None) -> go.Figure:
    """Layers x heads: how spread out each head's attention is (mean entropy in bits); two
    models side by side on one colour scale, with the largest |A − B|."""
    traces, names = models(traces, names)
    alone = len(traces) == 1
    title = both(t("attention.attention_entropy_per_head", "Attention entropy per head (bits)"),
                 alone)
    ents = [np.asarray(tr.attention_entropy) for tr in traces]      # (layers, heads, queries)
    n_tokens = ents[0].shape[2]
    # The largest possible mean: every query spreads evenly over all tokens it may see.
    most = float(np.mean(np.log2(np.arange(1, n_tokens + 1))))
    notes = [] if alone else [t("attention.left_right", "left: {a} · right: {b}", a=names[0],
                                b=names[1])]
    notes.append(t("attention.0_looks_at_one", "0 = looks at one token; {most:.2f} = spread "
                   "evenly over all earlier tokens (mean over {n} queries)", most=most,
                   n=n_tokens))
    fig = panels(len(traces), horizontal_spacing=0.1, subplot_titles=["A", "B"])
    zs, bad_any = [], False
    for col, (ent, name) in enumerate(zip(ents, names), 1):
        z, bad = clean(ent.mean(axis=-1))
        zs.append(z)
        bad_any |= bad
        n_layers, n_heads = z.shape
        # numbers in the cells where they fit: ~360 px of cells across the figure (half the
        # page), shared by the panels; "2.34" is ~4 letters of ~0.52 of the type size
        label_cells = (n_layers * n_heads <= 300 // len(traces)
                       and 360 / (len(traces) * n_heads) >= 0.52 * scaled(TICK_SIZE) * 4 + 8)
        fig.add_trace(go.Heatmap(
            z=z, x=np.arange(n_heads), y=np.arange(n_layers), colorscale=SEQUENTIAL_SCALE,
            zmin=0, zmax=max(most, 1e-6), hoverongaps=False,
            showscale=False if col > 1 else None,             # one scale for both
            texttemplate="%{z:.2f}" if label_cells else None,
            colorbar=dict(title=dict(text=t("attention.bits", "bits"), side="right")),
            hovertemplate=("" if alone else name + "<br>")
                          + t("attention.layer_head_br_mean",
                              "layer %{y}, head %{x}<br>mean entropy %{z:.3f} bits")
                          + "<extra></extra>"), row=1, col=col)
        fig.update_xaxes(col=col, dtick=1 if n_heads * len(traces) <= 25 else None,
             showgrid=False, title_text=t("attention.head_2", "head"))
    if bad_any:
        notes.append(t(*GAPS))
    if not alone and zs[0].shape == zs[1].shape:
        largest = float(np.nanmax(np.abs(zs[0] - zs[1]))) if zs[0].size else 0.0
        notes.append(t("attention.is_zero_for_every", "A − B is zero for every head")
                     if largest == 0 else
                     t("attention.largest_bits", "largest |A − B| {largest:.3g} bits",
                       largest=largest))
    elif not alone:
        notes.append(t("attention.has_layers_heads_compared", "A has {la} layers × {ha} heads, B "
                       "{lb} × {hb}: compared side by side only", la=zs[0].shape[0],
                       ha=zs[0].shape[1], lb=zs[1].shape[0], hb=zs[1].shape[1]))
    n_layers = max(z.shape[0] for z in zs)
    fig.update_yaxes(dtick=1 if n_layers <= 24 else None, showgrid=False,
                     **({} if alone else dict(tickformat="d")))
    fig.update_yaxes(col=1, title_text=t(*LAYER))
    fig.update_layout(plot_bgcolor=MASK_COLOR)
    height = max(380, min(950, 200 + 20 * (len(traces) - 1) + 36 * n_layers))
    return finish(fig, title, height, notes=notes)
