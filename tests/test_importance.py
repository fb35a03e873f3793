"""Which parts matter (``explorer.probes.knockouts``): the batched map against one knock-out at
a time through the whole book's GPTModel by forward hooks, on a briefly trained teach-tiny
model, a random GPT-2-small-shaped one and the other variants; its memory refusal and its
progress."""
from dataclasses import replace

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from explorer.book.config import GPT_CONFIG_124M, GPTConfig, get_preset
from explorer.book.errors import ExplorerError
from explorer.book.fast import fuse
from explorer.book.model import GPTModel
from explorer.book.tokenizer import get_tokenizer
from explorer.probes.budget import importance_peak_bytes
from explorer.probes.knockouts import PARTS, Importance, block_parts, importance
from explorer.probes.intervening import intervening
from explorer.runtime.training.setup import default_corpus

from intervention_hooks import block_by_hand, with_random_norms

STORY_IDS = get_tokenizer().encode(default_corpus().text)


def reference_map(model, ids, layers=None):
    """Every knock-out on its own, through the whole model, by hooks (removed after) that one
    setting switches on: ((clean loss, clean prob), heads (2, layers, heads): losses and probs,
    parts (2, layers, parts)), NaN for parts the model lacks and for blocks not in ``layers``
    (default: all)."""
    cfg, ids = model.cfg, torch.tensor([ids])
    layers = range(cfg.n_layers) if layers is None else layers
    now = {}                       # the knock-out switched on: layer, and head or part
    handles = []

    def on(layer, what):
        return now.get("layer") == layer and now.get("what") == what

    for layer, block in enumerate(model.trf_blocks):
        def zero_head(module, args, layer=layer):
            head = now.get("what")
            if now.get("layer") != layer or not isinstance(head, int):
                return None
            x = args[0].clone()
            x[..., head * cfg.head_dim:(head + 1) * cfg.head_dim] = 0
            return (x,)
        handles.append(block.att.out_proj.register_forward_pre_hook(zero_head))
        for part in ("att", "ff"):
            handles.append(getattr(block, part).register_forward_hook(
                lambda m, a, out, layer=layer, part=part: torch.zeros_like(out)
                if on(layer, part) else None))
        for part in ("norm1", "norm2"):
            handles.append(getattr(block, part).register_forward_hook(
                lambda m, a, out, layer=layer, part=part: a[0] if on(layer, part) else None))
        handles.append(block.register_forward_hook(
            lambda b, a, out, layer=layer: block_by_hand(b, a[0], False, False)
            if on(layer, "shortcut") else None))

    def scores():
        losses = F.cross_entropy(model(ids)[0, :-1], ids[0, 1:], reduction="none")
        return losses.mean().item(), torch.exp(-losses).mean().item()
    try:
        with torch.no_grad():
            clean = scores()
            heads = np.full((2, cfg.n_layers, cfg.n_heads), np.nan)
            parts = np.full((2, cfg.n_layers, len(PARTS)), np.nan)
            for layer in layers:
                for head in range(cfg.n_heads):
                    now.update(layer=layer, what=head)
                    heads[:, layer, head] = scores()
                for part in block_parts(cfg):
                    now.update(layer=layer, what=part)
                    parts[:, layer, PARTS.index(part)] = scores()
    finally:
        for handle in handles:
            handle.remove()
    return clean, heads, parts


def assert_same_map(ours: Importance, reference):
    """Equal, in the blocks the reference computed."""
    (clean_loss, clean_prob), heads, parts = reference
    done = ~np.isnan(heads[0, :, 0])
    heads, parts = heads[:, done], parts[:, done]
    ours = replace(ours, head_loss=ours.head_loss[done], head_prob=ours.head_prob[done],
                   part_loss=ours.part_loss[done], part_prob=ours.part_prob[done])
    assert ours.clean_loss == pytest.approx(clean_loss, rel=1e-5)
    assert ours.clean_prob == pytest.approx(clean_prob, rel=1e-5)
    for (loss, prob), (ref_loss, ref_prob) in ((
            (ours.head_loss, ours.head_prob), heads), ((ours.part_loss, ours.part_prob), parts)):
        # The knocked-out losses to 1e-5 relative; the changes to 1e-5 of the loss.
        np.testing.assert_allclose(loss + ours.clean_loss, ref_loss, rtol=1e-5)
        np.testing.assert_allclose(loss, ref_loss - clean_loss, rtol=0, atol=1e-5 * clean_loss)
        np.testing.assert_allclose(prob, ref_prob - clean_prob, rtol=0, atol=1e-5 * clean_prob)
    assert np.isnan(ours.part_loss).sum() == np.isnan(parts[0]).sum()


@pytest.fixture(scope="module")
def trained_tiny():
    """teach-tiny trained for 30 steps of AdamW on the default story (eval mode after)."""
    torch.manual_seed(0)
    model = GPTModel(get_preset("teach-tiny"))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.1)
    data = torch.tensor(STORY_IDS)
    g = torch.Generator().manual_seed(0)
    losses = []
    for _ in range(30):
        starts = torch.randint(0, len(data) - 33, (4,), generator=g)
        batch = torch.stack([data[s:s + 33] for s in starts])
        loss = F.cross_entropy(model(batch[:, :-1]).flatten(0, 1), batch[:, 1:].flatten())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0] - 2          # it did learn something
    return model.eval().requires_grad_(False)


