"""OpenAI's GPT-2 from the Hugging Face hub: its four sizes (``GPT2_SIZES``), the download of
``model.safetensors`` with progress, and what to do where the hub cannot be reached."""
from __future__ import annotations

import os
import socket
from pathlib import Path
from urllib.parse import urlsplit

from ..book.config import GPT2_BY_REPO, GPT2_SIZES, GPTConfig
from ..book.errors import ExplorerError, Message, Text
from ..book.load_weights import gpt2_config
from .checkpoints import check_gpt2, read_safetensors_header, sha256_file, file_stamp
from .file_config import WEIGHTS_FILE
from .memory import check_budget
from .sources import WeightsSource

# How long the hub's host may take to accept a connection before it counts as unreachable.
# huggingface_hub itself retries an unreachable hub with back-off (~23 s) before it looks in
# its cache: one quick connection first answers an offline machine in seconds.
REACH_TIMEOUT_S = 3.0

# "small, medium, large" and "xl", for "... sizes small, medium, large and xl"
_SHORT = [size.short for size in GPT2_SIZES.values()]
_SIZES, _LAST = ", ".join(_SHORT[:-1]), _SHORT[-1]


def _size_name(size: str) -> str:
    if not isinstance(size, str):
        raise ExplorerError("hub.size_not_text", "The GPT-2 size must be one of {sizes} and "
                            "{last} (got {size!r}).", sizes=_SIZES, last=_LAST, size=size)
    name = size if size.startswith("gpt2-") else f"gpt2-{size}"
    if name not in GPT2_SIZES:
        raise ExplorerError("hub.unknown_size", "OpenAI's GPT-2 comes in sizes {sizes} and "
                            "{last} (got {size!r}).", sizes=_SIZES, last=_LAST, size=size)
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
            progress(fraction, Text("hub.downloading", "Downloading {label}: {done:,.0f} of "
                                    "{total:,.0f} MB", label=label, done=self._done / 1e6,
                                    total=total / 1e6))
            return super().update(n)

    return Reporter


def pretrained_source(size: str = "gpt2-small", progress=None, *, budget_bytes: int | None = None,
                      dtype: str = "float32", revision: str | None = None,
                      cache_dir: str | None = None, endpoint: str | None = None,
                      download=None) -> tuple[GPTConfig, WeightsSource]:
    """OpenAI's GPT-2 ``size`` ("small", "medium", "large", "xl", or "gpt2-small" ...): checks
    the budget, then takes ``model.safetensors`` from ``huggingface_hub``'s cache, without
    asking the hub, or else downloads it through ``huggingface_hub`` (``HF_HUB_OFFLINE=1`` is
    respected), reporting bytes to
    ``progress(fraction, text)``. ``download`` replaces ``hf_hub_download`` in tests only."""
    name = _size_name(size)
    cfg = gpt2_config(name)
    repo_id, page_name = GPT2_SIZES[name].repo_id, GPT2_SIZES[name].page_name
    # Before any download: GPT-2 XL is 5,942 MB at float32.
    check_budget(cfg, dtype, Message("budget.what.pretrained", "pretrained {name}",
                                     name=page_name), budget_bytes)

    from huggingface_hub import constants, hf_hub_download
    from huggingface_hub.errors import LocalEntryNotFoundError
    download = download or hf_hub_download
    label = f"{page_name} ({repo_id})"
    if progress is not None:
        progress(0.0, Text("hub.looking", "Looking for {label} in the Hugging Face cache",
                           label=label))
    offline = constants.is_offline_mode()
    try:
        try:   # the cache first, without a word to the hub (a Space preloads it: README)
            path = download(repo_id, WEIGHTS_FILE, revision=revision, cache_dir=cache_dir,
                            endpoint=endpoint, local_files_only=True)
        except LocalEntryNotFoundError:
            if offline or not hub_reachable(endpoint or constants.ENDPOINT):
                raise
            path = download(repo_id, WEIGHTS_FILE, revision=revision, cache_dir=cache_dir,
                            endpoint=endpoint,
                            tqdm_class=_progress_class(progress, label) if progress else None)
    except LocalEntryNotFoundError:
        raise ExplorerError.of(_offline_message(repo_id, offline)) from None
    except Exception as exc:  # noqa: BLE001 - repository gone, disk full, a proxy's error page
        raise ExplorerError("hub.download_failed", "Could not download {weights_file} of "
                            "{repo_id}: {kind}: {error}", weights_file=WEIGHTS_FILE,
                            repo_id=repo_id, kind=type(exc).__name__, error=str(exc)) from None
    if progress is not None:
        progress(1.0, Text("hub.here", "{label}: {weights_file} is here", label=label,
                           weights_file=WEIGHTS_FILE))
    path = Path(path)
    header = read_safetensors_header(path)
    check_gpt2(header.shapes, cfg, path.name)
    # The hub cache keeps files as snapshots/<commit>/<file> -> blobs/<sha256 of the file>.
    commit = path.parent.name if path.parent.parent.name == "snapshots" else (revision or "main")
    blob = Path(os.path.realpath(path)).name
    digest = blob if len(blob) == 64 and all(c in "0123456789abcdef" for c in blob) else None
    source = WeightsSource("pretrained", repo_id=repo_id, revision=commit,
                           digest=digest or sha256_file(path), filename=WEIGHTS_FILE,
                           path=str(path), layout="gpt2", stamp=file_stamp(path))
    return cfg, source


def hub_reachable(endpoint: str, timeout: float = REACH_TIMEOUT_S) -> bool:
    """Whether the hub's host accepts a connection within ``timeout`` seconds."""
    url = urlsplit(endpoint)
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        socket.create_connection((url.hostname, port), timeout=timeout).close()
        return True
    except (OSError, ValueError):   # no such name, refused, timed out; a malformed endpoint
        return False


def _offline_message(repo_id: str, offline: bool) -> Message:
    why = (Message("hub.offline_is_set", "HF_HUB_OFFLINE is set, so nothing is downloaded")
           if offline else
           Message("hub.unreachable", "the Hugging Face hub cannot be reached from here"))
    return Message("hub.not_here", "The weights of {name} are not on this machine and {why}. "
                   "Either: (1) on a machine with internet run `hf download {repo_id} "
                   "{weights_file}` and copy the folder {folder} into this machine's Hugging "
                   "Face cache (~/.cache/huggingface/hub, or $HF_HOME/hub); or (2) download "
                   "https://huggingface.co/{repo_id}/resolve/main/{weights_file} and load that "
                   "file with 'from file' (give its path, or upload it).",
                   name=GPT2_BY_REPO[repo_id].page_name, why=why, repo_id=repo_id,
                   weights_file=WEIGHTS_FILE, folder="models--" + repo_id.replace("/", "--"))
