"""Tab 2, Inside the forward pass: trace a prompt, then see the statistics at every probe
point across layers, one layer's distributions, a heatmap per token, and export them; for one
model or two side by side. The shortcut lesson (book 4.4) is ``gradients``."""
from __future__ import annotations

import html
import json

import gradio as gr

from ...book.errors import ExplorerError, Message
from ...book.tokenizer import get_tokenizer
from ...probes import STAT_NAMES
from ...probes.data import stat_rows
from .. import comparison, refresh
from ..prompts import trace_all
from ..exports import csv_text, json_default, show_download, write_export
from ..handlers import handler
from ..i18n import label, say, t
from ..textbox import Textbox
from ..inputs import as_choice, layer_in
from ..results import shared_figures, shared_views
from ..pickers import (HEAT_POINTS, HIST_PAIRS, Pickers, choose, fitted_layer, fitted_probes,
                       layer_slider, pair_choices)
from ..plots.statistics import histogram_figure, layer_stats_figure, token_heatmap_figure
from ..plots.style import empty_figure
from ..shared import DEFAULT_CONFIG, traces_of
from ..session import DEFAULT_PROMPT
from ...probes.compare import NAMES
from . import head_scores as heads
from . import gradients

TITLE = ("tab.inside", "2 · Inside the forward pass")
ID = "inside"
WEIGHTS_NOTE = refresh.weights_note_of(ID)
MAX_CHIPS = 256   # token chips shown above the figures; a longer prompt says how many more
EXPORT_FORMATS = ("CSV", "JSON")
LAYER = Message("field.layer", "layer")
VIEWS = ("stats_plot", "hist_plot", "heat_plot")
RESULTS = ("chips", "trace_info", *VIEWS, "export_stats_file")
HINTS = {"stats_plot": ("inside.hint_stats", "Statistics across layers"),
         "hist_plot": ("inside.hint_hist", "Distribution in one layer"),
         "heat_plot": ("inside.hint_heat", "One statistic per token and layer")}


def hints() -> dict:
    return shared_figures(("hints", ID), lambda: {
        name: empty_figure(t(*title), t("inside.hint", "Press Trace (above) to see this for "
                                                       "your prompt."), 150)
        for name, title in HINTS.items()})


# ---------------------------------------------------------------------------------------------
# Token chips
def _chip(tid, text):
    shown = html.escape(text.replace(" ", "␣").replace("\n", "↵"))
    return f'<span class="chip">{shown}<small>{tid}</small></span>'


def chips_html(tr) -> str:
    """One chip per token; the byte tokens of a character that GPT-2 splits (Chinese, emoji:
    each chip shows a byte such as <0xE6>) sit in a group headed by that character."""
    ids, pieces, start = tr.token_ids[:MAX_CHIPS], [], 0
    for text, n in get_tokenizer().character_runs(ids):
        chips = "".join(map(_chip, ids[start:start + n], tr.tokens[start:start + n]))
        start += n
        if text is None:
            pieces.append(chips)
            continue
        title = html.escape(t("inside.chip_group", "one text, {n} tokens", n=n))
        pieces.append(f'<span class="chip-group" title="{title}">'
                      f'<b>{html.escape(text.strip() or "␣")}</b>{chips}</span>')
    more = len(tr.token_ids) - MAX_CHIPS
    tail = (f"<span>{t('inside.more_tokens', '… and {n} more tokens', n=more)}</span>"
            if more > 0 else "")
    return f'<div class="chips">{"".join(pieces)}{tail}</div>'


def summary(session) -> str:
    """The line under the chips: the trace's size, time and weights, and its notes."""
    traces = session.traces
    times = " · ".join(t("inside.traced_in", "traced in {ms:.0f} ms", ms=tr.seconds * 1000)
                       + (f" ({name})" if len(traces) > 1 else "")
                       for tr, name in zip(traces, NAMES))
    weights = " · ".join((f"{name}: " if len(traces) > 1 else "")
                         + say(m.key.source.caption) for m, name in zip(session.models, NAMES))
    notes = dict.fromkeys(n for tr in traces for n in tr.notes)
    return (t("inside.summary", "{n} tokens · {times} · weights: {weights}",
              n=len(traces[0].token_ids), times=times, weights=weights)
            + "".join(f" · {say(n)}" for n in notes))


