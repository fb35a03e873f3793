"""Generation: the book's generate_text_simple, the step-by-step generator (cache, sliding
window, sampling, stop token) and its argument checks."""

import math

import pytest
import torch

from explorer.book.config import GPTConfig
from explorer.book.generate import generate_steps, generate_text_simple
from explorer.runtime.build import build_model
from explorer.book.tokenizer import EOT_ID, get_tokenizer

from engine_variants import SMALL, VARIANT_IDS, VARIANTS

C = SMALL.context_length  # 16


def prompt(length, seed=0, vocab_size=SMALL.vocab_size):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, vocab_size, (length,), generator=g).tolist()


def simple_tokens(model, ids, n):
    """New tokens from the book's generate_text_simple, as a list."""
    out = generate_text_simple(model, torch.tensor([ids]), n, model.cfg.context_length)
    return out[0, len(ids):].tolist()


@pytest.fixture(scope="module")
def model():
    return build_model(SMALL, seed=1, device="cpu")


@pytest.fixture(scope="module", params=VARIANT_IDS)
def variant_model(request):
    return build_model(VARIANTS[request.param], seed=2, device="cpu")


@pytest.fixture(scope="module")
def tokenizer():
    return get_tokenizer()


# ---------------------------------------------------------------------------------------------
# The book's generate_text_simple
def test_generate_text_simple_appends_argmax_of_each_step(model):
    ids = torch.tensor([prompt(5), prompt(5, seed=1)])
    out = generate_text_simple(model, ids, max_new_tokens=6, context_size=C)
    assert out.shape == (2, 11)
    assert torch.equal(out[:, :5], ids)
    with torch.no_grad():
        for t in range(5, 11):
            logits = model(out[:, max(0, t - C):t])
            assert torch.equal(out[:, t], logits[:, -1].argmax(dim=-1))


def test_generate_text_simple_crops_a_prompt_longer_than_the_context(model):
    ids = torch.tensor([prompt(C + 5)])
    out = generate_text_simple(model, ids, max_new_tokens=3, context_size=C)
    assert out.shape == (1, C + 8)
    with torch.no_grad():
        for t in range(C + 5, C + 8):
            assert out[0, t] == model(out[:, t - C:t])[0, -1].argmax()


def test_generate_text_simple_with_zero_new_tokens_returns_the_prompt(model):
    ids = torch.tensor([prompt(4)])
    assert torch.equal(generate_text_simple(model, ids, 0, C), ids)


# ---------------------------------------------------------------------------------------------
# generate_steps: greedy equals the book, with and without the cache, while the window slides
@pytest.mark.parametrize("use_cache", [True, False], ids=["cache", "no-cache"])
def test_greedy_steps_equal_generate_text_simple_for_every_variant(variant_model, use_cache):
    for ids, n in ((prompt(3), 8), (prompt(C - 3, seed=1), 10)):  # the second one slides
        steps = list(generate_steps(variant_model, ids, n, use_cache=use_cache))
        assert [s.token_id for s in steps] == simple_tokens(variant_model, ids, n)


def test_steps_through_the_c_step_equal_the_book_loop_on_an_untouched_model():
    # generate_steps runs one-token steps in C (explorer.native); the book's loop on a
    # fresh model, all PyTorch, must give the very same tokens.
    fast = build_model(SMALL, seed=11, device="cpu")
    book = build_model(SMALL, seed=11, device="cpu")
    ids = prompt(4, seed=3)
    tokens = [s.token_id for s in generate_steps(fast, ids, 2 * C)]
    assert tokens == simple_tokens(book, ids, 2 * C)


def test_greedy_steps_equal_generate_text_simple_for_prompt_longer_than_context(model):
    ids = prompt(C + 4)
    for use_cache in (True, False):
        steps = list(generate_steps(model, ids, 5, use_cache=use_cache))
        assert [s.token_id for s in steps] == simple_tokens(model, ids, 5)


def test_cache_serves_tokens_until_the_window_slides(model):
    ids = prompt(C - 3)
    steps = list(generate_steps(model, ids, 6))
    # The sequence holds len(ids) + index tokens when step `index` is computed.
    assert [s.cached for s in steps] == [len(ids) + s.index <= C for s in steps]
    assert all(not s.cached for s in generate_steps(model, ids, 6, use_cache=False))


