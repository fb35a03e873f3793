"""Which parts matter, estimated (``explorer.probes.attribution``): the first-order estimate of
every cell against the same formula written by hand with forward hooks and autograd on the
book's GPTModel; exact cells against the exact map; the refinement order, the agreement
figures, the noise floor and the refusals."""
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from explorer.book.config import GPTConfig, get_preset
from explorer.book.errors import ExplorerError
from explorer.book.fast import fuse
from explorer.book.model import GPTModel
from explorer.book.tokenizer import get_tokenizer
from explorer.probes.attribution import (agreement, estimate, exact_cells, exact_only_parts,
                                         noise_floor)
from explorer.probes.intervening import intervening
from explorer.probes.knockouts import PARTS, importance
from explorer.runtime.training_setup import default_corpus

IDS = get_tokenizer().encode(default_corpus().text)[1000:1033]


def tiny(seed=0, **changes):
    cfg = GPTConfig.from_dict({**get_preset("teach-tiny").to_dict(), **changes})
    torch.manual_seed(seed)
    return GPTModel(cfg).eval()       # (weights with gradients: the hand-written formula's)


def first_order_by_hand(model, ids):
    """grad · (a' - a) per cell, the values and gradients taken with forward hooks on the
    book's modules and torch.autograd on the book's loss: (heads, parts)."""
    cfg, saved, handles = model.cfg, {}, []
    for layer, block in enumerate(model.trf_blocks):
        handles.append(block.att.out_proj.register_forward_pre_hook(
            lambda m, a, layer=layer: saved.__setitem__((layer, "heads"), a[0])))
        for part in ("att", "ff"):
            handles.append(getattr(block, part).register_forward_hook(
                lambda m, a, out, layer=layer, part=part: saved.__setitem__((layer, part), out)))
        for norm in ("norm1", "norm2"):
            handles.append(getattr(block, norm).register_forward_hook(
                lambda m, a, out, layer=layer, norm=norm: saved.__setitem__(
                    (layer, norm), (a[0], out))))
    try:
        ids_t = torch.tensor([ids])
        loss = F.cross_entropy(model(ids_t)[0, :-1], ids_t[0, 1:])
        keys = [k for k in saved if k[1] not in ("norm1", "norm2")
                or cfg.norm_placement != "none"]
        tensors = [saved[k][1] if k[1].startswith("norm") else saved[k] for k in keys]
        grads = dict(zip(keys, torch.autograd.grad(loss, tensors)))
    finally:
        for handle in handles:
            handle.remove()
    heads = np.zeros((cfg.n_layers, cfg.n_heads))
    parts = np.full((cfg.n_layers, len(PARTS)), np.nan)
    with torch.no_grad():
        for layer in range(cfg.n_layers):
            context, g = saved[(layer, "heads")], grads[(layer, "heads")]
            for h in range(cfg.n_heads):
                part = slice(h * cfg.head_dim, (h + 1) * cfg.head_dim)
                heads[layer, h] = float((g[..., part] * -context[..., part]).sum())
            for part in ("att", "ff"):
                parts[layer, PARTS.index(part)] = float(
                    (grads[(layer, part)] * -saved[(layer, part)]).sum())
            if cfg.norm_placement != "none":
                for norm in ("norm1", "norm2"):
                    x, out = saved[(layer, norm)]
                    parts[layer, PARTS.index(norm)] = float((grads[(layer, norm)]
                                                             * (x - out)).sum())
    return loss.item(), heads, parts


@pytest.mark.parametrize("changes", [{}, {"norm_placement": "post"}, {"norm_placement": "none"},
                                     {"pos_encoding": "rope"}])
def test_the_estimate_equals_the_first_order_formula_written_by_hand(changes):
    model = tiny(**changes)
    loss, heads, parts = first_order_by_hand(model, IDS)
    ours = estimate(model, IDS)
    assert ours.clean_loss == pytest.approx(loss, rel=1e-6)
    np.testing.assert_allclose(ours.head_estimate, heads, rtol=0, atol=1e-5)
    estimated = [PARTS.index(p) for p in ("att", "ff", "norm1", "norm2")]
    np.testing.assert_allclose(ours.part_estimate[:, estimated], parts[:, estimated],
                               rtol=0, atol=1e-5, equal_nan=True)
    assert np.abs(heads).max() > 1e-3            # (the formula is not all zeros)
    # the shortcut has no estimate (exact only); no norm, no norm cell
    assert np.isnan(ours.part_estimate[:, PARTS.index("shortcut")]).all()
    assert ours.n_exact == 0
    # the same on the app's fused twin, whose weights need no gradient
    fused = fuse(tiny(**changes)).requires_grad_(False)
    np.testing.assert_allclose(estimate(fused, IDS).head_estimate, heads, rtol=0, atol=1e-5)


