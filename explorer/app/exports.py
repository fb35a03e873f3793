"""Files the user downloads (statistics, attention matrices, model files).

CSV comes from the ``csv`` module, so a token that holds a comma, a quote or a newline stays
one field. Each file is written straight into Gradio's file cache (the folder Gradio serves
files from, and cleans: ``delete_cache`` in ``layout.build_app``), not into a folder of its
own that nothing would remove; the same content is stored once. Never a path built from user
text: the names are the app's own."""
from __future__ import annotations

import csv
import io
import os
import tempfile

import gradio as gr
import numpy as np

from .gradio_private import cache_folder, save_to_cache
from .handlers import handler
from .i18n import t


def fresh_folder():
    """A new folder inside Gradio's file cache, for files a library writes itself (a model's
    model.safetensors + config.json): served from there without a copy, and removed with the
    rest of the cache (``delete_cache``)."""
    cache = cache_folder()
    os.makedirs(cache, exist_ok=True)
    return tempfile.mkdtemp(prefix="model_", dir=cache)


def write_export(name, text):
    return save_to_cache(text.encode("utf-8"), name)


def csv_text(rows):
    """``rows`` (lists of cells) as CSV text (RFC 4180: quoted where needed, quotes doubled,
    lines ended by CRLF)."""
    buffer = io.StringIO()
    csv.writer(buffer).writerows(rows)
    return buffer.getvalue()


def json_default(value):
    if isinstance(value, (np.floating, np.integer)):
        return value.item()
    return str(value)


def show_download(name: str):
    """A handler that turns the download button ``name``, whose value an export just set to a
    file, into one that names the file and its size. (A second step: an update returned by the
    export itself would reach an API client as the update, not the file.)"""
    @handler(outputs=(name,), name=f"show_{name}")
    def shown(path):
        if not path:
            return {name: gr.update(value=None, visible=False)}
        size = os.path.getsize(path)
        size = f"{size / 1024:.1f} KB" if size >= 1024 else t("export.bytes", "{n} bytes", n=size)
        return {name: gr.update(visible=True, value=path, label=t(
            "export.download", "Download {name} ({size})", name=os.path.basename(path),
            size=size))}
    return shown
