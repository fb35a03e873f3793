"""Probe points: the named places inside the model where a value can be recorded.

``PROBE_POINTS`` is the one table of them (name, label, exactly where it is measured): the
model calls ``probe(name, x)`` at each, the probes record them, the views label them. A
recorder is any object with ``record(name, tensor)`` and ``wants_attention()``; it is active
only inside ``recording(...)`` and only for the thread/context that set it, so sessions sharing
one model never see each other's recordings. Nobody listening costs one context-variable lookup.
"""
from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

import torch

from .errors import Text


@dataclass(frozen=True)
class ProbePoint:
    name: str
    label: Text    # what a view calls it (English; the page says it in its language)
    where: Text    # exactly where it is measured
    scope: str     # "block": once per TransformerBlock; "model": once per forward pass;
                   # "attention": inside MultiHeadAttention (not reduced to statistics)


PROBE_POINTS = (
    ProbePoint("resid_pre", Text("point.resid_pre", "residual stream entering the block"),
               Text("point.resid_pre.where", "TransformerBlock.forward: the block's input x"),
               "block"),
    ProbePoint("ln1_in", Text("point.ln1_in", "norm1 input (before LayerNorm)"),
               Text("point.ln1_in.where", "the input of norm1. Pre-LN (book): = resid_pre. "
                    "Post-LN: the sum resid_pre + attention output"), "block"),
    ProbePoint("ln1_out", Text("point.ln1_out", "norm1 output (after LayerNorm, scale and shift)"),
               Text("point.ln1_out.where", "the output of norm1, after scale and shift"), "block"),
    ProbePoint("attn_out", Text("point.attn_out", "attention output"),
               Text("point.attn_out.where", "the output of multi-head attention (after "
                    "out_proj, before dropout and the shortcut)"), "block"),
    ProbePoint("resid_mid", Text("point.resid_mid", "residual stream after attention"),
               Text("point.resid_mid.where", "the residual stream after the attention "
                    "sub-block (pre-LN: = ln2_in)"), "block"),
    ProbePoint("ln2_in", Text("point.ln2_in", "norm2 input (before LayerNorm)"),
               Text("point.ln2_in.where", "the input of norm2"), "block"),
    ProbePoint("ln2_out", Text("point.ln2_out", "norm2 output (after LayerNorm, scale and shift)"),
               Text("point.ln2_out.where", "the output of norm2, after scale and shift"), "block"),
    ProbePoint("ff_pre", Text("point.ff_pre", "feed-forward hidden, before activation"),
               Text("point.ff_pre.where", "FeedForward: the first Linear's output"), "block"),
    ProbePoint("ff_post", Text("point.ff_post", "feed-forward hidden, after activation"),
               Text("point.ff_post.where",
                    "FeedForward: the same hidden layer after GELU (or ReLU/SiLU)"), "block"),
    ProbePoint("ff_out", Text("point.ff_out", "feed-forward output"),
               Text("point.ff_out.where", "FeedForward: the second Linear's output"), "block"),
    ProbePoint("resid_post", Text("point.resid_post", "block output"),
               Text("point.resid_post.where", "TransformerBlock.forward: the block's output"),
               "block"),
    ProbePoint("final_norm_in", Text("point.final_norm_in", "final_norm input"),
               Text("point.final_norm_in.where",
                    "GPTModel.forward: the input of final_norm (= the last block's output)"),
               "model"),
    ProbePoint("final_norm_out", Text("point.final_norm_out", "final_norm output"),
               Text("point.final_norm_out.where", "GPTModel.forward: the output of final_norm, "
                    "which out_head turns into logits"),
               "model"),
    ProbePoint("attn_queries", Text("point.attn_queries", "attention queries"),
               Text("point.attn_queries.where",
                    "MultiHeadAttention: queries (b, heads, T, head_dim) after RoPE"), "attention"),
    ProbePoint("attn_keys", Text("point.attn_keys", "attention keys"),
               Text("point.attn_keys.where", "MultiHeadAttention: keys (b, heads, S, head_dim) "
                    "after RoPE, cached keys included"), "attention"),
    ProbePoint("attn_pattern", Text("point.attn_pattern", "attention weights"),
               Text("point.attn_pattern.where", "MultiHeadAttention: softmax weights (b, heads, "
                    "T, S) before dropout; the book's explicit path only"), "attention"),
)
POINTS_BY_NAME = {p.name: p for p in PROBE_POINTS}
# In the order a pre-LN block reaches them.
BLOCK_PROBE_POINTS = tuple(p.name for p in PROBE_POINTS if p.scope == "block")
POINT_LABELS = {p.name: p.label for p in PROBE_POINTS}

_ACTIVE_RECORDER: ContextVar = ContextVar("explorer_active_recorder", default=None)


def probe(name: str, x: torch.Tensor) -> torch.Tensor:
    recorder = _ACTIVE_RECORDER.get()
    if recorder is not None:
        recorder.record(name, x)
    return x


def is_recording() -> bool:
    """Whether a recorder listens in this context (a fast path must then step aside)."""
    return _ACTIVE_RECORDER.get() is not None


def recorder_wants_attention() -> bool:
    recorder = _ACTIVE_RECORDER.get()
    return recorder is not None and recorder.wants_attention()


@contextmanager
def recording(recorder):
    """Activate ``recorder`` for forward passes run inside this block (this context only)."""
    token = _ACTIVE_RECORDER.set(recorder)
    try:
        yield recorder
    finally:
        _ACTIVE_RECORDER.reset(token)
