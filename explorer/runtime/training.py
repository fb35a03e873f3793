"""The training lab: two to four of the chapter's variants trained side by side, as chapter 5
trains one, with live plain data for the page (loss curves, a table, per-block gradient norms,
samples), Stop and Continue, and limits so that many sessions can share one server.

How the lab keeps the book's numbers: every variant is built right after
``torch.manual_seed(seed)`` and draws from its own copy of the generator that seed left behind
(``RandomStream``) everything the book's loop draws from the global one: its dropout masks and
the shuffles of ``iter(train_loader)`` and of ``evaluate_model``. So each variant's stream runs
exactly as the book's loop would run for it alone, and with the book's settings the lab's losses
are the book's. All variants train and evaluate on the batches the first variant's stream drew:
the same batches, in the same order. A stream is put in place (under the lock of ``seeded``)
only around the code that draws from it, so concurrent jobs never mix their numbers, and a
job's result does not depend on what else runs on the server. (The cost: two jobs' training
steps take turns rather than overlap; on a 2-core machine they would compete anyway.)

Where the lab is faster than the book's loop (same numbers within float rounding): fused
LayerNorm, GELU and attention (``explorer.book.fast``; attention falls back to the book's
explicit steps while dropout is active), PyTorch's fused AdamW, and an evaluation that runs the
blocks once over all its batches and the output head a slice of positions at a time
(``_mean_loss``).
"""
from __future__ import annotations

import copy
import math
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F

from ..book.config import GPTConfig, count_parameters, get_preset
from ..book.fast import fuse
from ..book.generate import generate_steps
from ..book.model import GPTModel
from ..book.seeding import RandomStream, seeded
from ..book.tokenizer import N_VOCAB, get_tokenizer
from ..book.training import (BOOK_SETTINGS, SAMPLE_TOKENS, TRAIN_RATIO, calc_loss_batch,
                             check_training_text, create_dataloader_v1, split_text)
from .build import resolve_device
from .cache import default_budget_bytes

# ---------------------------------------------------------------------------------------------
# Settings (one source of truth; the environment variables are for the server's operator)
MAX_JOBS_ENV = "GPT_EXPLORER_TRAIN_JOBS"                  # training jobs running at once
MAX_WORK_ENV = "GPT_EXPLORER_TRAIN_MAX_PARAM_STEPS"       # parameters x steps, all variants
DEFAULT_MAX_JOBS = 2
DEFAULT_MAX_PARAM_STEPS = 2e10    # the default comparison is ~4.2e9; GPT-2 small x 120 steps
MAX_CORPUS_BYTES = 1_000_000      # an uploaded or pasted text (tokenising 1 MB takes ~0.5 s)
MAX_VARIANTS = 4
CORPUS_DIR = Path(__file__).resolve().parents[2] / "assets" / "corpus"
DEFAULT_CORPUS_FILE = "the_clockmakers_daughter.txt"
DEFAULT_CORPUS_NAME = "The Clockmaker's Daughter"
GRAD_NORM_POINTS = 200            # at most this many steps of gradient norms per variant
# Positions per output-head product when evaluating: (32, 50,257) logits (6.4 MB) reuse the
# memory of the slice before; a whole batch's (B*T, 50,257) logits (25.7 MB by default) are
# fresh pages, which the OS maps and zeroes for every batch.
EVAL_HEAD_POSITIONS = 32

# The variants the lab offers: a label and the knobs it changes from the base preset.
VARIANT_CHOICES: dict[str, dict] = {
    "pre-LN (book)": {},
    "post-LN": {"norm_placement": "post"},
    "no shortcut": {"shortcut": False},
    "no LayerNorm": {"norm_placement": "none"},
    "ReLU": {"activation": "relu"},
    "GELU exact": {"activation": "gelu_exact"},
    "SiLU": {"activation": "silu"},
    "expansion 2": {"ff_expansion": 2},
    "expansion 8": {"ff_expansion": 8},
    "tied weights": {"tie_weights": True},
    "RoPE": {"pos_encoding": "rope"},
}
DEFAULT_PRESET = "teach-deep"   # 12 blocks: the shortcut lesson of section 4.4 shows best
DEFAULT_VARIANTS = ("pre-LN (book)", "post-LN", "no shortcut")


