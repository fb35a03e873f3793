"""Fused twins of the book's modules: the same parameters and the same numbers (within float
rounding), computed by PyTorch's fused kernels. The book keeps its own fast model apart
(``GPTModelFast``); here ``fuse(model)`` turns a built ``GPTModel`` into its fast twin in place,
so the weights, the state_dict and every probe point stay as they were. Whoever builds a model
chooses; the book's classes never call these.
"""
from __future__ import annotations

import torch.nn as nn
import torch.nn.functional as F

from .model import GELU, LayerNorm, MultiHeadAttention, causal_mask
from .probe_points import probe, recorder_wants_attention


class FusedLayerNorm(LayerNorm):
    def forward(self, x):
        return F.layer_norm(x, self.scale.shape, self.scale, self.shift, self.eps)


class FusedGELU(GELU):
    def forward(self, x):
        return F.gelu(x, approximate="tanh")


class FusedMultiHeadAttention(MultiHeadAttention):
    """PyTorch's fused attention kernel. The book's explicit steps still run when a recorder
    asks for the weights, and when dropout is active (so that training draws the same random
    numbers as the book's code). An intervention needs no step aside: every probe point but
    the weights is reached on this path too, so the parts it leaves alone keep the very numbers
    of the model without it."""

    def forward(self, x, cache=None):
        if recorder_wants_attention() or (self.training and self.dropout.p > 0):
            return super().forward(x, cache)
        b, num_tokens, _ = x.shape
        queries, keys, values = self.project(x, cache)      # (b, heads, T or S, head_dim)
        num_keys = keys.shape[2]
        if num_tokens == 1:          # one new token may look at every cached token
            context_vec = F.scaled_dot_product_attention(queries, keys, values)
        elif num_tokens == num_keys:   # no cache in front: the plain causal case
            context_vec = F.scaled_dot_product_attention(queries, keys, values, is_causal=True)
        else:
            allowed = ~causal_mask(num_tokens, num_keys, num_keys - num_tokens, x.device)
            context_vec = F.scaled_dot_product_attention(queries, keys, values,
                                                         attn_mask=allowed)
        # The same probe point as the book's path: an intervention on heads applies here too.
        context_vec = probe("attn_context", context_vec.transpose(1, 2))  # (b, T, heads, hd)
        context_vec = context_vec.contiguous().view(b, num_tokens, self.d_out)
        return self.out_proj(context_vec)


FUSED = {LayerNorm: FusedLayerNorm, GELU: FusedGELU, MultiHeadAttention: FusedMultiHeadAttention}


def fuse(model: nn.Module) -> nn.Module:
    """Swap each book module of ``model`` for its fused twin, in place; returns ``model``. Only
    ``forward`` differs, so the swap moves no weight."""
    for module in model.modules():
        module.__class__ = FUSED.get(type(module), type(module))
    return model
