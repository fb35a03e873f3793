"""KV cache: the keys and values of earlier tokens, kept so that each new token costs one
position. Passed into ``GPTModel.forward``, so one read-only model serves every session."""
from __future__ import annotations

import torch

from .errors import ExplorerError


class _LayerKV:
    def __init__(self, owner, keys, values):
        self.owner, self.keys, self.values = owner, keys, values

    @property
    def start(self):
        return self.owner.pos

    def update(self, keys, values):
        """Store the new tokens' keys/values; return those of all tokens so far."""
        start, end = self.owner.pos, self.owner.pos + keys.shape[2]
        self.keys[:, :, start:end] = keys
        self.values[:, :, start:end] = values
        return self.keys[:, :, :end], self.values[:, :, :end]


class KVCache:
    """Preallocated keys/values (batch, heads, capacity, head_dim) for every layer, where the
    capacity is the context length unless a generation says how many positions it needs (a
    20-token prompt and 50 new tokens need 70 positions of GPT-2 small's 1,024: 5 MB, not
    75 MB). One cache belongs to one generation; the model itself stays read-only."""

    def __init__(self, model, batch_size: int = 1, capacity: int | None = None):
        cfg = model.cfg
        weight = model.tok_emb.weight
        self.capacity = cfg.context_length if capacity is None else min(capacity,
                                                                        cfg.context_length)
        if self.capacity < 1:
            raise ExplorerError("kv_cache.no_room", "A KV cache needs room for at least one "
                                "token (got {capacity}).", capacity=capacity)
        shape = (batch_size, cfg.n_heads, self.capacity, cfg.head_dim)
        self.pos = 0
        self.layers = [_LayerKV(self, torch.empty(shape, dtype=weight.dtype, device=weight.device),
                                torch.empty(shape, dtype=weight.dtype, device=weight.device))
                       for _ in range(cfg.n_layers)]

    @property
    def start(self):
        """Position of the next token to be fed in."""
        return self.pos

    def advance(self, num_tokens):
        self.pos += num_tokens

    def reset(self):
        self.pos = 0
