"""Activation patching and direct logit attribution (``explorer.probes.patching``, issue 49).

The hooks test: every exact cell of both patching maps, and every kind of patch as model B,
against the same patch written here with PyTorch forward hooks on a private copy of the book's
GPTModel (not the project's editor), to 1e-5 of the logit difference. The sum test: the direct
contributions add up, with the biases, to the model's own logit difference. Then the estimate
(against autograd written here), the free exact cells, the string form, and the refusals."""
import copy

import numpy as np
import pytest
import torch

from explorer.book.config import GPTConfig, get_preset
from explorer.book.errors import ExplorerError
from explorer.book.fast import fuse
from explorer.book.model import GPTModel
from explorer.book.tokenizer import get_tokenizer
from explorer.probes.intervening import intervening
from explorer.probes.interventions import Intervention, Interventions
from explorer.probes.direct import direct_attribution
from explorer.probes.patching import (estimate, exact_cells, logit_diff,
                                      make_pair, patching_map, share)

TOK = get_tokenizer()
CLEAN = TOK.encode("When Mary and John went to the store, John gave a drink to")
CORRUPTED = TOK.encode("When Alice and Bob went to the store, Bob gave a drink to")
RIGHT, WRONG = TOK.encode(" Mary")[0], TOK.encode(" John")[0]


def tiny(seed=0, **changes):
    cfg = GPTConfig.from_dict({**get_preset("teach-tiny").to_dict(), **changes})
    torch.manual_seed(seed)
    return GPTModel(cfg).eval()


# ---------------------------------------------------------------------------------------------
# Patches written with forward hooks, on a copy of the model
def _hooked_diff(model, part, layer, position, heads=(), ids=CORRUPTED, source=CLEAN):
    """The logit difference of ``ids`` with ``part`` ("head", "att", "ff", "resid") of block
    ``layer`` taken from the run of ``source`` (every position, or ``position``)."""
    model = copy.deepcopy(model)
    block = model.trf_blocks[layer]
    hd = model.cfg.head_dim
    saved = {}

    def spot(t):
        return slice(None) if position is None else slice(position, position + 1)

    if part == "head":
        module, pre = block.att.out_proj, True
    elif part == "resid":
        module, pre = block, True
    else:
        module, pre = getattr(block, part), False

    def keep(mod, args, output=None):
        saved["v"] = (args[0] if pre else output).detach().clone()

    def put(mod, args, output=None):
        x = (args[0] if pre else output).clone()
        if part == "head":
            for h in heads:
                x[:, spot(x), h * hd:(h + 1) * hd] = saved["v"][:, spot(x), h * hd:(h + 1) * hd]
        else:
            x[:, spot(x)] = saved["v"][:, spot(x)]
        return ((x,) + tuple(args[1:])) if pre else x

    register = module.register_forward_pre_hook if pre else module.register_forward_hook
    handle = register(keep)
    with torch.no_grad():
        model(torch.tensor([source]))
    handle.remove()
    register(put)
    with torch.no_grad():
        logits = model(torch.tensor([ids]))[0, -1]
    return float(logits[RIGHT] - logits[WRONG])


@pytest.mark.parametrize("fused", [False, True])
def test_every_exact_cell_equals_the_patch_written_with_forward_hooks(fused):
    model = tiny(n_layers=3)
    if fused:
        model = fuse(model)
    pair = make_pair(model.cfg, CLEAN, CORRUPTED, RIGHT, WRONG)
    result = patching_map(model, pair, everywhere=True)
    assert result.n_exact == len(result.cells())
    for layer in range(3):
        for head in range(model.cfg.n_heads):
            hooked = _hooked_diff(model, "head", layer, None, (head,))
            assert result.head_exact[layer, head] + result.corrupted_diff == pytest.approx(
                hooked, abs=1e-5)
        for position in range(len(CLEAN)):
            hooked = _hooked_diff(model, "resid", layer, position)
            assert result.resid_exact[layer, position] + result.corrupted_diff == \
                pytest.approx(hooked, abs=1e-5)
    # ... and the two ends: the corrupted and the clean runs themselves
    assert result.corrupted_diff == pytest.approx(logit_diff(model, CORRUPTED, RIGHT, WRONG),
                                                  abs=1e-5)
    assert result.clean_diff == pytest.approx(logit_diff(model, CLEAN, RIGHT, WRONG), abs=1e-5)
    # patching the whole stream entering block 0 at every position is the clean run
    with intervening(model, f"patch trf_blocks[0].resid_pre from {','.join(map(str, CLEAN))}"):
        assert logit_diff(model, CORRUPTED, RIGHT, WRONG) == pytest.approx(result.clean_diff,
                                                                           abs=1e-5)


