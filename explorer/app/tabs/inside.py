"""Tab 2, Inside the forward pass: trace a prompt, then see the statistics at every probe
point across layers, one layer's distributions, a heatmap per token, and export them. The
shortcut lesson (book 4.4) sits in this tab, in its own module ``gradients``."""
from __future__ import annotations

import html
import json
from types import SimpleNamespace

import gradio as gr

from ...book.probe_points import POINT_LABELS
from ...probes import STAT_NAMES, trace
from .. import gpu
from ..exports import csv_cell, json_default, write_export
from ..plots.statistics import histogram_figure, layer_stats_figure, token_heatmap_figure
from ..shared import (DEFAULT_PROMPT, check_trace_size, friendly, layer_of, layer_slider,
                      model_of, prompt_ids, trace_of)
from . import gradients

MAX_CHIPS = 256   # token chips shown above the figures; a longer prompt says how many more
HIST_PAIRS = {
    "norm1: before vs after LayerNorm": ("ln1_in", "ln1_out"),
    "norm2: before vs after LayerNorm": ("ln2_in", "ln2_out"),
    "final_norm: before vs after": ("final_norm_in", "final_norm_out"),
    "feed-forward hidden: before vs after activation": ("ff_pre", "ff_post"),
    "residual stream: entering vs leaving the block": ("resid_pre", "resid_post"),
}


def _chips(trace_):
    pieces = []
    for tid, text in list(zip(trace_.token_ids, trace_.tokens))[:MAX_CHIPS]:
        shown = html.escape(text.replace(" ", "␣").replace("\n", "↵"))
        pieces.append(f'<span class="chip">{shown}<small>{tid}</small></span>')
    more = len(trace_.token_ids) - MAX_CHIPS
    tail = f"<span>… and {more} more tokens</span>" if more > 0 else ""
    return f'<div class="chips">{"".join(pieces)}{tail}</div>'


@friendly
@gpu.gpu_work(duration=gpu.forward_seconds)
def run_trace(prompt, state, layer, pair, heat_point, heat_stat):
    model = model_of(state)
    ids = prompt_ids(prompt, model)
    if len(ids) <= model.cfg.context_length:  # longer: trace() says to shorten it
        check_trace_size(model.cfg, len(ids))
    tr = trace(model, ids)
    state = {**state, "trace": tr, "prompt": prompt}
    summary = (f"{len(ids)} tokens · traced in {tr.seconds * 1000:.0f} ms" +
               "".join(f" · {n}" for n in tr.notes))
    return (_chips(tr), summary, layer_stats_figure(tr), *_views(
        tr, layer, pair, heat_point, heat_stat), state)


def _views(tr, layer, pair, heat_point, heat_stat):
    layer = layer_of(tr, layer)
    if pair not in HIST_PAIRS:
        raise gr.Error(f"Unknown comparison {pair!r}; choose one of: {', '.join(HIST_PAIRS)}.")
    points = HIST_PAIRS[pair]
    available = set(tr.points) | set(tr.final)
    if not set(points) <= available:
        raise gr.Error("This model has no LayerNorm (norm_placement='none'): choose the "
                       "feed-forward or residual-stream comparison.")
    if heat_point not in tr.points:
        raise gr.Error(f"Probe point {heat_point!r} is not in this trace; choose one of "
                       f"{', '.join(tr.points)}.")
    if heat_stat not in STAT_NAMES:
        raise gr.Error(f"Unknown statistic {heat_stat!r}; choose one of {', '.join(STAT_NAMES)}.")
    return histogram_figure(tr, layer, points), token_heatmap_figure(tr, heat_point, heat_stat)


@friendly
def inside_views(state, layer, pair, heat_point, heat_stat):
    return _views(trace_of(state), layer, pair, heat_point, heat_stat)


@friendly
def export_stats(state, fmt):
    tr = trace_of(state)
    rows = []
    for group in (tr.points, tr.final):
        for point, s in group.items():
            for layer in range(s.overall["mean"].shape[0]):
                row = {"point": point, "where": POINT_LABELS[point],
                       "layer": layer if group is tr.points else "final"}
                row.update({k: float(v[layer]) for k, v in s.overall.items()})
                rows.append(row)
    if fmt == "JSON":
        return write_export("activation_stats.json", json.dumps(
            {"tokens": tr.tokens, "token_ids": tr.token_ids, "config": tr.config,
             "stats": rows,
             "per_token": {p: {k: v.tolist() for k, v in s.per_token.items()}
                           for p, s in tr.points.items()}}, indent=1, default=json_default))
    header = list(rows[0])
    lines = [",".join(header)] + [",".join(csv_cell(r[h]) for h in header) for r in rows]
    return write_export("activation_stats.csv", "\n".join(lines) + "\n")


# ---------------------------------------------------------------------------------------------
def create_ui():
    with gr.Tab("2 · Inside the forward pass", id="inside"):
        with gr.Row():
            prompt = gr.Textbox(DEFAULT_PROMPT, label="Prompt", lines=2, scale=4,
                                elem_id="trace_prompt")
            button = gr.Button("Trace", variant="primary", scale=1, elem_id="trace_btn")
        chips = gr.HTML(elem_id="chips")
        info = gr.Markdown()
        stats_plot = gr.Plot(show_label=False, label="Before and after LayerNorm, layer by layer",
                             elem_id="stats_plot")
        with gr.Row():
            layer = layer_slider("layer")
            pair = gr.Dropdown(list(HIST_PAIRS), value=list(HIST_PAIRS)[0],
                               label="distribution")
            heat_point = gr.Dropdown(list(POINT_LABELS)[:11], value="resid_pre",
                                     label="heatmap: probe point")
            heat_stat = gr.Dropdown(list(STAT_NAMES), value="std", label="heatmap: statistic")
        hist_plot = gr.Plot(show_label=False, label="Distribution", elem_id="hist_plot")
        heat_plot = gr.Plot(show_label=False, label="Per token and layer", elem_id="heat_plot")
        with gr.Row():
            export_fmt = gr.Radio(["CSV", "JSON"], value="CSV", label="export format")
            export_btn = gr.Button("Export statistics")
            export_file = gr.File(label="statistics file", height=80)
        shortcut_lesson = gradients.create_ui()
    return SimpleNamespace(prompt=prompt, button=button, chips=chips, info=info,
                           stats_plot=stats_plot, layer=layer, pair=pair, heat_point=heat_point,
                           heat_stat=heat_stat, hist_plot=hist_plot, heat_plot=heat_plot,
                           export_fmt=export_fmt, export_btn=export_btn, export_file=export_file,
                           shortcut_lesson=shortcut_lesson)


def create_event_handlers(tab, state):
    """Returns the trace events, for the other tabs that follow a new trace."""
    views = [tab.layer, tab.pair, tab.heat_point, tab.heat_stat]
    traced = [trigger(run_trace, [tab.prompt, state, *views],
                      [tab.chips, tab.info, tab.stats_plot, tab.hist_plot, tab.heat_plot, state],
                      api_name="trace", concurrency_limit=2, concurrency_id="inspect",
                      show_progress_on=[tab.info])
              for trigger in (tab.button.click, tab.prompt.submit)]
    for control in views:
        control.change(inside_views, [state, *views], [tab.hist_plot, tab.heat_plot],
                       api_name="inside_views", concurrency_limit=2, concurrency_id="inspect")
    tab.export_btn.click(export_stats, [state, tab.export_fmt], tab.export_file,
                         api_name="export_stats")
    gradients.create_event_handlers(tab.shortcut_lesson, state)
    return traced
