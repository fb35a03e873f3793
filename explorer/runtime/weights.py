"""Weights in and out: OpenAI's GPT-2 from the Hugging Face hub, checkpoints on disk
(safetensors in the book's names or Hugging Face's, the book's chapter-5 ``.pth`` files), and
export of any model.

Every file is read as tensors only: safetensors, or ``torch.load(weights_only=True)``, which
refuses any pickle that would run code. Each input is checked where it is first understood
(the header, the shapes, the budget) before a byte of weights is allocated, and refused with a
message that says what to do.

For the UI:
- ``load_pretrained(size, progress=...)``, ``load_file(path)`` -> (model, source);
- ``pretrained_source`` / ``file_source`` -> (config, source), to key the model cache;
- ``export_model(model, folder, hf_layout=...)``;
- ``WeightsSource.caption`` says where the weights came from.
"""
from __future__ import annotations

import difflib
import hashlib
import json
import math
import os
import stat
import struct
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import save_file

from ..book.config import GPTConfig
from ..book.fast import fuse
from ..book.load_weights import (GPT2_SIZES, book_shapes, book_to_gpt2, check_hf_config,
                                 config_from_hf,
                                 describe_differences, empty_model, assign_weights,
                                 gpt2_config, gpt2_hf_config, gpt2_shapes, gpt2_to_book,
                                 is_book_buffer, is_gpt2_buffer, is_gpt2_shaped, strip_prefix)
from ..book.model import GPTModel
from .build import resolve_device, resolve_dtype
from .cache import (BUDGET_ENV, PRETRAINED_NAMES, ModelCache, WeightsSource, default_budget_bytes,
                    model_bytes)

__all__ = ["WeightsSource", "PRETRAINED", "pretrained_source", "file_source", "inspect_file",
           "materialize", "load_pretrained", "load_file", "export_model", "sha256_file",
           "store_dir"]

# OpenAI's four GPT-2 sizes on the hub (safetensors, float32).
PRETRAINED = {"gpt2-small": "openai-community/gpt2", "gpt2-medium": "openai-community/gpt2-medium",
              "gpt2-large": "openai-community/gpt2-large", "gpt2-xl": "openai-community/gpt2-xl"}
WEIGHTS_FILE = "model.safetensors"
CONFIG_FILE = "config.json"
METADATA_KEY = "gpt_explorer_config"   # the config, inside our exports' safetensors header
FORMAT = "gpt-explorer"
MAX_HEADER_BYTES = 100 * 1024 ** 2     # safetensors' own limit
SAFETENSORS_DTYPES = {"F32": 4, "F16": 2, "BF16": 2, "F64": 8}


# ---------------------------------------------------------------------------------------------
# Pretrained GPT-2 from the hub
def _size_name(size: str) -> str:
    if not isinstance(size, str):
        raise ValueError(f"The GPT-2 size must be one of small, medium, large and xl "
                         f"(got {size!r}).")
    name = size if size.startswith("gpt2-") else f"gpt2-{size}"
    if name not in PRETRAINED:
        raise ValueError(f"OpenAI's GPT-2 comes in sizes small, medium, large and xl "
                         f"(got {size!r}).")
    return name


def _progress_class(progress, label: str):
    """A tqdm class for ``hf_hub_download`` that reports bytes to ``progress(fraction, text)``
    (Gradio's ``gr.Progress`` takes exactly that)."""
    from huggingface_hub.utils import tqdm as hub_tqdm

    class Reporter(hub_tqdm):
        def __init__(self, *args, **kwargs):
            kwargs["disable"] = True   # no console bar; the callback shows it
            super().__init__(*args, **kwargs)
            self._done = kwargs.get("initial", 0) or 0
            self._total = kwargs.get("total")

        def update(self, n=1):
            self._done += n or 0
            total = self._total or 0
            fraction = min(self._done / total, 1.0) if total else 0.0
            progress(fraction, f"Downloading {label}: {self._done / 1e6:,.0f} of "
                               f"{total / 1e6:,.0f} MB")
            return super().update(n)

    return Reporter


