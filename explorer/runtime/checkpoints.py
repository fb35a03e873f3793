"""Checkpoints on disk: safetensors in the book's names or Hugging Face's, and the book's
chapter-5 ``.pth`` files. What a file holds is learnt from its header (or a memory map), before a
byte of weights is allocated: ``inspect_file`` -> ``FileInfo``; ``file_source`` adds its sha256
and checks it against the budget and the model, to key the model cache.

Every file is read as tensors only: safetensors, or ``torch.load(weights_only=True)``, which
refuses any pickle that would run code. Each input is refused where it is first understood (the
header, the shapes, the budget) with a message that says what to do.
"""
from __future__ import annotations

import hashlib
import json
import os
import stat
import struct
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path

import torch
from safetensors import SafetensorError, safe_open

from ..book.config import GPTConfig
from ..book.errors import ExplorerError, Message
from ..book.load_weights import (assign_weights, book_shapes, describe_differences,
                                 empty_model, gpt2_shapes, gpt2_to_book, is_book_buffer,
                                 is_gpt2_buffer, strip_prefix)
from ..book.model import GPTModel
from .file_config import (METADATA_KEY, book_part, config_beside, given_config,
                          infer_book_config, infer_gpt2_config, layout_of)
from .memory import check_budget
from .sources import WeightsSource

MAX_HEADER_BYTES = 100 * 1024 ** 2     # safetensors' own limit
MAX_NOTE_CHARS = 120                   # an export's note of where its weights came from
SAFETENSORS_DTYPES = {"F32": 4, "F16": 2, "BF16": 2, "F64": 8}
WEIGHTS_SUFFIXES = (".safetensors", ".pth", ".pt")   # what load_file reads
CONFIG_SUFFIX = ".json"
IGNORED_UPLOADS = ("generation_config.json",)        # save_pretrained's decoding defaults


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
        raise ExplorerError("file.unreadable", "{name} could not be read. Copy or download it "
                            "again.", name=name) from None
    if len(head) < 8:
        raise ExplorerError("safetensors.empty", "{name} is empty or cut short ({size:,} bytes): "
                            "not a safetensors file. Copy or download it again.", name=name,
                            size=size)
    (n,) = struct.unpack("<Q", head)
    if n > MAX_HEADER_BYTES or n > size - 8:
        raise ExplorerError("safetensors.header_does_not_fit", "{name} is not a safetensors "
                            "file, or it is cut short (its first bytes do not give a header that "
                            "fits in it). Copy or download it again, or choose a "
                            "model.safetensors file.", name=name)
    try:
        with safe_open(str(path), framework="pt") as f:
            metadata = f.metadata() or {}
            shapes, dtypes = {}, {}
            for tensor in f.keys():
                piece = f.get_slice(tensor)
                shapes[tensor], dtypes[tensor] = tuple(piece.get_shape()), piece.get_dtype()
    except SafetensorError as exc:
        raise ExplorerError("safetensors.invalid", "{name} is not a valid safetensors file "
                            "({problem}). Copy or download it again, or save it again with "
                            "safetensors.torch.save_file.", name=name,
                            problem=_safetensors_problem(exc)) from None
    except OSError:
        raise ExplorerError("file.unreadable", "{name} could not be read. Copy or download it "
                            "again.", name=name) from None
    for tensor, dtype in dtypes.items():
        if dtype not in SAFETENSORS_DTYPES:
            raise ExplorerError("safetensors.unknown_dtype", "{name}: tensor {tensor} is stored "
                                "as {dtype}; the explorer reads {dtypes}.", name=name,
                                tensor=tensor, dtype=dtype, dtypes=", ".join(SAFETENSORS_DTYPES))
    return SafetensorsHeader(shapes, dtypes, metadata, size - 8 - n)


# What safetensors' reader says of a header it refuses, in a student's words.
_SAFETENSORS_PROBLEMS = {
    "invalid JSON": Message("safetensors.problem.not_json", "its header is not JSON"),
    "invalid offset": Message("safetensors.problem.offset",
                              "a tensor's bytes do not follow the one before it"),
    "invalid shape, data type, or offset": Message(
        "safetensors.problem.shape", "a tensor's bytes do not match its shape and dtype"),
    "not fully covered": Message("safetensors.problem.coverage", "its tensors do not cover the "
                                 "file exactly: it is cut short, or has bytes after its last "
                                 "tensor"),
}


