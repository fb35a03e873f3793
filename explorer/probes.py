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

The attention weights come from ``attn_queries`` and ``attn_keys`` (each block's queries and keys
after RoPE, cached keys included): the forward pass keeps PyTorch's fused attention, and the
weights are recomputed from those by the book's steps (``_attention_weights``). On the CPU the
statistics come from the C kernel in ``explorer.stat_kernels``; elsewhere, or without a C
compiler, from PyTorch reductions that give the same figures.
"""
from __future__ import annotations

import math
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace

import numpy as np
import torch

from . import decode_kernels, idle_work, stat_kernels
from .model import BLOCK_PROBE_POINTS, GPTModel, causal_mask, model_device, recording
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
    entropy: per-head attention entropy for every layer (its weights are computed for it).
        False: NaN entropy for the layers whose weights are not kept (for a view that needs
        neither, like the logit lens).
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
    except BaseException:
        if recorder.background is not None:
            recorder.background.cancel()     # no activation kept for reductions nobody reads
        raise
    with torch.inference_mode():
        next_ids, next_probs = recorder.next_ids, recorder.next_probs       # (T, k)
        lens_ids, lens_probs, lens_final = _logit_lens(model, recorder, positions, next_ids,
                                                        next_probs)
        next_ids, next_probs = next_ids.cpu().numpy(), next_probs.cpu().numpy()
    out = recorder.result()
    seconds = time.perf_counter() - started

    pieces = _pieces_fn(tokenizer)
    notes = []
    if keep_layers != set(range(cfg.n_layers)) and attention_layers == "auto":
        notes.append(f"Attention patterns are kept for the layers asked for only beyond "
                     f"{ATTENTION_ALL_LAYERS_MAX_TOKENS} tokens (this input has {n}).")
    if any(s.overall["nonfinite"].any() for s in out["points"].values()):
        notes.append("Some activations are inf or NaN: the values overflowed.")
    return Trace(
        token_ids=ids, tokens=pieces(ids), config=cfg.to_dict(),
        points=out["points"], final=out["final"], attention=out["attention"],
        attention_entropy=out["entropy"],
        next_ids=next_ids, next_probs=next_probs,
        next_texts=pieces(next_ids),
        lens_positions=positions, lens_ids=lens_ids, lens_probs=lens_probs,
        lens_final_probs=lens_final,
        lens_texts=pieces(lens_ids),
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
    return replace(traced, attention={layer: recorder.weights.numpy()})


class _LayerAttention:
    """Keeps the attention weights of one block and stops the forward pass right there."""

    class Done(Exception):
        pass

    def __init__(self, layer):
        self.layer, self.current, self.weights, self.queries = layer, -1, None, None

    def wants_attention(self):
        return False

    def record(self, name, x):
        if name == "resid_pre":
            self.current += 1
        elif self.current == self.layer and name == "attn_queries":
            self.queries = x
        elif self.current == self.layer and name == "attn_keys":
            # The trace's own computation: the very same weights.
            queries, keys = self.queries[0].float(), x[0].float()
            scores = (queries @ keys.transpose(-2, -1))[None]             # (1, heads, T, S)
            if _attention_in_c(scores, queries.shape[-1]) is None:
                scores = _attention_weights((queries @ keys.transpose(-2, -1))[None],
                                            queries.shape[-1])
            self.weights = scores[0].cpu()
            raise self.Done


def trace_peak_bytes(cfg, n_tokens: int) -> int:
    """Memory a trace of ``n_tokens`` needs at its peak, beyond the model: (n_heads, T, T)
    attention weights of one layer, about three such float32 arrays at once, or two batches
    of several layers' (``_ATTENTION_BATCH_BYTES`` each) for short inputs; and the output head
    at most ``_HEAD_ROWS`` positions of (vocab_size) logits at a time. Short inputs also hold
    every layer's queries and keys until the end."""
    one_layer = 4 * cfg.n_heads * n_tokens ** 2
    short = min(n_tokens, ATTENTION_ALL_LAYERS_MAX_TOKENS)     # (keeps the figure rising with T)
    batch = min(4 * cfg.n_heads * short ** 2 * cfg.n_layers, _ATTENTION_BATCH_BYTES)
    queries_and_keys = 8 * cfg.n_layers * short * cfg.emb_dim
    return (max(3 * one_layer, 2 * batch + queries_and_keys)
            + 4 * cfg.vocab_size * min(n_tokens, _HEAD_ROWS))


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

    The forward pass is the plain one (fused attention): the attention weights are recomputed
    from each block's queries and keys (``_attention_weights``). On Linux with the C kernels,
    the statistics and (for a short input) the attention weights are computed by an
    idle-priority thread (``explorer.idle_work``) on the CPU time the forward pass leaves
    unused, and ``result()`` waits for them; otherwise the statistics are computed at the end of
    each block on two threads, and the attention for all layers in one batch at the end when the
    input is short, else block by block so that one layer's T x T weights are held at a time.
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
        use_kernels = device.type == "cpu" and stat_kernels.available()
        self.scratch = None if use_kernels else _Scratch(n_tokens, device)
        # The statistics on otherwise idle CPU time while the forward pass goes on (Linux),
        # else on two threads at the end of each block.
        self.background = (idle_work.Batch(_BACKGROUND_BYTES)
                           if use_kernels and idle_work.available() else None)
        self.unfinished: list = []      # (stats, activation) the kernel found inf/NaN in
        self.entropy = torch.full((cfg.n_layers, cfg.n_heads, n_tokens), torch.nan, device=device)
        # Layers whose weights are computed: all of them for the entropy, else the kept ones.
        self.weight_layers = set(range(cfg.n_layers)) if entropy else set(keep_layers)
        self.batch_attention = n_tokens <= ATTENTION_ALL_LAYERS_MAX_TOKENS
        self.queries: torch.Tensor | None = None      # this block's, until its keys arrive
        self.qk: dict[int, tuple] = {}                # layer -> (queries, keys) when batched
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
        return False        # the fused attention: weights come from the queries and keys

    def record(self, name, x):
        if name == "attn_queries":
            self.queries = x[0]                                     # (heads, T, head_dim)
            return
        if name == "attn_keys":
            if self.layer in self.weight_layers:
                if self.background is not None and self.batch_attention:
                    self._attention_in_background(self.layer, self.queries, x[0])
                else:
                    self.qk[self.layer] = (self.queries, x[0])
                    if not self.batch_attention:
                        self._keep_attention()
            self.queries = None
            return
        if name == "attn_pattern":       # only from a model in training mode with dropout
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
            self._keep_attention()
            self.head(x[0])
            raise _HeadComputed  # stop the model before it runs the same head again

    def _attention_in_background(self, layer, queries, keys):
        """One layer's attention weights and entropies, as ``_keep_attention`` computes them,
        from the idle-priority thread (a short input's weights: T x T per head)."""
        def job():
            with torch.inference_mode():         # the recorder's tensors are inference tensors
                weights = queries.float() @ keys.float().transpose(-2, -1)   # (heads, T, S)
                plogp = torch.empty(weights.shape[:-1])
                if not decode_kernels.attention_rows(weights, queries.shape[-1], plogp):
                    weights = _attention_weights(queries.float() @ keys.float().transpose(-2, -1),
                                                 queries.shape[-1])
                    plogp = torch.clamp_min(weights, 1e-30).log_().mul_(weights).sum(-1)
                self.entropy[layer] = plogp
                if layer in self.keep_layers:
                    self.attention[layer] = weights
        self.background.submit(job, queries.nelement() * queries.element_size() * 3)

    def _keep_attention(self):
        """Attention weights of the layers in ``self.qk`` from their queries and keys (heads,
        T, d): each head's entropy, and the weights of the layers asked for. Several layers'
        scores go into one batch (up to ``_ATTENTION_BATCH_BYTES``), so that the steps after
        the products run once per batch rather than once per layer."""
        layers = sorted(self.qk)
        if not layers:
            return
        heads, n, _ = self.qk[layers[0]][0].shape
        per_layer = 4 * heads * n * self.qk[layers[0]][1].shape[1]
        step = max(1, _ATTENTION_BATCH_BYTES // per_layer)
        for first in range(0, len(layers), step):
            batch = layers[first:first + step]
            attn_scores = torch.empty((len(batch), heads, n, self.qk[batch[0]][1].shape[1]),
                                      device=self.entropy.device)
            head_dim = self.qk[batch[0]][0].shape[-1]

            def scores():
                for i, layer in enumerate(batch):
                    queries, keys = self.qk[layer]
                    torch.matmul(queries.float(), keys.float().transpose(-2, -1),
                                 out=attn_scores[i])
            scores()
            # sum(w * ln w) per query row (negated and turned into bits in result()).
            plogp = _attention_in_c(attn_scores, head_dim)
            weights = attn_scores                                    # (batch, heads, T, S)
            if plogp is None:                 # no compiler, a GPU, or inf/NaN scores
                scores()
                weights = _attention_weights(attn_scores, head_dim)
                # ln of the weights clamped to 1e-30: the masked future (w = 0) adds 0 * -69.
                plogp = torch.clamp_min(weights, 1e-30).log_().mul_(weights).sum(-1)
            self.entropy[batch] = plogp
            del plogp
            for layer in batch:
                del self.qk[layer]
            kept = [i for i, layer in enumerate(batch) if layer in self.keep_layers]
            whole = len(kept) == len(batch)      # else copies, so the batch can be freed
            for i in kept:
                self.attention[batch[i]] = (weights[i] if whole else weights[i].clone()).cpu()

    def _reduce_pending(self, target):
        if self.background is not None:
            stats = self._stats_in_background([x[0] for x in self.pending])
        elif self.scratch is None:
            stats = _cpu_stats([x[0] for x in self.pending], self.per_token, self.hist,
                               self.used)
            self.used += len(self.pending)
        else:
            by_width: dict[int, list[int]] = {}
            for i, x in enumerate(self.pending):
                by_width.setdefault(x.shape[-1], []).append(i)
            stats = [None] * len(self.pending)
            for indices in by_width.values():
                rows = slice(self.used, self.used + len(indices))
                self.used += len(indices)
                group = _group_stats([self.pending[i][0] for i in indices],
                                     self.per_token[rows], self.hist[rows], self.scratch)
                for row, (i, s) in enumerate(zip(indices, group), start=rows.start):
                    stats[i] = {**s, "row": row}
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
                logits = _head_product(self.model.out_head,
                                       torch.cat([normed, self.model.final_norm(extra)]))
                logits, self.lens_logits = logits[:n], logits[n:]
            else:
                logits = _head_product(self.model.out_head, normed)
            self.logits = logits.clone() if self.keep_logits else None
            self.next_ids, self.next_probs = _top_probs(logits, self.top_k)
            return
        ids, probs, kept = [], [], []
        for start in range(0, n, _HEAD_ROWS):
            logits = _head_product(self.model.out_head, normed[start:start + _HEAD_ROWS])
            if self.keep_logits:
                kept.append(logits.clone())
            chunk_ids, chunk_probs = _top_probs(logits, self.top_k)
            ids.append(chunk_ids)
            probs.append(chunk_probs)
        self.next_ids, self.next_probs = torch.cat(ids), torch.cat(probs)
        self.logits = torch.cat(kept) if self.keep_logits else None

    def _stats_in_background(self, xs: list[torch.Tensor]) -> list[dict]:
        """``_cpu_stats``'s figures from the idle-priority thread (``explorer.idle_work``),
        one job per activation; each dict is completed by its job (``_wait_for_stats``)."""
        stats = []
        for x in xs:
            row = self.used
            self.used += 1
            values = x.float().contiguous().numpy()                           # (T, width)
            s = {"nonfinite": None, "width": values.shape[1], "row": row}
            sums, counts = self.per_token[row].numpy(), self.hist[row].numpy()

            def job(values=values, sums=sums, counts=counts, s=s, x=x):
                found = stat_kernels.many_point_stats([values], [sums], [counts])[0]
                if found is None:                  # inf or NaN: counted exactly at the end
                    self.unfinished.append((s, x))
                else:
                    s["hist_range"] = found
            self.background.submit(job, values.nbytes)
            stats.append(s)
        return stats

    def _wait_for_stats(self):
        if self.background is None:
            return
        self.background.finish()
        for s, x in self.unfinished:          # the careful PyTorch path, as in _cpu_stats
            row = s["row"]
            s.update(_group_stats([x], self.per_token[row][None], self.hist[row][None],
                                  _Scratch(x.shape[0], x.device))[0], row=row)
        self.unfinished = []

    def result(self):
        with torch.inference_mode():
            self._wait_for_stats()
        names = [p for p in BLOCK_PROBE_POINTS if self.block_stats and p in self.block_stats[0]]
        table = _StatsTable(self.per_token[:self.used], self.hist[:self.used],
                            [s for layer in self.block_stats for s in layer.values()]
                            + list(self.final_stats.values()))
        points = {p: table.point(p, [layer[p] for layer in self.block_stats]) for p in names}
        final = {p: table.point(p, [s]) for p, s in self.final_stats.items()}
        # NaN where not computed (entropy=False), not a misleading 0 bits.
        entropy = (self.entropy / -math.log(2)).cpu().numpy()
        attention = {k: v.numpy() for k, v in self.attention.items()}
        return {"points": points, "final": final, "attention": attention, "entropy": entropy}


def _attention_weights(attn_scores, head_dim):
    """The book's attention weights from a block's scores ``queries @ keys.T`` (..., T, S),
    S >= T, the queries being the last T positions, computed in place: the future masked to
    -inf, divided by sqrt(head_dim), softmax; the steps of
    ``MultiHeadAttention._explicit_attention``, in its order. (..., T, S)"""
    num_queries, num_keys = attn_scores.shape[-2:]
    mask_bool = causal_mask(num_queries, num_keys, num_keys - num_queries, attn_scores.device)
    # masked_fill_ as an addition of 0 / -inf: the same values, 10x faster for a batch of
    # layers (a broadcast boolean mask is not vectorised).
    attn_scores += torch.zeros(mask_bool.shape, device=attn_scores.device).masked_fill_(
        mask_bool, -torch.inf)
    attn_scores /= head_dim ** 0.5
    return torch.softmax(attn_scores, dim=-1, out=attn_scores)


def _attention_in_c(attn_scores, head_dim):
    """``_attention_weights`` in place and each row's sum of w ln w ((batch, heads, T)), from
    ``decode_kernels.attention_rows`` with the heads split between this thread and the helper
    (three passes over each row instead of PyTorch's ~eight: ~10 -> ~2 ms for GPT-2 small at
    T = 128); None where it does not apply (the scores are then partly changed)."""
    if not (attn_scores.is_cpu and attn_scores.dtype == torch.float32
            and decode_kernels.available()):
        return None
    plogp = torch.empty(attn_scores.shape[:-1])
    units = attn_scores.shape[0] * attn_scores.shape[1]          # (layer, head) pairs
    scores, rows = attn_scores.view(units, *attn_scores.shape[2:]), plogp.view(units, -1)
    half = units // 2
    theirs = _helper.submit(decode_kernels.attention_rows, scores[half:], head_dim, rows[half:])
    mine = decode_kernels.attention_rows(scores[:half], head_dim, rows[:half])
    return plogp if theirs.result() and mine else None


# Activations held back for the idle-priority thread at most (then the forward pass's own
# thread works through them first): ~6 blocks of GPT-2 small at T = 128, 1.5 at T = 1024.
_BACKGROUND_BYTES = 64 << 20

# One helper thread: the statistics of a block's activations are split between it and the
# thread running the forward pass (the kernels release the GIL), so both cores work on them.
_helper = ThreadPoolExecutor(max_workers=1, thread_name_prefix="explorer-stats")


def _cpu_stats(xs: list[torch.Tensor], per_token: torch.Tensor, hist: torch.Tensor,
               first: int) -> list:
    """Statistics of activations (each (T, width)) on the CPU with ``stat_kernels``, into rows
    ``first``, ``first + 1``, ... of ``per_token`` and ``hist``; about half of the elements on
    the helper thread, each thread's share in one call into C (taking turns with Python's lock
    between activations had doubled the time). A tensor with inf or NaN takes the careful
    PyTorch path."""
    values = [x.float().contiguous().numpy() for x in xs]                # each (T, width)
    ranges = [None] * len(xs)

    def run(indices):
        found = stat_kernels.many_point_stats(
            [values[i] for i in indices], [per_token[first + i].numpy() for i in indices],
            [hist[first + i].numpy() for i in indices])
        for i, lo_span in zip(indices, found):
            ranges[i] = lo_span

    # Largest first, each to whichever thread has fewer elements so far.
    order = sorted(range(len(xs)), key=lambda i: -xs[i].numel())
    mine, theirs, load = [], [], [0, 0]
    for i in order:
        side = 0 if load[0] <= load[1] else 1
        (mine, theirs)[side].append(i)
        load[side] += xs[i].numel()
    helper = _helper.submit(run, theirs) if theirs else None
    run(mine)
    if helper is not None:
        helper.result()
    stats = []
    for i, x in enumerate(xs):
        if ranges[i] is None:                     # inf or NaN somewhere: count them exactly
            s = _group_stats([x], per_token[first + i][None], hist[first + i][None],
                             _Scratch(x.shape[0], x.device))[0]
        else:
            s = {"nonfinite": None, "width": values[i].shape[1], "hist_range": ranges[i]}
        stats.append({**s, "row": first + i})
    return stats


class _Scratch:
    """Work buffers reused by every block of one trace, one set per activation width: fresh
    multi-MB tensors for each block would cost a page fault per 4 KB page, which took longer
    than the statistics themselves."""

    def __init__(self, n_tokens, device):
        self.n_tokens, self.device = n_tokens, device
        self.buffers: dict[int, tuple] = {}

    def get(self, p, width):
        """(stack, work, bins) views of shape (p, T, width): float32, float32, int32."""
        have = self.buffers.get(width)
        if have is None or have[0].shape[0] < p:
            shape = (p, self.n_tokens, width)
            have = (torch.empty(shape, device=self.device),
                    torch.empty(shape, device=self.device),
                    torch.empty(shape, dtype=torch.int32, device=self.device))
            self.buffers[width] = have
        return tuple(buffer[:p] for buffer in have)


def _group_stats(xs: list[torch.Tensor], per_token: torch.Tensor, hist: torch.Tensor,
                 scratch: _Scratch) -> list:
    """The PyTorch path (GPU, no C compiler, inf/NaN): statistics of P activations of one width
    (each (T, width)), stacked and reduced together.

    Per-token sums go into ``per_token`` (P, 6, T): sum, sum of squared deviations from the
    token's mean, min, max, sum of absolute values, count of non-zeros; histogram counts into
    ``hist`` (P, HIST_BINS + 1), the last bin for the maximum. Everything derived from these
    (means, std, RMS, histogram edges, figures over the whole tensor) is computed later for all
    layers at once (``_StatsTable``). Returns one small dict per activation.
    """
    p, width = len(xs), xs[0].shape[-1]
    x, work, bins = scratch.get(p, width)                                  # (P, T, width)
    for i, activation in enumerate(xs):
        x[i].copy_(activation)                                              # float32 too
    total = torch.sum(x, -1, out=per_token[:, 0])                          # (P, T)
    torch.sub(x, (total / width)[..., None], out=work)
    torch.linalg.vector_norm(work, dim=-1, out=per_token[:, 1]).square_()
    lo = torch.amin(x, -1, out=per_token[:, 2])
    hi = torch.amax(x, -1, out=per_token[:, 3])
    torch.sum(torch.abs(x, out=work), -1, out=per_token[:, 4])
    nonzero = torch.sum(work.sign_(), -1, out=per_token[:, 5])            # sign(|x|): 1 unless 0
    ranges = torch.stack([lo.amin(-1), hi.amax(-1)], dim=1).tolist()       # P x [lo, hi]
    stats = [{"nonfinite": None, "width": width} for i in range(p)]
    fast = True
    for i, (a, b) in enumerate(ranges):
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
                      out=work)
        bins.copy_(work)                                   # float -> int truncates toward 0
        counts = torch.bincount(bins.view(-1), minlength=p * slots).view(p, slots)
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
    return stat_kernels.hist_span(lo, hi, HIST_BINS)


