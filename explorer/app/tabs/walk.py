"""The guided walk of the chapter's diagram, in tab 1: click a stage of the architecture view
(or focus it and press Enter) to see, for the current prompt (the Inside tab's), the tensor's
shape (batch, tokens, channels) and its statistics there, with the book's section. A block's
stages are shown for the block picked beside the card.

The diagram's script (``WALK_JS``, run by the gr.HTML when it loads) turns a click on an
element with ``data-stage`` into the HTML component's ``select`` event, whose data names the
stage: the server gets the stage with the event, and no hidden widget has to be typed into.
``/stage_details`` is the same view for API clients (stage, block, prompt).

The statistics come from a trace of the prompt: the session's own trace when it is of this
prompt (Inside → Trace), else the walk traces it once, lightly (no attention, no logit lens),
and keeps that trace for the next clicks. Only that trace is GPU work (``_walk_trace``): a
click served from a trace asks ZeroGPU for nothing.
"""
from __future__ import annotations

from types import SimpleNamespace

import gradio as gr

from ...book.stages import STAGE_NAMES, STAGES_BY_NAME
from ...probes import trace
from ...probes.stages import stage_details
from .. import gpu
from ..i18n import label, t
from ..plots.walk import stage_html, walk_hint
from ..shared import (DEFAULT_CONFIG, as_choice, as_int, check_trace_size, friendly,
                      layer_picker_update, model_of, prompt_ids)

HINT = "Click a stage of the diagram: its shape and statistics for the Inside tab's prompt."
# The diagram's part of the walk: a click, or Enter/Space on a focused stage, becomes the
# gr.HTML's select event with the stage's name (page.js, gptExplorer.walk). The page's script
# may start after the diagram has loaded: wait for it (a few seconds at most).
WALK_JS = ("(function start(tries) { if (window.gptExplorer && gptExplorer.walk) "
           "gptExplorer.walk(element, trigger); else if (tries > 0) "
           "setTimeout(() => start(tries - 1), 50); })(200);")


@gpu.gpu_work(duration=gpu.forward_seconds)
def _walk_trace(prompt, state):
    """The prompt's trace for the walk: the statistics at every probe point, without the
    attention weights or the logit lens (what a stage shows needs neither)."""
    model = model_of(state)
    ids = prompt_ids(prompt, model)
    if len(ids) <= model.cfg.context_length:  # longer: trace() says to shorten it
        check_trace_size(model.cfg, len(ids))
    return trace(model, ids, attention_layers=None, lens=None, entropy=False)


def _trace_for(prompt, state):
    """(a trace of ``prompt`` by the session's model, the state that keeps it): the session's
    trace of this prompt, the walk's last one, or a new one."""
    if not state or "key" not in state:
        raise gr.Error(t("No model yet: build one in the Build tab first."))
    if not isinstance(prompt, str):
        raise gr.Error(t("The prompt must be text."))
    if state.get("trace") is not None and state.get("prompt") == prompt:
        traced = state["trace"]
    elif state.get("walk") and state["walk"]["prompt"] == prompt:
        return state["walk"]["trace"], state
    else:
        traced = _walk_trace(prompt, state)
    return traced, {**state, "walk": {"prompt": prompt, "trace": traced}}


def _card(stage, block, traced):
    info = STAGES_BY_NAME[stage]
    block = as_int(block, "block") if info.scope == "block" else None
    return stage_html(stage_details(traced, stage, block), traced.config)


@friendly
def show_stage(stage, block, prompt, state):
    """/stage_details: the card of ``stage`` (``book.stages.STAGE_NAMES``) in ``block`` for
    ``prompt``, traced now if the session has no trace of it."""
    stage = as_choice(stage, "stage", STAGE_NAMES)
    as_int(block, "block")
    traced, state = _trace_for(prompt, state)
    return _card(stage, block, traced), state


@friendly
def stage_clicked(block, prompt, state, evt: gr.SelectData):
    """A stage of the diagram was clicked (its name is the event's value)."""
    stage = evt.value if isinstance(evt.value, str) else None
    stage = as_choice(stage, "stage", STAGE_NAMES)
    card, state = show_stage.__wrapped__(stage, block, prompt, state)
    return stage, card, state, gr.update(visible=STAGES_BY_NAME[stage].scope == "block")


@friendly
def block_changed(stage, block, prompt, state):
    """The block picker moved: the chosen stage again, if it is a block's (quiet otherwise)."""
    if stage not in STAGE_NAMES or STAGES_BY_NAME[stage].scope != "block":
        return gr.skip(), gr.skip()
    return show_stage.__wrapped__(stage, block, prompt, state)


@friendly
def redraw(stage, block, state):
    """The card again (language, lecture mode), from the trace it showed; no new trace."""
    walked = (state or {}).get("walk")
    if stage not in STAGE_NAMES or not walked:
        return walk_hint(t(HINT))
    try:
        return _card(stage, block, walked["trace"])
    except (ValueError, gr.Error):   # a block picker beyond a new model: the hint again
        return walk_hint(t(HINT))


@friendly
def cleared(state):
    """A new model: the hint, no stage chosen, and a block picker that fits the model (hidden
    until a block's stage is chosen)."""
    blocks = ({**layer_picker_update(state["key"].config), "visible": False}
              if state and "key" in state else gr.skip())
    return walk_hint(t(HINT)), "", blocks


# ---------------------------------------------------------------------------------------------
def create_ui():
    """The walk's controls and card, placed above the diagram (they stay in view while it
    scrolls, ``plots.walk.STAGE_CSS``)."""
    with gr.Column(elem_id="walk"):
        with gr.Row(equal_height=False):
            with gr.Column(scale=5, min_width=320):
                card = gr.HTML(walk_hint(HINT), elem_id="walk_card", js_on_load=None)
            # shown for a block's stages only: a model's stages have no block
            block = gr.Slider(0, DEFAULT_CONFIG.n_layers - 1, value=0, step=1,
                              label=label("block"), elem_id="walk_block", scale=1,
                              min_width=180, visible=False)
        stage = gr.Textbox("", visible=False, elem_id="walk_stage")
        # /stage_details's block: a number without the page slider's range (which follows
        # the page's builds, not an API client's)
        api_block = gr.Number(0, precision=0, visible=False)
        api_button = gr.Button(visible=False)
    return SimpleNamespace(card=card, block=block, stage=stage, api_block=api_block,
                           api_button=api_button)


def create_event_handlers(ui, arch, prompt, state, view, redrawn):
    """``arch``: the Build tab's diagram (a gr.HTML with ``js_on_load=WALK_JS``); ``prompt``:
    the Inside tab's prompt; ``view``/``redrawn`` as for every tab."""
    arch.select(stage_clicked, [ui.block, prompt, state, *view],
                [ui.stage, ui.card, state, ui.block],
                api_visibility="private", concurrency_limit=2, concurrency_id="inspect",
                show_progress_on=[ui.card])
    ui.block.change(block_changed, [ui.stage, ui.block, prompt, state, *view],
                    [ui.card, state], api_visibility="private", concurrency_limit=2,
                    concurrency_id="inspect", show_progress_on=[ui.card])
    ui.api_button.click(show_stage, [ui.stage, ui.api_block, prompt, state, *view],
                        [ui.card, state], api_name="stage_details", concurrency_limit=2,
                        concurrency_id="inspect")
    for event in redrawn:
        event.then(redraw, [ui.stage, ui.block, state, *view], ui.card,
                   api_visibility="private", show_progress="hidden")