def pretrained_source(size: str = "gpt2-small", progress=None, *, budget_bytes: int | None = None,
                      dtype: str = "float32", revision: str | None = None,
                      cache_dir: str | None = None, endpoint: str | None = None,
                      download=None) -> tuple[GPTConfig, WeightsSource]:
    """OpenAI's GPT-2 ``size`` ("small", "medium", "large", "xl", or "gpt2-small" ...): checks
    the budget, then fetches ``model.safetensors`` through ``huggingface_hub`` (from its cache
    when it is there; ``HF_HUB_OFFLINE=1`` is respected), reporting bytes to
    ``progress(fraction, text)``. ``download`` replaces ``hf_hub_download`` in tests only."""
    name = _size_name(size)
    cfg = gpt2_config(name)
    repo_id = PRETRAINED[name]
    # Before any download: GPT-2 XL is 5,942 MB at float32.
    ModelCache(budget_bytes).check_budget(cfg, dtype, f"pretrained {PRETRAINED_NAMES[repo_id]}")

    from huggingface_hub import constants, hf_hub_download
    from huggingface_hub.errors import LocalEntryNotFoundError
    download = download or hf_hub_download
    label = f"{PRETRAINED_NAMES[repo_id]} ({repo_id})"
    if progress is not None:
        progress(0.0, f"Looking for {label} in the Hugging Face cache")
    try:
        path = download(repo_id, WEIGHTS_FILE, revision=revision, cache_dir=cache_dir,
                        endpoint=endpoint,
                        tqdm_class=_progress_class(progress, label) if progress else None)
    except LocalEntryNotFoundError:
        raise ValueError(_offline_message(repo_id, constants.is_offline_mode())) from None
    except Exception as exc:  # noqa: BLE001 - repository gone, disk full, a proxy's error page
        raise ValueError(f"Could not download {WEIGHTS_FILE} of {repo_id}: "
                         f"{type(exc).__name__}: {exc}") from None
    if progress is not None:
        progress(1.0, f"{label}: {WEIGHTS_FILE} is here")
    path = Path(path)
    header = read_safetensors_header(path)
    _check_gpt2(header.shapes, cfg, path.name)
    # The hub cache keeps files as snapshots/<commit>/<file> -> blobs/<sha256 of the file>.
    commit = path.parent.name if path.parent.parent.name == "snapshots" else (revision or "main")
    blob = Path(os.path.realpath(path)).name
    digest = blob if len(blob) == 64 and all(c in "0123456789abcdef" for c in blob) else None
    source = WeightsSource("pretrained", repo_id=repo_id, revision=commit,
                           digest=digest or sha256_file(path), filename=WEIGHTS_FILE,
                           path=str(path), layout="gpt2", stamp=_stamp(path))
    return cfg, source


def _offline_message(repo_id: str, offline: bool) -> str:
    why = ("HF_HUB_OFFLINE is set, so nothing is downloaded" if offline
           else "the Hugging Face hub cannot be reached from here")
    return (f"The weights of {PRETRAINED_NAMES[repo_id]} are not on this machine and {why}. "
            f"Either: (1) on a machine with internet run `hf download {repo_id} "
            f"{WEIGHTS_FILE}` and copy the folder models--{repo_id.replace('/', '--')} into "
            f"this machine's Hugging Face cache (~/.cache/huggingface/hub, or $HF_HOME/hub); "
            f"or (2) download https://huggingface.co/{repo_id}/resolve/main/{WEIGHTS_FILE} "
            f"and load that file with 'from file' (give its path, or upload it).")


# ---------------------------------------------------------------------------------------------
# Reading checkpoints
@dataclass
class SafetensorsHeader:
    shapes: dict[str, tuple]
    dtypes: dict[str, str]
    metadata: dict[str, str]
    data_bytes: int


def read_safetensors_header(path) -> SafetensorsHeader:
    """The names, shapes and metadata of a safetensors file, from its header alone. The header
    is read by safetensors' own reader, which checks it whole: every tensor's byte range must
    match its shape and dtype, the ranges must follow one another without gaps or overlaps,
    and together cover the file to its end. Messages never quote the file's bytes."""
    path = Path(path)
    name = path.name
    size = _size_of(path)
    try:
        with open(path, "rb") as f:
            head = f.read(8)
    except OSError:
        raise ValueError(f"{name} could not be read. Copy or download it again.") from None
    if len(head) < 8:
        raise ValueError(f"{name} is empty or cut short ({size:,} bytes): not a safetensors "
                         f"file. Copy or download it again.")
    (n,) = struct.unpack("<Q", head)
    if n > MAX_HEADER_BYTES or n > size - 8:
        raise ValueError(f"{name} is not a safetensors file, or it is cut short (its first "
                         f"bytes do not give a header that fits in it). Copy or download it "
                         f"again, or choose a model.safetensors file.")
    try:
        with safe_open(str(path), framework="pt") as f:
            metadata = f.metadata() or {}
            shapes, dtypes = {}, {}
            for tensor in f.keys():
                piece = f.get_slice(tensor)
                shapes[tensor], dtypes[tensor] = tuple(piece.get_shape()), piece.get_dtype()
    except SafetensorError as exc:
        raise ValueError(f"{name} is not a valid safetensors file ({_safetensors_problem(exc)})."
                         f" Copy or download it again, or save it again with "
                         f"safetensors.torch.save_file.") from None
    except OSError:
        raise ValueError(f"{name} could not be read. Copy or download it again.") from None
    for tensor, dtype in dtypes.items():
        if dtype not in SAFETENSORS_DTYPES:
            raise ValueError(f"{name}: tensor {tensor} is stored as {dtype}; the explorer "
                             f"reads {', '.join(SAFETENSORS_DTYPES)}.")
    return SafetensorsHeader(shapes, dtypes, metadata, size - 8 - n)


