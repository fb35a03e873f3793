"""The copying task's default comparison against issue 34's targets.
Run: python bench/induction.py [--steps N]

The real app (``create_demo()``, in this process, as tests/test_train_app.py runs it) trains the
Train tab's "copying task (induction heads)" with its own comparison and settings
(``explorer.runtime.training.copying_task``: 1 block vs 2 blocks) through ``/train_start``, read by a
``gradio_client`` to the stream's last update. Then, from the job's recorded view and its
trained models:

- seconds from the call to the last point (the stream's last update) <= 60 on 2 cores;
- in the 2-block model: the repeated half's loss (validation sequences) < 1 nat; a head with
  an induction score >= 0.5 and one with a previous-token score >= 0.5 (the standard test
  prompt of ``explorer.probes.head_scores``, on the task's words);
- zeroing that induction head (``Importance.head_intervention`` inside ``intervening``) raises
  the repeated half's loss by >= 1 nat (the previous-token head's knock-out is shown too);
- in the 1-block model, no head reaches an induction score of 0.3 at any evaluation.
"""
from __future__ import annotations

import argparse
import os
import time

from _common import load_average, print_table, verdict  # first: the root on sys.path

import numpy as np
import torch

from explorer.app import shared
from explorer.app.server import create_demo
from explorer.app.tabs.train import COPYING
from explorer.book.copying import half_losses
from explorer.probes.intervening import intervening
from explorer.probes.knockouts import Importance
from explorer.runtime.training.copying_task import COPYING_VARIANTS, copying_settings, head_score_maps
from explorer.runtime.training.run import first_batches

SECONDS_TARGET = 60.0
REPEATED_TARGET = 1.0        # nats
HEAD_TARGET = 0.5
KNOCKOUT_TARGET = 1.0        # nats more on the repeated half
ONE_BLOCK_CEILING = 0.3


def repeated_loss(model, batches, knocked=None) -> float:
    inputs = torch.cat([x for x, _ in batches])
    targets = torch.cat([y for _, y in batches])
    with torch.no_grad(), intervening(model, [knocked] if knocked else []):
        return half_losses(model(inputs), inputs, targets)[1]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=None, help="instead of the task's steps")
    args = parser.parse_args()
    settings = copying_settings(**({"steps": args.steps} if args.steps else {}))
    print(f"{os.cpu_count()} cores, load average {load_average():.2f}")

    from gradio_client import Client
    demo = create_demo()
    _, url, _ = demo.launch(prevent_thread_lock=True, quiet=True, server_name="127.0.0.1",
                            server_port=None)
    client = Client(url, verbose=False, ssl_verify=False, download_files=False)
    started = time.perf_counter()
    job = client.submit(COPYING, "", None, list(COPYING_VARIANTS), "teach-tiny",
                        settings.steps, settings.batch_size, settings.context_length,
                        settings.lr, settings.warmup_steps, settings.eval_freq,
                        settings.eval_iter, api_name="/train_start")
    updates = sum(1 for _ in job)
    job.result()
    seconds = time.perf_counter() - started
    trained = shared.LAB.job(client.session_hash)
    view = trained.view()
    batches = first_batches(trained.val_loader, settings.eval_iter)

    rows, ok = [], True
    rows.append(["seconds, call -> last point", f"{seconds:.1f}", f"<= {SECONDS_TARGET:.0f}",
                 verdict(seconds <= SECONDS_TARGET)])
    ok &= seconds <= SECONDS_TARGET
    print(f"{updates} streamed updates; {view.step} steps; the job's own training time "
          f"{view.seconds:.1f} s")
    for index, run in enumerate(view.runs):
        model = trained.trained_model(index).model
        previous, induction = head_score_maps(model)
        print(f"\n{run.label}: eval steps {run.eval_steps}")
        for name in ("first_half_loss", "repeated_half_loss", "best_prev_token",
                     "best_induction"):
            print(f"  {name:18s} " + " ".join(f"{v:.2f}" for v in getattr(run, name)))
        if run.config["n_layers"] == 1:
            top = max(run.best_induction)
            rows.append([f"{run.label}: highest induction score, any evaluation",
                         f"{top:.2f}", f"< {ONE_BLOCK_CEILING}",
                         verdict(top < ONE_BLOCK_CEILING)])
            ok &= top < ONE_BLOCK_CEILING
            rows.append([f"{run.label}: repeated half's loss", f"{run.repeated_half_loss[-1]:.2f}",
                         "(the lesson: stays high)", ""])
            continue
        l_ind, h_ind = map(int, np.unravel_index(np.nanargmax(induction), induction.shape))
        l_prev, h_prev = map(int, np.unravel_index(np.nanargmax(previous), previous.shape))
        clean = repeated_loss(model, batches)
        without_ind = repeated_loss(model, batches, Importance.head_intervention(l_ind, h_ind))
        without_prev = repeated_loss(model, batches,
                                     Importance.head_intervention(l_prev, h_prev))
        checks = [
            ("repeated half's loss", f"{clean:.3f}", f"< {REPEATED_TARGET}",
             clean < REPEATED_TARGET),
            (f"induction head {l_ind}.{h_ind}", f"{induction[l_ind, h_ind]:.2f}",
             f">= {HEAD_TARGET}", induction[l_ind, h_ind] >= HEAD_TARGET),
            (f"previous-token head {l_prev}.{h_prev}", f"{previous[l_prev, h_prev]:.2f}",
             f">= {HEAD_TARGET}", previous[l_prev, h_prev] >= HEAD_TARGET),
            (f"repeated half, head {l_ind}.{h_ind} zeroed (+ nats)",
             f"{without_ind:.2f} (+{without_ind - clean:.2f})", f"+ >= {KNOCKOUT_TARGET}",
             without_ind - clean >= KNOCKOUT_TARGET),
        ]
        for what, got, target, passed in checks:
            rows.append([f"{run.label}: {what}", got, target, verdict(passed)])
            ok &= bool(passed)
        rows.append([f"{run.label}: repeated half, head {l_prev}.{h_prev} zeroed",
                     f"{without_prev:.2f} (+{without_prev - clean:.2f})", "(shown)", ""])
        rows.append([f"{run.label}: first half's loss", f"{run.first_half_loss[-1]:.2f}",
                     f"(ln {run.config['vocab_size']} = "
                     f"{np.log(run.config['vocab_size']):.2f})", ""])
    print()
    print_table(rows, ["", "measured", "target", ""])
    client.close()
    demo.close()
    raise SystemExit(0 if ok else 1)


if __name__ == "__main__":
    main()
