"""One token's step on the CPU in C (``decode_kernels.c``): its vector times each Linear
weight and its attention over the KV cache, on two cores, and the next-token summary.

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
from pathlib import Path

import torch

from .native import NativeLibrary


def _declare(library: ctypes.CDLL) -> None:
    pointer, long = ctypes.c_void_p, ctypes.c_long
    library.gemv.argtypes = [pointer, pointer, pointer, pointer, long, long, ctypes.c_int]
    library.gemv.restype = ctypes.c_uint64
    library.attend.argtypes = [pointer, pointer, pointer, pointer, long, long, long, long,
                               ctypes.c_float, ctypes.c_int]
    library.attend.restype = ctypes.c_int64
    library.next_token_summary.argtypes = [pointer, long, long, pointer, pointer, pointer]
    library.next_token_summary.restype = ctypes.c_int
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
    ``in_features`` elements), or None where the kernel does not apply."""
    product = Product(weight, bias)
    return product(x, share) if product.usable() else None


class Product:
    """A Linear layer's weight and bias, checked once for the kernel, then multiplied by one
    vector at a time with as little Python as possible (a step makes 73 such calls)."""

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None):
        self.weight, self.bias = weight, bias
        self.out_features, self.in_features = weight.shape
        self.pointers = self._pointers()

    def _pointers(self):
        w, b = self.weight, self.bias
        if (_native.load() is None or w.dtype != torch.float32 or w.device.type != "cpu"
                or not w.is_contiguous() or (b is not None and (
                    b.dtype != torch.float32 or b.device.type != "cpu"
                    or not b.is_contiguous()))):
            return None
        return w.data_ptr(), (b.data_ptr() if b is not None else None)

    def usable(self) -> bool:
        """Whether the kernel can take the weights as they are now (storage may be replaced)."""
        if self.pointers is not None and self.pointers[0] != self.weight.data_ptr():
            self.pointers = self._pointers()
        return self.pointers is not None

    def __call__(self, x: torch.Tensor, share: bool = True) -> torch.Tensor | None:
        """W x + b for ``x`` with ``in_features`` elements, shaped like x; None if x is not a
        float32 CPU tensor of that size."""
        if (x.numel() != self.in_features or x.dtype != torch.float32 or not x.is_cpu):
            return None
        x = x.contiguous()
        y = torch.empty(*x.shape[:-1], self.out_features)   # (a torch.Size + tuple: 2x slower)
        weight, bias = self.pointers
        job = _native.load().gemv(weight, x.data_ptr(), bias, y.data_ptr(), self.in_features,
                                  self.out_features, share)
        if job or _in_use:
            _keep_until_helper_leaves(_native.load(), job, (self.weight, x, self.bias))
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


def _keep_until_helper_leaves(library, job, tensors):
    left = library.helper_left()
    with _in_use_lock:
        _in_use[:] = [(j, kept) for j, kept in _in_use if j > left]
        if job > left:
            _in_use.append((job, tensors))


# PyTorch's own operations of a one-token step (attention over the cache, softmax over the
# vocabulary) are small; with two OpenMP threads they wake the second core that the kernel's
# helper is using, and a step took 39 ms instead of 25 (GPT-2 small, 2 cores). A thread's
# OpenMP team size is its own: setting it changes only the calling thread, and new threads start
# from the last value set, which is why heavy work restores the default first (full_threads).
DEFAULT_THREADS = torch.get_num_threads()


class one_torch_thread:
    """Run this thread's PyTorch operations on one thread inside the block (decoding steps)."""

    def __enter__(self):
        self.before = torch.get_num_threads()
        if self.before != 1 and available():
            torch.set_num_threads(1)
        return self

    def __exit__(self, *exc):
        if torch.get_num_threads() != self.before:
            torch.set_num_threads(self.before)


def full_threads() -> None:
    """Give this thread PyTorch's default team again if it started while a decoding step had
    set one thread (a forward pass over many tokens needs every core)."""
    if torch.get_num_threads() < DEFAULT_THREADS:
        torch.set_num_threads(DEFAULT_THREADS)
