"""Export of any model (random, trained or loaded) as ``model.safetensors`` + ``config.json``,
in the book's layout or Hugging Face's GPT-2 one; either comes back in with ``load_file``."""
from __future__ import annotations

import json
import os
from pathlib import Path

import torch
from safetensors.torch import save_file

from ..book.errors import ExplorerError
from ..book.load_weights import book_to_gpt2, gpt2_hf_config, is_gpt2_shaped
from ..book.model import GPTModel
from .file_config import CONFIG_FILE, FORMAT, METADATA_KEY, WEIGHTS_FILE
from .sources import WeightsSource


def export_model(model: GPTModel, folder, hf_layout: bool = False,
                 source: WeightsSource | None = None) -> list[Path]:
    """Write ``model`` (random, trained or loaded) to ``folder`` as ``model.safetensors`` and
    ``config.json``. The config holds the book's keys and the explorer's knobs; with
    ``hf_layout`` the tensors have Hugging Face's GPT-2 names and the config its keys too, so
    ``GPT2LMHeadModel.from_pretrained(folder)`` loads it (GPT-2-shaped models only). Either
    comes back in with ``load_file``. Returns the files written."""
    if not isinstance(model, GPTModel):
        raise ExplorerError("export.not_a_model", "export_model saves a GPTModel (got {kind}).",
                            kind=type(model).__name__)
    cfg = model.cfg
    if hf_layout and not is_gpt2_shaped(cfg):
        raise ExplorerError("export.not_gpt2_shaped", "Hugging Face's GPT-2 layout needs "
                            "norm_placement 'pre', shortcuts on and pos_encoding 'learned'; "
                            "export this model in the book's layout (hf_layout=False) instead.")
    if not isinstance(folder, (str, os.PathLike)) or not str(folder):
        raise ExplorerError("export.folder_not_text", "Give the folder to export to as text (got "
                            "{folder!r}).", folder=folder)
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise ExplorerError("export.folder_is_a_file", "{folder} is a file; choose a folder to "
                            "export into.", folder=folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ExplorerError("export.cannot_make_folder", "Could not make the folder {folder}: "
                            "{reason}.", folder=folder, reason=exc.strerror or exc) from None
    state = {n: t.detach().to("cpu", torch.float32) for n, t in model.state_dict().items()}
    book_config = {**cfg.to_dict(), "format": FORMAT,
                   "layout": "gpt2" if hf_layout else "book"}
    if source is not None:
        # (a file's own note, such as "trained 150 steps on …": not "from file …" around it)
        book_config["weights_source"] = (source.note if source.kind == "file" and source.note
                                         else source.caption)
    if hf_layout:
        tensors = book_to_gpt2(state, cfg)
        config = {**gpt2_hf_config(cfg), **book_config}
    else:
        if cfg.tie_weights:
            state.pop("out_head.weight")   # the token embedding; tied again on import
        tensors = {n: t.contiguous() for n, t in state.items()}
        config = book_config
    weights = folder / WEIGHTS_FILE
    config_path = folder / CONFIG_FILE
    try:
        # safetensors writes its metadata table in a random order (a Rust HashMap): one
        # entry keeps the book layout's file the same bytes every time (the same sha256, so
        # one copy in the cache); transformers needs "format" in the Hugging Face layout.
        metadata = {METADATA_KEY: json.dumps(book_config)}
        if hf_layout:
            metadata["format"] = "pt"
        save_file(tensors, str(weights), metadata=metadata)
        config_path.write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    except Exception as exc:  # noqa: BLE001 - OSError, or safetensors' own error on a full disk
        raise ExplorerError("export.cannot_write", "Could not write into {folder}: {reason}. "
                            "Free some disk space or choose another folder.", folder=folder,
                            reason=exc.strerror or exc) from None
    return [weights, config_path]
