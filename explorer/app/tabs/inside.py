"""Tab 2, Inside the forward pass: trace a prompt, then see the statistics at every probe
point across layers, one layer's distributions, a heatmap per token, and export them. The
shortcut lesson (book 4.4) sits in this tab, in its own module ``gradients``."""
from __future__ import annotations

import html
import json
import os
from types import SimpleNamespace

import gradio as gr

from ...book.probe_points import POINT_LABELS
from ...book.tokenizer import get_tokenizer
from ...probes import STAT_NAMES, trace
from .. import gpu, i18n, pinning
from ..exports import csv_text, json_default, write_export
from ..i18n import label, t
from ..plots.statistics import histogram_figure, layer_stats_figure, token_heatmap_figure
from ..plots.style import empty_figure
from ..shared import (DEFAULT_CONFIG, DEFAULT_PROMPT, NO_MODEL_NOTE, as_choice, caption,
                      check_trace_size, friendly, has_trace, layer_of, layer_slider, model_of,
                      prompt_ids, trace_of)
from . import gradients

MAX_CHIPS = 256   # token chips shown above the figures; a longer prompt says how many more
HIST_PAIRS = {
    "norm1: before vs after LayerNorm": ("ln1_in", "ln1_out"),
    "norm2: before vs after LayerNorm": ("ln2_in", "ln2_out"),
    "final_norm: before vs after": ("final_norm_in", "final_norm_out"),
    "feed-forward hidden: before vs after activation": ("ff_pre", "ff_post"),
    "residual stream: entering vs leaving the block": ("resid_pre", "resid_post"),
}
EXPORT_FORMATS = ("CSV", "JSON")


def _chip(tid, text):
    shown = html.escape(text.replace(" ", "␣").replace("\n", "↵"))
    return f'<span class="chip">{shown}<small>{tid}</small></span>'


def _chips(trace_):
    """One chip per token. A character that GPT-2 splits across byte tokens (Chinese, emoji:
    each chip then shows a byte such as <0xE6>) is shown too: its byte chips sit in one group
    headed by the character they make together."""
    raw = get_tokenizer().encoding.decode_single_token_bytes
    pieces, pending, joined = [], [], b""
    for tid, text in list(zip(trace_.token_ids, trace_.tokens))[:MAX_CHIPS]:
        piece = raw(tid) if 0 <= tid < get_tokenizer().n_vocab else b""
        if not pending and _whole(piece):
            pieces.append(_chip(tid, text))
            continue
        pending.append(_chip(tid, text))
        joined += piece
        if _whole(joined) or len(pending) >= 8:
            word = html.escape(joined.decode("utf-8", errors="replace").strip() or "␣")
            title = html.escape(t("one text, {n} tokens", n=len(pending)))
            pieces.append(f'<span class="chip-group" title="{title}">'
                          f'<b>{word}</b>{"".join(pending)}</span>')
            pending, joined = [], b""
    if pending:
        pieces.extend(pending)
    more = len(trace_.token_ids) - MAX_CHIPS
    tail = f"<span>{t('… and {n} more tokens', n=more)}</span>" if more > 0 else ""
    return f'<div class="chips">{"".join(pieces)}{tail}</div>'


def _whole(piece: bytes) -> bool:
    """Whether these bytes are whole UTF-8 characters."""
    try:
        piece.decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False


HEAT_POINTS = tuple(POINT_LABELS)[:11]   # the per-block probe points
NORM_POINTS = ("ln", "final_norm")       # recorded only in a model with LayerNorm


def _recorded(cfg, point):
    return cfg.norm_placement != "none" or not point.startswith(NORM_POINTS)


def probe_choices(cfg, pair=None):
    """The distribution and heatmap choices a model's probe points allow (a model without
    LayerNorm has no norm1/norm2/final_norm to compare). The names are the server's, in the
    page's language: a dropdown whose names Gradio translates sends the translated name back
    as its value. ``pair``: the choice to keep, if the model allows it."""
    pairs = [(t(name), name) for name, points in HIST_PAIRS.items()
             if all(_recorded(cfg, p) for p in points)]
    points = [p for p in HEAT_POINTS if _recorded(cfg, p)]
    keep = pair if pair in [value for _, value in pairs] else pairs[0][1]
    return (gr.update(choices=pairs, value=keep),
            gr.update(choices=points, value="resid_pre"))


