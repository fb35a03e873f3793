"""The chapter-4 GPT: the book's building blocks and numbers, both attention paths, causality,
the KV cache, weight tying, gradient flow and input checks, for every variant."""

import pytest
import torch
import torch.nn.functional as F

from explorer.book.config import GPT_CONFIG_124M, count_parameters
from explorer.book.kv_cache import KVCache
from explorer.book.fast import FusedGELU, FusedLayerNorm, FusedMultiHeadAttention, fuse
from explorer.book.model import GELU, GPTModel, LayerNorm, MultiHeadAttention
from explorer.book.probe_points import recording
from explorer.runtime.build import build_model

from engine_variants import SMALL, VARIANT_IDS, VARIANTS

BOOK_BATCH = torch.tensor([[6109, 3626, 6100, 345],    # "Every effort moves you"
                           [6109, 1110, 6622, 257]])   # "Every day holds a"


class AttentionRecorder:
    """The smallest recorder: asks for attention weights and keeps them."""

    def __init__(self, wants=True):
        self.wants = wants
        self.patterns = []

    def wants_attention(self):
        return self.wants

    def record(self, name, tensor):
        if name == "attn_pattern":
            self.patterns.append(tensor.detach().clone())


def random_ids(cfg, batch=2, length=None, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, cfg.vocab_size, (batch, length or cfg.context_length), generator=g)


@pytest.fixture(scope="module", params=VARIANT_IDS)
def variant_model(request):
    """(name, eval-mode model) for each variant; built once per module."""
    return request.param, build_model(VARIANTS[request.param], seed=7, device="cpu")


# ---------------------------------------------------------------------------------------------
# Building blocks
def test_layer_norm_equals_torch_layer_norm_and_formula():
    g = torch.Generator().manual_seed(0)
    ours = LayerNorm(24)
    with torch.no_grad():
        ours.scale.copy_(torch.randn(24, generator=g))
        ours.shift.copy_(torch.randn(24, generator=g))
    reference = torch.nn.LayerNorm(24, eps=ours.eps)
    with torch.no_grad():
        reference.weight.copy_(ours.scale)
        reference.bias.copy_(ours.shift)
    x = torch.randn(3, 5, 24, generator=g) * 4 + 2
    expected = reference(x)
    assert ours.eps == 1e-5  # the book's value, which is also torch's default
    torch.testing.assert_close(ours(x), expected, atol=1e-5, rtol=1e-5)
    fused = fuse(torch.nn.Sequential(ours))[0]          # the same module, fused kernel
    assert isinstance(fused, FusedLayerNorm)
    torch.testing.assert_close(fused(x), expected, atol=1e-5, rtol=1e-5)


def test_layer_norm_output_has_zero_mean_and_unit_variance_before_scale_and_shift():
    ln = LayerNorm(16)
    out = ln(torch.randn(4, 16, generator=torch.Generator().manual_seed(1)) * 10 + 3)
    torch.testing.assert_close(out.mean(dim=-1), torch.zeros(4), atol=1e-5, rtol=0)
    torch.testing.assert_close(out.var(dim=-1, unbiased=False), torch.ones(4), atol=1e-3, rtol=0)


