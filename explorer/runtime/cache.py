"""Built models, shared read-only between sessions, within a memory budget (least recently
used first out). A model is a pure function of (config, weights source, device, dtype), so a
session only needs to remember that key: an evicted model is rebuilt (or reloaded from its
file) identically when asked for again. The source names the weights by what they are, not by
where they lie: random + seed, a pretrained repository + revision, or a file's sha256, so two
sessions on the same checkpoint share one copy.
"""
from __future__ import annotations

import math
import os
import threading
import uuid
from collections import OrderedDict
from dataclasses import dataclass, field

from ..book.config import BYTES_PER_PARAM, GPTConfig, buffer_bytes, count_parameters
from ..book.model import GPTModel
from .build import build_model, resolve_device

BUDGET_ENV = "GPT_EXPLORER_MEMORY_MB"
BUDGET_SHARE_OF_RAM = 0.4  # leaves room for activations, other sessions and the OS


def physical_memory_bytes() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 8 * 1024 ** 3


def default_budget_bytes() -> int:
    """``GPT_EXPLORER_MEMORY_MB`` if set, else 40% of this machine's memory."""
    value = os.environ.get(BUDGET_ENV, "").strip()
    if value:
        try:
            mb = float(value)
        except ValueError:
            raise ValueError(f"{BUDGET_ENV} must be a number of MB (got {value!r}).") from None
        if not (math.isfinite(mb) and mb > 0):
            raise ValueError(f"{BUDGET_ENV} must be a positive number of MB (got {value!r}).")
        return int(mb * 1024 ** 2)
    return int(physical_memory_bytes() * BUDGET_SHARE_OF_RAM)


@dataclass(frozen=True)
class WeightsSource:
    """Where a model's weights come from. Equal sources mean equal weights: ``path`` (where
    the file lies now) and ``filename`` are left out of the comparison, the digest is not."""

    kind: str                          # "random", "pretrained", "file" or "trained"
    seed: int | None = None            # random: torch.manual_seed(seed); GPTModel(cfg)
    repo_id: str | None = None         # pretrained: the hub repository ...
    revision: str | None = None        # ... and its commit
    digest: str | None = None          # sha256 of the weights file (pretrained and file)
    filename: str | None = field(default=None, compare=False)
    path: str | None = field(default=None, compare=False)
    layout: str | None = None          # file: "book" or "gpt2" (Hugging Face's names)
    stamp: tuple | None = field(default=None, compare=False)   # (size, mtime) when hashed
    label: str | None = field(default=None, compare=False)     # trained: "trained N steps on …"

    @classmethod
    def random(cls, seed: int) -> "WeightsSource":
        return cls("random", seed=seed)

    @classmethod
    def trained(cls, label: str) -> "WeightsSource":
        """A model trained in this server's training lab: it cannot be rebuilt from its key,
        so each snapshot gets its own digest and is held for its session (``ModelCache.hold``).
        """
        return cls("trained", digest=uuid.uuid4().hex, label=label)

    @property
    def caption(self) -> str:
        """For the page: "random, seed 123", "pretrained GPT-2 small (OpenAI)",
        "from file model.safetensors (sha256 ab12cd34…)"."""
        if self.kind == "random":
            return f"random, seed {self.seed}"
        if self.kind == "trained":
            return self.label or "trained in the lab"
        if self.kind == "pretrained":
            size = PRETRAINED_NAMES.get(self.repo_id, self.repo_id)
            return f"pretrained {size} (OpenAI)"
        return f"from file {self.filename} (sha256 {(self.digest or '')[:8]}…)"


# Hub repositories of OpenAI's GPT-2 -> the name on the page.
PRETRAINED_NAMES = {"openai-community/gpt2": "GPT-2 small",
                    "openai-community/gpt2-medium": "GPT-2 medium",
                    "openai-community/gpt2-large": "GPT-2 large",
                    "openai-community/gpt2-xl": "GPT-2 XL"}


