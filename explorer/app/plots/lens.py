"""The logit lens: what each layer would predict for the next token."""
from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from ..i18n import t
from .labels import TOKEN_CHARS, readable_tokens, token_label
from .style import LIGHT_SCALE, MASK_COLOR, TICK_SIZE, clean, empty_figure, finish

MAX_LENS_POSITIONS = 32


def logit_lens_figure(trace) -> go.Figure:
    """Every layer's top-1 guess for the next token (final norm + output head applied to
    the block output), at the lens positions; colour = that guess's probability."""
    title = t("Logit lens: each layer's guess for the next token")
    positions = list(trace.lens_positions)
    if not positions:
        return empty_figure(title, t("The logit lens was not read for this input."))
    keep = slice(max(0, len(positions) - MAX_LENS_POSITIONS), len(positions))
    positions = positions[keep]
    probs, bad = clean(np.asarray(trace.lens_probs)[:, keep])
    final_probs, _ = clean(np.asarray(trace.lens_final_probs)[:, keep])
    n_layers, n_pos = probs.shape
    notes = []
    if len(trace.lens_positions) > n_pos:
        notes.append(t("the last {shown} of {n} positions", shown=n_pos,
                       n=len(trace.lens_positions)))
    if bad:
        notes.append(t("inf/NaN probabilities shown as gaps (grey)"))
    # the last layer's lens is the model's own output: its guess is the final prediction
    final_text = [token_label(t) for t in trace.lens_texts[-1][keep]]
    # ~1000 px of plot width, ~8.5 px per character at 15 px: print guesses that fit
    chars = min(TOKEN_CHARS, int(1000 / n_pos / 8.5))
    if chars < 4:
        notes.append(t("too many positions to print the guesses in the cells: hover over a "
                       "cell to read it"))
    cell_text = [[token_label(t, chars) if chars >= 4 and np.isfinite(probs[i, j]) else ""
                  for j, t in enumerate(row[keep])] for i, row in enumerate(trace.lens_texts)]
    full_text = [[token_label(t) for t in row[keep]] for row in trace.lens_texts]
    custom = [[[full_text[layer][j], float(np.nan_to_num(final_probs[layer, j])),
                final_text[j]] for j in range(n_pos)] for layer in range(n_layers)]
    input_tokens = readable_tokens(trace.token_ids, trace.tokens)
    input_tokens = [input_tokens[p] for p in positions]
    labels = [token_label(t) for t in input_tokens]
    cats = [f"#{p} {lab}" for p, lab in zip(positions, labels)]
    fig = go.Figure(go.Heatmap(
        z=probs, x=cats, y=np.arange(n_layers), text=cell_text,
        texttemplate="%{text}" if chars >= 4 else None,
        textfont=dict(size=TICK_SIZE), customdata=custom, colorscale=LIGHT_SCALE, zmin=0,
        zmax=1, hoverongaps=False,
        colorbar=dict(title=dict(text=t("probability"), side="right"),
                      tickfont=dict(size=TICK_SIZE)),
        hovertemplate=t("layer %{y}, after input %{x}<br>top-1 guess: %{customdata[0]} "
                        "(p = %{z:.3f})<br>p of the final prediction %{customdata[2]}: "
                        "%{customdata[1]:.3f}") + "<extra></extra>"))
    fig.update_xaxes(type="category", tickvals=cats, ticktext=labels,
                     tickangle=0 if n_pos <= 10 else -90, showgrid=False)
    fig.update_yaxes(dtick=1 if n_layers <= 24 else None, showgrid=False)
    fig.update_layout(plot_bgcolor=MASK_COLOR)
    height = max(400, min(1000, 230 + 34 * n_layers))
    return finish(fig, title, height, notes=notes,
                  x_title=t("input token (the guess is for the token after it)"),
                  y_title=t("layer"))
