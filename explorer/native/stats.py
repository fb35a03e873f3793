"""Statistics of one activation on the CPU in two passes over its memory (a small C kernel).

PyTorch would read a (T, width) activation once per statistic and write temporaries in between:
about ten passes, which made a trace's statistics cost a quarter of the forward pass itself. In
``stats.c`` each token's row is summed, squared about its mean and bounded while it sits
in the L1 cache, and the histogram is a second pass.

The C file is compiled once per machine and loaded with ctypes (``explorer.native.library``): about
0.5 s the first time, nothing to install, no memory beyond the kernel's few KB. Where there is no
compiler (``available()`` is False), ``explorer.probes`` computes the same figures with PyTorch
reductions, about 5x slower; a test checks that both agree.
"""
from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np

from .library import NativeLibrary


def _declare(library: ctypes.CDLL) -> None:
    pointer, long = ctypes.c_void_p, ctypes.c_long
    library.point_stats.argtypes = [pointer, long, long, pointer, pointer, long, pointer]
    library.point_stats.restype = ctypes.c_int
    library.many_point_stats.argtypes = [long, pointer, pointer, pointer, pointer, pointer, long,
                                         pointer, pointer]
    library.many_point_stats.restype = None
    library.hist_span.argtypes = [ctypes.c_double, ctypes.c_double, long]
    library.hist_span.restype = ctypes.c_double


_native = NativeLibrary(Path(__file__).with_suffix(".c"), _declare,
                        "traces use PyTorch's reductions instead (slower)")


def available() -> bool:
    """Whether the kernel is built and loaded (building it on the first call)."""
    return _native.load() is not None


def _load() -> ctypes.CDLL | None:
    return _native.load()


def hist_span(lo: float, hi: float, bins: int) -> float:
    """A histogram's range hi - lo, widened where needed so that each of its ``bins`` spans at
    least four float32 steps at these values (a constant tensor gets a small positive range).
    The kernel's own rule, in Python: the PyTorch path uses it too."""
    return max(hi - lo, max(abs(lo), abs(hi)) * 2.0 ** -23 * 4 * bins, 1e-6)


def point_stats(x: np.ndarray, sums: np.ndarray, counts: np.ndarray) -> tuple[float, float]:
    """Per-token sums of a C-contiguous float32 (T, width) array into ``sums`` (6, T) float32
    (sum, sum of squared deviations from the token's mean, min, max, sum of |x|, non-zeros),
    and its histogram into ``counts`` (int64, bins + 1 slots, at most 256; the last for the
    maximum) over (lo, lo + span), which it returns. With inf or NaN anywhere it returns
    (nan, nan): the sums are then inf/NaN or meaningless, and ``counts`` is untouched."""
    library = _load()
    if library is None:
        raise RuntimeError("the statistics kernel is not available (see available())")
    rows, width = x.shape
    if not (x.dtype == np.float32 and x.flags.c_contiguous and sums.dtype == np.float32
            and sums.shape == (6, rows) and sums.flags.c_contiguous
            and counts.dtype == np.int64 and counts.ndim == 1 and counts.flags.c_contiguous):
        raise TypeError("point_stats needs C-contiguous float32 x (T, width), float32 sums "
                         "(6, T) and int64 counts")
    if not 2 <= counts.shape[0] <= 256:
        raise TypeError("a histogram of 1 to 255 bins plus the maximum: at most 256 slots")
    found = (ctypes.c_double * 2)()
    if library.point_stats(x.ctypes.data, rows, width, sums.ctypes.data, counts.ctypes.data,
                           counts.shape[0], found):
        return float("nan"), float("nan")
    return found[0], found[1]


def many_point_stats(xs: list[np.ndarray], sums: list[np.ndarray],
                     counts: list[np.ndarray]) -> list[tuple[float, float] | None]:
    """``point_stats`` for several activations in one call into C (Python's lock released
    throughout): the (lo, span) of each, or None for one with inf or NaN. Same arguments as
    point_stats, one of each per activation; every histogram has the same number of slots."""
    library = _load()
    if library is None:
        raise RuntimeError("the statistics kernel is not available (see available())")
    n = len(xs)
    if not n:
        return []
    slots = counts[0].shape[0]
    for x, s, c in zip(xs, sums, counts):
        if not (x.dtype == np.float32 and x.ndim == 2 and x.flags.c_contiguous
                and s.dtype == np.float32 and s.shape == (6, x.shape[0]) and s.flags.c_contiguous
                and c.dtype == np.int64 and c.shape == (slots,) and c.flags.c_contiguous):
            raise TypeError("many_point_stats needs what point_stats needs, for each activation")
    if not 2 <= slots <= 256:
        raise TypeError("a histogram of 1 to 255 bins plus the maximum: at most 256 slots")
    pointers = ctypes.c_void_p * n
    sizes = ctypes.c_long * n
    ranges = (ctypes.c_double * (2 * n))()
    failed = (ctypes.c_int * n)()
    library.many_point_stats(n, pointers(*[x.ctypes.data for x in xs]),
                             sizes(*[x.shape[0] for x in xs]), sizes(*[x.shape[1] for x in xs]),
                             pointers(*[s.ctypes.data for s in sums]),
                             pointers(*[c.ctypes.data for c in counts]), slots, ranges, failed)
    return [None if failed[i] else (ranges[2 * i], ranges[2 * i + 1]) for i in range(n)]


def warm_up() -> None:
    """Build (or find in the cache) and load the kernel now rather than in the first trace."""
    available()