# What the tab shows before a trace (and after a rebuild): a short hint, not a blank frame.
def _hint(title, height=150):
    return empty_figure(t(title), t("Press Trace (above) to see this for your prompt."), height)


HINTS = ("Statistics across layers", "Distribution in one layer",
         "One statistic per token and layer")


def hints():
    return tuple(_hint(title) for title in HINTS)


def cleared():
    """The views of a model that is gone (after a rebuild)."""
    return ("", "", *hints(), gr.update(value=None, visible=False))


@friendly
@gpu.gpu_work(duration=gpu.forward_seconds)
def run_trace(prompt, state, layer, pair, heat_point, heat_stat):
    if pinning.comparing(state):
        return _trace_pair(pinning.pair_of(state), prompt, state, layer, pair, heat_point,
                           heat_stat)
    model = model_of(state)
    ids = prompt_ids(prompt, model)
    if len(ids) <= model.cfg.context_length:  # longer: trace() says to shorten it
        check_trace_size(model.cfg, len(ids))
    tr = trace(model, ids)
    state = {**state, "trace": tr, "prompt": prompt}
    return (_chips(tr), summary_of(state), layer_stats_figure([tr]), *_views(
        tr, layer, pair, heat_point, heat_stat), state)


def pair_prompt_ids(prompt, models):
    """The prompt's ids for both models of a comparison: within both vocabularies and both
    context windows (a message names the model that cannot take it)."""
    ids = prompt_ids(prompt, models[0])
    for name, model in zip("AB", models):
        prompt_ids(prompt, model)                 # B's vocabulary too
        if len(ids) > model.cfg.context_length:
            raise gr.Error(t("The prompt has {n} tokens but model {name}'s context_length is "
                             "{most}: shorten it to at most {most} tokens to compare the two.",
                             n=len(ids), name=name, most=model.cfg.context_length))
        check_trace_size(model.cfg, len(ids))
    return ids


def _trace_pair(models, prompt, state, layer, pair, heat_point, heat_stat):
    """Both models trace the same prompt, one after the other (one trace's memory at a
    time); every view shows both."""
    ids = pair_prompt_ids(prompt, models)
    tr_a, tr_b = (trace(model, ids) for model in models)
    state = {**state, "trace": tr_a, "pinned_trace": tr_b, "prompt": prompt}
    return (_chips(tr_a), summary_of(state), *_all_views(state, layer, pair, heat_point,
                                                         heat_stat), state)


def summary_of(state):
    """The line under the chips: the trace's size, time and weights, and its notes."""
    tr = state["trace"]
    if pinning.comparing(state) and state.get("pinned_trace") is not None:
        tr_b = state["pinned_trace"]
        return (t("{n} tokens · traced in {ms_a:.0f} ms (A) and {ms_b:.0f} ms (B) · A: {a} · "
                  "B: {b}", n=len(tr.token_ids), ms_a=tr.seconds * 1000, ms_b=tr_b.seconds * 1000,
                  a=caption(state["key"].source), b=caption(state["pinned_key"].source))
                + "".join(f" · {i18n.translate(n)}" for n in dict.fromkeys(tr.notes
                                                                            + tr_b.notes)))
    return (t("{n} tokens · traced in {ms:.0f} ms · weights: {weights}", n=len(tr.token_ids),
              ms=tr.seconds * 1000, weights=caption(state["key"].source))
            + "".join(f" · {i18n.translate(n)}" for n in tr.notes))


def has_views(state) -> bool:
    """Whether there are traces for the tab's views: the session's, and with a pinned model
    the pinned one's too."""
    if pinning.comparing(state):
        return has_trace(state) and state.get("pinned_trace") is not None
    return has_trace(state)


def _all_views(state, layer, pair, heat_point, heat_stat):
    """The statistics across layers, the distribution and the heatmap of the session's
    trace; with a pinned model, of both traces."""
    tr = trace_of(state)
    if not pinning.comparing(state):
        return (layer_stats_figure([tr]), *_views(tr, layer, pair, heat_point, heat_stat))
    return (layer_stats_figure([tr, state["pinned_trace"]], pinning.names(state)),
            *_views(tr, layer, pair, heat_point, heat_stat, state))


