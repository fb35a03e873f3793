"""Curves of the book's lessons: activation functions (with the model's real feed-forward
inputs behind them), and mean |gradient| per layer with and without shortcuts (section 4.4)."""
from __future__ import annotations

import html
import math

import numpy as np
import plotly.graph_objects as go

from ..i18n import say, t
from .style import (BLUE, GREY, LIGHT_BAR, PALETTE, PURPLE, TICK_SIZE, VERMILLION, finish,
                    lighter, models, named, scaled)

B_BARS = lighter(PURPLE, 0.55)   # model B's real inputs under the activation curves


def activation_figure(curves: dict, show=("gelu", "relu"), derivatives=False, ff_inputs=(),
                      names=None) -> go.Figure:
    """Activation curves (``explorer.book.curves.activation_curves``), optionally their derivatives
    (dashed), over a histogram of one or two models' real feed-forward inputs (right axis).
    ``ff_inputs``: each model's (counts, edges) of one layer, or None where it has no such
    layer; ``names`` the models' names (two models)."""
    functions = curves["functions"]
    ff_inputs, names = models(ff_inputs, names)
    alone = len(ff_inputs) == 1
    x = np.asarray(curves["x"], dtype=np.float32)
    x_lo, x_hi = float(x[0]), float(x[-1])
    fig = go.Figure()
    notes = []
    curve_axis = "y"
    # The curves take the palette's first colours (blue, vermillion ...): the bars are a
    # grey-blue for A and a light purple (no curve's colour) for B.
    for hist, name, color in zip(ff_inputs, names or (), (LIGHT_BAR, B_BARS)):
        if hist is None:
            continue
        counts, edges = (np.asarray(a, dtype=np.float64) for a in hist)
        total = counts.sum()
        if total == 0:
            note = t("curves.real_feed_forward_inputs",
                     "the real feed-forward inputs are all inf/NaN: no histogram")
            notes += named([note], name, alone)
            continue
        # The histograms own the base axis (drawn first, underneath); the curves go on
        # an overlaying axis on the left, drawn on top of the bars.
        curve_axis = "y2"
        centres = (edges[:-1] + edges[1:]) / 2
        fig.add_trace(go.Bar(
            x=centres.astype(np.float32), y=(counts / total).astype(np.float32),
            width=np.diff(edges).astype(np.float32),
            name=t("curves.real_feed_forward_inputs_2", "real feed-forward inputs") if alone else
            t("curves.real_feed_forward_inputs_3", "real feed-forward inputs of {name}", name=name),
            opacity=None if alone else 0.7,           # two models' bars overlap
            marker=dict(color=color, line=dict(width=0)),
            hovertemplate=t("curves.input_values", "input %{x:.3g}: %{y:.1%} of values")
                          + ("<extra></extra>" if alone else f"<extra>{name}</extra>")))
        outside = counts[(centres < x_lo) | (centres > x_hi)].sum() / total
        if outside > 0.005:
            note = t("curves.real_inputs_lie_outside",
                     "{share:.0%} of the real inputs lie outside the x range shown", share=outside)
            notes += named([note], name, alone)
    if curve_axis == "y2":
        fig.update_layout(
            yaxis=dict(side="right", showgrid=False, rangemode="tozero", tickformat=".0%",
                       title_text=t("curves.share_real_inputs_bars",
                                    "share of real inputs (bars)")),
            yaxis2=dict(overlaying="y", side="left", title_text=t("curves.output", "output")))
    for i, name in enumerate(show):
        f = functions[name]
        color = PALETTE[i % len(PALETTE)]
        fig.add_trace(go.Scatter(x=x, y=np.asarray(f["y"], dtype=np.float32), mode="lines",
                                 name=say(f["label"]), line=dict(color=color, width=3.5),
                                 yaxis=curve_axis,
                                 hovertemplate="x %{x:.2f}: %{y:.3f}<extra>" + f["label"]
                                               + "</extra>"))
        if derivatives:
            fig.add_trace(go.Scatter(
                x=x, y=np.asarray(f["dy"], dtype=np.float32), mode="lines", yaxis=curve_axis,
                name=t("curves.derivative", "derivative of {name}", name=say(f["label"])),
                line=dict(color=color, width=2.5, dash="dash"),
                hovertemplate=t("curves.x_slope", "x %{x:.2f}: slope %{y:.3f}") + "<extra>"
                              + f["label"] + "</extra>"))
    fig.update_xaxes(range=[x_lo, x_hi])
    fig.layout["yaxis2" if curve_axis == "y2" else "yaxis"].update(
        zeroline=True, zerolinecolor=GREY, zerolinewidth=1.5)
    fig.update_layout(barmode="overlay", bargap=0)
    title = t("curves.activation_functions_and_their",
              "Activation functions and their derivatives") if derivatives \
        else t("curves.activation_functions", "Activation functions")
    # (lecture mode: 370 px fit under the tab's controls at 720 px, B's status line included)
    return finish(fig, title, 540, notes=notes, x_title=t("curves.input_x", "input x"),
                  y_title=None if curve_axis == "y2" else t("curves.output", "output"), legend=True,
                  wrap=120, max_height=370)  # the page wide


