"""The GPT of chapter 4 of *Build a Large Language Model (From Scratch)*, with the book's class
and attribute names, plus the explorer's variants as options of the same classes.

With the book's config and the same ``torch.manual_seed``, ``GPTModel`` creates exactly the
weights the book's code creates: the same modules, built in the same order, with PyTorch's
default initialisation. Variants only add or remove what they change. Every ``forward`` shows
the book's formula; fused kernels that compute the same numbers live apart, in
``explorer.book.fast``, and whoever builds a model chooses them.

Named probe points (``probe("resid_pre", x)``, see ``explorer.book.probe_points``) mark where the
explorer can record a value, or replace it (an intervention).
"""
from __future__ import annotations

import torch
import torch.nn as nn

from .config import GPTConfig
from .errors import ExplorerError
from .probe_points import probe


# ---------------------------------------------------------------------------------------------
# The book's building blocks
class LayerNorm(nn.Module):
    """Normalise each token's vector to mean 0 and variance 1 (the biased variance, as the
    book), then apply ``scale`` and ``shift``."""

    def __init__(self, emb_dim):
        super().__init__()
        self.eps = 1e-5
        self.scale = nn.Parameter(torch.ones(emb_dim))
        self.shift = nn.Parameter(torch.zeros(emb_dim))

    def forward(self, x):
        mean = x.mean(dim=-1, keepdim=True)
        var = x.var(dim=-1, keepdim=True, unbiased=False)
        norm_x = (x - mean) / torch.sqrt(var + self.eps)
        return self.scale * norm_x + self.shift


class GELU(nn.Module):
    """The book's GELU: the tanh approximation used by GPT-2."""

    def forward(self, x):
        return 0.5 * x * (1 + torch.tanh(
            torch.sqrt(torch.tensor(2.0 / torch.pi)) * (x + 0.044715 * torch.pow(x, 3))))


def _book_dict(cfg) -> dict:
    """The book's blocks take its plain dict; fill in the explorer's knobs (book defaults)."""
    return GPTConfig.from_dict(cfg).to_dict()


def make_activation(name: str) -> nn.Module:
    return {"gelu": GELU, "gelu_exact": nn.GELU, "relu": nn.ReLU, "silu": nn.SiLU}[name]()


class FeedForward(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        cfg = _book_dict(cfg)
        self.layers = nn.Sequential(
            nn.Linear(cfg["emb_dim"], cfg["ff_expansion"] * cfg["emb_dim"]),
            make_activation(cfg["activation"]),
            nn.Linear(cfg["ff_expansion"] * cfg["emb_dim"], cfg["emb_dim"]),
        )

    def forward(self, x):
        # The book's ``self.layers(x)``, one layer at a time so the hidden layer can be probed.
        h = probe("ff_pre", self.layers[0](x))   # hidden layer before the activation
        h = probe("ff_post", self.layers[1](h))  # ... and after it
        return self.layers[2](h)


class RotaryEmbedding(nn.Module):
    """Rotary position embeddings (RoPE): rotate each pair of query/key dimensions by an angle
    proportional to the position, so attention scores depend on relative positions."""

    def __init__(self, head_dim, context_length, base=10_000.0):
        super().__init__()
        inv_freq = 1.0 / base ** (torch.arange(0, head_dim, 2).float() / head_dim)
        angles = torch.arange(context_length).float()[:, None] * inv_freq[None, :]
        angles = torch.cat([angles, angles], dim=-1)               # (context_length, head_dim)
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)

    def forward(self, x, start):                                   # x: (b, heads, T, head_dim)
        num_tokens = x.shape[2]
        cos = self.cos[start:start + num_tokens]
        sin = self.sin[start:start + num_tokens]
        x1, x2 = x.chunk(2, dim=-1)
        return x * cos + torch.cat((-x2, x1), dim=-1) * sin


def causal_mask(num_queries, num_keys, start, device):
    """The book's ``mask``: True above the diagonal (future tokens). The book registers a
    context_length² buffer; building the needed slice on the fly costs no memory."""
    rows = torch.arange(start, start + num_queries, device=device)[:, None]
    cols = torch.arange(num_keys, device=device)[None, :]
    return cols > rows


