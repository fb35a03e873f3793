"""On a ZeroGPU Space, the page opened outside huggingface.co's frame says who pays for its GPU
calls (``runtime.placement.pool_note``)."""
from __future__ import annotations

import gradio as gr

from ..runtime.placement import pool_note
from .handlers import handler
from .i18n import say


@handler(outputs=("zerogpu_note",))
def zerogpu_note(session=None, request: gr.Request = None):
    """The note in the session's language, or none; drawn at load and on a toggle
    (``layout.redrawn``)."""
    note = pool_note(request)
    if note is None:
        return {"zerogpu_note": gr.update(visible=False)}
    return {"zerogpu_note": gr.update(value=say(note), visible=True)}