def test_gelu_equals_torch_tanh_approximation_and_formula():
    g = torch.Generator().manual_seed(2)
    x = torch.cat([torch.linspace(-8, 8, 401), torch.randn(200, generator=g) * 3])
    expected = F.gelu(x, approximate="tanh")
    torch.testing.assert_close(GELU()(x), expected, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(FusedGELU()(x), expected, atol=1e-6, rtol=1e-5)


def test_the_books_forward_shows_the_formula_and_the_fused_twins_live_apart():
    import inspect
    assert "torch.sqrt(var + self.eps)" in inspect.getsource(LayerNorm.forward)
    assert "torch.tanh" in inspect.getsource(GELU.forward)
    assert "torch.softmax" in inspect.getsource(MultiHeadAttention.forward)
    for cls in (LayerNorm, GELU, MultiHeadAttention):
        assert "F." not in inspect.getsource(cls.forward)     # no fused op in the book's forward


@pytest.mark.parametrize("variant", VARIANT_IDS)
def test_fused_model_gives_the_books_logits_within_rounding(variant):
    book = build_model(VARIANTS[variant], seed=5, device="cpu", fused=False)
    fast = build_model(VARIANTS[variant], seed=5, device="cpu")
    assert any(isinstance(m, FusedMultiHeadAttention) for m in fast.modules())
    assert not any(isinstance(m, FusedMultiHeadAttention) for m in book.modules())
    ids = torch.tensor([[(7 * i + 3) % 101 for i in range(16)]])
    with torch.inference_mode():
        torch.testing.assert_close(fast(ids), book(ids), atol=2e-5, rtol=1e-5)
        for n in (0, 1, VARIANTS[variant].n_layers):      # an explicit early stop
            torch.testing.assert_close(fast(ids, stop_at_layer=n), book(ids, stop_at_layer=n),
                                       atol=2e-5, rtol=1e-5)
    for name, tensor in book.state_dict().items():
        torch.testing.assert_close(fast.state_dict()[name], tensor, atol=0, rtol=0)


# ---------------------------------------------------------------------------------------------
# The book's numbers (section 4.6)
@pytest.fixture(scope="module")
def book_model_and_output():
    """Exactly the book's code: seed, build, run the batch in train mode (dropout on)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(123)
        model = GPTModel(GPT_CONFIG_124M)
        assert model.training
        out = model(BOOK_BATCH)
    return model, out.detach()


def test_book_construction_reproduces_printed_output(book_model_and_output):
    _, out = book_model_and_output
    assert out.shape == (2, 4, 50257)
    atol = dict(atol=1e-4, rtol=0)
    torch.testing.assert_close(out[0, 0, :3], torch.tensor([0.3613, 0.4222, -0.0711]), **atol)
    torch.testing.assert_close(out[0, 0, -3:], torch.tensor([0.3483, 0.4661, -0.2838]), **atol)
    torch.testing.assert_close(out[1, 3, :3], torch.tensor([-0.1565, 0.3926, 0.3288]), **atol)


def test_build_model_creates_the_books_weights(book_model_and_output):
    book_model, _ = book_model_and_output
    built = build_model(GPT_CONFIG_124M, seed=123, device="cpu")
    expected, actual = book_model.state_dict(), built.state_dict()
    assert actual.keys() == expected.keys()
    for key in expected:
        assert torch.equal(actual[key], expected[key]), key
    assert not built.training
    assert sum(p.numel() for p in built.parameters()) == count_parameters(GPT_CONFIG_124M).total


# ---------------------------------------------------------------------------------------------
# Attention: the explicit (book) path and the fused SDPA path
def test_fast_path_records_no_attention_weights(variant_model):
    _, model = variant_model
    recorder = AttentionRecorder(wants=False)
    with torch.no_grad(), recording(recorder):
        model(random_ids(model.cfg))
    assert recorder.patterns == []


def test_explicit_and_fused_attention_agree(variant_model):
    _, model = variant_model
    ids = random_ids(model.cfg)
    recorder = AttentionRecorder()
    with torch.no_grad():
        fused = model(ids)
        with recording(recorder):
            explicit = model(ids)
    assert len(recorder.patterns) == model.cfg.n_layers
    torch.testing.assert_close(explicit, fused, atol=1e-5, rtol=1e-4)


def test_explicit_and_fused_attention_agree_after_cached_prefix(variant_model):
    _, model = variant_model
    ids = random_ids(model.cfg, length=11)
    prefix, chunk = ids[:, :5], ids[:, 5:]
    recorder = AttentionRecorder()
    with torch.no_grad():
        cache = KVCache(model, batch_size=2)
        model(prefix, cache=cache)
        fused = model(chunk, cache=cache)
        cache = KVCache(model, batch_size=2)
        model(prefix, cache=cache)
        with recording(recorder):
            explicit = model(chunk, cache=cache)
    torch.testing.assert_close(explicit, fused, atol=1e-5, rtol=1e-4)
    assert len(recorder.patterns) == model.cfg.n_layers
    for pattern in recorder.patterns:
        assert pattern.shape == (2, model.cfg.n_heads, 6, 11)
        torch.testing.assert_close(pattern.sum(-1), torch.ones(pattern.shape[:-1]))
        rows = torch.arange(5, 11)[:, None]   # absolute positions of the chunk's queries
        cols = torch.arange(11)[None, :]
        assert torch.all(pattern[..., cols > rows] == 0)
        assert torch.all(pattern[..., cols <= rows] > 0)


def test_attention_weights_rows_sum_to_one_and_future_is_zero(variant_model):
    _, model = variant_model
    recorder = AttentionRecorder()
    with torch.no_grad(), recording(recorder):
        model(random_ids(model.cfg))
    T = model.cfg.context_length
    upper = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
    for pattern in recorder.patterns:
        assert pattern.shape == (2, model.cfg.n_heads, T, T)
        torch.testing.assert_close(pattern.sum(-1), torch.ones(pattern.shape[:-1]))
        assert torch.all(pattern[..., upper] == 0)
        assert torch.all(pattern[..., 0, 0] == 1)  # the first token can only see itself


# ---------------------------------------------------------------------------------------------
# Causality and the KV cache
def test_changing_a_future_token_never_changes_earlier_logits(variant_model):
    _, model = variant_model
    ids = random_ids(model.cfg)
    with torch.no_grad():
        base = model(ids)
        for p in (1, model.cfg.context_length // 2, model.cfg.context_length - 1):
            changed = ids.clone()
            changed[:, p] = (changed[:, p] + 1) % model.cfg.vocab_size
            out = model(changed)
            torch.testing.assert_close(out[:, :p], base[:, :p], atol=1e-6, rtol=0)
            assert not torch.allclose(out[:, p], base[:, p])  # the change itself is seen


def test_kv_cache_one_token_at_a_time_matches_full_recompute(variant_model):
    _, model = variant_model
    ids = random_ids(model.cfg)
    with torch.no_grad():
        full = model(ids)
        cache = KVCache(model, batch_size=2)
        pieces = [model(ids[:, :4], cache=cache)]                # prefill
        for t in range(4, ids.shape[1]):
            pieces.append(model(ids[:, t:t + 1], cache=cache))  # then one token at a time
    assert cache.pos == ids.shape[1]
    torch.testing.assert_close(torch.cat(pieces, dim=1), full, atol=1e-4, rtol=1e-4)


def test_kv_cache_in_chunks_matches_full_recompute(variant_model):
    _, model = variant_model
    ids = random_ids(model.cfg)
    bounds = [0, 3, 4, 9, 11, 16]  # chunks of 3, 1, 5, 2, 5 tokens
    assert bounds[-1] == model.cfg.context_length
    with torch.no_grad():
        full = model(ids)
        cache = KVCache(model, batch_size=2)
        pieces = [model(ids[:, a:b], cache=cache) for a, b in zip(bounds, bounds[1:])]
    torch.testing.assert_close(torch.cat(pieces, dim=1), full, atol=1e-4, rtol=1e-4)


def test_kv_cache_reset_starts_a_new_sequence(variant_model):
    _, model = variant_model
    ids = random_ids(model.cfg, length=6)
    with torch.no_grad():
        cache = KVCache(model, batch_size=2)
        model(random_ids(model.cfg, length=10, seed=1), cache=cache)
        cache.reset()
        again = model(ids, cache=cache)
        full = model(ids)
    torch.testing.assert_close(again, full, atol=1e-5, rtol=1e-4)


def test_cache_overflow_is_refused():
    model = build_model(SMALL, seed=0, device="cpu")
    cache = KVCache(model)
    with torch.no_grad():
        model(random_ids(SMALL, batch=1, length=10), cache=cache)
        with pytest.raises(ValueError, match="context_length"):
            model(random_ids(SMALL, batch=1, length=7), cache=cache)


def test_a_cache_sized_for_a_generation_holds_just_that_and_refuses_more():
    model = build_model(SMALL, seed=0, device="cpu")
    ids = random_ids(SMALL, batch=1, length=9)
    small, full = KVCache(model, capacity=9), KVCache(model)
    assert small.layers[0].keys.shape[2] == 9 and full.layers[0].keys.shape[2] == SMALL.context_length
    assert KVCache(model, capacity=10 ** 6).capacity == SMALL.context_length
    with torch.no_grad():
        torch.testing.assert_close(model(ids[:, :5], cache=small), model(ids[:, :5], cache=full))
        for t in range(5, 9):
            torch.testing.assert_close(model(ids[:, t:t + 1], cache=small),
                                       model(ids[:, t:t + 1], cache=full))
        with pytest.raises(ValueError, match="holds 9 positions"):
            model(ids[:, :1], cache=small)
    with pytest.raises(ValueError, match="at least one token"):
        KVCache(model, capacity=0)


def test_last_only_equals_last_row_of_full_logits(variant_model):
    _, model = variant_model
    ids = random_ids(model.cfg, length=9)
    with torch.no_grad():
        full = model(ids)
        last = model(ids, last_only=True)
    assert last.shape == (2, 1, model.cfg.vocab_size)
    torch.testing.assert_close(last, full[:, -1:], atol=1e-6, rtol=1e-5)


def test_eval_model_is_deterministic(variant_model):
    _, model = variant_model
    assert not model.training
    ids = random_ids(model.cfg)
    with torch.no_grad():
        assert torch.equal(model(ids), model(ids))


# ---------------------------------------------------------------------------------------------
# Weight tying, gradients
def test_tied_weights_share_storage_and_count_once():
    cfg = SMALL.replace(tie_weights=True)
    model = build_model(cfg, seed=0, device="cpu")
    assert model.out_head.weight is model.tok_emb.weight
    assert model.out_head.weight.data_ptr() == model.tok_emb.weight.data_ptr()
    n_params = sum(p.numel() for p in model.parameters())
    untied = sum(p.numel() for p in build_model(SMALL, seed=0, device="cpu").parameters())
    assert n_params == untied - SMALL.vocab_size * SMALL.emb_dim
    assert n_params == count_parameters(cfg).total


@pytest.mark.parametrize("variant", VARIANT_IDS)
def test_gradients_reach_every_parameter(variant):
    cfg = VARIANTS[variant].replace(drop_rate=0.0)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(3)
        model = GPTModel(cfg)
    assert model.training
    ids = random_ids(cfg, seed=4)
    targets = random_ids(cfg, seed=5)
    logits = model(ids)
    loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten())
    loss.backward()
    named = list(model.named_parameters())
    assert named
    for name, p in named:
        assert p.requires_grad, name
        assert p.grad is not None, f"no gradient reaches {name}"
        assert torch.any(p.grad != 0), f"the gradient of {name} is all zero"


def test_dropout_makes_train_mode_random_and_eval_mode_not():
    cfg = SMALL.replace(drop_rate=0.5)
    model = build_model(cfg, seed=0, device="cpu")
    ids = random_ids(cfg)
    with torch.no_grad():
        model.train()
        a, b = model(ids), model(ids)
        model.eval()
        c, d = model(ids), model(ids)
    assert not torch.equal(a, b)
    assert torch.equal(c, d)


# ---------------------------------------------------------------------------------------------
# Input checks and build_model arguments
def test_input_longer_than_context_length_is_refused():
    model = build_model(SMALL, seed=0, device="cpu")
    with pytest.raises(ValueError, match="context_length"):
        model(random_ids(SMALL, batch=1, length=SMALL.context_length + 1))


@pytest.mark.parametrize("bad_id", [-1, SMALL.vocab_size])
def test_token_id_out_of_range_is_refused(bad_id):
    model = build_model(SMALL, seed=0, device="cpu")
    ids = torch.tensor([[1, 2, bad_id]])
    with pytest.raises(ValueError, match="outside this model's vocabulary"):
        model(ids)


def test_empty_or_badly_shaped_input_is_refused():
    model = build_model(SMALL, seed=0, device="cpu")
    with pytest.raises(ValueError, match="no tokens"):
        model(torch.zeros(1, 0, dtype=torch.long))
    with pytest.raises(ValueError, match=r"\(batch, tokens\)"):
        model(torch.tensor([1, 2, 3]))
    with pytest.raises(ValueError, match="must be integers"):
        model(torch.tensor([[1.0, 2.0]]))


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_build_on_cuda_without_cuda_is_refused():
    with pytest.raises(ValueError, match="CUDA is not available"):
        build_model(SMALL, device="cuda")


def test_bfloat16_on_cpu_is_refused():
    with pytest.raises(ValueError, match="bfloat16"):
        build_model(SMALL, device="cpu", dtype="bfloat16")


@pytest.mark.parametrize("kwargs, phrase", [
    (dict(device="tpu"), "device must be"),
    (dict(dtype="float64"), "dtype must be one of"),
    (dict(seed=-1), "seed must be"),
    (dict(seed=1.5), "seed must be"),
])
def test_bad_build_arguments_are_refused(kwargs, phrase):
    with pytest.raises(ValueError, match=phrase):
        build_model(SMALL, **{"device": "cpu", **kwargs})


def test_same_seed_gives_identical_weights_and_different_seed_different():
    a = build_model(SMALL, seed=11, device="cpu").state_dict()
    b = build_model(SMALL, seed=11, device="cpu").state_dict()
    c = build_model(SMALL, seed=12, device="cpu").state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert not torch.equal(a["tok_emb.weight"], c["tok_emb.weight"])
    assert not torch.equal(a["trf_blocks.0.att.W_query.weight"],
                           c["trf_blocks.0.att.W_query.weight"])


def test_build_model_leaves_global_random_state_alone():
    torch.manual_seed(99)
    expected = torch.rand(3)
    torch.manual_seed(99)
    build_model(SMALL, seed=0, device="cpu")
    assert torch.equal(torch.rand(3), expected)


def test_built_model_is_read_only():
    model = build_model(SMALL, seed=0, device="cpu")
    assert not model.training
    assert not any(p.requires_grad for p in model.parameters())