def _safetensors_problem(exc) -> Message:
    text = str(exc)
    return next((words for phrase, words in _SAFETENSORS_PROBLEMS.items() if phrase in text),
                Message("safetensors.problem.header",
                        "its header does not describe its tensors"))


def _size_of(path: Path) -> int:
    """The size of a regular file; a message where there is none (or it cannot be read)."""
    try:
        st = path.stat()
    except (OSError, ValueError):   # ENOENT, ENAMETOOLONG, EACCES, a NUL in the path ...
        raise ExplorerError("file.missing", "There is no file at {path}. Give the path of a "
                            "model.safetensors (or the book's model.pth), or upload it.",
                            path=path) from None
    if not stat.S_ISREG(st.st_mode):
        raise ExplorerError("file.not_a_file", "There is no file at {path}, only a folder or a "
                            "device. Give the path of a model.safetensors (or the book's "
                            "model.pth), or upload it.", path=path)
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
    note: str | None = None        # an export's "trained 150 steps on …" (``source_note``)


def source_note(config) -> str | None:
    """What the explorer's export wrote of where the weights came from (its config's
    "weights_source", e.g. "trained 150 steps on the story (pre-LN)"), as a caption may show
    it: a file is anyone's, so one line of letters, digits, spaces and plain punctuation
    (nothing that Markdown or HTML would read), at most ``MAX_NOTE_CHARS``."""
    note = config.get("weights_source") if isinstance(config, dict) else None
    if not isinstance(note, str):
        return None
    kept = "".join(c if unicodedata.category(c)[0] in "LNP" and c not in "*_`#[]\\"
                   else " " for c in note[:4 * MAX_NOTE_CHARS])
    note = " ".join(kept.split())
    if len(note) > MAX_NOTE_CHARS:
        note = note[:MAX_NOTE_CHARS - 1] + "…"
    return note or None


def inspect_file(path, config=None) -> FileInfo:
    """What ``path`` holds (safetensors or the book's ``.pth``), its layout and config, from
    its header or a memory map: nothing is allocated. ``config`` (a dict, a GPTConfig, or a
    path to a config.json) overrides what sits beside the file."""
    if not isinstance(path, (str, os.PathLike)) or not str(path):
        raise ExplorerError("file.path_not_text", "Give the path of a model.safetensors (or the "
                            "book's model.pth) as text (got {path!r}).", path=path)
    path = Path(path)
    _size_of(path)
    given = given_config(config)
    if path.suffix in (".pth", ".pt", ".bin", ".ckpt"):
        kind, metadata = "pth", {}
        shapes = {n: tuple(t.shape) for n, t in _load_pth(path, mmap=True).items()}
    else:
        kind = "safetensors"
        header = read_safetensors_header(path)
        shapes, metadata = header.shapes, header.metadata
    exported = None                 # the config inside our exports' header
    if METADATA_KEY in metadata:
        try:
            exported = json.loads(metadata[METADATA_KEY])
        except json.JSONDecodeError:
            exported = None
    if given is None:
        given = exported
    if given is None:
        given = config_beside(path)
    note = source_note(exported) or source_note(given)
    layout = layout_of(shapes)
    assumptions: list[str] = []
    given = given or {}
    if isinstance(given, GPTConfig):
        given = given.to_dict()
    if layout == "gpt2":
        cfg = infer_gpt2_config(strip_prefix(shapes), given, assumptions)
        shapes = {n: s for n, s in strip_prefix(shapes).items() if not is_gpt2_buffer(n)}
        if cfg.tie_weights:   # some files save the tied head as well: it is wte, skip it
            shapes.pop("lm_head.weight", None)
    else:
        cfg = infer_book_config(shapes, book_part(given), assumptions)
        masks = {n: s for n, s in shapes.items() if is_book_buffer(n)}
        for n, s in masks.items():
            if s != (cfg.context_length, cfg.context_length):
                raise ExplorerError("checkpoint.mask_wrong_size", "{tensor} is {shape}, but the "
                                    "model's context_length is {context_length}.", tensor=n,
                                    shape=s, context_length=cfg.context_length)
        shapes = {n: s for n, s in shapes.items() if not is_book_buffer(n)}
    return FileInfo(path, kind, layout, cfg, shapes, assumptions, note)


