"""The copying task in the training lab (``explorer.book.copying``'s data): what it trains on
(``CopyingTask``, a value like a ``Corpus``), its own default comparison and settings, and
what the lab measures at each evaluation (``measure``): the loss on the first half and on the
repeated half, and each variant's best previous-token and induction head scores.

Why it is cheap enough for a lecture: the words are the tokenizer's first ``n_words`` ids, so
the models need a ``vocab_size`` of only ``n_words`` (the output head is ``emb_dim x n_words``
instead of ``emb_dim x 50,257``), and the window is short. Why 1 block vs 2 blocks: an
induction head needs a head before it that writes each token's predecessor into its position
(a previous-token head), so one block cannot form one: its repeated half stays far above the
two blocks' (bench/README.md, *Induction heads on the copying task*).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from torch.utils.data import DataLoader

from ...book.config import GPTConfig
from ...book.copying import CopyingDataset, copying_sequences, half_losses
from ...book.errors import ExplorerError, Text
from ...book.generate import generate_steps
from ...book.tokenizer import N_VOCAB, get_tokenizer
from ...probes.head_scores import (each_layer, induction_prompt, induction_scores,
                                   previous_token_scores)
from ...probes.tracing import trace
from .setup import DEFAULT_VARIANTS, TrainingSettings, default_settings

# The task's default comparison and settings (how they were chosen: bench/README.md,
# *Induction heads on the copying task*). The context is longer than the longest sequence, so
# that the induction test prompt (``head_scores.induction_prompt``: context // 2 = 9 words,
# twice) is longer than any copy seen in training: a head scores there only if it copies by
# content, not by position.
# RoPE, because with learned positions and so short a window the models learned to copy by
# absolute position (a shortcut that fails on longer sequences) instead of forming the
# previous-token and induction heads.
COPYING_WORDS = 32
COPYING_MIN_LEN, COPYING_MAX_LEN = 2, 8
COPYING_CONTEXT = 18
COPYING_TRAIN_SEQUENCES = 8_192
COPYING_VAL_SEQUENCES = 128
COPYING_SEED = 0
COPYING_MODEL = GPTConfig(vocab_size=COPYING_WORDS, context_length=COPYING_CONTEXT, emb_dim=64,
                          n_heads=2, n_layers=2, drop_rate=0.0, pos_encoding="rope")
COPYING_VARIANTS = ("1 block", "2 blocks")
COPYING_SETTINGS = {"steps": 1000, "batch_size": 32, "context_length": COPYING_CONTEXT,
                    "lr": 0.003, "warmup_steps": 0, "eval_freq": 50, "eval_iter": 4}


@dataclass(frozen=True)
class CopyingTask:
    """Sequences of ``min_len`` to ``max_len`` random words from the tokenizer's first
    ``n_words`` ids, each followed by its repetition, after a random number of other words;
    ``train_sequences`` to train on and ``val_sequences`` to evaluate on, fixed by ``seed``."""

    n_words: int = COPYING_WORDS
    min_len: int = COPYING_MIN_LEN
    max_len: int = COPYING_MAX_LEN
    train_sequences: int = COPYING_TRAIN_SEQUENCES
    val_sequences: int = COPYING_VAL_SEQUENCES
    seed: int = COPYING_SEED

    name = Text("corpus.copying", "the copying task")

    @property
    def vocab_size(self) -> int:
        """The smallest vocab_size that reads every word (ids 0 ... n_words - 1)."""
        return self.n_words

    def check(self, window: int, batch_size: int) -> None:
        """The window must hold the longest sequence; a batch, at most the training set."""
        if 2 * self.max_len > window + 1:
            raise ExplorerError("copying.window_too_short", "The copying task's longest "
                                "sequence ({max_len} words, then the same {max_len} again) needs "
                                "a context of at least {need}; the context is {window}.",
                                max_len=self.max_len, need=2 * self.max_len - 1, window=window)
        if batch_size > self.train_sequences:
            raise ExplorerError("copying.batch_too_large", "The copying task has "
                                "{n:,} training sequences; choose a batch size of at most that "
                                "(got {batch_size:,}).", n=self.train_sequences,
                                batch_size=batch_size)

    def loaders(self, window: int, batch_size: int) -> tuple[DataLoader, DataLoader]:
        """The training loader (shuffled, whole batches) and the validation loader, as the
        book's ``create_dataloader_v1`` makes them for a text."""
        self.check(window, batch_size)
        made = [CopyingDataset(copying_sequences(n, self.n_words, self.min_len, self.max_len,
                                                 window + 1, seed), window)
                for n, seed in ((self.train_sequences, self.seed),
                                (self.val_sequences, self.seed + 1))]
        return (DataLoader(made[0], batch_size=batch_size, shuffle=True, drop_last=True),
                DataLoader(made[1], batch_size=batch_size, shuffle=False, drop_last=False))

    def caption(self, window: int, config: GPTConfig = COPYING_MODEL,
                settings: TrainingSettings | None = None) -> Text:
        """What the Train tab says about the choice (``config``: the first variant's), and
        with ``settings`` what each evaluation measures (``evaluation_note``)."""
        if settings is not None:
            return Text("copying.caption_and_evaluation", "{caption} {evaluation}",
                        caption=self.caption(window, config),
                        evaluation=evaluation_note(self, settings))
        words = get_tokenizer().decode(list(range(min(self.n_words, 12))))
        return Text("copying.caption", "Copying task: sequences of {min_len} to {max_len} random "
                    "words, each followed by its repetition, drawn from the GPT-2 tokenizer's "
                    "first {n_words} ids ({words} …), so the models have vocab_size "
                    "{n_words} instead of {n_vocab:,}; context {window} tokens; emb_dim "
                    "{emb_dim}, {n_heads} heads, pos_encoding {pos}. The first half cannot be "
                    "predicted (its loss stays near ln {n_words} = {chance:.2f}); the repeated "
                    "half can, once an induction head has formed.", min_len=self.min_len,
                    max_len=self.max_len, n_words=self.n_words, words=words, n_vocab=N_VOCAB,
                    window=window, emb_dim=config.emb_dim, n_heads=config.n_heads,
                    pos=config.pos_encoding, chance=float(np.log(self.n_words)))

    def sample_prompt(self) -> list[int]:
        """The sample's start: ``max_len`` words fixed by the task's seed, then the first of
        them again (the rest of the repetition is the model's to copy)."""
        words = copying_sequences(1, self.n_words, self.max_len, self.max_len,
                                  2 * self.max_len, self.seed + 1)[0]
        return words[:self.max_len + 1]


