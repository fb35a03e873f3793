"""Tab 4, Activation functions: the curves (and their derivatives) over the x range chosen,
drawn over the session's real feed-forward inputs once a prompt is traced."""
from __future__ import annotations

from types import SimpleNamespace

import gradio as gr

from ...book.config import ACTIVATIONS
from ...book.curves import activation_curves
from .. import pinning
from ..i18n import label, t
from ..plots.curves import activation_figure
from ..shared import NO_MODEL_NOTE, as_choices, as_flag, as_number, friendly, layer_of, layer_slider


@friendly
def activation_view(x_min, x_max, functions, derivatives, layer, state):
    functions = as_choices(functions, "functions", ACTIVATIONS)
    derivatives = as_flag(derivatives, "show derivatives")
    if not functions:
        raise gr.Error(t("Tick at least one activation function."))
    curves = activation_curves(as_number(x_min, "x_min"), as_number(x_max, "x_max"))
    hist = None
    tr = state.get("trace") if state else None
    if tr is not None and "ff_pre" in tr.points:
        layer = layer_of(tr, layer)
        hist = _ff_inputs(tr, layer)
    tr_b = state.get("pinned_trace") if pinning.comparing(state) else None
    if hist is not None and tr_b is not None:
        # Both models' real inputs in this layer (B: if it has the layer).
        return activation_figure(curves, tuple(functions), derivatives,
                                 [hist, _ff_inputs(tr_b, layer)], pinning.names(state))
    return activation_figure(curves, show=tuple(functions), derivatives=derivatives,
                             ff_inputs=[hist] if hist is not None else [])


def _ff_inputs(tr, layer):
    """(counts, edges) of the feed-forward inputs in ``layer``, or None beyond the model's."""
    if layer >= tr.n_layers:
        return None
    s = tr.points["ff_pre"]
    return s.hist_counts[layer], s.hist_edges[layer]


def create_ui():
    with gr.Tab(label("4 · Activation functions"), id="activations"):
        weights_note = gr.Markdown(label(NO_MODEL_NOTE), elem_id="activations_weights")
        with gr.Row():
            x_min = gr.Slider(-20, 0, value=-4, step=0.5, label=label("x from"),
                              elem_id="act_x_min")
            x_max = gr.Slider(0, 20, value=4, step=0.5, label=label("x to"),
                              elem_id="act_x_max")
            functions = gr.CheckboxGroup(list(ACTIVATIONS), value=["gelu", "relu"],
                                         label=label("functions"), elem_id="act_functions")
            derivatives = gr.Checkbox(False, label=label("show derivatives"),
                                      elem_id="act_derivatives")
            layer = layer_slider("layer (real inputs)", elem_id="act_layer")
        plot = gr.Plot(show_label=False, label=label("Activation functions"), elem_id="act_plot")
    return SimpleNamespace(x_min=x_min, x_max=x_max, functions=functions,
                           derivatives=derivatives, layer=layer, plot=plot,
                           weights_note=weights_note)


def create_event_handlers(tab, state, view, redrawn, demo, traced):
    """``traced``: the events that trace a prompt; the plot redraws over its real inputs
    (and after each of ``redrawn``, in the page's language and lecture mode)."""
    controls = [tab.x_min, tab.x_max, tab.functions, tab.derivatives, tab.layer]
    inputs = [*controls, state, *view]
    for event in traced:
        event.success(activation_view, inputs, tab.plot, api_visibility="private")
    for event in redrawn:
        event.then(activation_view, inputs, tab.plot, api_visibility="private",
                   show_progress="hidden")
    for control in controls:
        control.change(activation_view, inputs, tab.plot, api_visibility="private")
    demo.load(activation_view, inputs, tab.plot, api_name="activation_curves")
