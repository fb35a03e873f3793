"""Tab 7, Knock out: what breaks if a part is taken out of the model now? **Intervene** makes
model B = model A with parts knocked out (heads zeroed or mean-ablated, a sub-layer skipped, a
LayerNorm replaced by the identity or frozen, a shortcut removed, GELU swapped for ReLU, the
positional embedding dropped), and every tab shows A beside it, as for any model B. The
weights are A's: the interventions act while B runs (``explorer.probes.intervening``).

**Which parts matter** knocks out every head and every part of every block in turn, for the
prompt or the training story, and shows what each costs; a click on a cell makes that
knock-out model B (``explorer.probes.importance``)."""
from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass, replace

import gradio as gr

from ...book.errors import ExplorerError, Message
from ...book.tokenizer import get_tokenizer
from ...probes import Interventions
from ...probes.attribution import TOP, estimate_sent, exact_tables, take_exact
from ...probes.interventions import (KINDS, KINDS_BY_NAME, MAX_INTERVENTION_CHARS,
                                     MODEL_PARTS, Intervention, split_checked)
from ...runtime import offload
from ...runtime.placement import Work
from ...runtime.training_setup import default_corpus
from .. import gradio_private, refresh
from ..handlers import handler
from ..i18n import label, say, t
from ..textbox import Textbox
from . import attention, inside, pin
from ..inputs import (TRACE_MEMORY_SHARE, as_choice, as_flag, as_int, prompt_ids,
                      selected)
from ..pickers import choose, fitted_layer, layer_slider
from ..results import where_noted
from ..plots.knockout import METRICS, knockout_map_html
from ..session import Made, Model, View
from ..shared import CACHE, DEFAULT_PROMPT, check_model, model_a, session_of

TITLE = ("tab.knockout", "7 · Knock out")
ID = "knockout"
TEXTS = {"the prompt": ("knock.text_prompt", "the prompt"),
         "the training story": ("knock.text_story", "the training story (its first tokens)")}
STORY_TOKENS = 64
# The choices in the string form's words (code, as the book names the parts: not translated)
KIND_NAMES = {k.kind: f"{k.verb} {k.part}" + (" · heads" if k.heads else "") for k in KINDS}


def _form(kind) -> str:
    """The string form of a kind, with l and h for the block and head: what the
    interventions box takes ("zero trf_blocks[l].att head h")."""
    one = Intervention(kind.kind, None if kind.part in MODEL_PARTS else 0,
                       (0,) if kind.heads else ())
    return str(Interventions((one,))).replace("trf_blocks[0]", "trf_blocks[l]").replace(
        "head 0", "head h")


def kind_choices() -> list[tuple[str, str]]:
    """The parts to knock out: what each does, in the page's language, then its string form
    ("att head h zeroed — zero trf_blocks[l].att head h")."""
    return [(t(*k.text, part=k.part, block="trf_blocks[l]", heads="h") + " — " + _form(k),
             k.kind) for k in KINDS]


def intervened(session, interventions: Interventions) -> None:
    """Model B becomes model A run with ``interventions`` (A's weights, not a copy); the map
    of A stays."""
    check_model(session)
    a = session.models[0]
    interventions = interventions.check(a.key.config)
    if not interventions:
        raise ExplorerError("knock.nothing", "Nothing to knock out: add a part (or write one, "
                                             "such as 'zero trf_blocks[0].att head 1').")
    key = replace(a.key, interventions=interventions)
    session.with_models((a, Model(key, Made("intervened", Message(
        "knock.b_what", "A with {what}", what=interventions.describe())))))


def spec_of(text) -> Interventions:
    if not isinstance(text, str):
        raise ExplorerError("knock.spec_not_text", "The interventions must be text, such as "
                                                   "'zero trf_blocks[3].att head 5'.")
    return Interventions.parse(text)


