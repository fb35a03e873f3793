"""Tab 7, Knock out: what breaks if a part is taken out of the model now? **Intervene** makes
model B = model A with parts knocked out (heads zeroed or mean-ablated, a sub-layer skipped, a
LayerNorm replaced by the identity or frozen, a shortcut removed, GELU swapped for ReLU, the
positional embedding dropped), and every tab shows A beside it, as for any model B. The
weights are A's: the interventions act while B runs (``explorer.probes.intervening``).

**Which parts matter** knocks out every head and every part of every block in turn, for the
prompt or the training story, and shows what each costs; a click on a cell makes that
knock-out model B (``explorer.probes.importance``)."""
from __future__ import annotations

import threading
from dataclasses import replace

import gradio as gr

from ...book.errors import ExplorerError, Message
from ...book.tokenizer import get_tokenizer
from ...probes import Interventions, importance
from ...probes.interventions import (KINDS, KINDS_BY_NAME, MAX_INTERVENTION_CHARS,
                                     MODEL_PARTS, Intervention, split_checked)
from ...runtime.training_setup import default_corpus
from .. import gpu, refresh
from ..handlers import handler
from ..i18n import label, say, t
from ..inputs import (TRACE_MEMORY_SHARE, as_choice, as_flag, as_int, prompt_ids,
                      selected)
from ..pickers import fitted_layer, layer_slider
from ..plots.knockout import METRICS, knockout_map_html
from ..session import Made, Model
from ..shared import CACHE, check_model, model_a, session_of

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


@handler(outputs=("session", *refresh.FIRST, refresh.new_model_outputs))
def intervene(spec, session):
    """/intervene: model B = model A with the interventions of ``spec`` (the string form,
    parts joined by ';'). The Attention tab moves to the block after the first knocked-out
    one: the blocks before it (and its own attention) are unchanged."""
    session = session_of(session)
    interventions = spec_of(spec)
    intervened(session, interventions)
    layers = [i.layer for i in interventions if i.layer is not None]
    if layers:
        session.shown["att_layer"] = min(layers) + 1      # (fitted to the model's layers)
    return {"session": session, **refresh.new_model(session)}     # (the box: B's, tidied)


@handler(outputs=("session", *refresh.FIRST, refresh.new_model_outputs))
def cell_clicked(session, evt: gr.EventData):
    """A cell of the map was clicked: its knock-out (the event's value) becomes model B."""
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


def _map_seconds(arguments) -> float:
    return gpu.MAX_SECONDS


def _text_ids(text, prompt, model):
    text = as_choice(text, Message("field.knock_text", "text"), TEXTS)
    if text == "the prompt":
        return prompt_ids(prompt, model)
    ids = get_tokenizer().encode(default_corpus().text[:4 * STORY_TOKENS * 8])
    return ids[:min(STORY_TOKENS, model.cfg.context_length)]


# The sessions whose map is being made -> set when the session leaves: its map then stops at
# the next batch (it would hold a worker, and the next session's map, for nobody).
_LEFT: dict[str, threading.Event] = {}


def release(session_hash) -> None:
    """The page closed: a map it is making stops."""
    left = _LEFT.get(session_hash)
    if left is not None:
        left.set()


@handler(outputs=("knock_map", "knock_numbers", "session"))
@gpu.gpu_work(duration=_map_seconds)
def parts_map(text, prompt, metric, session, progress=gr.Progress(),
              request: gr.Request = None):
    """/knockout_map: every head and every part of every block of model A knocked out in turn,
    for ``text`` ("the prompt" or "the training story"): the change in loss and in the
    probability of the actual next tokens (``metric`` chooses which the map colours)."""
    session = session_of(session)
    metric = as_choice(metric, Message("field.knock_metric", "metric"), METRICS)
    model = model_a(session)
    ids = _text_ids(text, prompt, model)[-model.cfg.context_length:]
    progress(0, desc=t("knock.progress", "Knocking out every part"))
    owner = getattr(request, "session_hash", None) or object()   # none: an in-process call
    left = _LEFT.setdefault(owner, threading.Event())
    try:
        result = importance(model, ids, max_bytes=CACHE.budget_bytes * TRACE_MEMORY_SHARE,
                            progress=lambda done, total: progress(done / total, desc=t(
                                "knock.progress", "Knocking out every part")),
                            stop=left.is_set)
    finally:
        _LEFT.pop(owner, None)
    session.shown["knockout"] = (result, metric, session.models[0].key.weights_key)
    return {"knock_map": map_html(session), "knock_numbers": numbers(result),
            "session": session}


def numbers(result) -> dict:
    """The map as plain numbers (for the API)."""
    def grid(a):
        return None if a is None else [[None if v != v else float(v) for v in row] for row in a]
    return {"token_ids": list(result.token_ids), "clean_loss": result.clean_loss,
            "clean_prob": result.clean_prob, "layers": list(result.layer_labels),
            "parts": list(result.parts), "head_loss": grid(result.head_loss),
            "head_prob": grid(result.head_prob), "part_loss": grid(result.part_loss),
            "part_prob": grid(result.part_prob)}


def b_interventions(session) -> str:
    """Model B's interventions in the string form ("" if B is none, or not a knock-out)."""
    b = session.models[1].key.interventions if len(session.models) == 2 else None
    return str(b) if b else ""


def map_html(session) -> str:
    """Model A's map, if there is one, with model B's knock-out outlined."""
    shown = shown_map(session)
    if shown is None:
        return knockout_map_html(None)
    return knockout_map_html(*shown, current=b_interventions(session) or None)


