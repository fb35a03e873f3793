"""GPT configuration: the book's keys, the explorer's knobs, presets, validation and
parameter/memory accounting that never allocates a model.

The book passes a plain dict (``GPT_CONFIG_124M``); ``GPTConfig.from_dict`` takes that dict
verbatim, so code from chapter 4 runs unchanged.
"""
from __future__ import annotations

import dataclasses
import difflib
import math
from dataclasses import dataclass, fields

from .errors import ExplorerError, Message, Text

# The book's dict, exactly as printed in chapter 4 (section 4.1).
GPT_CONFIG_124M = {
    "vocab_size": 50257,     # Vocabulary size
    "context_length": 1024,  # Context length
    "emb_dim": 768,          # Embedding dimension
    "n_heads": 12,           # Number of attention heads
    "n_layers": 12,          # Number of layers
    "drop_rate": 0.1,        # Dropout rate
    "qkv_bias": False,       # Query-Key-Value bias
}

# Allowed values of the explorer's choice knobs; the first one is the book's.
NORM_PLACEMENTS = ("pre", "post", "none")
ACTIVATIONS = ("gelu", "gelu_exact", "relu", "silu")
POS_ENCODINGS = ("learned", "rope")

# Names other codebases use for the book's keys (nanoGPT, Hugging Face, the book's comments).
KEY_ALIASES = {"emb_size": "emb_dim", "n_embd": "emb_dim", "d_model": "emb_dim",
               "hidden_size": "emb_dim", "n_head": "n_heads", "num_heads": "n_heads",
               "n_layer": "n_layers", "num_layers": "n_layers", "block_size": "context_length",
               "n_positions": "context_length", "n_ctx": "context_length",
               "dropout": "drop_rate", "bias": "qkv_bias"}

_CHOICES = {"norm_placement": NORM_PLACEMENTS, "activation": ACTIVATIONS,
            "pos_encoding": POS_ENCODINGS}


@dataclass(frozen=True)
class GPTConfig:
    """Everything that defines a GPT's architecture. Defaults are the book's GPT-2 small."""

    # The book's keys
    vocab_size: int = 50257
    context_length: int = 1024
    emb_dim: int = 768
    n_heads: int = 12
    n_layers: int = 12
    drop_rate: float = 0.1
    qkv_bias: bool = False
    # The explorer's knobs (defaults = the book's model)
    norm_placement: str = "pre"    # "pre" (book, GPT-2), "post" (original Transformer), "none"
    shortcut: bool = True          # residual connections around attention and feed-forward
    activation: str = "gelu"       # "gelu" (book: tanh approximation), "gelu_exact", "relu", "silu"
    ff_expansion: int = 4          # feed-forward hidden size = ff_expansion * emb_dim
    tie_weights: bool = False      # output head shares the token-embedding matrix
    pos_encoding: str = "learned"  # "learned" (book: pos_emb table) or "rope" (rotary)

    def __post_init__(self):
        for name in _INT_FIELDS:
            object.__setattr__(self, name, _as_int(name, getattr(self, name)))
        for name in _BOOL_FIELDS:
            object.__setattr__(self, name, _as_bool(name, getattr(self, name)))
        for name, allowed in _CHOICES.items():
            object.__setattr__(self, name, _as_choice(name, getattr(self, name), allowed))
        object.__setattr__(self, "drop_rate", _as_rate(self.drop_rate))

        for name in _INT_FIELDS:
            value = getattr(self, name)
            if value < 1:
                raise ExplorerError("config.too_small", "{name} must be at least 1 (got {value}).",
                                    name=name, value=value)
        if self.emb_dim % self.n_heads:
            raise ExplorerError.of(_head_message(self.emb_dim, self.n_heads))
        if self.pos_encoding == "rope" and self.head_dim % 2:
            raise ExplorerError("config.rope_odd_head_dim", "RoPE rotates pairs of dimensions, "
                                "so the head size emb_dim / n_heads must be even; {emb_dim} / "
                                "{n_heads} = {head_dim} is odd. Choose another head count or "
                                "emb_dim, or use pos_encoding='learned'.", emb_dim=self.emb_dim,
                                n_heads=self.n_heads, head_dim=self.head_dim)

    @property
    def head_dim(self) -> int:
        return self.emb_dim // self.n_heads

    @property
    def ff_hidden_dim(self) -> int:
        return self.ff_expansion * self.emb_dim

    @classmethod
    def from_dict(cls, d) -> "GPTConfig":
        """Accept the book's plain dict (``qkv_bias`` optional) plus any explorer knob."""
        if isinstance(d, GPTConfig):
            return d
        if not isinstance(d, dict):
            raise ExplorerError("config.not_a_dict", "A config must be a dict or GPTConfig, got "
                                "{kind}.", kind=type(d).__name__)
        known = [f.name for f in fields(cls)]
        for key in d:
            if key not in known:
                hint = ([KEY_ALIASES[key]] if key in KEY_ALIASES
                        else difflib.get_close_matches(str(key), known, n=1, cutoff=0.5))
                raise ExplorerError("config.unknown_key", "Unknown config key "
                                    "'{key}'.{did_you_mean} Known keys: {known}.", key=key,
                                    did_you_mean=did_you_mean(hint), known=", ".join(known))
        return cls(**d)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def replace(self, **changes) -> "GPTConfig":
        return GPTConfig.from_dict({**self.to_dict(), **changes})


