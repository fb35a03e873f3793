"""OpenAI's GPT-2 weights in the book's ``GPTModel`` (chapter 5, section 5.5,
``load_weights_into_gpt``), and the same mapping backwards for export.

GPT-2 names its tensors after its TensorFlow original (``wte``, ``h.0.attn.c_attn``, ...) and
stores its linear layers as ``Conv1D``: weights shaped (in, out), the transpose of
``nn.Linear``'s (out, in). The book's mapping, which we follow line by line:

- ``wte`` -> ``tok_emb``, ``wpe`` -> ``pos_emb``;
- ``c_attn`` (queries, keys and values side by side) -> split in three: ``W_query``, ``W_key``,
  ``W_value`` (GPT-2 has their biases: ``qkv_bias=True``);
- every ``Conv1D`` weight transposed;
- ``ln_1``/``ln_2``/``ln_f`` ``weight``/``bias`` -> ``norm1``/``norm2``/``final_norm``
  ``scale``/``shift``;
- the output head reuses the token embedding (``tie_weights=True``): one matrix in memory.

Pure torch: files, the hub and budgets live in ``explorer.runtime`` (``checkpoints``, ``hub``,
``store``).
"""
from __future__ import annotations

import functools
import json
import math

import torch
import torch.nn as nn
from torch.utils._device import DeviceContext

from .config import GPT2_SIZES, PRESETS, GPTConfig
from .errors import ExplorerError, Message
from .model import GPTModel, RotaryEmbedding


def gpt2_config(size: str) -> GPTConfig:
    """The config of OpenAI's GPT-2 ``size`` ("gpt2-small" ... "gpt2-xl", ``GPT2_SIZES``) in the
    book's keys: its preset plus what GPT-2 has, biases on the query/key/value projections and
    an output head tied to the token embedding."""
    if size not in GPT2_SIZES:
        raise ExplorerError("gpt2.unknown_size", "GPT-2 comes in {sizes} (got {size!r}).",
                            sizes=", ".join(GPT2_SIZES), size=size)
    return PRESETS[size].replace(qkv_bias=True, tie_weights=True)


# Hugging Face's GPT-2 activation names <-> the book's knob.
HF_ACTIVATIONS = {"gelu_new": "gelu", "gelu_pytorch_tanh": "gelu", "gelu": "gelu_exact",
                  "relu": "relu", "silu": "silu", "swish": "silu"}
ACTIVATION_TO_HF = {"gelu": "gelu_new", "gelu_exact": "gelu", "relu": "relu", "silu": "silu"}


def is_gpt2_shaped(cfg) -> bool:
    """Whether Hugging Face's ``GPT2LMHeadModel`` can hold this model: GPT-2's block (norm
    first, shortcuts) with learned positions. Activation, feed-forward width, biases and tying
    all have GPT-2 settings."""
    cfg = GPTConfig.from_dict(cfg)
    return cfg.norm_placement == "pre" and cfg.shortcut and cfg.pos_encoding == "learned"


# ---------------------------------------------------------------------------------------------
# GPT-2's names -> the book's names
def strip_prefix(params: dict) -> dict:
    """Hugging Face saves ``transformer.wte.weight`` (``save_pretrained``) or ``wte.weight``
    (OpenAI's files on the hub); accept both."""
    return {name.removeprefix("transformer."): t for name, t in params.items()}


def gpt2_shapes(cfg) -> dict[str, tuple]:
    """Every tensor a GPT-2 file of this config holds (without the ``transformer.`` prefix),
    with its shape. Conv1D weights are (in, out)."""
    cfg = GPTConfig.from_dict(cfg)
    d, h, v = cfg.emb_dim, cfg.ff_hidden_dim, cfg.vocab_size
    shapes = {"wte.weight": (v, d), "wpe.weight": (cfg.context_length, d)}
    for b in range(cfg.n_layers):
        shapes.update({
            f"h.{b}.ln_1.weight": (d,), f"h.{b}.ln_1.bias": (d,),
            f"h.{b}.attn.c_attn.weight": (d, 3 * d), f"h.{b}.attn.c_attn.bias": (3 * d,),
            f"h.{b}.attn.c_proj.weight": (d, d), f"h.{b}.attn.c_proj.bias": (d,),
            f"h.{b}.ln_2.weight": (d,), f"h.{b}.ln_2.bias": (d,),
            f"h.{b}.mlp.c_fc.weight": (d, h), f"h.{b}.mlp.c_fc.bias": (h,),
            f"h.{b}.mlp.c_proj.weight": (h, d), f"h.{b}.mlp.c_proj.bias": (d,)})
    shapes.update({"ln_f.weight": (d,), "ln_f.bias": (d,)})
    if not cfg.tie_weights:
        shapes["lm_head.weight"] = (v, d)
    return shapes


