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
raw activations are reduced to statistics block by block, so memory stays bounded.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

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
          keep_logits=False, tokenizer=None) -> Trace:
    """Run one forward pass over ``token_ids`` and record what happens inside.

    attention_layers: "auto" (every layer up to ``ATTENTION_ALL_LAYERS_MAX_TOKENS`` tokens,
        none beyond), "all", None, or a list of layer indices. Per-head entropy is always kept.
    lens: the logit lens (final norm + output head on every block's output) at the "last"
        position, at "all" positions, None, or a list of positions. Reading it at every
        position runs the vocabulary-wide head once per layer, which costs more than the
        forward pass itself for GPT-2-sized vocabularies.
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
    recorder = _Recorder(keep_layers, positions)
    device = model_device(model)
    with torch.inference_mode(), recording(recorder):
        logits = model(torch.tensor([ids], device=device))[0]          # (T, vocab)
    with torch.inference_mode():
        next_ids, next_probs = _top_probs(logits, top_k)
        lens_ids, lens_probs, lens_final = _logit_lens(model, recorder.lens_inputs, positions,
                                                        logits)
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
        seconds=seconds, logits=logits.float().cpu().numpy() if keep_logits else None,
        notes=notes)


# ---------------------------------------------------------------------------------------------
class _Recorder:
    """Receives the probe points of one forward pass; reduces each block's activations to
    statistics as soon as the block ends, so no raw activation outlives its block."""

    def __init__(self, keep_layers, lens_positions):
        self.keep_layers = keep_layers
        self.lens_positions = lens_positions
        self.layer = -1
        self.pending: dict[str, torch.Tensor] = {}
        self.block_stats: list[dict[str, dict[str, torch.Tensor]]] = []
        self.final_stats: dict[str, dict[str, torch.Tensor]] = {}
        self.attention: dict[int, torch.Tensor] = {}
        self.entropy: list[torch.Tensor] = []
        self.lens_inputs: list[torch.Tensor] = []

    def wants_attention(self) -> bool:
        return True  # the explicit path: its weights give every head's entropy

    def record(self, name, x):
        if name == "resid_pre":
            self.layer += 1
            self.pending = {}
        if name == "attn_pattern":
            weights = x[0].float()                                          # (heads, T, S)
            self.entropy.append(torch.special.entr(weights).sum(-1) / math.log(2))
            if self.layer in self.keep_layers:
                self.attention[self.layer] = weights.cpu()
            return
        self.pending[name] = x
        if name == "resid_post":
            if self.lens_positions:
                self.lens_inputs.append(x[0, self.lens_positions])
            self.block_stats.append(_reduce(self.pending))
            self.pending = {}
        elif name == "final_norm_out":
            self.final_stats = _reduce(self.pending)
            self.pending = {}

    def result(self):
        names = [p for p in BLOCK_PROBE_POINTS if self.block_stats and p in self.block_stats[0]]
        points = {p: _to_point_stats(p, [layer[p] for layer in self.block_stats]) for p in names}
        final = {p: _to_point_stats(p, [s]) for p, s in self.final_stats.items()}
        entropy = torch.stack(self.entropy).cpu().numpy() if self.entropy else np.zeros((0,))
        attention = {k: v.numpy() for k, v in self.attention.items()}
        return {"points": points, "final": final, "attention": attention, "entropy": entropy}


def _reduce(tensors: dict[str, torch.Tensor]) -> dict[str, dict[str, torch.Tensor]]:
    """Statistics of every recorded (1, T, width) tensor of one block. Points that are one tensor
    (pre-LN: resid_pre is ln1_in) are reduced once; tensors of one width are reduced together."""
    unique: dict[int, list[str]] = {}
    for name, x in tensors.items():
        unique.setdefault(id(x), []).append(name)
    by_width: dict[int, list[int]] = {}
    for key in unique:
        by_width.setdefault(tensors[unique[key][0]].shape[-1], []).append(key)
    out = {}
    for keys in by_width.values():
        stacked = torch.stack([tensors[unique[k][0]][0] for k in keys]).float()  # (P, T, width)
        stats = _batched_stats(stacked)
        for i, k in enumerate(keys):
            for name in unique[k]:
                out[name] = {s: v[i] for s, v in stats.items()}
    return out


def _batched_stats(x: torch.Tensor) -> dict[str, torch.Tensor]:
    """Per-token and overall statistics plus a histogram of each x[p], one pass per figure."""
    width = x.shape[-1]
    var, mean = torch.var_mean(x, dim=-1, correction=0)                    # (P, T)
    lo, hi = torch.aminmax(x, dim=-1)
    abs_mean = torch.linalg.vector_norm(x, ord=1, dim=-1) / width
    zero_frac = 1.0 - torch.count_nonzero(x, dim=-1) / width
    rms = torch.sqrt(var + mean.square())
    stats = {
        "t_mean": mean, "t_std": var.sqrt(), "t_rms": rms, "t_min": lo, "t_max": hi,
        "t_abs_mean": abs_mean, "t_zero_frac": zero_frac,
        "mean": mean.mean(-1), "rms": rms.square().mean(-1).sqrt(), "min": lo.amin(-1),
        "max": hi.amax(-1), "abs_mean": abs_mean.mean(-1), "zero_frac": zero_frac.mean(-1),
    }
    # Overall variance from per-token moments (every token has the same width).
    stats["std"] = (rms.square().mean(-1) - stats["mean"].square()).clamp_min(0).sqrt()
    finite = torch.isfinite(stats["mean"]) & torch.isfinite(stats["rms"])
    stats["t_nonfinite"] = torch.zeros_like(mean)
    stats["nonfinite"] = torch.zeros_like(stats["mean"])
    if not bool(finite.all()):   # rare: count inf/NaN only when there are some
        bad = (~torch.isfinite(x)).sum(-1).float()
        stats["t_nonfinite"], stats["nonfinite"] = bad, bad.sum(-1)
    stats["hist_counts"], stats["hist_edges"] = _histograms(x, lo, hi)
    return stats


def _histograms(x, token_lo, token_hi):
    """A HIST_BINS-bin histogram of each x[p] over its finite range, in one batched pass."""
    finite_lo = torch.where(torch.isfinite(token_lo), token_lo, torch.inf).amin(-1)
    finite_hi = torch.where(torch.isfinite(token_hi), token_hi, -torch.inf).amax(-1)
    lo = torch.where(torch.isfinite(finite_lo), finite_lo, torch.zeros_like(finite_lo))
    hi = torch.where(torch.isfinite(finite_hi), finite_hi, torch.ones_like(finite_hi))
    hi = torch.maximum(hi, lo + 1e-6)
    p = x.shape[0]
    scale = (HIST_BINS / (hi - lo)).view(p, 1, 1)
    bins = ((x - lo.view(p, 1, 1)) * scale).to(torch.int64).clamp_(0, HIST_BINS - 1)
    bins += torch.arange(p, device=x.device).view(p, 1, 1) * HIST_BINS
    # inf/NaN land in no bin: their index goes to one extra slot that is dropped.
    bins = torch.where(torch.isfinite(x), bins, p * HIST_BINS)
    counts = torch.bincount(bins.flatten(), minlength=p * HIST_BINS + 1)[:-1].view(p, HIST_BINS)
    steps = torch.linspace(0, 1, HIST_BINS + 1, device=x.device)
    edges = lo[:, None] + (hi - lo)[:, None] * steps[None, :]
    return counts, edges


def _to_point_stats(point, layers: list[dict[str, torch.Tensor]]) -> PointStats:
    def gather(key):
        return torch.stack([layer[key] for layer in layers]).cpu().numpy()
    return PointStats(
        point=point,
        overall={s: gather(s) for s in STAT_NAMES},
        per_token={s: gather("t_" + s) for s in STAT_NAMES},
        hist_counts=gather("hist_counts"),
        hist_edges=gather("hist_edges"))


def _top_probs(logits, k):
    """Top-k next-token probabilities at every position without a full softmax copy."""
    top = torch.topk(logits, k, dim=-1)
    log_norm = torch.logsumexp(logits.float(), dim=-1, keepdim=True)
    probs = torch.exp(top.values.float() - log_norm)
    return top.indices.cpu().numpy(), probs.cpu().numpy()


def _logit_lens(model, lens_inputs, positions, final_logits):
    """Final norm + output head on each block's output: every layer's guess for the next token."""
    if not positions:
        empty = np.zeros((len(lens_inputs), 0))
        return empty.astype(np.int64), empty, empty
    final_top = final_logits[positions].argmax(-1)                          # (P,)
    ids, probs, target = [], [], []
    for x in lens_inputs:                                                   # (P, emb_dim)
        logits = model.out_head(model.final_norm(x)).float()
        log_probs = torch.log_softmax(logits, dim=-1)
        best = log_probs.max(-1)
        ids.append(best.indices)
        probs.append(best.values.exp())
        target.append(log_probs.gather(-1, final_top[:, None])[:, 0].exp())
    return (torch.stack(ids).cpu().numpy(), torch.stack(probs).cpu().numpy(),
            torch.stack(target).cpu().numpy())


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