# ---------------------------------------------------------------------------------------------
# The views
def _main_points(traces):
    """Before and after norm1; without LayerNorm, the stream entering and leaving each block."""
    if all("ln1_in" in tr.points for tr in traces):
        return ("ln1_in", "ln1_out")
    return ("resid_pre", "resid_post")


def views(session, layer, pair, heat_point, heat_stat) -> dict:
    traces = traces_of(session)
    names = comparison.names(session)
    layer = layer_in(traces[0].n_layers, layer, LAYER)
    points = HIST_PAIRS[as_choice(pair, Message("field.pair", "distribution"), HIST_PAIRS)]
    available = set(traces[0].points) | set(traces[0].final)
    if not set(points) <= available:
        raise ExplorerError("inside.no_norm", "This model has no LayerNorm "
                                              "(norm_placement='none'): choose the feed-forward "
                                              "or residual-stream comparison.")
    as_choice(heat_point, Message("field.heat_point", "heatmap: probe point"), HEAT_POINTS)
    if heat_point not in traces[0].points:
        raise ExplorerError("inside.point_missing", "Probe point {point!r} is not in this "
                            "trace; choose one of {points}.", point=heat_point,
                            points=", ".join(traces[0].points))
    as_choice(heat_stat, Message("field.heat_stat", "heatmap: statistic"), STAT_NAMES)
    choose(session, inside_layer=layer, pair=pair, heat_point=heat_point, heat_stat=heat_stat)
    return shared_views("inside", session, (layer, pair, heat_point, heat_stat, names), lambda: {
        "stats_plot": layer_stats_figure(traces, names, points=_main_points(traces)),
        "hist_plot": histogram_figure(traces, layer, points, names),
        "heat_plot": token_heatmap_figure(traces, heat_point, heat_stat, names)})


CHOICES = ("inside_layer", "pair", "heat_point", "heat_stat")   # the views' pickers


@handler(outputs=("chips", "trace_info", *VIEWS, "session"),
         inputs=("trace_prompt", "session", *CHOICES))
def run_trace(prompt, session, layer, pair, heat_point, heat_stat):
    """/trace: every model traces the prompt, one after the other."""
    trace_all(session, prompt)
    return {"chips": chips_html(session.traces[0]), "trace_info": summary(session),
            **views(session, layer, pair, heat_point, heat_stat), "session": session}


@handler(outputs=(*run_trace.outputs, refresh.trace_outputs), inputs=run_trace.inputs)
def trace_shown(prompt, session, layer, pair, heat_point, heat_stat):
    """The Trace button: /trace, and the other tabs' views of the new trace."""
    out = run_trace(prompt, session, layer, pair, heat_point, heat_stat)
    return {**refresh.render_of_trace(session), **out}


@handler(outputs=("hist_plot", "heat_plot"))
def inside_views(session, layer, pair, heat_point, heat_stat):
    """/inside_views: the distribution and heatmap of the last trace."""
    out = views(session, layer, pair, heat_point, heat_stat)
    return {"hist_plot": out["hist_plot"], "heat_plot": out["heat_plot"]}


@handler(outputs=("hist_plot", "heat_plot", "session"))
def choice_changed(session, layer, pair, heat_point, heat_stat):
    """A picker moved: /inside_views; with no trace yet, the choice kept, quietly."""
    if session.traces:
        return {**inside_views(session, layer, pair, heat_point, heat_stat), "session": session}
    choose(session, inside_layer=layer, pair=pair, heat_point=heat_point, heat_stat=heat_stat)
    return {"session": session}


@handler(outputs=("export_stats_file",))
def export_stats(session, fmt):
    """/export_stats: the last trace's statistics (with two models, B's rows after A's)."""
    traces = traces_of(session)
    fmt = as_choice(fmt, Message("field.export_format", "export format"), EXPORT_FORMATS)
    rows = stat_rows(traces, NAMES)
    tr = traces[0]
    if fmt == "JSON":
        path = write_export("activation_stats.json", json.dumps(
            {"tokens": tr.tokens, "token_ids": tr.token_ids, "config": tr.config,
             "stats": rows, "per_token": {p: {k: v.tolist() for k, v in s.per_token.items()}
                                          for p, s in tr.points.items()},
             # each model's head scores, (layers, heads) lists (explorer.probes.head_scores)
             "head_scores": {name: scores.as_dict() for name, scores
                             in zip(NAMES, heads.scores_of(session))}},
            indent=1, default=json_default))
    else:
        header = list(rows[0])
        path = write_export("activation_stats.csv",
                            csv_text([header] + [[r[h] for h in header] for r in rows]))
    return {"export_stats_file": path}


