"""One variant in training (its model, optimizer, random stream and records), and how the lab
measures it: the book's ``calc_loss_loader`` and ``generate_sample``, faster, with the same
numbers."""
from __future__ import annotations

from contextlib import contextmanager

import torch
import torch.nn.functional as F

from ...book.config import GPTConfig
from ...book.fast import fuse
from ...book.generate import generate_steps
from ...book.model import GPTModel
from ...book.seeding import RandomStream, seeded
from .setup import Variant
from .views import RunView

# Positions per output-head product when evaluating: (32, 50,257) logits (6.4 MB) reuse the
# memory of the slice before; a whole batch's (B*T, 50,257) logits (25.7 MB by default) are
# fresh pages, which the OS maps and zeroes for every batch.
EVAL_HEAD_POSITIONS = 32


class VariantRun:
    """One variant in training: its model, optimizer, random stream and records."""

    def __init__(self, variant: Variant, config: GPTConfig, settings, device):
        with seeded(settings.seed):
            model = GPTModel(config)          # the book: torch.manual_seed(123); GPTModel(cfg)
            self.rng = RandomStream.current(device)
        self.model = fuse(model).to(device).train()
        self.optimizer = adamw(self.model, settings)
        self.label = variant.label
        self.config = config
        self.parameters = sum(p.numel() for p in self.model.parameters())
        self.tokens_seen = 0
        self.train_loss_now = None
        self.seconds = 0.0
        self.steps = 0
        self.diverged_at = None
        self.note = ""
        self.eval_steps, self.eval_tokens, self.train_losses, self.val_losses = [], [], [], []
        self.grad_steps, self.grad_norms = [], []
        self.sample, self.sample_step = "", None
        self.first_half_loss, self.repeated_half_loss = [], []
        self.best_prev_token, self.best_induction = [], []
        self.batches = None    # this epoch's iterator over the training loader

    def to(self, device: torch.device, seed: int) -> None:
        """The model, AdamW's state and the random stream on ``device``."""
        self.model.to(device)
        # AdamW keeps its step count on the CPU unless its kernel is fused (or capturable).
        on_device = self.optimizer.defaults.get("fused") or \
            self.optimizer.defaults.get("capturable")
        for state in self.optimizer.state.values():
            for name, value in state.items():
                if torch.is_tensor(value) and (name != "step" or on_device):
                    state[name] = value.to(device)
        if device.type == "cuda" and self.rng.cuda_state is None:
            # Dropout on a GPU draws from CUDA's generator: a stream of its own, from the seed.
            torch.cuda.manual_seed(seed)
            self.rng.cuda_state = torch.cuda.get_rng_state(device)

    def view(self) -> RunView:
        return RunView(
            label=self.label, config=self.config.to_dict(), parameters=self.parameters,
            tokens_seen=self.tokens_seen, train_loss_now=self.train_loss_now,
            val_loss_now=self.val_losses[-1] if self.val_losses else None,
            seconds_per_step=self.seconds / self.steps if self.steps else None,
            diverged=self.diverged_at is not None, diverged_at=self.diverged_at,
            note=self.note, eval_steps=list(self.eval_steps),
            eval_tokens=list(self.eval_tokens), train_losses=list(self.train_losses),
            val_losses=list(self.val_losses), grad_steps=list(self.grad_steps),
            grad_norms=[list(r) for r in self.grad_norms], sample=self.sample,
            sample_step=self.sample_step, first_half_loss=list(self.first_half_loss),
            repeated_half_loss=list(self.repeated_half_loss),
            best_prev_token=list(self.best_prev_token), best_induction=list(self.best_induction))

    def record_copying(self, first_half, repeated_half, prev_token, induction) -> None:
        """The copying task's measurements at an evaluation (``copying_task.measure``)."""
        self.first_half_loss.append(first_half)
        self.repeated_half_loss.append(repeated_half)
        self.best_prev_token.append(prev_token)
        self.best_induction.append(induction)


