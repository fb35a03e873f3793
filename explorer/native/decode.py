"""Generating on the CPU in C (``decode.c``): ``model_step``, the whole step of one new
token (every block's products and attention over the KV cache on two cores), the next-token
summary (top-k, probabilities, entropy), and two of a trace's steps that share its code
(``rows_summary``, ``attention_rows``). ``linear`` and ``attention`` are the step's kernels on
their own, for tests and notebooks.

Generating a token reads all of the model's weights once (495 MB for GPT-2 small), so on a CPU
decoding runs at the speed that memory can be read: one core reads ~17 GB/s here, two ~30 GB/s.
The kernels share each product with one helper thread that never makes the caller wait (see the
C file), so a busy machine costs at most the second core's share, never a stall. Each output is
computed by the same code whichever thread computes it, so results do not depend on timing.
Where no C compiler exists, every function here returns None and the caller uses PyTorch.
"""
from __future__ import annotations

import ctypes
import dataclasses
import threading
import weakref
from pathlib import Path

import torch

from ..book.knobs import KNOBS
from ..book.model import LayerNorm
from ..book.probe_points import is_intervening, is_recording
from .library import NativeLibrary


_BLOCK_TENSORS = ("norm1_scale", "norm1_shift", "norm2_scale", "norm2_shift", "W_query",
                  "b_query", "W_key", "b_key", "W_value", "b_value", "W_out", "b_out", "W_ff1",
                  "b_ff1", "W_ff2", "b_ff2", "cache_keys", "cache_values")


class _BlockWeights(ctypes.Structure):
    _fields_ = [(name, ctypes.c_void_p) for name in _BLOCK_TENSORS]


class _ModelWeights(ctypes.Structure):
    _fields_ = ([(name, ctypes.c_long) for name in ("emb", "heads", "head_dim", "hidden",
                                                     "vocab", "layers", "capacity")]
                + [(name, ctypes.c_int) for name in ("norm", "shortcut", "activation")]
                + [("eps", ctypes.c_float)]
                + [(name, ctypes.c_void_p) for name in ("tok_emb", "pos_emb", "rope_cos",
                                                         "rope_sin", "final_scale",
                                                         "final_shift", "W_head")]
                + [("blocks", ctypes.POINTER(_BlockWeights))])


def _declare(library: ctypes.CDLL) -> None:
    pointer, long = ctypes.c_void_p, ctypes.c_long
    library.gemv.argtypes = [pointer, pointer, pointer, pointer, long, long, ctypes.c_int]
    library.gemv.restype = ctypes.c_uint64
    library.attend.argtypes = [pointer, pointer, pointer, pointer, long, long, long, long,
                               ctypes.c_float, ctypes.c_int]
    library.attend.restype = ctypes.c_int64
    library.next_token_summary.argtypes = [pointer, long, long, pointer, pointer, pointer]
    library.next_token_summary.restype = ctypes.c_int
    library.model_step.argtypes = [ctypes.POINTER(_ModelWeights), long, long, pointer, pointer,
                                   ctypes.c_int]
    library.model_step.restype = ctypes.c_int64
    library.rows_summary.argtypes = [pointer, long, long, long, pointer, pointer, pointer]
    library.rows_summary.restype = ctypes.c_int
    library.attention_rows.argtypes = [pointer, long, long, long, ctypes.c_float, pointer]
    library.attention_rows.restype = ctypes.c_int
    library.helper_left.argtypes = []
    library.helper_left.restype = ctypes.c_uint64
    library.set_helper_delay.argtypes = [ctypes.c_long]
    library.set_helper_delay.restype = None
    for counter in (library.helper_chunks, library.taken_back_chunks):
        counter.argtypes, counter.restype = [], long


_native = NativeLibrary(Path(__file__).with_suffix(".c"), _declare,
                        "decoding uses PyTorch's products instead (slower)",
                        libraries=("-pthread",))
# Tensors a product shared with the helper, kept alive until the helper has left that product
# (a helper that was too slow may still read them for a moment after the call returned).
_in_use: list[tuple[int, tuple]] = []
_in_use_lock = threading.Lock()


