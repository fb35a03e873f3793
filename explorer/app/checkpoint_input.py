"""A checkpoint as the page hands it over (an upload, or a path on the server), and the
Build button's progress reports from the threads that load it."""
from __future__ import annotations

import contextvars
import os
import threading

from ..book.errors import ExplorerError
from ..runtime import server_paths
from ..runtime.server_paths import WEIGHTS_SUFFIXES
from .i18n import say
from .shared import CACHE
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
    """``server_paths.server_checkpoint`` within the model cache's memory budget."""
    return server_paths.server_checkpoint(path, dtype, CACHE.budget_bytes)
