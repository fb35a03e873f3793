"""The GPT of chapter 4 of *Build a Large Language Model (From Scratch)*, with the book's class
and attribute names, plus the explorer's variants as options of the same classes.

With the book's config and the same ``torch.manual_seed``, ``GPTModel`` creates exactly the
weights the book's code creates: the same modules, built in the same order, with PyTorch's
default initialisation. Variants only add or remove what they change.

Named probe points (``probe("resid_pre", x)``) mark where the explorer can record a value. They
cost one context-variable lookup when nobody records (see ``explorer.probes``).
"""
from __future__ import annotations

import threading
from contextlib import contextmanager
from contextvars import ContextVar

import torch
import torch.nn as nn
import torch.nn.functional as F

from .config import GPTConfig
from .uniform_kernel import fast_uniform

# ---------------------------------------------------------------------------------------------
# Probe points. A recorder is any object with ``record(name, tensor)`` and ``wants_attention()``;
# it is active only inside ``recording(...)`` and only for the thread/context that set it, so
# sessions sharing one model never see each other's recordings.
_ACTIVE_RECORDER: ContextVar = ContextVar("explorer_active_recorder", default=None)

# Every probe point, in the order a pre-LN block reaches them. "ln1_in" is the input of norm1,
# "ln1_out" its output after scale and shift (likewise norm2 and final_norm).
BLOCK_PROBE_POINTS = ("resid_pre", "ln1_in", "ln1_out", "attn_out", "resid_mid", "ln2_in",
                      "ln2_out", "ff_pre", "ff_post", "ff_out", "resid_post")
MODEL_PROBE_POINTS = ("final_norm_in", "final_norm_out")


def probe(name: str, x: torch.Tensor) -> torch.Tensor:
    recorder = _ACTIVE_RECORDER.get()
    if recorder is not None:
        recorder.record(name, x)
    return x


def _recorder_wants_attention() -> bool:
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


# ---------------------------------------------------------------------------------------------
# The book's building blocks
class LayerNorm(nn.Module):
    """Normalise each token's vector to mean 0 and variance 1, then apply ``scale`` and
    ``shift``. The book's formula (``formula``) with its biased variance; ``forward`` runs the
    same computation as one fused kernel."""

    def __init__(self, emb_dim):
        super().__init__()
        self.eps = 1e-5
        self.scale = nn.Parameter(torch.ones(emb_dim))
        self.shift = nn.Parameter(torch.zeros(emb_dim))

    def formula(self, x):
        mean = x.mean(dim=-1, keepdim=True)
        var = x.var(dim=-1, keepdim=True, unbiased=False)
        norm_x = (x - mean) / torch.sqrt(var + self.eps)
        return self.scale * norm_x + self.shift

    def forward(self, x):
        return F.layer_norm(x, self.scale.shape, self.scale, self.shift, self.eps)


