"""The memory a trace needs, known before it runs (the app refuses what would not fit)."""
from __future__ import annotations

from .data import ATTENTION_ALL_LAYERS_MAX_TOKENS
from .vocabulary import HEAD_ROWS

ATTENTION_BATCH_BYTES = 32 * 2 ** 20   # attention scores of several layers computed at once


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
