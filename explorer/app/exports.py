"""Files the user downloads (statistics, attention matrices): written to a fresh temporary
folder, which Gradio may serve; never a path built from user text."""
from __future__ import annotations

import os
import tempfile

import numpy as np


def write_export(name, text):
    folder = tempfile.mkdtemp(prefix="gpt_explorer_")
    path = os.path.join(folder, name)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    return path


def csv_cell(value):
    text = str(value)
    return f'"{text}"' if "," in text else text


def json_default(value):
    if isinstance(value, (np.floating, np.integer)):
        return value.item()
    return str(value)
