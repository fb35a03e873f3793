"""The memory a trace and the map of which parts matter need, known before they run (the app
refuses what would not fit)."""
from __future__ import annotations

from ..book.errors import ExplorerError
from .data import ATTENTION_ALL_LAYERS_MAX_TOKENS
from .vocabulary import HEAD_ROWS

ATTENTION_BATCH_BYTES = 32 * 2 ** 20   # attention scores of several layers computed at once
# Positions the map of which parts matter scores at once: the output head's product uses the
# CPU better on more rows at once (bench/README.md, "Which parts matter").
SCORE_ROWS = 1024
# One trace's attention weights and logits may use this share of the memory budget (two traces
# run at once: concurrency_limit=2 on "inspect"). GPT-2 small over its full 1,024 tokens needs
# about 360 MB: within this share of the default budget on a machine with 8 GB.
TRACE_MEMORY_SHARE = 0.2


def trace_peak_bytes(cfg, n_tokens: int) -> int:
    """Memory a trace of ``n_tokens`` needs at its peak, beyond the model: (n_heads, T, T)
    attention weights of one layer, about three such float32 arrays at once, or two batches
    of several layers' (``ATTENTION_BATCH_BYTES`` each) for short inputs; and the output head
    at most ``HEAD_ROWS`` positions of (vocab_size) logits at a time. Short inputs also hold
    every layer's queries and keys until the end."""
    one_layer = 4 * cfg.n_heads * n_tokens ** 2
    short = min(n_tokens, ATTENTION_ALL_LAYERS_MAX_TOKENS)     # (keeps the figure rising with T)
    batch = min(4 * cfg.n_heads * short ** 2 * cfg.n_layers, ATTENTION_BATCH_BYTES)
    queries_and_keys = 8 * cfg.n_layers * short * cfg.emb_dim
    return (max(3 * one_layer, 2 * batch + queries_and_keys)
            + 4 * cfg.vocab_size * min(n_tokens, HEAD_ROWS))


def _longest(peak_bytes, cfg, max_bytes: float) -> int:
    """The most tokens n with ``peak_bytes(cfg, n) <= max_bytes`` (0 if not even one): the
    peak grows with n, so bisect."""
    low, high = 0, cfg.context_length
    while low < high:
        middle = (low + high + 1) // 2
        if peak_bytes(cfg, middle) <= max_bytes:
            low = middle
        else:
            high = middle - 1
    return low


def longest_trace(cfg, max_bytes: float) -> int:
    """The most tokens whose trace fits in ``max_bytes`` (0 if not even one does)."""
    return _longest(trace_peak_bytes, cfg, max_bytes)


def importance_peak_bytes(cfg, n_tokens: int, batch: int) -> int:
    """Memory the map of which parts matter (``importance``) needs at its peak, beyond the
    model, with ``batch`` copies of the input going through the blocks at once: the clean
    residual stream entering every block (kept for the whole map); one block's activations
    for the batch (about 8 arrays of (T, emb_dim) and 2 of (T, hidden) per copy, and two of
    the (heads, T, T) scores); and the output head's logits for ``SCORE_ROWS`` positions at a
    time (two (rows, vocab) float32 arrays: the logits and their log-softmax)."""
    streams = 4 * cfg.n_layers * n_tokens * cfg.emb_dim
    block = (4 * batch * n_tokens * (8 * cfg.emb_dim + 2 * cfg.ff_hidden_dim)
             + 8 * batch * cfg.n_heads * n_tokens ** 2)
    head = 8 * min(batch * (n_tokens - 1), SCORE_ROWS) * cfg.vocab_size
    return streams + block + head


def longest_importance(cfg, max_bytes: float, batch: int = 1) -> int:
    """The most tokens whose map fits in ``max_bytes`` with ``batch`` copies at once."""
    low, high = 0, cfg.context_length
    while low < high:                       # importance_peak_bytes grows with n: bisect
        middle = (low + high + 1) // 2
        if importance_peak_bytes(cfg, middle, batch) <= max_bytes:
            low = middle
        else:
            high = middle - 1
    return low


def largest_importance_batch(cfg, n_tokens: int, max_bytes: float, most: int) -> int:
    """The most copies (up to ``most``) of ``n_tokens`` whose map fits (0 if not one)."""
    return next((b for b in range(most, 0, -1)
                 if importance_peak_bytes(cfg, n_tokens, b) <= max_bytes), 0)


def attribution_peak_bytes(cfg, n_tokens: int) -> int:
    """Memory the estimate of which parts matter (``explorer.probes.attribution.estimate``)
    needs at its peak, beyond the model: one forward pass that autograd keeps for its backward
    pass, every block's activations at once (about 16 arrays of (T, emb_dim) and 3 of (T,
    hidden); on the book's explicit path also two of the (heads, T, T) scores: the fused
    kernel keeps none), the gradients at the 10 probe points of every block, one block's
    backward pass in flight (three (heads, T, T) arrays), and the output head's logits and
    their softmax for ``SCORE_ROWS`` positions at a time."""
    kept = (4 * n_tokens * (16 * cfg.emb_dim + 3 * cfg.ff_hidden_dim)
            + 8 * cfg.n_heads * n_tokens ** 2)
    grads = 4 * n_tokens * 10 * cfg.emb_dim
    in_flight = 12 * cfg.n_heads * n_tokens ** 2
    head = 8 * min(n_tokens - 1, SCORE_ROWS) * cfg.vocab_size
    return cfg.n_layers * (kept + grads) + in_flight + head


def longest_attribution(cfg, max_bytes: float) -> int:
    """The most tokens whose estimate fits in ``max_bytes``."""
    return _longest(attribution_peak_bytes, cfg, max_bytes)


def check_trace_size(cfg, n_tokens: int, budget_bytes: int) -> None:
    """Refuse, before running it, a trace too large for memory."""
    need = trace_peak_bytes(cfg, n_tokens)
    allowed = budget_bytes * TRACE_MEMORY_SHARE
    if need > allowed:
        raise ExplorerError("trace.too_large", "Tracing {n:,} tokens needs about {need:,.0f} MB "
                            "(the attention weights grow with the square of the length: "
                            "{heads} heads × {n:,}²), but one trace may use {allowed:,.0f} MB "
                            "of memory. Use a prompt of at most {most:,} tokens.", n=n_tokens,
                            need=need / 1024 ** 2, heads=cfg.n_heads,
                            allowed=allowed / 1024 ** 2, most=longest_trace(cfg, allowed))