def note(session) -> str:
    if len(session.models) == 2 and session.models[1].key.interventions:
        spec = session.models[1].key.interventions
        return t("knock.note", "**B** = A with {what}. Every tab shows A beside B (a "
                               "difference is A − B). `{spec}`", what=say(spec.describe()),
                 spec=str(spec))
    return t("knock.none", "No intervention yet: choose a part and press **Intervene**, or "
                           "click a cell of the map below.")


@handler(outputs=("session", *refresh.FIRST, refresh.all_outputs))
def intervene(spec, session):
    """/intervene: model B = model A with the interventions of ``spec`` (the string form,
    parts joined by ';'). The prompt the session had traced is traced again, by both, for the
    Inside and Attention tabs; the Attention tab moves to the block after the first
    knocked-out one: the blocks before it (and its own attention) are unchanged."""
    session = session_of(session)
    interventions = spec_of(spec)
    prompt = session.prompt
    intervened(session, interventions)
    layers = [i.layer for i in interventions if i.layer is not None]
    if layers:
        choose(session, att_layer=min(layers) + 1)        # (fitted to the model's layers)
    if prompt is not None:
        inside.trace_all(session, prompt)
        session.show(attention.Shown, on=True)           # (the pickers' layer and head)
    return {"session": session, **refresh.render_all(session)}     # (the box: B's, tidied)


@handler(outputs=("session", *refresh.FIRST, refresh.all_outputs))
def cell_clicked(session, evt: gr.EventData):
    """A cell of the map was clicked: its knock-out (the event's value) becomes model B. The
    page numbers its clicks (``click``): the map says the last one applied, and the page
    shows those still queued."""
    data = gradio_private.event_data(evt) if evt is not None else None
    click = data.get("click") if isinstance(data, dict) else None
    if isinstance(click, int) and not isinstance(click, bool):
        session = session_of(session)
        session.show(MapView, applied=click)     # (applied or refused: no longer queued)
    return intervene.__wrapped__(selected(evt, Message("field.knock_map", "the knock-out map")),
                                 session)


@handler(outputs=("knock_spec",))
def add_part(spec, kind, layer, every_block, heads, session):
    """The builder's part added to the interventions box."""
    session = session_of(session)
    check_model(session)
    kind = KINDS_BY_NAME[as_choice(kind, Message("field.knock_kind", "part"), KIND_NAMES)]
    every = as_flag(every_block, Message("field.every_block", "every block"))
    # (the heads box matters for the head kinds only, the block for a block's parts only)
    heads = str(heads or "") if kind.heads else ""
    if len(heads) > MAX_INTERVENTION_CHARS:      # before reading a head of it
        raise ExplorerError("knock.heads_too_long", "The heads box holds {n:,} characters; "
                            "write at most {most:,}.", n=len(heads), most=MAX_INTERVENTION_CHARS)
    chosen = [as_int(h.strip(), Message("field.head", "head")) for h in heads.split(",")
              if h.strip()]
    whole_model = kind.part in MODEL_PARTS
    one = Intervention(kind.kind, None if every or whole_model else
                       as_int(layer, Message("field.layer", "layer")), tuple(chosen))
    current = spec_of(spec or "")
    both = str(Interventions((*current, one)).check(session.models[0].key.config))
    split_checked(both)                      # the box never holds what Intervene refuses
    return {"knock_spec": both}


def story_text(cfg=None) -> str:
    """The training story's first ``STORY_TOKENS`` tokens (fewer for a short context), as text
    for the box above the map."""
    ids = get_tokenizer().encode(default_corpus().text[:4 * STORY_TOKENS * 8])
    most = STORY_TOKENS if cfg is None else min(STORY_TOKENS, cfg.context_length)
    return get_tokenizer().decode(ids[:most])


@handler(outputs=("knock_prompt",))
def text_chosen(text, prompt, session):
    """The text radio fills the box above the map: the Inside tab's prompt, or the story."""
    session = session_of(session)
    text = as_choice(text, Message("field.knock_text", "text"), TEXTS)
    if text == "the prompt":
        return {"knock_prompt": prompt}
    # (the model's context from its key: nothing is built for a radio button)
    return {"knock_prompt": story_text(session.models[0].key.config if session.models
                                       else None)}


