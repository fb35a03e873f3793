"""Tab 3, Attention: one head's weights (or the mean of a layer's heads), every head of the
layer, the entropy of every head, and the matrix as a CSV file."""
from __future__ import annotations

from types import SimpleNamespace

import gradio as gr

from ...probes import with_attention_of_layer
from .. import gpu
from ..exports import csv_cell, write_export
from ..plots.attention import attention_figure, attention_grid_figure, entropy_figure
from ..shared import (DEFAULT_CONFIG, as_int, friendly, layer_of, layer_slider, model_of,
                      trace_of)


@friendly
@gpu.gpu_work(duration=gpu.forward_seconds)
def attention_views(state, layer, head):
    model = model_of(state)
    tr = trace_of(state)
    layer = layer_of(tr, layer)
    if layer not in tr.attention:  # long inputs keep attention only on demand
        tr = with_attention_of_layer(model, tr, layer)
        state = {**state, "trace": tr}
    if head != "mean":
        head = as_int(head, "head")
    return (attention_figure(tr, layer, head), attention_grid_figure(tr, layer),
            entropy_figure(tr), state)


@friendly
def export_attention(state, layer, head):
    tr = trace_of(state)
    layer = layer_of(tr, layer)
    if layer not in tr.attention:
        raise gr.Error("Show this layer's attention first, then export it.")
    weights = tr.attention[layer]
    matrix = weights.mean(0) if head == "mean" else weights[as_int(head, "head")]
    header = "query\\key," + ",".join(csv_cell(t) for t in tr.tokens)
    lines = [header] + [csv_cell(tr.tokens[i]) + "," + ",".join(f"{v:.6g}" for v in row)
                        for i, row in enumerate(matrix)]
    return write_export(f"attention_layer{layer}_head{head}.csv", "\n".join(lines) + "\n")


def create_ui():
    with gr.Tab("3 · Attention", id="attention"):
        gr.Markdown("Trace a prompt in tab 2 first. Rows are queries (the token that "
                    "looks), columns are keys (the token looked at); the grey upper "
                    "triangle is masked: a token never sees the future.")
        with gr.Row():
            layer = layer_slider("layer")
            head = gr.Dropdown(["mean"] + [str(h) for h in range(DEFAULT_CONFIG.n_heads)],
                               value="mean", label="head")
            button = gr.Button("Show attention", variant="primary", elem_id="att_btn")
        plot = gr.Plot(show_label=False, label="Attention weights", elem_id="att_plot")
        with gr.Row():
            grid_plot = gr.Plot(show_label=False, label="Every head of this layer",
                                elem_id="grid_plot")
            entropy_plot = gr.Plot(show_label=False, label="Entropy per head",
                                   elem_id="entropy_plot")
        with gr.Row():
            export_btn = gr.Button("Export this attention matrix (CSV)")
            export_file = gr.File(label="attention file", height=80)
    return SimpleNamespace(layer=layer, head=head, button=button, plot=plot,
                           grid_plot=grid_plot, entropy_plot=entropy_plot,
                           export_btn=export_btn, export_file=export_file)


def create_event_handlers(tab, state):
    inputs = [state, tab.layer, tab.head]
    outputs = [tab.plot, tab.grid_plot, tab.entropy_plot, state]
    tab.button.click(attention_views, inputs, outputs, api_name="attention",
                     concurrency_limit=2, concurrency_id="inspect")
    for control in (tab.layer, tab.head):
        control.change(attention_views, inputs, outputs, api_visibility="private",
                       concurrency_limit=2, concurrency_id="inspect")
    tab.export_btn.click(export_attention, inputs, tab.export_file, api_name="export_attention")
