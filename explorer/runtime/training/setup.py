"""What the training lab trains, and within which limits: the corpus (the default story, a
pasted text or an uploaded ``.txt``), the variants (``VARIANT_CHOICES`` on a preset), the
settings (the book's, with ``steps`` instead of epochs), and a job's size as the lab limits it
(``param_steps``, ``job_bytes``). All of it checked here, before anything is built."""
from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import ClassVar
from pathlib import Path

from ...book.config import GPTConfig, count_parameters, get_preset
from ...book.errors import ExplorerError, Text
from ...book.tokenizer import N_VOCAB, get_tokenizer
from ...book.training import BOOK_SETTINGS, SAMPLE_TOKENS

# Settings (one source of truth; the environment variables are for the server's operator)
MAX_JOBS_ENV = "GPT_EXPLORER_TRAIN_JOBS"                  # training jobs running at once
MAX_WORK_ENV = "GPT_EXPLORER_TRAIN_MAX_PARAM_STEPS"       # parameters x steps, all variants
DEFAULT_MAX_JOBS = 2
DEFAULT_MAX_PARAM_STEPS = 2e10    # the default comparison is ~4.2e9; GPT-2 small x 120 steps
MAX_CORPUS_BYTES = 1_000_000      # an uploaded or pasted text (tokenising 1 MB takes ~0.5 s)
MAX_VARIANTS = 4
CORPUS_DIR = Path(__file__).resolve().parents[3] / "assets" / "corpus"
DEFAULT_CORPUS_FILE = "the_clockmakers_daughter.txt"
DEFAULT_CORPUS_NAME = Text("corpus.default", "The Clockmaker's Daughter")

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
    "1 block": {"n_layers": 1},      # the copying task's lesson: no induction head in one block
    "2 blocks": {"n_layers": 2},
}
# Their names on a page (the keys above are the API's values).
VARIANT_LABELS = {
    "pre-LN (book)": Text("variant.pre_ln", "pre-LN (book)"),
    "post-LN": Text("variant.post_ln", "post-LN"),
    "no shortcut": Text("variant.no_shortcut", "no shortcut"),
    "no LayerNorm": Text("variant.no_ln", "no LayerNorm"),
    "ReLU": Text("variant.relu", "ReLU"),
    "GELU exact": Text("variant.gelu_exact", "GELU exact"),
    "SiLU": Text("variant.silu", "SiLU"),
    "expansion 2": Text("variant.expansion_2", "expansion 2"),
    "expansion 8": Text("variant.expansion_8", "expansion 8"),
    "tied weights": Text("variant.tied", "tied weights"),
    "RoPE": Text("variant.rope", "RoPE"),
    "1 block": Text("variant.one_block", "1 block"),
    "2 blocks": Text("variant.two_blocks", "2 blocks"),
}
DEFAULT_PRESET = "teach-deep"   # 12 blocks: the shortcut lesson of section 4.4 shows best
DEFAULT_VARIANTS = ("pre-LN (book)", "post-LN", "no shortcut")


def env_number(name, default, kind=float):
    value = os.environ.get(name, "").strip()
    if not value:
        return default
    try:
        number = kind(float(value)) if kind is int else float(value)
    except ValueError:
        raise ExplorerError("env.not_a_number", "{name} must be a number (got {value!r}).",
                            name=name, value=value) from None
    if not (math.isfinite(number) and number > 0):
        raise ExplorerError("env.not_positive", "{name} must be a positive number (got "
                            "{value!r}).", name=name, value=value)
    return number


# ---------------------------------------------------------------------------------------------
# Data
@dataclass(frozen=True)
class Corpus:
    """A text to train on and the name the page shows ("trained N steps on <name>")."""

    name: str
    text: str
    vocab_size: ClassVar[int] = N_VOCAB     # a text's tokens are any of GPT-2's


def default_corpus() -> Corpus:
    text = (CORPUS_DIR / DEFAULT_CORPUS_FILE).read_text(encoding="utf-8")
    return Corpus(DEFAULT_CORPUS_NAME, text)