# The sessions whose map is being made -> set when the session leaves: its map then stops at
# the next batch (it would hold a worker, and the next session's map, for nobody).
_LEFT: dict[str, threading.Event] = {}
UPDATE_S = 0.25            # the stream sends the map at most this often (and at its end)


def release(session_hash) -> None:
    """The page closed: a map it is making stops."""
    left = _LEFT.get(session_hash)
    if left is not None:
        left.set()


def _status(state: str, result, **fields) -> tuple:
    """The progress line's state, kept with the map so that it is said in the page's language
    when drawn."""
    return (state, {"exact": result.n_exact, "cells": len(result.cells()), **fields})


def status_text(status) -> str:
    if not status:
        return ""
    state, f = status
    where = " · ".join(say(note) for note in f.get("where", ()))
    return _state_text(state, f) + (f" ({where})" if where else "")


def _state_text(state, f) -> str:
    if state == "estimating":
        return t("knock.estimating", "Estimating every cell from one backward pass …")
    if state == "refining":
        return t("knock.refining", "Computing exact values, largest estimate first: {exact} "
                                   "of {cells} cells exact …", **f)
    if state == "top_done":
        return t("knock.top_done", "The estimate's top {top} and the cells it cannot estimate "
                                   "are exact ({exact} of {cells} cells, {seconds:.1f} s). For "
                                   "the rest, tick <b>exact everywhere</b> and press the button "
                                   "again.", **f)
    if state == "stopped":
        return t("knock.stopped", "Stopped: {exact} of {cells} cells exact; the others are "
                                  "estimates (≈).", **f)
    return t("knock.all_exact", "Every cell exact ({seconds:.1f} s for the exact values).", **f)


def _chunks(result, everywhere: bool):
    """The cells to make exact, in the order they come: the estimate's top ``TOP`` and the
    exact-only cells one at a time (each turns exact as it comes); then, for exact everywhere
    (asked for, or a model too sure of its next tokens for the estimate), the rest one batch
    per block and table (as the exact map batches them)."""
    order = result.order()
    first = TOP + sum(1 for c in order if math.isnan(result.estimate_of(c)))
    for cell in order[:first]:
        yield [cell]
    if not (everywhere or result.saturated):
        return
    groups: dict[tuple, list] = {}
    for cell in order[first:]:
        groups.setdefault(cell[:2], []).append(cell)
    yield from groups.values()                   # (in the order of their largest estimate)


@dataclass(frozen=True)
class MapView(View):
    """The knock-out map of model A (kept while B changes: B is A knocked out, or a pinned
    model), and the last of the page's numbered clicks that was applied."""

    result: object = None           # explorer.probes' KnockoutResult
    metric: str = "loss"
    weights_key: object = None      # model A's weights, which the map is of
    status: tuple | None = None     # its progress: (kind, fields)
    applied: int = 0


