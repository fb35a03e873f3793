"""Vocabulary-wide reductions: the output head, next-token top-k and the logit lens."""
from __future__ import annotations

import numpy as np
import torch

from .. import native
from .statistics import helper

TOPK_GROUP = 256   # consecutive vocabulary entries per group in row_topk
HEAD_ROWS = 256    # rows per output-head product for the logit lens at many positions
HEAD_COLUMNS = 2048  # vocabulary entries per block of head_product


def head_product(out_head, x):
    """``out_head(x)`` for x (rows, emb_dim), the vocabulary taken 2,048 entries at a time on
    the CPU: for GPT-2 small at 128 rows, MKL's single product (768 x 50,257 weights, 154 MB)
    took 130-140 ms and the blocks, whose weights fit in the cache, 93-103 ms. The same
    logits up to float rounding; the model's own forward keeps the book's ``out_head(x)``."""
    weight = out_head.weight
    if (not x.is_cpu or out_head.bias is not None or weight.shape[0] <= HEAD_COLUMNS
            or torch.is_grad_enabled() or x.dim() != 2):
        return out_head(x)
    out = torch.empty(x.shape[0], weight.shape[0], dtype=torch.promote_types(x.dtype,
                                                                            weight.dtype))
    for start in range(0, weight.shape[0], HEAD_COLUMNS):
        block = slice(start, start + HEAD_COLUMNS)
        torch.mm(x, weight[block].t(), out=out[:, block])
    return out


def row_topk(x, k):
    """``torch.topk(x, k, dim=-1)`` for vocabulary-wide rows, in about one pass over ``x``.

    The k largest values of a row lie in the k groups (of ``TOPK_GROUP`` neighbours) with the
    largest maxima, so only those k groups are searched. The last group of a row may be shorter
    (GPT-2's 50,257 entries are 196 groups of 256 and one of 81); with narrow rows, where
    grouping would not pay off, this is ``torch.topk`` itself.
    """
    rows, width = x.shape
    if width < 8 * k * TOPK_GROUP:
        return torch.topk(x, k, dim=-1)
    whole = width // TOPK_GROUP * TOPK_GROUP
    maxima = x[:, :whole].unflatten(1, (-1, TOPK_GROUP)).amax(-1)     # (rows, groups)
    if whole < width:
        maxima = torch.cat([maxima, x[:, whole:].amax(-1, keepdim=True)], dim=1)
    groups = maxima.topk(k, dim=-1).indices                              # (rows, k)
    candidates = (groups[..., None] * TOPK_GROUP
                  + torch.arange(TOPK_GROUP, device=x.device)).view(rows, -1)
    beyond = candidates >= width              # the short group's missing entries: -inf
    values = x.gather(1, candidates.clamp_max_(width - 1)).masked_fill_(beyond, -torch.inf)
    values, where = values.topk(k, dim=-1)
    return values, candidates.gather(1, where)


def top_probs(logits, k):
    """Top-k next-token ids and probabilities at every position: (T, k) tensors. On the CPU
    two threads each take half the positions through ``native.rows_summary`` (two
    passes over each row's logits, in C); otherwise ``logits`` (T, vocab) is overwritten with
    its log-softmax (one fused pass, no full-size copy) and reduced by ``row_topk``."""
    if logits.is_cpu and logits.dtype == torch.float32 and logits.is_contiguous() \
            and k <= 64 and native.available():
        half = (logits.shape[0] + 1) // 2
        theirs = helper().submit(native.rows_summary, logits[half:], k)
        mine, theirs = native.rows_summary(logits[:half], k), theirs.result()
        if mine is not None and theirs is not None:
            return torch.cat([mine[0], theirs[0]]), torch.cat([mine[1], theirs[1]])
    logits = logits.float()                   # (a copy only for a half-precision model)
    log_probs = torch.log_softmax(logits, dim=-1, out=logits)
    values, indices = row_topk(log_probs, k)
    return indices, values.exp_()


def logit_lens(model, recorder, positions, top_ids, top_probs):
    """Final norm + output head on each block's output: every layer's guess for the next token.

    The earlier blocks' rows come from the recorder's one head product when they were few
    (``recorder.lens_logits``), else they go through the head here, ``HEAD_ROWS`` at a time.
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
        for start, logits in lens_logits(model, recorder):
            log_probs = logits.float()
            torch.log_softmax(log_probs, dim=-1, out=log_probs)           # in place
            values, indices = row_topk(log_probs, 1)
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


def lens_logits(model, recorder):
    """(first row, logits) of the earlier blocks' lens rows, in layer-major order."""
    if recorder.lens_logits is not None:
        yield 0, recorder.lens_logits
        return
    earlier = recorder.lens_inputs[:-1].flatten(0, 1)                       # ((L-1)*P, emb)
    for start in range(0, earlier.shape[0], HEAD_ROWS):
        yield start, head_product(model.out_head,
                                   recorder.lens_norm(earlier[start:start + HEAD_ROWS]))