def _views(tr, layer, pair, heat_point, heat_stat, state=None):
    """The distribution and the heatmap; with ``state`` of a comparison, of both models."""
    layer = layer_of(tr, layer)
    points = HIST_PAIRS[as_choice(pair, "distribution", HIST_PAIRS)]
    available = set(tr.points) | set(tr.final)
    if not set(points) <= available:
        raise gr.Error(t("This model has no LayerNorm (norm_placement='none'): choose the "
                         "feed-forward or residual-stream comparison."))
    as_choice(heat_point, "heatmap: probe point", HEAT_POINTS)
    if heat_point not in tr.points:
        raise gr.Error(t("Probe point {point!r} is not in this trace; choose one of {points}.",
                         point=heat_point, points=", ".join(tr.points)))
    as_choice(heat_stat, "heatmap: statistic", STAT_NAMES)
    if state is not None:
        tr_b, names = state["pinned_trace"], pinning.names(state)
        return (histogram_figure([tr, tr_b], layer, points, names),
                token_heatmap_figure([tr, tr_b], heat_point, heat_stat, names))
    return (histogram_figure([tr], layer, points),
            token_heatmap_figure([tr], heat_point, heat_stat))


@friendly
def redraw(state, layer, pair, heat_point, heat_stat):
    """The tab again (language, lecture mode): the last trace's views, or the hints, and
    the distribution's names."""
    cfg = state["key"].config if state and "key" in state else DEFAULT_CONFIG
    pairs = probe_choices(cfg, pair)[0]
    if not has_views(state):
        return (gr.skip(), gr.skip(), *hints(), pairs)
    return (_chips(trace_of(state)), summary_of(state),
            *_all_views(state, layer, pair, heat_point, heat_stat), pairs)


def _choice_views(state, layer, pair, heat_point, heat_stat):
    tr = trace_of(state)
    if not pinning.comparing(state):
        return _views(tr, layer, pair, heat_point, heat_stat)
    if state.get("pinned_trace") is None:
        raise gr.Error(t("Trace a prompt first (Inside the forward pass → Trace)."))
    return _views(tr, layer, pair, heat_point, heat_stat, state)


@friendly
def inside_views(state, layer, pair, heat_point, heat_stat):
    return _choice_views(state, layer, pair, heat_point, heat_stat)


@friendly
def inside_views_if_traced(state, layer, pair, heat_point, heat_stat):
    """A choice changed (by the user, or by a build resetting it): redraw, or stay quiet
    when there is no trace to show."""
    if not has_views(state):
        return gr.skip(), gr.skip()
    return _choice_views(state, layer, pair, heat_point, heat_stat)


@friendly
def download_button(path):
    """The export's file as a button that names it and its size."""
    if not path:
        return gr.update(visible=False)
    size = os.path.getsize(path)
    shown = f"{size / 1024:.1f} KB" if size >= 1024 else t("{n} bytes", n=size)
    return gr.update(visible=True, value=path,
                     label=t("Download {name} ({size})", name=os.path.basename(path), size=shown))


@friendly
def export_stats(state, fmt):
    tr = trace_of(state)
    fmt = as_choice(fmt, "export format", EXPORT_FORMATS)
    # With a pinned model (and its trace), B's rows follow A's, each row naming its model.
    traces = [("A", tr)]
    if pinning.comparing(state) and state.get("pinned_trace") is not None:
        traces.append(("B", state["pinned_trace"]))
    rows = []
    for name, traced in traces:
        for group in (traced.points, traced.final):
            for point, s in group.items():
                for layer in range(s.overall["mean"].shape[0]):
                    row = {"model": name} if len(traces) > 1 else {}
                    row.update({"point": point, "where": POINT_LABELS[point],
                                "layer": layer if group is traced.points else "final"})
                    row.update({k: float(v[layer]) for k, v in s.overall.items()})
                    rows.append(row)
    if fmt == "JSON":
        return write_export("activation_stats.json", json.dumps(
            {"tokens": tr.tokens, "token_ids": tr.token_ids, "config": tr.config,
             "stats": rows,
             "per_token": {p: {k: v.tolist() for k, v in s.per_token.items()}
                           for p, s in tr.points.items()}}, indent=1, default=json_default))
    header = list(rows[0])
    return write_export("activation_stats.csv",
                        csv_text([header] + [[r[h] for h in header] for r in rows]))


