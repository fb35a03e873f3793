"""The training lab against its targets (issues "Training lab" and "A default comparison that
fits a lecture"):

1. The default comparison (``explorer.runtime.training.setup``: its preset, variants and
   ``default_settings()``, whatever they are now) from pressing Train to the last point in at
   most 60 s on 2 cores, and the same job through the page (``/train_start``'s stream, read by a
   ``gradio_client`` from the real app, ``python app.py``, a fresh one each round) at most 1.2x
   the bare ``TrainingJob`` (built and ``advance``d to the end in this process), the two
   interleaved in the same run. With the lessons it must show: losses per variant, per-block
   gradient norms (first block / last block; the shortcut lesson of section 4.4) and the
   samples.
2. Tokens per second >= 1.3x the book's loop (its explicit attention, its plain AdamW,
   ``train_model_simple``) on the same model and batches, measured in the same run, with the
   lab's live data on (per-block gradient norms, samples, ``view()`` polled after every step as
   the page would), and the largest loss difference between the two at the book's evaluation
   points (the same training).

    python bench/training.py                  # full (~8 min on a 2-core machine)
    python bench/training.py --quick          # 60 steps, one round of each
    python bench/training.py --page-rounds 0  # no app: the bare comparison and the ratio
    python bench/training.py --app-heap       # this process with the app server's allocator
    python bench/training.py --book-settings  # at "the book's settings" (lr 0.0004,
                                              # evaluation every 5 steps on 5 batches)
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import statistics
import time

from _common import (OthersCPU, load_average, print_table, verdict,  # first: the root
                     wait_for_quiet)                                   # on sys.path

import torch

from explorer.book.model import GPTModel
from explorer.book.seeding import seeded
from explorer.book.training import (BOOK_SETTINGS, create_dataloader_v1, split_text,
                                    train_model_simple)
from explorer.runtime.training import setup as training_setup
from explorer.runtime.training.job import TrainingJob
from explorer.runtime.training.setup import (DEFAULT_PRESET, DEFAULT_VARIANTS, default_corpus,
                                             default_settings, make_variants)

PAGE_TARGET = 1.2        # the page's time / the bare job's
SECONDS_TARGET = 60.0    # pressing Train -> the last point, on 2 cores
EARLY_STEPS = 10         # gradient norms averaged over the first recorded steps
PAGE_DATA = "the default story"
STEP = re.compile(r"step ([\d,]+) of")
JOB_SECONDS = re.compile(r"([\d,.]+) s\.")


# --------------------------------------------------------------------------------- bare job
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


def run_bare(variants, corpus, settings):
    """The comparison as the page's Train starts it (the job built: text tokenised, models
    made), trained to the end in this thread with nothing watching. Returns (seconds, CPU
    seconds, job, samples): ``samples`` every variant's samples as they came, [(step, text)]."""
    started, cpu = time.perf_counter(), time.process_time()
    job = TrainingJob(variants, corpus, settings)
    samples = {r.label: [] for r in job.runs}
    while not job.done:
        job.advance(1)                   # (a sample is taken at the end of each epoch)
        for r in job.runs:
            if r.sample_step is not None and (not samples[r.label]
                                              or samples[r.label][-1][0] != r.sample_step):
                samples[r.label].append((r.sample_step, r.sample))
    job.advance(0)
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    for r in job.runs:
        if not samples[r.label] or samples[r.label][-1][0] != r.sample_step:
            samples[r.label].append((r.sample_step, r.sample))
    return seconds, cpu, job, samples


def grad_ratio(run, first_steps=None) -> float:
    """Mean gradient norm of block 0 over mean norm of the last block, over the recorded
    steps below ``first_steps`` (all of them if None): ~1 with shortcuts, << 1 without."""
    rows = [row for step, row in zip(run.grad_steps, run.grad_norms)
            if first_steps is None or step < first_steps]
    if not rows:
        return float("nan")
    last = sum(row[-1] for row in rows)
    return sum(row[0] for row in rows) / last if last else float("inf")


