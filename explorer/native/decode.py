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
import threading
import weakref
from pathlib import Path

import torch

from ..book.probe_points import is_recording
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
# A whole one-token step in C
_NORMS = {"none": 0, "pre": 1, "post": 2}
_ACTIVATIONS = {"gelu": 0, "gelu_exact": 1, "relu": 2, "silu": 3}
# One table per generation's KV cache (sessions generating at once on one shared model each
# keep theirs); it goes with the cache.
_tables: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()   # KVCache -> _StepTable


class _StepTable:
    """The addresses of a model's weights (and of one KV cache's buffers) for ``model_step``,
    with the tensors they belong to, checked once; rebuilt if a weight's storage changes."""

    def __init__(self, model, cache):
        cfg = model.cfg
        self.model = weakref.ref(model)
        self.tensors = [p for p in model.parameters()] + [b for b in model.buffers()]
        self.fingerprint = [t.data_ptr() for t in self.tensors]
        rope = model.trf_blocks[0].att.rope if cfg.n_layers else None
        blocks = (_BlockWeights * cfg.n_layers)()
        for block, target, layer in zip(model.trf_blocks, blocks, cache.layers):
            att, ff = block.att, block.ff
            named = {"W_query": att.W_query.weight, "b_query": att.W_query.bias,
                     "W_key": att.W_key.weight, "b_key": att.W_key.bias,
                     "W_value": att.W_value.weight, "b_value": att.W_value.bias,
                     "W_out": att.out_proj.weight, "b_out": att.out_proj.bias,
                     "W_ff1": ff.layers[0].weight, "b_ff1": ff.layers[0].bias,
                     "W_ff2": ff.layers[2].weight, "b_ff2": ff.layers[2].bias,
                     "cache_keys": layer.keys, "cache_values": layer.values}
            if cfg.norm_placement != "none":
                named.update(norm1_scale=block.norm1.scale, norm1_shift=block.norm1.shift,
                             norm2_scale=block.norm2.scale, norm2_shift=block.norm2.shift)
            for name, tensor in named.items():
                setattr(target, name, _address(tensor))
        final = cfg.norm_placement != "none"
        self.weights = _ModelWeights(
            emb=cfg.emb_dim, heads=cfg.n_heads, head_dim=cfg.head_dim,
            hidden=model.trf_blocks[0].ff.layers[0].out_features if cfg.n_layers else 0,
            vocab=cfg.vocab_size, layers=cfg.n_layers, capacity=cache.capacity,
            norm=_NORMS[cfg.norm_placement], shortcut=int(cfg.shortcut),
            activation=_ACTIVATIONS[cfg.activation],
            eps=model.final_norm.eps if final else 1e-5,
            tok_emb=_address(model.tok_emb.weight),
            pos_emb=_address(model.pos_emb.weight) if model.pos_emb is not None else None,
            rope_cos=_address(rope.cos) if rope is not None else None,
            rope_sin=_address(rope.sin) if rope is not None else None,
            final_scale=_address(model.final_norm.scale) if final else None,
            final_shift=_address(model.final_norm.shift) if final else None,
            W_head=_address(model.out_head.weight), blocks=blocks)
        self.blocks = blocks

    def current(self, model) -> bool:
        return self.model() is model and all(
            t.data_ptr() == address for t, address in zip(self.tensors, self.fingerprint))


class _Unsuitable(Exception):
    pass


def _address(tensor):
    if tensor is None:
        return None
    if tensor.dtype != torch.float32 or not tensor.is_cpu or not tensor.is_contiguous():
        raise _Unsuitable
    return tensor.data_ptr()


def model_step(model, token_id: int, cache) -> torch.Tensor | None:
    """The logits (1, 1, vocab) of ``model(torch.tensor([[token_id]]), cache=cache,
    last_only=True)`` computed in one C call, the token's keys and values stored in ``cache``
    and its position advanced, as the model does; or None (nothing changed) where the step does
    not apply: no compiler, a GPU or float64 model, training mode, a full cache, a recorder
    listening, gradients on."""
    library = _native.load()
    weight = model.tok_emb.weight
    if (library is None or not weight.is_cpu or weight.dtype != torch.float32
            or model.training or torch.is_grad_enabled()
            or is_recording() or cache.pos >= cache.capacity
            or cache.layers[0].keys.shape[0] != 1 or not 0 <= token_id < model.cfg.vocab_size
            or cache.pos >= model.cfg.context_length):
        return None
    table = _tables.get(cache)
    if table is None or not table.current(model):
        try:
            table = _tables[cache] = _StepTable(model, cache)
        except _Unsuitable:
            return None
    cfg = model.cfg
    scratch = torch.empty(6 * cfg.emb_dim + table.weights.hidden)
    logits = torch.empty(1, 1, cfg.vocab_size)
    job = library.model_step(ctypes.byref(table.weights), token_id, cache.pos,
                             scratch.data_ptr(), logits.data_ptr(), 1)
    if job < 0:
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
