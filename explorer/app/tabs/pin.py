"""Pinning a second model, on the Build tab: "Pin this model as B" keeps the session's model
beside the next one it builds, loads or trains (A), and every tab then shows both; "Unpin B"
ends the comparison. The state and the pair's memory rules are in ``explorer.app.pinning``."""
from __future__ import annotations

import gradio as gr

from .. import gpu, pinning
from ..i18n import t
from ..shared import CACHE, caption, friendly, session_weights_note, status_line
from .build import PIN_HINT, model_views


def _session(request) -> str | None:
    return getattr(request, "session_hash", None) or None


def _pin_seconds(arguments) -> float:
    return gpu.MIN_SECONDS


def pin_note(state) -> str:
    if not pinning.comparing(state):
        return t(PIN_HINT)
    key = state["pinned_key"]
    # Said of B alone (A is the status line's model): a new model A leaves this note as it is.
    return t("**B (pinned):** {weights}, {layers} layers. Build, load or train another model: "
             "it becomes **A**, and every tab shows A beside B (a difference is A − B).",
             weights=caption(key.source), layers=key.config.n_layers)


def _outputs(state):
    note = session_weights_note(state)
    return (status_line(state), *model_views(state), note, note, note, note, pin_note(state),
            state)


@friendly
@gpu.gpu_work(duration=_pin_seconds)
def pin_model(state, request: gr.Request = None):
    """Pin the session's model as B. Until another model is built, loaded or trained, A and B
    are the same model (every difference is zero)."""
    if not state or "key" not in state:
        raise gr.Error(t("No model yet: build one in the Build tab first."))
    key = state["key"]
    session = _session(request)
    if session:
        if key.source.kind == "trained":
            # No key rebuilds a trained model: hold it while it is pinned.
            model, _ = CACHE.get(key)
            CACHE.hold(pinning.pinned_owner(session), key, model)
        else:
            CACHE.release(pinning.pinned_owner(session))
    state = {"key": key, "status": state.get("status"), "pinned_key": key,
             "pinned_status": state.get("status")}
    return _outputs(state)


@friendly
def unpin_model(state, request: gr.Request = None):
    """End the comparison: the session keeps its model (A), without any results."""
    if not pinning.comparing(state):
        raise gr.Error(t("No model is pinned."))
    release(_session(request))
    return _outputs({"key": state["key"], "status": state.get("status")})


def release(session_hash):
    """The page closed (or B unpinned): let go of a pinned trained model."""
    if session_hash:
        CACHE.release(pinning.pinned_owner(session_hash))


@friendly
def note_of(state):
    """The pin's note again, in the page's new language."""
    return pin_note(state)


def create_event_handlers(build_tab, state, status, view, redrawn, weights_notes):
    """The pin buttons of the Build tab (``build_tab.pin``); their note follows ``redrawn``.
    Returns the two events (the other tabs clear their results after each, as after a
    build)."""
    note = build_tab.pin.note
    outputs = [status, build_tab.arch, build_tab.params_table, build_tab.params_plot,
               build_tab.memory, *weights_notes, note, state]
    # In the builds' queue (one at a time, in order): a pin right after a build sees that
    # build's model.
    queue = dict(concurrency_limit=1, concurrency_id="build")
    pinned = build_tab.pin.pin_btn.click(pin_model, [state, *view], outputs,
                                         api_name="pin_model", show_progress="hidden",
                                         **queue)
    unpinned = build_tab.pin.unpin_btn.click(unpin_model, [state, *view], outputs,
                                             api_name="unpin_model", show_progress="hidden",
                                             **queue)
    for event in redrawn:
        event.then(note_of, [state, *view], note, api_visibility="private",
                   show_progress="hidden")
    return pinned, unpinned
