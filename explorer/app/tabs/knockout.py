"""Tab 7, Knock out: what breaks if a part is taken out of the model? **Intervene** makes model
B = model A with parts knocked out (``explorer.probes.interventions``: A's weights, the
interventions acting while B runs), and every tab shows A beside it. **Which parts matter**
maps what each part costs (``knockout_map``); a click on a cell makes that knock-out B."""
from __future__ import annotations

import gradio as gr

from ...book.errors import ExplorerError, Message
from ...probes import Interventions
from ...probes.interventions import (KINDS, KINDS_BY_NAME, MAX_INTERVENTION_CHARS,
                                     MODEL_PARTS, Intervention, split_checked)
from .. import comparison, gradio_private, refresh
from ..handlers import handler
from ..i18n import label, say, t
from ..inputs import as_choice, as_flag, as_int, selected
from ..page import on_load_js
from ..pickers import fitted_layer, layer_slider
from ..plots.knockout import METRICS, knockout_map_html
from ..prompts import trace_all
from ..session import DEFAULT_PROMPT, AttentionShown, Session
from ..shared import check_model
from ..textbox import Textbox
from . import pin
from .knockout_map import (TEXTS, MapView, map_html, metric_changed, parts_map, stopped,
                           text_chosen)

TITLE = ("tab.knockout", "7 · Knock out")
ID = "knockout"
# The builder's kinds (patches need a clean prompt: the Patching tab makes them)
KIND_NAMES = tuple(k.kind for k in KINDS if not k.patch)


def _form(kind) -> str:
    """A kind's string form, l and h for block and head ("zero trf_blocks[l].att head h")."""
    one = Intervention(kind.kind, None if kind.part in MODEL_PARTS else 0,
                       (0,) if kind.heads else ())
    return str(Interventions((one,))).replace("trf_blocks[0]", "trf_blocks[l]").replace(
        "head 0", "head h")


def kind_choices() -> list[tuple[str, str]]:
    """What each part does, in the page's language, then its string form."""
    return [(t(*k.text, part=k.part, block="trf_blocks[l]", heads="h") + " — " + _form(k),
             k.kind) for k in map(KINDS_BY_NAME.get, KIND_NAMES)]


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
    parts joined by ';'); the session's prompt traced again by both."""
    interventions = Interventions.parse(spec)
    prompt = session.prompt
    comparison.intervened(session, interventions)
    if prompt is not None:
        trace_all(session, prompt)
        session.show(AttentionShown, on=True)            # (the pickers' layer and head)
    return {"session": session, **refresh.render_all(session)}     # (the box: B's, tidied)


@handler(outputs=("session", *refresh.FIRST, refresh.all_outputs))
def cell_clicked(session, evt: gr.EventData):
    """A cell of the map clicked: its knock-out (the event's value) becomes model B. The page
    numbers its clicks: the map says the last one applied (the page shows those queued)."""
    data = gradio_private.event_data(evt) if evt is not None else None
    click = data.get("click") if isinstance(data, dict) else None
    if isinstance(click, int) and not isinstance(click, bool):
        session.show(MapView, applied=click)     # (applied or refused: no longer queued)
    return intervene(selected(evt, Message("field.knock_map", "the knock-out map")), session)


@handler(outputs=("knock_spec",))
def add_part(spec, kind, layer, every_block, heads, session):
    """The builder's part added to the interventions box."""
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
    current = Interventions.parse(spec or "")
    both = str(Interventions((*current, one)).check(session.models[0].key.config))
    split_checked(both)                      # the box never holds what Intervene refuses
    return {"knock_spec": both}


@refresh.renders("knock_note", "knock_map", "knock_layer", "knock_spec", "knock_text",
                 "knock_metric", "knock_kind")
def render(session) -> dict:
    """The note and the map; new models: the box holds B's interventions (none: empty, so that
    one typed for another model is not applied to this one)."""
    out = {"knock_note": note(session), "knock_map": map_html(session),
           "knock_layer": fitted_layer(session, "knock_layer"),
           "knock_text": gr.update(choices=[(t(*v), k) for k, v in TEXTS.items()]),
           "knock_metric": gr.update(choices=[(t(*v), k) for k, v in METRICS.items()]),
           "knock_kind": gr.update(choices=kind_choices())}
    if session.new_models:
        out["knock_spec"] = session.b_interventions
    return out


# ---------------------------------------------------------------------------------------------
def create(page):
    page.add(gr.Markdown(note(Session()), elem_id="knock_note"))
    # The map first (what a lecturer shows), then the builder of an intervention.
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
    page.add(gr.HTML(knockout_map_html(None), elem_id="knock_map", js_on_load=on_load_js("knock")))
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
    page.on("knock_text.change", text_chosen, ["knock_text", "session"],
            api_visibility="private", show_progress="hidden")
    page.on("knock_metric.change", metric_changed, ["knock_metric", "session"],
            api_visibility="private", show_progress="hidden")
