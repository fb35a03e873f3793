"""The decoding kernels (``explorer/native/decode.c``) against PyTorch: the two-core product for
one token's vector against F.linear (its helper taken back when slow, many threads at once), one
query's attention, the next-token summary, a trace's rows, and the whole C step against the
book's path for every variant. CI runs them again on a build with AddressSanitizer and UBSan."""
import os
import threading

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from explorer import native
from explorer.native import decode as decode_kernels
from explorer.book.generate import generate_steps
from explorer.book.kv_cache import KVCache
from explorer.book.probe_points import recording
from explorer.runtime.build import build_model

from engine_variants import VARIANT_IDS, VARIANTS

# The C path, handed to the generator as the app hands it.
C = dict(step=native.model_step, summarize=native.next_token_summary)

pytestmark = pytest.mark.native
# A sanitizer build (GPT_EXPLORER_NATIVE_SANITIZE=1, CI) vectorises no loop, so its long sums run
# in one sequence and round more (~sqrt(n) float32 steps); the run is there for memory errors
# and undefined behaviour, and the precision bounds below hold for the build users get.
LOOSE = 100 if os.environ.get("GPT_EXPLORER_NATIVE_SANITIZE") == "1" else 1
needs_kernel = pytest.mark.skipif(not decode_kernels.available(), reason="no C compiler")

SHAPES = [(768, 2304, True), (3072, 768, True), (768, 50257, False), (5, 7, True),
          (33, 4099, True), (1, 64, False), (768, 63, True)]   # (in, out, bias)


def weights(in_features, out_features, bias, seed=0):
    generator = torch.Generator().manual_seed(seed)
    w = torch.randn(out_features, in_features, generator=generator)
    b = torch.randn(out_features, generator=generator) if bias else None
    x = torch.randn(1, 1, in_features, generator=generator)
    return x, w, b


@needs_kernel
@pytest.mark.parametrize("in_features, out_features, bias", SHAPES)
def test_the_product_equals_f_linear_and_does_not_depend_on_who_computed_it(in_features,
                                                                            out_features, bias):
    x, w, b = weights(in_features, out_features, bias)
    shared = decode_kernels.linear(x, w, b, share=True)
    alone = decode_kernels.linear(x, w, b, share=False)
    assert shared.shape == (1, 1, out_features)
    torch.testing.assert_close(shared, F.linear(x, w, b), atol=1e-4 * LOOSE,
                               rtol=1e-5 * LOOSE)
    assert torch.equal(shared, alone)          # the same rows code, whichever thread ran it


@needs_kernel
def test_a_slow_helper_has_its_chunks_taken_back_and_the_result_is_unchanged():
    x, w, b = weights(768, 50257, True, seed=1)
    expected = decode_kernels.linear(x, w, b, share=False)
    library = decode_kernels._native.load()
    before = decode_kernels.counts()
    library.set_helper_delay(2_000_000)         # 2 ms after each chunk: far slower than us
    kept_alive = 0
    try:
        # Until the helper has had chunks taken back a few times (it must first be scheduled
        # during a product, which a busy machine may delay).
        for _ in range(60):
            assert torch.equal(decode_kernels.linear(x, w, b), expected)
            # The helper is still pausing: what it may read stays alive until it has left.
            kept_alive += any(kept[0] is w for _, kept in decode_kernels._in_use)
            if kept_alive >= 3:
                break
    finally:
        library.set_helper_delay(0)
    assert kept_alive >= 3
    assert decode_kernels.counts()["taken_back"] > before["taken_back"]
    for _ in range(50):                         # an unhindered helper does its share again
        assert torch.equal(decode_kernels.linear(x, w, b), expected)
    assert decode_kernels.counts()["helper"] > before["helper"]


@needs_kernel
def test_products_from_many_threads_at_once_are_each_right():
    problems = [weights(i, o, bias, seed=n) for n, (i, o, bias) in enumerate(SHAPES * 2)]
    expected = [decode_kernels.linear(*p, share=False) for p in problems]
    errors = []

    def work(which):
        try:
            for _ in range(20):
                for p, e in zip(problems[which::4], expected[which::4]):
                    assert torch.equal(decode_kernels.linear(*p), e)
        except AssertionError as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


def test_what_the_kernel_does_not_take_falls_back():
    x, w, b = weights(16, 8, True)
    assert decode_kernels.linear(torch.randn(2, 16), w, b) is None                 # two rows
    assert decode_kernels.linear(x.double(), w.double(), b.double()) is None       # not float32
    assert decode_kernels.linear(x, w.t().contiguous().t(), b) is None             # [in, out] storage


def test_without_a_compiler_decoding_uses_pytorch_and_says_why(without_compiler, caplog):
    without_compiler(decode_kernels)
    with caplog.at_level("WARNING", logger="explorer.native"):
        assert not decode_kernels.available()
    assert "PyTorch" in caplog.text
    model = build_model(VARIANTS[VARIANT_IDS[0]], seed=3, device="cpu")
    with torch.inference_mode():
        assert decode_kernels.model_step(model, 1, KVCache(model)) is None
    assert [s.token_id for s in generate_steps(model, [1, 2], 4, **C)] == \
        [s.token_id for s in generate_steps(model, [1, 2], 4, use_cache=False)]