@handler(outputs=("knock_map", "knock_numbers", "session"))
def parts_map(prompt, metric, everywhere, session, request: gr.Request = None):
    """/knockout_map: every head and every part of every block of model A, for the text
    ``prompt``: first estimated at once (one forward and one backward pass), drawn; then
    exact values, largest estimate first, each cell turning exact as it comes: the estimate's
    top 10 and the cells it cannot estimate, or with ``everywhere`` every cell (the exact map).
    ``metric`` chooses what the map colours. A stream: each update is the map so far."""
    session = session_of(session)
    metric = as_choice(metric, Message("field.knock_metric", "metric"), METRICS)
    everywhere = as_flag(everywhere, Message("field.knock_everywhere", "exact everywhere"))
    model = model_a(session)
    ids = prompt_ids(prompt, model)[-model.cfg.context_length:]
    key = session.models[0].key.weights_key
    owner = getattr(request, "session_hash", None) or object()   # none: an in-process call
    left = _LEFT.setdefault(owner, threading.Event())
    budget = CACHE.budget_bytes * TRACE_MEMORY_SHARE
    try:
        shown = session.view(MapView)
        if (shown.result is not None and shown.weights_key == key
                and shown.result.token_ids == ids):
            result = shown.result                # the same map: go on where it stopped
            where = shown.status[1].get("where", []) if shown.status else []
        else:
            # about a forward and a backward pass, and the passes of the exact-only cells
            result, ran = offload.compute(key, model, estimate_sent, (ids,),
                                          {"max_bytes": budget},
                                          Work.forward(model.cfg, len(ids), passes=3))
            where = where_noted(ran)
        session.show(MapView, result=result, metric=metric, weights_key=key,
                     status=_status("refining", result, where=where))
        yield _update(session, result)
        sent = time.perf_counter()
        for chunk in _chunks(result, everywhere):
            if left.is_set() or not _going_on(session, result):
                return             # the page left, Stop was pressed, or another map began
            # each cell: the rest of the model from its block, at most a pass
            tables, ran = offload.compute(key, model, exact_tables, (result, chunk),
                                          {"max_bytes": budget},
                                          Work.forward(model.cfg, len(ids), passes=len(chunk)))
            take_exact(result, tables)
            where = where_noted(ran)
            if not _going_on(session, result):
                return             # (the cell stays exact: the next redraw shows it)
            session.show(MapView, status=_status("refining", result, where=where))
            if time.perf_counter() - sent >= UPDATE_S:
                sent = time.perf_counter()
                yield _update(session, result)
        done = ("all_exact" if result.n_exact == len(result.cells()) else "top_done")
        session.show(MapView, status=_status(done, result, top=TOP,
                                             seconds=result.exact_seconds, where=where))
        yield _update(session, result)
    finally:
        _LEFT.pop(owner, None)


def _going_on(session, result) -> bool:
    shown = session.view(MapView)
    return shown.result is result and shown.status[0] != "stopped"


def _update(session, result) -> dict:
    return {"knock_map": map_html(session), "knock_numbers": numbers(result),
            "session": session}


@handler(outputs=("knock_map",))
def stopped(session):
    """Stop: the map keeps the cells made exact so far; the stream makes no more."""
    session = session_of(session)
    shown = session.view(MapView)
    if shown.status and shown.status[0] == "refining":
        session.show(MapView, status=_status("stopped", shown.result))
    return {"knock_map": map_html(session)}


def numbers(result) -> dict:
    """The map as plain numbers (for the API): exact values (None where not computed), the
    estimates (None where there is none), and which cells are exact."""
    def grid(a):
        return None if a is None else [[None if v != v else float(v) for v in row] for row in a]
    return {"token_ids": list(result.token_ids), "clean_loss": result.clean_loss,
            "clean_prob": result.clean_prob, "layers": list(result.layer_labels),
            "parts": list(result.parts), "head_loss": grid(result.head_loss),
            "head_prob": grid(result.head_prob), "part_loss": grid(result.part_loss),
            "part_prob": grid(result.part_prob), "head_estimate": grid(result.head_estimate),
            "part_estimate": grid(result.part_estimate), "noise_floor": result.floor,
            "exact_cells": result.n_exact, "cells": len(result.cells())}


def b_interventions(session) -> str:
    """Model B's interventions in the string form ("" if B is none, or not a knock-out)."""
    b = session.models[1].key.interventions if len(session.models) == 2 else None
    return str(b) if b else ""


def map_html(session) -> str:
    """Model A's map, if there is one, with model B's knock-out outlined."""
    shown = shown_map(session)
    if shown is None:
        return knockout_map_html(None, applied=session.view(MapView).applied)
    return knockout_map_html(shown.result, shown.metric,
                             current=b_interventions(session) or None,
                             status=status_text(shown.status), applied=shown.applied)


def shown_map(session):
    """The map's view if the map was made for the session's model A (a new B keeps it: B is
    A knocked out, or a pinned model); None, and the map forgotten, for another A."""
    shown = session.view(MapView)
    if shown.result is None:
        return None
    if not session.models or session.models[0].key.weights_key != shown.weights_key:
        session.show(MapView, result=None, weights_key=None, status=None)
        return None
    return shown


