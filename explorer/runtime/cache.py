"""Built models, shared read-only between sessions, within a memory budget (least recently
used first out). A model is a pure function of (config, seed, device, dtype), so a session
only needs to remember that key: an evicted model is rebuilt identically when asked for again.
"""
from __future__ import annotations

import math
import os
import threading
from collections import OrderedDict
from dataclasses import dataclass

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
class ModelKey:
    config: GPTConfig
    seed: int
    device: str
    dtype: str


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

    def key(self, cfg, seed=123, device="auto", dtype="float32") -> ModelKey:
        """Check everything about a request before anything is allocated."""
        cfg = GPTConfig.from_dict(cfg)
        need = model_bytes(cfg, dtype) if dtype in BYTES_PER_PARAM else 0
        if need > self.budget_bytes:
            # Integer MB: a float would overflow for absurd sizes such as n_layers=10**400.
            raise ValueError(
                f"This model needs {-(-need // 1024 ** 2):,} MB for its weights, but the memory "
                f"budget is {self.budget_bytes // 1024 ** 2:,} MB (set {BUDGET_ENV} to change "
                f"it). Choose fewer layers, a smaller emb_dim or a smaller vocabulary.")
        return ModelKey(cfg, seed, str(resolve_device(device)), dtype)

    def get(self, key: ModelKey) -> tuple[GPTModel, bool]:
        """The model for ``key`` and whether it was already built."""
        with self._lock:
            if key in self._models:
                self._models.move_to_end(key)
                return self._models[key], True
            build_lock = self._build_locks.setdefault(key, threading.Lock())
        with build_lock:  # two sessions asking for the same new model build it once
            with self._lock:
                if key in self._models:
                    self._models.move_to_end(key)
                    return self._models[key], True
                need = model_bytes(key.config, key.dtype)
                self._make_room(need)
                self._reserved += need
            try:
                model = build_model(key.config, seed=key.seed, device=key.device,
                                    dtype=key.dtype)
            finally:
                with self._lock:
                    self._reserved -= need
                    self._build_locks.pop(key, None)
            with self._lock:
                self._make_room(need)
                self._models[key] = model
            return model, False

    def _make_room(self, need: int):
        while self._models and self.used_bytes() + self._reserved + need > self.budget_bytes:
            self._models.popitem(last=False)

    def used_bytes(self) -> int:
        return sum(model_bytes(k.config, k.dtype) for k in self._models)

    def __contains__(self, key) -> bool:
        return key in self._models

    def __len__(self) -> int:
        return len(self._models)

    def clear(self):
        with self._lock:
            self._models.clear()
