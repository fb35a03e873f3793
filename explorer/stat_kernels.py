"""Statistics of one activation on the CPU in two passes over its memory (numba kernels).

PyTorch would read a (T, width) activation once per statistic and write temporaries in between:
about ten passes, which made a trace's statistics cost a quarter of the forward pass itself. Here
each token's row is summed, squared about its mean, bounded and counted while it sits in the
L1 cache, and the histogram is a second pass. ``explorer.probes`` uses these kernels for float32
tensors on the CPU when numba is installed, and its PyTorch reductions otherwise (GPU, or no
numba); a test checks that both give the same figures.
"""
from __future__ import annotations

import numpy as np

try:
    from numba import njit
except ImportError:          # the PyTorch reductions in explorer.probes take over
    njit = None

AVAILABLE = njit is not None

# Row sums may be reordered (so that LLVM vectorises them); inf and NaN keep their meaning.
_FASTMATH = {"reassoc", "contract", "nsz"}


def _kernel(fn):
    if njit is None:
        return fn
    # cache=True: compiled once per machine (~3 s), then loaded from __pycache__ in ~0.1 s.
    return njit(nogil=True, cache=True, fastmath=_FASTMATH, error_model="numpy")(fn)


@_kernel
def _token_sums(x, out):
    """x (T, width) float32 -> out (6, T) float32: sum, sum of squared deviations from the
    token's mean, min, max, sum of absolute values, count of non-zeros. Three loops over each
    row (in L1 by then), each simple enough for LLVM to vectorise."""
    rows, width = x.shape
    for r in range(rows):
        row = x[r]
        total = abs_total = nonzero = np.float32(0)
        for j in range(width):
            v = row[j]
            total += v
            abs_total += abs(v)
            nonzero += np.float32(v != 0)
        mean = total / np.float32(width)
        sq_dev = np.float32(0)
        for j in range(width):
            d = row[j] - mean
            sq_dev += d * d
        lo = hi = row[0]
        for j in range(width):
            lo = min(lo, row[j])
            hi = max(hi, row[j])
        out[0, r], out[1, r], out[2, r] = total, sq_dev, lo
        out[3, r], out[4, r], out[5, r] = hi, abs_total, nonzero


@_kernel
def _histogram(x, lo, scale, counts, bins):
    """counts[b] = how many values of x (T, width) have floor((v - lo) * scale) == b, clamped
    to 0 ... len(counts) - 1, in float32 arithmetic (a value within float32 rounding of a bin
    edge may land on either side). The bin numbers of a row go to ``bins`` (uint8, >= width)
    first, a loop that vectorises; four interleaved tallies keep the increments independent."""
    rows, width = x.shape
    slots = counts.shape[0]
    top, lo, scale = np.float32(slots - 1), np.float32(lo), np.float32(scale)
    tally = np.zeros(4 * slots, np.int64)
    quads = width - width % 4
    for r in range(rows):
        row = x[r]
        for j in range(width):
            bins[j] = np.uint8(min(max((row[j] - lo) * scale, np.float32(0)), top))
        for j in range(0, quads, 4):
            tally[bins[j]] += 1
            tally[slots + bins[j + 1]] += 1
            tally[2 * slots + bins[j + 2]] += 1
            tally[3 * slots + bins[j + 3]] += 1
        for j in range(quads, width):
            tally[bins[j]] += 1
    for b in range(slots):
        counts[b] = tally[b] + tally[slots + b] + tally[2 * slots + b] + tally[3 * slots + b]


@_kernel
def hist_span(lo, hi, bins):
    """A histogram's range hi - lo, widened where needed so that each of its ``bins`` spans at
    least four float32 steps at these values (a constant tensor gets a small positive range)."""
    return max(hi - lo, max(abs(lo), abs(hi)) * 2.0 ** -23 * 4 * bins, 1e-6)


@_kernel
def _point_stats(x, sums, counts, bins):
    """Both passes over one activation. Returns its histogram's (lo, span), or NaN for both
    if it holds inf or NaN (its histogram is then left to the careful path)."""
    _token_sums(x, sums)
    lo, hi = np.float64(sums[2].min()), np.float64(sums[3].max())
    for r in range(sums.shape[1]):
        if not np.isfinite(sums[4, r]):        # sum of |x| is finite iff every value is
            return np.nan, np.nan
    span = hist_span(lo, hi, counts.shape[0] - 1)
    _histogram(x, lo, (counts.shape[0] - 1) / span, counts, bins)
    return lo, span


def point_stats(x: np.ndarray, sums: np.ndarray, counts: np.ndarray) -> tuple[float, float]:
    """Per-token sums of a C-contiguous float32 (T, width) array into ``sums`` (6, T) float32 (sum,
    sum of squared deviations from the token's mean, min, max, sum of |x|, non-zeros), and
    its histogram into ``counts`` (int64, bins + 1 slots, at most 256; the last slot for the
    maximum) over (lo, lo + span), which it returns. With inf or NaN anywhere it returns
    (nan, nan): the sums are then inf/NaN or meaningless, and ``counts`` is untouched."""
    if counts.shape[0] > 256:
        raise ValueError("at most 256 bins")
    return _point_stats(x, sums, counts, np.empty(x.shape[1], np.uint8))


def warm_up() -> None:
    """Compile (or load from the cache) both kernels now rather than in the first trace."""
    if AVAILABLE:
        x = np.ones((2, 8), np.float32)
        point_stats(x, np.empty((6, 2), np.float32), np.zeros(4, np.int64))
