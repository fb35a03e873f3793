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

import numpy as np
from gradio import processing_utils, utils


def fresh_folder():
    """A new folder inside Gradio's file cache, for files a library writes itself (a model's
    model.safetensors + config.json): served from there without a copy, and removed with the
    rest of the cache (``delete_cache``)."""
    cache = utils.get_upload_folder()
    os.makedirs(cache, exist_ok=True)
    return tempfile.mkdtemp(prefix="model_", dir=cache)


def write_export(name, text):
    return processing_utils.save_bytes_to_cache(text.encode("utf-8"), name,
                                                cache_dir=utils.get_upload_folder())


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