@pytest.mark.parametrize("spec,part,heads", [
    ("patch trf_blocks[1].att head 2", "head", (2,)),
    ("patch trf_blocks[1].att heads 0,3", "head", (0, 3)),
    ("patch trf_blocks[0].att", "att", ()),
    ("patch trf_blocks[1].ff", "ff", ()),
    ("patch trf_blocks[1].resid_pre", "resid", ())])
@pytest.mark.parametrize("position", [None, 3, len(CLEAN) - 1])
def test_a_patch_as_model_b_equals_the_patch_written_with_forward_hooks(spec, part, heads,
                                                                        position):
    model = tiny()
    at = "" if position is None else f" at {position}"
    written = f"{spec}{at} from {','.join(map(str, CLEAN))}"
    with intervening(model, written):
        b = logit_diff(model, CORRUPTED, RIGHT, WRONG)
    layer = int(spec.split("[")[1][0])
    assert b == pytest.approx(_hooked_diff(model, part, layer, position, heads), abs=1e-5)


def test_a_patch_leaves_the_positions_the_clean_prompt_lacks_and_generation_agrees():
    from explorer.book.generate import generate_steps
    model = tiny()
    spec = f"patch trf_blocks[0].att from {','.join(map(str, CLEAN[:5]))}"
    ids = CORRUPTED
    with intervening(model, spec):
        full = [logit_diff(model, ids[:n], RIGHT, WRONG) for n in (5, len(ids))]
    # the first 5 positions patched, the rest their own: written by hand with a hook
    short = _hooked_diff(model, "att", 0, None, ids=ids[:5], source=CLEAN[:5])
    assert full[0] == pytest.approx(short, abs=1e-5)
    # with the KV cache, step by step, the same greedy tokens as recomputing each step
    from explorer.probes.intervening import intervened_steps
    cached = [s.token_id for s in intervened_steps(model, spec, generate_steps(
        model, ids[:4], 4, show_top=1, tokenizer=TOK))]
    with intervening(model, spec), torch.no_grad():
        seq = list(ids[:4])
        for _ in range(4):
            seq.append(int(model(torch.tensor([seq]))[0, -1].argmax()))
    assert cached == seq[4:]


# ---------------------------------------------------------------------------------------------
# Direct logit attribution
@pytest.mark.parametrize("changes", [{}, {"pos_encoding": "rope"}, {"norm_placement": "none"},
                                     {"qkv_bias": True, "n_layers": 3}])
def test_the_direct_contributions_add_up_to_the_models_logit_difference(changes):
    model = tiny(seed=1, **changes)
    found = direct_attribution(model, CLEAN, RIGHT, WRONG)
    assert found.model_diff == pytest.approx(logit_diff(model, CLEAN, RIGHT, WRONG), abs=1e-6)
    assert found.total == pytest.approx(found.model_diff, abs=1e-5 * max(1, abs(found.model_diff)))
    assert found.heads.shape == (model.cfg.n_layers, model.cfg.n_heads)
    assert (found.pos_emb == 0) == (model.cfg.pos_encoding == "rope")
    if changes.get("norm_placement") == "none":
        assert found.final_scale == 1.0
    # the final norm's scale is the run's: the stream's own standard deviation (last position)
    else:
        with torch.no_grad():
            stream = model(torch.tensor([CLEAN]), stop_at_layer=model.cfg.n_layers)[0, -1]
        assert found.final_scale == pytest.approx(
            float(torch.sqrt(stream.var(unbiased=False) + 1e-5)), rel=1e-5)


