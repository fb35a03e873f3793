"""Text generation: the book's ``generate_text_simple`` and a step-by-step generator for the
explorer that reports, for every new token, what the model considered."""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import torch

from .errors import ExplorerError
from .kv_cache import KVCache
from .model import GPTModel, model_device
from .tokenizer import EOT_ID, as_token_ids, get_tokenizer


def generate_text_simple(model, idx, max_new_tokens, context_size):
    """The book's greedy decoding (listing 4.8): no cache, the context cropped each step."""
    # idx is (batch, n_tokens) array of indices in the current context
    for _ in range(max_new_tokens):
        # Crop current context if it exceeds the supported context size
        idx_cond = idx[:, -context_size:]
        with torch.no_grad():
            logits = model(idx_cond)
        # Focus only on the last time step: (batch, n_token, vocab_size) -> (batch, vocab_size)
        logits = logits[:, -1, :]
        probas = torch.softmax(logits, dim=-1)
        idx_next = torch.argmax(probas, dim=-1, keepdim=True)  # (batch, 1)
        idx = torch.cat((idx, idx_next), dim=1)                # (batch, n_tokens+1)
    return idx


@dataclass
class Step:
    """One generated token and the distribution it was chosen from."""

    index: int                 # 0 for the first new token
    token_id: int
    text: str                  # this token's piece of text
    prob: float                # probability of the chosen token
    rank: int                  # 1 = the most likely token
    entropy_bits: float        # entropy of the next-token distribution
    top_ids: list[int] = field(default_factory=list)      # the top-k candidates, most likely first
    top_texts: list[str] = field(default_factory=list)
    top_probs: list[float] = field(default_factory=list)
    seconds: float = 0.0       # model forward + choice for this token
    cached: bool = True        # False when the window slid and everything was recomputed
    fast_step: bool = False    # True when the caller's ``step`` computed this token's logits


def check_generation_args(max_new_tokens, temperature=0.0, top_k=None, seed=None,
                          vocab_size=None, show_top=10):
    """Raise a ValueError a student can act on for any unusable argument."""
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) \
            or max_new_tokens < 0:
        raise ExplorerError("generate.max_new_tokens", "max_new_tokens must be a whole number ≥ "
                            "0 (got {max_new_tokens!r}).", max_new_tokens=max_new_tokens)
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) \
            or not math.isfinite(temperature) or temperature < 0:
        raise ExplorerError("generate.temperature", "temperature must be a finite number ≥ 0; 0 "
                            "means greedy decoding (got {temperature!r}).",
                            temperature=temperature)
    if top_k is not None:
        if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1:
            raise ExplorerError("generate.top_k", "top_k must be a whole number ≥ 1, or empty "
                                "for no limit (got {top_k!r}).", top_k=top_k)
        if vocab_size is not None and top_k > vocab_size:
            raise ExplorerError("generate.top_k_too_large", "top_k ({top_k}) is larger than the "
                                "vocabulary ({vocab_size} tokens); use at most {vocab_size}, or "
                                "leave it empty.", top_k=top_k, vocab_size=vocab_size)
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)
                             or not 0 <= seed < 2 ** 63):
        raise ExplorerError("seed.not_whole", "seed must be a whole number ≥ 0 (got {seed!r}).",
                            seed=seed)
    if isinstance(show_top, bool) or not isinstance(show_top, int) or show_top < 1:
        raise ExplorerError("generate.show_top", "show_top must be a whole number ≥ 1 (got "
                            "{show_top!r}).", show_top=show_top)


def generate_steps(model: GPTModel, token_ids, max_new_tokens: int, *, temperature=0.0,
                   top_k=None, seed=None, stop_at_eot=False, show_top=10, use_cache=True,
                   tokenizer=None, step=None, summarize=None):
    """Generate up to ``max_new_tokens`` tokens after ``token_ids``, yielding a ``Step`` each.

    Greedy by default (the book); ``temperature > 0`` samples, optionally from the ``top_k``
    most likely tokens, with ``seed`` making it repeatable. The KV cache serves every token
    until the context window is full; after that the window slides as in the book (the last
    ``context_length`` tokens are recomputed each step). Arguments are checked here, before
    the first token, so a bad one fails at once.

    A faster computation of the same numbers may be handed in by the caller:
    ``step(model, token_id, cache)`` for the logits (1, 1, vocab) of one token after the cached
    ones (advancing the cache as the model does), and ``summarize(logits, k)`` for the greedy
    choice's (top ids, top probabilities, entropy in bits). Either returns None where it does
    not apply, and the model's own forward pass and PyTorch's steps run instead.
    """
    cfg = model.cfg
    token_ids = as_token_ids(token_ids)
    if not token_ids:
        raise ExplorerError("prompt.no_tokens", "The prompt has no tokens: type some text first.")
    bad = [t for t in token_ids if not 0 <= t < cfg.vocab_size]
    if bad:
        raise ExplorerError("tokens.outside_vocabulary", "Token id {bad} is outside this model's "
                            "vocabulary (0 ... {last}).", bad=bad[0], last=cfg.vocab_size - 1)
    check_generation_args(max_new_tokens, temperature, top_k, seed, cfg.vocab_size, show_top)
    tokenizer = tokenizer or get_tokenizer()
    return _generate(model, token_ids, max_new_tokens, float(temperature), top_k, seed,
                     stop_at_eot, min(show_top, cfg.vocab_size), use_cache, tokenizer, step,
                     summarize)


