"""Which parts carry the answer: activation patching between a clean and a corrupted prompt.

- **The pair and the metric.** A clean prompt, a corrupted one of the same length in tokens,
  and two answer tokens (the right one, the wrong one). The metric is the logit difference
  ``logit(right) - logit(wrong)`` at the last position; a patched run is read as the **share of
  the clean result recovered**, ``(patched - corrupted) / (clean - corrupted)``: 0 is the
  corrupted run, 1 the clean one.
- **Patching** (``explorer.probes.intervening``, kinds ``patch_*``): model B = A run on the
  corrupted prompt with one part's output (a head's context vector, attention or feed-forward
  output, or the stream entering a block; every position or one) taken from the clean run. A
  patch is an intervention like any other: every view shows it as B.
- **The maps** (heads: layers x heads, each head at every position; the residual stream:
  layers x positions, the stream entering each block at one position) are first estimated by
  attribution patching (Nanda 2023; Kramár et al. 2024): ``grad · (clean - corrupted)`` at
  each place, the gradient of the corrupted run's logit difference, from one clean pass, one
  corrupted pass and one backward pass. Then the cells that count are made exact
  (``exact_cells``): copies of the corrupted stream entering their block, each with its patch,
  through the rest of the model as one batch (as the knock-out map runs them).
- **Where the estimate is known to fail** (as the knock-out map handles its saturated
  softmax and its large changes): a cell whose clean and corrupted values are the same, bit
  for bit, changes nothing when patched, so it is exact at 0 for free; and the estimate of
  patching the whole stream entering block 0 must equal ``clean - corrupted`` (both known
  exactly): where the first order misses that total by more than ``NONLINEAR`` of it (a
  saturated attention or a large change), the estimate is not to be trusted and every cell
  is made exact.

Each part's direct effect on the answer's logit difference: ``explorer.probes.direct``.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np
import torch

from ..book.errors import ExplorerError
from ..book.model import model_device
from ..book.probe_points import editing, is_intervening
from .attribution import agreement, noise_floor
from .budget import attribution_peak_bytes, longest_attribution
from .intervening import Editor
from .interventions import Intervention
from .knockouts import _batch_size
from .tracing import _check_ids

TOP = 10              # the cells that count: each map's top 10 estimates are made exact first
NONLINEAR = 0.3       # the first order may miss the whole change by this share (see above)

Cell = tuple[str, int, int]       # ("head", layer, head) or ("resid", layer, position)


# ---------------------------------------------------------------------------------------------
# The pair
@dataclass(frozen=True)
class Pair:
    """A clean and a corrupted prompt (token ids, the same number) and the two answers."""

    clean: tuple[int, ...]
    corrupted: tuple[int, ...]
    right: int
    wrong: int


def make_pair(cfg, clean, corrupted, right, wrong, tokenizer=None) -> Pair:
    """The pair, checked: prompts as ids, the same number of them, within the model's
    context and vocabulary; answers one token each. Where the two prompts differ in length,
    the message shows both as the tokenizer reads them (``tokenizer``: to name the pieces)."""
    clean, corrupted = _check_ids(clean, cfg), _check_ids(corrupted, cfg)
    if len(clean) != len(corrupted):
        raise ExplorerError("patching.lengths", "The clean prompt is {n_clean} tokens and the "
                            "corrupted one {n_corrupted}: patching compares them position by "
                            "position, so they need the same number of tokens. Clean: "
                            "{clean_pieces} · corrupted: {corrupted_pieces}.",
                            n_clean=len(clean), n_corrupted=len(corrupted),
                            clean_pieces=_pieces(clean, tokenizer),
                            corrupted_pieces=_pieces(corrupted, tokenizer))
    if clean == corrupted:
        raise ExplorerError("patching.same_prompts", "The clean and the corrupted prompt are the "
                            "same tokens: change a word of the corrupted one.")
    right, wrong = (check_answer(a, cfg) for a in (right, wrong))
    if right == wrong:
        raise ExplorerError("patching.same_answers", "The right and the wrong answer are the "
                            "same token: the logit difference would always be 0.")
    return Pair(tuple(clean), tuple(corrupted), right, wrong)


def check_answer(ids, cfg) -> int:
    ids = [ids] if isinstance(ids, int) else list(ids)
    if len(ids) != 1:
        raise ExplorerError("patching.answer_tokens", "An answer must be one token; this one is "
                            "{n}: {pieces}. Choose a word that is one token (GPT-2 reads most "
                            "short words with their leading space as one).", n=len(ids),
                            pieces=" · ".join(map(str, ids)) or "none")
    return _check_ids(ids, cfg)[0]


def answer_id(text: str, cfg, tokenizer) -> int:
    """The one token of an answer typed as text; refused with its pieces named."""
    ids = tokenizer.encode(text)
    if len(ids) != 1:
        raise ExplorerError("patching.answer_pieces", "The answer “{answer}” is {n} tokens "
                            "({pieces}): an answer must be one token. Try a short word with its "
                            "leading space, e.g. “ Mary”.", answer=text, n=len(ids),
                            pieces=_pieces(ids, tokenizer))
    return check_answer(ids, cfg)


def _pieces(ids, tokenizer) -> str:
    if tokenizer is None:
        return " ".join(map(str, ids))
    return " · ".join(f"“{tokenizer.token_text(i)}”" if i < tokenizer.n_vocab else f"<id {i}>"
                      for i in ids)


def share(value: float, clean: float, corrupted: float) -> float:
    """The share of the clean result recovered: 0 the corrupted run, 1 the clean one."""
    return (value - corrupted) / (clean - corrupted)


def logit_diff(model, ids, right: int, wrong: int) -> float:
    """logit(right) - logit(wrong) at the last position of a plain forward pass of ``ids``
    (under any intervention in force: B's own)."""
    with torch.inference_mode():
        logits = model(torch.tensor([list(ids)], device=model_device(model)), last_only=True)
    return float(logits[0, -1, right] - logits[0, -1, wrong])


def _diff_of_stream(model, x, right, wrong):
    """(copies,) logit differences from the streams leaving the last block (copies, T, emb):
    the final norm and two rows of the output head, at the last position only."""
    direction = model.out_head.weight[right] - model.out_head.weight[wrong]
    return model.final_norm(x[:, -1]) @ direction


# ---------------------------------------------------------------------------------------------
# The maps
@dataclass
class Patching:
    """The two patching maps of a pair as they are refined: every cell estimated, some exact.
    Values are changes of the logit difference from the corrupted run's (NaN: not exact yet);
    ``shares`` turns them into the share recovered."""

    pair: Pair
    clean_diff: float
    corrupted_diff: float
    head_estimate: np.ndarray        # (layers, heads)
    head_exact: np.ndarray           # (layers, heads), NaN until exact
    resid_estimate: np.ndarray       # (layers, T)
    resid_exact: np.ndarray          # (layers, T)
    floor: float                     # the noise floor of the logit difference
    miss: float                      # how far the first order misses the whole change (share)
    seconds: float
    exact_seconds: float = 0.0
    layer_labels: list[str] = field(default_factory=list)
    streams: list = field(default_factory=list, repr=False)   # corrupted stream per block
    clean: dict = field(default_factory=dict, repr=False)     # {source: {(layer, point): ..}}
    # which map -> its cells whose clean and corrupted values are the same (exact at 0, free)
    same_cells: dict = field(default_factory=dict, repr=False)

    @property
    def total(self) -> float:
        return self.clean_diff - self.corrupted_diff

    @property
    def nonlinear(self) -> bool:
        """The first order misses the whole change by more than ``NONLINEAR``: every cell
        is to be made exact."""
        return not self.miss <= NONLINEAR

    def table(self, which: str, exact: bool = False) -> np.ndarray:
        if which == "head":
            return self.head_exact if exact else self.head_estimate
        return self.resid_exact if exact else self.resid_estimate

    def shown(self, which: str) -> np.ndarray:
        """Change per cell: exact where known, else the estimate."""
        exact = self.table(which, True)
        return np.where(np.isnan(exact), self.table(which), exact)

    def shares(self, values) -> np.ndarray:
        return np.asarray(values, float) / self.total

    def cells(self, which: str | None = None) -> list[Cell]:
        found = []
        for name in (("head", "resid") if which is None else (which,)):
            rows, cols = self.table(name).shape
            found += [(name, l, c) for l in range(rows) for c in range(cols)]
        return found

    def is_exact(self, cell: Cell) -> bool:
        return not math.isnan(self.table(cell[0], True)[cell[1], cell[2]])

    @property
    def n_exact(self) -> int:
        return int((~np.isnan(self.head_exact)).sum() + (~np.isnan(self.resid_exact)).sum())

    def order(self, first: int = TOP) -> list[Cell]:
        """Cells not yet exact, in the order they are worth computing: each map's ``first``
        largest estimates (by size), then the rest, largest first."""
        out, rest = [], []
        for which in ("head", "resid"):
            left = sorted((c for c in self.cells(which) if not self.is_exact(c)),
                          key=lambda c: -abs(self.table(c[0])[c[1], c[2]]))
            out += left[:first]
            rest += left[first:]
        return out + sorted(rest, key=lambda c: -abs(self.table(c[0])[c[1], c[2]]))

    def intervention(self, cell: Cell) -> Intervention:
        """The patch of one cell, as an intervention (model B; to apply it: ``intervening``)."""
        which, layer, col = cell
        if which == "head":
            return Intervention("patch_heads", layer, (col,), source=self.pair.clean)
        return Intervention("patch_resid", layer, position=col, source=self.pair.clean)

    def agreement(self, which: str | None = None):
        """Estimate against exact over the cells that have both and differ between the runs
        (the free exact zeros say nothing of the estimate); None if fewer than 3."""
        est, ex = [], []
        for cell in self.cells(which):
            if self.is_exact(cell) and not self._free(cell):
                est.append(self.table(cell[0])[cell[1], cell[2]])
                ex.append(self.table(cell[0], True)[cell[1], cell[2]])
        return agreement(est, ex) if len(ex) >= 3 else None

    def _free(self, cell: Cell) -> bool:
        return bool(self.same_cells[cell[0]][cell[1], cell[2]])


class _Kept:
    """An editor that changes nothing: it keeps each block's ``resid_pre`` and
    ``attn_context``, and (``grad``) starts an autograd graph at the stream entering block 0."""

    def __init__(self, grad: bool):
        self.grad, self.layer, self.values = grad, -1, {}

    def edit(self, name, x):
        if name == "resid_pre":
            self.layer += 1
            if self.layer == 0 and self.grad:
                x = x.detach().requires_grad_(True)
        if name in ("resid_pre", "attn_context"):
            self.values[(self.layer, name)] = x
        return x


def _run(model, ids, grad):
    kept = _Kept(grad)
    with editing(kept):
        x = model(torch.tensor([list(ids)], device=model_device(model)),
                  stop_at_layer=model.cfg.n_layers)
    return kept.values, x


def check_pair_work(model, pair: Pair, max_bytes=None) -> None:
    """Limits before work: no intervention in force, and the memory of the estimate."""
    if is_intervening():
        raise ExplorerError("patching.inside_intervention", "Patching maps change parts of "
                            "the model itself: compute them outside an intervention.")
    cfg, n = model.cfg, len(pair.clean)
    if max_bytes is not None and 2 * attribution_peak_bytes(cfg, n) > max_bytes:
        raise ExplorerError("patching.too_large", "Patching over {n:,} tokens needs about "
                            "{need:,.0f} MB, but it may use {allowed:,.0f} MB. Use prompts of "
                            "at most {most:,} tokens.", n=n,
                            need=2 * attribution_peak_bytes(cfg, n) / 2 ** 20,
                            allowed=max_bytes / 2 ** 20,
                            most=longest_attribution(cfg, max_bytes / 2))


def estimate(model, pair: Pair, *, max_bytes=None) -> Patching:
    """Both maps of ``pair`` estimated to first order (see the module's docstring): one clean
    pass, one corrupted pass and one backward pass of its logit difference. No cell is exact
    yet but those whose clean and corrupted values are the same."""
    check_pair_work(model, pair, max_bytes)
    cfg = model.cfg
    started = time.perf_counter()
    with torch.inference_mode(False), torch.no_grad():
        clean_values, x = _run(model, pair.clean, grad=False)
        clean_diff = float(_diff_of_stream(model, x, pair.right, pair.wrong)[0])
    with torch.inference_mode(False), torch.enable_grad():
        values, x = _run(model, pair.corrupted, grad=True)
        diff = _diff_of_stream(model, x, pair.right, pair.wrong)[0]
        points = [values[(l, p)] for l in range(cfg.n_layers)
                  for p in ("resid_pre", "attn_context")]
        grads = torch.autograd.grad(diff, points, allow_unused=True)
    grads = dict(zip([(l, p) for l in range(cfg.n_layers) for p in ("resid_pre", "attn_context")],
                     grads))
    L, H, T = cfg.n_layers, cfg.n_heads, len(pair.clean)
    heads, resid = np.zeros((L, H)), np.zeros((L, T))
    same = {"head": np.zeros((L, H), bool), "resid": np.zeros((L, T), bool)}
    with torch.no_grad():
        for l in range(L):
            change = (clean_values[(l, "attn_context")] - values[(l, "attn_context")]).detach()
            g = grads[(l, "attn_context")]                          # (1, T, heads, head_dim)
            if g is not None:
                heads[l] = (g.float() * change.float()).sum(dim=(0, 1, 3)).cpu().numpy()
            same["head"][l] = (change == 0).all(dim=3).all(dim=1)[0].cpu().numpy()
            change = (clean_values[(l, "resid_pre")] - values[(l, "resid_pre")]).detach()
            g = grads[(l, "resid_pre")]                             # (1, T, emb)
            if g is not None:
                resid[l] = (g.float() * change.float()).sum(dim=2)[0].cpu().numpy()
            same["resid"][l] = (change == 0).all(dim=2)[0].cpu().numpy()
    corrupted_diff = float(diff.detach())
    total = clean_diff - corrupted_diff
    dtype = next(model.parameters()).dtype
    logits = float(max(abs(clean_diff), abs(corrupted_diff), 1.0))
    floor = noise_floor(logits, T, dtype)
    if abs(total) <= floor:
        raise ExplorerError("patching.no_difference", "The model gives the same logit "
                            "difference on both prompts ({diff:+.4g}): there is nothing to "
                            "recover. Choose prompts whose answers the model tells apart.",
                            diff=clean_diff)
    miss = abs(float(resid[0].sum()) - total) / abs(total)
    result = Patching(
        pair, clean_diff, corrupted_diff, heads, np.where(same["head"], 0.0, np.nan),
        resid, np.where(same["resid"], 0.0, np.nan), floor, miss,
        time.perf_counter() - started,
        layer_labels=[f"trf_blocks[{l}]" for l in range(L)],
        streams=[values[(l, "resid_pre")].detach() for l in range(L)],
        clean={pair.clean: {key: v[0].detach() for key, v in clean_values.items()}},
        same_cells=same)
    return result


def exact_cells(model, result: Patching, cells, *, batch=None, max_bytes=None) -> None:
    """Exact values of ``cells`` written into ``result``: the cells of one block as copies of
    the corrupted stream entering it, each with its patch (``Editor(rows=)``, the clean values
    at hand), through the rest of the model, at most ``batch`` at once."""
    cfg = model.cfg
    if is_intervening():
        raise ExplorerError("patching.inside_intervention", "Patching maps change parts of "
                            "the model itself: compute them outside an intervention.")
    cells = [c for c in cells if not result.is_exact(c)]
    if not cells:
        return
    T = len(result.pair.clean)
    size = _batch_size(cfg, T, batch, min(max(cfg.n_heads, T), len(cells)), max_bytes)
    started = time.perf_counter()
    by_layer: dict[int, list[Cell]] = {}
    for cell in cells:
        by_layer.setdefault(cell[1], []).append(cell)
    with torch.inference_mode():
        for layer, group in sorted(by_layer.items()):
            for first in range(0, len(group), size):
                chunk = group[first:first + size]
                diffs = _run_from(model, layer, result.streams[layer],
                                  [result.intervention(c) for c in chunk], result)
                for (which, _, col), d in zip(chunk, diffs.tolist()):
                    result.table(which, True)[layer, col] = d - result.corrupted_diff
    result.exact_seconds += time.perf_counter() - started


def _run_from(model, layer, entering, items, result):
    editor = Editor(model, items, rows=range(len(items)), clean=result.clean)
    x = entering.expand(len(items), -1, -1)
    with editing(editor):
        editor.start_at(layer)
        for block in model.trf_blocks[layer:]:
            x = block(x)
    return _diff_of_stream(model, x, result.pair.right, result.pair.wrong).float()


def refine(model, result: Patching, *, everywhere=False, max_bytes=None, top=TOP):
    """Make exact the cells that count (``plan``): each map's ``top`` largest estimates, or
    every cell (asked for, or where the estimate is not to be trusted)."""
    for cells in plan(result, everywhere, top):
        exact_cells(model, result, cells, max_bytes=max_bytes)
    return result


def patching_map(model, pair: Pair, *, everywhere=False, max_bytes=None) -> Patching:
    """``estimate`` then ``refine``: what the page shows."""
    return refine(model, estimate(model, pair, max_bytes=max_bytes), everywhere=everywhere,
                  max_bytes=max_bytes)


def estimate_sent(model, pair: Pair, *, max_bytes=None) -> Patching:
    """``estimate``, its tensors on the CPU (a GPU call's answer)."""
    return _on(estimate(model, pair, max_bytes=max_bytes), "cpu")


def exact_tables(model, result: Patching, cells, *, max_bytes=None) -> tuple:
    """``exact_cells`` on ``result`` (in a GPU call: the worker's copy of it), and the tables
    it fills, for ``take_exact``."""
    _on(result, model_device(model))
    exact_cells(model, result, cells, max_bytes=max_bytes)
    _on(result, "cpu")
    return result.head_exact, result.resid_exact, result.exact_seconds


def take_exact(result: Patching, tables) -> None:
    """``exact_tables``' answer into ``result`` (the same object, when it ran here)."""
    result.head_exact, result.resid_exact, result.exact_seconds = tables


def plan(result: Patching, everywhere=False, top=TOP) -> list[list[Cell]]:
    """The cells to make exact, in the batches they come in: each map's ``top`` largest
    estimates; then, for every cell (asked for, or ``result.nonlinear``), the rest, one batch
    per map and block."""
    order = result.order(top)
    firsts = [[c for c in order[:2 * top] if c[0] == which] for which in ("head", "resid")]
    batches = [b for b in firsts if b]
    if everywhere or result.nonlinear:
        rest: dict[tuple, list] = {}
        for cell in order[2 * top:]:
            rest.setdefault(cell[:2], []).append(cell)
        batches += list(rest.values())
    return batches


def _on(result: Patching, device) -> Patching:
    result.streams = [s.to(device) for s in result.streams]
    result.clean = {k: {p: v.to(device) for p, v in d.items()} for k, d in result.clean.items()}
    return result

