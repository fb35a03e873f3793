"""An activation's statistics (mean, std, RMS, min, max, |x|, zeros, inf/NaN per token, and a
histogram), for every probe point of every layer: on the CPU through the C kernel behind
``explorer.native``, elsewhere (or without a compiler, or with inf/NaN) through PyTorch
reductions that give the same figures."""
from __future__ import annotations

import math
import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import torch

from .. import native
from .data import HIST_BINS, STAT_NAMES, PointStats

# One helper thread: the statistics of a block's activations are split between it and the
# thread running the forward pass (the kernels release the GIL), so both cores work on them.
HELPER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="explorer-stats")


def _new_helper():
    # A forked process (a ZeroGPU call's worker) has none of its parent's threads: a pool that
    # believes it has its thread would never run the work.
    global HELPER
    HELPER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="explorer-stats")


os.register_at_fork(after_in_child=_new_helper)


def helper() -> ThreadPoolExecutor:
    """The helper thread's pool (this process's own)."""
    return HELPER


def cpu_stats(xs: list[torch.Tensor], per_token: torch.Tensor, hist: torch.Tensor,
               first: int) -> list:
    """Statistics of activations (each (T, width)) on the CPU with ``native.many_point_stats``,
    into rows ``first``, ``first + 1``, ... of ``per_token`` and ``hist``; about half of the
    elements on the helper thread, each thread's share in one call into C (taking turns with
    Python's lock between activations had doubled the time). A tensor with inf or NaN takes the
    careful PyTorch path."""
    values = [x.float().contiguous().numpy() for x in xs]                # each (T, width)
    ranges = [None] * len(xs)

    def run(indices):
        found = native.many_point_stats(
            [values[i] for i in indices], [per_token[first + i].numpy() for i in indices],
            [hist[first + i].numpy() for i in indices])
        for i, lo_span in zip(indices, found):
            ranges[i] = lo_span

    # Largest first, each to whichever thread has fewer elements so far.
    order = sorted(range(len(xs)), key=lambda i: -xs[i].numel())
    mine, theirs, load = [], [], [0, 0]
    for i in order:
        side = 0 if load[0] <= load[1] else 1
        (mine, theirs)[side].append(i)
        load[side] += xs[i].numel()
    helper_job = helper().submit(run, theirs) if theirs else None
    run(mine)
    if helper_job is not None:
        helper_job.result()
    stats = []
    for i, x in enumerate(xs):
        if ranges[i] is None:                     # inf or NaN somewhere: count them exactly
            s = group_stats([x], per_token[first + i][None], hist[first + i][None],
                             Scratch(x.shape[0], x.device))[0]
        else:
            s = {"nonfinite": None, "width": values[i].shape[1], "hist_range": ranges[i]}
        stats.append({**s, "row": first + i})
    return stats


class Scratch:
    """Work buffers reused by every block of one trace, one set per activation width: fresh
    multi-MB tensors for each block would cost a page fault per 4 KB page, which took longer
    than the statistics themselves."""

    def __init__(self, n_tokens, device):
        self.n_tokens, self.device = n_tokens, device
        self.buffers: dict[int, tuple] = {}

    def get(self, p, width):
        """(stack, work, bins) views of shape (p, T, width): float32, float32, int32."""
        have = self.buffers.get(width)
        if have is None or have[0].shape[0] < p:
            shape = (p, self.n_tokens, width)
            have = (torch.empty(shape, device=self.device),
                    torch.empty(shape, device=self.device),
                    torch.empty(shape, dtype=torch.int32, device=self.device))
            self.buffers[width] = have
        return tuple(buffer[:p] for buffer in have)


