"""Loading GPT-2 small from a local model.safetensors: the explorer's ``load_file`` (header
checks, sha256 of the file for the cache key, the book's mapping into ``GPTModel``, fused, eval)
against ``GPT2LMHeadModel.from_pretrained`` on the same file, interleaved in one run.

The checkpoint is a random gpt2-small-shaped model made with transformers (no download), in a
temporary folder; both loaders read it from the page cache (a warm-up run of each first). Each
explorer run uses a fresh model cache, so every run loads. Target: explorer <= 0.5x
transformers (median of paired ratios), for the load itself (both then hold memory maps of
the file, read on the first forward pass; the ratio with the first forward is printed too).
The teardown of each model (gc) is left out of the timing. ``GPT_EXPLORER_WEIGHTS`` points the
explorer's store of converted checkpoints elsewhere (a temporary folder is used by default).

    python bench/load_weights.py [--quick] [--repeats N] [--max-load L]
"""
from __future__ import annotations

import argparse
import gc
import os
import tempfile
import time
from pathlib import Path

import _common  # noqa: F401  (puts the repository root on sys.path)
from _common import (OthersCPU, median, paired_ratios, print_table, verdict,
                     wait_for_quiet)

import torch

TARGET = 0.5


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--repeats", type=int, default=None)
    parser.add_argument("--max-load", type=float, default=None)
    args = parser.parse_args()
    repeats = args.repeats or (3 if args.quick else 7)

    from transformers import GPT2Config, GPT2LMHeadModel
    from transformers.utils import logging as hf_logging
    from explorer.runtime.cache import ModelCache
    from explorer.runtime.loading import load_file

    hf_logging.disable_progress_bar()
    with tempfile.TemporaryDirectory(prefix="gpt-explorer-bench-") as folder:
        os.environ.setdefault("GPT_EXPLORER_WEIGHTS", str(Path(folder) / "store"))
        torch.manual_seed(0)
        GPT2LMHeadModel(GPT2Config()).save_pretrained(folder)
        path = Path(folder) / "model.safetensors"
        print(f"checkpoint: {path.stat().st_size / 1e6:,.1f} MB, torch threads "
              f"{torch.get_num_threads()}")

        def explorer_load():
            return load_file(path, cache=ModelCache(budget_bytes=4 * 1024 ** 3))[0]

        def transformers_load():
            return GPT2LMHeadModel.from_pretrained(folder).eval()

        ids = torch.tensor([[464, 2068, 7586, 21831]])

        def first_forward(model):
            with torch.inference_mode():
                out = model(ids)
            return out if isinstance(out, torch.Tensor) else out.logits

        # The first load of a file also hashes it (sha256, the cache key) and converts it
        # into the store (the book's layout, Conv1D weights transposed once): timed once.
        started = time.perf_counter()
        explorer_load()
        cold = time.perf_counter() - started
        if args.max_load is not None:
            print(f"load average before timing: {wait_for_quiet(args.max_load):.2f}")
        variants = {"transformers": transformers_load, "explorer": explorer_load}
        times = {name: [] for name in variants}
        forward = {name: [] for name in variants}
        with OthersCPU() as others:
            for _ in range(repeats):          # A B A B ...: load from elsewhere hits both
                for name, load in variants.items():
                    gc.collect()              # the last model's teardown is not timed
                    started = time.perf_counter()
                    model = load()
                    times[name].append(time.perf_counter() - started)
                    first_forward(model)      # both map the file: pages are read here
                    forward[name].append(time.perf_counter() - started)
                    del model
        ratios = paired_ratios(times, "transformers")
        with_forward = paired_ratios(forward, "transformers")
        rows = [[name, f"{median(times[name]):.3f} s", f"{ratios[name]:.2f}x",
                 f"{median(forward[name]):.3f} s", f"{with_forward[name]:.2f}x"]
                for name in variants]
        print_table(rows, ["loader", "load (median)", "vs transformers",
                           "load + first forward", "vs transformers"])
        print(f"explorer, first load of this file (sha256 + conversion into the store): "
              f"{cold:.2f} s")
        share = f"{others.share:.0%}" if others.share is not None else "n/a"
        print(f"other processes used {share} of the CPU while timing")
        ok = ratios["explorer"] <= TARGET
        print(f"explorer / transformers = {ratios['explorer']:.2f} (target <= {TARGET}): "
              f"{verdict(ok)}")


if __name__ == "__main__":
    main()
