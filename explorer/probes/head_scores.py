"""What each head does, as numbers from 0 to 1: sums of its attention weights where a head with
one job puts them.

For a head's weights ``A`` (T, T), rows the queries, each row summing to 1:

- previous-token score: the mean over queries i >= 1 of ``A[i, i-1]``, the attention on the
  token just before (query 0 has none, and is left out);
- first-token score: the mean over queries i >= 1 of ``A[i, 0]``, the attention on position 0
  (query 0 can look only there, so it is left out too);
- induction score: on the standard test prompt (``induction_prompt``: n random tokens, then the
  same n again), the mean over the repeated tokens i = n ... 2n-1 of ``A[i, i-n+1]``, the
  attention on the token *after* the earlier occurrence of token i.

These are Olsson et al.'s definitions ("In-context Learning and Induction Heads", 2022): the
mean over the queries that have such a key. TransformerLens's ``detect_head`` scores otherwise:
it divides the sum over the whole pattern by T, counting query 0 (which has no token before it)
as a 0, so its previous-token score of a perfect head is (T - 1) / T, not 1.

A score is NaN where it does not apply (one token; a model too small for the test prompt).

Every score has a chance level: what uniform attention (query i spreading 1 / (i + 1) over keys
0 .. i) scores on the same prompt, the mean of 1 / (i + 1) over the queries counted: 0.36 on a
4-token prompt, 0.5 on a 2-token one, 0.09 on a 40-token one. A random model's attention is
nearly uniform, so its scores sit near that level: a head is named (``HeadScores.named``) only
when its score is at least half the way from chance to 1.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from ..book.model import model_device
from ..book.probe_points import recording
from ..book.tokenizer import N_VOCAB
from .attention import attention_in_c, attention_weights
from .data import Trace
from .tracing import trace

SCORES = ("previous", "first", "induction")
INDUCTION_LENGTH = 50      # tokens before the repetition (TransformerLens's demo: 50)
INDUCTION_SEED = 0
CLEAR_JOB = 0.5            # a head at least this share of the way from chance to 1 is named


def previous_token_scores(weights: np.ndarray) -> np.ndarray:
    """(..., T, T) -> (...): mean over queries i >= 1 of the weight on key i-1."""
    t = weights.shape[-1]
    if t < 2:
        return np.full(weights.shape[:-2], np.nan)
    i = np.arange(1, t)
    return weights[..., i, i - 1].mean(-1)


def first_token_scores(weights: np.ndarray) -> np.ndarray:
    """(..., T, T) -> (...): mean over queries i >= 1 of the weight on key 0."""
    if weights.shape[-1] < 2:
        return np.full(weights.shape[:-2], np.nan)
    return weights[..., 1:, 0].mean(-1)


def induction_scores(weights: np.ndarray, n: int) -> np.ndarray:
    """(..., 2n, 2n) weights on a prompt whose second half repeats its first n tokens ->
    (...): mean over the repeated tokens i = n ... 2n-1 of the weight on key i-n+1."""
    i = np.arange(n, 2 * n)
    return weights[..., i, i - n + 1].mean(-1)


def uniform_attention(t: int) -> np.ndarray:
    """(T, T) causal uniform attention: query i spreads 1 / (i + 1) over keys 0 .. i."""
    return np.tril(np.ones((t, t))) / np.arange(1, t + 1)[:, None]


def chance_levels(n_tokens: int, induction_n: int | None) -> dict[str, float]:
    """Each score of uniform attention (``uniform_attention``): on a prompt of ``n_tokens``
    for the previous- and first-token scores, on the induction prompt of ``induction_n``
    tokens repeated for the induction score (NaN where a score does not apply)."""
    uniform = uniform_attention(max(n_tokens, 1))
    induction = (float(induction_scores(uniform_attention(2 * induction_n), induction_n))
                 if induction_n else float("nan"))
    return {"previous": float(previous_token_scores(uniform)),
            "first": float(first_token_scores(uniform)), "induction": induction}


def induction_prompt(vocab_size: int, context_length: int) -> tuple[list[int], int] | None:
    """The standard test prompt: n distinct random token ids (seeded, ids below the model's
    vocab_size and the tokenizer's 50,257, so every model reads them and the tokenizer
    decodes them), then the same n again; and n. n = 50, or less where the context or the
    vocabulary is smaller; None below n = 2 (the score would need at least two)."""
    high = min(vocab_size, N_VOCAB)
    n = min(INDUCTION_LENGTH, context_length // 2, high)
    if n < 2:
        return None
    first = np.random.default_rng(INDUCTION_SEED).permutation(high)[:n].tolist()
    return first + first, n


@dataclass(frozen=True)
class HeadScores:
    """Each score of every head, (layers, heads) arrays, NaN where it does not apply; and each
    score's chance level (``chance_levels``; 0: none given)."""

    previous: np.ndarray
    first: np.ndarray
    induction: np.ndarray
    chance: dict = field(default_factory=lambda: dict.fromkeys(SCORES, 0.0))

    def above_chance(self, name: str) -> np.ndarray:
        """(layers, heads): how far a score is from its chance level toward 1 (0: uniform
        attention's score; 1: a perfect head; below 0: less than chance)."""
        chance = self.chance.get(name, 0.0)
        chance = 0.0 if np.isnan(chance) else chance          # (at most 0.5: two tokens)
        return (getattr(self, name) - chance) / (1.0 - chance)

    def as_dict(self) -> dict:
        """Plain lists, (layers, heads), None where a score does not apply (JSON has no NaN),
        and each score's chance level."""
        return {**{name: [[None if np.isnan(v) else float(v) for v in row]
                          for row in getattr(self, name)] for name in SCORES},
                "chance": {name: None if np.isnan(v) else float(v)
                           for name, v in self.chance.items()}}

    def named(self, at_least: float = CLEAR_JOB) -> list[tuple[int, int, str, float, float]]:
        """The heads with a clear job: (layer, head, score name, score, its chance level) for
        each head whose best score is at least ``at_least`` of the way from its chance level
        to 1 (``above_chance``), the furthest first."""
        stacked = np.stack([np.nan_to_num(self.above_chance(s), nan=-np.inf) for s in SCORES])
        best, which = stacked.max(0), stacked.argmax(0)                     # (layers, heads)
        found = [(int(l), int(h), SCORES[which[l, h]],
                  float(getattr(self, SCORES[which[l, h]])[l, h]),
                  float(self.chance.get(SCORES[which[l, h]], 0.0)), float(best[l, h]))
                 for l, h in zip(*np.nonzero(best >= at_least))]
        return [row[:5] for row in sorted(found, key=lambda row: -row[5])]