# What safetensors' reader says of a header it refuses, in a student's words.
_SAFETENSORS_PROBLEMS = {
    "invalid JSON": "its header is not JSON",
    "invalid offset": "a tensor's bytes do not follow the one before it",
    "invalid shape, data type, or offset": "a tensor's bytes do not match its shape and dtype",
    "not fully covered": "its tensors do not cover the file exactly: it is cut short, or has "
                         "bytes after its last tensor",
}


def _safetensors_problem(exc) -> str:
    text = str(exc)
    return next((words for phrase, words in _SAFETENSORS_PROBLEMS.items() if phrase in text),
                "its header does not describe its tensors")


def _size_of(path: Path) -> int:
    """The size of a regular file; a message where there is none (or it cannot be read)."""
    try:
        st = path.stat()
    except (OSError, ValueError):   # ENOENT, ENAMETOOLONG, EACCES, a NUL in the path ...
        raise ValueError(f"There is no file at {path}. Give the path of a model.safetensors "
                         f"(or the book's model.pth), or upload it.") from None
    if not stat.S_ISREG(st.st_mode):
        raise ValueError(f"There is no file at {path}, only a folder or a device. Give the "
                         f"path of a model.safetensors (or the book's model.pth), or upload it.")
    return st.st_size


@dataclass
class FileInfo:
    """What a checkpoint is, learnt without loading its weights."""

    path: Path
    kind: str                      # "safetensors" or "pth"
    layout: str                    # "gpt2" (Hugging Face's names) or "book"
    config: GPTConfig
    shapes: dict[str, tuple]       # the weights' names -> shapes (buffers dropped)
    assumptions: list[str] = field(default_factory=list)   # what had to be guessed


# A model's config.json is a few hundred bytes (GPT-2's: about 1 KB): more is not a config, and
# every config (beside a file, or uploaded with it) is read into memory whole.
MAX_CONFIG_BYTES = 64 * 1024


def read_config(path) -> dict:
    """A config.json: at most ``MAX_CONFIG_BYTES``, JSON, and a table (an object)."""
    path = Path(path)
    name = path.name
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_CONFIG_BYTES + 1)
    except OSError:
        raise ValueError(f"The config {name} could not be read; upload it again.") from None
    if len(raw) > MAX_CONFIG_BYTES:
        raise ValueError(f"The config {name} is over {MAX_CONFIG_BYTES // 1024} KB: not a model "
                         f"config (GPT-2's config.json is about 1 KB).")
    try:
        config = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise ValueError(f"The config {name} is not valid JSON.") from None
    if not isinstance(config, dict):
        raise ValueError(f"The config {name} is not a table of settings (a JSON object such as "
                         f"{{\"n_layer\": 12, ...}}), so it cannot describe a model.")
    return config


def _read_config_json(path: Path) -> dict | None:
    """The config.json beside a checkpoint, if there is one."""
    beside = path.with_name(CONFIG_FILE)
    try:
        there = beside.is_file()
    except OSError:
        there = False
    return read_config(beside) if there else None


BOOK_KEYS = [f.name for f in GPTConfig.__dataclass_fields__.values()]


def _book_part(config: dict) -> dict:
    return {k: v for k, v in config.items() if k in BOOK_KEYS}


def _layout_of(shapes: dict) -> str:
    names = strip_prefix(shapes)
    if "wte.weight" in names:
        return "gpt2"
    if "tok_emb.weight" in shapes:
        return "book"
    raise ValueError("These weights are neither a GPT-2 checkpoint (wte.weight, h.0.attn...) nor "
                     "the book's GPTModel (tok_emb.weight, trf_blocks.0.att...): found "
                     f"{', '.join(list(shapes)[:5])}.")


