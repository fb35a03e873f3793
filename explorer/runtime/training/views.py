"""The training lab's plain data for the page: a job's view, each variant's, a trained
variant handed out as a model and its caption, and how often a stream of a view is redrawn."""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Callable

from ...book.errors import Message
from ...book.model import GPTModel
from .setup import VARIANT_LABELS


@dataclass
class RunView:
    """One variant's live data."""

    label: str
    config: dict
    parameters: int
    tokens_seen: int
    train_loss_now: float | None     # the last training batch's loss
    val_loss_now: float | None       # the last evaluation's validation loss
    seconds_per_step: float | None   # forward + backward + AdamW, this variant alone
    diverged: bool
    diverged_at: int | None          # the step whose loss or gradients were NaN or infinite
    note: str                        # what happened, in words ("" while all is well)
    eval_steps: list[int]            # the book's evaluation points ...
    eval_tokens: list[int]           # ... tokens seen there ...
    train_losses: list[float]        # ... and the losses averaged over eval_iter batches
    val_losses: list[float]
    grad_steps: list[int]            # steps at which gradient norms were recorded
    grad_norms: list[list[float]]    # [recorded step][block]: L2 norm of the block's gradient
    sample: str                      # the latest greedy sample from the start context
    sample_step: int | None
    # The copying task's measurements, one per evaluation (at eval_steps); empty for a text.
    first_half_loss: list[float] = field(default_factory=list)     # nats, validation data
    repeated_half_loss: list[float] = field(default_factory=list)  # nats, validation data
    best_prev_token: list[float] = field(default_factory=list)     # best head's score, 0 to 1
    best_induction: list[float] = field(default_factory=list)      # best head's score, 0 to 1


@dataclass
class JobView:
    status: str            # "ready", "running", "stopped", "finished", "cancelled", "failed"
    message: str
    step: int              # steps done
    total_steps: int
    tokens_seen: int       # per variant (they all see the same batches)
    total_tokens: int
    epoch: int             # epochs completed
    batches_per_epoch: int
    corpus: str
    seconds: float         # time spent training so far
    runs: list[RunView] = field(default_factory=list)
    caption: str = ""      # what the data is, when it is not a text (the copying task)
    where: object = None   # where the last steps ran, where a GPU could: a Message


@dataclass
class TrainedModel:
    """A trained variant handed out as a model like any other: a GPTModel in eval mode with
    gradients off, a copy that later training does not change."""

    model: GPTModel
    weights_source: str    # "trained N steps on <corpus>"
    label: str
    steps: int


def trained_caption(trained, corpus: str) -> Message:
    """Where a trained variant's weights come from (``trained``: a ``TrainedModel``)."""
    variant = VARIANT_LABELS.get(trained.label, trained.label)
    if trained.steps == 1:
        return Message("train.caption_one", "trained {steps} step on {corpus} ({variant})",
                       steps=1, corpus=corpus, variant=variant)
    return Message("train.caption", "trained {steps} steps on {corpus} ({variant})",
                   steps=trained.steps, corpus=corpus, variant=variant)


@dataclass
class Redraws:
    """What a stream of a job's view sends at each look (``redraw``): nothing while the
    drawing is the one last sent; the whole view (its figures redrawn, most of what an update
    costs the page) when the job no longer runs, when what the drawing says changed (the
    first three of ``seen``: status, sharing line, view settings) or ``every`` seconds after
    the last whole one; else the progress line alone."""

    every: float
    clock: Callable[[], float] = time.monotonic
    _sent: tuple | None = field(default=None, init=False)
    _whole: tuple | None = field(default=None, init=False)
    _whole_at: float = field(default=-math.inf, init=False)

    def redraw(self, seen: tuple, running: bool) -> str | None:
        """What to send of the drawing ``seen``: "whole", "progress" or None (nothing)."""
        if seen == self._sent:
            return None
        self._sent = seen
        if (not running or self._whole is None or seen[:3] != self._whole[:3]
                or self.clock() - self._whole_at >= self.every):
            self._whole, self._whole_at = seen, self.clock()
            return "whole"
        return "progress"
