"""Direct logit attribution: each part's direct contribution to the logit difference
``logit(right) - logit(wrong)`` at the last position of a prompt.

With the final LayerNorm's scale taken from the run (its division by the stream's own standard
deviation at the last position, kept fixed), the final norm is a linear map, and the logit
difference is a sum over what each part wrote into the residual stream: the token and position
embeddings, each head (its context vector through its slice of ``out_proj``), each block's
feed-forward output, and the biases (every ``out_proj``'s, and the final norm's shift). The
parts add up to the model's own logit difference (to float rounding: summed in float64).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ..book.errors import ExplorerError, Text
from ..book.model import model_device
from ..book.probe_points import recording
from .patching import check_answer
from .tracing import _check_ids


@dataclass
class DirectAttribution:
    """Each part's direct contribution to ``logit(right) - logit(wrong)`` at the last position
    of ``token_ids``, with the final norm's scale of the run: the parts add up to ``total``,
    which is the model's own logit difference ``model_diff`` to float rounding."""

    token_ids: list[int]
    right: int
    wrong: int
    heads: np.ndarray          # (layers, heads)
    ff: np.ndarray             # (layers,)
    tok_emb: float
    pos_emb: float             # 0 where positions are rotated (RoPE): no pos_emb
    biases: float              # every out_proj's bias and the final norm's shift
    final_scale: float         # sqrt(var + eps) of the stream at the last position (the run's)
    model_diff: float

    @property
    def total(self) -> float:
        return (float(self.heads.sum()) + float(self.ff.sum()) + self.tok_emb + self.pos_emb
                + self.biases)


class _Parts:
    """Keeps, at the last position, each block's heads' context vectors and ff output, the
    positional embedding and the stream entering the final norm."""

    POINTS = ("attn_context", "ff_out", "pos_emb", "resid_pre", "final_norm_in")

    def __init__(self):
        self.layer, self.values = -1, {}

    def wants_attention(self):
        return False

    def record(self, name, x):
        if name == "resid_pre":
            self.layer += 1
        if name in self.POINTS:
            layer = None if name in ("pos_emb", "final_norm_in") else self.layer
            self.values[(layer, name)] = x[..., -1, :] if name == "pos_emb" else x[0, -1]


def direct_attribution(model, token_ids, right: int, wrong: int) -> DirectAttribution:
    """The direct logit attribution of ``token_ids`` (see the module's docstring). Only where
    the stream is a sum of the parts: pre-LN (the book's) or no norm, with shortcuts."""
    cfg = model.cfg
    ids = _check_ids(token_ids, cfg)
    right, wrong = check_answer(right, cfg), check_answer(wrong, cfg)
    if cfg.norm_placement == "post" or not cfg.shortcut:
        raise ExplorerError("patching.not_a_sum", "Direct logit attribution reads the residual "
                            "stream as the sum of what each part wrote into it: that needs "
                            "shortcut connections and no LayerNorm on the stream itself "
                            "(pre-LN, the book's, or none); this model is {what}.",
                            what=Text("patching.post_ln", "post-LN")
                            if cfg.norm_placement == "post" else
                            Text("patching.no_shortcuts", "without shortcut connections"))
    parts = _Parts()
    device = model_device(model)
    with torch.inference_mode(), recording(parts):
        x = model(torch.tensor([ids], device=device), stop_at_layer=cfg.n_layers)
        parts.record("final_norm_in", x)
        logits = model.out_head(model.final_norm(x[:, -1]))
    model_diff = float(logits[0, right] - logits[0, wrong])
    with torch.inference_mode():
        return _attribution(model, ids, right, wrong, parts, model_diff)


def _attribution(model, ids, right, wrong, parts, model_diff) -> DirectAttribution:
    cfg = model.cfg
    f64 = torch.float64
    direction = (model.out_head.weight[right] - model.out_head.weight[wrong]).to(f64)
    norm = model.final_norm
    stream = parts.values[(None, "final_norm_in")].to(f64)
    if hasattr(norm, "scale"):
        # final_norm(x) = scale * (x - mean(x)) / s + shift, s = sqrt(var + eps) of this run:
        # d · final_norm(x) = (u - mean(u)) · x / s + d · shift, with u = d * scale
        s = torch.sqrt(stream.var(unbiased=False) + norm.eps)
        u = direction * norm.scale.to(f64)
        read, constant = (u - u.mean()) / s, float(direction @ norm.shift.to(f64))
    else:
        s, read, constant = torch.tensor(1.0, dtype=f64), direction, 0.0
    L, H, hd = cfg.n_layers, cfg.n_heads, cfg.head_dim
    heads, ff = np.zeros((L, H)), np.zeros(L)
    biases = constant
    for l, block in enumerate(model.trf_blocks):
        w = block.att.out_proj.weight.to(f64)                               # (emb, emb)
        context = parts.values[(l, "attn_context")].to(f64)                # (heads, head_dim)
        for h in range(H):
            heads[l, h] = float(read @ (w[:, h * hd:(h + 1) * hd] @ context[h]))
        biases += float(read @ block.att.out_proj.bias.to(f64))
        ff[l] = float(read @ parts.values[(l, "ff_out")].to(f64))
    tok_part = float(read @ model.tok_emb.weight[ids[-1]].to(f64))
    pos = parts.values.get((None, "pos_emb"))
    pos_part = 0.0 if pos is None else float(read @ pos.reshape(-1).to(f64))
    return DirectAttribution(ids, right, wrong, heads, ff, tok_part, pos_part, biases,
                             float(s), model_diff)