def _infer_gpt2_config(names: dict, given: dict, assumptions: list) -> GPTConfig:
    """The config of a file in Hugging Face's GPT-2 names: from the book's keys if the config
    has them (our exports, or a config passed in), else from Hugging Face's config.json, else
    from the shapes (with GPT-2's head size)."""
    check_hf_config(given)
    from_shapes = {"vocab_size": names["wte.weight"][0], "n_embd": names["wte.weight"][1],
                   "n_positions": names["wpe.weight"][0] if "wpe.weight" in names else 1024,
                   "n_layer": len({n.split(".")[1] for n in names if n.startswith("h.")}),
                   "tie_word_embeddings": "lm_head.weight" not in names}
    if "h.0.mlp.c_fc.weight" in names:
        from_shapes["n_inner"] = names["h.0.mlp.c_fc.weight"][1]
    book = _book_part(given)
    if given.get("format") == FORMAT or ("n_heads" in book and "emb_dim" in book):
        return GPTConfig.from_dict({**_book_part(config_from_hf(
            {**from_shapes, "n_head": book.get("n_heads", 1)}).to_dict()), **book})
    hf = {**from_shapes, **{k: v for k, v in given.items() if v is not None}}
    if "n_head" not in hf:
        hf["n_head"] = _guess_heads(hf["n_embd"], assumptions)
    return config_from_hf(hf)


def _guess_heads(emb_dim: int, assumptions: list) -> int:
    if emb_dim % 64:
        raise ValueError(f"The file does not say how many attention heads the model has, and "
                         f"emb_dim={emb_dim} is not a multiple of GPT-2's head size 64. Put a "
                         f"config.json with n_heads beside it, or pass the config.")
    assumptions.append(f"n_heads = {emb_dim // 64} (GPT-2's head size of 64; no config given)")
    return emb_dim // 64