PROMPT_WORDS = 8      # the repeated prompt that "Use this model" gives the other tabs


def repeated_text(task: CopyingTask, n: int = PROMPT_WORDS, tokenizer=None) -> str:
    """A prompt for a model trained on the task, as text for the other tabs: ``n`` of its
    words, then the same ``n`` again, drawn (seeded) so that the GPT-2 tokenizer reads the
    text back as exactly those ids: side by side, two of its symbols can be one token ("!!"),
    which the model has never seen."""
    tokenizer = tokenizer or get_tokenizer()
    n = max(2, min(n, task.n_words, task.max_len))
    rng = np.random.default_rng(task.seed + 2)
    for _ in range(10_000):
        words = rng.permutation(task.n_words)[:n].tolist()
        text = tokenizer.decode(words + words)
        if tokenizer.encode(text) == words + words:
            return text
    raise RuntimeError("no repeated prompt reads back as the task's words")   # never seen


PAIR_WORDS = 8        # the copying pair's sequence: 8 words, then its first CHANGED + 1 again
CHANGED = 4           # the word of the first half that the corrupted prompt changes


def copying_pair(task: CopyingTask, tokenizer=None) -> tuple[str, str, str, str]:
    """A patching pair for a model trained on the task: (clean, corrupted, right, wrong) as
    text. Clean: ``PAIR_WORDS`` words, then its first ``CHANGED`` words again, so that the
    next word is the copy's: its word ``CHANGED`` (right). Corrupted: the same with that word
    of the first half changed for another (wrong), which a copy would predict instead. Drawn
    (seeded) so that the tokenizer reads each text back as exactly those ids, one per word."""
    tokenizer = tokenizer or get_tokenizer()
    n = min(PAIR_WORDS, task.n_words - 1, task.max_len)
    changed = min(CHANGED, n - 1)
    rng = np.random.default_rng(task.seed + 3)
    for _ in range(10_000):
        drawn = rng.permutation(task.n_words)[:n + 1].tolist()
        words, other = drawn[:n], drawn[n]
        corrupted = words[:changed] + [other] + words[changed + 1:]
        clean_ids, corrupted_ids = words + words[:changed], corrupted + corrupted[:changed]
        texts = [tokenizer.decode(ids) for ids in (clean_ids, corrupted_ids)]
        if [tokenizer.encode(t) for t in texts] == [clean_ids, corrupted_ids]:
            return (*texts, tokenizer.decode([words[changed]]), tokenizer.decode([other]))
    raise RuntimeError("no copying pair reads back as the task's words")   # never seen


