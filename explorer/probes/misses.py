"""What the first-order estimate of the knock-out map (``explorer.probes.attribution``) can
miss, decided per text and per cell (bench/README.md, "Which parts matter, estimated"):

- where the model is sure of its next token (p > ``SURE``) the loss's gradient is near 0, so a
  knock-out that breaks that certainty (an induction head on a repeat) is estimated near 0
  while it costs nats. A cell whose change at such a position is at least ``BLIND_CHANGE`` of
  the stream there is "blind" (``blind_cells``): no estimate of it is shown, and it is made
  exact with the exact-only cells;
- the exact values made first show how far off the estimate is on this text: once it has
  missed one by more than ``MISS`` nats (half the tenth of a nat the map may be off by), no
  estimate of this text is trusted, and every cell is made exact. (On the copying model it
  misses by 0.2 to 2 nats also where no position is sure: a large change of a sharp output
  softmax is far from first order; on random gpt2-small by 0.003 at most, 18 tokens.)
"""
from __future__ import annotations

import numpy as np
import torch

from .knockouts import PARTS

SURE = 0.9             # p(next) above which the loss's gradient is near 0
BLIND_CHANGE = 0.1     # a change of this share of the stream where the model is sure: blind
MISS = 0.05            # nats: an estimate off by more than this is not trusted on its text


def blind_cells(model, values, sure, exact_only) -> tuple[np.ndarray, np.ndarray]:
    """(heads (layers, heads), parts (layers, len(PARTS))) bool: the cells whose knock-out
    changes the stream, at a position where the model is sure of its next token (``sure``,
    (T-1,)), by at least ``BLIND_CHANGE`` of its size there: a head its share of
    ``out_proj``'s output, att / ff their output (of the sum it joins), a norm made the
    identity its input against its output (what the sub-layer then reads)."""
    cfg = model.cfg
    heads = np.zeros((cfg.n_layers, cfg.n_heads), bool)
    parts = np.zeros((cfg.n_layers, len(PARTS)), bool)
    at = torch.nonzero(sure).flatten().to(values[(0, "resid_pre")].device)
    if len(at) == 0:
        return heads, parts
    post = cfg.norm_placement == "post"

    def v(layer, point):
        return values[(layer, point)][0, at].float()                  # (S, ...)

    def large(change, stream) -> bool:                                # (S, emb) each
        return bool((change.norm(dim=-1) >= BLIND_CHANGE * stream.norm(dim=-1)).any())

    for layer in range(cfg.n_layers):
        after_att = v(layer, "ln1_in" if post else "resid_mid")
        after_ff = v(layer, "ln2_in" if post else "resid_post")
        context = v(layer, "attn_context")                            # (S, heads, hd)
        weight = model.trf_blocks[layer].att.out_proj.weight.float()  # (emb, heads * hd)
        written = torch.einsum("shd,ehd->she", context,
                               weight.view(weight.shape[0], cfg.n_heads, -1))
        heads[layer] = [large(written[:, h], after_att) for h in range(cfg.n_heads)]
        if "att" not in exact_only:
            parts[layer, PARTS.index("att")] = large(v(layer, "attn_out"), after_att)
        if "ff" not in exact_only:
            parts[layer, PARTS.index("ff")] = large(v(layer, "ff_out"), after_ff)
        if cfg.norm_placement != "none":
            for norm, point in (("norm1", "ln1"), ("norm2", "ln2")):
                if norm not in exact_only:
                    out = v(layer, point + "_out")
                    parts[layer, PARTS.index(norm)] = large(v(layer, point + "_in") - out, out)
    return heads, parts