def _infer_book_config(shapes: dict, given: dict, assumptions: list) -> GPTConfig:
    """The book's config from a state_dict's shapes, plus whatever a config gave."""
    vocab, emb = shapes["tok_emb.weight"]
    layers = len({n.split(".")[1] for n in shapes if n.startswith("trf_blocks.")})
    values = {"vocab_size": vocab, "emb_dim": emb, "n_layers": layers}
    if "pos_emb.weight" in shapes:
        values["context_length"] = shapes["pos_emb.weight"][0]
    else:
        values["pos_encoding"] = "rope"
        mask = shapes.get("trf_blocks.0.att.mask")
        if mask:
            values["context_length"] = mask[0]
    if layers:
        values["qkv_bias"] = "trf_blocks.0.att.W_query.bias" in shapes
        hidden = shapes.get("trf_blocks.0.ff.layers.0.weight", (4 * emb,))[0]
        values["ff_expansion"] = max(hidden // emb, 1)
        if "trf_blocks.0.norm1.scale" not in shapes:
            values["norm_placement"] = "none"
    values["tie_weights"] = "out_head.weight" not in shapes
    values.update(given)
    if "n_heads" not in values:
        values["n_heads"] = _guess_heads(emb, assumptions)
    if not given:
        assumptions.append("the book's choices where weights cannot tell (norm before "
                           "attention, shortcuts, GELU)")
    return GPTConfig.from_dict(values)


def inspect_file(path, config=None) -> FileInfo:
    """What ``path`` holds (safetensors or the book's ``.pth``), its layout and config, from
    its header or a memory map: nothing is allocated. ``config`` (a dict, a GPTConfig, or a
    path to a config.json) overrides what sits beside the file."""
    if not isinstance(path, (str, os.PathLike)) or not str(path):
        raise ValueError(f"Give the path of a model.safetensors (or the book's model.pth) "
                         f"as text (got {path!r}).")
    path = Path(path)
    _size_of(path)
    given = _given_config(config)
    if path.suffix in (".pth", ".pt", ".bin", ".ckpt"):
        kind, metadata = "pth", {}
        shapes = {n: tuple(t.shape) for n, t in _load_pth(path, mmap=True).items()}
    else:
        kind = "safetensors"
        header = read_safetensors_header(path)
        shapes, metadata = header.shapes, header.metadata
    if given is None and METADATA_KEY in metadata:
        try:
            given = json.loads(metadata[METADATA_KEY])
        except json.JSONDecodeError:
            given = None
    if given is None:
        given = _read_config_json(path)
    layout = _layout_of(shapes)
    assumptions: list[str] = []
    given = given or {}
    if isinstance(given, GPTConfig):
        given = given.to_dict()
    if layout == "gpt2":
        cfg = _infer_gpt2_config(strip_prefix(shapes), given, assumptions)
        shapes = {n: s for n, s in strip_prefix(shapes).items() if not is_gpt2_buffer(n)}
        if cfg.tie_weights:   # some files save the tied head as well: it is wte, skip it
            shapes.pop("lm_head.weight", None)
    else:
        cfg = _infer_book_config(shapes, _book_part(given), assumptions)
        masks = {n: s for n, s in shapes.items() if is_book_buffer(n)}
        for n, s in masks.items():
            if s != (cfg.context_length, cfg.context_length):
                raise ValueError(f"{n} is {s}, but the model's context_length is "
                                 f"{cfg.context_length}.")
        shapes = {n: s for n, s in shapes.items() if not is_book_buffer(n)}
    return FileInfo(path, kind, layout, cfg, shapes, assumptions)


def _given_config(config):
    if config is None:
        return None
    if isinstance(config, (str, Path)):
        return read_config(config)
    if isinstance(config, GPTConfig):
        return config.to_dict()
    if isinstance(config, dict):
        if "model_type" not in config:   # typed in, not a whole Hugging Face config.json
            known = [*BOOK_KEYS, *HF_KEYS, "format", "layout", "weights_source"]
            for key in config:
                if key not in known:
                    hint = difflib.get_close_matches(str(key), known, n=1, cutoff=0.6)
                    did_you_mean = f" Did you mean '{hint[0]}'?" if hint else ""
                    raise ValueError(f"Unknown config key '{key}'.{did_you_mean} Known keys: "
                                     f"the book's ({', '.join(BOOK_KEYS)}) or Hugging "
                                     f"Face's ({', '.join(HF_KEYS)}).")
        return dict(config)
    raise ValueError("config must be a dict, a GPTConfig or the path of a config.json "
                     f"(got {type(config).__name__}).")


# The GPT2Config keys the explorer reads.
HF_KEYS = ("vocab_size", "n_positions", "n_embd", "n_layer", "n_head", "n_inner",
           "activation_function", "resid_pdrop", "embd_pdrop", "attn_pdrop",
           "layer_norm_epsilon", "tie_word_embeddings")


def _check_gpt2(shapes: dict, cfg: GPTConfig, name: str):
    found = {n: s for n, s in strip_prefix(shapes).items() if not is_gpt2_buffer(n)}
    problem = describe_differences(gpt2_shapes(cfg), found, name)
    if problem:
        raise ValueError(problem)


def _load_pth(path: Path, mmap: bool = False) -> dict:
    """The model's state_dict from a ``.pth``: ``torch.save(model.state_dict())`` or the book's
    ``{"model_state_dict": ..., "optimizer_state_dict": ...}``. Tensors only: a pickle that
    would run code is refused by ``weights_only=True`` before anything of it runs."""
    try:
        obj = torch.load(path, map_location="cpu", weights_only=True, mmap=mmap)
    except Exception as exc:  # noqa: BLE001 - torch raises UnpicklingError, RuntimeError, ...
        text = str(exc)
        if "Weights only load failed" in text or "Unsupported global" in text:
            raise ValueError(
                f"{path.name} holds Python objects besides tensors, which could run code when "
                f"loaded, so it was not opened. Save the weights alone: "
                f"torch.save(model.state_dict(), 'model.pth'), or better, as safetensors.") \
                from None
        if mmap and ("mmap" in text or "zipfile" in text.lower()):
            return _load_pth(path, mmap=False)
        # (torch's own text may quote the file's bytes: it is not passed on)
        raise ValueError(f"{path.name} could not be read as a PyTorch checkpoint: it is cut "
                         f"short, or not a checkpoint. Copy it again, or save it with "
                         f"torch.save(model.state_dict(), 'model.pth').") from None
    if isinstance(obj, dict) and "model_state_dict" in obj:
        obj = obj["model_state_dict"]   # the book's model_and_optimizer.pth
    if not isinstance(obj, dict) or not all(isinstance(t, torch.Tensor) for t in obj.values()):
        raise ValueError(f"{path.name} is not a state_dict (a table of tensors), nor the book's "
                         f"checkpoint with 'model_state_dict'.")
    return obj


# ---------------------------------------------------------------------------------------------
# Digests
def _stamp(path) -> tuple:
    st = os.stat(path)
    return st.st_size, st.st_mtime_ns


_digests: dict[tuple, str] = {}   # (device, inode, size, mtime) -> sha256, this process


def sha256_file(path, chunk: int = 16 * 1024 ** 2) -> str:
    """The file's sha256, computed once per file version (the same inode, size and mtime give
    the remembered digest: a second session choosing the same file does not read it again)."""
    st = os.stat(path)
    version = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
    if version in _digests:
        return _digests[version]
    h = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            while block := f.read(chunk):
                h.update(block)
    except OSError:
        raise ValueError(f"{Path(path).name} could not be read to the end. Copy or download it "
                         f"again.") from None
    _digests[version] = h.hexdigest()
    return _digests[version]


def file_source(path, config=None, *, budget_bytes: int | None = None,
                dtype: str = "float32") -> tuple[GPTConfig, WeightsSource, FileInfo]:
    """A checkpoint on disk (a path the user gave, or an upload): its config and source
    (sha256), refused before any allocation if it is over the budget or does not fit."""
    info = inspect_file(path, config)
    ModelCache(budget_bytes).check_budget(info.config, dtype, f"checkpoint ({info.path.name})")
    _check_shapes(info)
    stamp = _stamp(info.path)
    source = WeightsSource("file", digest=sha256_file(info.path), filename=info.path.name,
                           path=str(info.path), layout=info.layout, stamp=stamp)
    return info.config, source, info


def _check_shapes(info: FileInfo):
    expected = gpt2_shapes(info.config) if info.layout == "gpt2" else book_shapes(info.config)
    problem = describe_differences(expected, info.shapes, info.path.name)
    if problem:
        raise ValueError(problem)


# ---------------------------------------------------------------------------------------------
# Loading
def _read_tensors(info: FileInfo, dtype: torch.dtype) -> dict[str, torch.Tensor]:
    if info.kind == "pth":
        raw = _load_pth(info.path)
        tensors = {n: t for n, t in raw.items()
                   if (n.removeprefix("transformer.") if info.layout == "gpt2" else n)
                   in info.shapes}
    else:
        tensors = {}
        with safe_open(str(info.path), framework="pt") as f:
            for name in f.keys():
                short = name.removeprefix("transformer.") if info.layout == "gpt2" else name
                if short in info.shapes:
                    tensors[name] = f.get_tensor(name)
    return {n: t if t.dtype == dtype else t.to(dtype) for n, t in tensors.items()}


def load_into_model(info: FileInfo, dtype: torch.dtype = torch.float32) -> GPTModel:
    """The checkpoint's weights in a new ``GPTModel`` (CPU, ``dtype``), with no throw-away
    initialisation."""
    tensors = _read_tensors(info, dtype)
    if info.layout == "gpt2":
        book = gpt2_to_book(strip_prefix(tensors), info.config)
    else:
        book = tensors
    model = empty_model(info.config)
    return assign_weights(model, {n: t.contiguous() for n, t in book.items()})


# The book's layout of every loaded checkpoint, kept on disk: written once, then mapped.
STORE_ENV = "GPT_EXPLORER_WEIGHTS"
STORE_LIMIT_ENV = "GPT_EXPLORER_WEIGHTS_MB"   # the store's size on disk; default 2 x the budget
STORE_VERSION = "book-f32-v1"   # change when the stored layout changes
STORED = f"*-{STORE_VERSION}.safetensors"
STALE_PART_SECONDS = 3600       # a conversion's partial file older than this was abandoned


def store_dir() -> Path:
    """``$GPT_EXPLORER_WEIGHTS``, else ``weights/`` in the explorer's cache folder
    (``$GPT_EXPLORER_CACHE``, else ``~/.cache/gpt-explorer``)."""
    if os.environ.get(STORE_ENV):
        return Path(os.environ[STORE_ENV])
    base = (os.environ.get("GPT_EXPLORER_CACHE")
            or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "gpt-explorer")
    return Path(base) / "weights"


def store_limit_bytes() -> int:
    """``GPT_EXPLORER_WEIGHTS_MB``, else twice the memory budget: every distinct checkpoint
    (each upload) is converted once into the store, so without a bound visitors would fill the
    disk."""
    value = os.environ.get(STORE_LIMIT_ENV, "").strip()
    if not value:
        return 2 * default_budget_bytes()
    try:
        mb = float(value)
    except ValueError:
        raise ValueError(f"{STORE_LIMIT_ENV} must be a number of MB (got {value!r}).") from None
    if not (math.isfinite(mb) and mb > 0):
        raise ValueError(f"{STORE_LIMIT_ENV} must be a positive number of MB (got {value!r}).")
    return int(mb * 1024 ** 2)


def stored_path(source: WeightsSource, cfg) -> Path:
    """The file's digest and the config it is read with (a tied head is dropped, say)."""
    config = json.dumps(GPTConfig.from_dict(cfg).to_dict(), sort_keys=True)
    read_as = hashlib.sha256(config.encode()).hexdigest()[:12]
    return store_dir() / f"{source.digest}-{read_as}-{STORE_VERSION}.safetensors"


def store_bytes() -> int:
    """What the store holds on disk now."""
    return sum(size for _, _, size in _stored_files())


def _stored_files() -> list[tuple[float, Path, int]]:
    """(last use, path, size) of every stored checkpoint."""
    found = []
    for path in store_dir().glob(STORED):
        try:
            st = path.stat()
        except OSError:        # removed meanwhile by another process
            continue
        found.append((st.st_mtime, path, st.st_size))
    return found


def _trim_store(keep: Path) -> None:
    """Remove the least recently used checkpoints (never ``keep``) until the store is within
    its limit; and partial files a crashed conversion left. A model mapped from a removed
    file keeps its pages (the mapping outlives the name); a later build converts it again."""
    limit = store_limit_bytes()
    files = sorted(_stored_files())
    total = sum(size for _, _, size in files)
    for _, path, size in files:
        if total <= limit:
            break
        if path != keep:
            path.unlink(missing_ok=True)
            total -= size
    for part in store_dir().glob("*.part"):
        try:
            if time.time() - part.stat().st_mtime > STALE_PART_SECONDS:
                part.unlink(missing_ok=True)
        except OSError:
            continue


_store_lock = threading.Lock()


def _stored_model(source: WeightsSource, cfg: GPTConfig, progress=None) -> GPTModel:
    """The checkpoint's model, mapped from the store (converted into it the first time). Under
    the store's lock, so that no other conversion trims the file away before it is mapped."""
    with _store_lock:
        target = _store(source, cfg, progress)
        os.utime(target)                    # its last use, for the store's trimming
        return _map_stored(target, cfg)


def _store(source: WeightsSource, cfg: GPTConfig, progress=None) -> Path:
    """The checkpoint in the book's names, float32, every weight contiguous in the shape
    ``nn.Linear`` wants (GPT-2's Conv1D weights transposed once, here): then loading is a
    memory map, as ``from_pretrained``'s, and the C decode step can read every weight."""
    target = stored_path(source, cfg)
    if target.is_file():
        return target
    path = Path(source.path or "")
    if not path.is_file():
        raise ValueError(f"The weights file {source.filename} is no longer at "
                         f"{source.path}. Load it again (or upload it again).")
    info = inspect_file(path, cfg)
    if info.config != cfg:
        raise ValueError(f"{path.name} no longer matches the model it was chosen for; "
                         f"load it again.")
    if _stamp(path) != source.stamp and sha256_file(path) != source.digest:
        raise ValueError(f"{path.name} has changed since it was chosen (its sha256 "
                         f"differs). Load it again.")
    if progress is not None:
        progress(0.0, f"Converting {source.filename} into the book's layout (the first "
                      f"time only)")
    model = load_into_model(info, torch.float32)
    state = {n: t.detach().contiguous() for n, t in model.state_dict().items()}
    if cfg.tie_weights:
        state.pop("out_head.weight")
    _check_finite(state, source.filename)
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f"{target.name}.{os.getpid()}.{threading.get_ident()}.part")
    try:
        save_file(state, str(partial), metadata={METADATA_KEY: json.dumps(cfg.to_dict()),
                                                 "source_sha256": source.digest})
        os.replace(partial, target)     # whole or not at all
    except OSError as exc:
        partial.unlink(missing_ok=True)
        raise ValueError(f"Could not write the converted weights to {target.parent} "
                         f"({exc.strerror or exc}). Free some disk space or set {STORE_ENV} to "
                         f"a folder with room.") from None
    _trim_store(keep=target)
    return target