def available() -> bool:
    """Whether the kernels are built and loaded (building them on the first call)."""
    return _native.load() is not None


def warm_up() -> None:
    """Build (or find in the cache) and load the kernels now rather than in the first step."""
    available()


def counts() -> dict[str, int]:
    """Chunks the helper computed and chunks the caller took back from it, so far."""
    library = _native.load()
    if library is None:
        return {"helper": 0, "taken_back": 0}
    return {"helper": library.helper_chunks(), "taken_back": library.taken_back_chunks()}


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
           share: bool = True) -> torch.Tensor | None:
    """``F.linear(x, weight, bias)`` for one float32 CPU vector ``x`` (any shape with
    ``in_features`` elements) and a row-major [out, in] weight, or None where the kernel does
    not apply. ``model_step`` makes these products itself; this is the same kernel, alone."""
    out_features, in_features = weight.shape
    library = _native.load()
    tensors = (x, weight) if bias is None else (x, weight, bias)
    if (library is None or x.numel() != in_features or not weight.is_contiguous()
            or (bias is not None and not bias.is_contiguous())
            or any(t.dtype != torch.float32 or not t.is_cpu for t in tensors)
            or (torch.is_grad_enabled() and any(t.requires_grad for t in tensors))):
        return None
    x = x.contiguous()
    y = torch.empty(*x.shape[:-1], out_features)
    job = library.gemv(weight.data_ptr(), x.data_ptr(),
                       bias.data_ptr() if bias is not None else None, y.data_ptr(),
                       in_features, out_features, int(share))
    if job or _in_use:
        _keep_until_helper_leaves(library, job, (weight, x, bias))
    return y


def attention(queries: torch.Tensor, keys: torch.Tensor, values: torch.Tensor,
              share: bool = True) -> torch.Tensor | None:
    """``F.scaled_dot_product_attention`` for one new token (``queries`` (1, heads, 1,
    head_dim)) over the cached ``keys`` and ``values`` (1, heads, S, head_dim; a view of the
    cache's storage), or None where the kernel does not apply."""
    library = _native.load()
    if (library is None or queries.dim() != 4 or queries.shape[0] != 1 or queries.shape[2] != 1
            or keys.shape != values.shape or keys.shape[:2] != queries.shape[:2]
            or keys.shape[3] != queries.shape[3]
            or any(t.dtype != torch.float32 or t.device.type != "cpu"
                   for t in (queries, keys, values))
            or (torch.is_grad_enabled() and any(t.requires_grad
                                                for t in (queries, keys, values)))):
        return None
    _, heads, num_keys, head_dim = keys.shape
    rows = (head_dim, 1)
    if keys.stride()[2:] != rows or values.stride()[2:] != rows \
            or keys.stride(1) != values.stride(1):
        return None
    queries = queries.contiguous()
    out = torch.empty_like(queries)
    job = library.attend(queries.data_ptr(), keys.data_ptr(), values.data_ptr(), out.data_ptr(),
                         heads, num_keys, head_dim, keys.stride(1), head_dim ** -0.5, int(share))
    if job < 0:
        return None
    if job or _in_use:
        _keep_until_helper_leaves(library, job, (queries, keys, values))
    return out


def next_token_summary(logits: torch.Tensor, k: int):
    """For one position's float32 CPU ``logits`` (vocab,): the ``k`` (<= 64) most likely token
    ids, most likely first, their probabilities and the distribution's entropy in bits, from two
    passes over the logits (PyTorch's softmax, top-k and entropy took ~1 ms per step on GPT-2
    small's 50,257 logits); None where the kernel does not apply or a logit is inf or NaN."""
    library = _native.load()
    if (library is None or logits.dim() != 1 or logits.dtype != torch.float32
            or not logits.is_cpu or not 1 <= k <= min(64, logits.shape[0])):
        return None
    logits = logits.contiguous()
    ids = (ctypes.c_int64 * k)()
    probs = (ctypes.c_float * k)()
    entropy = ctypes.c_double()
    if library.next_token_summary(logits.data_ptr(), logits.shape[0], k, ids, probs,
                                  ctypes.byref(entropy)):
        return None
    return list(ids), list(probs), entropy.value


