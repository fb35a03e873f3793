"""Comparing two models: the lockstep decode rate of two gpt2-small models against one alone,
and the largest compare-mode UI update at T = 1024. Run: python bench/compare.py [--quick].

Targets (issue 19): lockstep generation of two gpt2-small (different weights: every step reads
both models' weights) runs >= 0.45x the single-model decode rate in the same run; every update
of a comparison stays <= 1 MB at T = 1024, and each model's next-token bars <= 2 KB.

Part 1 times, interleaved round by round (A alone, then A and B in lockstep), greedy decoding
with the top-10 bars recorded and the C step handed in as the app does, both as the core
(``book.generate.lockstep`` of two ``generate_steps``) and as the page's handler streams it
(HTML bars, the step table, the pacing of ``tabs.generate``). Part 2 drives the app through
gradio_client as a lecture would (build, pin, build, trace 1,024 tokens, views, attention,
logit lens, generation) and measures each output as sent (JSON), as bench/app_memory.py does.
"""
from __future__ import annotations

import argparse
import os
import re
import time

from _common import (OthersCPU, load_average, median, print_table, verdict,  # first: explorer
                     wait_for_quiet)

import torch

from app_memory import prompt_of, sizes
from explorer import native
from explorer.book.config import PRESETS
from explorer.book.generate import generate_steps, lockstep

PROMPT = [6109, 3626, 6100, 345]  # "Every effort moves you"
FAST = dict(step=native.model_step, summarize=native.next_token_summary)


def timed(fn) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def decode_rates(models, n_new, rounds):
    """Per round: (tokens/s of A alone, steps/s of A and B in lockstep), each a fresh
    generation (its own prefill and KV cache)."""
    a, b = models

    def alone():
        for _ in generate_steps(a, PROMPT, n_new, show_top=10, **FAST):
            pass

    def together():
        for _ in lockstep(generate_steps(a, PROMPT, n_new, show_top=10, **FAST),
                          generate_steps(b, PROMPT, n_new, show_top=10, **FAST)):
            pass

    alone(), together()   # warm-up: the C kernels' tables, the page cache
    rounds_out = []
    for _ in range(rounds):
        rounds_out.append((n_new / timed(alone), n_new / timed(together)))
    return rounds_out


def handler_rates(app_state, n_new, rounds):
    """The Generate tab's handler (HTML bars, the table, the pacing): single, then lockstep."""
    from explorer.app import pinning
    from explorer.app.tabs import generate

    single = pinning.without_pin(app_state)

    def run(state):
        last = None
        for last in generate.generate("Every effort moves you", n_new, "greedy", 1.0, 50, 123,
                                      False, state):
            pass
        return last

    run(single), run(app_state)
    out = []
    for _ in range(rounds):
        out.append((n_new / timed(lambda: run(single)), n_new / timed(lambda: run(app_state))))
    return out