def _env_number(name, default, kind=float):
    value = os.environ.get(name, "").strip()
    if not value:
        return default
    try:
        number = kind(float(value)) if kind is int else float(value)
    except ValueError:
        raise ValueError(f"{name} must be a number (got {value!r}).") from None
    if not (math.isfinite(number) and number > 0):
        raise ValueError(f"{name} must be a positive number (got {value!r}).")
    return number


# ---------------------------------------------------------------------------------------------
# Data
@dataclass(frozen=True)
class Corpus:
    """A text to train on and the name the page shows ("trained N steps on <name>")."""

    name: str
    text: str


def default_corpus() -> Corpus:
    text = (CORPUS_DIR / DEFAULT_CORPUS_FILE).read_text(encoding="utf-8")
    return Corpus(DEFAULT_CORPUS_NAME, text)


def corpus_from_text(text, name: str = "pasted text",
                     max_bytes: int = MAX_CORPUS_BYTES) -> Corpus:
    """A pasted text. Empty, oversized or non-text input gets a ValueError to act on."""
    if not isinstance(text, str):
        raise ValueError(f"The training text must be a string, got {type(text).__name__}.")
    size = len(text.encode("utf-8", errors="surrogatepass"))
    if size > max_bytes:
        raise ValueError(f"The text is {size:,} bytes; the lab trains on at most "
                         f"{max_bytes:,} bytes. Paste a shorter part of it.")
    if not text.strip():
        raise ValueError("The training text is empty: paste some text, upload a .txt file, or "
                         "use the default story.")
    if "\x00" in text:
        raise ValueError("The text contains NUL characters, which plain text never has: is it "
                         "a binary file? Give plain text (.txt, UTF-8).")
    return Corpus(name, text)


def corpus_from_file(path, max_bytes: int = MAX_CORPUS_BYTES) -> Corpus:
    """An uploaded ``.txt`` file: its size is checked before it is read."""
    path = Path(path)
    if path.suffix.lower() != ".txt":
        raise ValueError(f"The lab trains on plain-text files ending in .txt; "
                         f"'{path.name}' is not one.")
    try:
        size = path.stat().st_size
    except OSError:
        raise ValueError(f"The file '{path.name}' could not be read; upload it again.") from None
    if size > max_bytes:
        raise ValueError(f"'{path.name}' is {size:,} bytes; the lab trains on at most "
                         f"{max_bytes:,} bytes. Upload a shorter text.")
    raw = path.read_bytes()
    if b"\x00" in raw:
        raise ValueError(f"'{path.name}' looks like a binary file (it contains NUL bytes), "
                         f"not plain text. Save it as a .txt file (UTF-8) and upload that.")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise ValueError(f"'{path.name}' is not UTF-8 text (byte {e.start} cannot be read). "
                         f"Save it as UTF-8 and upload it again.") from None
    return corpus_from_text(text, name=path.name, max_bytes=max_bytes)


# ---------------------------------------------------------------------------------------------
# What to train, and how
@dataclass(frozen=True)
class Variant:
    label: str
    config: GPTConfig


def make_variants(names=DEFAULT_VARIANTS, preset: str = DEFAULT_PRESET) -> list[Variant]:
    """The named variants of ``VARIANT_CHOICES`` built on one preset."""
    base = get_preset(preset) if isinstance(preset, str) else GPTConfig.from_dict(preset)
    names = list(names)
    twice = next((name for name in names if names.count(name) > 1), None)
    if twice is not None:   # (their curves would be one curve, and "Use" could not tell them)
        raise ValueError(f"Each variant can be trained once, but '{twice}' is chosen "
                         f"{names.count(twice)} times: choose different variants.")
    for name in names:
        if name not in VARIANT_CHOICES:
            raise ValueError(f"Unknown variant '{name}'. Variants: "
                             f"{', '.join(VARIANT_CHOICES)}.")
    return [Variant(name, base.replace(**VARIANT_CHOICES[name])) for name in names]


def _as_count(name, value, low=1):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (
            isinstance(value, float) and (not math.isfinite(value) or value != int(value))):
        raise ValueError(f"{name} must be a whole number (got {value!r}).")
    if value < low:
        raise ValueError(f"{name} must be at least {low} (got {value!r}).")
    return int(value)


