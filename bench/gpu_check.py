"""The check to run once where a GPU is lent (``bash bench/gpu_check.sh``): every step a user
takes, on CUDA in float32 and bfloat16, against the same step on the CPU.

- build: gpt2-small (random, seed 123) has the CPU's weights (float32: to the bit; bfloat16:
  the CPU's rounded);
- trace: the statistics, attention and next-token probabilities of the default story's first
  64 tokens;
- generate: 40 greedy tokens, the same as the CPU's, and tokens/s;
- train: 20 steps of teach-tiny in the lab (float32), the CPU's losses, and seconds a step;
- the head map (issue 27): the whole map of gpt2-small at T = 64 in forward passes' worth
  (target <= 20) and its largest difference from the CPU's map.

    python bench/gpu_check.py                  # on CUDA (fails at once without it)
    python bench/gpu_check.py --device cpu     # the same steps on the CPU, against itself

With ``$OUT`` set, the figures are also written to ``$OUT/gpu_check.json``.
"""
from __future__ import annotations

import argparse
import json
import os
import time

from _common import median, print_table

import numpy as np
import torch

from explorer.book.config import GPT_CONFIG_124M
from explorer.book.generate import generate_steps
from explorer.book.tokenizer import get_tokenizer
from explorer.probes.knockouts import importance
from explorer.probes.tracing import trace
from explorer.runtime.build import build_model
from explorer.runtime.training.job import TrainingJob
from explorer.runtime.training.setup import default_corpus, default_settings, make_variants

MAP_TARGET = 20.0


def synced(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def seconds(fn, device, repeats=5):
    times = []
    for _ in range(repeats):
        synced(device)
        started = time.perf_counter()
        fn()
        synced(device)
        times.append(time.perf_counter() - started)
    return median(times)


def largest_relative(a, b) -> float:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(np.nanmax(np.abs(a - b) / np.maximum(np.abs(b), 1e-6)))


def check_build(device, dtype, cpu_model):
    started = time.perf_counter()
    model = build_model(GPT_CONFIG_124M, seed=123, device=device.type, dtype=dtype)
    synced(device)
    took = time.perf_counter() - started
    wanted = {k: v.to(getattr(torch, dtype)) for k, v in cpu_model.state_dict().items()}
    same = all(torch.equal(v.cpu(), wanted[k]) for k, v in model.state_dict().items())
    return model, {"build s": round(took, 2), "weights as the CPU's": same}


def check_trace(model, ids, cpu_trace, device):
    traced = trace(model, ids)
    took = seconds(lambda: trace(model, ids), device, repeats=3)
    return {"trace s": round(took, 3),
            "ln1_out std, largest rel. diff": largest_relative(
                traced.series("ln1_out", "std"), cpu_trace.series("ln1_out", "std")),
            "next-token probs, largest abs. diff": float(np.abs(
                traced.next_probs - cpu_trace.next_probs).max()),
            "attention, largest abs. diff": max(float(np.abs(traced.attention[k]
                                                              - cpu_trace.attention[k]).max())
                                                for k in cpu_trace.attention)}


def check_generate(model, ids, cpu_tokens, device):
    synced(device)
    started = time.perf_counter()
    tokens = [s.token_id for s in generate_steps(model, ids, len(cpu_tokens))]
    synced(device)
    took = time.perf_counter() - started
    agree = next((i for i, (a, b) in enumerate(zip(tokens, cpu_tokens)) if a != b), len(tokens))
    return {"tokens/s": round(len(tokens) / took, 1),
            "greedy tokens as the CPU's": f"{agree} of {len(cpu_tokens)}"}


def train_losses(device, steps=20):
    job = TrainingJob(make_variants(("pre-LN (book)",), "teach-tiny"), default_corpus(),
                      default_settings(steps=steps, eval_freq=5), device=device)
    started = time.perf_counter()
    job.advance(steps)
    return job.runs[0].train_losses, (time.perf_counter() - started) / steps


def check_map(model, ids, cpu_map, device):
    x = torch.tensor([ids], device=device)
    with torch.inference_mode():
        model(x)
        forward = seconds(lambda: model(x), device)
    importance(model, ids, parts=False)                      # warm-up
    synced(device)
    started = time.perf_counter()
    found = importance(model, ids, parts=False)
    took = time.perf_counter() - started
    worth = took / forward
    return {"forward ms": round(forward * 1000, 2), "head map s": round(took, 3),
            "head map, forwards' worth": round(worth, 1),
            f"target <= {MAP_TARGET:g}": "PASS" if worth <= MAP_TARGET else "FAIL",
            "map, largest rel. diff from the CPU's": largest_relative(
                found.head_loss, cpu_map.head_loss)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    args = parser.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("CUDA is not available here: run it where a GPU is lent, or with "
                         "--device cpu.")
    device = torch.device(args.device)
    ids = get_tokenizer().encode(default_corpus().text[:2000])[:64]   # the story's start
    name = torch.cuda.get_device_name() if device.type == "cuda" else "CPU"
    print(f"torch {torch.__version__} · {name} · {len(ids)} tokens")

    cpu_model = build_model(GPT_CONFIG_124M, seed=123, device="cpu")
    cpu_trace = trace(cpu_model, ids)
    cpu_tokens = [s.token_id for s in generate_steps(cpu_model, ids[:8], 40)]
    cpu_map = importance(cpu_model, ids, parts=False)
    cpu_losses, _ = train_losses("cpu")

    figures = {}
    for dtype in ("float32", "bfloat16") if device.type == "cuda" else ("float32",):
        model, row = check_build(device, dtype, cpu_model)
        row.update(check_trace(model, ids, cpu_trace, device))
        row.update(check_generate(model, ids[:8], cpu_tokens, device))
        if dtype == "float32":
            losses, per_step = train_losses(device.type)
            row["train s a step"] = round(per_step, 4)
            row["train losses, largest abs. diff"] = float(np.abs(
                np.array(losses) - np.array(cpu_losses)).max())
            row.update(check_map(model, ids, cpu_map, device))
        figures[dtype] = row
        del model
    names = list(dict.fromkeys(k for row in figures.values() for k in row))
    print_table([[name, *(_shown(row.get(name, "–")) for row in figures.values())]
                 for name in names], ["figure", *figures])
    if os.environ.get("OUT"):
        with open(os.path.join(os.environ["OUT"], "gpu_check.json"), "w") as out:
            json.dump({"torch": torch.__version__, "device": str(device), **figures}, out,
                      indent=1)


def _shown(value):
    return f"{value:.3g}" if isinstance(value, float) else str(value)


if __name__ == "__main__":
    main()