def story_text(cfg=None, tokens: int = 64) -> str:
    """The default story's first ``tokens`` tokens (fewer for a short context), as text."""
    ids = get_tokenizer().encode(default_corpus().text[:32 * tokens])
    most = tokens if cfg is None else min(tokens, cfg.context_length)
    return get_tokenizer().decode(ids[:most])


def corpus_from_text(text, name: str = "pasted text",
                     max_bytes: int = MAX_CORPUS_BYTES) -> Corpus:
    """A pasted text. Empty, oversized or non-text input gets a ValueError to act on."""
    if not isinstance(text, str):
        raise ExplorerError("corpus.not_a_string", "The training text must be a string, got "
                            "{kind}.", kind=type(text).__name__)
    size = len(text.encode("utf-8", errors="surrogatepass"))
    if size > max_bytes:
        raise ExplorerError("corpus.text_too_large", "The text is {size:,} bytes; the lab trains "
                            "on at most {max_bytes:,} bytes. Paste a shorter part of it.",
                            size=size, max_bytes=max_bytes)
    if not text.strip():
        raise ExplorerError("corpus.empty", "The training text is empty: paste some text, upload "
                            "a .txt file, or use the default story.")
    if "\x00" in text:
        raise ExplorerError("corpus.nul_characters", "The text contains NUL characters, which "
                            "plain text never has: is it a binary file? Give plain text (.txt, "
                            "UTF-8).")
    return Corpus(name, text)


def corpus_from_file(path, max_bytes: int = MAX_CORPUS_BYTES) -> Corpus:
    """An uploaded ``.txt`` file: its size is checked before it is read."""
    path = Path(path)
    if path.suffix.lower() != ".txt":
        raise ExplorerError("corpus.not_txt", "The lab trains on plain-text files ending in "
                            ".txt; '{name}' is not one.", name=path.name)
    try:
        size = path.stat().st_size
    except OSError:
        raise ExplorerError("corpus.unreadable", "The file '{name}' could not be read; upload it "
                            "again.", name=path.name) from None
    if size > max_bytes:
        raise ExplorerError("corpus.file_too_large", "'{name}' is {size:,} bytes; the lab trains "
                            "on at most {max_bytes:,} bytes. Upload a shorter text.",
                            name=path.name, size=size, max_bytes=max_bytes)
    raw = path.read_bytes()
    if b"\x00" in raw:
        raise ExplorerError("corpus.binary_file", "'{name}' looks like a binary file (it "
                            "contains NUL bytes), not plain text. Save it as a .txt file (UTF-8) "
                            "and upload that.", name=path.name)
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise ExplorerError("corpus.not_utf8", "'{name}' is not UTF-8 text (byte {byte} cannot "
                            "be read). Save it as UTF-8 and upload it again.", name=path.name,
                            byte=e.start) from None
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
        raise ExplorerError("variants.chosen_twice", "Each variant can be trained once, but "
                            "'{variant}' is chosen {times} times: choose different variants.",
                            variant=twice, times=names.count(twice))
    for name in names:
        if name not in VARIANT_CHOICES:
            raise ExplorerError("variants.unknown", "Unknown variant '{name}'. Variants: "
                                "{variants}.", name=name, variants=", ".join(VARIANT_CHOICES))
    return [Variant(name, base.replace(**VARIANT_CHOICES[name])) for name in names]


