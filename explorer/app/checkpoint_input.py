"""A checkpoint as the page hands it over (an upload, or a path on the server), and the
Build button's progress reports from the threads that load it."""
from __future__ import annotations

import contextvars
import os
import threading

from ..book.errors import ExplorerError
from ..runtime.checkpoints import file_source
from .i18n import say
from .shared import CACHE, MAX_PATH_CHARS, SERVER_PATH_REFUSED, server_paths_allowed

WEIGHTS_SUFFIXES = (".safetensors", ".pth", ".pt")   # what load_file reads
CONFIG_SUFFIX = ".json"
IGNORED_UPLOADS = ("generation_config.json",)        # save_pretrained's decoding defaults


def reporter(progress):
    """``progress(fraction, text)`` callable from any thread. gr.Progress finds its event
    through context variables, which the threads of the hub's download do not have (their
    reports were silently dropped): each report runs in a copy of the handler's context."""
    context, lock = contextvars.copy_context(), threading.Lock()

    def report(fraction, desc=None):   # gr.Progress's own form: progress(0.3, "text") too
        with lock:   # a context can be entered by one thread at a time
            context.run(lambda: progress(fraction, desc=desc and say(desc)))
    return report


def uploaded(upload):
    """The weights file and its config.json (if any) among the uploaded files."""
    files = upload if isinstance(upload, (list, tuple)) else [upload]
    files = [getattr(f, "path", None) or (f.get("path") if isinstance(f, dict) else f)
             for f in files]
    if not all(isinstance(f, str) and f for f in files):
        raise ExplorerError("upload.unreadable", "The upload could not be read; upload the "
                                                 "file again.")
    files = [f for f in files if os.path.basename(f).lower() not in IGNORED_UPLOADS]
    weights = [f for f in files if f.lower().endswith(WEIGHTS_SUFFIXES)]
    configs = [f for f in files if f.lower().endswith(CONFIG_SUFFIX)]
    others = [os.path.basename(f) for f in files if f not in weights + configs]
    if others or len(weights) != 1 or len(configs) > 1:
        raise ExplorerError("upload.which", "Upload one weights file ({suffixes}), and if you "
                            "have it its config.json (got {names}).",
                            suffixes=", ".join(WEIGHTS_SUFFIXES),
                            names=", ".join(os.path.basename(f) for f in files))
    return weights[0], configs[0] if configs else None


def server_checkpoint(path, dtype):
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
            return file_source(path, None, budget_bytes=CACHE.budget_bytes, dtype=dtype)
        except ValueError as refused:
            reason = str(refused)
    refusal = ExplorerError(SERVER_PATH_REFUSED.id, SERVER_PATH_REFUSED.text)
    refusal.add_note(f"server path: {reason}")   # for the server log only
    raise refusal