# ---------------------------------------------------------------------------------------------
# A whole one-token step in C. It reads a model only through public descriptions: its config
# (``model.cfg``), its tensors by their ``state_dict()`` names (the book's attribute paths, e.g.
# ``trf_blocks.0.att.W_query.weight``) plus RoPE's tables by their ``named_buffers()`` names
# (rebuilt from the config, so not saved), and the book's ``LayerNorm.eps``.
_NORMS = {"none": 0, "pre": 1, "post": 2}
_ACTIVATIONS = {"gelu": 0, "gelu_exact": 1, "relu": 2, "silu": 3}
_POSITIONS = ("learned", "rope")
# Every config knob the C step computes (the knob table's ``fast_step``); a model with any
# other knob away from its default is a variant it does not know (a new knob must be taught to
# decode.c first).
_KNOBS = {knob.field for knob in KNOBS if knob.fast_step}
# One table per generation's KV cache (sessions generating at once on one shared model each
# keep theirs); it goes with the cache.
_tables: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()   # KVCache -> _StepTable


class _Unsuitable(Exception):
    """A model (or cache) the C step does not take; the message says why, for the log."""


def _check_variant(cfg) -> None:
    for knob in dataclasses.fields(cfg):
        if knob.name not in _KNOBS and getattr(cfg, knob.name) != knob.default:
            raise _Unsuitable(f"model_step does not know the knob {knob.name}="
                              f"{getattr(cfg, knob.name)!r}")
    for knob, known in (("norm_placement", _NORMS), ("activation", _ACTIVATIONS),
                        ("pos_encoding", _POSITIONS)):
        if getattr(cfg, knob) not in known:
            raise _Unsuitable(f"model_step does not know {knob}={getattr(cfg, knob)!r}")


def _expected_shapes(cfg) -> dict[str, tuple[int, ...]]:
    """Every tensor ``model_step`` reads, by its public name, with its shape."""
    E, V, C, D, F = (cfg.emb_dim, cfg.vocab_size, cfg.context_length, cfg.head_dim,
                     cfg.ff_hidden_dim)
    norms = cfg.norm_placement != "none"
    shapes = {"tok_emb.weight": (V, E), "out_head.weight": (V, E)}
    if cfg.pos_encoding == "learned":
        shapes["pos_emb.weight"] = (C, E)
    else:                                     # one RotaryEmbedding, shared by every block
        shapes.update({"trf_blocks.0.att.rope.cos": (C, D), "trf_blocks.0.att.rope.sin": (C, D)})
    if norms:
        shapes.update({"final_norm.scale": (E,), "final_norm.shift": (E,)})
    for layer in range(cfg.n_layers):
        block = f"trf_blocks.{layer}."
        for name in ("W_query", "W_key", "W_value"):
            shapes[f"{block}att.{name}.weight"] = (E, E)
            if cfg.qkv_bias:
                shapes[f"{block}att.{name}.bias"] = (E,)
        shapes.update({f"{block}att.out_proj.weight": (E, E), f"{block}att.out_proj.bias": (E,),
                       f"{block}ff.layers.0.weight": (F, E), f"{block}ff.layers.0.bias": (F,),
                       f"{block}ff.layers.2.weight": (E, F), f"{block}ff.layers.2.bias": (E,)})
        if norms:
            for norm in ("norm1", "norm2"):
                shapes.update({f"{block}{norm}.scale": (E,), f"{block}{norm}.shift": (E,)})
    return shapes


def _described(model) -> dict[str, torch.Tensor]:
    """The model's tensors by their public names."""
    return {**dict(model.named_buffers()), **model.state_dict(keep_vars=True)}


def _check_float32_cpu(tensor: torch.Tensor) -> None:
    if tensor.dtype != torch.float32 or not tensor.is_cpu:
        raise _Unsuitable(f"model_step takes float32 CPU weights, not {tensor.dtype} on "
                          f"{tensor.device.type}")