def as_count(name, value, low=1):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (
            isinstance(value, float) and (not math.isfinite(value) or value != int(value))):
        raise ExplorerError("settings.not_whole", "{name} must be a whole number (got {value!r}).",
                            name=name, value=value)
    if value < low:
        raise ExplorerError("settings.too_small", "{name} must be at least {low} (got {value!r}).",
                            name=name, low=low, value=value)
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
            object.__setattr__(self, name, as_count(name, getattr(self, name)))
        for name in ("warmup_steps", "sample_tokens"):
            object.__setattr__(self, name, as_count(name, getattr(self, name), 0))
        if self.context_length is not None:
            object.__setattr__(self, "context_length",
                               as_count("context_length", self.context_length, 2))
        for name in ("lr", "weight_decay"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) \
                    or not math.isfinite(value) or value < 0 or (name == "lr" and value == 0):
                raise ExplorerError("settings.not_positive", "{name} must be a positive number; "
                                    "the book uses {book_value} (got {value!r}).", name=name,
                                    book_value=BOOK_SETTINGS[name], value=value)
            object.__setattr__(self, name, float(value))
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) \
                or not 0 <= self.seed < 2 ** 63:
            raise ExplorerError("seed.not_whole", "seed must be a whole number ≥ 0 (got "
                                "{seed!r}).", seed=self.seed)
        if not isinstance(self.start_context, str) or not self.start_context.strip():
            raise ExplorerError("settings.no_start_context", "The start context of the samples "
                                "must be some text, such as the book's 'Every effort moves you'.")

    def lr_at(self, step: int) -> float:
        """The learning rate of step ``step`` (0-based)."""
        if self.warmup_steps and step < self.warmup_steps:
            return self.lr * (step + 1) / self.warmup_steps
        return self.lr


# The default comparison, chosen to fit a lecture (about a minute on 2 CPU cores; how: bench/
# README.md, *Training*): fewer steps on a shorter window at a higher learning rate than the
# book's, evaluated less often on fewer batches. The book's own loop settings (lr, evaluation
# every 5 steps on 5 batches) are one click away: ``book_settings``.
DEFAULT_STEPS = 150
DEFAULT_CONTEXT = 32
DEFAULT_LR = 0.002
DEFAULT_EVAL_FREQ = 10
DEFAULT_EVAL_ITER = 2


def default_settings(**changes) -> TrainingSettings:
    return TrainingSettings(**{"steps": DEFAULT_STEPS, "context_length": DEFAULT_CONTEXT,
                               "lr": DEFAULT_LR, "eval_freq": DEFAULT_EVAL_FREQ,
                               "eval_iter": DEFAULT_EVAL_ITER, **changes})


def book_settings(**changes) -> TrainingSettings:
    """The book's ``train_model_simple`` settings (batch, lr, weight decay, evaluation every
    5 steps on 5 batches), on the default comparison's steps and window."""
    return TrainingSettings(**{"steps": DEFAULT_STEPS, "context_length": DEFAULT_CONTEXT,
                               **changes})


def check_variants(variants, vocab_size: int | None = N_VOCAB) -> list[Variant]:
    """The variants as the lab takes them; each must read the data's token ids, below
    ``vocab_size`` (GPT-2's for a text; the copying task's words; None: not checked yet)."""
    variants = list(variants)
    if not 1 <= len(variants) <= MAX_VARIANTS:
        raise ExplorerError("variants.how_many", "Choose one to {most} variants to train side by "
                            "side (got {n}).", most=MAX_VARIANTS, n=len(variants))
    out = []
    for v in variants:
        if not isinstance(v, Variant):
            raise TypeError("Each variant must be a Variant(label, config); make_variants() "
                             "builds them from names.")
        config = GPTConfig.from_dict(v.config)
        if vocab_size is not None and vocab_size != N_VOCAB and config.vocab_size < vocab_size:
            raise ExplorerError("variants.vocab_below_task", "Variant '{variant}' has "
                                "vocab_size {vocab_size}, but the copying task's words are "
                                "token ids up to {last}: use vocab_size {need} or more.",
                                variant=v.label, vocab_size=config.vocab_size,
                                last=vocab_size - 1, need=vocab_size)
        if vocab_size == N_VOCAB and config.vocab_size < N_VOCAB:
            raise ExplorerError("variants.vocab_too_small", "Variant '{variant}' has vocab_size "
                                "{vocab_size}, but the lab trains on GPT-2 tokens (ids up to "
                                "{last}): use vocab_size {n_vocab}.", variant=v.label,
                                vocab_size=config.vocab_size, last=N_VOCAB - 1, n_vocab=N_VOCAB)
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