# ---------------------------------------------------------------------------------------------
def create_ui():
    with gr.Tab(label("2 · Inside the forward pass"), id="inside"):
        weights_note = gr.Markdown(label(NO_MODEL_NOTE), elem_id="inside_weights")
        with gr.Row(elem_id="trace_row"):
            prompt = gr.Textbox(DEFAULT_PROMPT, label=label("Prompt"), lines=2, max_lines=4,
                                scale=4, elem_id="trace_prompt")
            button = gr.Button(label("Trace"), variant="primary", scale=1, elem_id="trace_btn")
        chips = gr.HTML(elem_id="chips")
        info = gr.Markdown(elem_id="trace_info")
        stats_plot = gr.Plot(_hint(HINTS[0]), show_label=False,
                             label=label("Before and after LayerNorm, layer by layer"),
                             elem_id="stats_plot")
        with gr.Row():
            layer = layer_slider("layer", elem_id="inside_layer")
            pair_choices, point_choices = probe_choices(DEFAULT_CONFIG)
            pair = gr.Dropdown(pair_choices["choices"], value=pair_choices["value"],
                               label=label("distribution"), elem_id="pair")
            heat_point = gr.Dropdown(point_choices["choices"], value="resid_pre",
                                     label=label("heatmap: probe point"), elem_id="heat_point")
            heat_stat = gr.Dropdown(list(STAT_NAMES), value="std",
                                    label=label("heatmap: statistic"), elem_id="heat_stat")
        hist_plot = gr.Plot(_hint(HINTS[1]), show_label=False, label=label("Distribution"),
                            elem_id="hist_plot")
        heat_plot = gr.Plot(_hint(HINTS[2]), show_label=False,
                            label=label("Per token and layer"), elem_id="heat_plot")
        with gr.Row(equal_height=True):
            export_fmt = gr.Radio(["CSV", "JSON"], value="CSV", label=label("export format"))
            export_btn = gr.Button(label("Export statistics"), elem_id="export_stats_btn")
            export_file = gr.DownloadButton(label("Download"), visible=False,
                                            elem_id="export_stats_file")
        shortcut_lesson = gradients.create_ui()
        api_views = gr.Button(visible=False)
    return SimpleNamespace(prompt=prompt, button=button, chips=chips, info=info,
                           stats_plot=stats_plot, layer=layer, pair=pair, heat_point=heat_point,
                           heat_stat=heat_stat, hist_plot=hist_plot, heat_plot=heat_plot,
                           export_fmt=export_fmt, export_btn=export_btn, export_file=export_file,
                           shortcut_lesson=shortcut_lesson, api_views=api_views,
                           weights_note=weights_note)


def create_event_handlers(tab, state, view, redrawn):
    """``view``: the page's language and lecture mode; ``redrawn``: the events after which
    the tab is drawn again. Returns the trace events, for the other tabs that follow a new
    trace."""
    views = [tab.layer, tab.pair, tab.heat_point, tab.heat_stat]
    for event in redrawn:
        event.then(redraw, [state, *views, *view],
                   [tab.chips, tab.info, tab.stats_plot, tab.hist_plot, tab.heat_plot, tab.pair],
                   api_visibility="private", show_progress="hidden")
    traced = [trigger(run_trace, [tab.prompt, state, *views, *view],
                      [tab.chips, tab.info, tab.stats_plot, tab.hist_plot, tab.heat_plot, state],
                      api_name="trace", concurrency_limit=2, concurrency_id="inspect",
                      show_progress_on=[tab.info])
              for trigger in (tab.button.click, tab.prompt.submit)]
    for control in views:
        control.change(inside_views_if_traced, [state, *views, *view],
                       [tab.hist_plot, tab.heat_plot],
                       api_visibility="private", concurrency_limit=2, concurrency_id="inspect")
    # /inside_views: the same views for API clients, who get a message without a trace (a
    # hidden button: the page's own events above stay quiet then)
    tab.api_views.click(inside_views, [state, *views, *view], [tab.hist_plot, tab.heat_plot],
                        api_name="inside_views", concurrency_limit=2, concurrency_id="inspect")
    tab.export_btn.click(export_stats, [state, tab.export_fmt, *view], tab.export_file,
                         api_name="export_stats") \
        .success(download_button, [tab.export_file, *view], tab.export_file,
                 api_visibility="private")
    gradients.create_event_handlers(tab.shortcut_lesson, state, view, redrawn)
    return traced
