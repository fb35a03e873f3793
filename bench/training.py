"""The training lab against its targets (issue "Training lab"): the default comparison (three
teaching-size variants, 200 steps each) in about a minute on 2 cores, and tokens per second
≥ 1.3x the book's loop (its explicit attention, its plain AdamW, ``train_model_simple``) on the
same model and batches, measured in the same run, with the lab's live data on (evaluation
every 5 steps, per-block gradient norms, samples, and ``view()`` polled after every step as the
page would).

    python bench/training.py            # full (~4 min on a quiet 2-core machine)
    python bench/training.py --quick    # one round of the ratio, 60 steps of the comparison
    python bench/training.py --app-heap # with the app server's allocator setting
    python bench/training.py --eval-freq 10   # a trade, not the book's settings: measure it
"""
from __future__ import annotations

import argparse
import dataclasses
import statistics
import time

import _common  # noqa: F401 - puts the repository root on sys.path
from _common import OthersCPU, load_average, print_table, verdict, wait_for_quiet

import torch

from explorer.book.model import GPTModel
from explorer.book.seeding import seeded
from explorer.book.training import create_dataloader_v1, split_text, train_model_simple
from explorer.runtime.training_job import TrainingJob
from explorer.runtime.training_setup import (DEFAULT_PRESET, DEFAULT_VARIANTS, default_corpus,
                                             default_settings, make_variants)


def run_lab(variants, corpus, settings):
    """A job trained to the end with the page's polling: returns (seconds, job); the process's
    CPU seconds in ``job.cpu_seconds``."""
    job = TrainingJob(variants, corpus, settings)
    started, cpu = time.perf_counter(), time.process_time()
    while not job.done:
        job.advance(1)
        job.view()                       # what the page reads after every step
    job.advance(0)                       # the final samples
    job.cpu_seconds = time.process_time() - cpu
    return time.perf_counter() - started, job


def run_book(variant, corpus, settings, num_epochs):
    """Section 5.2 as printed: plain GPTModel (explicit attention), plain AdamW. Returns
    (seconds, CPU seconds, train losses, val losses, batches per epoch)."""
    train_data, val_data = split_text(corpus.text)
    window = settings.context_length
    train_loader = create_dataloader_v1(train_data, batch_size=settings.batch_size,
                                        max_length=window, stride=window, drop_last=True,
                                        shuffle=True, num_workers=0)
    val_loader = create_dataloader_v1(val_data, batch_size=settings.batch_size,
                                      max_length=window, stride=window, drop_last=False,
                                      shuffle=False, num_workers=0)
    cfg = variant.config.replace(context_length=window)
    with seeded(settings.seed):
        model = GPTModel(cfg)
        optimizer = torch.optim.AdamW(model.parameters(), lr=settings.lr,
                                      weight_decay=settings.weight_decay)
        started, cpu = time.perf_counter(), time.process_time()
        train_losses, val_losses, _ = train_model_simple(
            model, train_loader, val_loader, optimizer, "cpu", num_epochs=num_epochs,
            eval_freq=settings.eval_freq, eval_iter=settings.eval_iter,
            start_context=settings.start_context, tokenizer=_tokenizer(),
            verbose=False)
        seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    return seconds, cpu, train_losses, val_losses, len(train_loader)


