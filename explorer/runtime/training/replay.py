"""Replay a finished training job: its view as it was at an earlier step, from what the job
recorded (every evaluation point, every recorded gradient step), for a class that was not
watching the first time."""
from __future__ import annotations

import bisect
from dataclasses import fields, replace

from .views import JobView, RunView


def view_at(view: JobView, step: int) -> JobView:
    """``view`` cut back to ``step``: each run's series keep their points up to that step
    (the ``grad_`` lists with ``grad_steps``; any other list as long as ``eval_steps``
    was recorded at the evaluations, and is cut with them), the sample
    shows once it had been drawn, and the tokens seen follow the step. (The last batch's loss
    was not recorded at each step: the loss "now" is the last evaluation's.)"""
    step = max(0, min(int(step), view.step))
    if step == view.step:
        return view
    share = step / view.step if view.step else 0.0
    return replace(view, step=step, tokens_seen=round(view.tokens_seen * share),
                   seconds=view.seconds * share, message="",
                   runs=[_run_at(run, step, share) for run in view.runs])


def _run_at(run: RunView, step: int, share: float) -> RunView:
    # eval_steps and grad_steps count from 0 (the first step is step 0): after ``step`` steps,
    # those below it had been recorded
    kept_evals = bisect.bisect_left(run.eval_steps, step)
    kept_grads = bisect.bisect_left(run.grad_steps, step)
    changes = {}
    for f in fields(run):
        value = getattr(run, f.name)
        if not isinstance(value, list):
            continue
        if f.name.startswith("grad_"):
            changes[f.name] = value[:kept_grads]
        elif len(value) == len(run.eval_steps):
            changes[f.name] = value[:kept_evals]
    shown = run.sample_step is not None and run.sample_step <= step
    diverged = run.diverged_at is not None and run.diverged_at <= step
    train_losses = changes.get("train_losses", run.train_losses)
    val_losses = changes.get("val_losses", run.val_losses)
    return replace(run, **changes, tokens_seen=round(run.tokens_seen * share),
                   train_loss_now=train_losses[-1] if train_losses else None,
                   val_loss_now=val_losses[-1] if val_losses else None,
                   sample=run.sample if shown else "",
                   sample_step=run.sample_step if shown else None,
                   diverged=diverged, diverged_at=run.diverged_at if diverged else None,
                   note=run.note if diverged else "")


def replay_steps(total_steps: int, frames: int) -> list[int]:
    """The steps a replay of ``frames`` frames shows, rising to ``total_steps`` (no repeats)."""
    frames = max(1, frames)
    steps = sorted({round(total_steps * (i + 1) / frames) for i in range(frames)})
    return [s for s in steps if s > 0] or [total_steps]


def replay_views(view: JobView, frames: int):
    """A finished job's ``view`` drawn again in ``frames`` frames: each earlier step's view,
    its status "replaying", then ``view`` itself."""
    for step in replay_steps(view.step, frames):
        yield view if step == view.step else replace(view_at(view, step), status="replaying")
