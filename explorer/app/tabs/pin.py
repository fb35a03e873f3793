"""Pinning a second model, on the Build tab: "Pin this model as B" keeps the session's model
beside the next one (A), and every tab shows both; "Unpin B" ends the comparison."""
from __future__ import annotations

import gradio as gr

from ...book.errors import ExplorerError
from .. import refresh
from ..handlers import handler
from ..i18n import label, say, t
from ..shared import CACHE, check_model

HINT = ("pin.hint", "**Compare two models** — pin this one as **B**, then build, load or train "
                    "another (**A**): every tab shows both.")


def pinned_owner(session_hash: str) -> str:
    """The cache's holder name for a session's pinned trained model."""
    return f"{session_hash}#pinned"


def _session_hash(request) -> str | None:
    return getattr(request, "session_hash", None) or None


def pin_note(session) -> str:
    if not session.comparing:
        return t(*HINT)
    key = session.models[1].key
    # Said of B alone (A is the status line's model): a new model A leaves this note as it is.
    return t("pin.note", "**B (pinned)** — {weights}, {layers} layers. Build, load or train "
                         "another model: it becomes **A**, and every tab shows A beside B (a "
                         "difference is A − B).", weights=say(key.source.caption),
             layers=key.config.n_layers)


@refresh.renders("pin_note")
def render(session) -> dict:
    return {"pin_note": pin_note(session)}


@handler(outputs=("session", *refresh.FIRST, refresh.all_outputs))
def pin_model(session, request: gr.Request = None):
    """/pin_model: the session's model pinned as B (A too, until another comes)."""
    check_model(session)
    a = session.models[0]
    owner = _session_hash(request)
    if owner:
        if a.key.source.kind == "trained":
            # No key rebuilds a trained model: hold it while it is pinned.
            model, _ = CACHE.get(a.key)
            CACHE.hold(pinned_owner(owner), a.key, model)
        else:
            CACHE.release(pinned_owner(owner))
    session.with_models((a, a))
    return {"session": session, **refresh.render_all(session)}


@handler(outputs=("session", *refresh.FIRST, refresh.all_outputs))
def unpin_model(session, request: gr.Request = None):
    """/unpin_model (and Remove B): the session keeps model A, and A's traces."""
    if not session.comparing:
        raise ExplorerError("pin.none", "No model is pinned.")
    release(_session_hash(request))
    session.without_b()
    return {"session": session, **refresh.render_all(session)}


def release(session_hash) -> None:
    """The page closed (or B unpinned): let go of a pinned trained model."""
    if session_hash:
        CACHE.release(pinned_owner(session_hash))


def create(page):
    with gr.Row(equal_height=True):
        page.add(gr.Button(label("pin.button", "Pin this model as B"), elem_id="pin_btn",
                           size="sm", min_width=120))
        page.add(gr.Button(label("pin.unpin", "Unpin B"), elem_id="unpin_btn", size="sm",
                           min_width=80))
    page.add(gr.Markdown(label(*HINT), elem_id="pin_note"))


def wire(page):
    # In the builds' queue: a pin right after a build sees that build's model.
    queue = dict(concurrency_limit=1, concurrency_id="build", show_progress="hidden")
    page.on("pin_btn.click", pin_model, ["session"], api_name="pin_model", **queue)
    page.on("unpin_btn.click", unpin_model, ["session"], api_name="unpin_model", **queue)
