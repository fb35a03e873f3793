"""The logit lens of one or two models on one prompt: what each layer would predict for the
next token (two models: A's layers above B's, one colour scale, and how often their final
predictions agree)."""
from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from ..i18n import t
from .labels import TOKEN_CHARS, readable_tokens, token_label
from .style import (LAYER, HEATMAP_MIN, LIGHT_SCALE, MASK_COLOR, PLOT_MIN, clean, finish,
                    models, panels)

MAX_LENS_POSITIONS = 32    # the logit lens reads the prompt's last 32 positions (the tab's)


def _panel(lens, keep, chars):
    """One model's lens at the positions kept: (probabilities (layers, positions), the guesses
    printed in the cells, the hover's data), and whether any probability was inf/NaN."""
    probs, bad = clean(np.asarray(lens.lens_probs)[:, keep])
    final_probs, _ = clean(np.asarray(lens.lens_final_probs)[:, keep])
    texts = [row[keep] for row in lens.lens_texts]
    # the last layer's lens is the model's own output: its guess is the final prediction
    final_text = [token_label(x) for x in texts[-1]]
    cell_text = [[token_label(x, chars) if chars >= 4 and np.isfinite(probs[i, j]) else ""
                  for j, x in enumerate(row)] for i, row in enumerate(texts)]
    custom = [[[token_label(x), float(np.nan_to_num(final_probs[i, j])), final_text[j]]
               for j, x in enumerate(row)] for i, row in enumerate(texts)]
    return probs, cell_text, custom, bad


def logit_lens_figure(lenses, names=None) -> go.Figure:
    """Every layer's top-1 guess for the next token (final norm + output head applied to
    the block output), at the lens positions; colour = that guess's probability. Two
    models: A's layers on top, B's below, on one colour scale."""
    lenses, names = models(lenses, names)
    alone = len(lenses) == 1
    title = (t("lens.logit_lens_each_layer", "Logit lens: each layer's guess for the next token")
             if alone else t("lens.logit_lens_and", "Logit lens: A and B"))
    positions = list(lenses[0].lens_positions)      # the same for every model (the tab's)
    keep = slice(max(0, len(positions) - MAX_LENS_POSITIONS), len(positions))
    positions = positions[keep]
    n_pos = len(positions)
    notes = []
    if len(lenses[0].lens_positions) > n_pos:
        notes.append(t("lens.last_positions", "the last {shown} of {n} positions", shown=n_pos,
                       n=len(lenses[0].lens_positions)))
    # ~1000 px of plot width, ~8.5 px per character at 15 px: print guesses that fit
    chars = min(TOKEN_CHARS, int(1000 / n_pos / 8.5))
    layers = [len(lens.lens_texts) for lens in lenses]
    fig = panels(1, len(lenses), row_heights=layers, vertical_spacing=0.12,
                 subplot_titles=list(names))
    inputs = readable_tokens(lenses[0].token_ids, lenses[0].tokens)
    labels = [token_label(inputs[p]) for p in positions]
    cats = [f"#{p} {lab}" for p, lab in zip(positions, labels)]
    for row, (lens, name) in enumerate(zip(lenses, names), 1):
        probs, cell_text, custom, bad = _panel(lens, keep, chars)
        if bad:
            notes.append(t("lens.inf_nan_probabilities_shown",
                           "inf/NaN probabilities shown as gaps (grey)"))
        fig.add_trace(go.Heatmap(
            z=probs, x=cats, y=np.arange(probs.shape[0]), text=cell_text,
            texttemplate="%{text}" if chars >= 4 else None, customdata=custom, colorscale=LIGHT_SCALE, zmin=0,
            zmax=1, hoverongaps=False, showscale=False if row > 1 else None,
            colorbar=dict(title=dict(text=t("lens.probability", "probability"), side="right")),
            hovertemplate=("" if alone else name + "<br>")
                          + t("lens.layer_after_input_br",
                              "layer %{y}, after input %{x}<br>top-1 guess: %{customdata[0]} "
                              "(p = %{z:.3f})<br>p of the final prediction %{customdata[2]}: "
                              "%{customdata[1]:.3f}") + "<extra></extra>"), row=row, col=1)
        fig.update_yaxes(row=row, col=1, title_text=t(*LAYER),
             dtick=1 if probs.shape[0] <= 24 else None, showgrid=False)
    if not alone:
        final_a, final_b = (list(lens.lens_ids[-1][keep]) for lens in lenses)
        agree = sum(int(a == b) for a, b in zip(final_a, final_b))
        notes.insert(0, t("lens.final_predictions_last_layer", "the final predictions (last "
                          "layer) agree at {k} of {n} positions", k=agree, n=n_pos))
    if chars < 4:
        notes.append(t("lens.too_many_positions_print", "too many positions to print the guesses "
                       "in the cells: hover over a cell to read it"))
    fig.update_xaxes(type="category", tickvals=cats, ticktext=labels,
                     tickangle=0 if n_pos <= 10 else -90, showgrid=False)
    for row in range(1, len(lenses)):
        fig.update_xaxes(row=row, col=1, showticklabels=False)   # the bottom panel's labels
    fig.update_xaxes(row=len(lenses), col=1,
         title_text=t("lens.input_token_guess_is",
                      "input token (the guess is for the token after it)"))
    fig.update_layout(plot_bgcolor=MASK_COLOR)
    extra = len(lenses) - 1
    height = max(400 + 120 * extra, min(1000 + 200 * extra, 230 + 70 * extra + 34 * sum(layers)))
    return finish(fig, title, height, notes=list(dict.fromkeys(notes)), wrap=120,
                  plot_min=HEATMAP_MIN if alone else 2 * PLOT_MIN)
