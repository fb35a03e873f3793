"""The map of which parts matter against its target (issue 27): the whole head map of gpt2-small
(``GPT_CONFIG_124M``, random weights, fused as the app builds it, CPU, fp32) at T = 64 costs at
most 20 forward passes' worth of time, measured against a plain ``model(ids)`` at T = 64 in the
same run (interleaved, medians). Also: where the map's time goes (the clean pass, the blocks
from each layer on, the output head and loss), the floating-point work it cannot avoid (in
forward passes' worth), and its peak memory against ``importance_peak_bytes``.

``--lab-table``: a teach-deep model trained briefly in the lab (``TrainingJob`` on the default
story) and the loss change when each block's att, ff, norm1, norm2 and shortcut are knocked out,
on a window of the story's validation text.

    python bench/interventions.py                 # ~2 min on a quiet 2-core machine
    python bench/interventions.py --quick         # one map
    python bench/interventions.py --lab-table     # + the lab table (~2 min more)
"""
from __future__ import annotations

import argparse
import time

from _common import (OthersCPU, PeakRSS, interleaved, mb, median, paired_ratios, print_table,
                     verdict, wait_for_quiet)

import torch

from explorer.book.config import GPT_CONFIG_124M, GPTConfig
from explorer.book.probe_points import editing
from explorer.probes.budget import importance_peak_bytes
from explorer.probes.knockouts import PARTS, _clean_run, _scores, importance
from explorer.probes.intervening import Editor
from explorer.probes.interventions import Intervention
from explorer.runtime.build import build_model

TARGET = 20.0          # forward passes' worth
N_TOKENS = 64


def work_in_forwards(cfg: GPTConfig, n: int) -> tuple[float, float]:
    """(multiply-adds of one forward pass, those of the head map in forward passes' worth):
    a row through a block costs its weights plus attention over n keys; the map runs the clean
    pass, then for each block l its n_heads copies through blocks l .. L-1, and the output head
    on n - 1 positions of each copy."""
    block = 4 * cfg.emb_dim ** 2 + 2 * cfg.emb_dim * cfg.ff_hidden_dim + 2 * n * cfg.emb_dim
    head = cfg.emb_dim * cfg.vocab_size
    forward = n * (cfg.n_layers * block + head)
    copies = sum(cfg.n_heads * n * (cfg.n_layers - layer) * block for layer in range(cfg.n_layers))
    return forward, (forward + copies + cfg.n_layers * cfg.n_heads * (n - 1) * head) / forward


def breakdown(model, ids):
    """Seconds of the map's pieces, run as ``importance`` runs them."""
    cfg = model.cfg
    seconds = {"clean pass": 0.0, "blocks (batched copies)": 0.0, "output head + loss": 0.0}
    with torch.inference_mode():
        started = time.perf_counter()
        streams, normed = _clean_run(model, ids)
        targets = torch.tensor(ids[1:])
        _scores(model, normed, targets)
        seconds["clean pass"] += time.perf_counter() - started
        per_layer = []
        for layer in range(cfg.n_layers):
            items = [Intervention("zero_heads", layer, (h,)) for h in range(cfg.n_heads)]
            editor = Editor(model, items, rows=range(len(items)))
            started = time.perf_counter()
            x = streams[layer].expand(len(items), -1, -1)
            with editing(editor):
                editor.start_at(layer)
                for block in model.trf_blocks[layer:]:
                    x = block(x)
            x = model.final_norm(x)
            middle = time.perf_counter()
            _scores(model, x, targets)
            done = time.perf_counter()
            seconds["blocks (batched copies)"] += middle - started
            seconds["output head + loss"] += done - middle
            per_layer.append((middle - started, done - middle))
    return seconds, per_layer


