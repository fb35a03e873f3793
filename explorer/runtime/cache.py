"""Built models, shared read-only between sessions, within a memory budget (least recently
used first out). A model is a pure function of its key (``sources.ModelKey``: config, weights
source, device, dtype), so a session only needs to remember that key: an evicted model is
rebuilt (or mapped again from the store of converted checkpoints) identically when asked for
again, and two sessions on the same checkpoint share one copy.
"""
from __future__ import annotations

import threading
from collections import OrderedDict

from ..book.config import GPTConfig
from ..book.errors import ExplorerError, Message
from ..book.model import GPTModel
from .build import build_model, resolve_device
from .memory import BUDGET_ENV, check_budget, default_budget_bytes, model_bytes
from .sources import ModelKey, WeightsSource
from .store import materialize


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
        # Results shared between sessions (``results.SharedResults``) use the budget's free
        # room beside the models, and give it back first when a model needs it.
        self.results = None

    def room_bytes(self) -> int:
        """What the budget has free beside the models (and those being built)."""
        with self._lock:
            return max(0, self.budget_bytes - self._used_bytes() - self._reserved)

    def key(self, cfg, seed=123, device="auto", dtype="float32",
            source: WeightsSource | None = None) -> ModelKey:
        """Check everything about a request before anything is allocated. ``source`` None:
        random weights from ``seed``; otherwise a source from ``hub`` or ``checkpoints``."""
        cfg = GPTConfig.from_dict(cfg)
        self.check_budget(cfg, dtype, None if source is None or source.kind == "random"
                          else Message("budget.what.a_checkpoint", "checkpoint"))
        if source is not None and source.kind != "random":
            seed = None
        return ModelKey(cfg, seed, str(resolve_device(device)), dtype, source)

    def check_budget(self, cfg, dtype="float32", what: Message | None = None):
        """Refuse, before any download or allocation, a model larger than the budget."""
        check_budget(cfg, dtype, what, self.budget_bytes)

    def check_together(self, keys):
        """Refuse, before anything is allocated, models that cannot be in memory at once (a
        model and the one pinned beside it for a comparison): their weights, each key counted
        once, beside the models that sessions hold (other than these)."""
        unique = list(dict.fromkeys(k.weights_key for k in keys))
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
                raise ExplorerError("pair.over_budget_with_held", "The two models together need "
                                    "{need_mb:,} MB for their weights ({each_mb} MB), but "
                                    "{allowed_mb:,} MB are allowed: the memory budget is "
                                    "{budget_mb:,} MB ({budget_env}) and other sessions' own "
                                    "models hold {held_mb:,} MB of it. Unpin the pinned model, "
                                    "or choose smaller models.", need_mb=need_mb, each_mb=each_mb,
                                    allowed_mb=allowed_mb, budget_mb=budget_mb,
                                    budget_env=BUDGET_ENV, held_mb=held_mb)
            raise ExplorerError("pair.over_budget", "The two models together need {need_mb:,} MB "
                                "for their weights ({each_mb} MB), but {allowed_mb:,} MB are "
                                "allowed: the memory budget ({budget_env}). Unpin the pinned "
                                "model, or choose smaller models.", need_mb=need_mb,
                                each_mb=each_mb, allowed_mb=allowed_mb, budget_env=BUDGET_ENV)

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
        room for this one must not evict (a comparison's other model). A key with
        interventions gets the model of its weights (they act while it runs)."""
        key, keep = key.weights_key, [k.weights_key for k in keep]
        with self._lock:
            for held_key, model in self._held.values():
                if held_key == key:
                    return model, True
            if key in self._models:
                self._models.move_to_end(key)
                return self._models[key], True
            if key.source.kind == "trained":
                raise ExplorerError("cache.trained_not_held", "This trained model is no longer "
                                    "held (its session ended or used another one): press Use "
                                    "this model in the Train tab again, or build a model.")
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

    def peek(self, key: ModelKey) -> GPTModel | None:
        """The model of ``key`` if the cache has it now, else None: no lock, no build. A GPU
        call's worker looks here (a fork of the server: a lock that another thread held at
        the fork stays held in it, and a model it built would be a second copy)."""
        key = key.weights_key
        model = self._models.get(key)
        if model is None:
            model = next((m for k, m in list(self._held.values()) if k == key), None)
        return model

    def hold(self, owner: str, key: ModelKey, model: GPTModel) -> None:
        """Keep ``owner``'s own model (one per owner; a new one replaces the old) within the
        budget: shared models are evicted to make room; if the held models alone would pass
        the budget, a ValueError says so."""
        if not isinstance(model, GPTModel):
            raise TypeError(f"hold keeps a GPTModel (got {type(model).__name__}).")
        need = model_bytes(key.config, key.dtype)
        with self._lock:
            others = sum(model_bytes(k.config, k.dtype) for o, (k, _) in self._held.items()
                         if o != owner)
            if others + need > self.budget_bytes:
                raise ExplorerError("cache.hold_over_budget", "This model needs {need_mb:,} MB; "
                                    "the sessions' own models already hold {held_mb:,} of the "
                                    "server's {budget_mb:,} MB budget ({budget_env}). Try again "
                                    "later, or use a smaller model.",
                                    need_mb=-(-need // 1024 ** 2), held_mb=others // 1024 ** 2,
                                    budget_mb=self.budget_bytes // 1024 ** 2,
                                    budget_env=BUDGET_ENV)
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
        """Make ``need`` fit: shared results go first, then the least recently used models
        (none of ``keep``)."""
        if self.results is not None:
            self.results.free(self._used_bytes() + self._reserved + need
                              + self.results.used_bytes() - self.budget_bytes)
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