def is_gpt2_buffer(name: str) -> bool:
    """Older GPT-2 files (OpenAI's on the hub among them) also store each block's causal mask
    (``attn.bias``) and a constant (``attn.masked_bias``): not weights, so they are skipped."""
    return name.endswith((".attn.bias", ".attn.masked_bias"))


# One tensor's name in GPT-2 and in the book: (GPT-2's, the book's, transposed). GPT-2's Conv1D
# keeps a weight as (in, out), the book's nn.Linear as (out, in). Queries, keys and values are
# one tensor in GPT-2 (attn.c_attn, side by side) and three in the book (QKV).
MODEL_NAMES = (("wte.weight", "tok_emb.weight", False), ("wpe.weight", "pos_emb.weight", False),
               ("ln_f.weight", "final_norm.scale", False),
               ("ln_f.bias", "final_norm.shift", False))
BLOCK_NAMES = (("attn.c_proj.weight", "att.out_proj.weight", True),
               ("attn.c_proj.bias", "att.out_proj.bias", False),
               ("mlp.c_fc.weight", "ff.layers.0.weight", True),
               ("mlp.c_fc.bias", "ff.layers.0.bias", False),
               ("mlp.c_proj.weight", "ff.layers.2.weight", True),
               ("mlp.c_proj.bias", "ff.layers.2.bias", False),
               ("ln_1.weight", "norm1.scale", False), ("ln_1.bias", "norm1.shift", False),
               ("ln_2.weight", "norm2.scale", False), ("ln_2.bias", "norm2.shift", False))
QKV = ("W_query", "W_key", "W_value")


def _named(cfg, gpt2_prefix=""):
    """Every (GPT-2 name, book name, transposed) of a model of ``cfg`` but its QKV and head."""
    yield from ((gpt2_prefix + g, b, tr) for g, b, tr in MODEL_NAMES)
    for block in range(cfg.n_layers):
        yield from ((f"{gpt2_prefix}h.{block}.{g}", f"trf_blocks.{block}.{b}", tr)
                    for g, b, tr in BLOCK_NAMES)


def gpt2_to_book(params: dict, cfg) -> dict[str, torch.Tensor]:
    """GPT-2's tensors (names without the ``transformer.`` prefix) -> the book's state_dict.
    The shapes must have been checked (``describe_differences``)."""
    cfg = GPTConfig.from_dict(cfg)
    out = {book: params[gpt2].T if transposed else params[gpt2]
           for gpt2, book, transposed in _named(cfg)}
    for b in range(cfg.n_layers):
        p, book = f"h.{b}.", f"trf_blocks.{b}.att."
        # c_attn holds queries, keys and values side by side: (emb_dim, 3 * emb_dim)
        weights = torch.chunk(params[p + "attn.c_attn.weight"], 3, dim=-1)
        biases = torch.chunk(params[p + "attn.c_attn.bias"], 3, dim=-1)
        for name, weight, bias in zip(QKV, weights, biases):
            out[book + f"{name}.weight"] = weight.T
            if cfg.qkv_bias:
                out[book + f"{name}.bias"] = bias
            elif bias.count_nonzero():   # exported from a model without them: zeros
                raise ExplorerError("gpt2.qkv_bias_not_zero", "The config says "
                                    "qkv_bias=False, but block {block}'s {name} bias in the "
                                    "file is not zero. Set qkv_bias to true in config.json.",
                                    block=b, name=name)
    if not cfg.tie_weights:
        out["out_head.weight"] = params["lm_head.weight"]
    return out


