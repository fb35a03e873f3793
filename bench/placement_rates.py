"""The rates of the placement policy's table (explorer/runtime/placement.py), measured here.
Run: python bench/placement_rates.py [--device cpu|cuda]

- flops per second: a trace (every probe) of gpt2-small over 256 tokens, 2 * parameters *
  tokens / seconds;
- bytes per second: a decoding step of gpt2-medium with its KV cache reads every weight once
  (memory-bound), 4 * parameters / seconds per step;
- seconds per block per step: a decoding step of teach-tiny (2 blocks; its weights are
  nothing), less its weights' share, per block.

The table's CPU row is these figures halved (a Space's CPU serves other sessions at the same
time); the GPU row is an estimate until this runs on one (bench/gpu_check.sh runs it).
"""
from __future__ import annotations

import argparse

from _common import print_table  # first: the repository root on sys.path
from gpu_check import seconds   # timed with the device synchronised

import torch

from explorer.book.config import PRESETS, count_parameters
from explorer.book.generate import generate_steps
from explorer.probes import trace
from explorer.runtime.build import build_model
from explorer.runtime.placement import RATES

PROMPT_IDS = list(range(1000, 1256))


def timed(fn, device, repeats=3) -> float:
    fn()                                  # warm-up
    return seconds(fn, device, repeats)


def step_seconds(model, device, steps=24) -> float:
    return timed(lambda: list(generate_steps(model, PROMPT_IDS[:8], steps)), device) / steps


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(parser.parse_args().device)
    place = "cpu" if device.type == "cpu" else "zerogpu"
    table = RATES[place]

    small = build_model(PRESETS["gpt2-small"], seed=123, device=str(device))
    params = count_parameters(PRESETS["gpt2-small"]).total
    flops = 2 * params * len(PROMPT_IDS) / timed(lambda: trace(small, PROMPT_IDS), device)
    del small

    tiny = build_model(PRESETS["teach-tiny"], seed=123, device=str(device))
    per_layer = step_seconds(tiny, device) / PRESETS["teach-tiny"].n_layers
    del tiny

    medium = build_model(PRESETS["gpt2-medium"], seed=123, device=str(device))
    cfg = PRESETS["gpt2-medium"]
    step = step_seconds(medium, device) - cfg.n_layers * per_layer
    bytes_rate = 4 * count_parameters(cfg).total / max(step, 1e-9)

    print(f"device: {device}; the table's row: {place!r}")
    print_table([
        ["flops per second (trace)", f"{flops:.2e}", f"{table.flops_per_second:.2e}"],
        ["bytes per second (decoding)", f"{bytes_rate:.2e}", f"{table.bytes_per_second:.2e}"],
        ["seconds per block per step", f"{per_layer:.1e}", f"{table.seconds_per_layer_step:.1e}"],
    ], ["rate", "measured", "in the table"])


if __name__ == "__main__":
    main()
