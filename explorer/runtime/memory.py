"""The memory budget: how much the server's models may hold (``GPT_EXPLORER_MEMORY_MB``, else a
share of the machine's memory), what a model holds, and the refusal of one that would not fit,
said before any download or allocation."""
from __future__ import annotations

import math
import os

from ..book.config import BYTES_PER_PARAM, buffer_bytes, count_parameters
from ..book.errors import ExplorerError, Message

BUDGET_ENV = "GPT_EXPLORER_MEMORY_MB"
BUDGET_SHARE_OF_RAM = 0.4  # leaves room for activations, other sessions and the OS


def physical_memory_bytes() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 8 * 1024 ** 3


def env_megabytes(name: str, environ=os.environ) -> int | None:
    """The environment variable ``name``, a positive number of MB, in bytes (None if unset)."""
    value = environ.get(name, "").strip()
    if not value:
        return None
    try:
        mb = float(value)
    except ValueError:
        raise ExplorerError("env.mb_not_a_number", "{env} must be a number of MB (got "
                            "{value!r}).", env=name, value=value) from None
    if not (math.isfinite(mb) and mb > 0):
        raise ExplorerError("env.mb_not_positive", "{env} must be a positive number of MB "
                            "(got {value!r}).", env=name, value=value)
    return int(mb * 1024 ** 2)


def default_budget_bytes() -> int:
    """``GPT_EXPLORER_MEMORY_MB`` if set, else 40% of this machine's memory."""
    budget = env_megabytes(BUDGET_ENV)
    return budget if budget is not None else int(physical_memory_bytes() * BUDGET_SHARE_OF_RAM)


def model_bytes(cfg, dtype: str = "float32") -> int:
    """What a built model holds in memory: its parameters plus buffers."""
    return count_parameters(cfg).total * BYTES_PER_PARAM[dtype] + buffer_bytes(cfg, dtype)


def check_budget(cfg, dtype="float32", what: Message | None = None,
                 budget_bytes: int | None = None):
    """Refuse, before any download or allocation, a model larger than the budget
    (``default_budget_bytes()`` unless given). ``what``: the weights asked for, such as
    "pretrained GPT-2 XL" (None: a model of random weights)."""
    budget_bytes = default_budget_bytes() if budget_bytes is None else budget_bytes
    need = model_bytes(cfg, dtype) if dtype in BYTES_PER_PARAM else 0
    if need > budget_bytes:
        if what is None:
            what = Message("budget.what.model", "model")
            advice = Message("budget.advice.model", "Choose fewer layers, a smaller emb_dim or "
                             "a smaller vocabulary.")
        else:
            advice = Message("budget.advice.checkpoint", "Choose a smaller checkpoint, or raise "
                             "the budget on a machine with more memory.")
        # Integer MB: a float would overflow for absurd sizes such as n_layers=10**400.
        raise ExplorerError("budget.too_large", "This {what} needs {need_mb:,} MB for its "
                            "weights ({dtype}), but the memory budget is {budget_mb:,} MB (set "
                            "{budget_env} to change it). {advice}", what=what,
                            need_mb=-(-need // 1024 ** 2), dtype=dtype,
                            budget_mb=budget_bytes // 1024 ** 2, budget_env=BUDGET_ENV,
                            advice=advice)
