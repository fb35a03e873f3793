"""The logit lens of two models on one prompt: A's layers above B's, one colour scale, and how
often their final predictions agree."""
from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..i18n import t
from .labels import TOKEN_CHARS, readable_tokens, token_label
from .lens import MAX_LENS_POSITIONS
from .style import LIGHT_SCALE, MASK_COLOR, TICK_SIZE, clean, empty_figure, finish


def _panel(lens, keep, chars):
    probs, _ = clean(np.asarray(lens.lens_probs)[:, keep])
    texts = [row[keep] for row in lens.lens_texts]
    cell_text = [[token_label(x, chars) if chars >= 4 and np.isfinite(probs[i, j]) else ""
                  for j, x in enumerate(row)] for i, row in enumerate(texts)]
    custom = [[token_label(x) for x in row] for row in texts]
    return probs, cell_text, custom


def logit_lens_pair_figure(lens_a, lens_b, names) -> go.Figure:
    """Each layer's top-1 guess for the next token, A's layers on top and B's below; colour =
    that guess's probability, on one scale for both."""
    title = t("Logit lens: A and B")
    positions = list(lens_a.lens_positions)
    if not positions or list(lens_b.lens_positions) != positions:
        return empty_figure(title, t("The logit lens was not read at the same positions for "
                                     "both models."))
    keep = slice(max(0, len(positions) - MAX_LENS_POSITIONS), len(positions))
    positions = positions[keep]
    n_pos = len(positions)
    chars = min(TOKEN_CHARS, int(1000 / n_pos / 8.5))
    layers = (len(lens_a.lens_texts), len(lens_b.lens_texts))
    fig = make_subplots(rows=2, cols=1, row_heights=list(layers), vertical_spacing=0.12,
                        subplot_titles=list(names))
    inputs = readable_tokens(lens_a.token_ids, lens_a.tokens)
    labels = [token_label(inputs[p]) for p in positions]
    cats = [f"#{p} {lab}" for p, lab in zip(positions, labels)]
    for row, (lens, name) in enumerate(zip((lens_a, lens_b), names), 1):
        probs, cell_text, custom = _panel(lens, keep, chars)
        fig.add_trace(go.Heatmap(
            z=probs, x=cats, y=np.arange(probs.shape[0]), text=cell_text,
            texttemplate="%{text}" if chars >= 4 else None, textfont=dict(size=TICK_SIZE),
            customdata=custom, coloraxis="coloraxis", hoverongaps=False,
            hovertemplate=name + "<br>" + t("layer %{y}, after input %{x}<br>top-1 guess: "
                                            "%{customdata} (p = %{z:.3f})") + "<extra></extra>"),
            row=row, col=1)
        fig.update_yaxes(dtick=1 if probs.shape[0] <= 24 else None, showgrid=False,
                         title_text=t("layer"), row=row, col=1)
    final_a = [lens_a.lens_ids[-1][keep][j] for j in range(n_pos)]
    final_b = [lens_b.lens_ids[-1][keep][j] for j in range(n_pos)]
    agree = sum(int(a == b) for a, b in zip(final_a, final_b))
    notes = [t("the final predictions (last layer) agree at {k} of {n} positions", k=agree,
               n=n_pos)]
    if chars < 4:
        notes.append(t("too many positions to print the guesses in the cells: hover over a "
                       "cell to read it"))
    fig.update_xaxes(type="category", tickvals=cats, ticktext=labels,
                     tickangle=0 if n_pos <= 10 else -90, showgrid=False)
    fig.update_xaxes(showticklabels=False, row=1, col=1)
    fig.update_layout(plot_bgcolor=MASK_COLOR, coloraxis=dict(
        colorscale=LIGHT_SCALE, cmin=0, cmax=1,
        colorbar=dict(title=dict(text=t("probability"), side="right"),
                      tickfont=dict(size=TICK_SIZE))))
    height = max(520, min(1200, 300 + 30 * sum(layers)))
    return finish(fig, title, height, notes=notes,
                  x_title=None, y_title=None)