class _EachLayer:
    """A recorder that hands each block's attention weights (heads, T, T) to ``reduce`` as the
    forward pass reaches it and keeps only what ``reduce`` returns: every layer in one pass,
    never more than one layer's T x T weights held (a long input's trace keeps none)."""

    def __init__(self, reduce):
        self.reduce, self.found, self.queries = reduce, [], None

    def wants_attention(self):
        return False

    def record(self, name, x):
        if name == "attn_queries":
            self.queries = x
        elif name == "attn_keys":
            # the trace's own computation (recorder.LayerAttention): the very same weights
            queries, keys = self.queries[0].float(), x[0].float()
            scores = (queries @ keys.transpose(-2, -1))[None]             # (1, heads, T, T)
            if attention_in_c(scores, queries.shape[-1]) is None:
                scores = attention_weights((queries @ keys.transpose(-2, -1))[None],
                                            queries.shape[-1])
            self.found.append(self.reduce(scores[0].cpu().numpy()))


def each_layer(model, traced: Trace, reduce) -> list:
    """``reduce(weights)`` of every layer of ``traced``, from the weights it kept, or (when it
    did not keep them all) from one forward pass over its tokens."""
    if all(layer in traced.attention for layer in range(traced.n_layers)):
        return [reduce(traced.attention[layer]) for layer in range(traced.n_layers)]
    recorder = _EachLayer(reduce)
    with torch.inference_mode(), recording(recorder):
        model(torch.tensor([traced.token_ids], device=model_device(model)),
              stop_at_layer=traced.n_layers)
    return recorder.found


def trace_scores(model, traced: Trace) -> tuple[np.ndarray, np.ndarray]:
    """The previous-token and first-token scores of ``traced``'s prompt, (layers, heads)."""
    previous, first = zip(*each_layer(model, traced, lambda w: (previous_token_scores(w),
                                                                 first_token_scores(w))))
    return np.stack(previous), np.stack(first)


def model_induction_scores(model) -> np.ndarray:
    """(layers, heads): each head's induction score on the standard test prompt."""
    cfg = model.cfg
    prompt = induction_prompt(cfg.vocab_size, cfg.context_length)
    if prompt is None:
        return np.full((cfg.n_layers, cfg.n_heads), np.nan)
    ids, n = prompt
    traced = trace(model, ids, attention_layers="all", lens=None, top_k=1, entropy=False)
    return np.stack(each_layer(model, traced, lambda w: induction_scores(w, n)))


def head_scores(model, traced: Trace, induction: np.ndarray | None = None) -> HeadScores:
    """Every score of every head: those of ``traced``'s prompt, and the model's induction
    scores (``induction``: already computed, as the app shares them per model)."""
    previous, first = trace_scores(model, traced)
    if induction is None:
        induction = model_induction_scores(model)
    prompt = induction_prompt(model.cfg.vocab_size, model.cfg.context_length)
    return HeadScores(previous=previous, first=first, induction=induction,
                      chance=chance_levels(len(traced.token_ids), prompt and prompt[1]))