class GELU(nn.Module):
    """The book's GELU: the tanh approximation used by GPT-2 (``formula``); ``forward`` runs
    the same approximation as one fused kernel."""

    def formula(self, x):
        return 0.5 * x * (1 + torch.tanh(
            torch.sqrt(torch.tensor(2.0 / torch.pi)) * (x + 0.044715 * torch.pow(x, 3))))

    def forward(self, x):
        return F.gelu(x, approximate="tanh")


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
        # (b, T, d_out) -> (b, num_heads, T, head_dim)
        keys = self.W_key(x).view(b, num_tokens, self.num_heads, self.head_dim).transpose(1, 2)
        queries = self.W_query(x).view(b, num_tokens, self.num_heads, self.head_dim).transpose(1, 2)
        values = self.W_value(x).view(b, num_tokens, self.num_heads, self.head_dim).transpose(1, 2)

        start = cache.start if cache is not None else 0  # position of the first new token
        if self.rope is not None:
            queries, keys = self.rope(queries, start), self.rope(keys, start)
        if cache is not None:
            keys, values = cache.update(keys, values)     # (b, num_heads, start + T, head_dim)
        # What the attention weights are computed from (after RoPE, cached keys included): a
        # recorder can rebuild the weights from them while the fused kernel runs.
        queries, keys = probe("attn_queries", queries), probe("attn_keys", keys)

        # The book's step-by-step path when a recorder wants the weights, or when dropout is
        # active (so training draws the same random numbers as the book's code).
        if _recorder_wants_attention() or (self.training and self.dropout.p > 0):
            context_vec = self._explicit_attention(queries, keys, values, start)
        else:
            context_vec = self._fast_attention(queries, keys, values, start)
        context_vec = context_vec.transpose(1, 2).contiguous().view(b, num_tokens, self.d_out)
        return self.out_proj(context_vec)

    def _explicit_attention(self, queries, keys, values, start):
        """The book's computation, step by step; hands the attention weights to a recorder."""
        attn_scores = queries @ keys.transpose(2, 3)                   # (b, heads, T, S)
        mask_bool = causal_mask(queries.shape[2], keys.shape[2], start, queries.device)
        attn_scores.masked_fill_(mask_bool, -torch.inf)
        attn_weights = torch.softmax(attn_scores / keys.shape[-1] ** 0.5, dim=-1)
        attn_weights = self.dropout(attn_weights)
        probe("attn_pattern", attn_weights)
        return attn_weights @ values

    def _fast_attention(self, queries, keys, values, start):
        """The same result from PyTorch's fused kernel, used when nobody needs the weights."""
        num_queries, num_keys = queries.shape[2], keys.shape[2]
        dropout_p = self.dropout.p if self.training else 0.0
        if num_queries == 1:          # one new token may look at every cached token
            return F.scaled_dot_product_attention(queries, keys, values, dropout_p=dropout_p)
        if num_queries == num_keys:   # no cache in front: the plain causal case
            return F.scaled_dot_product_attention(queries, keys, values, dropout_p=dropout_p,
                                                  is_causal=True)
        allowed = ~causal_mask(num_queries, num_keys, start, queries.device)
        return F.scaled_dot_product_attention(queries, keys, values, attn_mask=allowed,
                                              dropout_p=dropout_p)


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

    def forward(self, in_idx, cache=None, last_only=False):
        """Token ids (batch, T) -> logits (batch, T, vocab_size); with ``last_only`` only the
        last position's logits (batch, 1, vocab_size), which is all that generation needs."""
        start = self._check_input(in_idx, cache)
        batch_size, seq_len = in_idx.shape
        tok_embeds = self.tok_emb(in_idx)
        if self.pos_emb is not None:
            pos_embeds = self.pos_emb(torch.arange(start, start + seq_len, device=in_idx.device))
            x = tok_embeds + pos_embeds  # Shape [batch_size, num_tokens, emb_size]
        else:
            x = tok_embeds               # RoPE adds positions inside attention instead
        x = self.drop_emb(x)
        for i, block in enumerate(self.trf_blocks):
            x = block(x, cache.layers[i] if cache is not None else None)
        if cache is not None:
            cache.advance(seq_len)
        x = probe("final_norm_out", self.final_norm(probe("final_norm_in", x)))
        if last_only:
            x = x[:, -1:, :]
        logits = self.out_head(x)
        return logits

    def _check_input(self, in_idx, cache):
        if not isinstance(in_idx, torch.Tensor) or in_idx.dim() != 2:
            raise ValueError("GPTModel expects token ids as a tensor of shape (batch, tokens).")
        if in_idx.shape[1] == 0:
            raise ValueError("The input has no tokens: give the model at least one token.")
        if in_idx.dtype not in (torch.int64, torch.int32):
            raise ValueError(f"Token ids must be integers, got {in_idx.dtype}.")
        start = cache.start if cache is not None else 0
        length, limit = start + in_idx.shape[1], self.cfg.context_length
        if cache is not None and length > cache.capacity and cache.capacity < limit:
            raise ValueError(f"The KV cache holds {cache.capacity} positions; this input would "
                             f"need {length}. Make a cache with a larger capacity.")
        if length > limit:
            raise ValueError(
                f"The input has {length} tokens but this model's context_length is {limit}. "
                f"Keep only the last {limit} tokens (generation crops the context for you).")
        low, high = int(in_idx.min()), int(in_idx.max())
        if low < 0 or high >= self.cfg.vocab_size:
            bad = low if low < 0 else high
            raise ValueError(f"Token id {bad} is outside this model's vocabulary "
                             f"(0 ... {self.cfg.vocab_size - 1}).")
        return start


# ---------------------------------------------------------------------------------------------
# KV cache: keys and values of earlier tokens, kept so that each new token costs one position
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

    def __init__(self, model: GPTModel, batch_size: int = 1, capacity: int | None = None):
        cfg = model.cfg
        weight = model.tok_emb.weight
        self.capacity = cfg.context_length if capacity is None else min(capacity,
                                                                        cfg.context_length)
        if self.capacity < 1:
            raise ValueError(f"A KV cache needs room for at least one token (got {capacity}).")
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


# ---------------------------------------------------------------------------------------------
# Building a model: a pure function of (config, seed, device, dtype)
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}
_BUILD_LOCK = threading.Lock()  # torch.manual_seed is global: one build at a time


def resolve_device(device: str = "auto") -> torch.device:
    if device == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        if getattr(torch.backends, "mps", None) and torch.backends.mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    if device == "cpu":
        return torch.device("cpu")
    if device == "cuda":
        if not torch.cuda.is_available():
            raise ValueError("CUDA is not available on this machine; use device 'cpu' or 'auto'.")
        return torch.device("cuda")
    if device == "mps":
        if not (getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()):
            raise ValueError("MPS is not available on this machine; use device 'cpu' or 'auto'.")
        return torch.device("mps")
    raise ValueError(f"device must be 'auto', 'cpu', 'cuda' or 'mps' (got {device!r}).")


def resolve_dtype(dtype: str, device: torch.device) -> torch.dtype:
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(DTYPES)} (got {dtype!r}).")
    if dtype == "bfloat16" and device.type == "cpu":
        raise ValueError("bfloat16 is offered on a GPU only; on the CPU use float32.")
    return DTYPES[dtype]


def build_model(cfg, seed: int = 123, device: str = "auto", dtype: str = "float32") -> GPTModel:
    """``torch.manual_seed(seed); GPTModel(cfg)`` as in the book, in eval mode, on ``device``.
    Weights are created on the CPU so the same seed gives the same numbers on every device."""
    cfg = GPTConfig.from_dict(cfg)
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2 ** 63:
        raise ValueError(f"seed must be a whole number from 0 to 2**63 - 1 (got {seed!r}).")
    target = resolve_device(device)
    torch_dtype = resolve_dtype(dtype, target)
    with _BUILD_LOCK, torch.random.fork_rng(devices=[]), fast_uniform():
        torch.manual_seed(seed)
        model = GPTModel(cfg)
    model.eval()
    model.requires_grad_(False)
    return model.to(device=target, dtype=torch_dtype)


def model_device(model: nn.Module) -> torch.device:
    return model.tok_emb.weight.device