@dataclass(frozen=True)
class TrainingSettings:
    """The book's settings by default (section 5.2), with ``steps`` instead of epochs."""

    steps: int = 200
    batch_size: int = BOOK_SETTINGS["batch_size"]
    context_length: int | None = None    # window = stride (the book); None: the variants' own
    lr: float = BOOK_SETTINGS["lr"]
    warmup_steps: int = 0                # linear warm-up of the learning rate (0: the book)
    weight_decay: float = BOOK_SETTINGS["weight_decay"]
    eval_freq: int = BOOK_SETTINGS["eval_freq"]
    eval_iter: int = BOOK_SETTINGS["eval_iter"]
    seed: int = BOOK_SETTINGS["seed"]
    start_context: str = BOOK_SETTINGS["start_context"]
    sample_tokens: int = SAMPLE_TOKENS   # greedy tokens after the start context (the book: 50)

    def __post_init__(self):
        for name in ("steps", "batch_size", "eval_freq", "eval_iter"):
            object.__setattr__(self, name, _as_count(name, getattr(self, name)))
        for name in ("warmup_steps", "sample_tokens"):
            object.__setattr__(self, name, _as_count(name, getattr(self, name), 0))
        if self.context_length is not None:
            object.__setattr__(self, "context_length",
                               _as_count("context_length", self.context_length, 2))
        for name in ("lr", "weight_decay"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) \
                    or not math.isfinite(value) or value < 0 or (name == "lr" and value == 0):
                raise ValueError(f"{name} must be a positive number; the book uses "
                                 f"{BOOK_SETTINGS[name]} (got {value!r}).")
            object.__setattr__(self, name, float(value))
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) \
                or not 0 <= self.seed < 2 ** 63:
            raise ValueError(f"seed must be a whole number ≥ 0 (got {self.seed!r}).")
        if not isinstance(self.start_context, str) or not self.start_context.strip():
            raise ValueError("The start context of the samples must be some text, such as the "
                             "book's 'Every effort moves you'.")

    def lr_at(self, step: int) -> float:
        """The learning rate of step ``step`` (0-based)."""
        if self.warmup_steps and step < self.warmup_steps:
            return self.lr * (step + 1) / self.warmup_steps
        return self.lr


# The default comparison: the book's settings, 200 steps, a 64-token window (the preset's 128
# would double the time; see bench/README.md).
DEFAULT_STEPS = 200
DEFAULT_CONTEXT = 64


def default_settings(**changes) -> TrainingSettings:
    return TrainingSettings(**{"steps": DEFAULT_STEPS, "context_length": DEFAULT_CONTEXT,
                               **changes})


def _check_variants(variants) -> list[Variant]:
    variants = list(variants)
    if not 1 <= len(variants) <= MAX_VARIANTS:
        raise ValueError(f"Choose one to {MAX_VARIANTS} variants to train side by side "
                         f"(got {len(variants)}).")
    out = []
    for v in variants:
        if not isinstance(v, Variant):
            raise ValueError("Each variant must be a Variant(label, config); make_variants() "
                             "builds them from names.")
        config = GPTConfig.from_dict(v.config)
        if config.vocab_size < N_VOCAB:
            raise ValueError(
                f"Variant '{v.label}' has vocab_size {config.vocab_size}, but the lab trains on "
                f"GPT-2 tokens (ids up to {N_VOCAB - 1}): use vocab_size {N_VOCAB}.")
        out.append(Variant(str(v.label), config))
    return out


def window_of(variants, settings: TrainingSettings) -> int:
    """The training window (max_length = stride): the setting, else the variants' shortest
    context_length."""
    return settings.context_length or min(v.config.context_length for v in variants)


def job_configs(variants, settings) -> list[GPTConfig]:
    """The configs actually built: every variant with the training window as its context."""
    if settings.context_length is None:
        return [v.config for v in variants]
    return [v.config.replace(context_length=settings.context_length) for v in variants]


def param_steps(variants, settings) -> int:
    """The size of a job as the lab limits it: parameters x steps, summed over variants."""
    return sum(count_parameters(c).total for c in job_configs(variants, settings)) \
        * settings.steps


def job_bytes(variants, settings) -> int:
    """Memory a job holds while it trains, estimated: weights, gradients and AdamW's two
    moments (4 x the weights), plus the activations of one batch kept for the backward pass."""
    window = window_of(variants, settings)
    tokens = settings.batch_size * window
    total = 0
    for c in job_configs(variants, settings):
        weights = count_parameters(c).total * 4
        per_layer = tokens * c.emb_dim * (12 + 2 * c.ff_expansion) \
            + 3 * settings.batch_size * c.n_heads * window * window
        activations = 4 * (c.n_layers * per_layer + 3 * tokens * c.vocab_size)
        total += 4 * weights + activations
    return total