# ---------------------------------------------------------------------------------------------
# Gradients (the book's section 4.4)
def _log_axis(fig, values, xy="y") -> None:
    """Log-scale axis, one labelled tick per power of ten when the data span two or more
    (plotly's in-between labels '2' and '5' are too small for a projector)."""
    good = [v for v in values if v > 0 and math.isfinite(v)]
    update = fig.update_yaxes if xy == "y" else fig.update_xaxes
    update(type="log", exponentformat="power")
    if good and math.log10(max(good) / min(good)) >= 2:
        update(dtick=1)


def gradient_figure(without: dict, with_: dict) -> go.Figure:
    """Mean |gradient| per layer of the book's 5-layer network, without and with shortcuts
    (``explorer.book.gradients.shortcut_demo``); log scale, so the vanishing shows. The bars
    lie down, first layer on top: each value's label has the room to the right of its bar,
    whatever the bar's thickness, and never runs into the next bar."""
    names = list(dict.fromkeys([*without, *with_]))
    # one line a layer (two would read as a label for each of its two bars): the weight's
    # name in the hover
    labels = [t("curves.layer", "layer {n}", n=i + 1) for i in range(len(names))]
    weights = [html.escape(n.removesuffix(".weight")) for n in names]
    fig = go.Figure()
    notes = []
    for data, name, color in ((without, t("curves.without_shortcut", "without shortcut"),
                               VERMILLION),
                              (with_, t("curves.with_shortcut", "with shortcut"), BLUE)):
        values = [float(data.get(n, float("nan"))) for n in names]
        if any(not (v > 0 and math.isfinite(v)) for v in values):
            notes.append(t("curves.zero_or_missing_gradients", "{name}: zero or missing "
                           "gradients are not drawn (log scale)", name=name))
        values = [v if v > 0 and math.isfinite(v) else None for v in values]
        fig.add_trace(go.Bar(x=values, y=labels, orientation="h", name=name,
                             marker_color=color, texttemplate="%{x:.2~g}",
                             textposition="outside", cliponaxis=False,
                             textfont=dict(size=scaled(TICK_SIZE)), customdata=weights,
                             hovertemplate="%{y} (%{customdata}): %{x:.3g}<extra>" + name
                                           + "</extra>"))
    values = [v for data in (without, with_) for v in data.values()]
    _log_axis(fig, values, "x")
    good = [v for v in values if v > 0 and math.isfinite(v)] or [1.0]
    low, high = math.log10(min(good)) - 0.3, math.log10(max(good))
    # Room right of the longest bar for its label ("0.0014"): the bars take ~380 px of a
    # figure half the page wide, the label ~0.52 of the type size a letter.
    label_px = 0.52 * scaled(TICK_SIZE) * 6 + 8
    high += label_px / (380 - label_px) * (high - low)
    fig.update_xaxes(range=[low, high])
    # layer 1 on top (and in each layer the first trace, "without", above "with")
    fig.update_yaxes(autorange="reversed", type="category")
    fig.update_layout(barmode="group", bargap=0.12, bargroupgap=0.12)
    # two bars a layer, each at least a label high
    return finish(fig, t("curves.mean_gradient_per_layer",
                         "Mean |gradient| per layer (book, section 4.4)"), 520,
                  notes=notes or [t("curves.first_layer_at_top", "first layer at the top: "
                                    "gradients flow back from the loss at the bottom")],
                  x_title=t("curves.mean_gradient_log_scale", "mean |gradient| (log scale)"),
                  y_title=t("curves.layer_weight", "layer (weight)"),
                  legend=True, plot_min=14 * scaled(TICK_SIZE))


def gpt_gradient_figure(grads_a, grads_b, labels=("model A", "model B")) -> go.Figure:
    """Mean |gradient| along a GPT (embedding, every block, output head) for two
    ``GPTGradients``, e.g. with and without shortcut connections; log scale."""
    fig = go.Figure()
    notes = []
    for grads, label, color, dash in ((grads_a, labels[0], BLUE, "solid"),
                                      (grads_b, labels[1], VERMILLION, "dash")):
        cats = [t("curves.embedding", "embedding"),
                *[t("curves.block", "block {n}", n=i) for i in range(len(grads.blocks))],
                t("curves.output_head", "output head")]
        values = [grads.embedding, *grads.blocks, grads.output_head]
        if any(not (v > 0 and math.isfinite(v)) for v in values):
            notes.append(t("curves.zero_or_inf_nan", "{name}: zero or inf/NaN gradients not drawn",
                           name=html.escape(str(label))))
        values = [float(v) if v > 0 and math.isfinite(v) else None for v in values]
        name = t("curves.loss", "{name} (loss {loss:.2f})", name=html.escape(str(label)),
                 loss=grads.loss)
        fig.add_trace(go.Scatter(x=cats, y=values, mode="lines+markers", name=name,
                                 line=dict(color=color, width=3, dash=dash),
                                 marker=dict(size=9), connectgaps=False,
                                 hovertemplate="%{x}: %{y:.3g}<extra>" + html.escape(
                                     str(label)) + "</extra>"))
    fig.update_xaxes(type="category")   # plotly turns the labels when they would overlap
    _log_axis(fig, [grads_a.embedding, *grads_a.blocks, grads_a.output_head,
                    grads_b.embedding, *grads_b.blocks, grads_b.output_head])
    return finish(fig, t("curves.mean_gradient_from_input", "Mean |gradient| from input to output"),
                  500, notes=notes,
                  x_title=t("curves.where_in_model_input", "where in the model (input → output)"),
                  y_title=t("curves.mean_gradient_log_scale", "mean |gradient| (log scale)"),
                  legend=True)