@handler(outputs=("knock_map",))
def metric_changed(metric, session):
    session = session_of(session)
    shown = shown_map(session)
    if shown is None:
        return {}
    metric = as_choice(metric, Message("field.knock_metric", "metric"), METRICS)
    session.show(MapView, metric=metric)
    return {"knock_map": map_html(session)}


@refresh.renders("knock_note", "knock_map", "knock_layer", "knock_spec", "knock_text",
                 "knock_metric", "knock_kind")
def render(session) -> dict:
    """The note and the map; new models: the interventions box says B's interventions (none:
    empty, so that a knock-out typed for another model is not applied to this one)."""
    out = {"knock_note": note(session), "knock_map": map_html(session),
           "knock_layer": fitted_layer(session, "knock_layer"),
           "knock_text": gr.update(choices=[(t(*v), k) for k, v in TEXTS.items()]),
           "knock_metric": gr.update(choices=[(t(*v), k) for k, v in METRICS.items()]),
           "knock_kind": gr.update(choices=kind_choices())}
    if session.new_models:
        out["knock_spec"] = b_interventions(session)
    return out


# ---------------------------------------------------------------------------------------------
# A click (or Enter / Space) on a cell: the select event, numbered; every click is sent (the
# event queues them) and its cell striped and listed in the queue line until the server says it
# was applied (``data-applied`` on the map: the last click's number) or a minute passes (a
# refused click has its message). The outline is the server's: B's cell only.
KNOCK_JS = """
const pending = [];                       // [number, spec, when] of clicks not yet applied
let sent = 0;
const paint = () => {
  const root = element.querySelector('[data-applied]');
  const applied = root ? Number(root.getAttribute('data-applied')) : 0;
  const now = Date.now();
  while (pending.length && (pending[0][0] <= applied || now - pending[0][2] > 60000)) {
    pending.shift();
  }
  element.querySelectorAll('td.knock-queued').forEach((e) => {
    if (!pending.some((p) => p[1] === e.getAttribute('data-knock'))) {
      e.classList.remove('knock-queued');
    }
  });
  for (const [, spec] of pending) {
    for (const cell of element.querySelectorAll('td[data-knock]')) {
      if (cell.getAttribute('data-knock') === spec && !cell.classList.contains('knock-queued')) {
        cell.classList.add('knock-queued');
      }
    }
  }
  const line = element.querySelector('.knock-queue');
  if (line) {
    const text = pending.length ? (line.getAttribute('data-queued') || '{specs}')
      .replace('{specs}', pending.map((p) => p[1]).join(' → ')) : '';
    if (line.textContent !== text) line.textContent = text;
  }
};
const choose = (target) => {
  const cell = target && target.closest ? target.closest('td[data-knock]') : null;
  if (!cell || !element.contains(cell)) return false;
  sent += 1;
  const spec = cell.getAttribute('data-knock');
  pending.push([sent, spec, Date.now()]);
  paint();
  const all = Array.from(element.querySelectorAll('td[data-knock]'));
  trigger('select', {value: spec, index: all.indexOf(cell), selected: true, click: sent});
  return true;
};
element.addEventListener('click', (event) => { choose(event.target); });
element.addEventListener('keydown', (event) => {
  if ((event.key === 'Enter' || event.key === ' ') && choose(event.target)) {
    event.preventDefault();   // Space would scroll the page
  }
});
new MutationObserver(paint).observe(element, {childList: true, subtree: true});
"""


