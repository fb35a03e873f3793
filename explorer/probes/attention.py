"""The book's attention weights, rebuilt from a block's queries and keys while the forward pass
keeps PyTorch's fused attention kernel."""
from __future__ import annotations

import torch

from .. import native
from ..book.model import causal_mask
from .statistics import helper

def attention_weights(attn_scores, head_dim):
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


def attention_in_c(attn_scores, head_dim):
    """``attention_weights`` in place and each row's sum of w ln w ((batch, heads, T)), from
    ``native.attention_rows`` with the heads split between this thread and the helper
    (three passes over each row instead of PyTorch's ~eight: ~10 -> ~2 ms for GPT-2 small at
    T = 128); None where it does not apply (the scores are then partly changed)."""
    if not (attn_scores.is_cpu and attn_scores.dtype == torch.float32
            and native.available()):
        return None
    plogp = torch.empty(attn_scores.shape[:-1])
    units = attn_scores.shape[0] * attn_scores.shape[1]          # (layer, head) pairs
    scores, rows = attn_scores.view(units, *attn_scores.shape[2:]), plogp.view(units, -1)
    half = units // 2
    theirs = helper().submit(native.attention_rows, scores[half:], head_dim, rows[half:])
    mine = native.attention_rows(scores[:half], head_dim, rows[:half])
    return plogp if theirs.result() and mine else None