# ------------------------------------------------------------------------------ the page's
def page_arguments(settings) -> dict | None:
    """/train_start's arguments for the default comparison at ``settings``, or None where the
    page cannot ask for these settings (it sends steps, batch, context, lr, warm-up and, where
    its form has them, the evaluation's)."""
    import inspect

    from explorer.app.tabs.train import train_start
    asked = dict(steps=settings.steps, batch_size=settings.batch_size,
                 context_length=settings.context_length, lr=settings.lr,
                 warmup_steps=settings.warmup_steps)
    if {"eval_freq", "eval_iter"} <= set(inspect.signature(train_start).parameters):
        asked.update(eval_freq=settings.eval_freq, eval_iter=settings.eval_iter)
    if default_settings(**asked) != settings:
        return None
    return dict(data=PAGE_DATA, text="", upload=None, variants=list(DEFAULT_VARIANTS),
                preset=DEFAULT_PRESET, api_name="/train_start", **asked)


def cpu_seconds_of(pid: int) -> float:
    """utime + stime of ``pid`` (Linux)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class OthersThanUs(OthersCPU):
    """The share of the CPU that processes other than this one and the app server used."""

    def __init__(self, server_pid: int):
        self.server_pid = server_pid

    def _sample(self):
        sample = OthersCPU._sample()
        if sample is None:
            return None
        total, busy, mine = sample
        return total, busy, mine + round(cpu_seconds_of(self.server_pid)
                                         * os.sysconf("SC_CLK_TCK"))


def wait_until_idle(pid: int, max_wait_s: float = 30.0, share: float = 0.05) -> None:
    """Until the app's start-up work (the C kernels' warm-up thread) is over: less than
    ``share`` of a core over half a second."""
    deadline = time.monotonic() + max_wait_s
    while time.monotonic() < deadline:
        before = cpu_seconds_of(pid)
        time.sleep(0.5)
        if cpu_seconds_of(pid) - before < share * 0.5:
            return


def run_page(arguments, app_env: dict) -> dict:
    """The same job through the page: a fresh ``python app.py`` (a lab that already finished
    this job would hand it back at once), a client connected before the clock starts, and
    ``/train_start`` streamed from the submit to its last update."""
    from app_memory import running_app   # the app as a subprocess
    from gradio_client import Client

    saved = {k: os.environ.get(k) for k in app_env}
    os.environ.update(app_env)                   # the app gets os.environ
    try:
        with running_app("bench_training_") as (proc, url):
            client = Client(url, verbose=False, ssl_verify=False, download_files=False,
                            analytics_enabled=False)
            wait_until_idle(proc.pid)
            server_cpu = cpu_seconds_of(proc.pid)
            with OthersThanUs(proc.pid) as others:
                started = time.perf_counter()
                job = client.submit(**arguments)
                updates = []                              # (seconds, step, bytes)
                for out in job:
                    size = len(json.dumps(out, ensure_ascii=False, default=str).encode())
                    updates.append((time.perf_counter() - started, _step_of(out), size))
                final = job.result()
                seconds = time.perf_counter() - started
            server_cpu = cpu_seconds_of(proc.pid) - server_cpu
            client.close()
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    progress, _, table = final[0], final[1], final[2]
    job_s = JOB_SECONDS.findall(str(progress))
    return {"seconds": seconds, "server_cpu": server_cpu, "updates": updates,
            "progress": str(progress), "table": table,
            "job_seconds": float(job_s[0].replace(",", "")) if job_s else None,
            "others": others.share}


def _step_of(update) -> int | None:
    match = STEP.search(str(update[0]))           # the progress markdown is the first output
    return int(match.group(1).replace(",", "")) if match else None


def table_losses(table) -> dict[str, tuple[str, str]]:
    """The page's table: variant -> (train loss, val loss) as shown (3 decimals)."""
    headers = table["headers"]
    train, val = headers.index("train loss"), headers.index("val loss")
    return {row[0]: (row[train], row[val]) for row in table["data"]}


# --------------------------------------------------------------------------- the book's loop
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