def test_the_cache_has_room_for_the_prompt_and_the_new_tokens_only(model, monkeypatch):
    import explorer.book.generate as generate_module
    made = []

    class Recording(generate_module.KVCache):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            made.append(self.capacity)
    monkeypatch.setattr(generate_module, "KVCache", Recording)
    ids = prompt(3)
    steps = list(generate_steps(model, ids, 8))
    assert made == [3 + 8] and all(s.cached for s in steps)
    assert [s.token_id for s in steps] == simple_tokens(model, ids, 8)
    made.clear()
    list(generate_steps(model, prompt(C - 3, seed=1), 10))   # capped at the context, then slides
    assert made == [C]


def test_zero_new_tokens_yields_nothing(model):
    assert list(generate_steps(model, prompt(3), 0)) == []


def test_generate_steps_accepts_a_tensor_prompt(model):
    ids = prompt(4)
    from_tensor = [s.token_id for s in generate_steps(model, torch.tensor(ids), 3)]
    assert from_tensor == [s.token_id for s in generate_steps(model, ids, 3)]


# ---------------------------------------------------------------------------------------------
# What each Step reports
def test_greedy_step_fields_are_consistent(model, tokenizer):
    ids = prompt(C - 4)
    steps = list(generate_steps(model, ids, 8, show_top=5))
    assert [s.index for s in steps] == list(range(8))
    seq = list(ids)
    for s in steps:
        assert s.rank == 1
        assert s.prob == s.top_probs[0]
        assert s.token_id == s.top_ids[0]
        assert len(s.top_ids) == len(s.top_texts) == len(s.top_probs) == 5
        assert all(a >= b for a, b in zip(s.top_probs, s.top_probs[1:]))
        assert sum(s.top_probs) <= 1 + 1e-6
        assert 0 <= s.entropy_bits <= math.log2(SMALL.vocab_size) + 1e-6
        assert s.text == tokenizer.token_text(s.token_id)
        assert s.top_texts == [tokenizer.token_text(t) for t in s.top_ids]
        assert s.seconds >= 0
        # The reported distribution is the model's own, on the cropped window.
        with torch.no_grad():
            probs = torch.softmax(model(torch.tensor([seq[-C:]]))[0, -1], dim=-1)
        assert s.prob == pytest.approx(probs[s.token_id].item(), abs=1e-5)
        expected_entropy = -(probs * probs.log2()).sum().item()
        assert s.entropy_bits == pytest.approx(expected_entropy, abs=1e-4)
        seq.append(s.token_id)


def test_show_top_larger_than_vocabulary_lists_the_whole_vocabulary(model):
    (step,) = generate_steps(model, prompt(3), 1, show_top=1000)
    assert sorted(step.top_ids) == list(range(SMALL.vocab_size))
    assert sum(step.top_probs) == pytest.approx(1.0, abs=1e-5)


def test_uniform_distribution_has_maximal_entropy():
    cfg = SMALL.replace(n_layers=1)
    flat = build_model(cfg, seed=0, device="cpu")
    with torch.no_grad():
        flat.out_head.weight.zero_()  # every logit 0: a uniform next-token distribution
    (step,) = generate_steps(flat, prompt(3), 1)
    assert step.entropy_bits == pytest.approx(math.log2(cfg.vocab_size), abs=1e-4)
    assert step.prob == pytest.approx(1 / cfg.vocab_size)


# ---------------------------------------------------------------------------------------------
# Sampling
def sampled(model, seed, n=20, **kwargs):
    return [s.token_id for s in generate_steps(model, prompt(3), n, temperature=5.0, seed=seed,
                                               **kwargs)]


def test_sampling_with_a_seed_is_repeatable(model):
    assert sampled(model, seed=42) == sampled(model, seed=42)


def test_sampling_differs_across_seeds(model):
    runs = {tuple(sampled(model, seed=s)) for s in (1, 2, 3)}
    assert len(runs) == 3


def test_sampling_depends_on_its_seed_not_on_global_random_state(model):
    torch.manual_seed(0)
    a = sampled(model, seed=9)
    torch.manual_seed(1)
    assert sampled(model, seed=9) == a


def test_sampled_step_fields_are_consistent(model):
    steps = list(generate_steps(model, prompt(3), 20, temperature=5.0, seed=4))
    assert any(s.rank > 1 for s in steps)  # a hot temperature does pick unlikely tokens
    for s in steps:
        assert s.rank >= 1
        assert 0 < s.prob <= s.top_probs[0]
        assert (s.rank == 1) == (s.prob == s.top_probs[0])


def test_top_k_one_equals_greedy(model):
    ids = prompt(C - 3)
    greedy = [s.token_id for s in generate_steps(model, ids, 8)]
    top1 = [s.token_id for s in generate_steps(model, ids, 8, temperature=1.0, top_k=1, seed=3)]
    assert top1 == greedy


