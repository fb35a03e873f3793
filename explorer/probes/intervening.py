"""Running a shared model with interventions: ``intervening(model, interventions)`` makes every
forward pass inside it (a plain ``model(ids)``, ``trace``, ``generate_steps`` with its KV cache)
go on with edited values at the model's probe points, for this thread/context only. The model
is not touched: no hook, no flag, no copied weight, so other sessions running it at the same
moment see nothing. Nobody intervening costs one context-variable lookup per probe point; an
empty ``Interventions`` sets nothing at all (the C decoding step keeps running). The C step has
no probe points, so it steps aside while an intervention is active; the fused attention reaches
the same probe points as the book's and keeps running, so what an intervention leaves alone
keeps the very numbers of the model without it.

Where each kind acts (the probe points of ``explorer.book.probe_points``; eval mode, so the
dropouts are the identity):

- ``zero`` heads: ``attn_context`` (b, T, heads, head_dim), those heads set to 0, i.e. their
  share of ``out_proj``'s input; out_proj's bias stays.
- ``mean`` heads: each of those heads' context vectors at position t replaced by its mean
  over positions 0 .. t of the same input (a running mean: position 0 keeps its own value).
  Causal, so generating with the KV cache gives what recomputing every step gives.
- ``zero`` att / ff: ``attn_out`` / ``ff_out`` set to 0 (the sub-layer skipped; the shortcut
  and, post-LN, the norm still apply).
- ``identity`` norm1 / norm2 / final_norm: the norm's output is its input.
- ``freeze`` norm1 / norm2 / final_norm: the book's formula ``scale * (x - mean) / sqrt(var +
  eps) + shift`` with each token's own mean and variance replaced by their averages over
  positions 0 .. t of the same input: every token is divided by (nearly) the same number
  instead of its own, so the norm no longer rescales token by token. Causal, as above.
- ``remove`` shortcut: the sum ``sublayer + shortcut`` becomes the sub-layer's output alone
  (pre-LN and no-norm: at ``resid_mid`` / ``resid_post``; post-LN: at ``ln1_in`` / ``ln2_in``).
- ``relu`` ff: ``ff_post`` = ReLU(``ff_pre``) instead of the model's activation.
- ``zero`` pos_emb: ``pos_emb`` set to 0 (only the token embedding enters the blocks).
- ``patch`` (activation patching): the value at ``attn_context`` (those heads), ``attn_out``,
  ``ff_out`` or ``resid_pre`` replaced by the same point's value in a run of the model on the
  intervention's ``source`` ids (the clean prompt; run once, when the editor is made, with
  nobody listening), at every position the two runs share or at its one ``position``.
  Positions the clean prompt does not have (a longer prompt, generated tokens) keep their own.
"""
from __future__ import annotations

from contextlib import contextmanager
from itertools import repeat

import torch

from ..book.errors import ExplorerError
from ..book.probe_points import alone, editing, recording
from .interventions import Interventions

_MODEL_POINTS = frozenset({"positions", "pos_emb", "final_norm_in", "final_norm_out"})
_ZEROED = {"zero_att": "attn_out", "zero_ff": "ff_out", "zero_pos_emb": "pos_emb"}
PATCHED = {"patch_heads": "attn_context", "patch_att": "attn_out", "patch_ff": "ff_out",
           "patch_resid": "resid_pre"}


class _Keeper:
    """A recorder that keeps the values of some (layer, point) places of one pass, batch row 0
    (T, ...) each."""

    def __init__(self, places):
        self.places, self.layer, self.values = set(places), -1, {}

    def wants_attention(self):
        return False

    def record(self, name, x):
        if name == "resid_pre":
            self.layer += 1
        if (self.layer, name) in self.places:
            self.values[(self.layer, name)] = x[0].detach()


def clean_values(model, ids, places) -> dict:
    """{(layer, point): (T, ...)}: the values at ``places`` of a plain run of ``model`` on
    ``ids``, whatever listens or intervenes around the call."""
    keeper = _Keeper(places)
    last = max((layer for layer, _ in keeper.places), default=-1) + 1
    with alone(), recording(keeper), torch.no_grad():
        model(torch.tensor([list(ids)], device=model.tok_emb.weight.device),
              stop_at_layer=max(last, 1))
    return keeper.values


@contextmanager
def intervening(model, interventions):
    """Forward passes of ``model`` inside this block run with ``interventions`` (an
    ``Interventions``, one ``Intervention``, a list, or the string form), checked against the
    model first. Yields the ``Editor`` (None for no intervention: then nothing is set)."""
    interventions = Interventions.of(interventions).check(model.cfg)
    if not interventions:
        yield None
        return
    with editing(Editor(model, interventions)) as editor:
        yield editor