@dataclass(frozen=True)
class ModelKey:
    config: GPTConfig
    seed: int | None
    device: str
    dtype: str
    source: WeightsSource | None = None   # None: random weights from ``seed``

    def __post_init__(self):
        if self.source is None:
            object.__setattr__(self, "source", WeightsSource.random(self.seed))


def model_bytes(cfg, dtype: str = "float32") -> int:
    """What a built model holds in memory: its parameters plus buffers."""
    return count_parameters(cfg).total * BYTES_PER_PARAM[dtype] + buffer_bytes(cfg, dtype)


class ModelCache:
    def __init__(self, budget_bytes: int | None = None):
        self.budget_bytes = default_budget_bytes() if budget_bytes is None else budget_bytes
        self._models: OrderedDict[ModelKey, GPTModel] = OrderedDict()
        self._lock = threading.Lock()
        self._build_locks: dict[ModelKey, threading.Lock] = {}
        self._reserved = 0  # bytes of models being built right now
        # A session's own model (trained in the lab): counted in the budget, never evicted
        # (its key cannot rebuild it), until the session lets it go. owner -> (key, model)
        self._held: dict[str, tuple[ModelKey, GPTModel]] = {}

    def key(self, cfg, seed=123, device="auto", dtype="float32",
            source: WeightsSource | None = None) -> ModelKey:
        """Check everything about a request before anything is allocated. ``source`` None:
        random weights from ``seed``; otherwise a source from ``explorer.runtime.weights``."""
        cfg = GPTConfig.from_dict(cfg)
        self.check_budget(cfg, dtype, None if source is None or source.kind == "random"
                          else "checkpoint")
        if source is not None and source.kind != "random":
            seed = None
        return ModelKey(cfg, seed, str(resolve_device(device)), dtype, source)

    def check_budget(self, cfg, dtype="float32", what: str | None = None):
        """Refuse, before any download or allocation, a model larger than the budget."""
        need = model_bytes(cfg, dtype) if dtype in BYTES_PER_PARAM else 0
        if need > self.budget_bytes:
            # Integer MB: a float would overflow for absurd sizes such as n_layers=10**400.
            advice = ("Choose a smaller checkpoint, or raise the budget on a machine with more "
                      "memory." if what else
                      "Choose fewer layers, a smaller emb_dim or a smaller vocabulary.")
            raise ValueError(
                f"This {what or 'model'} needs {-(-need // 1024 ** 2):,} MB for its weights "
                f"({dtype}), but the memory budget is {self.budget_bytes // 1024 ** 2:,} MB "
                f"(set {BUDGET_ENV} to change it). {advice}")

    def check_together(self, keys):
        """Refuse, before anything is allocated, models that cannot be in memory at once (a
        model and the one pinned beside it for a comparison): their weights, each key counted
        once, beside the models that sessions hold (other than these)."""
        unique = list(dict.fromkeys(keys))
        sizes = [model_bytes(k.config, k.dtype) for k in unique]
        need = sum(sizes)
        with self._lock:
            others = sum(model_bytes(k.config, k.dtype) for o, (k, _) in self._held.items()
                         if k not in unique)
        allowed = self.budget_bytes - others
        if need > allowed:
            mb = 1024 ** 2
            need_mb, allowed_mb = -(-need // mb), max(allowed, 0) // mb
            each_mb = " + ".join(f"{-(-n // mb):,}" for n in sizes)
            budget_mb, held_mb = self.budget_bytes // mb, others // mb
            if others:
                raise ValueError(
                    f"The two models together need {need_mb:,} MB for their weights ({each_mb} "
                    f"MB), but {allowed_mb:,} MB are allowed: the memory budget is "
                    f"{budget_mb:,} MB ({BUDGET_ENV}) and other sessions' own models hold "
                    f"{held_mb:,} MB of it. Unpin the pinned model, or choose smaller models.")
            raise ValueError(
                f"The two models together need {need_mb:,} MB for their weights ({each_mb} MB), "
                f"but {allowed_mb:,} MB are allowed: the memory budget ({BUDGET_ENV}). Unpin "
                f"the pinned model, or choose smaller models.")

    def get_together(self, keys, progress=None) -> list[GPTModel]:
        """The models for ``keys``, all in memory at once within the budget (checked first):
        building one never evicts another of them."""
        self.check_together(keys)
        models, kept = [], []
        for key in keys:
            model, _ = self.get(key, progress, keep=kept)
            models.append(model)
            kept.append(key)
        return models

    def get(self, key: ModelKey, progress=None, keep=()) -> tuple[GPTModel, bool]:
        """The model for ``key`` and whether it was already built. ``progress(fraction,
        text)`` hears about a checkpoint's one-time conversion. ``keep``: keys that making
        room for this one must not evict (a comparison's other model)."""
        with self._lock:
            for held_key, model in self._held.values():
                if held_key == key:
                    return model, True
            if key in self._models:
                self._models.move_to_end(key)
                return self._models[key], True
            if key.source.kind == "trained":
                raise ValueError("This trained model is no longer held (its session ended or "
                                 "used another one): press Use this model in the Train tab "
                                 "again, or build a model.")
            build_lock = self._build_locks.setdefault(key, threading.Lock())
        with build_lock:  # two sessions asking for the same new model build it once
            with self._lock:
                if key in self._models:
                    self._models.move_to_end(key)
                    return self._models[key], True
                need = model_bytes(key.config, key.dtype)
                self._make_room(need, keep)
                self._reserved += need
            try:
                if key.source.kind == "random":
                    model = build_model(key.config, seed=key.seed, device=key.device,
                                        dtype=key.dtype)
                else:
                    from .weights import materialize   # weights imports this module
                    model = materialize(key.source, key.config, device=key.device,
                                        dtype=key.dtype, progress=progress)
            finally:
                with self._lock:
                    self._reserved -= need
                    self._build_locks.pop(key, None)
            with self._lock:
                self._make_room(need, keep)
                self._models[key] = model
            return model, False

    def hold(self, owner: str, key: ModelKey, model: GPTModel) -> None:
        """Keep ``owner``'s own model (one per owner; a new one replaces the old) within the
        budget: shared models are evicted to make room; if the held models alone would pass
        the budget, a ValueError says so."""
        if not isinstance(model, GPTModel):
            raise ValueError(f"hold keeps a GPTModel (got {type(model).__name__}).")
        need = model_bytes(key.config, key.dtype)
        with self._lock:
            others = sum(model_bytes(k.config, k.dtype) for o, (k, _) in self._held.items()
                         if o != owner)
            if others + need > self.budget_bytes:
                raise ValueError(
                    f"This model needs {-(-need // 1024 ** 2):,} MB; the sessions' own models "
                    f"already hold {others // 1024 ** 2:,} of the server's "
                    f"{self.budget_bytes // 1024 ** 2:,} MB budget ({BUDGET_ENV}). Try again "
                    f"later, or use a smaller model.")
            self._held.pop(owner, None)
            self._make_room(need)
            self._held[owner] = (key, model)

    def release(self, owner: str) -> bool:
        """Let go of ``owner``'s held model (its session ended). False if it held none."""
        with self._lock:
            return self._held.pop(owner, None) is not None

    def held_bytes(self) -> int:
        with self._lock:
            return sum(model_bytes(k.config, k.dtype) for k, _ in self._held.values())

    def _make_room(self, need: int, keep=()):
        """Evict the least recently used models (none of ``keep``) until ``need`` fits."""
        while self._used_bytes() + self._reserved + need > self.budget_bytes:
            victim = next((k for k in self._models if k not in keep), None)
            if victim is None:
                return
            del self._models[victim]

    def used_bytes(self) -> int:
        with self._lock:       # another session may be adding or evicting a model
            return self._used_bytes()

    def _used_bytes(self) -> int:
        return sum(model_bytes(k.config, k.dtype)
                   for k in [*self._models, *(k for k, _ in self._held.values())])

    def __contains__(self, key) -> bool:
        return key in self._models or any(k == key for k, _ in self._held.values())

    def __len__(self) -> int:
        return len(self._models)

    def clear(self):
        with self._lock:
            self._models.clear()