def _check_finite(state: dict, name: str) -> None:
    """A weight that is NaN or infinite makes every output NaN: refuse the checkpoint at load,
    not at the first sampled token."""
    broken = [n for n, t in state.items() if t.is_floating_point() and not torch.isfinite(t).all()]
    if broken:
        raise ValueError(f"{name} holds weights that are not numbers (NaN or infinite) in "
                         f"{len(broken)} tensor(s): {', '.join(broken[:3])}"
                         f"{' ...' if len(broken) > 3 else ''}. A model with them computes "
                         f"nothing but NaN (a training run that diverged?). Load another "
                         f"checkpoint.")


def _map_stored(stored: Path, cfg: GPTConfig) -> GPTModel:
    """A model whose weights are a private memory map of the stored file: nothing is copied
    until a page is read, pages are shared by every model of that file, and writes (training)
    go to the process's own copy, never to the file."""
    info = inspect_file(stored, cfg)
    _check_shapes(info)
    with safe_open(str(stored), framework="pt") as f:
        tensors = {name: f.get_tensor(name) for name in f.keys()}
    return assign_weights(empty_model(cfg), tensors)


def materialize(source: WeightsSource, cfg, device: str = "cpu",
                dtype: str = "float32", progress=None) -> GPTModel:
    """The model of a pretrained or file source, built as ``build_model`` builds: fused
    kernels, eval mode, no gradients, on ``device``. The first time, the file (its sha256
    checked against the source) is converted into the store; after that it is mapped."""
    cfg = GPTConfig.from_dict(cfg)
    target = resolve_device(device)
    torch_dtype = resolve_dtype(dtype, target)
    model = _stored_model(source, cfg, progress)
    fuse(model)
    model.eval()
    model.requires_grad_(False)
    return model.to(device=target, dtype=torch_dtype)