# --------------------------------------------------------------------------------- the parts
def comparison(args, variants, corpus, settings):
    """Part 1: the default comparison, bare and through the page, interleaved (bare, page;
    page, bare; ...). Returns the last bare job (for the ratio's settings)."""
    arguments = page_arguments(settings) if args.page_rounds else None
    rounds = max(1, args.page_rounds)
    if args.page_rounds and arguments is None:
        print("(the page cannot ask for these settings: its /train_start does not take them; "
              "bare job only)")
    app_env = {"OMP_NUM_THREADS": str(torch.get_num_threads())}   # the app's torch threads
    bares, pages = [], []
    for i in range(rounds):
        order = ("bare", "page") if i % 2 == 0 else ("page", "bare")
        for what in order:
            if what == "page" and arguments is None:
                continue
            if what == "page":
                pages.append(run_page(arguments, app_env))
                print(f"  round {i + 1}, page: {pages[-1]['seconds']:.1f} s", flush=True)
                continue
            with OthersCPU() as others:
                seconds, cpu, job, samples = run_bare(variants, corpus, settings)
            bares.append({"seconds": seconds, "cpu": cpu, "job": job, "samples": samples,
                          "others": others.share})
            print(f"  round {i + 1}, bare: {seconds:.1f} s", flush=True)

    job, samples = bares[-1]["job"], bares[-1]["samples"]
    view = job.view()
    print(f"\nDefault comparison: {DEFAULT_PRESET}, {len(variants)} variants x {settings.steps} "
          f"steps, batch {settings.batch_size} x {job.window} tokens, eval_freq "
          f"{settings.eval_freq}, eval_iter {settings.eval_iter}; {view.epoch} epoch(s) of "
          f"{view.batches_per_epoch} batches; {len(view.runs[0].eval_steps)} evaluations")
    early = min(EARLY_STEPS, settings.steps)
    print_table([[r.label, f"{r.parameters:,}", f"{r.train_losses[0]:.3f}",
                  f"{r.train_losses[-1]:.3f}", f"{r.val_losses[-1]:.3f}",
                  f"{grad_ratio(r, early):.3g}", f"{grad_ratio(r):.3g}",
                  f"{r.seconds_per_step * 1e3:.0f} ms", "yes" if r.diverged else "no"]
                 for r in view.runs],
                ["variant", "parameters", f"train loss @{view.runs[0].eval_steps[0]}",
                 "train loss", "val loss", f"grad block 0 / last, steps < {early}",
                 "all steps", "s/step", "diverged"])
    for r in view.runs:
        for step, text in samples[r.label][:1] + samples[r.label][-1:]:
            print(f"  {r.label}, step {step}: {text[:100]!r}")

    rows = []
    for i, b in enumerate(bares):
        rows.append([f"bare {i + 1}", f"{b['seconds']:.1f}", f"{b['cpu']:.1f} (this process)",
                     f"{b['job'].seconds:.0f}", "", "",
                     f"{b['others']:.0%}" if b["others"] is not None else "n/a"])
    for i, p in enumerate(pages):
        sizes = [b for _, _, b in p["updates"]]
        rows.append([f"page {i + 1}", f"{p['seconds']:.1f}", f"{p['server_cpu']:.1f} (server)",
                     f"{p['job_seconds']:.0f}" if p["job_seconds"] is not None else "?",
                     f"{len(sizes)}", f"{max(sizes) / 1e3:,.0f} / {sum(sizes) / 1e6:,.1f} MB",
                     f"{p['others']:.0%}" if p["others"] is not None else "n/a"])
    print()
    print_table(rows, ["run", "seconds", "CPU seconds", "job's own s", "updates",
                       "largest update KB / all", "others' CPU"])
    bare_s = statistics.median(b["seconds"] for b in bares)
    print(f"bare: {bare_s:.1f} s (median of {len(bares)}), target <= {SECONDS_TARGET:.0f} s: "
          f"{verdict(bare_s <= SECONDS_TARGET)}")
    if pages:
        page_s = statistics.median(p["seconds"] for p in pages)
        ratios = [p["seconds"] / b["seconds"] for p, b in zip(pages, bares)]
        ratio = statistics.median(ratios)
        print(f"page: {page_s:.1f} s from the submit to the last update (median of "
              f"{len(pages)}), target <= {SECONDS_TARGET:.0f} s: "
              f"{verdict(page_s <= SECONDS_TARGET)}")
        print(f"page / bare: {ratio:.2f} (rounds: {', '.join(f'{r:.2f}' for r in ratios)}), "
              f"target <= {PAGE_TARGET}: {verdict(ratio <= PAGE_TARGET)}; in CPU seconds "
              f"(server / this process) "
              f"{statistics.median(p['server_cpu'] / b['cpu'] for p, b in zip(pages, bares)):.2f}")
        shown = table_losses(pages[-1]["table"])
        ours = {r.label: (f"{r.train_loss_now:.3f}", f"{r.val_loss_now:.3f}")
                for r in view.runs}
        print(f"the page's job is the bare job (its table's final losses): "
              f"{verdict(shown == ours)}" + ("" if shown == ours else f" {shown} vs {ours}"))
    return job


