"""The training lab's plain data for the page: a job's view, each variant's, and a trained
variant handed out as a model."""
from __future__ import annotations

from dataclasses import dataclass, field

from ...book.model import GPTModel


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