@needs_kernel
@pytest.mark.parametrize("variant", VARIANT_IDS)
def test_the_c_step_gives_the_models_logits_and_cache_for_every_variant(variant):
    model = build_model(VARIANTS[variant], seed=5, device="cpu")
    generator = torch.Generator().manual_seed(2)
    ids = torch.randint(0, model.cfg.vocab_size, (1, 9), generator=generator)
    book_cache, c_cache = KVCache(model, capacity=12), KVCache(model, capacity=12)
    with torch.inference_mode():
        model(ids[:, :3], cache=book_cache)              # the prompt, as generation prefills
        model(ids[:, :3], cache=c_cache)
        for t in range(3, ids.shape[1]):
            expected = model(ids[:, t:t + 1], cache=book_cache, last_only=True)
            got = decode_kernels.model_step(model, int(ids[0, t]), c_cache)
            torch.testing.assert_close(got, expected, atol=1e-4, rtol=1e-4)
            assert c_cache.pos == book_cache.pos == t + 1
        for mine, theirs in zip(c_cache.layers, book_cache.layers):
            torch.testing.assert_close(mine.keys[:, :, :9], theirs.keys[:, :, :9],
                                       atol=1e-5, rtol=1e-5)
            torch.testing.assert_close(mine.values[:, :, :9], theirs.values[:, :, :9],
                                       atol=1e-5, rtol=1e-5)


@needs_kernel
def test_the_c_step_steps_aside_where_the_model_must_run():
    model = build_model(VARIANTS[VARIANT_IDS[0]], seed=5, device="cpu")
    cache = KVCache(model, capacity=2)
    with torch.inference_mode():
        assert decode_kernels.model_step(model, 1, cache) is not None
        with recording(type("Listener", (), {"record": lambda self, name, x: None,
                                             "wants_attention": lambda self: False})()):
            assert decode_kernels.model_step(model, 1, cache) is None   # a recorder listens
        assert decode_kernels.model_step(model, 1, cache) is not None
        assert decode_kernels.model_step(model, 1, cache) is None       # the cache is full
        assert cache.pos == 2
        model.train()
        assert decode_kernels.model_step(model, 1, KVCache(model)) is None
        model.eval()
    assert decode_kernels.model_step(model, 1, KVCache(model)) is None  # gradients on
    with torch.inference_mode():
        old = model.out_head.weight.data_ptr()
        model.out_head.weight = torch.nn.Parameter(model.out_head.weight.double(),
                                                   requires_grad=False)
        assert model.out_head.weight.data_ptr() != old
        assert decode_kernels.model_step(model, 1, KVCache(model)) is None   # float64 now


@needs_kernel
def test_generation_takes_the_c_step_and_gives_the_book_loops_tokens(monkeypatch):
    model = build_model(VARIANTS[VARIANT_IDS[0]], seed=8, device="cpu")
    calls = []

    def spy(*args):
        logits = native.model_step(*args)
        calls.append(logits is not None)
        return logits
    steps = list(generate_steps(model, [5, 6, 7], 12, step=spy,
                                summarize=native.next_token_summary))
    cached = [s.token_id for s in steps]
    assert calls and all(calls) and len(calls) == 11       # every step after the prefill
    assert [s.fast_step for s in steps] == [False] + [True] * 11
    assert cached == [s.token_id for s in generate_steps(model, [5, 6, 7], 12, use_cache=False)]


def torch_summary(logits, k):
    probs = torch.softmax(logits.double(), dim=-1)
    top = torch.topk(probs, k)
    entropy = float(torch.special.entr(probs).sum() / torch.log(torch.tensor(2.0)))
    return top.indices.tolist(), top.values.tolist(), entropy


@needs_kernel
@pytest.mark.parametrize("n, k, scale", [(50257, 10, 3.0), (50257, 1, 0.01), (100, 64, 1.0),
                                         (7, 7, 5.0), (1000, 10, 60.0)])
