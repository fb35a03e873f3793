"""Patching between a clean and a corrupted prompt (issue 49) against its targets.
Run: python bench/patching.py [--repeats N] [--copying-steps N] [--max-load L]

gpt2-small (``GPT_CONFIG_124M``, random weights: the cost does not depend on them; fused as the
app builds it, CPU, fp32) on the indirect-object pair ("When Mary and John went to the store,
John gave a drink to" / " Mary" vs " John", corrupted with other names: 14 tokens). Forward
passes' worth = paired median of (variant / plain ``model(ids)``, every position's logits) in
the same round, interleaved:

- the head map (layers x heads) estimated, every cell: <= 4;
- the head map's top 10 made exact, with the estimate: <= 20 in all;
- the residual map (layers x positions) estimated: <= 4 (the same pass gives both maps);
- estimate vs exact (every cell made exact), Spearman: on gpt2-small and on the copying task's
  2-block model (trained here with the Train tab's recipe, on the copying pair).

- the exact cells against forward hooks written here (not the project's patching code), on
  the 10 largest cells of each map: <= 1e-5 of the logit difference (every cell of a small
  model: tests/test_patching.py).
"""
from __future__ import annotations

import argparse
import time

from _common import (OthersCPU, interleaved, median, paired_ratios, print_table,  # noqa: I001
                     verdict, wait_for_quiet)

import numpy as np
import torch

from explorer.book.config import GPT_CONFIG_124M, GPTConfig
from explorer.book.tokenizer import get_tokenizer
from explorer.probes.patching import TOP, estimate, exact_cells, make_pair
from explorer.runtime.build import build_model

HOOKS_TARGET = 1e-5
ESTIMATE_TARGET = 4.0
TOP_TARGET = 20.0
CLEAN = "When Mary and John went to the store, John gave a drink to"
CORRUPTED = "When Alice and Bob went to the store, Bob gave a drink to"


def ioi_pair(cfg):
    tok = get_tokenizer()
    return make_pair(cfg, tok.encode(CLEAN), tok.encode(CORRUPTED), tok.encode(" Mary"),
                     tok.encode(" John"), tok)


def costs(model, pair, repeats):
    ids = torch.tensor([pair.corrupted])

    def forward():
        with torch.inference_mode():
            model(ids)

    def estimated():
        estimate(model, pair)

    def top_exact():
        result = estimate(model, pair)
        heads = [c for c in result.order() if c[0] == "head"][:TOP]
        exact_cells(model, result, heads)

    per_round = 5

    def forwards():
        for _ in range(per_round):
            forward()
    with OthersCPU() as others:
        times = interleaved({"forward x5": forwards, "estimate": estimated,
                             "top": top_exact}, repeats)
    times["forward"] = [t / per_round for t in times.pop("forward x5")]
    ratios = paired_ratios(times, "forward")
    print(f"gpt2-small (random, fused), the indirect-object pair, T = {len(pair.clean)}, "
          f"{repeats} round(s); other processes used {others.share or 0:.0%} of the CPU")
    e, t = ratios["estimate"], ratios["top"]
    print_table([
        ["plain forward (every position's logits)", f"{median(times['forward']) * 1e3:.0f} ms",
         "1.0", ""],
        ["head map, estimated, every cell", f"{median(times['estimate']):.3f} s", f"{e:.2f}",
         f"<= 4: {verdict(e <= ESTIMATE_TARGET)}"],
        ["head map, top 10 made exact (with the estimate)", f"{median(times['top']):.3f} s",
         f"{t:.2f}", f"<= 20: {verdict(t <= TOP_TARGET)}"],
        ["residual map (12 x T), estimated (the same pass)",
         f"{median(times['estimate']):.3f} s", f"{e:.2f}",
         f"<= 4: {verdict(e <= ESTIMATE_TARGET)}"]],
        ["", "median", "forward passes' worth", "target"])


def agreement_table(name, model, pair):
    result = estimate(model, pair)
    free = result.n_exact
    started = time.perf_counter()
    exact_cells(model, result, result.cells())
    seconds = time.perf_counter() - started
    rows = []
    for which in ("head", "resid", None):
        a = result.agreement(which)
        label = {"head": "heads", "resid": "residual stream", None: "both maps"}[which]
        rows.append([label, str(a.cells), f"{a.spearman:+.3f}", f"{a.pearson:+.3f}",
                     f"{a.top_overlap}/{a.top}"])
    print(f"\n{name}: clean {result.clean_diff:+.3f}, corrupted {result.corrupted_diff:+.3f}; "
          f"first order misses the whole change by {result.miss:.0%} "
          f"({'every cell made exact' if result.nonlinear else 'top 10 of each map exact'} in "
          f"the app); {free} cells exact for free (the same values in both runs), the other "
          f"{len(result.cells()) - free} exact in {seconds:.1f} s")
    print_table(rows, ["cells", "compared", "Spearman", "Pearson", "top 10 overlap"])
    return result