def test_exact_cells_equal_the_exact_map_and_the_intervention():
    model = fuse(tiny(seed=3)).requires_grad_(False)
    ours = estimate(model, IDS)
    order = ours.order()
    # the top 10 estimates by size, then the exact-only cells (no estimate), then the rest
    assert [c[2] for c in order[10:12]] == [PARTS.index("shortcut")] * 2
    sizes = [abs(ours.estimate_of(c)) for c in order[:10] + order[12:]]
    assert sizes == sorted(sizes, reverse=True) and len(order) == len(ours.cells())
    cell = next(c for c in order if c[0] == "head")        # (one head among them)
    chosen = order[:5] if cell in order[:5] else order[:4] + [cell]
    exact_cells(model, ours, chosen)
    assert ours.n_exact == 5 and set(ours.order()) == set(order) - set(chosen)
    full = importance(model, IDS)
    for which, layer, col in chosen:
        mine, theirs = ((ours.head_loss, full.head_loss) if which == "head"
                        else (ours.part_loss, full.part_loss))
        assert mine[layer, col] == pytest.approx(theirs[layer, col], abs=1e-6)
    which, layer, col = cell
    with intervening(model, [ours.intervention(cell)]), torch.no_grad():
        logits = model(torch.tensor([IDS]))[0, :-1]
    knocked = F.cross_entropy(logits, torch.tensor(IDS[1:])).item()
    assert ours.exact_of(cell) == pytest.approx(knocked - ours.clean_loss, abs=1e-5)
    # shown: exact where known, the estimate elsewhere
    assert ours.head_shown[layer, col] == ours.exact_of(cell)
    later = next(c for c in order if c[0] == "head" and c not in chosen)
    assert ours.head_shown[later[1], later[2]] == ours.estimate_of(later)


def test_without_shortcuts_att_and_ff_are_exact_only():
    """A norm reading a sub-layer's output alone does not see its size: the gradient along
    the output is 0, so the estimate of skipping it would say 0, however large the change."""
    model = tiny(shortcut=False)
    assert exact_only_parts(model.cfg) == ("shortcut", "att", "ff")
    estimated = estimate(model, IDS, exact_only=())
    full = importance(model, IDS)
    for part in ("att", "ff"):
        col = PARTS.index(part)
        assert np.abs(full.part_loss[:, col]).max() > 1e-2
        assert (np.abs(estimated.part_estimate[:, col]).max()
                < 0.01 * np.abs(full.part_loss[:, col]).max())
    assert np.isnan(estimate(model, IDS).part_estimate[:, PARTS.index("att")]).all()


def test_agreement_figures():
    same = agreement([1, 2, 3, 4], [10, 20, 30, 40], top=2)
    assert same.spearman == pytest.approx(1) and same.top_overlap == 2 and same.top == 2
    reversed_ = agreement([1, 2, 3, 4], [40, 30, 20, 10], top=2)
    assert reversed_.spearman == pytest.approx(-1) and reversed_.top_overlap == 0
    # the top lists go by the size of the change: a large negative one counts
    assert agreement([-5, 1, 2], [-9, 1, 2], top=1).top_overlap == 1


def test_agreement_after_exact_everywhere():
    model = fuse(tiny(seed=3)).requires_grad_(False)
    ours = estimate(model, IDS)
    assert ours.agreement() is None
    exact_cells(model, ours, ours.order())
    assert ours.order() == [] and ours.n_exact == len(ours.cells())
    found = ours.agreement()
    assert found.cells == len(ours.cells()) - model.cfg.n_layers     # all but the shortcuts
    assert -1 <= found.spearman <= 1 and 0 <= found.top_overlap <= 10


def test_noise_floor_is_float_steps_of_the_loss():
    floor = noise_floor(10.0, 64)
    assert floor == pytest.approx(4 * 2 ** -23 * 10 * 8)
    assert noise_floor(10.0, 64, torch.bfloat16) > 1000 * floor / 2 ** 10
    assert estimate(tiny(), IDS).floor == pytest.approx(noise_floor(
        estimate(tiny(), IDS).clean_loss, len(IDS)))


def test_refusals():
    model = tiny()
    with pytest.raises(ExplorerError) as err:
        estimate(model, IDS[:1])
    assert err.value.message.id == "importance.too_short"
    with intervening(model, "zero trf_blocks[0].att head 1"), pytest.raises(ExplorerError) as err:
        estimate(model, IDS)
    assert err.value.message.id == "importance.inside_intervention"
    with pytest.raises(ExplorerError) as err:
        estimate(model, IDS, max_bytes=1000)
    assert err.value.message.id == "attribution.too_large"
    assert math.isfinite(estimate(model, IDS, max_bytes=10 ** 9).clean_loss)


def test_a_model_sure_of_its_next_tokens_is_saturated():
    """A model that has learnt a text by heart (its p(next) near 1) has a loss gradient near
    0 there: the estimate says so (``saturated``), and the map then goes exact everywhere. A
    random model is not."""
    from explorer.app.tabs.knockout_map import _chunks
    model = tiny()
    fresh = estimate(model, IDS)
    assert fresh.sure_share == 0 and not fresh.saturated
    assert sum(map(len, _chunks(fresh, False))) == 10 + model.cfg.n_layers
    ids = torch.tensor([IDS])
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    model.train()
    for _ in range(150):                       # the text by heart
        loss = F.cross_entropy(model(ids)[0, :-1], ids[0, 1:])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.eval()
    learnt = estimate(model, IDS)
    assert learnt.clean_loss < 0.1 and learnt.sure_share > 0.9 and learnt.saturated
    assert sum(map(len, _chunks(learnt, False))) == len(learnt.cells())    # every cell