# Each field's kind, from its annotation: a new knob declares it once, in GPTConfig.
_INT_FIELDS = tuple(f.name for f in fields(GPTConfig) if f.type == "int")
_BOOL_FIELDS = tuple(f.name for f in fields(GPTConfig) if f.type == "bool")


def _as_int(name, value) -> int:
    # bool is an int subclass in Python; True as a layer count is surely a mistake.
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ExplorerError("config.int_wrong_type", "{name} must be a whole number, got "
                            "{value!r} ({kind}).", name=name, value=value,
                            kind=type(value).__name__)
    if isinstance(value, float):
        # UI number boxes deliver floats such as 768.0; accept those, refuse 768.5.
        if not math.isfinite(value) or value != int(value):
            raise ExplorerError("config.int_not_whole", "{name} must be a whole number, got "
                                "{value!r}.", name=name, value=value)
    return int(value)


def _as_bool(name, value) -> bool:
    if not isinstance(value, bool):
        raise ExplorerError("config.flag_wrong_type", "{name} must be True or False, got "
                            "{value!r} ({kind}).", name=name, value=value,
                            kind=type(value).__name__)
    return value


def _as_choice(name, value, allowed) -> str:
    if value not in allowed:
        options = ", ".join(repr(a) for a in allowed)
        raise ExplorerError("config.not_a_choice", "{name} must be one of {options} (got "
                            "{value!r}).", name=name, options=options, value=value)
    return value