def load_pretrained(size: str = "gpt2-small", progress=None, *, cache: ModelCache | None = None,
                    device: str = "cpu", dtype: str = "float32", **hub):
    """OpenAI's GPT-2 in the book's ``GPTModel``: (model, key). Shared through ``cache`` when
    given (two sessions asking for the same size hold one copy)."""
    cache = ModelCache() if cache is None else cache
    cfg, source = pretrained_source(size, progress, budget_bytes=cache.budget_bytes,
                                    dtype=dtype, **hub)
    key = cache.key(cfg, device=device, dtype=dtype, source=source)
    if progress is not None:
        progress(1.0, f"Loading {source.caption} into the book's GPTModel")
    model, _ = cache.get(key, progress)
    return model, key


def load_file(path, config=None, *, cache: ModelCache | None = None, device: str = "cpu",
              dtype: str = "float32", progress=None):
    """A checkpoint file in the book's ``GPTModel``: (model, key). ``key.source.caption``
    names it; checkpoints with the same sha256 share one copy in ``cache``. ``progress(fraction,
    text)`` hears about the hash and the first load's conversion."""
    cache = ModelCache() if cache is None else cache
    if progress is not None:
        progress(0.0, f"Checking {Path(path).name}")
    cfg, source, _ = file_source(path, config, budget_bytes=cache.budget_bytes, dtype=dtype)
    key = cache.key(cfg, device=device, dtype=dtype, source=source)
    model, _ = cache.get(key, progress)
    return model, key