def book_to_gpt2(state_dict: dict, cfg) -> dict[str, torch.Tensor]:
    """The book's state_dict -> GPT-2's tensors in ``save_pretrained``'s names (contiguous,
    ready to save). A model without query/key/value biases gets zero biases (same numbers)."""
    cfg = GPTConfig.from_dict(cfg)
    if not is_gpt2_shaped(cfg):
        raise ExplorerError("gpt2.layout_needs_gpt2_shape", "Only a GPT-2-shaped model "
                            "(norm_placement='pre', shortcut on, pos_encoding='learned') can be "
                            "saved in Hugging Face's GPT-2 layout.")
    sd = state_dict
    out = {gpt2: sd[book].T if transposed else sd[book]
           for gpt2, book, transposed in _named(cfg, "transformer.")}
    for b in range(cfg.n_layers):
        p, book = f"transformer.h.{b}.", f"trf_blocks.{b}.att."
        out[p + "attn.c_attn.weight"] = torch.cat([sd[book + f"{n}.weight"].T for n in QKV],
                                                  dim=-1)
        out[p + "attn.c_attn.bias"] = torch.cat([sd.get(book + f"{n}.bias",
                                                        torch.zeros(cfg.emb_dim)) for n in QKV])
    if not cfg.tie_weights:
        out["lm_head.weight"] = sd["out_head.weight"]
    return {name: t.detach().contiguous() for name, t in out.items()}


def gpt2_hf_config(cfg) -> dict:
    """Hugging Face's ``GPT2Config`` keys for this model (``config.json``)."""
    cfg = GPTConfig.from_dict(cfg)
    return {"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"],
            "vocab_size": cfg.vocab_size, "n_positions": cfg.context_length,
            "n_embd": cfg.emb_dim, "n_layer": cfg.n_layers, "n_head": cfg.n_heads,
            "n_inner": None if cfg.ff_expansion == 4 else cfg.ff_hidden_dim,
            "activation_function": ACTIVATION_TO_HF[cfg.activation],
            "resid_pdrop": cfg.drop_rate, "embd_pdrop": cfg.drop_rate,
            "attn_pdrop": cfg.drop_rate, "layer_norm_epsilon": 1e-5,
            "tie_word_embeddings": cfg.tie_weights, "bos_token_id": None, "eos_token_id": None}


# The kind of value each GPT2Config key the explorer reads must hold.
HF_KEY_KINDS = {"vocab_size": "count", "n_positions": "count", "n_embd": "count",
                "n_layer": "count", "n_head": "count", "n_inner": "count",
                "activation_function": "name", "resid_pdrop": "number", "embd_pdrop": "number",
                "attn_pdrop": "number", "layer_norm_epsilon": "number",
                "tie_word_embeddings": "flag", "model_type": "name"}
_KIND_WORDS = {"count": Message("hf_config.kind.count", "a whole number ≥ 1"),
               "name": Message("hf_config.kind.name", "a name (text)"),
               "number": Message("hf_config.kind.number", "a number"),
               "flag": Message("hf_config.kind.flag", "true or false")}


def _is_kind(value, kind) -> bool:
    if kind == "flag":
        return isinstance(value, bool)
    if isinstance(value, bool):
        return False
    if kind == "count":
        return isinstance(value, int) and value >= 1
    if kind == "number":
        return isinstance(value, (int, float)) and math.isfinite(value)
    return isinstance(value, str)


def check_hf_config(hf: dict) -> None:
    """Refuse a config.json whose GPT-2 keys hold the wrong kind of value (``n_embd: {}``,
    ``n_inner: "x"``) before any of them is computed with. ``None`` means "the default"."""
    for key, kind in HF_KEY_KINDS.items():
        value = hf.get(key)
        if value is not None and not _is_kind(value, kind):
            raise ExplorerError("hf_config.wrong_kind", "config.json's {key} must be {what} (got "
                                "{value}).", key=key, what=_KIND_WORDS[kind],
                                value=json.dumps(value)[:40])