# ---------------------------------------------------------------------------------------------
# Plain data for the page
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


@dataclass
class TrainedModel:
    """A trained variant handed out as a model like any other: a GPTModel in eval mode with
    gradients off, a copy that later training does not change."""

    model: GPTModel
    weights_source: str    # "trained N steps on <corpus>"
    label: str
    steps: int


# ---------------------------------------------------------------------------------------------
class _Run:
    """One variant in training: its model, optimizer, random stream and records."""

    def __init__(self, variant: Variant, config: GPTConfig, settings, device):
        with seeded(settings.seed):
            model = GPTModel(config)          # the book: torch.manual_seed(123); GPTModel(cfg)
            self.rng = RandomStream.current(device)
        self.model = fuse(model).to(device).train()
        self.optimizer = _adamw(self.model, settings)
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
        self.batches = None    # this epoch's iterator over the training loader

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
            sample_step=self.sample_step)


def _adamw(model, settings):
    """The book's optimizer, torch.optim.AdamW(lr, weight_decay), in PyTorch's fused kernel
    where this PyTorch has one for the device (the same update, one pass over the weights)."""
    try:
        return torch.optim.AdamW(model.parameters(), lr=settings.lr,
                                 weight_decay=settings.weight_decay, fused=True)
    except (RuntimeError, ValueError):
        return torch.optim.AdamW(model.parameters(), lr=settings.lr,
                                 weight_decay=settings.weight_decay)


def _block_grad_norms(model) -> list[float]:
    """Each block's gradient norm: the L2 norm of all its parameters' gradients as one
    vector (0.0 for a block without gradients)."""
    return [float(torch.nn.utils.get_total_norm([p.grad for p in block.parameters()
                                                  if p.grad is not None]))
            for block in model.trf_blocks]