def _as_rate(value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ExplorerError("config.drop_rate_not_a_number", "drop_rate must be a number, got "
                            "{value!r} ({kind}).", value=value, kind=type(value).__name__)
    if not (0.0 <= value < 1.0):  # also false for NaN
        raise ExplorerError("config.drop_rate_out_of_range", "drop_rate must be in [0, 1): 0 "
                            "keeps every activation, 0.1 is the book's value (got {value!r}).",
                            value=value)
    return float(value)


def did_you_mean(hint: list[str]) -> Message | str:
    """" Did you mean 'x'?" after an unknown name when there is a close one (``hint``: none or
    one), else nothing."""
    return Message("config.did_you_mean", " Did you mean '{hint}'?", hint=hint[0]) if hint \
        else ""


def _head_message(emb_dim: int, n_heads: int) -> Message:
    divisors = [h for h in range(1, min(emb_dim, 64) + 1) if emb_dim % h == 0]
    lower = emb_dim - emb_dim % n_heads
    upper = lower + n_heads
    dims = f"{upper}" if lower == 0 else Message("config.two_emb_dims", "{lower} or {upper}",
                                                 lower=lower, upper=upper)
    return Message("config.heads_divide_emb_dim", "emb_dim ({emb_dim}) must be divisible by "
                   "n_heads ({n_heads}) so that every head gets the same size. Head counts "
                   "that work with emb_dim={emb_dim}: {divisors}; or keep {n_heads} heads with "
                   "emb_dim {dims}.", emb_dim=emb_dim, n_heads=n_heads,
                   divisors=", ".join(map(str, divisors)), dims=dims)


# ---------------------------------------------------------------------------------------------
# OpenAI's four GPT-2 sizes (exercise 4.2): the one list of them. The presets, the hub's
# repositories and the names on the page all come from here.
@dataclass(frozen=True)
class GPT2Size:
    name: str          # the preset's name, "gpt2-small"
    page_name: str     # what the page calls it, "GPT-2 small"
    repo_id: str       # its weights on the Hugging Face hub (safetensors, float32)
    emb_dim: int
    n_layers: int
    n_heads: int

    @property
    def short(self) -> str:
        """"small", "medium", "large" or "xl"."""
        return self.name.removeprefix("gpt2-")

    def config(self) -> "GPTConfig":
        """The book's config of this size (``GPT_CONFIG_124M`` with its widths)."""
        return GPTConfig.from_dict({**GPT_CONFIG_124M, "emb_dim": self.emb_dim,
                                    "n_layers": self.n_layers, "n_heads": self.n_heads})


GPT2_SIZES: dict[str, GPT2Size] = {size.name: size for size in (
    GPT2Size("gpt2-small", "GPT-2 small", "openai-community/gpt2", 768, 12, 12),
    GPT2Size("gpt2-medium", "GPT-2 medium", "openai-community/gpt2-medium", 1024, 24, 16),
    GPT2Size("gpt2-large", "GPT-2 large", "openai-community/gpt2-large", 1280, 36, 20),
    GPT2Size("gpt2-xl", "GPT-2 XL", "openai-community/gpt2-xl", 1600, 48, 25),
)}
GPT2_BY_REPO: dict[str, GPT2Size] = {size.repo_id: size for size in GPT2_SIZES.values()}


# ---------------------------------------------------------------------------------------------
# Presets: one source of truth for every named size.
PRESETS: dict[str, GPTConfig] = {
    # Teaching sizes: build and run in well under a second on a laptop CPU.
    "teach-tiny": GPTConfig(context_length=64, emb_dim=64, n_heads=4, n_layers=2),
    "teach-small": GPTConfig(context_length=128, emb_dim=128, n_heads=4, n_layers=4),
    "teach-deep": GPTConfig(context_length=128, emb_dim=64, n_heads=4, n_layers=12),
    # The book's GPT-2 sizes (exercise 4.2).
    **{name: size.config() for name, size in GPT2_SIZES.items()},
}


def get_preset(name: str) -> GPTConfig:
    if name not in PRESETS:
        hint = difflib.get_close_matches(str(name), list(PRESETS), n=1)
        raise ExplorerError("preset.unknown", "Unknown preset '{name}'.{did_you_mean} Presets: "
                            "{presets}.", name=name, did_you_mean=did_you_mean(hint),
                            presets=", ".join(PRESETS))
    return PRESETS[name]


# ---------------------------------------------------------------------------------------------
# Parameter and memory accounting in closed form: instant even for GPT-3-sized configs.
BYTES_PER_PARAM = {"float32": 4, "bfloat16": 2, "float16": 2}


@dataclass(frozen=True)
class ParameterCount:
    """Parameter counts per component, as ``sum(p.numel() for p in model.parameters())``
    would count them (a tied output head shares the embedding and adds nothing)."""

    token_embedding: int
    position_embedding: int
    attention_per_block: int
    feed_forward_per_block: int
    norms_per_block: int
    n_layers: int
    final_norm: int
    output_head: int
    output_head_tied: bool = False   # the head is the token embedding (shared storage)

    @property
    def attention(self) -> int:
        return self.attention_per_block * self.n_layers

    @property
    def feed_forward(self) -> int:
        return self.feed_forward_per_block * self.n_layers

    @property
    def norms(self) -> int:
        """All LayerNorm parameters: every block's two plus the final norm."""
        return self.norms_per_block * self.n_layers + self.final_norm

    @property
    def per_block(self) -> int:
        return self.attention_per_block + self.feed_forward_per_block + self.norms_per_block

    @property
    def total(self) -> int:
        return (self.token_embedding + self.position_embedding + self.per_block * self.n_layers
                + self.final_norm + self.output_head)

    @property
    def total_without_output_head(self) -> int:
        """The book's second figure: "considering weight tying" (163M -> 124M for GPT-2 small)."""
        return self.total - self.output_head

    def memory_mb(self, dtype: str = "float32") -> float:
        """Size of the parameters in MB, the book's way: bytes / 1024**2."""
        if dtype not in BYTES_PER_PARAM:
            raise ExplorerError("dtype.unknown", "dtype must be one of {dtypes} (got {dtype!r}).",
                                dtypes=", ".join(BYTES_PER_PARAM), dtype=dtype)
        return self.total * BYTES_PER_PARAM[dtype] / 1024 ** 2

    def notes(self) -> list[Text]:
        """What the counts mean where a number alone would mislead (a tied head's 0)."""
        if self.output_head_tied:
            return [Text("config.tied_head_note", "output head: tied to the token embedding (the "
                         "same {weights:,} weights, stored and counted once)",
                         weights=self.token_embedding)]
        return []

    def breakdown(self) -> dict[str, int]:
        """Component -> parameters, summing to ``total`` (for tables and charts)."""
        return {
            "token embedding": self.token_embedding,
            "position embedding": self.position_embedding,
            "attention": self.attention,
            "feed-forward": self.feed_forward,
            "layer norms": self.norms,
            "output head": self.output_head,
        }


def count_parameters(cfg) -> ParameterCount:
    cfg = GPTConfig.from_dict(cfg)
    d, v, h = cfg.emb_dim, cfg.vocab_size, cfg.ff_hidden_dim
    norm = 2 * d if cfg.norm_placement != "none" else 0  # scale + shift
    qkv = 3 * (d * d + (d if cfg.qkv_bias else 0))
    return ParameterCount(
        token_embedding=v * d,
        position_embedding=cfg.context_length * d if cfg.pos_encoding == "learned" else 0,
        attention_per_block=qkv + d * d + d,       # W_query, W_key, W_value; out_proj has a bias
        feed_forward_per_block=d * h + h + h * d + d,
        norms_per_block=2 * norm,
        n_layers=cfg.n_layers,
        final_norm=norm,
        output_head=0 if cfg.tie_weights else d * v,
        output_head_tied=cfg.tie_weights,
    )


def buffer_bytes(cfg, dtype: str = "float32") -> int:
    """Memory a built model holds besides parameters: the RoPE cos/sin tables."""
    cfg = GPTConfig.from_dict(cfg)
    if cfg.pos_encoding != "rope":
        return 0
    return 2 * cfg.context_length * cfg.head_dim * BYTES_PER_PARAM[dtype]
