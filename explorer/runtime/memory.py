"""The memory budget: how much the server's models may hold (``GPT_EXPLORER_MEMORY_MB``, else a
share of the machine's memory), what a model holds, and the refusal of one that would not fit,
said before any download or allocation."""
from __future__ import annotations

import math
import os

from ..book.config import BYTES_PER_PARAM, buffer_bytes, count_parameters

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


def model_bytes(cfg, dtype: str = "float32") -> int:
    """What a built model holds in memory: its parameters plus buffers."""
    return count_parameters(cfg).total * BYTES_PER_PARAM[dtype] + buffer_bytes(cfg, dtype)


def check_budget(cfg, dtype="float32", what: str | None = None,
                 budget_bytes: int | None = None):
    """Refuse, before any download or allocation, a model larger than the budget
    (``default_budget_bytes()`` unless given)."""
    budget_bytes = default_budget_bytes() if budget_bytes is None else budget_bytes
    need = model_bytes(cfg, dtype) if dtype in BYTES_PER_PARAM else 0
    if need > budget_bytes:
        # Integer MB: a float would overflow for absurd sizes such as n_layers=10**400.
        advice = ("Choose a smaller checkpoint, or raise the budget on a machine with more "
                  "memory." if what else
                  "Choose fewer layers, a smaller emb_dim or a smaller vocabulary.")
        raise ValueError(
            f"This {what or 'model'} needs {-(-need // 1024 ** 2):,} MB for its weights "
            f"({dtype}), but the memory budget is {budget_bytes // 1024 ** 2:,} MB "
            f"(set {BUDGET_ENV} to change it). {advice}")
