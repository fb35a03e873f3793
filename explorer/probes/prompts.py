"""A prompt as the token ids a model can take: text, within the explorer's limit, within each
model's vocabulary and, for two models ("A" and "B"), within each one's context window."""
from __future__ import annotations

from ..book.errors import ExplorerError
from ..book.tokenizer import get_tokenizer
from .compare import NAMES

MAX_PROMPT_CHARS = 20_000     # (the README quotes it)


def prompt_text(prompt) -> str:
    if not isinstance(prompt, str):
        raise ExplorerError("prompt.not_text", "The prompt must be text.")
    return prompt


def prompt_ids(prompt, model=None, name: str | None = None) -> list[int]:
    """The prompt's token ids, within ``model``'s vocabulary (``name``: which model of a
    comparison, "A" or "B", for the message)."""
    if len(prompt_text(prompt)) > MAX_PROMPT_CHARS:
        raise ExplorerError("prompt.too_long", "The prompt has {n:,} characters; the explorer "
                            "takes at most {most:,}. Shorten it.", n=len(prompt),
                            most=MAX_PROMPT_CHARS)
    if not prompt.strip():
        raise ExplorerError("prompt.empty", "The prompt is empty: type some text first.")
    ids = get_tokenizer().encode(prompt)
    if model is not None and max(ids) >= model.cfg.vocab_size:
        vocab, top, n_vocab = model.cfg.vocab_size, max(ids), get_tokenizer().n_vocab
        if name is not None:
            raise ExplorerError("prompt.beyond_vocab_of", "The GPT-2 tokenizer gives this "
                                "prompt token ids up to {top:,}, but model {name}'s vocab_size "
                                "is {vocab:,} (ids 0 to {last:,}). Rebuild it with vocab_size "
                                "{n_vocab:,}, the tokenizer's.", top=top, name=name,
                                vocab=vocab, last=vocab - 1, n_vocab=n_vocab)
        raise ExplorerError("prompt.beyond_vocab", "The GPT-2 tokenizer gives this prompt "
                            "token ids up to {top:,}, but this model's vocab_size is {vocab:,} "
                            "(ids 0 to {last:,}). Rebuild with vocab_size {n_vocab:,}, the "
                            "tokenizer's.", top=top, vocab=vocab, last=vocab - 1,
                            n_vocab=n_vocab)
    return ids


def models_prompt_ids(prompt, models) -> list[int]:
    """The prompt's ids for every model of the session: within each vocabulary and, for a
    comparison, each context window (a message names the model that cannot take it)."""
    names = NAMES if len(models) == 2 else (None,)
    ids = prompt_ids(prompt, models[0], names[0])
    for name, model in zip(names, models):
        prompt_ids(prompt, model, name)
        if name is not None and len(ids) > model.cfg.context_length:
            raise ExplorerError("prompt.beyond_context_of", "The prompt has {n} tokens but "
                                "model {name}'s context_length is {most}: shorten it to at "
                                "most {most} tokens to compare the two.", n=len(ids),
                                name=name, most=model.cfg.context_length)
    return ids