def lab_table(steps: int, preset: str):
    from explorer.book.config import get_preset
    from explorer.book.tokenizer import get_tokenizer
    from explorer.book.training import split_text
    from explorer.runtime.training_job import TrainingJob
    from explorer.runtime.training_setup import TrainingSettings, Variant, default_corpus

    corpus = default_corpus()
    cfg = get_preset(preset)
    settings = TrainingSettings(steps=steps, eval_freq=steps, eval_iter=1, sample_tokens=0)
    job = TrainingJob([Variant("pre-LN (book)", cfg)], corpus, settings)
    started = time.perf_counter()
    job.advance(steps)
    run = job.view().runs[0]
    print(f"\nLab table: {preset} (pre-LN, the book's settings), {steps} steps on the default "
          f"story in {time.perf_counter() - started:.0f} s; train loss {run.train_losses[-1]:.3f}"
          f", val loss {run.val_losses[-1]:.3f}")
    model = job.trained_model().model
    train_text, val_text = split_text(corpus.text)
    tokenizer = get_tokenizer()
    for name, text in (("validation", val_text), ("training", train_text)):
        ids = tokenizer.encode(text)[:cfg.context_length]
        result = importance(model, ids)
        print(f"\nknock-outs on the first {len(ids)} tokens of the {name} text "
              f"({result.seconds:.1f} s); the model's own loss {result.clean_loss:.3f} nats, "
              f"mean p(next) {result.clean_prob:.4f}")
        print("loss change (nats) with the part knocked out (att, ff: output 0; norm1, norm2: "
              "identity; shortcut: both removed); the head whose zeroing costs most")
        rows = []
        for layer in range(cfg.n_layers):
            worst = int(result.head_loss[layer].argmax())
            rows.append([f"trf_blocks[{layer}]",
                         *(f"{v:+.3f}" for v in result.part_loss[layer]),
                         f"head {worst} {result.head_loss[layer, worst]:+.3f}"])
        print_table(rows, ["block", *PARTS, "costliest head"])
        print("mean p(next) change, lowest..highest over the blocks: " + "; ".join(
            f"{p} {result.part_prob[:, i].min():+.4f}..{result.part_prob[:, i].max():+.4f}"
            for i, p in enumerate(PARTS)))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--repeats", type=int, default=None)
    parser.add_argument("--max-load", type=float, default=None)
    parser.add_argument("--lab-table", action="store_true")
    parser.add_argument("--lab-steps", type=int, default=300)
    parser.add_argument("--lab-preset", default="teach-deep")
    args = parser.parse_args()
    repeats = args.repeats or (1 if args.quick else 3)
    if args.max_load is not None:
        print(f"load average before timing: {wait_for_quiet(args.max_load):.2f}")

    cfg = GPTConfig.from_dict(GPT_CONFIG_124M)
    model = build_model(cfg, seed=123, device="cpu")
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(0, cfg.vocab_size, (N_TOKENS,), generator=generator).tolist()
    batch = torch.tensor([ids])

    def forward():
        with torch.inference_mode():
            model(batch)

    def head_map():
        importance(model, ids, parts=False)

    # A plain forward is ~1/100 of the map: several of them per round, their median per pass.
    per_round = 5

    def forwards():
        for _ in range(per_round):
            forward()
    with OthersCPU() as others:
        times = interleaved({"forward x5": forwards, "head map": head_map}, repeats)
    times["forward"] = [t / per_round for t in times.pop("forward x5")]
    ratio = paired_ratios(times, "forward")["head map"]
    flops, floor = work_in_forwards(cfg, N_TOKENS)
    print(f"gpt2-small (random, fused), T = {N_TOKENS}, {repeats} round(s); other processes "
          f"used {others.share or 0:.0%} of the CPU")
    print_table([["plain forward", f"{median(times['forward']) * 1e3:.0f} ms", "1.0"],
                 ["head map (144 knock-outs)", f"{median(times['head map']):.2f} s",
                  f"{ratio:.1f}"],
                 ["floating-point work of the map", f"{2 * flops / 1e9:.1f} GFLOP a forward",
                  f"{floor:.1f}"]],
                ["", "median", "forward passes' worth"])
    print(f"target <= {TARGET:.0f} forward passes' worth: {verdict(ratio <= TARGET)} "
          f"({ratio:.1f}; the work alone is {floor:.1f})")

    seconds, per_layer = breakdown(model, ids)
    total = sum(seconds.values())
    print_table([[k, f"{v:.2f} s", f"{v / total:.0%}"] for k, v in seconds.items()],
                ["breakdown (one map)", "seconds", "share"])
    print("per block l (copies through blocks l..11 / their head + loss): " + ", ".join(
        f"{b:.2f}/{h:.2f}" for b, h in per_layer))

    with PeakRSS() as peak:
        head_map()
    estimate = importance_peak_bytes(cfg, N_TOKENS, cfg.n_heads)
    print(f"peak RSS increase during the map {mb(peak.increase)}; importance_peak_bytes "
          f"{mb(estimate)} ({verdict(peak.increase <= estimate)}: the estimate covers it)")

    if args.lab_table:
        lab_table(args.lab_steps, args.lab_preset)


if __name__ == "__main__":
    main()
