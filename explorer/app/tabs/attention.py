"""Tab 3, Attention: one head's weights (or the mean of a layer's heads), every head of the
layer, the entropy of every head, and the matrix as a CSV file; for one model or two (with
their difference A − B)."""
from __future__ import annotations

import gradio as gr

from ...book.errors import ExplorerError, Message
from ...probes import with_attention_of_layer
from .. import comparison, refresh
from ..exports import csv_text, show_download, write_export
from ..handlers import handler
from ..i18n import label, t
from ..inputs import as_int, layer_in
from ..pickers import (DEFAULT_CONFIG, choose, chosen, fitted_head, fitted_layer, head_choices,
                       layer_slider)
from ..plots.attention import attention_figure, attention_grid_figure, entropy_figure
from ..plots.style import empty_figure
from ...runtime.placement import Work
from ..results import shared_figures, shared_views
from ...runtime.results import run_placed
from ..prompts import prompt_of, trace_all
from ..session import AttentionShown as Shown
from ..shared import check_model, models_of, traces_of
from . import head_scores as heads

TITLE = ("tab.attention", "3 · Attention")
ID = "attention"
WEIGHTS_NOTE = refresh.weights_note_of(ID)
LAYER = Message("field.layer", "layer")
HEAD = Message("field.head", "head")
VIEWS = ("att_plot", "grid_plot", "entropy_plot")
HINTS = {"att_plot": ("attention.hint_weights", "Attention weights"),
         "grid_plot": ("attention.hint_grid", "Every head of this layer"),
         "entropy_plot": ("attention.hint_entropy", "Entropy per head")}
SHOWN = (*VIEWS, *heads.OUTPUTS)     # the figures, and the heads named by their scores


def hints() -> dict:
    return shared_figures(("hints", ID), lambda: {
        name: empty_figure(t(*title), t("attention.hint", "Press Show attention: the prompt "
                                                          "of tab 2 (traced first if it is "
                                                          "not yet)."), 150)
        for name, title in HINTS.items()}) | heads.hints()


def _head(head, n_heads: int):
    if head == "mean":
        return head
    head = as_int(head, HEAD)
    if not 0 <= head < n_heads:
        raise ExplorerError("attention.head_missing", "Head {head} does not exist: model A "
                            "has heads 0 to {last} (or 'mean').", head=head, last=n_heads - 1)
    return head


def views(session, layer, head) -> dict:
    """Every model's views of ``layer`` and ``head``; a long input's trace keeps attention only
    on demand: a layer not kept yet is computed now, for each model that has it."""
    traces = list(traces_of(session))
    layer = layer_in(traces[0].n_layers, layer, LAYER)
    head = _head(head, traces[0].config["n_heads"])
    if any(layer < tr.n_layers and layer not in tr.attention for tr in traces):
        traces = [run_placed(key, model, Work.forward(key.config, len(tr.token_ids)),
                             with_attention_of_layer, tr, layer)[0]
                  if layer < tr.n_layers and layer not in tr.attention else tr
                  for key, model, tr in zip(session.keys, models_of(session), traces)]
        session.traces = tuple(traces)
    session.show(Shown, on=True)
    choose(session, att_layer=layer, att_head=str(head))
    names = comparison.names(session)
    return shared_views("attention", session, (layer, head, names), lambda: {
        "att_plot": attention_figure(traces, layer, head, names, heads.removed_of(session)),
        "grid_plot": attention_grid_figure(traces, layer, names),
        "entropy_plot": entropy_figure(traces, names),
        **heads.views(session, layer, head, names)})


def _traced(session) -> bool:
    return bool(session.traces) and len(session.traces) == len(session.models)


@handler(outputs=(*SHOWN, "session"))
def attention_views(session, layer, head):
    """/attention: the views of ``layer`` and ``head`` ("mean" or a number)."""
    check_model(session)
    return {**views(session, layer, head), "session": session}


@handler(outputs=(*SHOWN, "session", refresh.trace_outputs),
         inputs=("session", "att_layer", "att_head"))
def show_attention(session, layer, head):
    """The Show attention button: /attention; with no trace of these models, the session's
    prompt traced first, and every tab's views of that trace."""
    check_model(session)
    if _traced(session):
        return attention_views(session, layer, head)
    trace_all(session, prompt_of(session))
    return {**refresh.render_of_trace(session), **attention_views(session, layer, head)}


@handler(outputs=(*SHOWN, "session"))
def choice_changed(session, layer, head):
    """A picker moved: /attention; with no trace yet, the choice kept, quietly."""
    if _traced(session):
        return attention_views(session, layer, head)
    choose(session, att_layer=layer, att_head=str(head))
    return {"session": session}