@refresh.renders(*RESULTS, "inside_layer", "pair", "heat_point", of_trace=True)
def render(session) -> dict:
    """The pickers fitted to the models; the last trace's views (A's, when B was removed), else
    the hints; no export of models that are gone."""
    out = {"inside_layer": fitted_layer(session, "inside_layer"), **fitted_probes(session)}
    if session.new_models:
        out["export_stats_file"] = gr.update(value=None, visible=False)
    if not session.traces or len(session.traces) != len(session.models):
        return {**out, "chips": "", "trace_info": "", **hints()}
    shown = session.view(Pickers)
    return {**out, "chips": chips_html(session.traces[0]), "trace_info": summary(session),
            **views(session, shown.inside_layer, shown.pair, shown.heat_point or "resid_pre",
                    shown.heat_stat)}


# ---------------------------------------------------------------------------------------------
def create(page):
    page.add(WEIGHTS_NOTE())
    with gr.Row(elem_id="trace_row"):
        page.add(Textbox(DEFAULT_PROMPT, label=label("inside.prompt", "Prompt"), lines=2,
                            max_lines=4, scale=4, elem_id="trace_prompt"))
        page.add(gr.Button(label("inside.trace", "Trace"), variant="primary", scale=1,
                           elem_id="trace_btn"))
    page.add(gr.HTML(elem_id="chips"))
    page.add(gr.Markdown(elem_id="trace_info"))
    shown = hints()
    page.add(gr.Plot(shown["stats_plot"], show_label=False,
                     label=label("inside.stats", "Before and after LayerNorm, layer by layer"),
                     elem_id="stats_plot"))
    with gr.Row():
        page.add(layer_slider("inside_layer", "inside.layer", "layer"))
        pairs = pair_choices(DEFAULT_CONFIG)
        # (twice as wide: its names are long, in Chinese at lecture mode's type too)
        page.add(gr.Dropdown(pairs, value=pairs[0][1], label=label("inside.pair",
                                                                   "distribution"),
                             scale=2, elem_id="pair"))
        page.add(gr.Dropdown(list(HEAT_POINTS), value="resid_pre",
                             label=label("inside.heat_point", "heatmap: probe point"),
                             elem_id="heat_point"))
        page.add(gr.Dropdown(list(STAT_NAMES), value="std",
                             label=label("inside.heat_stat", "heatmap: statistic"),
                             elem_id="heat_stat"))
    page.add(gr.Plot(shown["hist_plot"], show_label=False,
                     label=label("inside.hist", "Distribution"), elem_id="hist_plot"))
    page.add(gr.Plot(shown["heat_plot"], show_label=False,
                     label=label("inside.heat", "Per token and layer"), elem_id="heat_plot"))
    with gr.Row(equal_height=True):
        page.add(gr.Radio(list(EXPORT_FORMATS), value="CSV",
                          label=label("inside.export_format", "export format"),
                          elem_id="export_fmt"))
        page.add(gr.Button(label("inside.export", "Export statistics"),
                           elem_id="export_stats_btn"))
        page.add(gr.DownloadButton(label("inside.download", "Download"), visible=False,
                                   elem_id="export_stats_file"))
    gradients.create(page)
    page.add(gr.Button(visible=False, elem_id="inside_api_btn"))


def wire(page):
    choices = list(CHOICES)
    inspect = dict(concurrency_limit=2, concurrency_id="inspect")
    page.on(["trace_btn.click", "trace_prompt.submit"], trace_shown, api_visibility="private",
            show_progress_on=[page["trace_info"]], **inspect)
    page.on([f"{name}.input" for name in choices], choice_changed, ["session", *choices],
            api_visibility="private", **inspect)
    # For API clients (a hidden button); /inside_views without a trace says so
    page.on("inside_api_btn.click", run_trace, api_name="trace", **inspect)
    page.on("inside_api_btn.click", inside_views, ["session", *choices],
            api_name="inside_views", **inspect)
    exported = page.on("export_stats_btn.click", export_stats, ["session", "export_fmt"],
                       api_name="export_stats")
    page.then(exported, show_download("export_stats_file"), ["export_stats_file"],
              api_visibility="private", show_progress="hidden")
    gradients.wire(page)