class MultiHeadAttention(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False,
                 rope=None):
        super().__init__()
        assert d_out % num_heads == 0, "d_out must be divisible by num_heads"
        self.d_out = d_out
        self.num_heads = num_heads
        self.head_dim = d_out // num_heads
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)
        self.dropout = nn.Dropout(dropout)
        self.context_length = context_length
        self.rope = rope  # a RotaryEmbedding shared by all blocks, or None (learned positions)

    def forward(self, x, cache=None):
        b, num_tokens, d_in = x.shape
        queries, keys, values = self.project(x, cache)   # (b, heads, T or S, head_dim)

        # The book's steps: scores, causal mask, scale, softmax, dropout, weighted sum.
        attn_scores = queries @ keys.transpose(2, 3)      # (b, heads, T, S)
        start = keys.shape[2] - num_tokens                # cached tokens in front of these
        mask_bool = causal_mask(num_tokens, keys.shape[2], start, x.device)
        attn_scores.masked_fill_(mask_bool, -torch.inf)
        attn_weights = torch.softmax(attn_scores / keys.shape[-1] ** 0.5, dim=-1)
        attn_weights = self.dropout(probe("attn_pattern", attn_weights))

        context_vec = (attn_weights @ values).transpose(1, 2)   # (b, T, heads, head_dim)
        context_vec = probe("attn_context", context_vec)          # each head's, apart
        context_vec = context_vec.contiguous().view(b, num_tokens, self.d_out)
        return self.out_proj(context_vec)

    def project(self, x, cache=None):
        """Queries, keys and values split into heads, (b, heads, T, head_dim); positions
        rotated (RoPE) and the cached tokens' keys and values in front (S = cached + T)."""
        b, num_tokens, d_in = x.shape
        # (b, T, d_out) -> (b, T, heads, head_dim) -> (b, heads, T, head_dim)
        keys = self.W_key(x).view(b, num_tokens, self.num_heads, self.head_dim).transpose(1, 2)
        queries = self.W_query(x).view(b, num_tokens, self.num_heads, self.head_dim).transpose(1, 2)
        values = self.W_value(x).view(b, num_tokens, self.num_heads, self.head_dim).transpose(1, 2)

        start = cache.start if cache is not None else 0  # position of the first new token
        if self.rope is not None:
            queries, keys = self.rope(queries, start), self.rope(keys, start)
        if cache is not None:
            keys, values = cache.update(keys, values)     # (b, heads, start + T, head_dim)
        # What the attention weights are computed from: a recorder can rebuild them.
        return probe("attn_queries", queries), probe("attn_keys", keys), values


class TransformerBlock(nn.Module):
    def __init__(self, cfg, rope=None):
        super().__init__()
        cfg = _book_dict(cfg)
        self.att = MultiHeadAttention(
            d_in=cfg["emb_dim"],
            d_out=cfg["emb_dim"],
            context_length=cfg["context_length"],
            num_heads=cfg["n_heads"],
            dropout=cfg["drop_rate"],
            qkv_bias=cfg["qkv_bias"],
            rope=rope)
        self.ff = FeedForward(cfg)
        has_norm = cfg["norm_placement"] != "none"
        self.norm1 = LayerNorm(cfg["emb_dim"]) if has_norm else nn.Identity()
        self.norm2 = LayerNorm(cfg["emb_dim"]) if has_norm else nn.Identity()
        self.drop_shortcut = nn.Dropout(cfg["drop_rate"])
        self.norm_placement = cfg["norm_placement"]
        self.use_shortcut = cfg["shortcut"]

    def forward(self, x, cache=None):
        x = probe("resid_pre", x)                 # residual stream entering the block
        # Shortcut connection for attention block
        shortcut = x
        if self.norm_placement == "pre":          # the book (GPT-2): normalise first
            x = probe("ln1_out", self.norm1(probe("ln1_in", x)))
        x = probe("attn_out", self.att(x, cache))
        x = self.drop_shortcut(x)
        if self.use_shortcut:
            x = x + shortcut  # Add the original input back
        if self.norm_placement == "post":         # the original Transformer: normalise the sum
            x = probe("ln1_out", self.norm1(probe("ln1_in", x)))
        x = probe("resid_mid", x)                 # residual stream between the two sub-blocks

        # Shortcut connection for feed-forward block
        shortcut = x
        if self.norm_placement == "pre":
            x = probe("ln2_out", self.norm2(probe("ln2_in", x)))
        x = probe("ff_out", self.ff(x))
        x = self.drop_shortcut(x)
        if self.use_shortcut:
            x = x + shortcut
        if self.norm_placement == "post":
            x = probe("ln2_out", self.norm2(probe("ln2_in", x)))
        return probe("resid_post", x)             # the block's output


