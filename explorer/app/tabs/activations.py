"""Tab 4, Activation functions: the curves (and derivatives) over every model's real
feed-forward inputs, once a prompt is traced."""
from __future__ import annotations

from dataclasses import dataclass

import gradio as gr

from ...book.config import ACTIVATIONS
from ...book.curves import activation_curves
from ...book.errors import ExplorerError, Message
from .. import comparison, refresh
from ..handlers import handler
from ..i18n import label
from ..inputs import as_choices, as_flag, as_number, layer_in
from ..pickers import choose, fitted_layer, layer_slider
from ..plots.curves import activation_figure
from ..session import View

TITLE = ("tab.activations", "4 · Activation functions")
ID = "activations"
WEIGHTS_NOTE = refresh.weights_note_of(ID)
CONTROLS = ("act_x_min", "act_x_max", "act_functions", "act_derivatives", "act_layer")


def _ff_inputs(tr, layer):
    """(counts, edges) of the feed-forward inputs in ``layer``, or None beyond the model's."""
    if layer >= tr.n_layers:
        return None
    s = tr.points["ff_pre"]
    return s.hist_counts[layer], s.hist_edges[layer]


@dataclass(frozen=True)
class Curves(View):
    """The curves' choices, once drawn (x from, x to, functions, derivatives, layer)."""

    shown: tuple | None = None


def figure(session, x_min, x_max, functions, derivatives, layer):
    functions = as_choices(functions, Message("field.functions", "functions"), ACTIVATIONS)
    derivatives = as_flag(derivatives, Message("field.derivatives", "show derivatives"))
    if not functions:
        raise ExplorerError("activations.none", "Tick at least one activation function.")
    curves = activation_curves(as_number(x_min, Message("field.x_min", "x_min")),
                               as_number(x_max, Message("field.x_max", "x_max")))
    session.show(Curves, shown=(x_min, x_max, functions, derivatives, layer))
    inputs = []
    traces = session.traces if len(session.traces) == len(session.models) else ()
    if traces and "ff_pre" in traces[0].points:
        layer = layer_in(traces[0].n_layers, layer, Message("field.layer", "layer"))
        choose(session, act_layer=layer)
        inputs = [_ff_inputs(tr, layer) for tr in traces]
    return activation_figure(curves, tuple(functions), derivatives, inputs,
                             comparison.names(session) if len(inputs) == 2 else None)


@handler(outputs=("act_plot",))
def activation_view(x_min, x_max, functions, derivatives, layer, session):
    """/activation_curves: GELU/ReLU/SiLU curves over the models' real FFN inputs."""
    return {"act_plot": figure(session, x_min, x_max, functions, derivatives, layer)}


@refresh.renders("act_layer", "act_plot", of_trace=True)
def render(session) -> dict:
    """The layer picker fitted to the models, and the curves shown, of their inputs."""
    shown = session.view(Curves).shown
    return {"act_layer": fitted_layer(session, "act_layer"),
            **({"act_plot": figure(session, *shown)} if shown else {})}


def create(page):
    page.add(WEIGHTS_NOTE())
    with gr.Row():
        page.add(gr.Slider(-20, 0, value=-4, step=0.5, label=label("activations.x_min",
                                                                   "x from"),
                           elem_id="act_x_min"))
        page.add(gr.Slider(0, 20, value=4, step=0.5, label=label("activations.x_max", "x to"),
                           elem_id="act_x_max"))
        page.add(gr.CheckboxGroup(list(ACTIVATIONS), value=["gelu", "relu"],
                                  label=label("activations.functions", "functions"),
                                  elem_id="act_functions"))
        page.add(gr.Checkbox(False, label=label("activations.derivatives", "show derivatives"),
                             elem_id="act_derivatives"))
        page.add(layer_slider("act_layer", "activations.layer", "layer (real inputs)"))
    page.add(gr.Plot(show_label=False, label=label("activations.plot", "Activation functions"),
                     elem_id="act_plot"))


def wire(page):
    inputs = [*CONTROLS, "session"]
    page.on([f"{name}.change" for name in CONTROLS], activation_view, inputs,
            api_visibility="private")
    page.on(page.demo.load, activation_view, inputs, api_name="activation_curves")