class TrainingJob:
    """Variants trained side by side on one corpus. ``advance(n)`` trains n steps in the
    caller's thread; ``start`` / ``stop`` / ``resume`` / ``cancel`` run it in a worker thread.
    ``view()`` is the plain data the page shows, safe to call at any time."""

    def __init__(self, variants, corpus: Corpus, settings: TrainingSettings | None = None,
                 device: str = "cpu"):
        settings = settings or default_settings()
        if not isinstance(settings, TrainingSettings):
            raise ValueError("settings must be a TrainingSettings.")
        if not isinstance(corpus, Corpus):
            raise ValueError("corpus must be a Corpus: default_corpus(), corpus_from_text() or "
                             "corpus_from_file().")
        variants = _check_variants(variants)
        self.device = resolve_device(device) if isinstance(device, str) else torch.device(device)
        self.settings, self.corpus, self.variants = settings, corpus, variants
        self.window = window_of(variants, settings)
        configs = job_configs(variants, settings)
        tokenizer = self.tokenizer = get_tokenizer()
        self.batches_per_epoch, _ = check_training_text(
            corpus.text, self.window, self.window, settings.batch_size, TRAIN_RATIO, tokenizer)
        train_data, val_data = split_text(corpus.text, TRAIN_RATIO)
        # The book's loaders (section 5.1.3): stride = max_length, shuffled training batches.
        self.train_loader = create_dataloader_v1(
            train_data, batch_size=settings.batch_size, max_length=self.window,
            stride=self.window, drop_last=True, shuffle=True, num_workers=0, tokenizer=tokenizer)
        self.val_loader = create_dataloader_v1(
            val_data, batch_size=settings.batch_size, max_length=self.window,
            stride=self.window, drop_last=False, shuffle=False, num_workers=0,
            tokenizer=tokenizer)
        self.runs = [_Run(v, c, settings, self.device) for v, c in zip(variants, configs)]
        self.grad_every = max(1, math.ceil(settings.steps / GRAD_NORM_POINTS))

        self.global_step = -1        # the book's counter: the last step done
        self.epoch = 0
        self.seconds = 0.0
        self.status, self.message = "ready", ""
        self.released = False        # the models given up for another job (release_models)
        self.ended_at = None         # when it finished, for the lab's choice of what to free
        self._view_lock = threading.Lock()   # records <-> view()
        self._step_lock = threading.Lock()   # one step at a time; models whole between steps
        self._stop = threading.Event()
        self._thread = None

    # -- the loop ----------------------------------------------------------------------------
    @property
    def steps_done(self) -> int:
        return self.global_step + 1

    @property
    def done(self) -> bool:
        return self.steps_done >= self.settings.steps or all(
            r.diverged_at is not None for r in self.runs)

    def advance(self, n: int = 1) -> TrainingJob:
        """Train up to ``n`` more steps in this thread (fewer if the job ends)."""
        n = _as_count("n", n, 0)
        if self._thread is not None and self._thread.is_alive():
            raise ValueError("This job is training in the background; stop it first.")
        if self.status in ("cancelled", "failed"):
            raise ValueError(f"This job was {self.status}; start a new one.")
        for _ in range(n):
            if self.done:
                break
            self._one_step()
        if self.done:
            self._finish()
        elif self.steps_done:
            with self._view_lock:
                self.status = "stopped"
        return self

    def _one_step(self):
        with self._step_lock:
            started = time.perf_counter()
            batch = None
            while batch is None:
                batch = self._next_batch()
                if batch is None:     # end of an epoch: the book's sample, then a new shuffle
                    self.epoch += 1
                    self._samples()
            input_batch, target_batch = batch
            step = self.global_step + 1
            record_grads = step % self.grad_every == 0
            for run in self.runs:
                if run.diverged_at is None:
                    self._train_step(run, step, input_batch, target_batch, record_grads)
            self.global_step = step
            # Optional evaluation step (the book's): also at the last step, for the table.
            if step % self.settings.eval_freq == 0 or step + 1 == self.settings.steps:
                self._evaluate(step)
            self.seconds += time.perf_counter() - started

    def _next_batch(self):
        """The next training batch, or None at the end of an epoch. Every variant iterates the
        loader in its own stream, as the book's loop would for it alone (so that its dropout
        masks are the book's); all train on the first variant's batches."""
        batches = []
        for run in self._live_runs(lead=True):
            with run.rng.active(self.device):
                if run.batches is None:
                    run.batches = iter(self.train_loader)
                batches.append(next(run.batches, None))
                if batches[-1] is None:
                    run.batches = None
        return batches[0]

    def _live_runs(self, lead=False):
        """The variants still training (and the first one, which draws the data, if
        ``lead``)."""
        return [r for i, r in enumerate(self.runs)
                if r.diverged_at is None or (lead and i == 0)]

    def _train_step(self, run: _Run, step, input_batch, target_batch, record_grads):
        started = time.perf_counter()
        for group in run.optimizer.param_groups:
            group["lr"] = self.settings.lr_at(step)
        with run.rng.active(self.device):   # its dropout masks, drawn as the book's model does
            run.optimizer.zero_grad()
            loss = calc_loss_batch(input_batch, target_batch, run.model, self.device)
            loss.backward()
        loss_value = loss.item()
        norms = _block_grad_norms(run.model) if record_grads else None
        bad = not math.isfinite(loss_value) or (norms is not None and not all(
            math.isfinite(x) for x in norms))
        if not bad:
            run.optimizer.step()
        run.seconds += time.perf_counter() - started
        with self._view_lock:
            run.steps += 1
            run.tokens_seen += input_batch.numel()
            run.train_loss_now = loss_value
            if norms is not None:
                run.grad_steps.append(step)
                run.grad_norms.append(norms)
            if bad:
                run.diverged_at = step
                run.note = (f"diverged at step {step}: the loss became {loss_value} (NaN or "
                            f"infinite); training of this variant stopped there. A smaller "
                            f"learning rate or a warm-up may help.")

    def _evaluate(self, step):
        """The book's ``evaluate_model``: the mean loss of the first eval_iter batches of a
        fresh shuffle of the training data, and of the validation data, for every variant on
        the same batches."""
        drawn = []
        for run in self._live_runs(lead=True):
            with run.rng.active(self.device):  # the book's calc_loss_loader iterates these
                drawn.append((_first_batches(self.train_loader, self.settings.eval_iter),
                              _first_batches(self.val_loader, self.settings.eval_iter)))
        train_batches, val_batches = drawn[0]
        for run in self._live_runs():
            run.model.eval()
            with torch.no_grad():
                train_loss = _mean_loss(train_batches, run.model, self.device)
                val_loss = _mean_loss(val_batches, run.model, self.device)
            run.model.train()
            with self._view_lock:
                if not (math.isfinite(train_loss) and math.isfinite(val_loss)):
                    run.diverged_at = step   # the curves keep finite values only
                    run.note = (f"diverged at step {step}: after its update the loss became "
                                f"NaN or infinite; training of this variant stopped there. A "
                                f"smaller learning rate or a warm-up may help.")
                    continue
                run.eval_steps.append(step)
                run.eval_tokens.append(run.tokens_seen)
                run.train_losses.append(train_loss)
                run.val_losses.append(val_loss)

    def _samples(self):
        for run in self._live_runs():
            text = greedy_sample(run.model, self.tokenizer, self.settings.start_context,
                                 self.settings.sample_tokens)
            with self._view_lock:
                run.sample, run.sample_step = text, self.global_step

    def _finish(self):
        with self._step_lock:
            if self.status == "finished":
                return
            if any(r.sample_step != self.global_step for r in self.runs
                   if r.diverged_at is None):
                self._samples()
            self._free_training_state(optimizers=True)   # no more steps: models only
            with self._view_lock:
                self.status, self.ended_at = "finished", time.monotonic()
                diverged = [r.label for r in self.runs if r.diverged_at is not None]
                self.message = (f"Trained {self.steps_done} steps on {self.corpus.name}."
                                + (f" Diverged: {', '.join(diverged)}." if diverged else ""))

    # -- the worker thread -------------------------------------------------------------------
    def start(self) -> TrainingJob:
        """Train in a worker thread until the job is done or stopped (also: Continue)."""
        with self._view_lock:
            if self._thread is not None and self._thread.is_alive():
                raise ValueError("This job is already training.")
            if self.status in ("finished", "cancelled", "failed"):
                raise ValueError(f"This job is {self.status}; start a new one.")
            self._stop.clear()
            self.status, self.message = "running", ""
            self._thread = threading.Thread(target=self._work, daemon=True,
                                            name="gpt-explorer-training")
            self._thread.start()
        return self

    resume = start

    def stop(self) -> TrainingJob:
        """Stop after the current step; ``resume`` continues exactly where it stopped."""
        self._stop.set()
        self.wait()
        return self

    def cancel(self) -> TrainingJob:
        """Stop for good and let go of the models (closing the tab calls this)."""
        self._stop.set()
        self.wait()
        with self._step_lock, self._view_lock:
            if self.status not in ("finished", "failed"):
                self.status, self.message = "cancelled", "Training was cancelled."
                self.ended_at = time.monotonic()
            self._free_training_state(optimizers=True)
        return self

    def _free_training_state(self, optimizers: bool) -> None:
        """Between steps: the gradients (the next step makes new ones) and, when no step will
        follow, the optimizers' state too, so that a job that is not training holds only what
        it still needs (``held_bytes``)."""
        for run in self.runs:
            for p in run.model.parameters() if run.model is not None else ():
                p.grad = None
            if optimizers:
                run.optimizer = None

    def release_models(self) -> None:
        """Let go of the trained models of a finished job (to make room for another job): its
        curves, table and samples stay; Use and Export then say to train again."""
        with self._step_lock, self._view_lock:
            if self.status in ("running", "ready", "stopped"):
                raise RuntimeError("Only a job that has ended can give up its models.")
            for run in self.runs:
                run.model = None
            self.released = True

    def held_bytes(self) -> int:
        """The memory this job holds now: while it trains (or can continue) its whole
        ``job_bytes``; once ended, its models' weights only (for Use and Export); nothing once
        its models are released."""
        if self.released:
            return 0
        if self.status in ("ready", "running") or self.running:
            return job_bytes(self.variants, self.settings)
        held = 0
        for run in self.runs:
            weights = 4 * sum(p.numel() for p in run.model.parameters())
            grads = any(p.grad is not None for p in run.model.parameters())
            moments = run.optimizer is not None and bool(run.optimizer.state)   # AdamW's two
            held += weights * (1 + grads + 2 * moments)
        return held

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the worker thread to end; True if it has."""
        thread = self._thread
        if thread is not None:
            thread.join(timeout)
            return not thread.is_alive()
        return True

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def _work(self):
        try:
            while not self._stop.is_set() and not self.done:
                self._one_step()
            if self.done:
                self._finish()
            else:
                self._free_training_state(optimizers=False)   # Continue needs AdamW's state
                with self._view_lock:
                    self.status = "stopped"
                    self.message = f"Stopped after {self.steps_done} steps; Continue resumes."
        except Exception as e:   # noqa: BLE001 - a failed job reports, the server lives on
            with self._view_lock:
                self.status, self.ended_at = "failed", time.monotonic()
                self.message = (f"Training failed at step {self.steps_done + 1}: "
                                f"{type(e).__name__}: {e}")

    # -- plain data and models ---------------------------------------------------------------
    def view(self) -> JobView:
        with self._view_lock:
            per_step = self.settings.batch_size * self.window
            return JobView(
                status=self.status, message=self.message, step=self.steps_done,
                total_steps=self.settings.steps, tokens_seen=self.steps_done * per_step,
                total_tokens=self.settings.steps * per_step, epoch=self.epoch,
                batches_per_epoch=self.batches_per_epoch, corpus=self.corpus.name,
                seconds=self.seconds, runs=[r.view() for r in self.runs])

    def weights_source(self, index: int = 0) -> str:
        run = self._run(index)
        steps = run.steps
        return f"trained {steps} step{'s' if steps != 1 else ''} on {self.corpus.name}"

    def trained_model(self, index: int = 0) -> TrainedModel:
        """A copy of variant ``index`` as it is now (between two steps), in eval mode with
        gradients off: trace it, generate from it, save its state_dict."""
        run = self._run(index)
        if self.released:
            raise ValueError("This finished job's models were let go to make room for another "
                             "session's training; its curves stay. Train again to use or "
                             "export a variant.")
        if run.diverged_at is not None:
            raise ValueError(f"Variant '{run.label}' diverged at step {run.diverged_at}: its "
                             f"weights give NaN or infinite outputs, so there is nothing to "
                             f"look at or generate from. Choose another variant, or train "
                             f"again with a smaller learning rate or a warm-up.")
        with self._step_lock:
            model = copy.deepcopy(run.model)
            source = self.weights_source(index)
        model.eval()
        model.requires_grad_(False)
        for p in model.parameters():
            p.grad = None
        return TrainedModel(model, source, run.label, run.steps)

    def _run(self, index) -> _Run:
        if isinstance(index, bool) or not isinstance(index, int) \
                or not 0 <= index < len(self.runs):
            raise ValueError(f"There are {len(self.runs)} variants; choose one from 0 to "
                             f"{len(self.runs) - 1} (got {index!r}).")
        return self.runs[index]


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


def _first_batches(loader, n):
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


def _mean_loss(batches, model, device):
    """The book's ``calc_loss_loader`` over ``batches``: the mean of each batch's
    ``calc_loss_batch``, the same numbers within float rounding. Faster: ``GPTModel.forward``
    runs in two parts, its blocks once for all batches stacked, then its final norm and output
    head (with the loss) ``EVAL_HEAD_POSITIONS`` positions at a time. Call it under
    ``torch.no_grad()``."""
    if not batches:
        return float("nan")
    n = EVAL_HEAD_POSITIONS
    inputs = torch.cat([x for x, _ in batches]).to(device)               # (sequences, T)
    targets = torch.cat([y for _, y in batches]).to(device).flatten()     # (positions,)
    hidden = model.final_norm(model(inputs, stop_at_layer=model.cfg.n_layers)).flatten(0, 1)
    losses = torch.cat([F.cross_entropy(model.out_head(hidden[i:i + n]), targets[i:i + n],
                                        reduction="none")
                        for i in range(0, len(targets), n)])              # (positions,)
    per_batch = [part.mean() for part in losses.split([y.numel() for _, y in batches])]
    return sum(torch.stack(per_batch).tolist()) / len(batches)


# ---------------------------------------------------------------------------------------------
class TrainingLab:
    """The server's training jobs: one per session, at most ``max_jobs`` training at once,
    within the memory budget, each no larger than ``max_param_steps``. Sessions share nothing:
    each job has its own models, optimizers, random streams and data."""

    def __init__(self, max_jobs: int | None = None, max_param_steps: float | None = None,
                 budget_bytes: int | None = None, device: str = "cpu"):
        self.max_jobs = (_env_number(MAX_JOBS_ENV, DEFAULT_MAX_JOBS, int)
                         if max_jobs is None else _as_count("max_jobs", max_jobs))
        self.max_param_steps = (_env_number(MAX_WORK_ENV, DEFAULT_MAX_PARAM_STEPS)
                                if max_param_steps is None else max_param_steps)
        self.budget_bytes = default_budget_bytes() if budget_bytes is None else budget_bytes
        self.device = device
        self._jobs: dict[str, TrainingJob] = {}
        self._lock = threading.Lock()

    def check(self, session_id, variants, settings) -> None:
        """Raise the ValueError that ``start`` would raise for these limits, allocating
        nothing."""
        with self._lock:
            self._check(session_id, _check_variants(variants), settings)

    def _check(self, session_id, variants, settings, release=False):
        old = self._jobs.get(session_id)
        if old is not None and old.running:
            raise ValueError("This session is already training: stop or cancel that job "
                             "before starting another.")
        work = param_steps(variants, settings)
        if work > self.max_param_steps:
            params = work // settings.steps
            raise ValueError(
                f"This training is too large for this server: {len(variants)} variant(s) with "
                f"{params:,} parameters in all x {settings.steps:,} steps = {work:.2g} "
                f"parameter-steps; the limit is {self.max_param_steps:.2g} (setting "
                f"{MAX_WORK_ENV}). Choose fewer steps, fewer variants or a smaller preset.")
        running = [j for s, j in self._jobs.items() if j.running and s != session_id]
        if len(running) >= self.max_jobs:
            raise ValueError(
                f"{len(running)} training job(s) are running on this server, the most it runs "
                f"at once ({MAX_JOBS_ENV}). Try again in a minute.")
        need = job_bytes(variants, settings)
        others = [j for s, j in self._jobs.items() if s != session_id]
        held = sum(j.held_bytes() for j in others)
        # Ended jobs keep their models only for Use and Export: when a new job needs the room,
        # the oldest give them up (their curves stay).
        ended = sorted((j for j in others if j.ended_at is not None and not j.released),
                       key=lambda j: j.ended_at)
        kept = held - sum(j.held_bytes() for j in ended)
        if kept + need > self.budget_bytes:
            raise ValueError(
                f"This training needs about {need / 2 ** 20:,.0f} MB; the server has "
                f"{max(0, self.budget_bytes - kept) / 2 ** 20:,.0f} MB of its training memory "
                f"free now. Choose a smaller preset, batch or context, or try again later.")
        for job in ended if release else ():
            if held + need <= self.budget_bytes:
                break
            held -= job.held_bytes()
            job.release_models()

    def start(self, session_id: str, variants, corpus: Corpus,
              settings: TrainingSettings | None = None, run: bool = True) -> TrainingJob:
        """Make this session's job (replacing its previous, stopped or finished one) and
        start training unless ``run=False``."""
        settings = settings or default_settings()
        if not isinstance(settings, TrainingSettings):
            raise ValueError("settings must be a TrainingSettings.")
        variants = _check_variants(variants)
        with self._lock:
            self._check(session_id, variants, settings)
            old = self._jobs.pop(session_id, None)
        if old is not None:
            old.cancel()
        job = TrainingJob(variants, corpus, settings, self.device)
        with self._lock:
            # others may have started meanwhile; ended jobs give up their models if need be
            self._check(session_id, variants, settings, release=True)
            self._jobs[session_id] = job
            if run:
                job.start()
        return job

    def job(self, session_id: str) -> TrainingJob | None:
        return self._jobs.get(session_id)

    def stop(self, session_id: str) -> TrainingJob:
        return self._job(session_id).stop()

    def resume(self, session_id: str) -> TrainingJob:
        job = self._job(session_id)
        with self._lock:
            running = [j for j in self._jobs.values() if j.running and j is not job]
            if len(running) >= self.max_jobs:
                raise ValueError(
                    f"{len(running)} training job(s) are running on this server, the most it "
                    f"runs at once ({MAX_JOBS_ENV}). Try Continue again in a minute.")
            return job.start()

    def cancel(self, session_id: str) -> bool:
        """End this session's job and free its memory (the page calls this when the tab
        closes). False if the session had none."""
        with self._lock:
            job = self._jobs.pop(session_id, None)
        if job is None:
            return False
        job.cancel()
        return True

    def _job(self, session_id) -> TrainingJob:
        job = self._jobs.get(session_id)
        if job is None:
            raise ValueError("This session has no training job: press Train first.")
        return job

    def __len__(self) -> int:
        return len(self._jobs)
