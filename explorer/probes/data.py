"""The plain data a trace returns: statistics per probe point, and the ``Trace`` itself."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..book.probe_points import POINT_LABELS

HIST_BINS = 48
STAT_NAMES = ("mean", "std", "rms", "min", "max", "abs_mean", "zero_frac", "nonfinite")
# Above this many tokens, attention patterns are kept only for the layers asked for.
ATTENTION_ALL_LAYERS_MAX_TOKENS = 256

@dataclass
class PointStats:
    """Statistics of one probe point in every layer (final-norm points: one "layer").

    ``overall[stat]`` has shape (layers,), ``per_token[stat]`` (layers, tokens); a histogram of
    ``HIST_BINS`` bins per layer spans that layer's finite minimum to maximum. ``nonfinite``
    counts inf/NaN values, which also show as inf/NaN in the other statistics.
    """

    point: str
    overall: dict[str, np.ndarray]
    per_token: dict[str, np.ndarray]
    hist_counts: np.ndarray   # (layers, HIST_BINS)
    hist_edges: np.ndarray    # (layers, HIST_BINS + 1)

    @property
    def label(self) -> str:
        return POINT_LABELS[self.point]


@dataclass
class Trace:
    token_ids: list[int]
    tokens: list[str]
    config: dict
    points: dict[str, PointStats]          # block probe points, in block order
    final: dict[str, PointStats]           # final_norm_in / final_norm_out
    attention: dict[int, np.ndarray]       # layer -> (heads, T, T), rows sum to 1
    attention_entropy: np.ndarray          # (layers, heads, T) bits per query row
    next_ids: np.ndarray                   # (T, k) top-k next-token ids at every position
    next_probs: np.ndarray                 # (T, k)
    next_texts: list[list[str]]
    lens_positions: list[int]              # positions the logit lens was read at
    lens_ids: np.ndarray                   # (layers, P) each layer's top-1 guess
    lens_probs: np.ndarray                 # (layers, P) its probability
    lens_final_probs: np.ndarray           # (layers, P) probability of the model's own top-1
    lens_texts: list[list[str]]
    seconds: float
    logits: np.ndarray | None = None       # (T, vocab) only when asked for
    notes: list[str] = field(default_factory=list)

    @property
    def n_layers(self) -> int:
        return self.config["n_layers"]

    def series(self, point: str, stat: str) -> np.ndarray:
        """One statistic of one probe point across layers, e.g. ``series("ln1_out", "std")``."""
        return self.points[point].overall[stat]

    def nbytes(self) -> int:
        """Memory held by the arrays of this trace."""
        total = 0
        for group in (self.points, self.final):
            for s in group.values():
                total += sum(a.nbytes for a in s.overall.values())
                total += sum(a.nbytes for a in s.per_token.values())
                total += s.hist_counts.nbytes + s.hist_edges.nbytes
        total += sum(a.nbytes for a in self.attention.values())
        for a in (self.attention_entropy, self.next_ids, self.next_probs, self.lens_ids,
                  self.lens_probs, self.lens_final_probs):
            total += a.nbytes
        return total + (self.logits.nbytes if self.logits is not None else 0)


def stat_rows(traces, names) -> list[dict]:
    """Each trace's statistics, a row per probe point and layer ("final": the final norm's);
    with two traces, each row names its model."""
    rows = []
    for name, traced in zip(names, traces):
        for group in (traced.points, traced.final):
            for point, s in group.items():
                for layer in range(s.overall["mean"].shape[0]):
                    row = {"model": name} if len(traces) > 1 else {}
                    row.update({"point": point, "where": POINT_LABELS[point],
                                "layer": layer if group is traced.points else "final"})
                    row.update({k: float(v[layer]) for k, v in s.overall.items()})
                    rows.append(row)
    return rows