# ---------------------------------------------------------------------------------------------
# Export
def export_model(model: GPTModel, folder, hf_layout: bool = False,
                 source: WeightsSource | None = None) -> list[Path]:
    """Write ``model`` (random, trained or loaded) to ``folder`` as ``model.safetensors`` and
    ``config.json``. The config holds the book's keys and the explorer's knobs; with
    ``hf_layout`` the tensors have Hugging Face's GPT-2 names and the config its keys too, so
    ``GPT2LMHeadModel.from_pretrained(folder)`` loads it (GPT-2-shaped models only). Either
    comes back in with ``load_file``. Returns the files written."""
    if not isinstance(model, GPTModel):
        raise ValueError(f"export_model saves a GPTModel (got {type(model).__name__}).")
    cfg = model.cfg
    if hf_layout and not is_gpt2_shaped(cfg):
        raise ValueError("Hugging Face's GPT-2 layout needs norm_placement 'pre', shortcuts on "
                         "and pos_encoding 'learned'; export this model in the book's layout "
                         "(hf_layout=False) instead.")
    if not isinstance(folder, (str, os.PathLike)) or not str(folder):
        raise ValueError(f"Give the folder to export to as text (got {folder!r}).")
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise ValueError(f"{folder} is a file; choose a folder to export into.")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ValueError(f"Could not make the folder {folder}: {exc.strerror or exc}.") from None
    state = {n: t.detach().to("cpu", torch.float32) for n, t in model.state_dict().items()}
    book_config = {**cfg.to_dict(), "format": FORMAT,
                   "layout": "gpt2" if hf_layout else "book"}
    if source is not None:
        book_config["weights_source"] = source.caption
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
        raise ValueError(f"Could not write into {folder}: {exc.strerror or exc}. Free some "
                         f"disk space or choose another folder.") from None
    return [weights, config_path]