def check_gpt2(shapes: dict, cfg: GPTConfig, name: str):
    found = {n: s for n, s in strip_prefix(shapes).items() if not is_gpt2_buffer(n)}
    problem = describe_differences(gpt2_shapes(cfg), found, name)
    if problem:
        raise ExplorerError.of(problem)


def _load_pth(path: Path, mmap: bool = False) -> dict:
    """The model's state_dict from a ``.pth``: ``torch.save(model.state_dict())`` or the book's
    ``{"model_state_dict": ..., "optimizer_state_dict": ...}``. Tensors only: a pickle that
    would run code is refused by ``weights_only=True`` before anything of it runs."""
    try:
        obj = torch.load(path, map_location="cpu", weights_only=True, mmap=mmap)
    except Exception as exc:  # noqa: BLE001 - torch raises UnpicklingError, RuntimeError, ...
        text = str(exc)
        if "Weights only load failed" in text or "Unsupported global" in text:
            raise ExplorerError("pth.holds_objects", "{name} holds Python objects besides "
                                "tensors, which could run code when loaded, so it was not "
                                "opened. Save the weights alone: torch.save(model.state_dict(), "
                                "'model.pth'), or better, as safetensors.", name=path.name) \
                from None
        if mmap and ("mmap" in text or "zipfile" in text.lower()):
            return _load_pth(path, mmap=False)
        # (torch's own text may quote the file's bytes: it is not passed on)
        raise ExplorerError("pth.unreadable", "{name} could not be read as a PyTorch checkpoint: "
                            "it is cut short, or not a checkpoint. Copy it again, or save it "
                            "with torch.save(model.state_dict(), 'model.pth').",
                            name=path.name) from None
    if isinstance(obj, dict) and "model_state_dict" in obj:
        obj = obj["model_state_dict"]   # the book's model_and_optimizer.pth
    if not isinstance(obj, dict) or not all(isinstance(t, torch.Tensor) for t in obj.values()):
        raise ExplorerError("pth.not_a_state_dict", "{name} is not a state_dict (a table of "
                            "tensors), nor the book's checkpoint with 'model_state_dict'.",
                            name=path.name)
    return obj


# ---------------------------------------------------------------------------------------------
# Digests
def file_stamp(path) -> tuple:
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
        raise ExplorerError("file.unreadable_to_the_end", "{name} could not be read to the end. "
                            "Copy or download it again.", name=Path(path).name) from None
    _digests[version] = h.hexdigest()
    return _digests[version]


def file_source(path, config=None, *, budget_bytes: int | None = None,
                dtype: str = "float32") -> tuple[GPTConfig, WeightsSource, FileInfo]:
    """A checkpoint on disk (a path the user gave, or an upload): its config and source
    (sha256), refused before any allocation if it is over the budget or does not fit."""
    info = inspect_file(path, config)
    check_budget(info.config, dtype, Message("budget.what.checkpoint", "checkpoint ({name})",
                                             name=info.path.name), budget_bytes)
    check_shapes(info)
    stamp = file_stamp(info.path)
    source = WeightsSource("file", digest=sha256_file(info.path), filename=info.path.name,
                           path=str(info.path), layout=info.layout, stamp=stamp,
                           note=info.note)
    return info.config, source, info


def uploaded(upload) -> tuple[str, str | None]:
    """The weights file and its config.json (if any) among the uploaded files (paths, or
    objects and dicts with a ``path``, as a web form hands them over)."""
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


def check_shapes(info: FileInfo):
    expected = gpt2_shapes(info.config) if info.layout == "gpt2" else book_shapes(info.config)
    problem = describe_differences(expected, info.shapes, info.path.name)
    if problem:
        raise ExplorerError.of(problem)


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
