"""On a ZeroGPU Space, the page opened outside huggingface.co's frame says who pays for its GPU
calls. ZeroGPU charges the visitor named by the ``X-IP-Token`` header, which Gradio's page
sends only when huggingface.co frames it; at the Space's direct ``*.hf.space`` address there is
none, and every call is paid from the Space's own shared pool, at the lowest priority."""
from __future__ import annotations

import os

import gradio as gr

from ..book.errors import Message
from ..runtime.placement import on_zero_gpu
from .handlers import handler
from .i18n import say

TOKEN_HEADER = "x-ip-token"      # spaces/zero/client.py's TOKEN_HEADER, as Starlette reads it


def space_link(environ=os.environ) -> str:
    """The Space's page on huggingface.co (``SPACE_ID`` is "owner/name" on every Space)."""
    space = environ.get("SPACE_ID", "")
    return f"https://huggingface.co/spaces/{space}" if space else "https://huggingface.co/spaces"


def pool_note(request, environ=os.environ) -> Message | None:
    """The note for a page whose request came without an X-IP-Token on ZeroGPU; else None."""
    if not on_zero_gpu(environ) or request is None:
        return None
    headers = getattr(request, "headers", None) or {}
    if headers.get(TOKEN_HEADER):
        return None
    return Message("zerogpu.pool_note", "**This page is open at the Space's own address, "
                   "outside huggingface.co.** ZeroGPU cannot tell its visitors apart here: "
                   "everyone's GPU calls are paid from the Space's shared pool, at the lowest "
                   "priority. For a GPU quota of your own, open it on Hugging Face instead: "
                   "{link}", link=space_link(environ))


@handler(outputs=("zerogpu_note",))
def zerogpu_note(session=None, request: gr.Request = None):
    """The note, in the session's language (hidden where it does not apply); drawn when the
    page loads, and again with every view when a toggle changes (``layout.redrawn``)."""
    note = pool_note(request)
    if note is None:
        return {"zerogpu_note": gr.update(visible=False)}
    return {"zerogpu_note": gr.update(value=say(note), visible=True)}
