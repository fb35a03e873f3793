"""Closed sessions are forgotten at once.

Gradio keeps, for every session it has seen, an entry holding a copy of the page's config
(about 300 KB for this app), and deletes only the entry's State values when the tab goes
away: the entries themselves stay until ``state_session_capacity`` (10,000) of them push the
oldest out, which is gigabytes on a busy Space. ``forget_closed_sessions`` removes the whole
entry when the browser tab (or API client) disconnects.
"""
from __future__ import annotations

import gradio as gr


def forget_session(demo: gr.Blocks, session_hash: str | None) -> bool:
    """Drop a session's State values (running their ``delete_callback``) and Gradio's entry
    for it. True if there was one. The shared models stay in the model cache."""
    holder = getattr(demo, "state_holder", None)   # set by Gradio when the app starts
    if holder is None or not session_hash or session_hash not in holder:
        return False
    holder.delete_state(session_hash)
    with holder.lock:
        holder.session_data.pop(session_hash, None)
        holder.time_last_used.pop(session_hash, None)
    return True


def forget_closed_sessions(demo: gr.Blocks, on_close=()) -> None:
    """On every disconnect (``demo.unload``), forget that session, after each of ``on_close``
    (``release(session_hash)``: its training job, its trained model) has let go of what it
    holds for it. One unload event: a second one would bring Gradio's entry for the session
    back after it was forgotten. A returning tab starts a fresh session and is asked to build
    again."""
    def forget_closed_session(request: gr.Request):
        session_hash = getattr(request, "session_hash", None)
        if session_hash:
            for release in on_close:
                release(session_hash)
        forget_session(demo, session_hash)

    demo.unload(forget_closed_session)