def test_next_token_summary_equals_softmax_topk_and_entropy(n, k, scale):
    generator = torch.Generator().manual_seed(n + k)
    logits = torch.randn(n, generator=generator) * scale
    logits[n // 2] = logits.max() + 0.5 if n > 10 else logits[n // 2]   # a clear winner
    ids, probs, entropy = decode_kernels.next_token_summary(logits, k)
    expected_ids, expected_probs, expected_entropy = torch_summary(logits, k)
    assert ids == expected_ids
    torch.testing.assert_close(torch.tensor(probs, dtype=torch.float64),
                               torch.tensor(expected_probs, dtype=torch.float64),
                               rtol=2e-6 * LOOSE, atol=1e-9 * LOOSE)
    assert entropy == pytest.approx(expected_entropy, rel=1e-5 * LOOSE, abs=1e-6)


@needs_kernel
def test_next_token_summary_breaks_ties_like_argmax_and_refuses_inf_and_nan():
    logits = torch.zeros(50)
    logits[[7, 3, 30]] = 2.0                    # three equal best: argmax picks 3
    ids, probs, _ = decode_kernels.next_token_summary(logits, 4)
    assert ids[:3] == [3, 7, 30] and int(torch.argmax(torch.softmax(logits, -1))) == 3
    assert probs[0] == probs[1] == probs[2]
    uniform = decode_kernels.next_token_summary(torch.zeros(1024), 1)
    assert uniform[2] == pytest.approx(10.0, rel=1e-6)        # log2(1024) bits
    for bad in (float("inf"), float("-inf"), float("nan")):
        broken = logits.clone()
        broken[11] = bad
        assert decode_kernels.next_token_summary(broken, 4) is None
    assert decode_kernels.next_token_summary(logits, 65) is None          # more than 64
    assert decode_kernels.next_token_summary(logits.double(), 4) is None


@needs_kernel
@pytest.mark.parametrize("heads, keys, head_dim, capacity", [(12, 1, 64, 1024), (12, 300, 64, 400),
                                                             (3, 17, 5, 17), (1, 2000, 128, 2048)])
def test_one_query_attention_equals_scaled_dot_product_attention(heads, keys, head_dim,
                                                                 capacity):
    generator = torch.Generator().manual_seed(keys)
    cache_k = torch.randn(1, heads, capacity, head_dim, generator=generator) * 2
    cache_v = torch.randn(1, heads, capacity, head_dim, generator=generator)
    q = torch.randn(1, heads, head_dim, generator=generator).unsqueeze(2)   # (1, heads, 1, d)
    k, v = cache_k[:, :, :keys], cache_v[:, :, :keys]     # views, as the KV cache hands them
    expected = F.scaled_dot_product_attention(q, k, v)
    for share in (True, False):
        got = decode_kernels.attention(q, k, v, share=share)
        torch.testing.assert_close(got, expected, atol=2e-6, rtol=1e-5)
    assert decode_kernels.attention(q, k.contiguous().transpose(2, 3).contiguous()
                                    .transpose(2, 3), v) is None    # keys not stored by rows
    assert decode_kernels.attention(q.double(), k.double(), v.double()) is None


@needs_kernel
def test_two_generations_at_once_on_one_model_each_get_their_own_tokens():
    model = build_model(VARIANTS[VARIANT_IDS[0]], seed=9, device="cpu")
    prompts = [[1, 2, 3], [7, 8]]
    expected = [[s.token_id for s in generate_steps(model, p, 20, use_cache=False)]
                for p in prompts]
    results = {}

    def run(i):
        for _ in range(5):
            results.setdefault(i, []).append(
                [s.token_id for s in generate_steps(model, prompts[i], 20, **C)])

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i, runs in results.items():
        assert runs == [expected[i]] * 5


@needs_kernel
def test_rows_summary_is_the_summary_of_each_row_and_a_trace_gets_the_same_figures(monkeypatch):
    generator = torch.Generator().manual_seed(4)
    logits = torch.randn(7, 3000, generator=generator) * 4
    ids, probs, entropy = decode_kernels.rows_summary(logits, 5)
    for row in range(7):
        expected_ids, expected_probs, expected_entropy = torch_summary(logits[row], 5)
        assert ids[row].tolist() == expected_ids
        torch.testing.assert_close(probs[row].double(), torch.tensor(expected_probs,
                                                                     dtype=torch.float64),
                                   rtol=2e-6 * LOOSE, atol=1e-9 * LOOSE)
        assert float(entropy[row]) == pytest.approx(expected_entropy, rel=1e-5 * LOOSE)
    logits[3, 17] = float("nan")
    assert decode_kernels.rows_summary(logits, 5) is None

    from explorer.probes import trace
    model = build_model(VARIANTS[VARIANT_IDS[0]], seed=1, device="cpu")
    prompt = list(range(1, 12))
    fast = trace(model, prompt, top_k=5, attention_layers="all")
    monkeypatch.setattr(decode_kernels, "available", lambda: False)
    torch_path = trace(model, prompt, top_k=5, attention_layers="all")
    assert (fast.next_ids == torch_path.next_ids).all()
    np.testing.assert_allclose(fast.next_probs, torch_path.next_probs, rtol=1e-5, atol=1e-7)
    # The attention weights and entropies (three passes in C, or PyTorch's steps).
    assert sorted(fast.attention) == sorted(torch_path.attention) == list(range(model.cfg.n_layers))
    for layer, weights in fast.attention.items():
        np.testing.assert_allclose(weights, torch_path.attention[layer], rtol=1e-5, atol=1e-7)
        assert (np.triu(weights, k=1) == 0).all()
    np.testing.assert_allclose(fast.attention_entropy, torch_path.attention_entropy,
                               rtol=1e-5, atol=1e-6)