def test_a_head_written_by_hand_gives_its_direct_contribution():
    model = tiny(seed=2)
    found = direct_attribution(model, CLEAN, RIGHT, WRONG)
    saved = {}
    model.trf_blocks[1].att.out_proj.register_forward_pre_hook(
        lambda m, a: saved.__setitem__("x", a[0]))
    with torch.no_grad():
        x = model(torch.tensor([CLEAN]), stop_at_layer=2)[0, -1]
        head = saved["x"][0, -1, 16:32] @ model.trf_blocks[1].att.out_proj.weight[:, 16:32].T
        norm = model.final_norm
        d = model.out_head.weight[RIGHT] - model.out_head.weight[WRONG]
        s = torch.sqrt(x.var(unbiased=False) + norm.eps)
        by_hand = float(d @ (norm.scale * (head - head.mean()) / s))
    assert found.heads[1, 1] == pytest.approx(by_hand, abs=1e-5)


def test_direct_attribution_is_refused_where_the_stream_is_not_a_sum():
    for changes in ({"norm_placement": "post"}, {"shortcut": False}):
        with pytest.raises(ExplorerError) as error:
            direct_attribution(tiny(**changes), CLEAN, RIGHT, WRONG)
        assert error.value.message.id == "patching.not_a_sum"


# ---------------------------------------------------------------------------------------------
# The estimate
def test_the_estimate_is_the_gradient_times_the_change_written_with_hooks_and_autograd():
    model = tiny(n_layers=3)
    pair = make_pair(model.cfg, CLEAN, CORRUPTED, RIGHT, WRONG)
    result = estimate(model, pair)
    m = copy.deepcopy(model)
    saved = {}
    for layer, block in enumerate(m.trf_blocks):
        block.att.out_proj.register_forward_pre_hook(
            lambda mod, a, layer=layer: saved.__setitem__(("head", layer), a[0]))
        block.register_forward_pre_hook(
            lambda mod, a, layer=layer: saved.__setitem__(("resid", layer), a[0]))
    with torch.no_grad():
        m(torch.tensor([CLEAN]))
    clean = dict(saved)
    for v in clean.values():
        v.requires_grad_(False)
    logits = m(torch.tensor([CORRUPTED]))[0, -1]
    diff = logits[RIGHT] - logits[WRONG]
    keys = sorted(saved)
    grads = dict(zip(keys, torch.autograd.grad(diff, [saved[k] for k in keys])))
    hd = model.cfg.head_dim
    for layer in range(3):
        change = clean[("head", layer)] - saved[("head", layer)].detach()
        per = (grads[("head", layer)] * change)[0].sum(0).view(-1, hd).sum(1)
        np.testing.assert_allclose(result.head_estimate[layer], per.numpy(), atol=1e-5)
        change = clean[("resid", layer)] - saved[("resid", layer)].detach()
        np.testing.assert_allclose(result.resid_estimate[layer],
                                   (grads[("resid", layer)] * change)[0].sum(1).numpy(),
                                   atol=1e-5)
    assert result.corrupted_diff == pytest.approx(float(diff.detach()), abs=1e-5)


def test_cells_the_two_runs_share_are_exact_at_zero_and_the_rest_wait():
    model = tiny()
    pair = make_pair(model.cfg, CLEAN, CORRUPTED, RIGHT, WRONG)
    result = estimate(model, pair)
    first = next(i for i, (a, b) in enumerate(zip(CLEAN, CORRUPTED)) if a != b)    # "Mary"
    assert first == 1
    assert (result.resid_exact[:, :first] == 0).all()         # causal: nothing has changed yet
    assert np.isnan(result.resid_exact[1:, first:]).all()
    differ = np.array(CLEAN) != np.array(CORRUPTED)             # block 0: the tokens alone
    assert np.isnan(result.resid_exact[0, differ]).all()
    assert (result.resid_exact[0, ~differ] == 0).all()
    assert result.n_exact == first + (~differ).sum()
    exact_cells(model, result, [("head", 0, 1), ("resid", 1, 5)])
    assert result.is_exact(("head", 0, 1)) and result.is_exact(("resid", 1, 5))


def test_the_share_recovered_is_0_for_the_corrupted_run_and_1_for_the_clean_one():
    assert share(3.0, 3.0, -1.0) == 1.0 and share(-1.0, 3.0, -1.0) == 0.0
    assert share(1.0, 3.0, -1.0) == 0.5