def config_from_hf(hf: dict, **book_keys) -> GPTConfig:
    """A ``GPT2Config``'s keys (``config.json`` of a Hugging Face GPT-2) -> ``GPTConfig``."""
    check_hf_config(hf)
    if hf.get("model_type", "gpt2") != "gpt2":
        raise ExplorerError("hf_config.not_gpt2", "config.json describes a {model_type!r} model; "
                            "the explorer loads GPT-2 models only (model_type 'gpt2').",
                            model_type=hf.get('model_type'))
    activation = hf.get("activation_function", "gelu_new")
    if activation not in HF_ACTIVATIONS:
        raise ExplorerError("hf_config.unknown_activation", "config.json's activation_function "
                            "{activation!r} is not one the explorer has ({activations}).",
                            activation=activation, activations=", ".join(HF_ACTIVATIONS))
    emb = hf.get("n_embd", 768)
    inner = hf.get("n_inner") or 4 * emb
    if inner % emb:
        raise ExplorerError("hf_config.inner_not_a_multiple", "The feed-forward width "
                            "n_inner={inner} is not a multiple of n_embd={emb}; the explorer's "
                            "ff_expansion must be a whole number.", inner=inner, emb=emb)
    values = {"vocab_size": hf.get("vocab_size", 50257),
              "context_length": hf.get("n_positions", 1024), "emb_dim": emb,
              "n_heads": hf.get("n_head", 12), "n_layers": hf.get("n_layer", 12),
              "drop_rate": hf.get("resid_pdrop", 0.1), "qkv_bias": True,
              "activation": HF_ACTIVATIONS[activation], "ff_expansion": inner // emb,
              "tie_weights": hf.get("tie_word_embeddings", True)}
    values.update(book_keys)
    return GPTConfig.from_dict(values)


# ---------------------------------------------------------------------------------------------
# The book's own checkpoints (chapter 5: torch.save(model.state_dict(), "model.pth"))
# PyTorch's initialisers: on the meta device they would only cost time (the first call in a
# process loads their meta implementations, seconds on a busy machine).
_INITIALISERS = {"uniform_", "normal_", "kaiming_uniform_", "kaiming_normal_",
                 "xavier_uniform_", "xavier_normal_", "trunc_normal_"}


class _MetaWithoutInit(DeviceContext):
    """``with torch.device("meta")`` that skips the initialisers (there are no values to fill).
    A torch function mode lives in its own thread: other threads build models as usual."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if getattr(func, "__name__", None) in _INITIALISERS:
            return args[0] if args else kwargs["tensor"]
        return super().__torch_function__(func, types, args, kwargs)


@functools.lru_cache(maxsize=8)
def _skeleton(cfg: GPTConfig) -> GPTModel:
    """``GPTModel(cfg)`` on the meta device (shapes, no memory), for its shapes only."""
    with _MetaWithoutInit("meta"):
        return GPTModel(cfg)


def book_shapes(cfg) -> dict[str, tuple]:
    """Every tensor of the book's state_dict for this config, with its shape (a tied output
    head is the token embedding and is not listed)."""
    model = _skeleton(GPTConfig.from_dict(cfg))
    shapes = {name: tuple(t.shape) for name, t in model.state_dict().items()}
    if model.cfg.tie_weights:
        shapes.pop("out_head.weight")
    return shapes


def is_book_buffer(name: str) -> bool:
    """The book's ``MultiHeadAttention`` registers its causal mask as a buffer
    (``trf_blocks.0.att.mask``), so chapter 5's checkpoints hold it; ours builds the mask on
    the fly, so it is checked and skipped."""
    return name.startswith("trf_blocks.") and name.endswith(".att.mask")


def describe_differences(expected: dict, found: dict, where=None) -> Message | None:
    """The message that lists missing tensors, unexpected ones and wrong shapes, or None.
    ``where``: the file's name (default: "the file")."""
    where = Message("weights.the_file", "the file") if where is None else where
    missing = [n for n in expected if n not in found]
    extra = [n for n in found if n not in expected]
    wrong = [Message("weights.shape_differs", "{name}: {where} has {found}, the model needs "
                     "{needs}", name=n, where=where, found=tuple(found[n]),
                     needs=tuple(expected[n]))
             for n in expected if n in found and tuple(found[n]) != tuple(expected[n])]
    if not (missing or extra or wrong):
        return None

    def listed(items, limit=8):
        shown = _one_after_another(items[:limit])
        if len(items) <= limit:
            return shown
        return Message("weights.and_more", "{names}, and {more} more", names=shown,
                       more=len(items) - limit)

    parts = []
    if missing:
        parts.append(Message("weights.missing", "missing from {where} ({n}): {names}",
                             where=where, n=len(missing), names=listed(missing)))
    if extra:
        parts.append(Message("weights.extra", "in {where} but not in the model ({n}): {names}",
                             where=where, n=len(extra), names=listed(extra)))
    if wrong:
        parts.append(Message("weights.wrong_shape", "wrong shape ({n}): {names}", n=len(wrong),
                             names=listed(wrong, 4)))
    return Message("weights.do_not_fit", "The weights do not fit this model. {problems}.",
                   problems=_one_after_another(parts, sentences=True))


