"""Optional C accelerators behind one face: the rest of the explorer imports this package, never
its modules.

Every function returns None (or False) where it does not apply, and the caller then computes the
same numbers with PyTorch. ``GPT_EXPLORER_NATIVE=0`` turns them all off; they are on by default
wherever a C compiler exists. A failure to build or load, or an exception in a call, logs one
line and leaves PyTorch in charge of that library from then on. A model the decoding step does
not take (a variant missing from its tables, a dtype or device it does not handle) logs one line
per reason and decodes with PyTorch, while other models keep the C step. The step reads a model
through public descriptions only: its config and its tensors' ``state_dict()`` names.

- Decoding (``decode.c``): ``model_step`` (one token's whole forward pass over the KV cache, on
  two cores) and ``next_token_summary`` are handed to ``generate_steps(step=, summarize=)``.
- A trace's reductions: ``rows_summary`` (top-k of many rows), ``attention_rows`` (the book's
  attention weights and their entropies) and ``many_point_stats`` (``stats.c``: an activation's
  statistics in two passes over its memory).
"""
from __future__ import annotations

import functools

from ..book.errors import Text
from . import decode, stats
from .library import SWITCH_ENV, cache_dir, switched_on

__all__ = ["SWITCH_ENV", "cache_dir", "available", "stats_available", "switched_on", "warm_up",
           "decoding_label", "model_step", "next_token_summary", "rows_summary",
           "attention_rows", "many_point_stats", "hist_span"]


def available() -> bool:
    """Whether the decoding kernels are built and loaded (building them on the first call)."""
    return decode.available()


def stats_available() -> bool:
    """Whether the statistics kernel is built and loaded."""
    return stats.available()


def warm_up() -> None:
    """Build (or find in the cache) and load every kernel now rather than in a user's request."""
    decode.warm_up()
    stats.warm_up()


def decoding_label(fast_step: bool) -> Text:
    """What computed a generated token, for the page and the API."""
    if fast_step:
        return Text("native.decoding_in_c", "decoding: C, 2 threads")
    return Text("native.decoding_in_pytorch", "decoding: PyTorch")


def _guarded(module, failed):
    """``module``'s function, with any exception turned into ``failed`` and the module's
    library switched off (one log line)."""
    def wrap(fn):
        @functools.wraps(fn)
        def call(*args, **kwargs):
            try:
                return fn(*args, **kwargs)
            except Exception as exc:
                module._native.disable(f"{fn.__name__}: {type(exc).__name__}: {exc}")
                return failed(*args) if callable(failed) else failed
        call.__module__ = __name__    # pickled by name as this module's (for a GPU call)
        return call
    return wrap


model_step = _guarded(decode, None)(decode.model_step)
next_token_summary = _guarded(decode, None)(decode.next_token_summary)
rows_summary = _guarded(decode, None)(decode.rows_summary)
attention_rows = _guarded(decode, False)(decode.attention_rows)
# On failure every activation takes the careful PyTorch path, as one with inf or NaN would.
many_point_stats = _guarded(stats, lambda xs, *rest: [None] * len(xs))(stats.many_point_stats)
hist_span = stats.hist_span
