"""The shortcut lesson (the book's section 4.4) and per-block gradients of a GPT variant."""

import math

import pytest
import torch

from explorer.book.config import GPTConfig
from explorer.book.gradients import gpt_gradients, shortcut_demo

from engine_variants import VARIANT_IDS, VARIANTS

# The book's printed output of print_gradients(model_without_shortcut / model_with_shortcut, ...)
BOOK_WITHOUT_SHORTCUT = {
    "layers.0.0.weight": 0.00020173587836325169,
    "layers.1.0.weight": 0.0001201116101583466,
    "layers.2.0.weight": 0.0007152041653171182,
    "layers.3.0.weight": 0.001398873864673078,
    "layers.4.0.weight": 0.005049646366387606,
}
BOOK_WITH_SHORTCUT = {
    "layers.0.0.weight": 0.22169792652130127,
    "layers.1.0.weight": 0.20694105327129364,
    "layers.2.0.weight": 0.32896995544433594,
    "layers.3.0.weight": 0.2665732502937317,
    "layers.4.0.weight": 1.3258541822433472,
}

CFG = GPTConfig(vocab_size=101, context_length=16, emb_dim=32, n_heads=4, n_layers=3)
IDS = [5, 17, 99, 3, 3, 42, 0, 64]


@pytest.mark.parametrize("use_shortcut, book", [(False, BOOK_WITHOUT_SHORTCUT),
                                                (True, BOOK_WITH_SHORTCUT)],
                         ids=["without-shortcut", "with-shortcut"])
def test_shortcut_demo_reproduces_the_books_gradient_table(use_shortcut, book):
    grads = shortcut_demo(use_shortcut)
    assert list(grads) == list(book)
    for name, value in book.items():
        assert grads[name] == pytest.approx(value, rel=1e-4), name


def test_shortcuts_give_the_first_layer_a_larger_gradient():
    without, with_ = shortcut_demo(False), shortcut_demo(True)
    assert with_["layers.0.0.weight"] > 100 * without["layers.0.0.weight"]
    # Without shortcuts the gradient fades towards the first layer.
    assert without["layers.0.0.weight"] < without["layers.4.0.weight"]


def test_shortcut_demo_is_the_same_every_run_and_does_not_touch_the_global_seed():
    torch.manual_seed(0)
    expected_next = torch.rand(1)
    torch.manual_seed(0)
    assert shortcut_demo(True) == shortcut_demo(True)
    assert torch.equal(torch.rand(1), expected_next)


@pytest.mark.parametrize("name", VARIANT_IDS)
def test_gpt_gradients_are_finite_and_positive_for_every_block(name):
    cfg = VARIANTS[name]
    grads = gpt_gradients(cfg, [i % cfg.vocab_size for i in IDS])
    for values in (grads.blocks, grads.attention, grads.feed_forward):
        assert len(values) == cfg.n_layers
        assert all(math.isfinite(v) and v > 0 for v in values), values
    for value in (grads.embedding, grads.output_head, grads.loss):
        assert math.isfinite(value) and value > 0


def test_gpt_gradients_are_reproducible_for_one_seed():
    a, b = gpt_gradients(CFG, IDS), gpt_gradients(CFG, IDS)
    assert a == b
    assert gpt_gradients(CFG, IDS, seed=7).blocks != a.blocks


def test_gpt_gradients_loss_is_the_next_token_cross_entropy():
    # A fresh model guesses roughly uniformly: the loss is near ln(vocab_size).
    grads = gpt_gradients(CFG, IDS)
    assert abs(grads.loss - math.log(CFG.vocab_size)) < 1.0


@pytest.mark.parametrize("ids", [[], [5]], ids=["no-tokens", "one-token"])
def test_gpt_gradients_need_at_least_two_tokens(ids):
    with pytest.raises(ValueError, match="two tokens"):
        gpt_gradients(CFG, ids)


def test_gradient_demos_beside_concurrent_builds_get_the_books_numbers():
    """Every seeded construction takes the same lock: a build running at the same moment must
    not draw from the global generator between the demo's manual_seed and its weights."""
    import threading

    from explorer.runtime.build import build_model

    expected_book = shortcut_demo(False)
    expected_gpt = gpt_gradients(CFG, IDS)
    stop, errors, results = threading.Event(), [], []

    def builder():
        try:
            while not stop.is_set():
                build_model(CFG.replace(n_layers=6, emb_dim=64), seed=7, device="cpu")
        except Exception as exc:   # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=builder) for _ in range(2)]
    for t in threads:
        t.start()
    try:
        for _ in range(15):
            results.append((shortcut_demo(False), gpt_gradients(CFG, IDS)))
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert not errors
    for book, gpt in results:
        assert book == expected_book
        assert gpt == expected_gpt
