"""PyTorch's CPU ``Tensor.uniform_`` for float32, number for number, about 10x faster (C).

Every ``nn.Linear`` starts from PyTorch's default kaiming-uniform initialisation, so building
gpt2-small draws 124 million uniform numbers. PyTorch draws them one at a time behind a lock,
about 6 ns each: 0.76 s of a 1.1 s build. ``uniform_kernel.c`` continues the very same Mersenne
Twister from the generator's state, maps each number as PyTorch does, and writes the advanced
state back, so the weights and every random number drawn afterwards are exactly what PyTorch
alone would have produced (``test_uniform_kernel.py`` and the book-reproduction test check it).

``fast_uniform()`` is a context in which ``Tensor.uniform_`` on a contiguous float32 CPU tensor
goes through the kernel; any other call goes to PyTorch. The kernel is trusted only after it
has reproduced PyTorch's own ``uniform_`` on a sample, which also tells how this PyTorch build
rounds ``x * (to - from) + from``; without a compiler, or if no rounding matches, PyTorch does
it all, as before.
"""
from __future__ import annotations

import contextlib
import ctypes
import inspect
import math
import threading
from pathlib import Path

import numpy as np
import torch
from torch import nn
from torch.overrides import TorchFunctionMode

from .native import NativeLibrary

# torch.Generator.get_state() of a CPU generator (PyTorch's THGeneratorState layout): the seed
# (uint64), draws left before the next twist (int32), a flag (int32), the next word's index
# (uint64), then the 624 words of the state, each stored as a uint64.
_LEFT, _NEXT, _WORDS = 8, 16, slice(24, 24 + 624 * 8)
_STATE_BYTES = 5056
_MIN_ELEMENTS = 1024          # below this, PyTorch's own call is as quick
_ROUNDINGS = (0, 1, 2)        # float multiply-then-add, float fused multiply-add, double


def _declare(library: ctypes.CDLL) -> None:
    pointer = ctypes.c_void_p
    library.uniform_floats.argtypes = [pointer, pointer, pointer, ctypes.c_float, ctypes.c_float,
                                       ctypes.c_int, pointer, ctypes.c_long]
    library.uniform_floats.restype = None


_native = NativeLibrary(Path(__file__).with_suffix(".c"), _declare,
                        "models are initialised by PyTorch's own uniform_ (slower)",
                        libraries=("-pthread",))
_rounding_lock = threading.Lock()
_rounding: int | None = None      # which way this PyTorch rounds; -1 when none matches
_rounding_checked = False


def draw(tensor: torch.Tensor, low: float, high: float,
         generator: torch.Generator | None = None, rounding: int | None = None) -> torch.Tensor:
    """``tensor.uniform_(low, high, generator=generator)`` computed by the kernel (the tensor:
    contiguous float32 on the CPU). ``rounding`` defaults to the one found for this PyTorch."""
    library = _native.load()
    if rounding is None:
        rounding = _found_rounding()
    if library is None or rounding < 0:
        raise RuntimeError("the uniform kernel is not available here")
    generator = generator if generator is not None else torch.default_generator
    state = generator.get_state().numpy().copy()
    if state.size != _STATE_BYTES:
        raise RuntimeError(f"unexpected generator state ({state.size} bytes)")
    words = np.ascontiguousarray(state[_WORDS].view(np.uint64).astype(np.uint32))
    left = ctypes.c_int32(int(state[_LEFT:_LEFT + 4].view(np.int32)[0]))
    next_word = ctypes.c_uint64(int(state[_NEXT:_NEXT + 8].view(np.uint64)[0]))
    library.uniform_floats(words.ctypes.data, ctypes.byref(left), ctypes.byref(next_word),
                           float(np.float32(low)), float(np.float32(high)), rounding,
                           tensor.data_ptr(), tensor.numel())
    state[_WORDS].view(np.uint64)[:] = words
    state[_LEFT:_LEFT + 4].view(np.int32)[0] = left.value
    state[_NEXT:_NEXT + 8].view(np.uint64)[0] = next_word.value
    generator.set_state(torch.from_numpy(state))
    return tensor


def available() -> bool:
    """Whether the kernel is built and reproduces this PyTorch's ``uniform_``."""
    return _native.load() is not None and _found_rounding() >= 0


def _found_rounding() -> int:
    """The rounding (see ``uniform_kernel.c``) under which the kernel gives PyTorch's numbers
    for a few ranges, over a twist of the state; -1 if none does."""
    global _rounding, _rounding_checked
    if _rounding_checked:
        return _rounding
    with _rounding_lock:
        if not _rounding_checked:
            _rounding = -1
            if _native.load() is not None:
                _rounding = next((r for r in _ROUNDINGS if _matches_pytorch(r)), -1)
            _rounding_checked = True
    return _rounding


