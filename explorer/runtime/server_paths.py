"""Loading a checkpoint by its path on the server: the policy (only where the server listens on
the loopback alone, unless the operator says otherwise) and the one refusal that tells a visitor
nothing about the server's files."""
from __future__ import annotations

import os

from ..book.errors import ExplorerError, Message
from . import guard
from .checkpoints import WEIGHTS_SUFFIXES, file_source

# Only where the server listens on the loopback alone (its visitors are on this machine),
# unless the operator says otherwise. Reachable from outside (--host 0.0.0.0, the Docker image,
# --share, a Space), a path would let any visitor probe the server's files.
SERVER_PATHS_ENV = "GPT_EXPLORER_SERVER_PATHS"
MAX_PATH_CHARS = 1024
SERVER_PATH_REFUSED = Message(
    "weights.server_path_refused", "No checkpoint could be loaded from that path on the "
    "server: there is no file there that the explorer can read as a model.safetensors or the "
    "book's model.pth. Check the path, or upload the file (an upload says what is wrong with "
    "it).")


def on_a_space(environ=os.environ) -> bool:
    """Whether we run on a Hugging Face Space: the runtime sets ``SYSTEM=spaces`` (what Gradio
    itself reads) and ``SPACE_ID`` (the documented variable)."""
    return environ.get("SYSTEM") == "spaces" or bool(environ.get("SPACE_ID"))


def default_host(environ=os.environ) -> str:
    """``GRADIO_SERVER_NAME`` if set; else every interface on a Space (its proxy reaches the
    app from outside the container, and Gradio itself never binds 0.0.0.0 there), else the
    loopback only."""
    return environ.get("GRADIO_SERVER_NAME") or ("0.0.0.0" if on_a_space(environ)
                                                  else "127.0.0.1")


def server_paths_allowed(environ=os.environ) -> bool:
    value = environ.get(SERVER_PATHS_ENV, "").strip().lower()
    if value:
        return value in ("1", "true", "yes", "on")
    return not on_a_space(environ) and not guard.reachable_from_outside()


def server_checkpoint(path, dtype, budget_bytes: int):
    """A checkpoint by its path on the server. Every refusal is the same message, whatever
    the file is (missing, unreadable, a folder, not a checkpoint): a visitor learns nothing
    about the server's files from it. The reason goes to the server log."""
    if path is None or (isinstance(path, str) and not path.strip()):
        raise ExplorerError("weights.no_file", "From a file: give the path of a "
                            "model.safetensors (or the book's model.pth) on the server, or "
                            "upload the file.")
    if not isinstance(path, str):
        raise ExplorerError("weights.path_text", "The weights path must be text (got "
                                                 "{kind}).", kind=type(path).__name__)
    if not server_paths_allowed():
        raise ExplorerError("weights.paths_off", "Loading a path on the server is switched "
                                                 "off here; upload the file instead.")
    path = path.strip()
    reason = "not a path to a checkpoint file"
    if len(path) <= MAX_PATH_CHARS and path.lower().endswith(WEIGHTS_SUFFIXES):
        try:
            return file_source(path, None, budget_bytes=budget_bytes, dtype=dtype)
        except ValueError as refused:
            reason = str(refused)
    refusal = ExplorerError(SERVER_PATH_REFUSED.id, SERVER_PATH_REFUSED.text)
    refusal.add_note(f"server path: {reason}")   # for the server log only
    raise refusal