def greedy_copy(model, task: CopyingTask, tokenizer) -> str:
    """The samples of the copying task: the model's greedy continuation of
    ``task.sample_prompt()`` (a copy, once an induction head has formed), as text."""
    ids = task.sample_prompt()
    model.eval()
    with torch.no_grad():
        new = [s.token_id for s in generate_steps(model, ids, task.max_len - 1, show_top=1,
                                                  tokenizer=tokenizer)]
    model.train()
    return f"{tokenizer.decode(ids[:task.max_len])} | {tokenizer.decode(ids[task.max_len:] + new)}"


def head_score_maps(model) -> tuple[np.ndarray, np.ndarray] | None:
    """(layers, heads) previous-token and induction scores, both on the standard induction
    test prompt (``head_scores.induction_prompt``: random ids below the model's vocab_size,
    here the task's words), in one traced pass; None where the model is too small for it."""
    cfg = model.cfg
    prompt = induction_prompt(cfg.vocab_size, cfg.context_length)
    if prompt is None:
        return None
    ids, n = prompt
    traced = trace(model, ids, attention_layers="all", lens=None, top_k=1, entropy=False)
    found = each_layer(model, traced, lambda w: (previous_token_scores(w),
                                                 induction_scores(w, n)))
    return np.stack([p for p, _ in found]), np.stack([i for _, i in found])


def best_head_scores(model) -> tuple[float, float]:
    """The model's best previous-token and best induction score (``head_score_maps``)."""
    maps = head_score_maps(model)
    if maps is None:
        return float("nan"), float("nan")
    return float(np.nanmax(maps[0])), float(np.nanmax(maps[1]))


def measure(model, batches, device) -> tuple[float, float, float, float]:
    """At an evaluation: the loss on the first half and on the repeated half over all of
    ``batches`` (the validation batches), and the best previous-token and induction scores.
    The model in eval mode, under ``torch.no_grad()``."""
    inputs = torch.cat([x for x, _ in batches]).to(device)           # (sequences, T)
    targets = torch.cat([y for _, y in batches]).to(device)
    first, repeated = half_losses(model(inputs), inputs, targets)
    previous, induction = best_head_scores(model)
    return first, repeated, previous, induction


def evaluation_note(task: CopyingTask, settings: TrainingSettings) -> Text:
    """What each evaluation measures (the curves, the table's losses): the validation
    sequences of its first ``eval_iter`` batches; all of them once ``eval_iter`` reaches
    their number, so that more batches then change nothing."""
    val_batches = math.ceil(task.val_sequences / settings.batch_size)   # (the last not full)
    if settings.eval_iter >= val_batches:
        return Text("copying.evaluation_all", "Each evaluation measures all {val:,} validation "
                    "sequences ({batches} batches of {batch}): evaluation batches beyond "
                    "{batches} change nothing.", val=task.val_sequences, batches=val_batches,
                    batch=settings.batch_size)
    return Text("copying.evaluation", "Each evaluation measures {measured:,} of the {val:,} "
                "validation sequences (evaluation batches {batches} × batch size {batch}).",
                measured=settings.eval_iter * settings.batch_size, val=task.val_sequences,
                batches=settings.eval_iter, batch=settings.batch_size)


def induction_variant(runs) -> int:
    """Which of a job's runs (``RunView``s) to use first: on the copying task the one whose
    best induction score was highest at the last evaluation (the model with an induction head,
    "2 blocks", not "1 block", which cannot form one); the first for any other job."""
    last = [r.best_induction[-1] if getattr(r, "best_induction", None) else float("nan")
            for r in runs]
    scored = [(score, -i) for i, score in enumerate(last) if score == score]    # (not NaN)
    return -max(scored)[1] if scored else 0


def copying_settings(**changes) -> TrainingSettings:
    """The copying task's default settings (``COPYING_SETTINGS``), with ``changes``."""
    return TrainingSettings(**{**COPYING_SETTINGS, **changes})


def comparison_for(copying: bool, variants) -> tuple[list[str], TrainingSettings] | None:
    """The variants and settings a form of the lab switches to when its data changes: the
    copying task brings its own comparison (``COPYING_VARIANTS``, ``copying_settings``);
    leaving it brings the default comparison back. None: any other change leaves the form as
    it is."""
    if copying:
        return list(COPYING_VARIANTS), copying_settings()
    if list(variants or ()) == list(COPYING_VARIANTS):
        return list(DEFAULT_VARIANTS), default_settings()
    return None
