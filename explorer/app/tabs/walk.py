"""The guided walk of the chapter's diagram, in tab 1: a click on a stage of the architecture
view (``gptExplorer.walk`` in page.js makes it the diagram's ``select`` event) shows the
tensor's shape and statistics there for the session's prompt, with the book's section; a
block's stages for the block picked beside the card. ``/stage_details`` is the same card for
API clients. The statistics come from model A's trace of the prompt: the session's, else one
of the walk's own (no attention, no logit lens), kept for the next clicks."""
from __future__ import annotations

from dataclasses import dataclass

import gradio as gr

from ...book.errors import Message
from ...book.stages import STAGE_NAMES, STAGES_BY_NAME
from ..results import shared_trace
from ...probes.stages import stage_details
from .. import refresh
from ..handlers import handler
from ..i18n import label, t
from ..textbox import Textbox
from ..inputs import as_choice, as_int, selected
from ...probes.budget import check_trace_size
from ...probes.prompts import prompt_ids
from ..pickers import choose, fitted_layer
from ..plots.walk import stage_html, walk_hint
from ..prompts import prompt_of
from ..session import View
from ..shared import CACHE, DEFAULT_CONFIG, model_a

HINT = ("walk.hint", "Click a stage of the diagram: its shape and statistics for the Inside "
                     "tab's prompt.")
STAGE = Message("field.stage", "stage")
BLOCK = Message("field.block", "block")


def _trace_for(prompt, session):
    """A trace of ``prompt`` by model A: the session's, the walk's last one, or a new one."""
    if session.traces and session.prompt == prompt:
        traced = session.traces[0]
    elif session.walk and session.walk[0] == prompt:
        return session.walk[1]
    else:
        model = model_a(session)
        ids = prompt_ids(prompt, model)
        if len(ids) <= model.cfg.context_length:  # longer: trace() says to shorten it
            check_trace_size(model.cfg, len(ids), CACHE.budget_bytes)
        traced = shared_trace(session.keys[0], model, ids, attention_layers=None, lens=None,
                              entropy=False)
    session.walk = (prompt, traced)
    return traced


@dataclass(frozen=True)
class Stage(View):
    """The stage (and block) whose card is shown (new models, or B removed: none)."""

    chosen: tuple | None = None

    KEPT_BY_NEW_MODELS = KEPT_WITHOUT_B = False


def _card(stage, block, traced):
    info = STAGES_BY_NAME[stage]
    block = as_int(block, BLOCK) if info.scope == "block" else None
    return stage_html(stage_details(traced, stage, block), traced.config)


@handler(outputs=("walk_card", "session"))
def show_stage(stage, block, prompt, session):
    """/stage_details: the card of ``stage`` (``book.stages.STAGE_NAMES``) in ``block`` for
    ``prompt``."""
    stage = as_choice(stage, STAGE, STAGE_NAMES)
    as_int(block, BLOCK)
    card = _card(stage, block, _trace_for(prompt, session))
    session.show(Stage, chosen=(stage, block))
    return {"walk_card": card, "session": session}


@handler(outputs=("walk_stage", "walk_card", "session", "walk_block"))
def stage_clicked(block, session, evt: gr.EventData):
    """A stage of the diagram clicked (the event's value): its card for the session's prompt."""
    stage = as_choice(selected(evt, STAGE), STAGE, STAGE_NAMES)
    return {"walk_stage": stage, **show_stage(stage, block, prompt_of(session), session),
            "walk_block": gr.update(visible=STAGES_BY_NAME[stage].scope == "block")}


@handler(outputs=("walk_card", "session"))
def block_changed(stage, block, session):
    """The block picker moved: the chosen stage again, if it is a block's (quiet otherwise)."""
    choose(session, walk_block=block)
    if stage not in STAGE_NAMES or STAGES_BY_NAME[stage].scope != "block":
        return {}
    return show_stage(stage, block, prompt_of(session), session)


@refresh.renders("walk_card", "walk_stage", "walk_block")
def render(session) -> dict:
    """The card of the stage chosen, from the trace it showed, else the hint; new models: no
    stage, and a block picker fitted to them (hidden until a block's stage is chosen)."""
    if session.new_models:
        return {"walk_card": walk_hint(t(*HINT)), "walk_stage": "",
                "walk_block": fitted_layer(session, "walk_block", visible=False)}
    chosen = session.view(Stage).chosen
    if chosen is None or not session.walk:
        return {"walk_card": walk_hint(t(*HINT))}
    return {"walk_card": _card(*chosen, session.walk[1])}


# ---------------------------------------------------------------------------------------------
def create(page):
    """The card and the block picker, under the diagram (``plots.walk.STAGE_CSS`` keeps them
    in view while it scrolls)."""
    with gr.Column(elem_id="walk"):
        with gr.Row(equal_height=False):
            with gr.Column(scale=5, min_width=320):
                page.add(gr.HTML(walk_hint(t(*HINT)), elem_id="walk_card"))
            # shown for a block's stages only: a model's stages have no block
            page.add(gr.Slider(0, DEFAULT_CONFIG.n_layers - 1, value=0, step=1,
                               label=label("walk.block", "block"), elem_id="walk_block",
                               scale=1, min_width=180, visible=False))
        page.add(Textbox("", visible=False, elem_id="walk_stage"))
        # /stage_details's block: a number without the page slider's range (which follows
        # the page's builds, not an API client's)
        page.add(gr.Number(0, precision=0, visible=False, elem_id="walk_api_block"))
        page.add(Textbox("", label=label("inside.prompt", "Prompt"), visible=False,
                         elem_id="walk_api_prompt"))
        page.add(gr.Button(visible=False, elem_id="walk_api_btn"))


def wire(page):
    inspect = dict(concurrency_limit=2, concurrency_id="inspect")
    page.on("arch.select", stage_clicked, ["walk_block", "session"],
            api_visibility="private", show_progress_on=[page["walk_card"]], **inspect)
    page.on("walk_block.change", block_changed,
            ["walk_stage", "walk_block", "session"], api_visibility="private",
            show_progress_on=[page["walk_card"]], **inspect)
    # (the API's prompt: a box of its own, never shown; the page's clicks read the session's)
    page.on("walk_api_btn.click", show_stage,
            ["walk_stage", "walk_api_block", "walk_api_prompt", "session"],
            api_name="stage_details", **inspect)
