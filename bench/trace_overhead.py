"""What a traced forward pass costs on top of a plain one (target from the re-housing issue).

On the gpt2-small preset (random weights, CPU, fp32, batch 1):

1. time at T=128: a plain ``model(ids)`` under ``torch.inference_mode()`` vs ``trace(model, ids)``
   (statistics + attention for every layer + logit lens at the last position) and
   ``trace(..., lens="all")``, run interleaved after a warm-up; medians and ratios.
   Target: the default trace <= 1.15x the plain forward, and like for like (against a forward
   whose output head takes the vocabulary in the same blocks as the trace's head).
2. memory at T=1024: ``Trace.nbytes()`` (defaults, and with attention kept for layer 0) vs the
   bytes a cache of every raw probe point (attention patterns included) would hold, and the
   peak RSS increase of a plain forward and of a trace, each run in a fresh process.

    python bench/trace_overhead.py            # ~3 minutes on 2 cores
    python bench/trace_overhead.py --quick    # fewer repeats
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

from _common import (OthersCPU, PeakRSS, interleaved, mb, median, paired_ratios, print_table,
                     verdict, wait_for_quiet)

import torch

from explorer.book.config import PRESETS
from explorer.book.probe_points import recording
from explorer.runtime.build import build_model
from explorer.probes.recorder import UNREDUCED
from explorer.probes.vocabulary import head_product
from explorer.probes import trace
from explorer.book.tokenizer import get_tokenizer

TARGET_RATIO = 1.15
RAW_SHARE_TARGET = 0.05   # the Trace keeps at most this share of the raw activations
OTHERS_MAX = 0.05         # other processes' share of the CPU above which the timing is suspect


class _CountBytes:
    """A recorder that keeps nothing and counts the bytes of every probe point it is shown:
    what a cache of all raw activations (attention patterns included) would hold."""

    def __init__(self):
        self.total = 0
        self.count = 0

    def wants_attention(self):
        return True

    def record(self, name, x):
        if name in UNREDUCED and name != "attn_pattern":   # the embedding's inputs, and
            return                                          # attention's (in the patterns)
        self.total += x.nelement() * x.element_size()
        self.count += 1


class BlockedHead(torch.nn.Module):
    def __init__(self, linear):
        super().__init__()
        self.linear = linear

    def forward(self, x):
        return head_product(self.linear, x.flatten(0, 1)).view(*x.shape[:-1], -1)


def random_ids(n_tokens, vocab_size, seed=0):
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(0, vocab_size, (1, n_tokens), generator=generator)


def time_overhead(model, ids, repeats, tokenizer):
    def plain():
        with torch.inference_mode():
            model(ids)

    def plain_blocked_head():
        # The same forward with the trace's output-head product (explorer.probes.vocabulary.head_product,
        # the vocabulary in blocks): what the trace would cost against a like-for-like forward.
        book_head = model.out_head
        model.out_head = BlockedHead(book_head)
        try:
            with torch.inference_mode():
                model(ids)
        finally:
            model.out_head = book_head

    variants = {
        "plain forward": plain,
        "plain, blocked head": plain_blocked_head,
        "trace (lens last)": lambda: trace(model, ids, tokenizer=tokenizer),
        "trace (lens all)": lambda: trace(model, ids, lens="all", tokenizer=tokenizer),
    }
    times = interleaved(variants, repeats=repeats, warmup=2)
    return times, paired_ratios(times, "plain forward")


MEMORY_VARIANTS = {
    "plain forward": None,
    "trace (defaults)": {},
    "trace (attention layer 0)": {"attention_layers": [0]},
}


def measure_memory_child(variant, n_tokens):
    """In a fresh process: build the model, warm up on a short input, then run one variant at
    ``n_tokens`` and report its peak RSS increase, time and Trace size."""
    model = build_model(PRESETS["gpt2-small"], device="cpu")
    tokenizer = get_tokenizer()
    trace(model, random_ids(16, model.cfg.vocab_size), tokenizer=tokenizer)   # warm-up
    ids = random_ids(n_tokens, model.cfg.vocab_size, seed=1)
    kwargs = MEMORY_VARIANTS[variant]
    out = {}
    with PeakRSS() as peak:
        started = time.perf_counter()
        if kwargs is None:
            with torch.inference_mode():
                model(ids)
        else:
            out["nbytes"] = trace(model, ids, tokenizer=tokenizer, **kwargs).nbytes()
        out["seconds"] = time.perf_counter() - started
    out["rss_increase"] = peak.increase
    print(json.dumps(out))


def raw_activation_bytes(model, n_tokens):
    ids = random_ids(n_tokens, model.cfg.vocab_size, seed=1)
    counter = _CountBytes()
    with torch.inference_mode(), recording(counter):
        model(ids)
    return counter.total, counter.count


def memory_at(n_tokens, repeats):
    """Each variant in its own process, so that one run's freed memory does not hide the
    next one's peak; ``repeats`` processes per variant (the peak varies from run to run with
    how the allocator's arenas happen to be used). Returns variant -> list of results."""
    out = {variant: [] for variant in MEMORY_VARIANTS}
    for _ in range(repeats):
        for variant in MEMORY_VARIANTS:
            result = subprocess.run(
                [sys.executable, __file__, "--child", variant, "--long", str(n_tokens)],
                capture_output=True, text=True, check=True)
            out[variant].append(json.loads(result.stdout.strip().splitlines()[-1]))
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats (3 instead of 9)")
    parser.add_argument("--repeats", type=int, help="timed rounds per variant")
    parser.add_argument("--tokens", type=int, default=128, help="prompt length for the timing")
    parser.add_argument("--long", type=int, default=1024, help="prompt length for the memory")
    parser.add_argument("--max-load", type=float, default=1.0,
                        help="wait (up to 60 s) for the 1-minute load average to drop below this")
    parser.add_argument("--child", help=argparse.SUPPRESS)   # one memory run, in a subprocess
    args = parser.parse_args(argv)
    if args.child:
        measure_memory_child(args.child, args.long)
        return 0
    repeats = args.repeats or (3 if args.quick else 9)

    cfg = PRESETS["gpt2-small"]
    started = time.perf_counter()
    model = build_model(cfg, device="cpu")
    build_s = time.perf_counter() - started
    tokenizer = get_tokenizer()
    print(f"gpt2-small built in {build_s:.2f} s; torch {torch.__version__}, "
          f"{torch.get_num_threads()} threads")

    load_before = wait_for_quiet(args.max_load)
    ids = random_ids(args.tokens, cfg.vocab_size)
    with OthersCPU() as others:
        times, ratios = time_overhead(model, ids, repeats, tokenizer)
    plain = median(times["plain forward"])

    used = "unknown" if others.share is None else f"{others.share:.0%}"
    print(f"\nTime at T={args.tokens} ({repeats} interleaved rounds after 2 warm-ups; "
          f"load average before {load_before:.2f}; other processes used {used} of the CPU)")
    busy = others.share is not None and others.share > OTHERS_MAX
    rows = []
    for name, ts in times.items():
        target = "" if name == "plain forward" else "(none)"
        if name == "trace (lens last)":
            target = f"<= {TARGET_RATIO:.2f}  {verdict(ratios[name] <= TARGET_RATIO)}"
            target += "  (load high: rerun)" if busy else ""
        rows.append([name, f"{median(ts) * 1e3:.1f} ms", f"{min(ts) * 1e3:.1f} ms",
                     f"{ratios[name]:.3f}", f"{median(ts) / plain:.3f}",
                     f"{min(ts) / min(times['plain forward']):.3f}", target])
    print_table(rows, ["variant", "median", "min", "ratio", "of medians", "of minima",
                       "target"])
    print("  ratio: median over rounds of (variant / plain forward in the same round)")
    like = ratios["trace (lens last)"]
    if "plain, blocked head" in times:
        like = paired_ratios({"a": times["trace (lens last)"],
                              "b": times["plain, blocked head"]}, "b")["a"]
        print(f"  the trace's own output-head product takes the vocabulary in blocks (faster "
              f"here); against a forward with that same product the trace costs {like:.3f}x "
              f"(<= {TARGET_RATIO:.2f} {verdict(like <= TARGET_RATIO)})")
    if busy:
        print(f"  note: other processes used more than {OTHERS_MAX:.0%} of the CPU during the "
              f"timing, so rerun for a clean figure.")

    raw, raw_tensors = raw_activation_bytes(model, args.long)
    del model
    mem_repeats = 1 if args.quick else 3
    mem = memory_at(args.long, mem_repeats)
    print(f"\nMemory at T={args.long}, each variant in a fresh process, {mem_repeats}x "
          f"(raw = every probe point of one forward, {raw_tensors} tensors incl. attention "
          f"patterns: {mb(raw)})")
    rows = []
    for variant, runs in mem.items():
        size = runs[0].get("nbytes")
        rss = [r["rss_increase"] for r in runs]
        target = ""
        if variant == "trace (defaults)":
            target = (f"<= {RAW_SHARE_TARGET:.0%} of raw  "
                      f"{verdict(size <= RAW_SHARE_TARGET * raw)}")
        rows.append([variant, "-" if size is None else mb(size),
                     "-" if size is None else f"{size / raw:.2%}",
                     f"{mb(median(rss))} (max {mb(max(rss))})",
                     f"{median([r['seconds'] for r in runs]):.2f} s", target])
    print_table(rows, ["variant", "Trace.nbytes()", "of raw", "peak RSS increase (median)",
                       "time", "target"])
    return 0 if max(ratios["trace (lens last)"], like) <= TARGET_RATIO else 1


if __name__ == "__main__":
    sys.exit(main())
