"""A forward pass that records what happens inside the model, as plain data (a ``Trace``).

Where each statistic is measured: ``explorer.book.probe_points.PROBE_POINTS``, the one table that
the model, the probes and the views read. A model without normalisation has no ``ln*`` points.
Recording happens only inside ``trace``; raw activations are reduced to statistics as they are
recorded (``recorder.Recorder``), so memory stays bounded.

The attention weights come from ``attn_queries`` and ``attn_keys`` (each block's queries and keys
after RoPE, cached keys included): the forward pass keeps PyTorch's fused attention, and the
weights are recomputed from those by the book's steps (``attention.attention_weights``).
"""
from __future__ import annotations

import time
from dataclasses import replace

import numpy as np
import torch

from ..book.errors import ExplorerError, Text
from ..book.model import GPTModel, model_device
from ..book.probe_points import current_editor, edit, recording
from ..book.tokenizer import as_token_ids, get_tokenizer
from .data import ATTENTION_ALL_LAYERS_MAX_TOKENS, Trace
from .recorder import LayerAttention, Recorder
from .vocabulary import logit_lens


def trace(model: GPTModel, token_ids, *, attention_layers="auto", lens="last", top_k=5,
          keep_logits=False, entropy=True, tokenizer=None) -> Trace:
    """Run one forward pass over ``token_ids`` and record what happens inside.

    attention_layers: "auto" (every layer up to ``ATTENTION_ALL_LAYERS_MAX_TOKENS`` tokens,
        none beyond), "all", None, or a list of layer indices.
    entropy: per-head attention entropy for every layer (its weights are computed for it).
        False: NaN entropy for the layers whose weights are not kept (for a view that needs
        neither, like the logit lens).
    lens: the logit lens (final norm + output head on every block's output) at the "last"
        position, at "all" positions, None, or a list of positions. Reading it at every
        position runs the vocabulary-wide head once per layer, which costs more than the
        forward pass itself for GPT-2-sized vocabularies.

    The blocks run as in a plain forward (``stop_at_layer=n_layers``); the final norm and the
    output head then run here, the head once on the final norm's output for every position
    together with the few lens rows (``Recorder.head``). The logits are therefore the model's
    ``out_head(final_norm(x))`` as in a plain forward, and the lens costs a few more rows of
    that one product.

    Inside ``intervening(model, ...)`` (``explorer.probes.intervening``) everything recorded is
    what the model goes on with under the intervention, the logit lens included.
    """
    cfg = model.cfg
    ids = _check_ids(token_ids, cfg)
    n = len(ids)
    keep_layers = _attention_layers(attention_layers, n, cfg.n_layers)
    positions = _lens_positions(lens, n)
    if isinstance(top_k, bool) or not isinstance(top_k, int) or not 1 <= top_k <= cfg.vocab_size:
        raise ExplorerError("trace.top_k", "top_k must be between 1 and {vocab_size} (got "
                            "{top_k!r}).", vocab_size=cfg.vocab_size, top_k=top_k)
    tokenizer = tokenizer or get_tokenizer()

    started = time.perf_counter()
    recorder = Recorder(model, keep_layers, positions, n, top_k, keep_logits, entropy)
    device = model_device(model)
    with torch.inference_mode(), recording(recorder):
        x = model(torch.tensor([ids], device=device), stop_at_layer=cfg.n_layers)
        # GPTModel.forward's last steps, with their probe points: final_norm, then out_head.
        normed = model.final_norm(recorder.record_final("final_norm_in", edit("final_norm_in", x)))
        normed = recorder.record_final("final_norm_out", edit("final_norm_out", normed))
        _intervened_lens(recorder, positions)
        recorder.head(normed[0])
    with torch.inference_mode():
        next_ids, next_probs = recorder.next_ids, recorder.next_probs       # (T, k)
        lens_ids, lens_probs, lens_final = logit_lens(model, recorder, positions, next_ids,
                                                        next_probs)
        next_ids, next_probs = next_ids.cpu().numpy(), next_probs.cpu().numpy()
    out = recorder.result()
    seconds = time.perf_counter() - started

    pieces = _pieces_fn(tokenizer)
    notes = []
    if keep_layers != set(range(cfg.n_layers)) and attention_layers == "auto":
        notes.append(Text("trace.attention_layers_note", "Attention patterns are kept for the "
                          "layers asked for only beyond {limit} tokens (this input has {n}).",
                          limit=ATTENTION_ALL_LAYERS_MAX_TOKENS, n=n))
    if any(s.overall["nonfinite"].any() for s in out["points"].values()):
        notes.append(Text("trace.overflow_note",
                          "Some activations are inf or NaN: the values overflowed."))
    return Trace(
        token_ids=ids, tokens=pieces(ids), config=cfg.to_dict(),
        points=out["points"], final=out["final"], attention=out["attention"],
        attention_entropy=out["entropy"],
        next_ids=next_ids, next_probs=next_probs,
        next_texts=pieces(next_ids),
        lens_positions=positions, lens_ids=lens_ids, lens_probs=lens_probs,
        lens_final_probs=lens_final,
        lens_texts=pieces(lens_ids),
        seconds=seconds, logits=recorder.logits.float().cpu().numpy() if keep_logits else None,
        notes=notes)


