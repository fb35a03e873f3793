"""The store of converted checkpoints: every loaded checkpoint, in the book's layout, kept on
disk (``store_dir``), written once and then memory-mapped, within a bound on its size
(``store_limit_bytes``; the least recently used go first). ``materialize`` makes the model of a
pretrained or file source from it, as ``build_model`` builds a random one."""
from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import save_file

from ..book.config import GPTConfig
from ..book.errors import ExplorerError, Text
from ..book.fast import fuse
from ..book.load_weights import assign_weights, empty_model
from ..book.model import GPTModel
from ..native import cache_dir
from .build import resolve_device, resolve_dtype
from .checkpoints import check_shapes, inspect_file, load_into_model, sha256_file, file_stamp
from .file_config import METADATA_KEY
from .memory import default_budget_bytes, env_megabytes
from .sources import WeightsSource

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
    return cache_dir() / "weights"


def store_limit_bytes() -> int:
    """``GPT_EXPLORER_WEIGHTS_MB``, else twice the memory budget: every distinct checkpoint
    (each upload) is converted once into the store, so without a bound visitors would fill the
    disk."""
    limit = env_megabytes(STORE_LIMIT_ENV)
    return limit if limit is not None else 2 * default_budget_bytes()


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
        raise ExplorerError("store.file_gone", "The weights file {filename} is no longer at "
                            "{path}. Load it again (or upload it again).",
                            filename=source.filename, path=source.path)
    info = inspect_file(path, cfg)
    if info.config != cfg:
        raise ExplorerError("store.file_no_longer_fits", "{name} no longer matches the model it "
                            "was chosen for; load it again.", name=path.name)
    if file_stamp(path) != source.stamp and sha256_file(path) != source.digest:
        raise ExplorerError("store.file_changed", "{name} has changed since it was chosen (its "
                            "sha256 differs). Load it again.", name=path.name)
    if progress is not None:
        progress(0.0, Text("store.converting", "Converting {filename} into the book's layout "
                           "(the first time only)", filename=source.filename))
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
        raise ExplorerError("store.cannot_write", "Could not write the converted weights to "
                            "{folder} ({reason}). Free some disk space or set {store_env} to a "
                            "folder with room.", folder=target.parent, reason=exc.strerror or exc,
                            store_env=STORE_ENV) from None
    _trim_store(keep=target)
    return target


def _check_finite(state: dict, name: str) -> None:
    """A weight that is NaN or infinite makes every output NaN: refuse the checkpoint at load,
    not at the first sampled token."""
    broken = [n for n, t in state.items() if t.is_floating_point() and not torch.isfinite(t).all()]
    if broken:
        raise ExplorerError("weights.not_finite", "{name} holds weights that are not numbers "
                            "(NaN or infinite) in {n} tensor(s): {names}{more}. A model with "
                            "them computes nothing but NaN (a training run that diverged?). "
                            "Load another checkpoint.", name=name, n=len(broken),
                            names=", ".join(broken[:3]), more=" ..." if len(broken) > 3 else "")


def _map_stored(stored: Path, cfg: GPTConfig) -> GPTModel:
    """A model whose weights are a private memory map of the stored file: nothing is copied
    until a page is read, pages are shared by every model of that file, and writes (training)
    go to the process's own copy, never to the file."""
    info = inspect_file(stored, cfg)
    check_shapes(info)
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