def _one_after_another(items: list, sentences: bool = False):
    """``items`` in a row: names (plain text) joined with "; ", messages nested two by two, so
    that each language joins them its own way (sentences with ". ", list items with "; ")."""
    if all(isinstance(item, str) for item in items):
        return "; ".join(items)
    if len(items) == 1:
        return items[0]
    first, rest = items[0], _one_after_another(items[1:], sentences)
    if sentences:
        return Message("weights.sentences", "{first}. {rest}", first=first, rest=rest)
    return Message("weights.list", "{first}; {rest}", first=first, rest=rest)


# ---------------------------------------------------------------------------------------------
# Putting tensors into a model without initialising it first
def empty_model(cfg) -> GPTModel:
    """``GPTModel(cfg)`` with no memory behind its weights (the meta device): initialising
    GPT-2 XL's 1.5 billion weights only to overwrite them would take longer than loading."""
    with _MetaWithoutInit("meta"):
        model = GPTModel(cfg)
    rope = model.trf_blocks[0].att.rope if len(model.trf_blocks) else None
    if rope is not None:   # computed tables, not weights: make the real ones
        fresh = RotaryEmbedding(model.cfg.head_dim, model.cfg.context_length)
        rope.cos, rope.sin = fresh.cos, fresh.sin
    return model


def assign_weights(model: GPTModel, state_dict: dict) -> GPTModel:
    """Make each tensor of ``state_dict`` (the book's names, shapes checked) the model's
    parameter, as the book's ``assign`` does, and tie the output head back to the embedding."""
    for name, tensor in state_dict.items():
        module_name, _, leaf = name.rpartition(".")
        module = model.get_submodule(module_name)
        setattr(module, leaf, nn.Parameter(tensor, requires_grad=False))
    if model.cfg.tie_weights:
        model.out_head.weight = model.tok_emb.weight   # shared storage, counted once
    left = [n for n, p in model.named_parameters() if p.is_meta]
    if left:
        raise RuntimeError(f"These weights were not given: {', '.join(left[:8])}.")
    return model


def load_weights_into_gpt(gpt: GPTModel, params: dict) -> GPTModel:
    """The book's function: OpenAI's GPT-2 tensors (Hugging Face names) into ``gpt``, whose
    config must be GPT-2's (``gpt2_config``)."""
    params = strip_prefix(params)
    if gpt.cfg.tie_weights:   # a tied head may be saved too; it is the token embedding
        params.pop("lm_head.weight", None)
    found = {n: tuple(t.shape) for n, t in params.items() if not is_gpt2_buffer(n)}
    problem = describe_differences(gpt2_shapes(gpt.cfg), found)
    if problem:
        raise ExplorerError.of(problem)
    book = gpt2_to_book(params, gpt.cfg)
    return assign_weights(gpt, {n: t.contiguous() for n, t in book.items()})
