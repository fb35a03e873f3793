"""Tab 3, Attention: one head's weights (or the mean of a layer's heads), every head of the
layer, the entropy of every head, and the matrix as a CSV file."""
from __future__ import annotations

from types import SimpleNamespace

import gradio as gr

from ...probes import with_attention_of_layer
from .. import gpu, pinning
from ..exports import csv_text, write_export
from ..i18n import label, t
from ..plots.attention import attention_figure, attention_grid_figure, entropy_figure
from ..plots.style import empty_figure
from ..shared import (DEFAULT_CONFIG, NO_MODEL_NOTE, as_int, friendly, layer_of,
                      layer_slider, model_of, trace_of)
from .inside import download_button, has_views


@friendly
@gpu.gpu_work(duration=gpu.forward_seconds)
def attention_views(state, layer, head):
    if pinning.comparing(state):
        return _pair_views(pinning.pair_of(state), state, layer, head)
    model = model_of(state)
    tr = trace_of(state)
    layer = layer_of(tr, layer)
    if layer not in tr.attention:  # long inputs keep attention only on demand
        tr = with_attention_of_layer(model, tr, layer)
        state = {**state, "trace": tr}
    if head != "mean":
        head = as_int(head, "head")
    state = {**state, "attention_shown": True}
    return (attention_figure([tr], layer, head), attention_grid_figure([tr], layer),
            entropy_figure([tr]), state)


def _with_layer(model, tr, layer):
    """``tr`` with the attention of ``layer`` (long inputs keep it only on demand), where
    this model has that layer."""
    if layer < tr.n_layers and layer not in tr.attention:
        tr = with_attention_of_layer(model, tr, layer)
    return tr


def _pair_views(models, state, layer, head):
    """The same layer and head of A and B, their difference, both layers' heads and both
    entropy maps."""
    tr = trace_of(state)
    if state.get("pinned_trace") is None:
        raise gr.Error(t("Trace a prompt first (Inside the forward pass → Trace)."))
    layer = layer_of(tr, layer)
    if head != "mean":
        head = as_int(head, "head")
        if not 0 <= head < tr.config["n_heads"]:
            raise gr.Error(t("Head {head} does not exist: model A has heads 0 to {last} (or "
                             "'mean').", head=head, last=tr.config["n_heads"] - 1))
    tr_a = _with_layer(models[0], tr, layer)
    tr_b = _with_layer(models[1], state["pinned_trace"], layer)
    state = {**state, "trace": tr_a, "pinned_trace": tr_b, "attention_shown": True}
    names = pinning.names(state)
    traces = [tr_a, tr_b]
    return (attention_figure(traces, layer, head, names),
            attention_grid_figure(traces, layer, names), entropy_figure(traces, names), state)


def _hint(title, height=150):
    return empty_figure(t(title), t("Trace a prompt in tab 2, then press Show attention."),
                        height)


HINTS = ("Attention weights", "Every head of this layer", "Entropy per head")


def hints():
    return tuple(_hint(title) for title in HINTS)


def cleared():
    """The views of a model that is gone (after a rebuild)."""
    return (*hints(), gr.update(value=None, visible=False))


def head_choices(n_heads):
    """The head picker: the mean of the layer's heads, or one head. The names are the
    server's (see ``inside.probe_choices``)."""
    return [(t("mean"), "mean")] + [(str(h), str(h)) for h in range(n_heads)]


@friendly
def attention_views_if_traced(state, layer, head):
    """The layer or head changed (by the user, or by a build resetting them): redraw, or
    stay quiet when there is no trace to show."""
    if not has_views(state):
        return gr.skip(), gr.skip(), gr.skip(), gr.skip()
    return attention_views(state, layer, head)


@friendly
def redraw(state, layer, head):
    """The tab again (language, lecture mode): the attention shown, or the hints, and the
    head picker's names."""
    n_heads = (state["key"].config if state and "key" in state else DEFAULT_CONFIG).n_heads
    heads = gr.update(choices=head_choices(n_heads), value=head)
    if not (has_views(state) and state.get("attention_shown")):
        return (*hints(), gr.skip(), heads)
    return (*attention_views(state, layer, head), heads)


@friendly
def export_attention(state, layer, head):
    tr = trace_of(state)
    layer = layer_of(tr, layer)
    if layer not in tr.attention:
        raise gr.Error(t("Show this layer's attention first, then export it."))
    weights = tr.attention[layer]
    matrix = weights.mean(0) if head == "mean" else weights[as_int(head, "head")]
    rows = [[t("query\\key"), *tr.tokens]] + [[tr.tokens[i], *(f"{v:.6g}" for v in row)]
                                            for i, row in enumerate(matrix)]
    return write_export(f"attention_layer{layer}_head{head}.csv", csv_text(rows))


def create_ui():
    with gr.Tab(label("3 · Attention"), id="attention"):
        weights_note = gr.Markdown(label(NO_MODEL_NOTE), elem_id="attention_weights")
        gr.Markdown(label("Trace a prompt in tab 2 first. Rows are queries (the token that "
                          "looks), columns are keys (the token looked at); the grey upper "
                          "triangle is masked: a token never sees the future."),
                    elem_id="attention_intro")
        with gr.Row():
            layer = layer_slider("layer", elem_id="att_layer")
            head = gr.Dropdown(head_choices(DEFAULT_CONFIG.n_heads), value="mean",
                               label=label("head"), elem_id="att_head")
            button = gr.Button(label("Show attention"), variant="primary", elem_id="att_btn")
        plot = gr.Plot(_hint(HINTS[0]), show_label=False, label=label("Attention weights"),
                       elem_id="att_plot")
        with gr.Row():
            grid_plot = gr.Plot(_hint(HINTS[1]), show_label=False,
                                label=label("Every head of this layer"), elem_id="grid_plot")
            entropy_plot = gr.Plot(_hint(HINTS[2]), show_label=False,
                                   label=label("Entropy per head"), elem_id="entropy_plot")
        with gr.Row():
            export_btn = gr.Button(label("Export this attention matrix (CSV)"),
                                   elem_id="export_att_btn")
            export_file = gr.DownloadButton(label("Download"), visible=False,
                                            elem_id="export_att_file")
    return SimpleNamespace(layer=layer, head=head, button=button, plot=plot,
                           grid_plot=grid_plot, entropy_plot=entropy_plot,
                           export_btn=export_btn, export_file=export_file,
                           weights_note=weights_note)


def create_event_handlers(tab, state, view, redrawn):
    inputs = [state, tab.layer, tab.head, *view]
    outputs = [tab.plot, tab.grid_plot, tab.entropy_plot, state]
    for event in redrawn:
        event.then(redraw, inputs, [*outputs, tab.head], api_visibility="private",
                   show_progress="hidden")
    tab.button.click(attention_views, inputs, outputs, api_name="attention",
                     concurrency_limit=2, concurrency_id="inspect")
    for control in (tab.layer, tab.head):
        control.change(attention_views_if_traced, inputs, outputs, api_visibility="private",
                       concurrency_limit=2, concurrency_id="inspect")
    tab.export_btn.click(export_attention, inputs, tab.export_file, api_name="export_attention") \
        .success(download_button, [tab.export_file, *view], tab.export_file,
                 api_visibility="private")