class _StatsTable:
    """Means, std, RMS, ... per token and over the whole tensor, computed once for every row of
    the recorder's buffers (every probe point of every layer), then handed out per point."""

    def __init__(self, per_token: torch.Tensor, hist: torch.Tensor, stats: list[dict]):
        sums = per_token.cpu().numpy().astype(np.float64)                 # (rows, 6, T)
        rows, _, n_tokens = sums.shape
        width = np.ones((rows, 1))
        nonfinite = np.zeros((rows, n_tokens))
        for s in stats:
            width[s["row"]] = s["width"]
            if s["nonfinite"] is not None:
                nonfinite[s["row"]] = s["nonfinite"].cpu().numpy()
        total, sq_dev, lo, hi, abs_total, nonzero = sums.transpose(1, 0, 2)
        with np.errstate(all="ignore"):       # inf/NaN are reported as such, not warned about
            mean = total / width                                               # (rows, T)
            var = sq_dev / width              # squares summed about each token's mean: precise
            per_token = {
                "mean": mean, "std": np.sqrt(var), "rms": np.sqrt(var + mean ** 2),
                "min": lo, "max": hi, "abs_mean": abs_total / width,
                "zero_frac": 1.0 - nonzero / width, "nonfinite": nonfinite,
            }
            overall = {
                "mean": mean.mean(-1),
                # Every token has the same width: total variance = mean of the tokens'
                # variances + variance of their means.
                "std": np.sqrt(var.mean(-1) + mean.var(-1)),
                "rms": np.sqrt((var + mean ** 2).mean(-1)),
                "min": lo.min(-1), "max": hi.max(-1),
                "abs_mean": per_token["abs_mean"].mean(-1),
                "zero_frac": per_token["zero_frac"].mean(-1),
                "nonfinite": nonfinite.sum(-1),
            }
        self.per_token = {s: per_token[s].astype(np.float32) for s in STAT_NAMES}
        self.overall = {s: overall[s].astype(np.float32) for s in STAT_NAMES}
        counts = hist.cpu().numpy()
        self.hist_counts = counts[:, :HIST_BINS].copy()
        self.hist_counts[:, -1] += counts[:, HIST_BINS]   # the maximum belongs to the last bin

    def point(self, point, layers: list[dict]) -> PointStats:
        rows = [layer["row"] for layer in layers]
        lo, span = np.array([layer["hist_range"] for layer in layers]).T
        # Exact end points: lo, and lo + span (= the maximum unless the tensor is constant).
        hist_edges = lo[:, None] + span[:, None] * np.linspace(0.0, 1.0, HIST_BINS + 1)
        return PointStats(
            point=point,
            overall={s: a[rows] for s, a in self.overall.items()},
            per_token={s: a[rows] for s, a in self.per_token.items()},
            hist_counts=self.hist_counts[rows], hist_edges=hist_edges.astype(np.float32))