def ratio_to_book(args, variants, corpus, settings, repeats):
    """Part 2: tokens per second against the book's loop, same model, same batches,
    interleaved; and the largest loss difference at the book's evaluation points."""
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
    print(f"\nTokens/s, {variant.label} ({DEFAULT_PRESET}, window {settings.context_length}, "
          f"batch {settings.batch_size}), {epochs} epochs = {n} steps, eval every "
          f"{settings.eval_freq} steps on {settings.eval_iter} batches, {repeats} round(s), "
          f"other processes {share} of the CPU:")
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
          f"(the same training, within rounding): {verdict(same < 1e-4)}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="60 steps, one round of each (checks the script, not the targets)")
    parser.add_argument("--page-rounds", type=int, default=None,
                        help="rounds of bare vs page (default 2, --quick 1; 0: bare only)")
    parser.add_argument("--repeats", type=int, default=3,
                        help="rounds of the ratio to the book's loop (0: none)")
    parser.add_argument("--steps", type=int, default=None, help="steps of the comparison")
    parser.add_argument("--eval-freq", type=int, default=None,
                        help="evaluate every N steps (a trade against the defaults: measure it)")
    parser.add_argument("--eval-iter", type=int, default=None, help="evaluate on N batches")
    parser.add_argument("--book-settings", action="store_true",
                        help="the book's loop settings (batch 2, lr 0.0004, eval_freq 5, "
                             "eval_iter 5) on the defaults' steps and window")
    parser.add_argument("--threads", type=int, default=None,
                        help="torch threads here and in the app (default: torch's, the app's)")
    parser.add_argument("--app-heap", action="store_true",
                        help="the app server's allocator setting here too (heap.py's mmap "
                             "threshold), so that bare and page allocate alike")
    parser.add_argument("--max-load", type=float, default=None)
    args = parser.parse_args()
    repeats = min(1, args.repeats) if args.quick else args.repeats
    if args.page_rounds is None:
        args.page_rounds = 1 if args.quick else 2
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.max_load is not None:
        print(f"load average before timing: {wait_for_quiet(args.max_load):.2f}")
    if args.app_heap:
        from explorer.runtime.heap import release_freed_memory_promptly
        release_freed_memory_promptly()   # what explorer/app/server.py does at start
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, load average "
          f"{load_average():.2f}, allocator here: {'app server' if args.app_heap else 'default'}"
          f" (the app: its own)")
    corpus = default_corpus()
    changes = {}
    if args.steps or args.quick:
        changes["steps"] = args.steps or 60
    if args.book_settings:      # the page's "The book's settings" where training_setup has it
        book = getattr(training_setup, "book_settings", None)
        changes.update({k: getattr(book(), k) for k in ("batch_size", "lr", "eval_freq",
                                                        "eval_iter", "warmup_steps")}
                       if book else {k: BOOK_SETTINGS[k] for k in ("batch_size", "lr",
                                                                   "eval_freq", "eval_iter")})
    if args.eval_freq:
        changes["eval_freq"] = args.eval_freq
    if args.eval_iter:
        changes["eval_iter"] = args.eval_iter
    settings = default_settings(**changes)
    if settings != default_settings(steps=settings.steps):
        print(f"NOT the defaults: batch {settings.batch_size}, lr {settings.lr}, eval_freq "
              f"{settings.eval_freq}, eval_iter {settings.eval_iter} (defaults: "
              f"{default_settings()})")

    variants = make_variants(DEFAULT_VARIANTS, DEFAULT_PRESET)
    comparison(args, variants, corpus, settings)
    if repeats > 0:
        ratio_to_book(args, variants, corpus, settings, repeats)
    print(f"load average at the end: {load_average():.2f}")


if __name__ == "__main__":
    main()