class GPTModel(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        cfg = GPTConfig.from_dict(cfg)
        self.cfg = cfg
        c = cfg.to_dict()  # the book indexes its config as a dict: cfg["emb_dim"]
        self.tok_emb = nn.Embedding(c["vocab_size"], c["emb_dim"])
        self.pos_emb = (nn.Embedding(c["context_length"], c["emb_dim"])
                        if cfg.pos_encoding == "learned" else None)
        self.drop_emb = nn.Dropout(c["drop_rate"])
        rope = (RotaryEmbedding(cfg.head_dim, c["context_length"])
                if cfg.pos_encoding == "rope" else None)

        self.trf_blocks = nn.Sequential(
            *[TransformerBlock(c, rope) for _ in range(c["n_layers"])])

        self.final_norm = (LayerNorm(c["emb_dim"]) if cfg.norm_placement != "none"
                           else nn.Identity())
        if cfg.tie_weights:
            # Share the embedding's storage (GPT-2's original choice): built on the meta
            # device so that no throw-away 50257 x 768 matrix is initialised.
            self.out_head = nn.Linear(c["emb_dim"], c["vocab_size"], bias=False, device="meta")
            self.out_head.weight = self.tok_emb.weight
        else:
            self.out_head = nn.Linear(c["emb_dim"], c["vocab_size"], bias=False)

    def forward(self, in_idx, cache=None, last_only=False, stop_at_layer=None):
        """Token ids (batch, T) -> logits (batch, T, vocab_size); with ``last_only`` only the
        last position's logits (batch, 1, vocab_size), which is all that generation needs.
        With ``stop_at_layer=n`` only the first n blocks run, and the residual stream after
        them (batch, T, emb_dim) is returned (a probe that needs the early layers only)."""
        start = self._check_input(in_idx, cache, stop_at_layer)
        batch_size, seq_len = in_idx.shape
        # Every pass starts here: its tokens' positions come after those in the KV cache.
        positions = probe("positions", torch.arange(start, start + seq_len, device=in_idx.device))
        tok_embeds = self.tok_emb(in_idx)
        if self.pos_emb is not None:
            pos_embeds = probe("pos_emb", self.pos_emb(positions))
            x = tok_embeds + pos_embeds  # Shape [batch_size, num_tokens, emb_size]
        else:
            x = tok_embeds               # RoPE adds positions inside attention instead
        x = self.drop_emb(x)
        blocks = self.trf_blocks if stop_at_layer is None else self.trf_blocks[:stop_at_layer]
        for i, block in enumerate(blocks):
            x = block(x, cache.layers[i] if cache is not None else None)
        if stop_at_layer is not None:
            return x
        if cache is not None:
            cache.advance(seq_len)
        x = probe("final_norm_out", self.final_norm(probe("final_norm_in", x)))
        if last_only:
            x = x[:, -1:, :]
        logits = self.out_head(x)
        return logits

    def _check_input(self, in_idx, cache, stop_at_layer=None):
        if not isinstance(in_idx, torch.Tensor) or in_idx.dim() != 2:
            raise ExplorerError("model.ids_not_a_batch", "GPTModel expects token ids as a tensor "
                                "of shape (batch, tokens).")
        if in_idx.shape[1] == 0:
            raise ExplorerError("model.no_tokens", "The input has no tokens: give the model at "
                                "least one token.")
        if in_idx.dtype not in (torch.int64, torch.int32):
            raise ExplorerError("model.ids_not_integers", "Token ids must be integers, got "
                                "{dtype}.", dtype=in_idx.dtype)
        if stop_at_layer is not None and (
                isinstance(stop_at_layer, bool) or not isinstance(stop_at_layer, int)
                or not 0 <= stop_at_layer <= self.cfg.n_layers):
            raise ExplorerError("model.stop_at_layer", "stop_at_layer must be a whole number "
                                "from 0 to {n_layers} (got {stop_at_layer!r}).",
                                n_layers=self.cfg.n_layers, stop_at_layer=stop_at_layer)
        if stop_at_layer is not None and cache is not None:
            raise ExplorerError("model.stop_at_layer_with_cache", "stop_at_layer runs part of "
                                "the model: it cannot fill a KV cache.")
        start = cache.start if cache is not None else 0
        length, limit = start + in_idx.shape[1], self.cfg.context_length
        if cache is not None and length > cache.capacity and cache.capacity < limit:
            raise ExplorerError("model.cache_too_small", "The KV cache holds {capacity} "
                                "positions; this input would need {length}. Make a cache with a "
                                "larger capacity.", capacity=cache.capacity, length=length)
        if length > limit:
            raise ExplorerError("model.input_too_long", "The input has {length} tokens but this "
                                "model's context_length is {limit}. Keep only the last {limit} "
                                "tokens (generation crops the context for you).", length=length,
                                limit=limit)
        low, high = int(in_idx.min()), int(in_idx.max())
        if low < 0 or high >= self.cfg.vocab_size:
            bad = low if low < 0 else high
            raise ExplorerError("tokens.outside_vocabulary", "Token id {bad} is outside this "
                                "model's vocabulary (0 ... {last}).", bad=bad,
                                last=self.cfg.vocab_size - 1)
        return start




def model_device(model: nn.Module) -> torch.device:
    return model.tok_emb.weight.device