@handler(outputs=("att_layer", "att_head", *SHOWN, "session"))
def named_head_chosen(session, value):
    """A named head clicked: the pickers show it, and its views follow."""
    chosen_head = heads.picked(value)
    if chosen_head is None:
        return {}
    layer, head = chosen_head
    return {"att_layer": layer, "att_head": head, **choice_changed(session, layer, head)}


@handler(outputs=("export_att_file",))
def export_attention(session, layer, head):
    """/export_attention: model A's attention matrix of ``layer`` and ``head`` as CSV."""
    tr = traces_of(session)[0]
    layer = layer_in(tr.n_layers, layer, LAYER)
    if layer not in tr.attention:
        raise ExplorerError("attention.export_first", "Show this layer's attention first, "
                                                      "then export it.")
    weights = tr.attention[layer]
    head = _head(head, weights.shape[0])
    matrix = weights.mean(0) if head == "mean" else weights[head]
    rows = [[t("attention.query_key", "query\\key"), *tr.tokens]] + [
        [tr.tokens[i], *(f"{v:.6g}" for v in row)] for i, row in enumerate(matrix)]
    return {"export_att_file": write_export(f"attention_layer{layer}_head{head}.csv",
                                            csv_text(rows))}


@refresh.renders(*SHOWN, "export_att_file", "att_layer", "att_head", of_trace=True)
def render(session) -> dict:
    """The pickers fitted to the models; the attention shown of the session's traces (A's,
    when B was removed), else the hints; no export of models that are gone."""
    out = {"att_layer": fitted_layer(session, "att_layer"), "att_head": fitted_head(session)}
    if session.new_models:
        out["export_att_file"] = gr.update(value=None, visible=False)
    if not session.view(Shown).on or len(session.traces) != len(session.models):
        return {**out, **hints()}
    return {**out, **views(session, chosen(session, "att_layer"), chosen(session, "att_head"))}


# ---------------------------------------------------------------------------------------------
def create(page):
    page.add(WEIGHTS_NOTE())
    page.add(gr.Markdown(label("attention.intro", "Show attention draws the prompt of tab 2 "
                               "(traced first if it is not yet). Rows are queries (the token "
                               "that looks), columns are keys (the token looked at); the grey "
                               "upper triangle is masked: a token never sees the future."),
                         elem_id="attention_intro"))
    with gr.Row():
        page.add(layer_slider("att_layer", "attention.layer", "layer"))
        page.add(gr.Dropdown(head_choices(DEFAULT_CONFIG.n_heads), value="mean",
                             label=label("attention.head", "head"), elem_id="att_head"))
        page.add(gr.Button(label("attention.show", "Show attention"), variant="primary",
                           elem_id="att_btn"))
    shown = hints()
    page.add(gr.Plot(shown["att_plot"], show_label=False,
                     label=label("attention.weights", "Attention weights"), elem_id="att_plot"))
    with gr.Row():
        page.add(gr.Plot(shown["grid_plot"], show_label=False,
                         label=label("attention.grid", "Every head of this layer"),
                         elem_id="grid_plot"))
        page.add(gr.Plot(shown["entropy_plot"], show_label=False,
                         label=label("attention.entropy", "Entropy per head"),
                         elem_id="entropy_plot"))
    heads.create(page)
    with gr.Row():
        page.add(gr.Button(label("attention.export", "Export this attention matrix (CSV)"),
                           elem_id="export_att_btn"))
        page.add(gr.DownloadButton(label("attention.download", "Download"), visible=False,
                                   elem_id="export_att_file"))
    page.add(gr.Button(visible=False, elem_id="attention_api_btn"))


def wire(page):
    inputs = ["session", "att_layer", "att_head"]
    inspect = dict(concurrency_limit=2, concurrency_id="inspect")
    shown = page.on("att_btn.click", show_attention, api_visibility="private", **inspect)
    # /attention (a hidden button): the views of the session's trace (made by /trace)
    page.on("attention_api_btn.click", attention_views, inputs, api_name="attention", **inspect)
    named = page.on("att_named.input", named_head_chosen, ["session", "att_named"],
                    api_visibility="private", **inspect)
    for asked in (shown, named):
        asked.then(None, None, None, js="() => gptExplorer.showWhole('att_plot')",
                   api_visibility="private")
    # .input, not .change: a new model's render fits the pickers and draws their views itself
    page.on(["att_layer.input", "att_head.input"], choice_changed, inputs,
            api_visibility="private", **inspect)
    exported = page.on("export_att_btn.click", export_attention, inputs,
                       api_name="export_attention")
    page.then(exported, show_download("export_att_file"), ["export_att_file"],
              api_visibility="private", show_progress="hidden")
