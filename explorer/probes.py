"""A forward pass that records what happens inside the model, as plain data (a ``Trace``).

Where each statistic is measured (the names are the probe points in ``explorer.model``):

=================  ==============================================================================
``resid_pre``      the residual stream entering the block
``ln1_in``         the input of ``norm1`` ("before LayerNorm"). Pre-LN (book): = ``resid_pre``.
                   Post-LN: the sum ``resid_pre + attention output``.
``ln1_out``        the output of ``norm1`` after ``scale`` and ``shift`` ("after LayerNorm")
``attn_out``       the output of multi-head attention (after ``out_proj``, before dropout/shortcut)
``resid_mid``      the residual stream after the attention sub-block (pre-LN: = ``ln2_in``)
``ln2_in``         the input of ``norm2``; ``ln2_out`` its output after scale and shift
``ff_pre``         the feed-forward hidden layer before the activation (first Linear's output)
``ff_post``        the same hidden layer after the activation (GELU/ReLU/SiLU)
``ff_out``         the output of the feed-forward module (second Linear)
``resid_post``     the block's output
``final_norm_in``  the input of ``final_norm`` (= the last block's output); ``final_norm_out``
                   its output, which the output head turns into logits
=================  ==============================================================================

A model without normalisation has no ``ln*`` points. Recording happens only inside ``trace``;
raw activations are reduced to statistics as they are recorded, so memory stays bounded.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace

import numpy as np
import torch

from .model import BLOCK_PROBE_POINTS, GPTModel, model_device, recording
from .tokenizer import as_token_ids, get_tokenizer

HIST_BINS = 48
STAT_NAMES = ("mean", "std", "rms", "min", "max", "abs_mean", "zero_frac", "nonfinite")
# Above this many tokens, attention patterns are kept only for the layers asked for.
ATTENTION_ALL_LAYERS_MAX_TOKENS = 256

POINT_LABELS = {
    "resid_pre": "residual stream entering the block",
    "ln1_in": "norm1 input (before LayerNorm)",
    "ln1_out": "norm1 output (after LayerNorm, scale and shift)",
    "attn_out": "attention output",
    "resid_mid": "residual stream after attention",
    "ln2_in": "norm2 input (before LayerNorm)",
    "ln2_out": "norm2 output (after LayerNorm, scale and shift)",
    "ff_pre": "feed-forward hidden, before activation",
    "ff_post": "feed-forward hidden, after activation",
    "ff_out": "feed-forward output",
    "resid_post": "block output",
    "final_norm_in": "final_norm input",
    "final_norm_out": "final_norm output",
}


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


def trace(model: GPTModel, token_ids, *, attention_layers="auto", lens="last", top_k=5,
          keep_logits=False, entropy=True, tokenizer=None) -> Trace:
    """Run one forward pass over ``token_ids`` and record what happens inside.

    attention_layers: "auto" (every layer up to ``ATTENTION_ALL_LAYERS_MAX_TOKENS`` tokens,
        none beyond), "all", None, or a list of layer indices.
    entropy: per-head attention entropy for every layer (it needs the book's explicit
        attention in every block). False: NaN entropy, and the blocks whose weights are not
        kept take the fused attention (for a view that needs neither, like the logit lens).
    lens: the logit lens (final norm + output head on every block's output) at the "last"
        position, at "all" positions, None, or a list of positions. Reading it at every
        position runs the vocabulary-wide head once per layer, which costs more than the
        forward pass itself for GPT-2-sized vocabularies.

    The output head runs once, inside the recorder, on the final norm's output for every
    position together with the few lens rows (``_Recorder.head``), and the forward pass stops
    there. The logits are therefore the model's ``out_head(final_norm(x))`` as in a plain
    forward, and the lens costs a few more rows of that one product.
    """
    cfg = model.cfg
    ids = _check_ids(token_ids, cfg)
    n = len(ids)
    keep_layers = _attention_layers(attention_layers, n, cfg.n_layers)
    positions = _lens_positions(lens, n)
    if isinstance(top_k, bool) or not isinstance(top_k, int) or not 1 <= top_k <= cfg.vocab_size:
        raise ValueError(f"top_k must be between 1 and {cfg.vocab_size} (got {top_k!r}).")
    tokenizer = tokenizer or get_tokenizer()

    started = time.perf_counter()
    recorder = _Recorder(model, keep_layers, positions, n, top_k, keep_logits, entropy)
    device = model_device(model)
    try:
        with torch.inference_mode(), recording(recorder):
            model(torch.tensor([ids], device=device))
        raise RuntimeError("The model never reached its final_norm_out probe point.")
    except _HeadComputed:   # the recorder ran the output head itself: the forward pass is done
        pass
    with torch.inference_mode():
        next_ids, next_probs = recorder.next_ids, recorder.next_probs       # (T, k)
        lens_ids, lens_probs, lens_final = _logit_lens(model, recorder, positions, next_ids,
                                                        next_probs)
        next_ids, next_probs = next_ids.cpu().numpy(), next_probs.cpu().numpy()
    out = recorder.result()
    seconds = time.perf_counter() - started

    piece = _piece_fn(tokenizer)
    notes = []
    if keep_layers != set(range(cfg.n_layers)) and attention_layers == "auto":
        notes.append(f"Attention patterns are kept for the layers asked for only beyond "
                     f"{ATTENTION_ALL_LAYERS_MAX_TOKENS} tokens (this input has {n}).")
    if any(s.overall["nonfinite"].any() for s in out["points"].values()):
        notes.append("Some activations are inf or NaN: the values overflowed.")
    return Trace(
        token_ids=ids, tokens=[piece(t) for t in ids], config=cfg.to_dict(),
        points=out["points"], final=out["final"], attention=out["attention"],
        attention_entropy=out["entropy"],
        next_ids=next_ids, next_probs=next_probs,
        next_texts=[[piece(t) for t in row] for row in next_ids.tolist()],
        lens_positions=positions, lens_ids=lens_ids, lens_probs=lens_probs,
        lens_final_probs=lens_final,
        lens_texts=[[piece(t) for t in row] for row in lens_ids.tolist()],
        seconds=seconds, logits=recorder.logits.float().cpu().numpy() if keep_logits else None,
        notes=notes)


def with_attention_of_layer(model: GPTModel, traced: Trace, layer: int) -> Trace:
    """``traced`` with the attention weights of ``layer`` (heads, T, T) in place of any it
    kept: for long inputs, whose trace keeps none. Runs the blocks up to ``layer`` only, so
    layer 0 of a 1,024-token prompt costs a twelfth of a forward pass of GPT-2 small, and a
    session never holds more than one layer of T x T weights."""
    layer = next(iter(_attention_layers([layer], len(traced.token_ids), model.cfg.n_layers)))
    recorder = _LayerAttention(layer)
    try:
        with torch.inference_mode(), recording(recorder):
            model(torch.tensor([traced.token_ids], device=model_device(model)))
        raise RuntimeError("The model never reached the attention of the chosen layer.")
    except _LayerAttention.Done:
        pass
    return replace(traced, attention={layer: recorder.weights})


class _LayerAttention:
    """Keeps the attention weights of one block and stops the forward pass right there."""

    class Done(Exception):
        pass

    def __init__(self, layer):
        self.layer, self.current, self.weights = layer, -1, None

    def wants_attention(self):
        # The explicit path up to the chosen block, as in a trace: the very same weights.
        return self.current <= self.layer

    def record(self, name, x):
        if name == "resid_pre":
            self.current += 1
        elif name == "attn_pattern" and self.current == self.layer:
            self.weights = x[0].float().cpu().numpy()
            raise self.Done


def trace_peak_bytes(cfg, n_tokens: int) -> int:
    """Memory a trace of ``n_tokens`` needs at its peak, beyond the model: the book's attention
    computes (n_heads, T, T) weights in every layer (about three such float32 arrays at once),
    and the output head at most ``_HEAD_ROWS`` positions of (vocab_size) logits at a time."""
    return 12 * cfg.n_heads * n_tokens ** 2 + 4 * cfg.vocab_size * min(n_tokens, _HEAD_ROWS)


def longest_trace(cfg, max_bytes: float) -> int:
    """The most tokens whose trace fits in ``max_bytes`` (0 if not even one does)."""
    low, high = 0, cfg.context_length
    while low < high:                       # trace_peak_bytes grows with n: bisect
        middle = (low + high + 1) // 2
        if trace_peak_bytes(cfg, middle) <= max_bytes:
            low = middle
        else:
            high = middle - 1
    return low


# ---------------------------------------------------------------------------------------------
class _HeadComputed(Exception):
    """Raised at the final_norm_out probe point once the recorder has computed the logits:
    all that is left of the model's forward pass is that same output head."""


class _Recorder:
    """Receives the probe points of one forward pass and reduces each block's activations to
    statistics as soon as the block ends, so no raw activation outlives its block.

    The activations of one block and one width are stacked and reduced together: a few dozen
    tensor operations per block rather than a few dozen per activation. That matters most on a
    busy machine, where every multi-threaded operation may wait for a descheduled thread.
    What it keeps (per-token sums, histogram counts, entropies, lens inputs) goes into buffers
    allocated up front: thousands of small results allocated between the forward pass's large
    temporaries would pin the allocator's heap and keep freed memory from returning to the
    system (the peak RSS of a T=1024 trace then varied from 1x to 2.5x a plain forward's).
    """

    def __init__(self, model, keep_layers, lens_positions, n_tokens, top_k=5, keep_logits=False,
                 entropy=True):
        cfg = model.cfg
        device = model_device(model)
        self.model = model
        self.keep_layers = keep_layers
        self.lens_positions = lens_positions
        self.layer = -1
        self.current: dict[str, dict[str, torch.Tensor]] = {}
        self.block_stats: list[dict[str, dict[str, torch.Tensor]]] = []
        self.final_stats: dict[str, dict[str, torch.Tensor]] = {}
        self.attention: dict[int, torch.Tensor] = {}
        capacity = cfg.n_layers * len(BLOCK_PROBE_POINTS) + 2
        self.per_token = torch.empty((capacity, 6, n_tokens), device=device)
        self.hist = torch.empty((capacity, HIST_BINS + 1), dtype=torch.int64, device=device)
        self.used = 0                                 # rows of per_token / hist filled so far
        self.wants_entropy = entropy
        self.entropy = (torch.empty if entropy else torch.zeros)(
            (cfg.n_layers, cfg.n_heads, n_tokens), device=device)
        self.lens_inputs = torch.empty((cfg.n_layers, len(lens_positions), cfg.emb_dim),
                                       dtype=model.tok_emb.weight.dtype, device=device)
        self.lens_index = torch.tensor(lens_positions, dtype=torch.int64, device=device)
        self.top_k, self.keep_logits = top_k, keep_logits
        self.next_ids = self.next_probs = None         # (T, top_k), set at final_norm_out
        self.logits: torch.Tensor | None = None        # (T, vocab) when keep_logits
        self.lens_logits: torch.Tensor | None = None   # ((layers - 1) * P, vocab) or None
        # This block's distinct activations, and which of them each probe point recorded: a
        # point that is the very same tensor as another (pre-LN: resid_pre is ln1_in) is
        # reduced once. The previous block's output is the next block's resid_pre (and the last
        # one is final_norm_in): its statistics are reused. Holding the tensors keeps ids unique.
        self.pending: list[torch.Tensor] = []
        self.names: dict[str, int] = {}
        self.last_output: torch.Tensor | None = None
        self.last_output_stats: dict | None = None

    def wants_attention(self) -> bool:
        # The explicit path: its weights give every head's entropy (or the kept layers').
        return self.wants_entropy or self.layer in self.keep_layers

    def record(self, name, x):
        if name == "attn_pattern":
            weights = x[0].float()                                          # (heads, T, S)
            # sum(w * ln w) per query row (negated and turned into bits in result()); xlogy(0,
            # 0) = 0 for the masked future. A few heads at a time: small temporaries.
            step = max(1, 2 ** 21 // weights[0].numel())
            for start in range(0, weights.shape[0], step):
                w = weights[start:start + step]
                torch.sum(torch.special.xlogy(w, w), dim=-1,
                          out=self.entropy[self.layer, start:start + step])
            if self.layer in self.keep_layers:
                self.attention[self.layer] = weights.cpu()
            return
        if name == "resid_pre":
            self.layer += 1
            self.current = {}
        target = self.final_stats if name.startswith("final_norm") else self.current
        if x is self.last_output:
            target[name] = self.last_output_stats
        else:
            index = next((i for i, seen in enumerate(self.pending) if seen is x), None)
            if index is None:
                index = len(self.pending)
                self.pending.append(x)
            self.names[name] = index
        if name == "resid_post":
            self._reduce_pending(target)
            if self.lens_positions:
                torch.index_select(x[0], 0, self.lens_index, out=self.lens_inputs[self.layer])
            self.block_stats.append(self.current)
            self.last_output, self.last_output_stats = x, self.current[name]
        elif name == "final_norm_out":
            self._reduce_pending(target)
            self.last_output = self.last_output_stats = None
            self.head(x[0])
            raise _HeadComputed  # stop the model before it runs the same head again

    def _reduce_pending(self, target):
        by_width: dict[int, list[int]] = {}
        for i, x in enumerate(self.pending):
            by_width.setdefault(x.shape[-1], []).append(i)
        stats = [None] * len(self.pending)
        for indices in by_width.values():
            rows = slice(self.used, self.used + len(indices))
            self.used += len(indices)
            group = _group_stats([self.pending[i][0] for i in indices], self.per_token[rows],
                                 self.hist[rows])
            for i, s in zip(indices, group):
                stats[i] = s
        for name, i in self.names.items():
            target[name] = stats[i]
        self.pending, self.names = [], {}

    def head(self, normed):
        """The model's output head on the final norm's output (T, emb_dim), reduced to the
        top-k next tokens at every position. Up to ``_HEAD_ROWS`` positions, the lens inputs of
        the earlier blocks join the same product when they are few (the vocabulary-wide
        weights are read once for all of them); longer inputs go ``_HEAD_ROWS`` positions at a
        time, so that (T, vocab) logits are never held at once (206 MB for GPT-2 at T=1024),
        unless they were asked for."""
        n = normed.shape[0]
        extra = self.lens_inputs[:-1].flatten(0, 1)                        # ((L-1)*P, emb)
        if n <= _HEAD_ROWS:
            if 0 < extra.shape[0] <= _HEAD_ROWS:
                logits = self.model.out_head(torch.cat([normed, self.model.final_norm(extra)]))
                logits, self.lens_logits = logits[:n], logits[n:]
            else:
                logits = self.model.out_head(normed)
            self.next_ids, self.next_probs = _top_probs(logits, self.top_k)
            self.logits = logits if self.keep_logits else None
            return
        ids, probs, kept = [], [], []
        for start in range(0, n, _HEAD_ROWS):
            logits = self.model.out_head(normed[start:start + _HEAD_ROWS])
            chunk_ids, chunk_probs = _top_probs(logits, self.top_k)
            ids.append(chunk_ids)
            probs.append(chunk_probs)
            if self.keep_logits:
                kept.append(logits)
        self.next_ids, self.next_probs = torch.cat(ids), torch.cat(probs)
        self.logits = torch.cat(kept) if self.keep_logits else None

    def result(self):
        names = [p for p in BLOCK_PROBE_POINTS if self.block_stats and p in self.block_stats[0]]
        points = {p: _to_point_stats(p, [layer[p] for layer in self.block_stats]) for p in names}
        final = {p: _to_point_stats(p, [s]) for p, s in self.final_stats.items()}
        entropy = (self.entropy / -math.log(2)).cpu().numpy()
        if not self.wants_entropy:        # not computed: NaN, not a misleading 0 bits
            entropy[[layer for layer in range(len(entropy)) if layer not in self.keep_layers]] \
                = np.nan
        attention = {k: v.numpy() for k, v in self.attention.items()}
        return {"points": points, "final": final, "attention": attention, "entropy": entropy}


def _group_stats(xs: list[torch.Tensor], per_token: torch.Tensor, hist: torch.Tensor) -> list:
    """Statistics of P activations of one width (each (T, width)), reduced together.

    Per-token sums go into ``per_token`` (P, 6, T): sum, sum of squares, min, max, sum of
    absolute values, count of non-zeros (each one vectorised pass over the stack); histogram
    counts into ``hist`` (P, HIST_BINS + 1), the last bin for the maximum. Everything derived
    from these (means, std, RMS, histogram edges, figures over the whole tensor) is computed
    later for all layers at once (``_to_point_stats``). Returns one small dict per activation.
    """
    x = (xs[0][None] if len(xs) == 1 else torch.stack(xs)).float()         # (P, T, width)
    p, _, width = x.shape
    total = x.sum(-1)                                                       # (P, T)
    sq_total = torch.linalg.vector_norm(x, dim=-1).square_()
    lo, hi = x.amin(-1), x.amax(-1)
    scratch = torch.abs(x)
    abs_total = scratch.sum(-1)
    nonzero = scratch.sign_().sum(-1)                       # sign(|x|): 1 unless x == 0
    ranges = torch.stack([lo.amin(-1), hi.amax(-1)], dim=1).tolist()       # P x [lo, hi]
    # variance = sq_total / width - mean^2 loses precision when a token's mean is large
    # against its spread (mean^2 > 10 variance): then sum the squares about the mean instead.
    imprecise = (11 * total.square() > 10 * width * sq_total).any(-1).tolist()
    stats = [{"sq_dev": None, "nonfinite": None, "width": width, "per_token": per_token[i],
              "hist_counts": hist[i]} for i in range(p)]
    fast = True
    for i, (a, b) in enumerate(ranges):
        if imprecise[i]:
            stats[i]["sq_dev"] = torch.linalg.vector_norm(
                x[i] - total[i, :, None] / width, dim=-1).square_()
        if not (math.isfinite(a) and math.isfinite(b)):
            # inf or NaN somewhere (rare): count them, and count zeros exactly (sign(NaN) is
            # NaN); the histogram then covers the finite values only.
            finite = torch.isfinite(x[i])
            stats[i]["nonfinite"] = (~finite).sum(-1).to(total.dtype)
            nonzero[i] = (x[i] != 0).sum(-1)
            fast = False
        else:
            span = _hist_span(a, b)
            stats[i]["hist_range"] = (a, span)
            fast = fast and max(abs(a), abs(b)) * HIST_BINS / span < 1e5
    torch.stack([total, sq_total, lo, hi, abs_total, nonzero], dim=1, out=per_token)
    if fast:
        # bin = floor((x - lo) * HIST_BINS / span) for all P at once: x * scale + offset in one
        # fused pass. Its rounding error (< 0.02 of a bin while |x| * scale < 1e5) can only move
        # a value that sits on a bin edge; one guard slot below each point's bins takes values
        # that round to just under lo (truncation toward zero), and is counted as bin 0.
        slots = HIST_BINS + 2
        scales = [HIST_BINS / s["hist_range"][1] for s in stats]
        offset = torch.tensor([1.0 - s["hist_range"][0] * scale + i * slots
                               for i, (s, scale) in enumerate(zip(stats, scales))],
                              device=x.device)
        # A (P, 1, width) addend keeps the fused kernel vectorised along the width.
        offset = offset.view(p, 1, 1).expand(p, 1, width).contiguous()
        torch.addcmul(offset, x, torch.tensor(scales, device=x.device).view(p, 1, 1),
                      out=scratch)
        counts = torch.bincount(scratch.to(torch.int32).view(-1), minlength=p * slots)
        counts = counts.view(p, slots)
        hist.copy_(counts[:, 1:])
        hist[:, 0] += counts[:, 0]
    else:
        for i in range(p):
            counts, stats[i]["hist_range"] = _exact_histogram(x[i])
            hist[i] = counts
    return stats


def _exact_histogram(x):
    """HIST_BINS + 1 counts (the last for the maximum) of the finite values of ``x`` over their
    range, and that range as (lo, span): the careful path for inf/NaN and for values far from
    0 relative to their spread."""
    values = x[torch.isfinite(x)]
    lo, hi = (values.min().item(), values.max().item()) if values.numel() else (0.0, 1.0)
    span = _hist_span(lo, hi)
    bins = ((values - lo) * (HIST_BINS / span)).to(torch.int64).clamp_(0, HIST_BINS)
    return torch.bincount(bins, minlength=HIST_BINS + 1), (lo, span)


def _hist_span(lo: float, hi: float) -> float:
    """The histogram's range hi - lo, widened where needed so that every bin spans at least
    four float32 steps at these values (a constant tensor gets a small positive range)."""
    return max(hi - lo, max(abs(lo), abs(hi)) * 2.0 ** -23 * 4 * HIST_BINS, 1e-6)


def _to_point_stats(point, layers: list[dict]) -> PointStats:
    """Means, std, RMS, ... per token and over the whole tensor, for every layer at once."""
    width = layers[0]["width"]
    sums = torch.stack([layer["per_token"] for layer in layers]).cpu().numpy()  # (L, 6, T)
    total, sq_total, lo, hi, abs_total, nonzero = sums.astype(np.float64).transpose(1, 0, 2)
    with np.errstate(all="ignore"):           # inf/NaN are reported as such, not warned about
        mean = total / width                                                # (layers, T)
        var = np.maximum(sq_total / width - mean ** 2, 0.0)
        for i, layer in enumerate(layers):
            if layer["sq_dev"] is not None:   # summed about the mean: the precise figure
                var[i] = layer["sq_dev"].cpu().numpy() / width
        nonfinite = np.stack([np.zeros(mean.shape[1]) if layer["nonfinite"] is None
                              else layer["nonfinite"].cpu().numpy() for layer in layers])
        per_token = {
            "mean": mean, "std": np.sqrt(var), "rms": np.sqrt(var + mean ** 2),
            "min": lo, "max": hi, "abs_mean": abs_total / width,
            "zero_frac": 1.0 - nonzero / width, "nonfinite": nonfinite,
        }
        overall = {
            "mean": mean.mean(-1),
            # Every token has the same width: total variance = mean of the tokens' variances
            # + variance of their means.
            "std": np.sqrt(var.mean(-1) + mean.var(-1)),
            "rms": np.sqrt((var + mean ** 2).mean(-1)),
            "min": per_token["min"].min(-1), "max": per_token["max"].max(-1),
            "abs_mean": per_token["abs_mean"].mean(-1),
            "zero_frac": per_token["zero_frac"].mean(-1),
            "nonfinite": nonfinite.sum(-1),
        }
    counts = torch.stack([layer["hist_counts"] for layer in layers]).cpu().numpy()
    hist_counts = counts[:, :HIST_BINS].copy()
    hist_counts[:, -1] += counts[:, HIST_BINS]          # the maximum belongs to the last bin
    lo, span = np.array([layer["hist_range"] for layer in layers]).T
    # Exact end points: lo, and lo + span (= the maximum unless the tensor is constant).
    hist_edges = lo[:, None] + span[:, None] * np.linspace(0.0, 1.0, HIST_BINS + 1)
    return PointStats(
        point=point,
        overall={s: overall[s].astype(np.float32) for s in STAT_NAMES},
        per_token={s: per_token[s].astype(np.float32) for s in STAT_NAMES},
        hist_counts=hist_counts, hist_edges=hist_edges.astype(np.float32))


# ---------------------------------------------------------------------------------------------
# Vocabulary-wide reductions: next-token top-k and the logit lens
_TOPK_GROUP = 256   # consecutive vocabulary entries per group in _row_topk
_HEAD_ROWS = 256    # rows per output-head product for the logit lens at many positions


def _rows_per_chunk(vocab_size: int, target_elements: int = 2 ** 20) -> int:
    """Rows of vocabulary-wide logits handled at once: a few MB, so temporaries stay small."""
    return max(1, target_elements // vocab_size)


def _padded_width(vocab_size: int, k: int) -> int:
    """The width _row_topk works on: a whole number of groups when grouping pays off."""
    if vocab_size < 8 * k * _TOPK_GROUP:
        return vocab_size
    return -(-vocab_size // _TOPK_GROUP) * _TOPK_GROUP


def _row_topk(x, k):
    """``torch.topk(x, k, dim=-1)`` for vocabulary-wide rows, in about one pass over ``x``.

    The k largest values of a row lie in the k groups (of ``_TOPK_GROUP`` neighbours) with the
    largest maxima, so only those k groups are searched. x: (rows, width), width a multiple of
    the group size, or anything when grouping would not pay off.
    """
    rows, width = x.shape
    if width % _TOPK_GROUP or width < 8 * k * _TOPK_GROUP:
        return torch.topk(x, k, dim=-1)
    groups = x.view(rows, -1, _TOPK_GROUP).amax(-1).topk(k, dim=-1).indices   # (rows, k)
    candidates = (groups[..., None] * _TOPK_GROUP
                  + torch.arange(_TOPK_GROUP, device=x.device)).view(rows, -1)
    values, where = x.gather(1, candidates).topk(k, dim=-1)
    return values, candidates.gather(1, where)


class _LogSoftmaxRows:
    """Log-softmax of a few vocabulary-wide rows at a time into one reused buffer whose padding
    (up to a whole number of ``_row_topk`` groups) holds -inf."""

    def __init__(self, vocab_size, n_rows, k, device):
        self.vocab_size = vocab_size
        self.rows = _rows_per_chunk(vocab_size)
        width = _padded_width(vocab_size, k)
        self.buffer = torch.full((min(self.rows, n_rows), width), -torch.inf, device=device)

    def __call__(self, logits):
        out = self.buffer[:logits.shape[0]]
        torch.log_softmax(logits.float(), dim=-1, out=out[:, :self.vocab_size])
        return out


def _top_probs(logits, k):
    """Top-k next-token ids and probabilities at every position, without a full-size softmax
    copy: (T, k) tensors."""
    log_softmax = _LogSoftmaxRows(logits.shape[-1], logits.shape[0], k, logits.device)
    ids, probs = [], []
    for start in range(0, logits.shape[0], log_softmax.rows):
        values, indices = _row_topk(log_softmax(logits[start:start + log_softmax.rows]), k)
        # Padding is -inf: it is chosen only when fewer than k tokens are possible at all.
        ids.append(indices.clamp_max_(logits.shape[-1] - 1))
        probs.append(values.exp())
    return torch.cat(ids), torch.cat(probs)


def _logit_lens(model, recorder, positions, top_ids, top_probs):
    """Final norm + output head on each block's output: every layer's guess for the next token.

    The earlier blocks' rows come from the recorder's one head product when they were few
    (``recorder.lens_logits``), else they go through the head here, ``_HEAD_ROWS`` at a time.
    The last block's guess is the model's own prediction: ``top_ids``/``top_probs`` (T, k).
    """
    n_layers = model.cfg.n_layers
    if not positions:
        empty = np.zeros((n_layers, 0))
        return empty.astype(np.int64), empty.astype(np.float32), empty.astype(np.float32)
    n_pos = len(positions)
    position_index = torch.tensor(positions, device=top_ids.device)
    final_ids, final_probs = top_ids[position_index, 0], top_probs[position_index, 0]
    ids, probs, target = [], [], []
    if n_layers > 1:
        targets = final_ids.repeat(n_layers - 1)                           # ((L-1)*P,)
        log_softmax = _LogSoftmaxRows(model.cfg.vocab_size, targets.shape[0], 1,
                                      top_ids.device)
        for start, logits in _lens_logits(model, recorder):
            for i in range(0, logits.shape[0], log_softmax.rows):
                log_probs = log_softmax(logits[i:i + log_softmax.rows])
                values, indices = _row_topk(log_probs, 1)
                rows = targets[start + i:start + i + log_probs.shape[0]]
                ids.append(indices[:, 0])
                probs.append(values[:, 0].exp())
                target.append(log_probs.gather(1, rows[:, None])[:, 0].exp())
    ids.append(final_ids)
    probs.append(final_probs)
    target.append(final_probs)

    def stacked(parts):
        return torch.cat(parts).view(n_layers, n_pos).cpu().numpy()
    return stacked(ids), stacked(probs), stacked(target)


def _lens_logits(model, recorder):
    """(first row, logits) of the earlier blocks' lens rows, in layer-major order."""
    if recorder.lens_logits is not None:
        yield 0, recorder.lens_logits
        return
    earlier = recorder.lens_inputs[:-1].flatten(0, 1)                       # ((L-1)*P, emb)
    for start in range(0, earlier.shape[0], _HEAD_ROWS):
        yield start, model.out_head(model.final_norm(earlier[start:start + _HEAD_ROWS]))


def _check_ids(token_ids, cfg) -> list[int]:
    if isinstance(token_ids, torch.Tensor):
        token_ids = token_ids.flatten()
    ids = as_token_ids(token_ids)
    if not ids:
        raise ValueError("The prompt has no tokens: type some text first.")
    if len(ids) > cfg.context_length:
        raise ValueError(f"The prompt has {len(ids)} tokens but this model's context_length is "
                         f"{cfg.context_length}. Shorten it to at most {cfg.context_length} "
                         f"tokens.")
    bad = [t for t in ids if not 0 <= t < cfg.vocab_size]
    if bad:
        raise ValueError(f"Token id {bad[0]} is outside this model's vocabulary "
                         f"(0 ... {cfg.vocab_size - 1}).")
    return ids


def _attention_layers(choice, n_tokens, n_layers) -> set[int]:
    if choice is None:
        return set()
    if choice == "all":
        return set(range(n_layers))
    if choice == "auto":
        return set(range(n_layers)) if n_tokens <= ATTENTION_ALL_LAYERS_MAX_TOKENS else set()
    layers = [choice] if isinstance(choice, int) else list(choice)
    for layer in layers:
        if isinstance(layer, bool) or not isinstance(layer, int) or not 0 <= layer < n_layers:
            raise ValueError(f"Layer {layer!r} does not exist: this model has layers 0 to "
                             f"{n_layers - 1}.")
    return set(layers)


def _lens_positions(choice, n_tokens) -> list[int]:
    if choice is None:
        return []
    if choice == "last":
        return [n_tokens - 1]
    if choice == "all":
        return list(range(n_tokens))
    positions = [choice] if isinstance(choice, int) else list(choice)
    for p in positions:
        if isinstance(p, bool) or not isinstance(p, int) or not 0 <= p < n_tokens:
            raise ValueError(f"Position {p!r} does not exist: the input has positions 0 to "
                             f"{n_tokens - 1}.")
    return positions


def _piece_fn(tokenizer):
    def piece(token_id):
        if token_id < tokenizer.n_vocab:
            return tokenizer.token_text(token_id)
        return f"<id {token_id}>"
    return piece