def group_stats(xs: list[torch.Tensor], per_token: torch.Tensor, hist: torch.Tensor,
                 scratch: Scratch) -> list:
    """The PyTorch path (GPU, no C compiler, inf/NaN): statistics of P activations of one width
    (each (T, width)), stacked and reduced together.

    Per-token sums go into ``per_token`` (P, 6, T): sum, sum of squared deviations from the
    token's mean, min, max, sum of absolute values, count of non-zeros; histogram counts into
    ``hist`` (P, HIST_BINS + 1), the last bin for the maximum. Everything derived from these
    (means, std, RMS, histogram edges, figures over the whole tensor) is computed later for all
    layers at once (``StatsTable``). Returns one small dict per activation.
    """
    p, width = len(xs), xs[0].shape[-1]
    x, work, bins = scratch.get(p, width)                                  # (P, T, width)
    for i, activation in enumerate(xs):
        x[i].copy_(activation)                                              # float32 too
    total = torch.sum(x, -1, out=per_token[:, 0])                          # (P, T)
    torch.sub(x, (total / width)[..., None], out=work)
    torch.linalg.vector_norm(work, dim=-1, out=per_token[:, 1]).square_()
    lo = torch.amin(x, -1, out=per_token[:, 2])
    hi = torch.amax(x, -1, out=per_token[:, 3])
    torch.sum(torch.abs(x, out=work), -1, out=per_token[:, 4])
    nonzero = torch.sum(work.sign_(), -1, out=per_token[:, 5])            # sign(|x|): 1 unless 0
    ranges = torch.stack([lo.amin(-1), hi.amax(-1)], dim=1).tolist()       # P x [lo, hi]
    stats = [{"nonfinite": None, "width": width} for i in range(p)]
    fast = True
    for i, (a, b) in enumerate(ranges):
        if not (math.isfinite(a) and math.isfinite(b)):
            # inf or NaN somewhere (rare): count them, and count zeros exactly (sign(NaN) is
            # NaN); the histogram then covers the finite values only.
            finite = torch.isfinite(x[i])
            stats[i]["nonfinite"] = (~finite).sum(-1).to(total.dtype)
            nonzero[i] = (x[i] != 0).sum(-1)
            fast = False
        else:
            span = hist_span(a, b)
            stats[i]["hist_range"] = (a, span)
            fast = fast and max(abs(a), abs(b)) * HIST_BINS / span < 1e5
    if fast:
        # bin = floor((x - lo) * HIST_BINS / span) for all P at once: x * scale + offset in one
        # fused pass. Its rounding error (< 0.02 of a bin while |x| * scale < 1e5) can only move
        # a value that sits on a bin edge; one guard slot below each point's bins takes values
        # that round to just under lo (truncation toward zero), and is counted as bin 0.
        slots = HIST_BINS + 2
        scales = [HIST_BINS / s["hist_range"][1] for s in stats]
        offset = torch.tensor([1.0 - s["hist_range"][0] * scale + i * slots
                               for i, (s, scale) in enumerate(zip(stats, scales))],
                              device=x.device)
        # A (P, 1, width) addend keeps the fused kernel vectorised along the width.
        offset = offset.view(p, 1, 1).expand(p, 1, width).contiguous()
        torch.addcmul(offset, x, torch.tensor(scales, device=x.device).view(p, 1, 1),
                      out=work)
        bins.copy_(work)                                   # float -> int truncates toward 0
        counts = torch.bincount(bins.view(-1), minlength=p * slots).view(p, slots)
        hist.copy_(counts[:, 1:])
        hist[:, 0] += counts[:, 0]
    else:
        for i in range(p):
            counts, stats[i]["hist_range"] = exact_histogram(x[i])
            hist[i] = counts
    return stats


def exact_histogram(x):
    """HIST_BINS + 1 counts (the last for the maximum) of the finite values of ``x`` over their
    range, and that range as (lo, span): the careful path for inf/NaN and for values far from
    0 relative to their spread."""
    values = x[torch.isfinite(x)]
    lo, hi = (values.min().item(), values.max().item()) if values.numel() else (0.0, 1.0)
    span = hist_span(lo, hi)
    bins = ((values - lo) * (HIST_BINS / span)).to(torch.int64).clamp_(0, HIST_BINS)
    return torch.bincount(bins, minlength=HIST_BINS + 1), (lo, span)


def hist_span(lo: float, hi: float) -> float:
    return native.hist_span(lo, hi, HIST_BINS)


class StatsTable:
    """Means, std, RMS, ... per token and over the whole tensor, computed once for every row of
    the recorder's buffers (every probe point of every layer), then handed out per point."""

    def __init__(self, per_token: torch.Tensor, hist: torch.Tensor, stats: list[dict]):
        sums = per_token.cpu().numpy().astype(np.float64)                 # (rows, 6, T)
        rows, _, n_tokens = sums.shape
        width = np.ones((rows, 1))
        nonfinite = np.zeros((rows, n_tokens))
        for s in stats:
            width[s["row"]] = s["width"]
            if s["nonfinite"] is not None:
                nonfinite[s["row"]] = s["nonfinite"].cpu().numpy()
        total, sq_dev, lo, hi, abs_total, nonzero = sums.transpose(1, 0, 2)
        with np.errstate(all="ignore"):       # inf/NaN are reported as such, not warned about
            mean = total / width                                               # (rows, T)
            var = sq_dev / width              # squares summed about each token's mean: precise
            per_token = {
                "mean": mean, "std": np.sqrt(var), "rms": np.sqrt(var + mean ** 2),
                "min": lo, "max": hi, "abs_mean": abs_total / width,
                "zero_frac": 1.0 - nonzero / width, "nonfinite": nonfinite,
            }
            overall = {
                "mean": mean.mean(-1),
                # Every token has the same width: total variance = mean of the tokens'
                # variances + variance of their means.
                "std": np.sqrt(var.mean(-1) + mean.var(-1)),
                "rms": np.sqrt((var + mean ** 2).mean(-1)),
                "min": lo.min(-1), "max": hi.max(-1),
                "abs_mean": per_token["abs_mean"].mean(-1),
                "zero_frac": per_token["zero_frac"].mean(-1),
                "nonfinite": nonfinite.sum(-1),
            }
        self.per_token = {s: per_token[s].astype(np.float32) for s in STAT_NAMES}
        self.overall = {s: overall[s].astype(np.float32) for s in STAT_NAMES}
        counts = hist.cpu().numpy()
        self.hist_counts = counts[:, :HIST_BINS].copy()
        self.hist_counts[:, -1] += counts[:, HIST_BINS]   # the maximum belongs to the last bin

    def point(self, point, layers: list[dict]) -> PointStats:
        rows = [layer["row"] for layer in layers]
        lo, span = np.array([layer["hist_range"] for layer in layers]).T
        # Exact end points: lo, and lo + span (= the maximum unless the tensor is constant).
        hist_edges = lo[:, None] + span[:, None] * np.linspace(0.0, 1.0, HIST_BINS + 1)
        return PointStats(
            point=point,
            overall={s: a[rows] for s, a in self.overall.items()},
            per_token={s: a[rows] for s, a in self.per_token.items()},
            hist_counts=self.hist_counts[rows], hist_edges=hist_edges.astype(np.float32))