# ---------------------------------------------------------------------------------------------
# Vocabulary-wide reductions: next-token top-k and the logit lens
_TOPK_GROUP = 256   # consecutive vocabulary entries per group in _row_topk
_ATTENTION_BATCH_BYTES = 32 * 2 ** 20   # attention scores of several layers computed at once
_HEAD_ROWS = 256    # rows per output-head product for the logit lens at many positions
_HEAD_COLUMNS = 2048  # vocabulary entries per block of _head_product


def _head_product(out_head, x):
    """``out_head(x)`` for x (rows, emb_dim), the vocabulary taken 2,048 entries at a time on
    the CPU: for GPT-2 small at 128 rows, MKL's single product (768 x 50,257 weights, 154 MB)
    took 130-140 ms and the blocks, whose weights fit in the cache, 93-103 ms. The same
    logits up to float rounding; the model's own forward keeps the book's ``out_head(x)``."""
    weight = out_head.weight
    if (not x.is_cpu or out_head.bias is not None or weight.shape[0] <= _HEAD_COLUMNS
            or torch.is_grad_enabled() or x.dim() != 2):
        return out_head(x)
    out = torch.empty(x.shape[0], weight.shape[0], dtype=torch.promote_types(x.dtype,
                                                                            weight.dtype))
    for start in range(0, weight.shape[0], _HEAD_COLUMNS):
        block = slice(start, start + _HEAD_COLUMNS)
        torch.mm(x, weight[block].t(), out=out[:, block])
    return out