def _tokenizer():
    from explorer.book.tokenizer import get_tokenizer
    return get_tokenizer()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--repeats", type=int, default=3,
                        help="rounds of the ratio (0: the comparison only)")
    parser.add_argument("--steps", type=int, default=None, help="steps of the comparison")
    parser.add_argument("--eval-freq", type=int, default=None,
                        help="evaluate every N steps (the book: 5); other values are a trade")
    parser.add_argument("--app-heap", action="store_true",
                        help="the app server's allocator setting (heap.py's mmap threshold)")
    parser.add_argument("--max-load", type=float, default=None)
    args = parser.parse_args()
    repeats = 1 if args.quick else args.repeats
    steps = args.steps or (60 if args.quick else 200)
    if args.max_load is not None:
        print(f"load average before timing: {wait_for_quiet(args.max_load):.2f}")
    if args.app_heap:
        from explorer.runtime.heap import release_freed_memory_promptly
        release_freed_memory_promptly()   # what explorer/app/server.py does at start
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, load average "
          f"{load_average():.2f}, allocator: {'app server' if args.app_heap else 'default'}")
    corpus = default_corpus()
    changes = {"steps": steps}
    if args.eval_freq:
        changes["eval_freq"] = args.eval_freq
        print(f"NOT the book's settings: evaluation every {args.eval_freq} steps (book: 5)")

    # 1. The default comparison, as the page starts it.
    variants = make_variants(DEFAULT_VARIANTS, DEFAULT_PRESET)
    settings = default_settings(**changes)
    with OthersCPU() as others:
        seconds, job = run_lab(variants, corpus, settings)
    view = job.view()
    print(f"\nDefault comparison: {DEFAULT_PRESET}, {len(variants)} variants x {steps} steps, "
          f"batch {settings.batch_size} x {settings.context_length} tokens, "
          f"{view.epoch} epochs of {view.batches_per_epoch} batches")
    rows = [[r.label, f"{r.parameters:,}", f"{r.tokens_seen:,}", f"{r.train_losses[0]:.3f}",
             f"{r.train_losses[-1]:.3f}", f"{r.val_losses[-1]:.3f}",
             f"{r.seconds_per_step * 1e3:.0f} ms", "yes" if r.diverged else "no"]
            for r in view.runs]
    print_table(rows, ["variant", "parameters", "tokens", "train loss @0", "train loss",
                       "val loss", "s/step", "diverged"])
    share = f"{others.share:.0%}" if others.share is not None else "n/a"
    print(f"time: {seconds:.1f} s (target about 60 s for 200 steps); other processes used "
          f"{share} of the CPU meanwhile; this process used {job.cpu_seconds:.1f} CPU seconds "
          f"(on an idle 2-core machine the time lies between half that and all of it)")
    for r in view.runs:
        print(f"  {r.label}: {r.sample[:90]!r}")

    if repeats == 0:                     # --repeats 0: the comparison only
        return

    # 2. Tokens per second against the book's loop: same model, same batches, interleaved.
    variant = variants[0]
    epochs = 2
    ratios, cpu_ratios, lab_tps, book_tps, rounds = [], [], [], [], []
    with OthersCPU() as others:
        for _ in range(repeats):
            with OthersCPU() as round_others:
                book_s, book_cpu, book_train, book_val, per_epoch = run_book(
                    variant, corpus, settings, epochs)
                n = epochs * per_epoch
                lab_s, lab_job = run_lab([variant], corpus, dataclasses.replace(settings, steps=n))
            tokens = n * settings.batch_size * settings.context_length
            lab_tps.append(tokens / lab_s)
            book_tps.append(tokens / book_s)
            ratios.append(book_s / lab_s)
            cpu_ratios.append(book_cpu / lab_job.cpu_seconds)
            rounds.append([str(len(rounds) + 1), f"{book_s:.1f} / {book_cpu:.1f}",
                           f"{lab_s:.1f} / {lab_job.cpu_seconds:.1f}",
                           f"{tokens / book_s:,.0f}", f"{tokens / lab_s:,.0f}",
                           f"{ratios[-1]:.2f}", f"{cpu_ratios[-1]:.2f}",
                           f"{round_others.share:.0%}" if round_others.share is not None
                           else "n/a"])
    run = lab_job.view().runs[0]
    book_steps = range(0, n, settings.eval_freq)   # the book evaluates at these steps only
    lab_at = {s: (t, v) for s, t, v in zip(run.eval_steps, run.train_losses, run.val_losses)}
    same = max(max(abs(lab_at[s][0] - t), abs(lab_at[s][1] - v))
               for s, t, v in zip(book_steps, book_train, book_val))
    ratio = statistics.median(ratios)
    share = f"{others.share:.0%}" if others.share is not None else "n/a"
    print(f"\nTokens/s, {variant.label} ({DEFAULT_PRESET}, window {settings.context_length}), "
          f"{epochs} epochs = {n} steps, eval every {settings.eval_freq} steps, {repeats} "
          f"round(s), other processes {share} of the CPU:")
    print_table([["book's loop (explicit attention, plain AdamW)",
                  f"{statistics.median(book_tps):,.0f}"],
                 ["lab (fused, fused AdamW, live data)", f"{statistics.median(lab_tps):,.0f}"]],
                ["loop", "tokens/s (median)"])
    print_table(rounds, ["round", "book s / CPU s", "lab s / CPU s", "book tokens/s",
                         "lab tokens/s", "ratio", "CPU ratio", "others' CPU"])
    print(f"ratio lab / book: {ratio:.2f} (rounds: {', '.join(f'{r:.2f}' for r in ratios)}) "
          f"target >= 1.30: {verdict(ratio >= 1.3)}; in CPU seconds "
          f"{statistics.median(cpu_ratios):.2f} (less sensitive to other processes)")
    print(f"largest loss difference at the book's evaluation points: {same:.1e} "
          f"(the same training, within rounding)")


if __name__ == "__main__":
    main()
