"""Which parts matter: for a text, how much the mean next-token loss and the mean probability of
the actual next tokens change when one part of the model is knocked out, for every part.

- Heads: each head of each block zeroed on its own (``zero trf_blocks[l].att head h``): a
  layers x heads map.
- Parts: each block's ``att`` and ``ff`` skipped, ``norm1`` and ``norm2`` replaced by the
  identity, and both ``shortcut`` connections removed, one at a time: bars per block (NaN
  where the model has no such part: no norms in a no-norm model, no shortcut when it is off).

The loss is the book's: the mean cross-entropy (in nats) of positions 0 .. T-2 predicting the
tokens 1 .. T-1; the probability is the mean over the same positions of the probability of the
token that actually comes next. Each figure is the knocked-out model's minus the model's own.

How it runs: one clean forward pass keeps the residual stream entering every block. A knock-out
in block l changes nothing before it, so its copies start there, from that stream: the copies
of one block's knock-outs (one per head, or one per part) go through blocks l .. L-1 as one
batch, each copy carrying its own knock-out (``Editor(rows=)``), and the output head scores
them ``SCORE_ROWS`` positions at a time. The same numbers as running each knock-out alone
through the whole model (to float rounding), for (L - l) blocks instead of L.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from ..book.errors import ExplorerError
from ..book.model import model_device
from ..book.probe_points import editing, is_intervening, recording
from .budget import (SCORE_ROWS, importance_peak_bytes, largest_importance_batch,
                     longest_importance)
from .intervening import Editor
from .interventions import Intervention
from .tracing import _check_ids

PARTS = ("att", "ff", "norm1", "norm2", "shortcut")      # the bars of a block, by the book's names
PART_KINDS = {"att": "zero_att", "ff": "zero_ff", "norm1": "identity_norm1",
              "norm2": "identity_norm2", "shortcut": "remove_shortcut"}


@dataclass
class Importance:
    token_ids: list[int]
    clean_loss: float              # the model's own mean next-token loss (nats)
    clean_prob: float              # ... and mean probability of the actual next tokens
    head_loss: np.ndarray | None   # (layers, heads): loss with that head zeroed - clean_loss
    head_prob: np.ndarray | None   # (layers, heads): mean probability - clean_prob
    part_loss: np.ndarray | None   # (layers, len(PARTS)), NaN where there is no such part
    part_prob: np.ndarray | None
    batch: int                     # copies that went through the model at once
    seconds: float
    layer_labels: list[str]        # the rows, by the book's names: "trf_blocks[0]", ...
    parts: tuple[str, ...] = PARTS

    @staticmethod
    def head_intervention(layer: int, head: int) -> Intervention:
        """The knock-out of one cell of the map (to apply it: ``intervening``)."""
        return Intervention("zero_heads", layer, (head,))

    @staticmethod
    def part_intervention(layer: int, part: str) -> Intervention:
        """The knock-out of one bar."""
        return Intervention(PART_KINDS[part], layer)


def block_parts(cfg) -> list[str]:
    """The parts of ``PARTS`` that a block of this config has."""
    return [p for p in PARTS if not (p.startswith("norm") and cfg.norm_placement == "none")
            and not (p == "shortcut" and not cfg.shortcut)]


def map_ids(token_ids, cfg) -> list[int]:
    """The text's ids, checked for a map of which parts matter (exact or estimated): at least
    2 tokens (each predicts the next), and no intervention in force (the map makes its own)."""
    ids = _check_ids(token_ids, cfg)
    if len(ids) < 2:
        raise ExplorerError("importance.too_short", "Which parts matter is measured by how "
                            "well each token predicts the next one: give at least 2 tokens.")
    if is_intervening():
        raise ExplorerError("importance.inside_intervention", "The map of which parts matter "
                            "knocks out parts of the model itself: compute it outside an "
                            "intervention.")
    return ids


def check_finite_loss(loss: float) -> float:
    """The model's own loss on the text, refused when its activations overflow (inf or NaN):
    no knock-out can be measured against it."""
    if not math.isfinite(loss):
        raise ExplorerError("importance.not_finite", "The model's loss on this text is "
                            "{loss}: its activations overflow (inf or NaN), so no knock-out "
                            "can be measured against it. The Inside tab shows where they "
                            "overflow; use other weights or a smaller scale.", loss=loss)
    return loss


def importance(model, token_ids, *, heads=True, parts=True, batch=None, max_bytes=None,
               progress=None, stop=None) -> Importance:
    """The map of which parts matter for ``token_ids`` (see the module's docstring).

    batch: copies per batch (default: every head of a block, or every part, within
        ``max_bytes``); max_bytes: the memory it may use beyond the model (None: no limit;
        the app gives the trace's share of its budget): a larger request is refused with the
        largest that fits; progress: called as ``progress(done, total)`` knock-outs;
        stop: asked between batches (``stop()``); True ends the map early with an
        ExplorerError (nobody waits for it any more: its session left).
    """
    cfg = model.cfg
    ids = map_ids(token_ids, cfg)
    kept = block_parts(cfg) if parts else []
    widest = max(cfg.n_heads if heads else 0, len(kept), 1)
    batch = _batch_size(cfg, len(ids), batch, widest, max_bytes)
    total = cfg.n_layers * ((cfg.n_heads if heads else 0) + len(kept))
    done = 0
    started = time.perf_counter()
    device = model_device(model)
    with torch.inference_mode():
        streams, normed = _clean_run(model, ids)
        targets = torch.tensor(ids[1:], device=device)
        clean_loss, clean_prob = (float(v[0]) for v in _scores(model, normed, targets))
        check_finite_loss(clean_loss)
        maps = {"head": (None, None), "part": (None, None)}
        for which in [w for w, wanted in (("head", heads), ("part", parts)) if wanted]:
            width = cfg.n_heads if which == "head" else len(PARTS)
            loss = np.full((cfg.n_layers, width), np.nan)       # NaN: no such part
            prob = loss.copy()
            for layer in range(cfg.n_layers):
                cells = _knock_outs(cfg, which, layer, kept)
                for first in range(0, len(cells), batch):
                    if stop is not None and stop():
                        raise ExplorerError("importance.stopped", "The map was stopped after "
                                            "{done} of {total} knock-outs: nobody waits for it "
                                            "any more.", done=done, total=total)
                    columns, items = zip(*cells[first:first + batch])
                    ablated_loss, ablated_prob = _run_from(model, layer, streams[layer],
                                                           items, targets)
                    loss[layer, list(columns)] = ablated_loss.cpu().numpy() - clean_loss
                    prob[layer, list(columns)] = ablated_prob.cpu().numpy() - clean_prob
                    done += len(items)
                    if progress is not None:
                        progress(done, total)
            maps[which] = (loss, prob)
    return Importance(ids, clean_loss, clean_prob, *maps["head"], *maps["part"], batch=batch,
                      seconds=time.perf_counter() - started,
                      layer_labels=[f"trf_blocks[{layer}]" for layer in range(cfg.n_layers)])


def _knock_outs(cfg, which, layer, kept):
    """(column, Intervention) of each knock-out of one block: its heads, or its parts."""
    if which == "head":
        return [(h, Intervention("zero_heads", layer, (h,))) for h in range(cfg.n_heads)]
    return [(PARTS.index(p), Intervention(PART_KINDS[p], layer)) for p in kept]


def _batch_size(cfg, n_tokens, batch, widest, max_bytes) -> int:
    if batch is not None and (isinstance(batch, bool) or not isinstance(batch, int)
                              or batch < 1):
        raise ExplorerError("importance.batch", "batch must be a whole number ≥ 1 (got "
                            "{batch!r}).", batch=batch)
    wanted = min(batch or widest, widest)
    if max_bytes is None or importance_peak_bytes(cfg, n_tokens, wanted) <= max_bytes:
        return wanted
    fits = largest_importance_batch(cfg, n_tokens, max_bytes, wanted)
    if fits and batch is None:
        return fits
    need = importance_peak_bytes(cfg, n_tokens, wanted if fits else 1) / 2 ** 20
    if fits:
        raise ExplorerError("importance.batch_too_large", "{batch} copies of {n:,} tokens at "
                            "once need about {need:,.0f} MB, but the map may use {allowed:,.0f} "
                            "MB: use at most {most} copies at once.", batch=wanted, n=n_tokens,
                            need=need, allowed=max_bytes / 2 ** 20, most=fits)
    raise ExplorerError("importance.too_large", "The map of which parts matter over {n:,} "
                        "tokens needs about {need:,.0f} MB even one copy at a time, but it may "
                        "use {allowed:,.0f} MB. Use a text of at most {most:,} tokens.",
                        n=n_tokens, need=need, allowed=max_bytes / 2 ** 20,
                        most=longest_importance(cfg, max_bytes))


class _Entering:
    """Keeps the residual stream entering each block."""

    def __init__(self):
        self.streams = []

    def wants_attention(self):
        return False

    def record(self, name, x):
        if name == "resid_pre":
            self.streams.append(x)


def _clean_run(model, ids):
    """The stream entering every block, (1, T, emb) each, and the final norm's output."""
    entering = _Entering()
    with recording(entering):
        x = model(torch.tensor([ids], device=model_device(model)),
                  stop_at_layer=model.cfg.n_layers)
    return entering.streams, model.final_norm(x)


def _run_from(model, layer, entering, items, targets):
    """Copies of the stream entering block ``layer``, copy i with knock-out ``items[i]``,
    through the rest of the model: their (loss, probability), (copies,) each."""
    editor = Editor(model, items, rows=range(len(items)))
    x = entering.expand(len(items), -1, -1)
    with editing(editor):
        editor.start_at(layer)
        for block in model.trf_blocks[layer:]:
            x = block(x)
    return _scores(model, model.final_norm(x), targets)


def _scores(model, normed, targets):
    """Mean next-token loss (the book's cross-entropy) and mean probability of the actual next
    tokens, (copies,) each, from the final norm's output (copies, T, emb): the output head
    ``SCORE_ROWS`` positions at a time, the last position left out (it has no next token)."""
    copies, n_tokens, emb = normed.shape
    rows = normed[:, :-1].reshape(-1, emb)
    wanted = targets.repeat(copies)
    losses = torch.cat([
        F.cross_entropy(model.out_head(rows[start:start + SCORE_ROWS]).float(),
                        wanted[start:start + SCORE_ROWS], reduction="none")
        for start in range(0, rows.shape[0], SCORE_ROWS)]).view(copies, n_tokens - 1)
    return losses.mean(dim=1), torch.exp(-losses).mean(dim=1)