def _row_topk(x, k):
    """``torch.topk(x, k, dim=-1)`` for vocabulary-wide rows, in about one pass over ``x``.

    The k largest values of a row lie in the k groups (of ``_TOPK_GROUP`` neighbours) with the
    largest maxima, so only those k groups are searched. The last group of a row may be shorter
    (GPT-2's 50,257 entries are 196 groups of 256 and one of 81); with narrow rows, where
    grouping would not pay off, this is ``torch.topk`` itself.
    """
    rows, width = x.shape
    if width < 8 * k * _TOPK_GROUP:
        return torch.topk(x, k, dim=-1)
    whole = width // _TOPK_GROUP * _TOPK_GROUP
    maxima = x[:, :whole].unflatten(1, (-1, _TOPK_GROUP)).amax(-1)     # (rows, groups)
    if whole < width:
        maxima = torch.cat([maxima, x[:, whole:].amax(-1, keepdim=True)], dim=1)
    groups = maxima.topk(k, dim=-1).indices                              # (rows, k)
    candidates = (groups[..., None] * _TOPK_GROUP
                  + torch.arange(_TOPK_GROUP, device=x.device)).view(rows, -1)
    beyond = candidates >= width              # the short group's missing entries: -inf
    values = x.gather(1, candidates.clamp_max_(width - 1)).masked_fill_(beyond, -torch.inf)
    values, where = values.topk(k, dim=-1)
    return values, candidates.gather(1, where)