def _address(name: str, tensor: torch.Tensor, shape) -> int:
    _check_float32_cpu(tensor)
    if tuple(tensor.shape) != tuple(shape) or not tensor.is_contiguous():
        raise _Unsuitable(f"model_step needs {name} as a contiguous {tuple(shape)} tensor "
                          f"(got {tuple(tensor.shape)})")
    return tensor.data_ptr()


class _StepTable:
    """The addresses of a model's weights (and of one KV cache's buffers) for ``model_step``,
    with the tensors they belong to, checked once; rebuilt if a weight's storage changes.
    Raises ``_Unsuitable`` for a model the C step does not know."""

    def __init__(self, model, cache):
        cfg = model.cfg
        _check_variant(cfg)
        tensors = _described(model)
        expected = _expected_shapes(cfg)
        unknown = sorted(set(tensors) - set(expected))
        missing = sorted(set(expected) - set(tensors))
        if unknown or missing:
            raise _Unsuitable(f"model_step does not know this model's weights (unknown: "
                              f"{', '.join(unknown[:3]) or 'none'}; missing: "
                              f"{', '.join(missing[:3]) or 'none'})")
        eps = {module.eps for module in model.modules() if isinstance(module, LayerNorm)}
        if len(eps) > 1:
            raise _Unsuitable(f"model_step takes one LayerNorm eps, not {sorted(eps)}")
        address = {name: _address(name, tensors[name], shape) for name, shape in expected.items()}
        for layer in cache.layers:
            for buffer in (layer.keys, layer.values):
                _address("the KV cache", buffer,
                         (1, cfg.n_heads, cache.capacity, cfg.head_dim))
        self.model = weakref.ref(model)
        self.tensors = list(tensors.values())
        self.fingerprint = [t.data_ptr() for t in self.tensors]
        blocks = (_BlockWeights * cfg.n_layers)()
        for layer, (target, kv) in enumerate(zip(blocks, cache.layers)):
            block = f"trf_blocks.{layer}."
            for field, name in _BLOCK_NAMES.items():
                setattr(target, field, address.get(block + name))
            target.cache_keys, target.cache_values = kv.keys.data_ptr(), kv.values.data_ptr()
        self.weights = _ModelWeights(
            emb=cfg.emb_dim, heads=cfg.n_heads, head_dim=cfg.head_dim, hidden=cfg.ff_hidden_dim,
            vocab=cfg.vocab_size, layers=cfg.n_layers, capacity=cache.capacity,
            norm=_NORMS[cfg.norm_placement], shortcut=int(cfg.shortcut),
            activation=_ACTIVATIONS[cfg.activation], eps=eps.pop() if eps else 1e-5,
            tok_emb=address["tok_emb.weight"], pos_emb=address.get("pos_emb.weight"),
            rope_cos=address.get("trf_blocks.0.att.rope.cos"),
            rope_sin=address.get("trf_blocks.0.att.rope.sin"),
            final_scale=address.get("final_norm.scale"),
            final_shift=address.get("final_norm.shift"),
            W_head=address["out_head.weight"], blocks=blocks)
        self.blocks = blocks

    def current(self, model) -> bool:
        return self.model() is model and all(
            t.data_ptr() == address for t, address in zip(self.tensors, self.fingerprint))


# decode.c's block fields -> the tensors' names within a block (absent: NULL in C).
_BLOCK_NAMES = {"norm1_scale": "norm1.scale", "norm1_shift": "norm1.shift",
                "norm2_scale": "norm2.scale", "norm2_shift": "norm2.shift",
                "W_query": "att.W_query.weight", "b_query": "att.W_query.bias",
                "W_key": "att.W_key.weight", "b_key": "att.W_key.bias",
                "W_value": "att.W_value.weight", "b_value": "att.W_value.bias",
                "W_out": "att.out_proj.weight", "b_out": "att.out_proj.bias",
                "W_ff1": "ff.layers.0.weight", "b_ff1": "ff.layers.0.bias",
                "W_ff2": "ff.layers.2.weight", "b_ff2": "ff.layers.2.bias"}