def hooked_diff(model, pair, which, layer, col):
    """The logit difference of the corrupted prompt with one cell patched by forward hooks:
    a head's slice of out_proj's input, or the block's input at one position, taken from a
    run of the clean prompt."""
    block = model.trf_blocks[layer]
    module, hd, saved = block.att.out_proj if which == "head" else block, model.cfg.head_dim, {}
    part = (..., slice(col * hd, (col + 1) * hd)) if which == "head" else (slice(None), col)

    def keep(m, args):
        saved["v"] = args[0].detach().clone()

    def put(m, args):
        x = args[0].clone()
        x[part] = saved["v"][part]
        return (x, *args[1:])
    for hook, ids in ((keep, pair.clean), (put, pair.corrupted)):
        handle = module.register_forward_pre_hook(hook)
        with torch.inference_mode():
            logits = model(torch.tensor([list(ids)]))[0, -1]
        handle.remove()
    return float(logits[pair.right] - logits[pair.wrong])


def hooks_check(model, pair, result):
    cells = []
    for which in ("head", "resid"):
        exact = result.table(which, True)
        order = np.argsort(-np.abs(np.nan_to_num(exact)), axis=None)[:10]
        cells += [(which, *np.unravel_index(i, exact.shape)) for i in order]
    worst = max(abs(hooked_diff(model, pair, w, int(l), int(c))
                    - (result.table(w, True)[l, c] + result.corrupted_diff)) for w, l, c in cells)
    print(f"exact cells against forward hooks (the 10 largest of each map): max |difference| "
          f"{worst:.1e} of the logit difference; <= 1e-5: {verdict(worst <= HOOKS_TARGET)}")


def copying_model(steps):
    from explorer.runtime.training.copying_task import (COPYING_MODEL, COPYING_VARIANTS,
                                                        CopyingTask, copying_settings)
    from explorer.runtime.training.job import TrainingJob
    from explorer.runtime.training.setup import make_variants
    started = time.perf_counter()
    # the Train tab's own comparison (1 block, 2 blocks): the 2-block model the page uses
    job = TrainingJob(make_variants(COPYING_VARIANTS, COPYING_MODEL), CopyingTask(),
                      copying_settings(steps=steps))
    while not job.done:
        job.advance(50)
    print(f"\ncopying task, 2 blocks x 2 heads, trained {steps} steps in "
          f"{time.perf_counter() - started:.0f} s (the Train tab's comparison and recipe)")
    return job.trained_model(COPYING_VARIANTS.index("2 blocks")).model.eval()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--copying-steps", type=int, default=1000)
    parser.add_argument("--max-load", type=float, default=None)
    args = parser.parse_args()
    if args.max_load is not None:
        print(f"load average before timing: {wait_for_quiet(args.max_load):.2f}")
    cfg = GPTConfig.from_dict(GPT_CONFIG_124M)
    model = build_model(cfg, seed=123, device="cpu")
    pair = ioi_pair(cfg)
    costs(model, pair, args.repeats)
    result = agreement_table("gpt2-small, random weights, the indirect-object pair", model, pair)
    hooks_check(model, pair, result)

    from explorer.runtime.training.copying_task import CopyingTask, copying_pair, head_score_maps
    model = copying_model(args.copying_steps)
    tok = get_tokenizer()
    clean, corrupted, right, wrong = copying_pair(CopyingTask())
    pair = make_pair(model.cfg, tok.encode(clean), tok.encode(corrupted), tok.encode(right),
                     tok.encode(wrong), tok)
    result = agreement_table(f"copying task, the copying pair ({clean!r} / {corrupted!r}, "
                             f"{right!r} vs {wrong!r})", model, pair)
    hooks_check(model, pair, result)
    previous, induction = head_score_maps(model)
    layer, head = np.unravel_index(np.nanargmax(induction), induction.shape)
    p_layer, p_head = np.unravel_index(np.nanargmax(previous), previous.shape)
    shares = result.shares(result.head_exact)
    print(f"induction head {layer}.{head} (score {induction[layer, head]:.2f}) recovers "
          f"{shares[layer, head]:.0%}; previous-token head {p_layer}.{p_head} (score "
          f"{previous[p_layer, p_head]:.2f}) {shares[p_layer, p_head]:.0%}")
    print("head shares (exact):\n" + np.array2string(shares, precision=2))


if __name__ == "__main__":
    main()