@contextmanager
def one_thread():
    """A training step on one torch thread (this thread only): a teaching model's step is
    many small operations, as fast on one core, and the other core stays free for the page
    and the other sessions. Whichever thread trains, the numbers are the same."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


class AdamW(torch.optim.AdamW):
    """torch.optim.AdamW, whose step asks no GPU anything while the weights are on the CPU.

    Every step of Adam(W) first checks that no CUDA graph is being captured with a
    non-capturable optimizer (``Optimizer._accelerator_graph_capture_health_check``). In
    torch 2.11 (the newest ZeroGPU lists) that check asks ``torch.cuda.is_available()`` and
    then ``torch.cuda.is_current_stream_capturing()``. On a ZeroGPU Space the ``spaces`` client
    makes ``torch.cuda.is_available()`` say True in the server process, where no CUDA may start
    (it swaps ``torch._C._cuda_init`` for one that raises). So the step called into the CUDA
    runtime there, and a lab run trained on the CPU failed at its first step (tests/
    test_zerogpu.py, on torch 2.11's wheel). (torch 2.13 asks ``torch.accelerator``, which the
    client does not patch.) No graph can be captured with weights on the CPU, so the check is
    skipped for them. Overriding it is the smallest way: torch has no public switch for it.
    Its name is private, so tests/test_training.py holds the behaviour: a CPU step under a
    CUDA that claims to be there makes no CUDA call."""

    def _accelerator_graph_capture_health_check(self) -> None:
        if any(p.device.type != "cpu" for group in self.param_groups for p in group["params"]):
            super()._accelerator_graph_capture_health_check()


def adamw(model, settings):
    """The book's optimizer, torch.optim.AdamW(lr, weight_decay), in PyTorch's fused kernel
    where this PyTorch has one for the device (the same update, one pass over the weights)."""
    try:
        return AdamW(model.parameters(), lr=settings.lr,
                     weight_decay=settings.weight_decay, fused=True)
    except (RuntimeError, ValueError):
        return AdamW(model.parameters(), lr=settings.lr, weight_decay=settings.weight_decay)


def block_grad_norms(model) -> list[float]:
    """Each block's gradient norm: the L2 norm of all its parameters' gradients as one
    vector (0.0 for a block without gradients)."""
    return [float(torch.nn.utils.get_total_norm([p.grad for p in block.parameters()
                                                  if p.grad is not None]))
            for block in model.trf_blocks]


def greedy_sample(model, tokenizer, start_context, max_new_tokens) -> str:
    """The book's ``generate_sample`` (greedy, ``max_new_tokens`` after the start context),
    with the KV cache and the output head at the last position only: the same text (a test
    checks it), without recomputing the whole window for every token."""
    ids = tokenizer.encode(start_context, allow_special=True)
    model.eval()
    with torch.no_grad():
        new = [s.token_id for s in generate_steps(model, ids, max_new_tokens, show_top=1,
                                                  tokenizer=tokenizer)]
    model.train()
    return tokenizer.decode(ids + new).replace("\n", " ")


def first_batches(loader, n):
    """The batches the book's ``calc_loss_loader(loader, num_batches=n)`` uses, iterated its
    way (so that the shuffles draw the same numbers)."""
    n = min(n, len(loader))
    batches = []
    for i, batch in enumerate(loader):
        if i < n:
            batches.append(batch)
        else:
            break
    return batches


def mean_loss(batches, model, device):
    """The book's ``calc_loss_loader`` over ``batches``: the mean of each batch's
    ``calc_loss_batch``, the same numbers within float rounding. Faster: ``GPTModel.forward``
    runs in two parts, its blocks once for all batches stacked, then its final norm and output
    head (with the loss) ``EVAL_HEAD_POSITIONS`` positions at a time. Call it under
    ``torch.no_grad()``. Targets of -100 (padding: ``explorer.book.copying``) count for nothing,
    as in ``calc_loss_batch``."""
    if not batches:
        return float("nan")
    n = EVAL_HEAD_POSITIONS
    inputs = torch.cat([x for x, _ in batches]).to(device)               # (sequences, T)
    targets = torch.cat([y for _, y in batches]).to(device).flatten()     # (positions,)
    hidden = model.final_norm(model(inputs, stop_at_layer=model.cfg.n_layers)).flatten(0, 1)
    losses = torch.cat([F.cross_entropy(model.out_head(hidden[i:i + n]), targets[i:i + n],
                                        reduction="none")
                        for i in range(0, len(targets), n)])              # (positions,)
    sizes = [y.numel() for _, y in batches]
    counted = (targets != -100).split(sizes)      # cross_entropy's ignore_index
    per_batch = [part.sum() / kept.sum() for part, kept in zip(losses.split(sizes), counted)]
    return sum(torch.stack(per_batch).tolist()) / len(batches)