def _top_probs(logits, k):
    """Top-k next-token ids and probabilities at every position: (T, k) tensors. On the CPU
    two threads each take half the positions through ``decode_kernels.rows_summary`` (two
    passes over each row's logits, in C); otherwise ``logits`` (T, vocab) is overwritten with
    its log-softmax (one fused pass, no full-size copy) and reduced by ``_row_topk``."""
    if logits.is_cpu and logits.dtype == torch.float32 and logits.is_contiguous() \
            and k <= 64 and decode_kernels.available():
        half = (logits.shape[0] + 1) // 2
        theirs = _helper.submit(decode_kernels.rows_summary, logits[half:], k)
        mine, theirs = decode_kernels.rows_summary(logits[:half], k), theirs.result()
        if mine is not None and theirs is not None:
            return torch.cat([mine[0], theirs[0]]), torch.cat([mine[1], theirs[1]])
    logits = logits.float()                   # (a copy only for a half-precision model)
    log_probs = torch.log_softmax(logits, dim=-1, out=logits)
    values, indices = _row_topk(log_probs, k)
    return indices, values.exp_()


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
        for start, logits in _lens_logits(model, recorder):
            log_probs = logits.float()
            torch.log_softmax(log_probs, dim=-1, out=log_probs)           # in place
            values, indices = _row_topk(log_probs, 1)
            rows = targets[start:start + log_probs.shape[0]]
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
        yield start, _head_product(model.out_head,
                                   model.final_norm(earlier[start:start + _HEAD_ROWS]))


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


def _pieces_fn(tokenizer):
    """ids (a list, or a 2-D array) -> their text pieces, in the same shape; an id beyond the
    tokenizer's vocabulary (a model with a larger vocab_size) shows as "<id N>"."""
    def pieces(ids):
        if isinstance(ids, np.ndarray) and ids.ndim == 2:
            flat, width = pieces(ids.ravel().tolist()), ids.shape[1]
            return [flat[row * width:(row + 1) * width] for row in range(ids.shape[0])]
        if all(i < tokenizer.n_vocab for i in ids):
            return tokenizer.token_texts(ids)              # one call for all of them
        return [tokenizer.token_text(i) if i < tokenizer.n_vocab else f"<id {i}>" for i in ids]
    return pieces
