"""Which parts matter, estimated at once (attribution patching, "AtP": Nanda 2023; Kramár et
al. 2024): from one forward and one backward pass of the book's loss, a first-order estimate of
the loss change of every cell of the knock-out map (``explorer.probes.knockouts``), then exact
values for the cells that count.

For a knock-out that replaces the value ``a`` at a probe point by ``a'``, the estimate is
``grad · (a' - a)``, the gradient of the loss with respect to ``a`` taken in the clean pass:

- a head zeroed: ``attn_context`` of that head (its share of ``out_proj``'s input), a' = 0;
- ``att`` / ``ff`` skipped: ``attn_out`` / ``ff_out``, a' = 0;
- ``norm1`` / ``norm2`` the identity: ``ln1_out`` / ``ln2_out``, a' = ``ln1_in`` / ``ln2_in``;
- both shortcuts removed: the two sums (``resid_mid`` and ``resid_post``; post-LN ``ln1_in``
  and ``ln2_in``) lose their shortcut, a' - a = minus it. A large change: the first-order
  estimate misses badly there (bench/README.md, "Which parts matter, estimated"), so
  shortcut cells are exact-only (``exact_only_parts``): they carry no estimate.

The loss is the book's (``importance``'s): the mean next-token cross-entropy of positions
0 .. T-2. Its gradient at the output head is written out (softmax - one-hot, ``SCORE_ROWS``
positions at a time) so that the logits are never all held at once; autograd does the rest,
through the model as the book writes it (the probe points hand the values over: no hook).

Exact values: ``exact_cells`` runs the chosen knock-outs as ``importance`` does (copies of the
stream entering their block, the stream kept from the estimate's pass), and writes them in.
What the estimate can miss (the cells shown without one, and when no estimate of a text is
trusted): ``explorer.probes.misses``.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F

from ..book.errors import ExplorerError
from ..book.model import model_device
from ..book.probe_points import editing, is_intervening
from .budget import SCORE_ROWS, attribution_peak_bytes, longest_attribution
from .knockouts import (PARTS, Importance, _batch_size, _run_from, block_parts,
                        check_finite_loss, map_ids)
from .interventions import Intervention
from .misses import MISS, SURE, blind_cells

EXACT_ONLY = ("shortcut",)     # parts whose first-order estimate fails (measured): exact only
# The noise floor: changes smaller than this many float steps (ulps) of the loss, times
# sqrt(T) (a mean over T - 1 positions rounds T times), are rounding, not the part.
NOISE_ULPS = 4
TOP = 10                       # the cells that count: the estimate's top 10 are made exact first


def exact_only_parts(cfg) -> tuple[str, ...]:
    """The parts of this config whose first-order estimate fails, so exact only: the
    shortcuts always (a large change: the estimate is off in size and sign); without
    shortcuts, att and ff too when a LayerNorm reads their output alone (a norm does not see
    its input's size, so the gradient along the output is zero and the estimate says 0)."""
    if not cfg.shortcut and cfg.norm_placement != "none":
        return EXACT_ONLY + ("att", "ff")
    return EXACT_ONLY


def noise_floor(loss: float, n_tokens: int, dtype=torch.float32) -> float:
    """The smallest loss change (nats) that is not float noise: ``NOISE_ULPS`` float steps of
    ``|loss|`` times sqrt(T), in the model's float type."""
    return NOISE_ULPS * torch.finfo(dtype).eps * abs(loss) * math.sqrt(max(n_tokens, 1))


Cell = tuple[str, int, int]    # ("head", layer, head) or ("part", layer, PARTS index)


@dataclass
class Attribution:
    """The knock-out map of ``token_ids`` as it is refined: every cell estimated, some exact.

    A cell's shown loss change is its exact value where it has one, else its estimate."""
    token_ids: list[int]
    clean_loss: float
    clean_prob: float
    head_estimate: np.ndarray      # (layers, heads): first-order loss change, head zeroed
    part_estimate: np.ndarray      # (layers, len(PARTS)): NaN where no part, or EXACT_ONLY
    head_loss: np.ndarray          # (layers, heads): exact loss change, NaN until computed
    head_prob: np.ndarray          # ... and exact change in mean p(next)
    part_loss: np.ndarray          # (layers, len(PARTS))
    part_prob: np.ndarray
    has_part: np.ndarray           # (layers, len(PARTS)) bool: the model has that part
    floor: float                   # noise floor (nats), see ``noise_floor``
    seconds: float                 # the estimate's
    exact_seconds: float = 0.0     # the exact cells' so far
    layer_labels: list[str] = field(default_factory=list)
    parts: tuple[str, ...] = PARTS
    streams: list = field(default_factory=list, repr=False)   # stream entering each block
    dtype: str = "float32"
    sure_share: float = 0.0        # share of the positions whose p(next) > SURE
    head_blind: np.ndarray | None = None   # (layers, heads) bool: see BLIND_CHANGE (None: none)
    part_blind: np.ndarray | None = None   # (layers, len(PARTS)) bool

    def blind(self, which: str) -> np.ndarray:
        """The blind cells of "head" or "part" (``misses.blind_cells``), a bool grid."""
        grid = self.head_blind if which == "head" else self.part_blind
        shape = (self.head_estimate if which == "head" else self.part_estimate).shape
        return np.zeros(shape, bool) if grid is None else grid

    @property
    def prob_floor(self) -> float:
        """The noise floor of the changes in mean p(next): ``noise_floor`` of ``clean_prob``
        in the model's float type (the map colours none below it)."""
        return noise_floor(self.clean_prob, len(self.token_ids),
                           getattr(torch, self.dtype, torch.float32))

    @property
    def n_blind(self) -> int:
        """Cells whose change where the model is sure of its next token is large (their
        estimate is not shown: exact only)."""
        return int(self.blind("head").sum() + (self.blind("part") & self.has_part).sum())

    @property
    def missed(self) -> float:
        """The most the estimate missed a finite exact value by (nats), over the cells made
        exact that had an estimate shown; 0 before any."""
        both = [abs(self.exact_of(c) - self.estimate_of(c)) for c in self.cells()
                if self.is_exact(c) and self.trusted(c) and math.isfinite(self.exact_of(c))]
        return max(both, default=0.0)

    @property
    def estimate_failed(self) -> bool:
        """The estimate missed an exact value by more than MISS: none of it is trusted."""
        return self.missed > MISS

    def trusted(self, cell: Cell) -> bool:
        """The cell has an estimate that is shown: the part is not exact-only, nor blind."""
        which, layer, col = cell
        return not (math.isnan(self.estimate_of(cell)) or self.blind(which)[layer, col])

    # the knock-out of one cell, as the exact map's
    head_intervention = staticmethod(Importance.head_intervention)
    part_intervention = staticmethod(Importance.part_intervention)

    # -- what the map shows ----------------------------------------------------------------
    @property
    def head_exact(self) -> np.ndarray:
        return ~np.isnan(self.head_loss)

    @property
    def part_exact(self) -> np.ndarray:
        return ~np.isnan(self.part_loss) | ~self.has_part

    @property
    def head_shown(self) -> np.ndarray:
        """Loss change per head: exact where known, else the estimate (NaN for a blind cell
        not yet computed)."""
        return np.where(self.head_exact, self.head_loss,
                        np.where(self.blind("head"), np.nan, self.head_estimate))

    @property
    def part_shown(self) -> np.ndarray:
        """Loss change per part: exact where known, else the estimate (NaN for an exact-only
        or blind part not yet computed, and where there is no such part)."""
        return np.where(self.part_exact, self.part_loss,
                        np.where(self.blind("part"), np.nan, self.part_estimate))

    def cells(self) -> list[Cell]:
        """Every cell the model has."""
        n_layers, n_heads = self.head_estimate.shape
        return ([("head", l, h) for l in range(n_layers) for h in range(n_heads)]
                + [("part", l, p) for l in range(n_layers) for p in range(len(self.parts))
                   if self.has_part[l, p]])

    def is_exact(self, cell: Cell) -> bool:
        which, layer, col = cell
        return bool((self.head_exact if which == "head" else self.part_exact)[layer, col])

    def estimate_of(self, cell: Cell) -> float:
        which, layer, col = cell
        return float((self.head_estimate if which == "head" else self.part_estimate)[layer, col])

    def exact_of(self, cell: Cell) -> float:
        which, layer, col = cell
        return float((self.head_loss if which == "head" else self.part_loss)[layer, col])

    def order(self, first: int = TOP) -> list[Cell]:
        """The cells not yet exact, in the order they are worth computing exactly: the
        ``first`` largest estimates (by size: a part the model is better without counts too),
        then the exact-only and blind cells (no estimate shown: large changes, measured), then
        the other estimates, largest first."""
        left = [c for c in self.cells() if not self.is_exact(c)]
        estimated = sorted((c for c in left if self.trusted(c)),
                           key=lambda c: -abs(self.estimate_of(c)))
        exact_only = [c for c in left if not self.trusted(c)]
        return estimated[:first] + exact_only + estimated[first:]

    def intervention(self, cell: Cell) -> Intervention:
        which, layer, col = cell
        return (self.head_intervention(layer, col) if which == "head"
                else self.part_intervention(layer, self.parts[col]))

    @property
    def n_exact(self) -> int:
        return sum(self.is_exact(c) for c in self.cells())

    def agreement(self) -> Agreement | None:
        """The estimate against the exact values, over the cells that have both (None if
        fewer than 3)."""
        both = [c for c in self.cells() if self.is_exact(c)
                and not math.isnan(self.estimate_of(c)) and math.isfinite(self.exact_of(c))]
        if len(both) < 3:
            return None
        return agreement([self.estimate_of(c) for c in both], [self.exact_of(c) for c in both])


@dataclass(frozen=True)
class Agreement:
    cells: int          # cells compared
    spearman: float     # rank correlation of the estimated and exact loss changes
    top: int            # the size of the top lists (10, or fewer cells)
    top_overlap: int    # how many of the exact top (by |change|) the estimate's top holds
    pearson: float


def agreement(estimated, exact, top: int = 10) -> Agreement:
    """Spearman rank correlation, Pearson correlation and top-``top`` overlap (by the size of
    the change, |loss change|) of two lists of loss changes."""
    est, ex = np.asarray(estimated, float), np.asarray(exact, float)
    top = min(top, len(ex))

    def ranks(v):
        order = np.argsort(v, kind="stable")
        r = np.empty(len(v))
        r[order] = np.arange(len(v))
        for value in np.unique(v):            # ties share their mean rank
            tied = v == value
            r[tied] = r[tied].mean()
        return r

    def corr(a, b):
        a, b = a - a.mean(), b - b.mean()
        scale = math.sqrt(float((a * a).sum() * (b * b).sum()))
        return float((a * b).sum() / scale) if scale > 0 else float("nan")
    overlap = len(set(np.argsort(-np.abs(est), kind="stable")[:top])
                  & set(np.argsort(-np.abs(ex), kind="stable")[:top]))
    return Agreement(len(ex), corr(ranks(est), ranks(ex)), top, overlap, corr(est, ex))


# ---------------------------------------------------------------------------------------------
class _Watcher:
    """An editor that changes nothing: it starts the autograd graph at the stream entering
    block 0 and keeps each probe point's value (the model's weights need no gradient)."""

    POINTS = ("resid_pre", "ln1_in", "ln1_out", "attn_context", "attn_out", "resid_mid",
              "ln2_in", "ln2_out", "ff_out", "resid_post")

    def __init__(self):
        self.layer = -1
        self.values: dict[tuple[int, str], torch.Tensor] = {}

    def edit(self, name, x):
        if name == "resid_pre":
            self.layer += 1
            if self.layer == 0:
                x = x.detach().requires_grad_(True)
        if name in self.POINTS:
            self.values[(self.layer, name)] = x
        return x


def estimate(model, token_ids, *, max_bytes=None, exact_only=None) -> Attribution:
    """Every cell of the knock-out map of ``token_ids`` estimated to first order (see the
    module's docstring); no cell exact yet. max_bytes: the memory it may use beyond the model
    (None: no limit); a longer text is refused with the longest that fits. exact_only: the
    parts left without an estimate (default ``exact_only_parts(cfg)``; the bench asks for
    none, to measure them)."""
    cfg = model.cfg
    ids = map_ids(token_ids, cfg)
    if max_bytes is not None and attribution_peak_bytes(cfg, len(ids)) > max_bytes:
        raise ExplorerError("attribution.too_large", "Estimating which parts matter over {n:,} "
                            "tokens needs about {need:,.0f} MB, but it may use {allowed:,.0f} "
                            "MB. Use a text of at most {most:,} tokens.", n=len(ids),
                            need=attribution_peak_bytes(cfg, len(ids)) / 2 ** 20,
                            allowed=max_bytes / 2 ** 20,
                            most=longest_attribution(cfg, max_bytes))
    explicit_exact_only = exact_only
    exact_only = exact_only_parts(cfg) if exact_only is None else tuple(exact_only)
    started = time.perf_counter()
    device = model_device(model)
    watcher = _Watcher()
    with torch.inference_mode(False), torch.enable_grad():
        with editing(watcher):
            x = model(torch.tensor([ids], device=device), stop_at_layer=cfg.n_layers)
        normed = model.final_norm(x)                                    # (1, T, emb)
        with torch.no_grad():
            losses, grad_normed = _loss_and_gradient(model, normed.detach(),
                                                     torch.tensor(ids[1:], device=device))
        clean_loss = check_finite_loss(float(losses.mean()))
        points = list({id(v): v for v in watcher.values.values()}.values())
        grads = dict(zip(map(id, points), torch.autograd.grad(
            normed, points, grad_outputs=grad_normed, allow_unused=True)))
    sure = losses < -math.log(SURE)                                     # (T-1,)
    with torch.no_grad():
        heads, parts = _first_order(cfg, watcher.values, grads, exact_only)
        # (the bench asks for every estimate, exact_only=(): nothing blind either)
        head_blind, part_blind = (blind_cells(model, watcher.values, sure, exact_only)
                                  if explicit_exact_only is None else (None, None))
    n_layers = cfg.n_layers
    has_part = np.zeros((n_layers, len(PARTS)), bool)
    has_part[:, [PARTS.index(p) for p in block_parts(cfg)]] = True
    dtype = next(model.parameters()).dtype
    return Attribution(
        ids, clean_loss, float(torch.exp(-losses).mean()), heads, parts,
        np.full_like(heads, np.nan), np.full_like(heads, np.nan),
        np.full_like(parts, np.nan), np.full_like(parts, np.nan), has_part,
        noise_floor(clean_loss, len(ids), dtype), time.perf_counter() - started,
        layer_labels=[f"trf_blocks[{layer}]" for layer in range(n_layers)],
        streams=[watcher.values[(layer, "resid_pre")].detach() for layer in range(n_layers)],
        dtype=str(dtype).removeprefix("torch."),
        sure_share=float(sure.float().mean()), head_blind=head_blind, part_blind=part_blind)


def _loss_and_gradient(model, normed, targets):
    """The per-position losses (T-1,) and the gradient of their mean with respect to the
    final norm's output (1, T, emb): (softmax - one-hot) @ out_head.weight / (T - 1), the
    output head ``SCORE_ROWS`` positions at a time."""
    rows = normed[0, :-1]
    weight = model.out_head.weight
    losses, grads = [], []
    for start in range(0, rows.shape[0], SCORE_ROWS):
        logits = model.out_head(rows[start:start + SCORE_ROWS]).float()
        wanted = targets[start:start + SCORE_ROWS]
        losses.append(F.cross_entropy(logits, wanted, reduction="none"))
        g = torch.softmax(logits, dim=-1)
        g[torch.arange(len(wanted), device=g.device), wanted] -= 1
        grads.append((g / rows.shape[0]).to(weight.dtype) @ weight)
    grad = torch.zeros_like(normed)
    grad[0, :-1] = torch.cat(grads)
    return torch.cat(losses), grad


def _first_order(cfg, values, grads, exact_only):
    """(heads (layers, heads), parts (layers, len(PARTS))): grad · (a' - a) of each cell."""
    def dot(point, layer, change):
        g = grads.get(id(values[(layer, point)]))
        return 0.0 if g is None else float((g.float() * change.float()).sum())

    heads = np.zeros((cfg.n_layers, cfg.n_heads))
    parts = np.full((cfg.n_layers, len(PARTS)), np.nan)
    post = cfg.norm_placement == "post"
    for layer in range(cfg.n_layers):
        def v(point):
            return values[(layer, point)]
        context = v("attn_context")                                   # (1, T, heads, hd)
        g = grads.get(id(context))
        if g is not None:
            heads[layer] = (-(g.float() * context.float())).sum(dim=(0, 1, 3)).cpu().numpy()
        for part, point in (("att", "attn_out"), ("ff", "ff_out")):
            if part not in exact_only:
                parts[layer, PARTS.index(part)] = dot(point, layer, -v(point))
        if cfg.norm_placement != "none":
            for norm, point in (("norm1", "ln1"), ("norm2", "ln2")):
                if norm in exact_only:
                    continue
                parts[layer, PARTS.index(norm)] = dot(point + "_out", layer,
                                                      v(point + "_in") - v(point + "_out"))
        if cfg.shortcut and "shortcut" not in exact_only:
            first, second = ("ln1_in", "ln2_in") if post else ("resid_mid", "resid_post")
            parts[layer, PARTS.index("shortcut")] = (dot(first, layer, -v("resid_pre"))
                                                     + dot(second, layer, -v("resid_mid")))
    return heads, parts


def exact_cells(model, result: Attribution, cells, *, batch=None, max_bytes=None) -> None:
    """Exact values of ``cells`` written into ``result`` (those of one block go through the
    rest of the model as one batch of copies, at most ``batch`` at once, as in
    ``importance``; the same numbers)."""
    cfg = model.cfg
    if is_intervening():
        raise ExplorerError("importance.inside_intervention", "The map of which parts matter "
                            "knocks out parts of the model itself: compute it outside an "
                            "intervention.")
    cells = list(cells)
    if not cells:
        return
    width = max(cfg.n_heads, len(PARTS))
    size = _batch_size(cfg, len(result.token_ids), batch, min(width, len(cells)), max_bytes)
    started = time.perf_counter()
    device = model_device(model)
    targets = torch.tensor(result.token_ids[1:], device=device)
    by_layer: dict[int, list[Cell]] = {}
    for cell in cells:
        by_layer.setdefault(cell[1], []).append(cell)
    with torch.inference_mode():
        for layer, group in by_layer.items():
            for first in range(0, len(group), size):
                chunk = group[first:first + size]
                loss, prob = _run_from(model, layer, result.streams[layer],
                                       [result.intervention(c) for c in chunk], targets)
                for (which, _, col), l, p in zip(chunk, loss.tolist(), prob.tolist()):
                    losses, probs = ((result.head_loss, result.head_prob) if which == "head"
                                     else (result.part_loss, result.part_prob))
                    # a knock-out that makes the activations overflow: its loss is inf (NaN
                    # is kept for "not computed yet")
                    losses[layer, col] = (l - result.clean_loss if math.isfinite(l)
                                          else math.inf)
                    probs[layer, col] = p - result.clean_prob
    result.exact_seconds += time.perf_counter() - started


def estimate_sent(model, token_ids, *, max_bytes=None) -> Attribution:
    """``estimate``, its streams on the CPU: plain data for another process (a GPU call)."""
    result = estimate(model, token_ids, max_bytes=max_bytes)
    result.streams = [s.cpu() for s in result.streams]
    return result


def exact_tables(model, result: Attribution, cells, *, max_bytes=None) -> tuple:
    """``exact_cells`` on ``result`` (in a GPU call: the worker's copy of it), and the tables
    that it fills, for ``take_exact``."""
    device = model_device(model)
    result.streams = [s.to(device) for s in result.streams]
    exact_cells(model, result, cells, max_bytes=max_bytes)
    result.streams = [s.cpu() for s in result.streams]
    return (result.head_loss, result.head_prob, result.part_loss, result.part_prob,
            result.exact_seconds)


def take_exact(result: Attribution, tables) -> None:
    """``exact_tables``' answer into ``result`` (the same object, when it ran here)."""
    (result.head_loss, result.head_prob, result.part_loss, result.part_prob,
     result.exact_seconds) = tables


def with_exact_map(result: Attribution, exact) -> Attribution:
    """``result`` with every cell's exact value taken from ``exact`` (an ``Importance`` of the
    same text: the map exact everywhere)."""
    result.head_loss, result.head_prob = exact.head_loss.copy(), exact.head_prob.copy()
    result.part_loss, result.part_prob = exact.part_loss.copy(), exact.part_prob.copy()
    result.exact_seconds += exact.seconds
    return result