def model_step(model, token_id: int, cache) -> torch.Tensor | None:
    """The logits (1, 1, vocab) of ``model(torch.tensor([[token_id]]), cache=cache,
    last_only=True)`` computed in one C call, the token's keys and values stored in ``cache``
    and its position advanced, as the model does; or None (nothing changed) where the step does
    not apply: no compiler, training mode, a full cache, a recorder listening or an
    intervention active (the C step has no probe points), gradients on;
    or a model it does not take (a GPU or float64 model, a variant missing from its tables),
    which is logged once per reason while other models keep the C step."""
    library = _native.load()
    if (library is None or model.training or torch.is_grad_enabled() or is_recording()
            or is_intervening() or cache.pos >= cache.capacity
            or cache.pos >= model.cfg.context_length or len(cache.layers) != model.cfg.n_layers
            or not 0 <= token_id < model.cfg.vocab_size):
        return None
    table = _tables.get(cache)
    if table is None or not table.current(model):
        try:
            _check_float32_cpu(next(model.parameters()))   # a GPU model: say so cheaply
            table = _tables[cache] = _StepTable(model, cache)
        except _Unsuitable as refusal:
            _tables.pop(cache, None)
            _native.note(str(refusal))
            return None
    cfg = model.cfg
    scratch = torch.empty(6 * cfg.emb_dim + cfg.ff_hidden_dim)
    logits = torch.empty(1, 1, cfg.vocab_size)
    job = library.model_step(ctypes.byref(table.weights), token_id, cache.pos,
                             scratch.data_ptr(), logits.data_ptr(), 1)
    if job < 0:
        _native.note("model_step does not take these sizes (a head of over 512 dimensions, or "
                     "over 16,384 tokens)")
        return None
    if job or _in_use:
        _keep_until_helper_leaves(library, job, (table, cache, scratch))
    cache.advance(1)
    return logits


def rows_summary(logits: torch.Tensor, k: int):
    """``next_token_summary`` for every row of float32 CPU ``logits`` (T, vocab): (ids (T, k)
    int64, probs (T, k) float32, entropy bits (T,) float64) tensors, or None where the kernel
    does not apply or a logit is inf or NaN. Releases the GIL: threads may split the rows."""
    library = _native.load()
    if (library is None or logits.dim() != 2 or logits.dtype != torch.float32
            or not logits.is_cpu or not logits.is_contiguous()
            or not 1 <= k <= min(64, logits.shape[1])):
        return None
    rows = logits.shape[0]
    ids = torch.empty(rows, k, dtype=torch.int64)
    probs = torch.empty(rows, k)
    entropy = torch.empty(rows, dtype=torch.float64)
    if library.rows_summary(logits.data_ptr(), rows, logits.shape[1], k, ids.data_ptr(),
                            probs.data_ptr(), entropy.data_ptr()):
        return None
    return ids, probs, entropy


def attention_rows(scores: torch.Tensor, head_dim: int, plogp: torch.Tensor) -> bool:
    """A trace's attention weights in place: ``scores`` (..., T, S) float32 CPU contiguous
    (``queries @ keys.T``, the queries being the last T of the S positions) become the book's
    weights (future masked, divided by sqrt(head_dim), softmax) and ``plogp`` (..., T) the sum
    of w ln w of each row. False (scores partly changed) where the kernel does not apply or a
    score is inf or NaN: the caller recomputes the scores and uses PyTorch."""
    library = _native.load()
    if (library is None or scores.dtype != torch.float32 or not scores.is_cpu
            or not scores.is_contiguous() or plogp.dtype != torch.float32
            or not plogp.is_contiguous() or plogp.shape != scores.shape[:-1]):
        return False
    queries, keys = scores.shape[-2:]
    return library.attention_rows(scores.data_ptr(), plogp.numel(), queries, keys,
                                  head_dim ** -0.5, plogp.data_ptr()) == 0


def _keep_until_helper_leaves(library, job, tensors):
    left = library.helper_left()
    with _in_use_lock:
        _in_use[:] = [(j, kept) for j, kept in _in_use if j > left]
        if job > left:
            _in_use.append((job, tensors))