def test_refinement_makes_each_maps_top_ten_exact_or_every_cell_where_the_first_order_misses():
    model = tiny(n_layers=3)
    pair = make_pair(model.cfg, CLEAN, CORRUPTED, RIGHT, WRONG)
    result = patching_map(model, pair)
    if result.nonlinear:
        assert result.n_exact == len(result.cells())
    else:
        order = sorted(result.cells("head"), key=lambda c: -abs(result.head_estimate[c[1:]]))
        assert all(result.is_exact(c) for c in order[:10])


# ---------------------------------------------------------------------------------------------
# The string form and the refusals
def test_a_patch_says_itself_in_the_string_form_and_reads_back():
    item = Intervention("patch_heads", 3, (5,), position=7, source=(464, 3290))
    assert str(item) == "patch trf_blocks[3].att head 5 at 7 from 464,3290"
    assert Interventions.parse(str(item)) == Interventions([item])
    whole = Interventions.parse("patch trf_blocks[2].resid_pre from 1, 2,3")
    assert whole[0].kind == "patch_resid" and whole[0].position is None
    assert "every position" in whole.name()
    with pytest.raises(ExplorerError, match="clean prompt it takes"):
        Interventions.parse("patch trf_blocks[2].att head 1")
    with pytest.raises(ExplorerError, match="only patches do"):
        Interventions.parse("zero trf_blocks[2].att head 1 from 1,2")
    with pytest.raises(ExplorerError, match="at most 64 token ids"):
        Interventions.parse("patch trf_blocks[0].ff from " + ",".join(["1"] * 65)).check(
            tiny().cfg)


def test_prompts_of_different_lengths_are_refused_showing_both_tokenizations():
    cfg = tiny().cfg
    with pytest.raises(ExplorerError) as error:
        make_pair(cfg, CLEAN, TOK.encode("When Anastasia and John went to the store, John "
                                         "gave a drink to"), RIGHT, WRONG, TOK)
    text = str(error.value)
    assert "14 tokens" in text and "corrupted one 16" in text
    assert "“ Mary” · “ and”" in text and "“ An” · “ast” · “asia”" in text


def test_an_answer_of_several_tokens_is_refused_naming_its_pieces():
    from explorer.probes.patching import answer_id
    with pytest.raises(ExplorerError) as error:
        answer_id(" Anastasia", tiny().cfg, TOK)
    assert "“ An” · “ast” · “asia”" in str(error.value) and "3 tokens" in str(error.value)


def test_a_map_inside_an_intervention_is_refused():
    model = tiny()
    pair = make_pair(model.cfg, CLEAN, CORRUPTED, RIGHT, WRONG)
    with intervening(model, "zero trf_blocks[0].ff"), pytest.raises(ExplorerError):
        estimate(model, pair)


def test_patches_from_too_many_clean_prompts_are_refused_before_any_is_run():
    from explorer.probes.interventions import MAX_PATCH_SOURCES
    many = "; ".join(f"patch trf_blocks[0].ff from {i},{i + 1}"
                     for i in range(MAX_PATCH_SOURCES + 1))
    with pytest.raises(ExplorerError) as error:
        Interventions.parse(many)
    assert error.value.message.id == "intervention.patch_sources"
    assert len(Interventions.parse(many.rsplit(";", 1)[0])) == MAX_PATCH_SOURCES


def test_where_the_first_order_misses_the_whole_change_every_cell_is_planned_exact():
    from explorer.probes.patching import NONLINEAR, plan
    model = tiny(n_layers=3)
    result = estimate(model, make_pair(model.cfg, CLEAN, CORRUPTED, RIGHT, WRONG))
    waiting = [c for c in result.cells() if not result.is_exact(c)]
    result.miss = NONLINEAR / 2                      # the estimate is trusted: top 10 of each
    planned = [c for batch in plan(result) for c in batch]
    assert [c[0] for c in planned].count("head") == 10
    assert [c[0] for c in planned].count("resid") == 10
    assert all(abs(result.head_estimate[c[1:]]) >= abs(result.head_estimate[d[1:]])
               for c in planned if c[0] == "head" for d in waiting
               if d[0] == "head" and d not in planned)
    result.miss = 2 * NONLINEAR                      # it is not: every cell
    assert result.nonlinear
    assert sorted(c for batch in plan(result) for c in batch) == sorted(waiting)
    assert sorted(c for batch in plan(result, everywhere=True) for c in batch) == sorted(waiting)