def intervened_steps(model, interventions, steps):
    """``steps`` (a ``generate_steps`` generator of ``model``) with ``interventions`` active
    while each step is computed, whichever thread asks for it: one editor for the whole
    generation keeps the running means that the KV cache's steps continue. Checked at once."""
    interventions = Interventions.of(interventions).check(model.cfg)
    if not interventions:
        return steps
    editor = Editor(model, interventions)

    def run():
        while True:
            with editing(editor):
                step = next(steps, None)
            if step is None:
                return
            yield step
    return run()


class Editor:
    """Applies interventions at the probe points of one model's forward passes (an editor of
    ``explorer.book.probe_points``). It follows the pass: ``positions`` starts one (and says
    where: after the KV cache's tokens, whose running sums it keeps), ``resid_pre`` starts each
    block. One editor serves one context at a time; ``intervening`` makes a new one each time.

    ``rows`` (for ``importance``): the batch row each intervention applies to (None: all), so
    that the copies of one batch can each carry another knock-out. ``clean``: patches' clean
    values already at hand, {source ids: {(layer, point): (T, ...)}} (``clean_values``);
    those missing are computed here, one run per clean prompt."""

    def __init__(self, model, interventions, rows=None, clean=None):
        cfg = model.cfg
        if model.training:
            raise ExplorerError("intervention.training", "Interventions run at inference: put "
                                "the model in eval mode first (model.eval()).")
        self.model, self.n_heads = model, cfg.n_heads
        self.post = cfg.norm_placement == "post"
        self.actions: dict[tuple, list] = {}     # (layer or None, point) -> edits, in order
        self.keep: set[tuple] = set()            # values that a later edit of the block reads
        self.zeroed: dict[int, list] = {}        # layer -> [(row, heads)] to set to 0
        self.final_norm_kind = None
        self.clean = dict(clean or {})
        self.patched: dict[tuple, set] = {}      # source -> the places its patches read
        for item, row in zip(interventions, repeat(None) if rows is None else rows):
            for layer in item.layers(cfg.n_layers) or [None]:
                self._plan(item, layer, row)
        for source, places in self.patched.items():
            have = self.clean.get(source, {})
            if not places <= set(have):
                self.clean[source] = {**have, **clean_values(model, source, places - set(have))}
        self.layer, self.start = -1, 0
        self.saved: dict[str, torch.Tensor] = {}
        self.sums: dict[tuple, tuple] = {}       # running sums of the running means
        self.final_stats = None                  # the frozen final_norm's (mean, var)

    # -- the plan: which edit at which probe point ------------------------------------------
    def _plan(self, item, layer, row):
        kind = item.kind
        if kind == "zero_heads":                 # one mask for all of a block's zeroed heads
            if layer not in self.zeroed:
                self._at(layer, "attn_context", lambda x, l=layer: self._zero_heads(l, x))
            self.zeroed.setdefault(layer, []).append((row, list(item.heads)))
        elif kind == "mean_heads":
            self._at(layer, "attn_context", _on_rows(
                lambda x, l=layer, h=list(item.heads): self._mean_heads(l, h, x), row))
        elif kind in PATCHED:
            point = PATCHED[kind]
            self.patched.setdefault(item.source, set()).add((layer, point))
            self._at(layer, point, _on_rows(
                lambda x, i=item, l=layer, p=point: self._patch(i, l, p, x), row))
        elif kind in _ZEROED:
            self._at(layer, _ZEROED[kind], _on_rows(torch.zeros_like, row))
        elif kind == "relu_ff":
            self.keep.add((layer, "ff_pre"))
            self._at(layer, "ff_post", _on_rows(lambda x: torch.relu(self.saved["ff_pre"]), row))
        elif kind.startswith(("identity_", "freeze_")):
            self._plan_norm(kind, layer, row)
        else:                                    # remove_shortcut, remove_att/ff_shortcut
            sums = {"att": ("attn_out", "ln1_in" if self.post else "resid_mid"),
                    "ff": ("ff_out", "ln2_in" if self.post else "resid_post")}
            for sub, (output, total) in sums.items():
                if kind in ("remove_shortcut", f"remove_{sub}_shortcut"):
                    self.keep.add((layer, output))           # the sum becomes the output
                    self._at(layer, total, _on_rows(lambda x, o=output: self.saved[o], row))

    def _plan_norm(self, kind, layer, row):
        norm = kind.split("_", 1)[1]                          # norm1, norm2 or final_norm
        point = {"norm1": "ln1", "norm2": "ln2", "final_norm": "final_norm"}[norm]
        self.keep.add((layer, point + "_in"))
        if norm == "final_norm":
            self.final_norm_kind, module = kind, self.model.final_norm
        else:
            module = getattr(self.model.trf_blocks[layer], norm)
        if kind.startswith("identity_"):
            fn = (lambda x: self.saved[point + "_in"])
        else:
            fn = (lambda x: self._frozen((layer, point), self.saved[point + "_in"], module))
        self._at(layer, point + "_out", _on_rows(fn, row))

    def _at(self, layer, point, fn):
        self.actions.setdefault((layer, point), []).append(fn)

    # -- following the forward pass ---------------------------------------------------------
    def edit(self, name, x):
        if name == "positions":
            self._begin(int(x[0]) if x.numel() else 0)
            return x
        if name == "resid_pre":
            self.layer += 1
            self.saved = {}
        key = (None if name in _MODEL_POINTS else self.layer, name)
        actions = self.actions.get(key)
        if actions is not None:
            for act in actions:
                x = act(x)
        if key in self.keep:
            self.saved[name] = x
        return x

    def _begin(self, start):
        """A forward pass whose first token is at ``start`` (0: a fresh one)."""
        if start == 0:
            self.sums = {}
        self.layer, self.start, self.saved = -1, start, {}

    def start_at(self, layer):
        """A fresh pass that begins at block ``layer`` (the residual stream given to it)."""
        self._begin(0)
        self.layer = layer - 1

    # -- the edits ------------------------------------------------------------------------
    def _zero_heads(self, layer, x):                       # x: (b, T, heads, head_dim)
        keep = torch.ones(x.shape[0], 1, self.n_heads, 1, dtype=x.dtype, device=x.device)
        for row, heads in self.zeroed[layer]:
            keep[slice(None) if row is None else row, :, heads] = 0
        return x * keep

    def _mean_heads(self, layer, heads, x):
        out = x.clone()
        out[:, :, heads] = self._running_mean((layer, "heads", tuple(heads)), x[:, :, heads])
        return out

    def _patch(self, item, layer, point, x):
        """x (b, n, ...) at positions start .. start + n - 1: those the clean run has (or its
        one ``position``) replaced by the clean run's values (only ``heads``, at a head)."""
        clean = self.clean[item.source][(layer, point)]                    # (T_clean, ...)
        first, last = self.start, min(self.start + x.shape[1], clean.shape[0])
        if item.position is not None:
            first, last = max(first, item.position), min(last, item.position + 1)
        if first >= last:
            return x
        out = x.clone()
        where = slice(first - self.start, last - self.start)
        if item.heads:
            heads = list(item.heads)
            out[:, where, heads] = clean[first:last][:, heads].to(out.dtype)
        else:
            out[:, where] = clean[first:last].to(out.dtype)
        return out

    def _frozen(self, key, x, norm):
        """The book's LayerNorm with each token's mean and variance replaced by their running
        averages over the positions so far."""
        stats = torch.stack([x.mean(dim=-1), x.var(dim=-1, unbiased=False)], dim=-1)
        mean, var = self._running_mean(key, stats).unbind(-1)           # (b, T) each
        if key[1] == "final_norm":
            self.final_stats = (mean, var)
        norm_x = (x - mean[..., None]) / torch.sqrt(var[..., None] + norm.eps)
        return norm.scale * norm_x + norm.shift

    def _running_mean(self, key, values):
        """values (b, T, ...) -> at each position t, the mean of values over positions 0 .. t,
        those before this pass (the KV cache's) included through their kept sum."""
        total, count = self.sums.get(key, (None, 0))
        if count != self.start:
            raise RuntimeError(f"running mean {key}: {count} positions kept, but this pass "
                               f"starts at {self.start} (one editor for two generations?)")
        sums = values.cumsum(dim=1)
        if total is not None:
            sums = sums + total.unsqueeze(1)
        n = values.shape[1]
        counts = torch.arange(count + 1, count + n + 1, dtype=values.dtype, device=values.device)
        self.sums[key] = (sums[:, -1], count + n)
        return sums / counts.view(1, n, *[1] * (values.dim() - 2))

    def lens_norm(self, rows, positions):
        """The final norm as intervened, on the logit lens's rows (layers, P, emb) at
        ``positions`` of batch row 0; None when it is not intervened. A frozen final norm
        uses, at each position, the constants it used on the model's own last stream."""
        if self.final_norm_kind is None:
            return None
        if self.final_norm_kind == "identity_final_norm":
            return rows
        norm = self.model.final_norm
        mean, var = (s[0, positions][:, None] for s in self.final_stats)    # (P, 1)
        return norm.scale * ((rows - mean) / torch.sqrt(var + norm.eps)) + norm.shift


def _on_rows(fn, row):
    """``fn`` applied to batch row ``row`` only (all rows when None)."""
    if row is None:
        return fn

    def on_row(x):
        out = x.clone()
        out[row] = fn(x)[row]
        return out
    return on_row