def test_top_k_samples_only_among_the_k_most_likely(model):
    steps = list(generate_steps(model, prompt(3), 20, temperature=5.0, top_k=3, seed=5,
                                show_top=6))
    for s in steps:
        assert s.token_id in s.top_ids[:3]
        assert s.top_probs[3:] == [0.0, 0.0, 0.0]
        assert sum(s.top_probs[:3]) == pytest.approx(1.0, abs=1e-5)


# ---------------------------------------------------------------------------------------------
# The end-of-text token
@pytest.fixture()
def eot_model():
    """A private model whose every next token is <|endoftext|>: the final norm outputs all
    ones (scale 0, shift 1) and only out_head's row for 50256 is non-zero."""
    cfg = GPTConfig(vocab_size=50257, context_length=16, emb_dim=16, n_heads=2, n_layers=1,
                    drop_rate=0.0)
    m = build_model(cfg, seed=0, device="cpu")
    with torch.no_grad():
        m.final_norm.scale.zero_()
        m.final_norm.shift.fill_(1.0)
        m.out_head.weight.zero_()
        m.out_head.weight[EOT_ID] = 1.0
    return m


def test_stop_at_eot_stops_after_the_end_of_text_token(eot_model):
    steps = list(generate_steps(eot_model, [464, 3290], 5, stop_at_eot=True))
    assert [s.token_id for s in steps] == [EOT_ID]
    assert steps[0].text == "<|endoftext|>"


def test_stop_at_eot_also_stops_when_sampling(eot_model):
    steps = list(generate_steps(eot_model, [464], 5, stop_at_eot=True, temperature=1.0, seed=0))
    assert [s.token_id for s in steps] == [EOT_ID]


def test_without_stop_at_eot_generation_continues_past_end_of_text(eot_model):
    steps = list(generate_steps(eot_model, [464, 3290], 5))
    assert [s.token_id for s in steps] == [EOT_ID] * 5


def test_token_beyond_gpt2_vocabulary_is_shown_by_its_id():
    """A teaching config may have more token ids than GPT-2's tokenizer knows."""
    cfg = GPTConfig(vocab_size=50260, context_length=8, emb_dim=8, n_heads=2, n_layers=1)
    m = build_model(cfg, seed=0, device="cpu")
    with torch.no_grad():
        m.final_norm.scale.zero_()
        m.final_norm.shift.fill_(1.0)
        m.out_head.weight.zero_()
        m.out_head.weight[50259] = 1.0
    (step,) = generate_steps(m, [50258], 1, show_top=1)
    assert step.token_id == 50259
    assert step.text == step.top_texts[0] == "<id 50259>"


# ---------------------------------------------------------------------------------------------
# Bad arguments fail at call time, before the first token
@pytest.mark.parametrize("kwargs, phrase", [
    (dict(max_new_tokens=-1), "max_new_tokens"),
    (dict(max_new_tokens="x"), "max_new_tokens"),
    (dict(max_new_tokens=2.5), "max_new_tokens"),
    (dict(temperature=-1), "temperature"),
    (dict(temperature=float("nan")), "temperature"),
    (dict(temperature=float("inf")), "temperature"),
    (dict(top_k=0), "top_k"),
    (dict(top_k=60000), "top_k"),
    (dict(top_k=SMALL.vocab_size + 1), "larger than the vocabulary"),
    (dict(seed=-1, temperature=1.0), "seed"),
    (dict(show_top=0), "show_top"),
    (dict(token_ids=[]), "no tokens"),
    (dict(token_ids=[1, SMALL.vocab_size]), "outside this model's vocabulary"),
    (dict(token_ids=[-1, 2]), "outside this model's vocabulary"),
])
def test_bad_generation_arguments_raise_at_call_time(model, kwargs, phrase):
    args = {"token_ids": [1, 2, 3], "max_new_tokens": 3, **kwargs}
    with pytest.raises(ValueError, match=phrase):
        generate_steps(model, args.pop("token_ids"), args.pop("max_new_tokens"), **args)


@pytest.mark.parametrize("token_ids", [[1.5, 2], [None], ["7"], [True, 2], [[1, 2]]],
                         ids=["float", "None", "str", "bool", "nested"])
def test_non_integer_token_ids_raise_value_error(model, token_ids):
    # Like the tokenizer: 1.5 must not silently become token 1, nor "7" token 7.
    with pytest.raises(ValueError, match="integer"):
        generate_steps(model, token_ids, 1)