def _matches_pytorch(rounding: int) -> bool:
    """Same numbers and same generator state after, for a few ranges (1,500 draws cross a
    twist of the 624-word state), and the same kaiming-uniform bound as ``nn.init``."""
    for seed, low, high in ((1, -0.0360844, 0.0360844), (2, -1.0, 3.0), (3, 0.1, 0.2)):
        theirs_generator = torch.Generator().manual_seed(seed)
        theirs = torch.empty(1500).uniform_(low, high, generator=theirs_generator)
        mine_generator = torch.Generator().manual_seed(seed)
        mine = draw(torch.empty(1500), low, high, mine_generator, rounding)
        if not (torch.equal(mine, theirs)
                and torch.equal(mine_generator.get_state(), theirs_generator.get_state())):
            return False
    for shape, a in (((48, 32), math.sqrt(5)), ((7, 3, 40), 0.0)):
        theirs = nn.init.kaiming_uniform_(torch.empty(shape), a=a,
                                          generator=torch.Generator().manual_seed(4))
        bound = _kaiming_bound(theirs, a, "fan_in", "leaky_relu")
        mine = draw(torch.empty(shape), -bound, bound, torch.Generator().manual_seed(4), rounding)
        if not torch.equal(mine, theirs):
            return False
    return True


def _kaiming_bound(tensor, a, mode, nonlinearity) -> float:
    """The bound of ``nn.init.kaiming_uniform_``, computed in its order (``_matches_pytorch``
    checks that it still is ``nn.init``'s)."""
    std = nn.init.calculate_gain(nonlinearity, a) / math.sqrt(
        nn.init._calculate_correct_fan(tensor, mode))
    return math.sqrt(3.0) * std


class _FastUniform(TorchFunctionMode):
    """Sends the uniform draws the kernel can take to it: ``Tensor.uniform_``,
    ``nn.init.uniform_`` and ``nn.init.kaiming_uniform_`` (every ``nn.Linear``), which must be
    caught as such: inside a function that a mode handles, PyTorch calls no mode. Every other
    call goes on as it is."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        call = _kernel_call(func, args, kwargs)
        if call is None:
            return func(*args, **kwargs)
        with torch.no_grad():
            return draw(*call)


def _tensor_uniform(tensor, low=0.0, high=1.0, *, generator=None):
    """``Tensor.uniform_(from=0, to=1, *, generator=None)``'s arguments, for binding."""


_SIGNATURES = {torch.Tensor.uniform_: inspect.signature(_tensor_uniform),
               nn.init.uniform_: inspect.signature(nn.init.uniform_),
               nn.init.kaiming_uniform_: inspect.signature(nn.init.kaiming_uniform_)}


def _kernel_call(func, args, kwargs):
    """(tensor, low, high, generator) when the kernel can take this call, else None."""
    signature = _SIGNATURES.get(func)
    if signature is None:
        return None
    if func is torch.Tensor.uniform_:      # "from" and "to" cannot be Python parameter names
        kwargs = {{"from": "low", "to": "high"}.get(k, k): v for k, v in kwargs.items()}
    try:
        given = signature.bind(*args, **kwargs)
    except TypeError:
        return None                                       # PyTorch's own message
    given.apply_defaults()
    values = list(given.arguments.values())
    tensor, generator = values[0], given.arguments["generator"]
    if not (type(tensor) in (torch.Tensor, nn.Parameter) and tensor.device.type == "cpu"
            and tensor.dtype == torch.float32 and tensor.is_contiguous()
            and tensor.numel() >= _MIN_ELEMENTS
            and (generator is None or generator.device.type == "cpu")):
        return None
    if func is nn.init.kaiming_uniform_:
        _, a, mode, nonlinearity = values[:4]
        try:
            bound = _kaiming_bound(tensor, a, mode, nonlinearity)
        except (ValueError, ZeroDivisionError):
            return None
        low, high = -bound, bound
    else:
        low, high = values[1], values[2]
    if not (isinstance(low, (int, float)) and isinstance(high, (int, float))
            and math.isfinite(low) and math.isfinite(high) and low <= high
            and math.isfinite(float(np.float32(high)) - float(np.float32(low)))):
        return None      # PyTorch's own checks and messages
    return tensor, low, high, generator


@contextlib.contextmanager
def fast_uniform():
    """Inside: ``Tensor.uniform_`` on contiguous float32 CPU tensors runs in the kernel, with the
    numbers PyTorch would draw. A no-op where the kernel is not available."""
    if not available():
        yield
        return
    with _FastUniform():
        yield