def _intervened_lens(recorder, positions):
    """Under an intervention on final_norm, the lens rows go through the final norm as
    intervened (``Editor.lens_norm``), here, in place."""
    editor = current_editor()
    rows = recorder.lens_inputs[:-1]                          # (layers - 1, P, emb)
    normed = editor.lens_norm(rows, positions) if editor is not None and rows.numel() else None
    if normed is not None:
        rows.copy_(normed)
        recorder.lens_norm = _already_normed


def _already_normed(rows):
    return rows


def with_attention_of_layer(model: GPTModel, traced: Trace, layer: int) -> Trace:
    """``traced`` with the attention weights of ``layer`` (heads, T, T) in place of any it
    kept: for long inputs, whose trace keeps none. Runs the blocks up to ``layer`` only, so
    layer 0 of a 1,024-token prompt costs a twelfth of a forward pass of GPT-2 small, and a
    session never holds more than one layer of T x T weights."""
    layer = next(iter(_attention_layers([layer], len(traced.token_ids), model.cfg.n_layers)))
    recorder = LayerAttention(layer)
    with torch.inference_mode(), recording(recorder):
        model(torch.tensor([traced.token_ids], device=model_device(model)),
              stop_at_layer=layer + 1)
    return replace(traced, attention={layer: recorder.weights.numpy()})


def _check_ids(token_ids, cfg) -> list[int]:
    if isinstance(token_ids, torch.Tensor):
        token_ids = token_ids.flatten()
    ids = as_token_ids(token_ids)
    if not ids:
        raise ExplorerError("prompt.no_tokens", "The prompt has no tokens: type some text first.")
    if len(ids) > cfg.context_length:
        raise ExplorerError("trace.prompt_too_long", "The prompt has {n_tokens} tokens but this "
                            "model's context_length is {context_length}. Shorten it to at most "
                            "{context_length} tokens.", n_tokens=len(ids),
                            context_length=cfg.context_length)
    bad = [t for t in ids if not 0 <= t < cfg.vocab_size]
    if bad:
        raise ExplorerError("tokens.outside_vocabulary", "Token id {bad} is outside this model's "
                            "vocabulary (0 ... {last}).", bad=bad[0], last=cfg.vocab_size - 1)
    return ids


def _attention_layers(choice, n_tokens, n_layers) -> set[int]:
    if choice is None:
        return set()
    if choice == "all":
        return set(range(n_layers))
    if choice == "auto":
        return set(range(n_layers)) if n_tokens <= ATTENTION_ALL_LAYERS_MAX_TOKENS else set()
    layers = [choice] if isinstance(choice, int) else list(choice)
    for layer in layers:
        if isinstance(layer, bool) or not isinstance(layer, int) or not 0 <= layer < n_layers:
            raise ExplorerError("trace.no_layer", "Layer {layer!r} does not exist: this model "
                                "has layers 0 to {last}.", layer=layer, last=n_layers - 1)
    return set(layers)


def _lens_positions(choice, n_tokens) -> list[int]:
    if choice is None:
        return []
    if choice == "last":
        return [n_tokens - 1]
    if choice == "all":
        return list(range(n_tokens))
    positions = [choice] if isinstance(choice, int) else list(choice)
    for p in positions:
        if isinstance(p, bool) or not isinstance(p, int) or not 0 <= p < n_tokens:
            raise ExplorerError("trace.no_position", "Position {position!r} does not exist: the "
                                "input has positions 0 to {last}.", position=p, last=n_tokens - 1)
    return positions


def _pieces_fn(tokenizer):
    """ids (a list, or a 2-D array) -> their text pieces, in the same shape; an id beyond the
    tokenizer's vocabulary (a model with a larger vocab_size) shows as "<id N>"."""
    def pieces(ids):
        if isinstance(ids, np.ndarray) and ids.ndim == 2:
            flat, width = pieces(ids.ravel().tolist()), ids.shape[1]
            return [flat[row * width:(row + 1) * width] for row in range(ids.shape[0])]
        if all(i < tokenizer.n_vocab for i in ids):
            return tokenizer.token_texts(ids)              # one call for all of them
        return [tokenizer.token_text(i) if i < tokenizer.n_vocab else f"<id {i}>" for i in ids]
    return pieces