def test_the_map_of_a_trained_tiny_model_equals_one_knock_out_at_a_time_by_hooks(trained_tiny):
    ids = STORY_IDS[1000:1048]
    ours = importance(trained_tiny, ids)
    assert_same_map(ours, reference_map(trained_tiny, ids))
    assert ours.head_loss.shape == (2, 4) and ours.part_loss.shape == (2, len(PARTS))
    assert ours.batch == 5 and ours.layer_labels == ["trf_blocks[0]", "trf_blocks[1]"]
    # A trained model leans on its parts: knocking out a whole sub-layer hurts.
    assert np.nanmax(ours.part_loss) > 0.03
    # The cell's intervention, applied, gives the cell's figure.
    layer, head = np.unravel_index(np.argmax(ours.head_loss), ours.head_loss.shape)
    with intervening(trained_tiny, [Importance.head_intervention(int(layer), int(head))]), \
            torch.no_grad():
        logits = trained_tiny(torch.tensor([ids]))[0, :-1]
    loss = F.cross_entropy(logits, torch.tensor(ids[1:])).item()
    assert loss - ours.clean_loss == pytest.approx(ours.head_loss[layer, head], abs=1e-5)


def test_the_map_of_a_random_gpt2_small_equals_one_knock_out_at_a_time_by_hooks():
    torch.manual_seed(123)
    model = GPTModel(GPT_CONFIG_124M).eval().requires_grad_(False)
    ids = STORY_IDS[:5]
    reference = reference_map(model, ids, layers=(0, 11))      # (a forward pass each)
    fuse(model)                                       # the map runs on the app's fast twin
    ours = importance(model, ids)
    assert_same_map(ours, reference)
    assert ours.head_loss.shape == (12, 12) and ours.batch == 12
    assert np.abs(ours.head_loss).max() > 1e-4          # (knock-outs do change the loss)


@pytest.mark.parametrize("changes", [{"norm_placement": "post"}, {"norm_placement": "none"},
                                     {"shortcut": False}, {"pos_encoding": "rope"}])
def test_the_map_of_every_variant_equals_the_hooks(changes):
    cfg = GPTConfig(vocab_size=97, context_length=24, emb_dim=16, n_heads=4, n_layers=3,
                    drop_rate=0.0, **changes)
    torch.manual_seed(1)
    model = with_random_norms(GPTModel(cfg).eval())
    ids = list(range(3, 40, 3))
    ours = importance(model, ids, batch=2)          # (in several batches per block)
    assert_same_map(ours, reference_map(model, ids))
    missing = [PARTS.index(p) for p in PARTS if p not in block_parts(cfg)]
    assert np.isnan(ours.part_loss[:, missing]).all()
    assert not np.isnan(np.delete(ours.part_loss, missing, axis=1)).any()


def test_progress_counts_every_knock_out(trained_tiny):
    calls = []
    importance(trained_tiny, STORY_IDS[:12], progress=lambda done, total: calls.append(
        (done, total)))
    total = 2 * (4 + 5)
    assert calls[-1] == (total, total) and all(t == total for _, t in calls)
    assert [d for d, _ in calls] == sorted(d for d, _ in calls) and len(calls) == 4
    heads_only = []
    importance(trained_tiny, STORY_IDS[:12], parts=False,
               progress=lambda done, total: heads_only.append(total))
    assert set(heads_only) == {8}


def test_a_map_too_large_for_the_budget_is_refused_with_the_largest_that_fits(trained_tiny):
    cfg, n = trained_tiny.cfg, 40
    one = importance_peak_bytes(cfg, n, 1)
    with pytest.raises(ExplorerError) as error:
        importance(trained_tiny, STORY_IDS[:n], max_bytes=one - 1)
    message = error.value.message
    assert message.id == "importance.too_large"
    most = message.fields["most"]
    assert 1 <= most < n and importance_peak_bytes(cfg, most, 1) <= one - 1 \
        < importance_peak_bytes(cfg, most + 1, 1)
    # Room for 2 copies at once: the map runs in smaller batches, with the same numbers.
    two = importance_peak_bytes(cfg, n, 2)
    small = importance(trained_tiny, STORY_IDS[:n], max_bytes=two)
    whole = importance(trained_tiny, STORY_IDS[:n])
    assert small.batch == 2 and whole.batch == 5
    np.testing.assert_allclose(small.head_loss, whole.head_loss, rtol=1e-5, atol=1e-6)
    # A batch asked for that does not fit: the largest that does.
    with pytest.raises(ExplorerError) as error:
        importance(trained_tiny, STORY_IDS[:n], batch=4, max_bytes=two)
    assert error.value.message.id == "importance.batch_too_large"
    assert error.value.message.fields["most"] == 2


def test_bad_requests_get_messages(trained_tiny):
    for ids, kwargs, message_id in (([5], {}, "importance.too_short"),
                                    ([5, 6], {"batch": 0}, "importance.batch"),
                                    ([], {}, "prompt.no_tokens")):
        with pytest.raises(ExplorerError) as error:
            importance(trained_tiny, ids, **kwargs)
        assert error.value.message.id == message_id
    with intervening(trained_tiny, "zero pos_emb"), pytest.raises(ExplorerError) as error:
        importance(trained_tiny, [5, 6])
    assert error.value.message.id == "importance.inside_intervention"