def payloads(n_tokens, n_new):
    """The app in-process, driven through gradio_client: (endpoint, largest update bytes,
    largest output bytes) for each call of a comparison of two gpt2-small at T = n_tokens."""
    os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
    from gradio_client import Client

    from explorer.app.server import create_demo

    cfg = PRESETS["gpt2-small"].to_dict()

    def build_args(seed):
        return dict(preset="gpt2-small", **cfg, seed=seed, device="cpu", dtype="float32",
                    api_name="/build")

    demo = create_demo()
    _, url, _ = demo.launch(prevent_thread_lock=True, quiet=True, server_name="127.0.0.1",
                            server_port=None)
    rows = []
    try:
        c = Client(url, verbose=False)
        prompt = prompt_of(n_tokens)
        view = ("norm1: before vs after LayerNorm", "resid_pre", "std")

        def record(what, values):
            each = sizes(values)
            rows.append((what, sum(each), max(each)))
            return values

        record("/build (B)", c.predict(**build_args(123)))
        record("/pin_model", c.predict(api_name="/pin_model"))
        record("/build (A, beside B)", c.predict(**build_args(124)))
        record(f"/trace (T={n_tokens})", c.predict(prompt, 0, *view, api_name="/trace"))
        record("/inside_views (layer 11)", c.predict(11, *view, api_name="/inside_views"))
        for layer, head in ((0, "mean"), (11, "0")):
            record(f"/attention (layer {layer}, head {head})",
                   c.predict(layer, head, api_name="/attention"))
        record("/logit_lens", c.predict(prompt, api_name="/logit_lens"))
        job = c.submit(prompt, n_new, "greedy", 1.0, 50, 123, False, api_name="/generate")
        outputs = list(job)
        updates = [sizes(u) for u in outputs]
        rows.append((f"/generate ({n_new} tokens, {len(updates)} updates)",
                     max(sum(u) for u in updates), max(max(u) for u in updates)))
        # each model's share of the bars (one panel per model)
        panels = [len(p.encode()) for out in outputs if isinstance(out[1], str)
                  for p in re.split(r'(?=<div class="s">)', out[1])[1:]]
        rows.append(("/generate: one model's bars (largest panel)", max(panels), max(panels)))
        record("/next_token", c.predict(prompt, "", "greedy", 1.0, 50, 123,
                                        api_name="/next_token"))
    finally:
        demo.close()
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--new", type=int, default=100, help="new tokens per generation")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tokens", type=int, default=1024, help="prompt length for part 2")
    parser.add_argument("--quick", action="store_true", help="60 tokens, 2 rounds")
    parser.add_argument("--max-load", type=float, default=0.7)
    parser.add_argument("--skip-payloads", action="store_true")
    args = parser.parse_args()
    n_new, rounds = (60, 2) if args.quick else (args.new, args.rounds)
    print(f"load average before: {wait_for_quiet(args.max_load):.2f}; torch threads: "
          f"{torch.get_num_threads()}; decode kernels: "
          f"{'on' if native.available() else 'OFF (no C compiler)'}")

    from explorer.app.shared import CACHE
    cfg = PRESETS["gpt2-small"]
    keys = [CACHE.key(cfg, seed=seed, device="cpu") for seed in (123, 124)]
    models = CACHE.get_together(keys)      # two models: different weights, both read per step
    with OthersCPU() as others:
        core = decode_rates(models, n_new, rounds)
    state = {"key": keys[0], "status": None, "pinned_key": keys[1], "pinned_status": None}
    with OthersCPU() as others_page:
        page = handler_rates(state, n_new, max(1, rounds - 1))
    rows = []
    for what, rates, share in (("core: lockstep(generate_steps, generate_steps)", core, others),
                               ("page: the Generate tab's handler", page, others_page)):
        ratios = [pair / single for single, pair in rates]
        ratio = median(ratios)
        rows.append([what, f"{median([s for s, _ in rates]):.1f} tokens/s alone, "
                     f"{median([p for _, p in rates]):.1f} steps/s in lockstep = {ratio:.2f}x "
                     f"(rounds {', '.join(f'{r:.2f}' for r in ratios)}; others "
                     f"{'?' if share.share is None else f'{share.share:.0%}'} of the CPU)",
                     ">= 0.45x", verdict(ratio >= 0.45)])
    del models
    CACHE.clear()
    print_table(rows, ["lockstep decoding, two gpt2-small", "measured", "target", ""])

    if not args.skip_payloads:
        sizes_rows = payloads(args.tokens, 20)
        largest = max(sizes_rows, key=lambda r: r[1])
        table = [[what, f"{total / 1e3:,.1f} KB", f"{part / 1e3:,.1f} KB"]
                 for what, total, part in sizes_rows]
        print_table(table, ["compare-mode call (two gpt2-small)", "update (JSON)",
                            "largest output"])
        print_table([[f"largest compare-mode update (T={args.tokens})",
                      f"{largest[1] / 1e3:,.1f} KB ({largest[0]})", "<= 1 MB",
                      verdict(largest[1] <= 1e6)]], ["figure", "measured", "target", ""])
    print(f"load average after: {load_average():.2f}")


if __name__ == "__main__":
    main()