def create(page):
    page.add(gr.Markdown(note(session_of(None)), elem_id="knock_note"))
    # The map first (what a lecturer shows), the text it measures above it, then the builder
    # of an intervention.
    with gr.Row():
        page.add(gr.Radio([(t(*v), k) for k, v in TEXTS.items()], value="the prompt",
                          label=label("knock.text", "text"), elem_id="knock_text"))
        page.add(gr.Radio([(t(*v), k) for k, v in METRICS.items()], value="loss",
                          label=label("knock.metric", "the map shows"), elem_id="knock_metric"))
        page.add(gr.Checkbox(False, label=label("knock.everywhere", "exact everywhere"),
                             min_width=120, elem_id="knock_everywhere"))
        page.add(gr.Button(label("knock.map", "Which parts matter"), variant="primary",
                           scale=0, min_width=160, elem_id="knock_map_btn"))
        page.add(gr.Button(label("knock.stop", "Stop"), variant="stop", scale=0,
                           min_width=96, elem_id="knock_stop_btn"))   # (停止 on one line)
    page.add(Textbox(DEFAULT_PROMPT, label=label("knock.prompt", "the text the map "
                                                                    "measures (edit it here)"),
                        lines=1, max_lines=3, elem_id="knock_prompt"))
    page.add(gr.HTML(knockout_map_html(None), elem_id="knock_map", js_on_load=KNOCK_JS))
    page.add(gr.JSON(visible=False, elem_id="knock_numbers"))
    with gr.Row():
        page.add(gr.Dropdown(kind_choices(), value="zero_heads",
                             label=label("knock.kind", "part to knock out"), scale=3,
                             elem_id="knock_kind"))
        page.add(layer_slider("knock_layer", "knock.layer", "block"))
        page.add(gr.Checkbox(False, label=label("knock.every", "every block"), min_width=100,
                             elem_id="knock_every"))
        page.add(Textbox("0", label=label("knock.heads", "heads (e.g. 1,5)"), min_width=100,
                            elem_id="knock_heads"))
        page.add(gr.Button(label("knock.add", "Add"), scale=0, min_width=84,
                           elem_id="knock_add_btn"))
    with gr.Row():
        page.add(Textbox("", label=label("knock.spec", "interventions (parts joined by ;)"),
                            placeholder="zero trf_blocks[0].att head 1; identity "
                                        "trf_blocks[1].norm2", scale=4, elem_id="knock_spec"))
        page.add(gr.Button(label("knock.intervene", "Intervene"), variant="primary", scale=0,
                           min_width=110, elem_id="knock_btn"))
        page.add(gr.Button(label("knock.remove", "Remove B"), scale=0, min_width=100,
                           elem_id="knock_remove_btn"))


def wire(page):
    # (progress, and a refusal's error badge, on the tab's own note: the status line above
    # keeps saying which models A and B are)
    queue = dict(concurrency_limit=1, concurrency_id="build",
                 show_progress_on=[page["knock_note"]])
    page.on("knock_btn.click", intervene, ["knock_spec", "session"], api_name="intervene",
            **queue)
    # every click is queued (none dropped while one is being applied)
    page.on("knock_map.select", cell_clicked, ["session"], api_visibility="private",
            trigger_mode="multiple", **queue)
    page.on("knock_remove_btn.click", pin.unpin_model, ["session"], api_visibility="private",
            **queue)
    page.on("knock_add_btn.click", add_part, ["knock_spec", "knock_kind", "knock_layer",
                                              "knock_every", "knock_heads", "session"],
            api_visibility="private", show_progress="hidden")
    mapping = page.on(["knock_map_btn.click", "knock_prompt.submit"], parts_map,
                      ["knock_prompt", "knock_metric", "knock_everywhere", "session"],
                      api_name="knockout_map", concurrency_limit=1, concurrency_id="knockout",
                      show_progress="hidden")      # (its own progress line: the map stays)
    stop = page["knock_stop_btn"].click(None, None, None, cancels=[mapping],
                                        api_visibility="private")
    page.then(stop, stopped, ["session"], success=False, api_visibility="private")
    page.then(mapping, stopped, ["session"], on="failure", api_visibility="private")
    page.on("knock_text.change", text_chosen, ["knock_text", "trace_prompt", "session"],
            api_visibility="private", show_progress="hidden")
    page.on("knock_metric.change", metric_changed, ["knock_metric", "session"],
            api_visibility="private", show_progress="hidden")
