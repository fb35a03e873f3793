"""Two models side by side, as plain data: which config fields differ and what can be compared,
one statistic of two traces layer by layer with its difference, the difference of two attention
patterns, and the steps where two generations (``book.generate.lockstep``) part.

"A" is the session's model, "B" the one pinned beside it; a difference is always A − B.
"""
from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from ..book.config import GPTConfig

NAMES = ("A", "B")   # the models of a comparison, as every view names them

@dataclass(frozen=True)
class Comparison:
    """What two configs have in common, for the views to say what they compare."""

    differences: tuple[tuple[str, object, object], ...]   # (field, A's value, B's value)
    layers: int            # layers both have: 0 .. layers - 1 are compared
    heads: int             # heads both have in a layer
    same_vocab: bool       # both vocabularies the same size (next-token ids mean the same)
    same_context: bool     # both context windows the same length

    @property
    def same_architecture(self) -> bool:
        return not self.differences


def compare_configs(cfg_a, cfg_b) -> Comparison:
    a, b = GPTConfig.from_dict(cfg_a), GPTConfig.from_dict(cfg_b)
    differences = tuple((f.name, getattr(a, f.name), getattr(b, f.name)) for f in fields(a)
                        if getattr(a, f.name) != getattr(b, f.name))
    return Comparison(differences, min(a.n_layers, b.n_layers), min(a.n_heads, b.n_heads),
                      a.vocab_size == b.vocab_size, a.context_length == b.context_length)


def _stats(trace, point):
    if point in trace.final:
        return trace.final[point]
    return trace.points.get(point)


def series_pair(trace_a, trace_b, point: str, stat: str):
    """One statistic of one probe point across layers in both traces: (A's (layers_a,) or None,
    B's (layers_b,) or None, A − B over the layers both have, NaN where either lacks the point).
    ``None``: that model has no such probe point (no LayerNorm)."""
    a, b = _stats(trace_a, point), _stats(trace_b, point)
    series_a = None if a is None else np.asarray(a.overall[stat], dtype=np.float64)
    series_b = None if b is None else np.asarray(b.overall[stat], dtype=np.float64)
    n = min(trace_a.n_layers, trace_b.n_layers)
    if point in trace_a.final or point in trace_b.final:
        n = 1
    if series_a is None or series_b is None:
        return series_a, series_b, np.full(n, np.nan)
    return series_a, series_b, series_a[:n] - series_b[:n]


def attention_difference(weights_a, weights_b):
    """A − B of two attention patterns of the same shape ((T, T), or (heads, T, T)); None when
    their shapes differ (other head counts or lengths), which the views then say."""
    a, b = np.asarray(weights_a), np.asarray(weights_b)
    if a.shape != b.shape:
        return None
    return a.astype(np.float32) - b.astype(np.float32)


# ---------------------------------------------------------------------------------------------
# Two generations (``book.generate.lockstep`` makes them side by side)
def parted(ids_a, ids_b) -> list[bool]:
    """For each generated step, whether the two models chose different tokens (a step only one
    of them reached counts as parted)."""
    n = max(len(ids_a), len(ids_b))
    return [i >= len(ids_a) or i >= len(ids_b) or ids_a[i] != ids_b[i] for i in range(n)]


def first_parting(ids_a, ids_b) -> int | None:
    """The first step at which the two texts part, or None while they agree."""
    return next((i for i, p in enumerate(parted(ids_a, ids_b)) if p), None)


def parted_runs(ids, flags, decode) -> list[tuple[str, bool]]:
    """Generated ``ids`` as runs of (text, parted): tokens in a row with the same flag decoded
    together (a character made of several byte tokens stays whole)."""
    runs, start = [], 0
    for i in range(1, len(ids) + 1):
        if i == len(ids) or flags[i] != flags[start]:
            runs.append((decode(ids[start:i]), flags[start]))
            start = i
    return runs
