"""A copying task: sequences of random words, each followed by its own repetition, the data on
which induction heads form (Olsson et al. 2022, "In-context learning and induction heads").

A sequence is L distinct words w1 ... wL drawn at random from the tokenizer's first
``n_words`` ids (the GPT-2 tokenizer still decodes them), then the same L words again; L varies
from sequence to sequence. The first half cannot be predicted (its loss stays near
log(n_words)); the repeated half can, by a head that looks back at the word after the earlier
copy of the current one. A model for the task needs a ``vocab_size`` of only ``n_words``.

Sequences of different lengths share a batch as chapter 7 of the book shares them: the inputs
padded, the padded targets set to -100, which ``cross_entropy`` (and so the book's
``calc_loss_batch``) ignores.
"""
from __future__ import annotations

import torch
from torch.utils.data import Dataset

from .errors import ExplorerError

IGNORE_INDEX = -100      # cross_entropy's ignore_index: a padded target counts for nothing
PAD_ID = 0               # what fills a padded input (causal attention: nothing before reads it)


def copying_sequences(n_sequences: int, n_words: int, min_len: int, max_len: int,
                      length: int, seed: int) -> list[list[int]]:
    """``n_sequences`` sequences of at most ``length`` words: L distinct ids below ``n_words``
    (L from min_len to max_len, uniformly), then the same L ids again, the two after a random
    number of other distinct ids (from none to ``length - 2L``), so that the repetition starts
    anywhere in the window and only the words, not their positions, tell where its copy is.
    The same seed gives the same sequences."""
    if not 1 <= min_len <= max_len or 2 * max_len > length or length > n_words + max_len:
        raise ExplorerError("copying.bad_lengths", "A copying sequence needs 1 <= min_len <= "
                            "max_len, and 2 x max_len <= length <= n_words + max_len (its words "
                            "are distinct but for the repetition); got min_len {min_len}, "
                            "max_len {max_len}, length {length}, n_words {n_words}.",
                            min_len=min_len, max_len=max_len, length=length, n_words=n_words)
    generator = torch.Generator().manual_seed(seed)
    sequences = []
    for _ in range(n_sequences):
        words = int(torch.randint(min_len, max_len + 1, (), generator=generator))
        before = int(torch.randint(0, length - 2 * words + 1, (), generator=generator))
        drawn = torch.randperm(n_words, generator=generator)[:before + words].tolist()
        sequences.append(drawn + drawn[before:])
    return sequences


class CopyingDataset(Dataset):
    """Each sequence as one (input, target) pair of ``max_length`` positions: the input is the
    sequence without its last word, the target the sequence shifted by one (as in
    ``GPTDatasetV1``), both padded to ``max_length``."""

    def __init__(self, sequences, max_length):
        self.input_ids = []
        self.target_ids = []
        for seq in sequences:
            n = len(seq) - 1
            if n > max_length:
                raise ExplorerError("copying.sequence_too_long", "A sequence of {words} words "
                                    "needs a window of {need}; the window is {window}.",
                                    words=len(seq), need=n, window=max_length)
            pad = max_length - n
            self.input_ids.append(torch.tensor(seq[:-1] + [PAD_ID] * pad))
            self.target_ids.append(torch.tensor(seq[1:] + [IGNORE_INDEX] * pad))

    def __len__(self):
        return len(self.input_ids)

    def __getitem__(self, idx):
        return self.input_ids[idx], self.target_ids[idx]


def half_masks(input_batch, target_batch) -> tuple[torch.Tensor, torch.Tensor]:
    """(B, T) inputs and targets -> two (B, T) masks: the positions whose next word cannot be
    predicted from what came before (the words before the repetition, and the last one before
    it, whose next word is the repetition's first: nothing announces it) and those of the
    repeated half, whose word occurred earlier in the sequence (the words are distinct but
    for the repetition), so that its next word is the one after that earlier copy."""
    same = input_batch[:, :, None] == input_batch[:, None, :]            # (B, T, T)
    earlier = torch.ones_like(same[0]).tril(-1)                         # key before query
    seen = (same & earlier).any(-1)                                     # (B, T)
    counted = target_batch != IGNORE_INDEX
    return counted & ~seen, counted & seen


def half_losses(logits, input_batch, target_batch) -> tuple[float, float]:
    """The mean cross-entropy over every first-half position and over every repeated-half
    position of a batch ((B, T, V) logits, (B, T) inputs and targets), in nats."""
    losses = torch.nn.functional.cross_entropy(
        logits.flatten(0, 1), target_batch.flatten(), reduction="none",
        ignore_index=IGNORE_INDEX).view(target_batch.shape)     # (B, T)
    first, repeated = half_masks(input_batch, target_batch)
    return float(losses[first].mean()), float(losses[repeated].mean())


def calc_half_losses(input_batch, target_batch, model, device) -> tuple[float, float]:
    """``half_losses`` of the model on one batch (as the book's ``calc_loss_batch``)."""
    input_batch, target_batch = input_batch.to(device), target_batch.to(device)
    with torch.no_grad():
        logits = model(input_batch)
    return half_losses(logits, input_batch, target_batch)