def shown_map(session):
    """(the map, its metric) if the map was made for the session's model A (a new B keeps
    it: B is A knocked out, or a pinned model); None, and forgotten, for another A."""
    shown = session.shown.get("knockout")
    if shown is None:
        return None
    if not session.models or session.models[0].key.weights_key != shown[2]:
        session.shown.pop("knockout")
        return None
    return shown[:2]


@handler(outputs=("knock_map",))
def metric_changed(metric, session):
    session = session_of(session)
    shown = shown_map(session)
    if shown is None:
        return {}
    metric = as_choice(metric, Message("field.knock_metric", "metric"), METRICS)
    session.shown["knockout"] = (shown[0], metric, session.models[0].key.weights_key)
    return {"knock_map": map_html(session)}


@refresh.on_new_model("knock_note", "knock_map", "knock_layer", "knock_spec")
def _new_model(session) -> dict:
    """The note and the interventions box say B's interventions (none: empty, so that a
    knock-out typed for another model is not applied to this one)."""
    return {"knock_note": note(session), "knock_map": map_html(session),
            "knock_layer": fitted_layer(session, "knock_layer"),
            "knock_spec": b_interventions(session)}


@refresh.on_redraw("knock_note", "knock_map", "knock_text", "knock_metric", "knock_kind")
def _redraw(session) -> dict:
    return {"knock_note": note(session),
            "knock_map": map_html(session),
            "knock_text": gr.update(choices=[(t(*v), k) for k, v in TEXTS.items()]),
            "knock_metric": gr.update(choices=[(t(*v), k) for k, v in METRICS.items()]),
            "knock_kind": gr.update(choices=kind_choices())}


# ---------------------------------------------------------------------------------------------
KNOCK_JS = ("(function start(tries) { if (window.gptExplorer && gptExplorer.knock) "
            "gptExplorer.knock(element, trigger); else if (tries > 0) "
            "setTimeout(() => start(tries - 1), 50); })(200);")


def create(page):
    page.add(gr.Markdown(note(session_of(None)), elem_id="knock_note"))
    # The map first (what a lecturer shows), then the builder of an intervention.
    with gr.Row():
        page.add(gr.Radio([(t(*v), k) for k, v in TEXTS.items()], value="the prompt",
                          label=label("knock.text", "text"), elem_id="knock_text"))
        page.add(gr.Radio([(t(*v), k) for k, v in METRICS.items()], value="loss",
                          label=label("knock.metric", "the map shows"), elem_id="knock_metric"))
        page.add(gr.Button(label("knock.map", "Which parts matter"), variant="primary",
                           scale=0, min_width=160, elem_id="knock_map_btn"))
    page.add(gr.HTML(knockout_map_html(None), elem_id="knock_map", js_on_load=KNOCK_JS))
    page.add(gr.JSON(visible=False, elem_id="knock_numbers"))
    with gr.Row():
        page.add(gr.Dropdown(kind_choices(), value="zero_heads",
                             label=label("knock.kind", "part to knock out"), scale=3,
                             elem_id="knock_kind"))
        page.add(layer_slider("knock_layer", "knock.layer", "block"))
        page.add(gr.Checkbox(False, label=label("knock.every", "every block"), min_width=100,
                             elem_id="knock_every"))
        page.add(gr.Textbox("0", label=label("knock.heads", "heads (e.g. 1,5)"), min_width=100,
                            elem_id="knock_heads"))
        page.add(gr.Button(label("knock.add", "Add"), scale=0, min_width=84,
                           elem_id="knock_add_btn"))
    with gr.Row():
        page.add(gr.Textbox("", label=label("knock.spec", "interventions (parts joined by ;)"),
                            placeholder="zero trf_blocks[0].att head 1; identity "
                                        "trf_blocks[1].norm2", scale=4, elem_id="knock_spec"))
        page.add(gr.Button(label("knock.intervene", "Intervene"), variant="primary", scale=0,
                           min_width=110, elem_id="knock_btn"))
        page.add(gr.Button(label("knock.remove", "Remove B"), scale=0, min_width=100,
                           elem_id="knock_remove_btn"))


def wire(page):
    from . import attention, inside, pin
    trace_choices = ["inside_layer", "pair", "heat_point", "heat_stat"]
    # (progress, and a refusal's error badge, on the tab's own note: the status line above
    # keeps saying which models A and B are)
    queue = dict(concurrency_limit=1, concurrency_id="build",
                 show_progress_on=[page["knock_note"]])
    # B changed: the Inside tab traces the prompt again for both, and the attention follows.
    for event in (page.on("knock_btn.click", intervene, ["knock_spec", "session"],
                          api_name="intervene", **queue),
                  page.on("knock_map.select", cell_clicked, ["session"],
                          api_visibility="private", **queue)):
        traced = page.then(event, inside.run_trace, ["trace_prompt", "session",
                                                      *trace_choices],
                           api_visibility="private", show_progress="hidden")
        page.then(traced, attention.attention_views, ["session", "att_layer", "att_head"],
                  api_visibility="private", show_progress="hidden")
    page.on("knock_remove_btn.click", pin.unpin_model, ["session"], api_visibility="private",
            **queue)
    page.on("knock_add_btn.click", add_part, ["knock_spec", "knock_kind", "knock_layer",
                                              "knock_every", "knock_heads", "session"],
            api_visibility="private", show_progress="hidden")
    page.on("knock_map_btn.click", parts_map, ["knock_text", "trace_prompt", "knock_metric",
                                               "session"], api_name="knockout_map",
            concurrency_limit=1, concurrency_id="knockout", show_progress="full")
    page.on("knock_metric.change", metric_changed, ["knock_metric", "session"],
            api_visibility="private", show_progress="hidden")
