"""Probe points: the named places inside the model where a value can be recorded or replaced.

``PROBE_POINTS`` is the one table of them (name, label, exactly where it is measured): the
model calls ``probe(name, x)`` at each, the probes record them, the views label them. A
recorder is any object with ``record(name, tensor)`` and ``wants_attention()``; it is active
only inside ``recording(...)`` and only for the thread/context that set it, so sessions sharing
one model never see each other's recordings. An editor is any object with ``edit(name,
tensor) -> tensor``: inside ``editing(...)`` the model goes on with what it returns (an
intervention, ``explorer.probes.intervening``), again for that context only. Nobody listening
costs one context-variable lookup, and changes nothing.
"""
from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import NamedTuple

import torch

from .errors import Text


@dataclass(frozen=True)
class ProbePoint:
    name: str
    label: Text    # what a view calls it (English; the page says it in its language)
    where: Text    # exactly where it is measured
    scope: str     # "block": once per TransformerBlock; "model": once per forward pass;
                   # "attention": inside MultiHeadAttention; "input": the embedding's inputs
                   # (neither of these two is reduced to statistics)


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
    ProbePoint("attn_context", Text("point.attn_context", "each head's context vectors"),
               Text("point.attn_context.where", "MultiHeadAttention: attention weights @ "
                    "values, (b, T, heads, head_dim), before the heads are joined and go "
                    "through out_proj"), "attention"),
    ProbePoint("attn_pattern", Text("point.attn_pattern", "attention weights"),
               Text("point.attn_pattern.where", "MultiHeadAttention: softmax weights (b, heads, "
                    "T, S) before dropout; the book's explicit path only"), "attention"),
    # Where a pass starts (listed last: the views' tables begin with the block's points).
    ProbePoint("positions", Text("point.positions", "token positions"),
               Text("point.positions.where", "GPTModel.forward: the positions (T,) of this "
                    "pass's tokens, after those in the KV cache; every forward pass starts "
                    "here"), "input"),
    ProbePoint("pos_emb", Text("point.pos_emb", "positional embedding"),
               Text("point.pos_emb.where", "GPTModel.forward: pos_emb of those positions, "
                    "before it is added to the token embedding (learned positions only)"),
               "input"),
)
POINTS_BY_NAME = {p.name: p for p in PROBE_POINTS}
# In the order a pre-LN block reaches them.
BLOCK_PROBE_POINTS = tuple(p.name for p in PROBE_POINTS if p.scope == "block")
POINT_LABELS = {p.name: p.label for p in PROBE_POINTS}



class _Listeners(NamedTuple):
    recorder: object | None
    editor: object | None


_ACTIVE: ContextVar = ContextVar("explorer_probe_listeners", default=None)


def probe(name: str, x: torch.Tensor) -> torch.Tensor:
    active = _ACTIVE.get()
    if active is None:
        return x
    if active.editor is not None:      # the recorder then sees what the model goes on with
        x = active.editor.edit(name, x)
    if active.recorder is not None:
        active.recorder.record(name, x)
    return x


def edit(name: str, x: torch.Tensor) -> torch.Tensor:
    """The editor's value for probe point ``name`` (``x`` when none is active), without
    recording: for code that runs the model's last steps itself, such as ``trace``."""
    active = _ACTIVE.get()
    return x if active is None or active.editor is None else active.editor.edit(name, x)


def is_recording() -> bool:
    """Whether a recorder listens in this context."""
    active = _ACTIVE.get()
    return active is not None and active.recorder is not None


def is_intervening() -> bool:
    """Whether an editor may change values in this context: a fast path that has no probe
    points (the C decoding step) must then step aside."""
    active = _ACTIVE.get()
    return active is not None and active.editor is not None


def current_editor():
    active = _ACTIVE.get()
    return None if active is None else active.editor


def recorder_wants_attention() -> bool:
    active = _ACTIVE.get()
    return (active is not None and active.recorder is not None
            and active.recorder.wants_attention())


@contextmanager
def recording(recorder):
    """Activate ``recorder`` for forward passes run inside this block (this context only)."""
    token = _ACTIVE.set(_Listeners(recorder, current_editor()))
    try:
        yield recorder
    finally:
        _ACTIVE.reset(token)


@contextmanager
def editing(editor):
    """Activate ``editor`` for forward passes run inside this block (this context only); a
    recorder active here keeps listening, and sees the edited values."""
    active = _ACTIVE.get()
    token = _ACTIVE.set(_Listeners(active.recorder if active is not None else None, editor))
    try:
        yield editor
    finally:
        _ACTIVE.reset(token)


@contextmanager
def alone():
    """Forward passes inside this block run with nobody listening, whoever listens around it
    (a patch's clean run, made while its corrupted run is traced)."""
    token = _ACTIVE.set(None)
    try:
        yield
    finally:
        _ACTIVE.reset(token)