def _generate(model, token_ids, max_new_tokens, temperature, top_k, seed, stop_at_eot,
              show_top, use_cache, tokenizer, step, summarize):
    device = model_device(model)
    context_length = model.cfg.context_length
    generator = None
    if temperature > 0:
        generator = torch.Generator(device=device)
        generator.manual_seed(seed if seed is not None else 123)
    ids = list(token_ids)
    cache = None
    fast = False
    for index in range(max_new_tokens):
        started = time.perf_counter()
        with torch.inference_mode():
            if index == 0 or cache is None or cache.pos >= context_length:
                # Prefill, or the window is full: recompute the last context_length tokens.
                window = torch.tensor([ids[-context_length:]], device=device)
                # Room for this window and the tokens still to come, within the context.
                needed = window.shape[1] + max_new_tokens - index
                cache = (KVCache(model, capacity=needed)
                         if use_cache and len(ids) < context_length else None)
                logits = model(window, cache=cache, last_only=True)
                fast = False
            else:
                # One token after the cached ones.
                logits = step(model, ids[-1], cache) if step is not None else None
                fast = logits is not None
                if logits is None:
                    logits = model(torch.tensor([[ids[-1]]], device=device), cache=cache,
                                   last_only=True)
            choice = _choose(logits[0, -1].float(), temperature, top_k, generator, show_top,
                             summarize)
        token_id, prob, rank, entropy, top_ids, top_probs = choice
        ids.append(token_id)
        yield Step(index=index, token_id=token_id, text=_piece(tokenizer, token_id),
                   prob=prob, rank=rank, entropy_bits=entropy, top_ids=top_ids,
                   top_texts=[_piece(tokenizer, t) for t in top_ids], top_probs=top_probs,
                   seconds=time.perf_counter() - started, cached=cache is not None,
                   fast_step=fast)
        if stop_at_eot and token_id == EOT_ID:
            return


def _choose(logits, temperature, top_k, generator, show_top, summarize=None):
    """Pick the next token; return it with what the views show, in one device->host copy."""
    if not torch.isfinite(logits).all():
        # (sampling would fail inside torch.multinomial, greedy decoding draw "nan %" bars)
        raise ExplorerError("generate.logits_not_finite", "The model's scores for the next token "
                            "(its logits) are not numbers (NaN or infinite): its weights are "
                            "broken, as after a training run that diverged. Build, load or train "
                            "another model.")
    if temperature > 0:
        # Shifted so the largest logit is 0 first: a tiny temperature then sends the others to
        # -inf (a greedy choice) instead of overflowing every logit to inf (NaN probabilities).
        logits = logits - logits.max()
        if temperature * torch.finfo(logits.dtype).max >= 1:
            logits = logits / temperature
        else:
            # 1/temperature overflows the logits' dtype (below about 3e-39 for float32, where
            # the division may run as a multiplication by inf, or by a temperature rounded to
            # 0: NaN either way): take the limit, the largest logits only.
            logits = torch.where(logits < 0, -torch.inf, 0.0).to(logits.dtype)
        if top_k is not None and top_k < logits.shape[-1]:
            kth = torch.topk(logits, top_k).values[-1]
            logits = torch.where(logits < kth, torch.full_like(logits, -torch.inf), logits)
        probs = torch.softmax(logits, dim=-1)
        token = torch.multinomial(probs, 1, generator=generator)[0]
    else:
        summary = summarize(logits, show_top) if summarize is not None else None
        if summary is not None:           # the caller's faster pass: the same figures
            top_ids, top_probs, entropy_bits = summary
            return top_ids[0], top_probs[0], 1, entropy_bits, top_ids, top_probs
        probs = torch.softmax(logits, dim=-1)
        token = torch.argmax(probs)
    top = torch.topk(probs, show_top)
    chosen_prob = probs[token]
    rank = (probs > chosen_prob).sum() + 1
    entropy = torch.special.entr(probs).sum() / math.log(2)  # in bits
    summary = torch.stack([token.double(), chosen_prob.double(), rank.double(), entropy.double()])
    token_id, prob, rank_f, entropy_bits = summary.tolist()
    return (int(token_id), prob, int(rank_f), entropy_bits, top.indices.tolist(),
            top.values.tolist())


def lockstep(steps_a, steps_b):
    """Two step generators (``generate_steps``) advanced together: one step of A,
    then one of B, yielded as a pair. When one stops (``<|endoftext|>``) the other goes on
    alone, paired with None. Each model keeps its own KV cache and random generator, so each
    side is exactly what it would generate by itself."""
    a, b = iter(steps_a), iter(steps_b)
    while a is not None or b is not None:
        step_a = next(a, None) if a is not None else None
        step_b = next(b, None) if b is not None else None
        a = a if step_a is not None else None
        b = b if step_b is not None else None
        if step_a is None and step_b is None:
            return
        yield step_a, step_b


def _piece(tokenizer, token_id):
    # A model may have a larger vocabulary than GPT-2's tokenizer knows (a teaching config).
    if token_id < tokenizer.n_vocab:
        return tokenizer.token_text(token_id)
    return f"<id {token_id}>"
