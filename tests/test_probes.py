"""The traced forward pass (explorer.probes): where each statistic is measured, that the
numbers are right, that every variant traces, and that recording leaves the model untouched."""

import threading

import numpy as np
import pytest
import torch

import explorer.book.probe_points as model_module
from explorer.native import stats as stat_kernels
from explorer.book.config import GPTConfig
from explorer.book.model import MultiHeadAttention
from explorer.book.probe_points import BLOCK_PROBE_POINTS, recording
from explorer.probes.recorder import UNREDUCED
from explorer.runtime.build import build_model
from explorer.book.probe_points import POINT_LABELS
from explorer.probes.vocabulary import HEAD_ROWS, head_product, row_topk
from explorer.probes import (
    ATTENTION_ALL_LAYERS_MAX_TOKENS,
    HIST_BINS,
    STAT_NAMES,
    longest_trace,
    trace,
    trace_peak_bytes,
    with_attention_of_layer,
)

from engine_variants import VARIANT_IDS, VARIANTS

# Teaching-size model: every trace below takes milliseconds.
CFG = GPTConfig(vocab_size=101, context_length=32, emb_dim=32, n_heads=4, n_layers=3,
                drop_rate=0.0)
PROMPT = [7, 3, 99, 0, 42, 42, 5, 17, 63, 8, 1, 100]
T = len(PROMPT)


@pytest.fixture(scope="module")
def model():
    return build_model(CFG, device="cpu")


@pytest.fixture(scope="module")
def full_trace(model):
    return trace(model, PROMPT, lens="all", keep_logits=True)


def plain_logits(model, ids):
    with torch.inference_mode():
        return model(torch.tensor([ids]))[0]


class KeepEverything:
    """A recorder that keeps a copy of every probe point of every layer: the raw activations
    that the Trace summarises."""

    def __init__(self):
        self.layers = []
        self.final = {}

    def wants_attention(self):
        return True

    def record(self, name, x):
        if name in ("positions", "pos_emb", "attn_context"):   # not an activation's statistics
            return
        if name == "resid_pre":
            self.layers.append({})
        target = self.final if name.startswith("final_norm") else self.layers[-1]
        target[name] = x[0].detach().clone().float().numpy()


def record_everything(model, ids):
    rec = KeepEverything()
    with torch.inference_mode(), recording(rec):
        model(torch.tensor([ids]))
    return rec


def direct_stats(x):
    """The Trace's statistics of one (T, width) array, computed the obvious way in float64."""
    x = x.astype(np.float64)
    per_token = {
        "mean": x.mean(-1), "std": x.std(-1), "rms": np.sqrt((x ** 2).mean(-1)),
        "min": x.min(-1), "max": x.max(-1), "abs_mean": np.abs(x).mean(-1),
        "zero_frac": (x == 0).mean(-1), "nonfinite": (~np.isfinite(x)).sum(-1),
    }
    overall = {
        "mean": x.mean(), "std": x.std(), "rms": np.sqrt((x ** 2).mean()), "min": x.min(),
        "max": x.max(), "abs_mean": np.abs(x).mean(), "zero_frac": (x == 0).mean(),
        "nonfinite": (~np.isfinite(x)).sum(),
    }
    return per_token, overall


# ---------------------------------------------------------------------------------------------
# Where the statistics are measured, and that they are right
def test_after_pre_ln_norm1_every_token_has_mean_zero_and_variance_one(model, full_trace):
    # Default scale 1 and shift 0, so the output is the normalised vector itself.
    assert torch.equal(model.trf_blocks[0].norm1.scale, torch.ones(CFG.emb_dim))
    assert torch.equal(model.trf_blocks[0].norm1.shift, torch.zeros(CFG.emb_dim))
    ln1_out = full_trace.points["ln1_out"]
    assert ln1_out.per_token["mean"].shape == (CFG.n_layers, T)
    np.testing.assert_allclose(ln1_out.per_token["mean"], 0.0, atol=1e-5)
    np.testing.assert_allclose(ln1_out.per_token["std"] ** 2, 1.0, atol=1e-4)
    np.testing.assert_allclose(ln1_out.overall["mean"], 0.0, atol=1e-5)
    np.testing.assert_allclose(ln1_out.overall["std"], 1.0, atol=1e-4)
    # ... while the residual stream entering it is not normalised (so the check can fail).
    assert np.abs(full_trace.points["ln1_in"].per_token["std"] - 1.0).max() > 0.05


def test_after_post_ln_norm1_every_token_has_mean_zero_and_variance_one():
    post = build_model(CFG.replace(norm_placement="post"), device="cpu")
    ln1_out = trace(post, PROMPT).points["ln1_out"]
    np.testing.assert_allclose(ln1_out.per_token["mean"], 0.0, atol=1e-5)
    np.testing.assert_allclose(ln1_out.per_token["std"] ** 2, 1.0, atol=1e-4)


def test_before_norm1_statistics_equal_those_of_the_residual_stream(model, full_trace):
    raw = record_everything(model, PROMPT)
    for layer in range(CFG.n_layers):
        resid = raw.layers[layer]["resid_pre"]                                 # (T, emb_dim)
        per_token, overall = direct_stats(resid)
        for point in ("resid_pre", "ln1_in"):   # pre-LN: the input of norm1 is the stream itself
            stats = full_trace.points[point]
            for s in STAT_NAMES:
                np.testing.assert_allclose(stats.per_token[s][layer], per_token[s],
                                           rtol=1e-5, atol=1e-6, err_msg=f"{point} {s}")
                np.testing.assert_allclose(stats.overall[s][layer], overall[s],
                                           rtol=1e-5, atol=1e-6, err_msg=f"{point} {s}")


def test_residual_stream_entering_block_0_is_token_plus_position_embedding(model, full_trace):
    ids = torch.tensor(PROMPT)
    with torch.inference_mode():
        x = (model.tok_emb(ids) + model.pos_emb(torch.arange(T))).numpy()
    per_token, overall = direct_stats(x)
    stats = full_trace.points["resid_pre"]
    for s in ("mean", "std", "rms", "min", "max", "abs_mean"):
        np.testing.assert_allclose(stats.per_token[s][0], per_token[s], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(stats.overall[s][0], overall[s], rtol=1e-5, atol=1e-6)


def test_every_probe_point_matches_its_raw_activation(model, full_trace):
    raw = record_everything(model, PROMPT)
    for point in BLOCK_PROBE_POINTS:
        for layer in range(CFG.n_layers):
            per_token, _ = direct_stats(raw.layers[layer][point])
            for s in ("mean", "std", "max", "zero_frac"):
                np.testing.assert_allclose(full_trace.points[point].per_token[s][layer],
                                           per_token[s], rtol=1e-5, atol=1e-5,
                                           err_msg=f"layer {layer} {point} {s}")
    for point in ("final_norm_in", "final_norm_out"):
        _, overall = direct_stats(raw.final[point])
        np.testing.assert_allclose(full_trace.final[point].overall["std"][0], overall["std"],
                                   rtol=1e-5)


def test_every_point_has_a_label_and_all_statistics(full_trace):
    assert list(full_trace.points) == list(BLOCK_PROBE_POINTS)
    assert list(full_trace.final) == ["final_norm_in", "final_norm_out"]
    for stats in [*full_trace.points.values(), *full_trace.final.values()]:
        assert stats.label == POINT_LABELS[stats.point]
        assert set(stats.overall) == set(STAT_NAMES) == set(stats.per_token)


def test_histogram_counts_sum_to_all_values_and_edges_span_min_to_max(model, full_trace):
    widths = {p: CFG.emb_dim for p in BLOCK_PROBE_POINTS}
    widths["ff_pre"] = widths["ff_post"] = CFG.ff_hidden_dim
    raw = record_everything(model, PROMPT)
    for point, stats in full_trace.points.items():
        assert stats.hist_counts.shape == (CFG.n_layers, HIST_BINS)
        assert stats.hist_edges.shape == (CFG.n_layers, HIST_BINS + 1)
        np.testing.assert_array_equal(stats.hist_counts.sum(-1), T * widths[point])
        np.testing.assert_allclose(stats.hist_edges[:, 0], stats.overall["min"], rtol=1e-6)
        np.testing.assert_allclose(stats.hist_edges[:, -1], stats.overall["max"], rtol=1e-5)
        assert (np.diff(stats.hist_edges, axis=-1) > 0).all()
        for layer in range(CFG.n_layers):  # the counts are those of the raw values
            expected, _ = np.histogram(raw.layers[layer][point], bins=stats.hist_edges[layer])
            # A value that sits on an edge may fall on either side of it in float32.
            assert np.abs(stats.hist_counts[layer] - expected).sum() <= 2, (point, layer)
    for stats in full_trace.final.values():
        assert stats.hist_counts.sum() == T * CFG.emb_dim


def test_attention_rows_sum_to_one_and_the_upper_triangle_is_exactly_zero(full_trace):
    assert sorted(full_trace.attention) == list(range(CFG.n_layers))
    for weights in full_trace.attention.values():
        assert weights.shape == (CFG.n_heads, T, T)
        np.testing.assert_allclose(weights.sum(-1), 1.0, atol=1e-5)
        assert (np.triu(weights, k=1) == 0).all()
        allowed = np.tril(np.ones((T, T), dtype=bool))
        assert (weights[:, allowed] > 0).all()   # a causal softmax leaves no allowed weight at 0
    entropy = full_trace.attention_entropy
    assert entropy.shape == (CFG.n_layers, CFG.n_heads, T)
    np.testing.assert_allclose(entropy[:, :, 0], 0.0, atol=1e-6)   # token 0 sees only itself
    assert (entropy <= np.log2(np.arange(1, T + 1)) + 1e-5).all()  # at most uniform


def test_attention_entropy_is_that_of_the_attention_rows(full_trace):
    for layer, weights in full_trace.attention.items():
        w = weights.astype(np.float64)
        expected = -(np.where(w > 0, w * np.log2(np.where(w > 0, w, 1)), 0)).sum(-1)
        np.testing.assert_allclose(full_trace.attention_entropy[layer], expected, atol=1e-5)


def test_traced_logits_equal_a_plain_forward(model, full_trace):
    expected = plain_logits(model, PROMPT)
    assert full_trace.logits.shape == (T, CFG.vocab_size)
    torch.testing.assert_close(torch.from_numpy(full_trace.logits), expected)


def test_logit_lens_at_the_last_block_is_the_models_own_prediction(model, full_trace):
    logits = plain_logits(model, PROMPT)
    probs = torch.softmax(logits, dim=-1)
    assert full_trace.lens_positions == list(range(T))
    assert full_trace.lens_ids.shape == (CFG.n_layers, T)
    np.testing.assert_array_equal(full_trace.lens_ids[-1], logits.argmax(-1).numpy())
    np.testing.assert_allclose(full_trace.lens_probs[-1], probs.max(-1).values.numpy(),
                               rtol=1e-5)
    np.testing.assert_allclose(full_trace.lens_final_probs[-1], full_trace.lens_probs[-1],
                               rtol=1e-5)
    # Earlier layers make their own guesses, each at most as likely as the top one.
    assert (full_trace.lens_final_probs <= full_trace.lens_probs + 1e-6).all()
    assert len(full_trace.lens_texts) == CFG.n_layers and len(full_trace.lens_texts[0]) == T


def test_logit_lens_of_an_earlier_block_is_final_norm_and_head_on_its_output(model, full_trace):
    raw = record_everything(model, PROMPT)
    with torch.inference_mode():
        x = torch.from_numpy(raw.layers[0]["resid_post"])
        probs = torch.softmax(model.out_head(model.final_norm(x)), dim=-1)
    np.testing.assert_array_equal(full_trace.lens_ids[0], probs.argmax(-1).numpy())
    np.testing.assert_allclose(full_trace.lens_probs[0], probs.max(-1).values.numpy(), rtol=1e-5)


def test_logit_lens_by_default_is_read_at_the_last_position_only(model, full_trace):
    last = trace(model, PROMPT)
    assert last.lens_positions == [T - 1]
    assert last.lens_ids.shape == (CFG.n_layers, 1)
    np.testing.assert_array_equal(last.lens_ids[:, 0], full_trace.lens_ids[:, -1])
    np.testing.assert_allclose(last.lens_probs[:, 0], full_trace.lens_probs[:, -1], rtol=1e-5)
    assert trace(model, PROMPT, lens=None).lens_ids.shape == (CFG.n_layers, 0)


def test_logit_lens_is_the_same_whether_its_rows_share_the_head_product_or_not():
    # Few lens rows ride along in the head's product; many go through the head in chunks.
    cfg = GPTConfig(vocab_size=101, context_length=200, emb_dim=16, n_heads=2, n_layers=3)
    model = build_model(cfg, device="cpu")
    ids = [(11 * i) % 101 for i in range(150)]
    every = trace(model, ids, lens="all")                 # 2 * 150 earlier-layer rows: chunked
    some = trace(model, ids, lens=[0, 77, 149])            # 6 rows: in the head's product
    np.testing.assert_array_equal(some.lens_ids, every.lens_ids[:, [0, 77, 149]])
    np.testing.assert_allclose(some.lens_probs, every.lens_probs[:, [0, 77, 149]], rtol=1e-5)
    np.testing.assert_allclose(some.lens_final_probs, every.lens_final_probs[:, [0, 77, 149]],
                               rtol=1e-5)


def test_next_token_top_k_and_lens_are_exact_for_a_gpt2_sized_vocabulary():
    # A vocabulary as large as GPT-2's takes the grouped top-k path.
    cfg = GPTConfig(vocab_size=50257, context_length=16, emb_dim=16, n_heads=2, n_layers=2)
    model = build_model(cfg, device="cpu")
    ids = [50256, 0, 464, 3290, 50000, 13, 13, 198]
    traced = trace(model, ids, top_k=7, lens="all", keep_logits=True)
    logits = plain_logits(model, ids)
    expected = torch.topk(torch.softmax(logits, dim=-1), 7, dim=-1)
    np.testing.assert_array_equal(traced.next_ids, expected.indices.numpy())
    np.testing.assert_allclose(traced.next_probs, expected.values.numpy(), rtol=1e-5)
    with torch.inference_mode():
        first = torch.softmax(model.out_head(model.final_norm(
            torch.from_numpy(record_everything(model, ids).layers[0]["resid_post"]))), dim=-1)
    np.testing.assert_array_equal(traced.lens_ids[0], first.argmax(-1).numpy())
    np.testing.assert_allclose(traced.lens_probs[0], first.max(-1).values.numpy(), rtol=1e-5)


def test_long_inputs_take_the_head_in_chunks_with_the_same_results():
    # Beyond HEAD_ROWS positions the head runs a chunk of positions at a time, so that the
    # (T, vocab) logits are never held at once; top-k, lens and kept logits stay exact.
    n = HEAD_ROWS * 2 + 7
    cfg = GPTConfig(vocab_size=4099, context_length=n, emb_dim=16, n_heads=2, n_layers=2)
    model = build_model(cfg, device="cpu")
    ids = [(13 * i) % 4099 for i in range(n)]
    logits = plain_logits(model, ids)
    expected = torch.topk(torch.softmax(logits, dim=-1), 3, dim=-1)
    for keep_logits in (False, True):
        traced = trace(model, ids, top_k=3, lens=[0, n - 1], keep_logits=keep_logits)
        assert traced.next_ids.shape == (n, 3)
        np.testing.assert_array_equal(traced.next_ids, expected.indices.numpy())
        np.testing.assert_allclose(traced.next_probs, expected.values.numpy(), rtol=1e-5)
        np.testing.assert_array_equal(traced.lens_ids[-1], expected.indices[[0, n - 1], 0])
    assert traced.logits.shape == (n, cfg.vocab_size)
    np.testing.assert_allclose(traced.logits, logits.numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("top_k", [1, 5])
def test_next_token_top_k_is_topk_of_the_softmax(model, top_k):
    traced = trace(model, PROMPT, top_k=top_k)
    expected = torch.topk(torch.softmax(plain_logits(model, PROMPT), dim=-1), top_k, dim=-1)
    assert traced.next_ids.shape == traced.next_probs.shape == (T, top_k)
    np.testing.assert_array_equal(traced.next_ids, expected.indices.numpy())
    np.testing.assert_allclose(traced.next_probs, expected.values.numpy(), rtol=1e-5)
    assert len(traced.next_texts) == T and all(len(row) == top_k for row in traced.next_texts)


def test_tokens_are_the_prompt_and_its_text_pieces(model, full_trace):
    assert full_trace.token_ids == PROMPT
    assert len(full_trace.tokens) == T and all(isinstance(t, str) for t in full_trace.tokens)
    assert full_trace.config == CFG.to_dict() and full_trace.n_layers == CFG.n_layers
    np.testing.assert_array_equal(full_trace.series("ln1_out", "std"),
                                  full_trace.points["ln1_out"].overall["std"])


# ---------------------------------------------------------------------------------------------
# Variants
@pytest.mark.parametrize("name", VARIANT_IDS)
def test_a_trace_of_each_variant_builds(name):
    cfg = VARIANTS[name]
    model = build_model(cfg, device="cpu")
    ids = [i % cfg.vocab_size for i in range(3, 3 + cfg.context_length)]
    traced = trace(model, ids, lens="all", keep_logits=True)
    n = len(ids)
    expected = [p for p in BLOCK_PROBE_POINTS
                if cfg.norm_placement != "none" or not p.startswith("ln")]
    assert list(traced.points) == expected
    assert list(traced.final) == ["final_norm_in", "final_norm_out"]
    for point, stats in traced.points.items():
        width = cfg.ff_hidden_dim if point.startswith("ff_p") else cfg.emb_dim
        for s in STAT_NAMES:
            assert stats.per_token[s].shape == (cfg.n_layers, n)
            assert np.isfinite(stats.per_token[s]).all()
        np.testing.assert_array_equal(stats.hist_counts.sum(-1), n * width)
    for weights in traced.attention.values():
        np.testing.assert_allclose(weights.sum(-1), 1.0, atol=1e-5)
        assert (np.triu(weights, k=1) == 0).all()
    torch.testing.assert_close(torch.from_numpy(traced.logits), plain_logits(model, ids))
    np.testing.assert_array_equal(traced.lens_ids[-1], traced.logits.argmax(-1))
    assert traced.notes == []


def test_without_normalisation_there_are_no_layernorm_points():
    model = build_model(CFG.replace(norm_placement="none"), device="cpu")
    traced = trace(model, PROMPT)
    assert not [p for p in traced.points if p.startswith("ln")]
    # final_norm is an identity then: its input and output are the same values.
    for s in STAT_NAMES:
        np.testing.assert_array_equal(traced.final["final_norm_in"].overall[s],
                                      traced.final["final_norm_out"].overall[s])


def test_relu_leaves_many_exact_zeros_after_the_activation_gelu_almost_none(model):
    relu = build_model(CFG.replace(activation="relu"), device="cpu")
    zero_frac = trace(relu, PROMPT).points["ff_post"].overall["zero_frac"]
    assert (zero_frac > 0.3).all()
    assert (trace(relu, PROMPT).points["ff_pre"].overall["zero_frac"] < 0.01).all()
    assert (trace(model, PROMPT).points["ff_post"].overall["zero_frac"] < 0.01).all()


def test_statistics_stay_precise_when_the_mean_dwarfs_the_spread():
    model = build_model(CFG, device="cpu")
    with torch.no_grad():
        model.tok_emb.weight.add_(1000.0)   # every token's vector: mean ~1000, std ~1.4
    traced = trace(model, PROMPT)
    raw = record_everything(model, PROMPT)
    per_token, overall = direct_stats(raw.layers[0]["resid_pre"])
    stats = traced.points["resid_pre"]
    np.testing.assert_allclose(stats.per_token["std"][0], per_token["std"], rtol=1e-4)
    np.testing.assert_allclose(stats.overall["std"][0], overall["std"], rtol=1e-4)
    np.testing.assert_allclose(stats.per_token["mean"][0], per_token["mean"], rtol=1e-6)
    assert stats.hist_counts[0].sum() == T * CFG.emb_dim


def test_a_constant_activation_gets_a_histogram_of_positive_width():
    model = build_model(CFG, device="cpu")
    with torch.no_grad():
        for block in model.trf_blocks:
            block.ff.layers[0].weight.zero_()
            block.ff.layers[0].bias.fill_(0.5)      # the hidden layer is 0.5 everywhere
    stats = trace(model, PROMPT).points["ff_pre"]
    np.testing.assert_array_equal(stats.overall["min"], 0.5)
    np.testing.assert_array_equal(stats.overall["std"], 0.0)
    assert (np.diff(stats.hist_edges, axis=-1) > 0).all()
    np.testing.assert_array_equal(stats.hist_counts[:, 0], T * CFG.ff_hidden_dim)


def test_an_overflowing_variant_reports_inf_and_nan_instead_of_raising():
    cfg = GPTConfig(vocab_size=101, context_length=32, emb_dim=32, n_heads=4, n_layers=8,
                    norm_placement="none", shortcut=False)
    model = build_model(cfg, device="cpu")
    with torch.no_grad():
        for p in model.trf_blocks.parameters():
            p.mul_(1000.0)
    raw = record_everything(model, PROMPT)
    assert not np.isfinite(raw.final["final_norm_in"]).any()   # it really overflows

    traced = trace(model, PROMPT, lens="all", keep_logits=True)
    nonfinite = {p: s.overall["nonfinite"] for p, s in traced.points.items()}
    assert nonfinite["resid_post"][-1] == T * cfg.emb_dim
    assert nonfinite["resid_pre"][0] == 0          # the embeddings are still finite
    assert traced.final["final_norm_in"].overall["nonfinite"][0] == T * cfg.emb_dim
    for point, stats in traced.points.items():
        np.testing.assert_array_equal(stats.per_token["nonfinite"].sum(-1),
                                      stats.overall["nonfinite"])
        width = cfg.ff_hidden_dim if point.startswith("ff_p") else cfg.emb_dim
        # Histograms count the finite values only; zeros are still counted exactly.
        np.testing.assert_array_equal(stats.hist_counts.sum(-1) + stats.overall["nonfinite"],
                                      T * width)
        assert np.isfinite(stats.hist_edges).all()
        assert ((stats.per_token["zero_frac"] >= 0) & (stats.per_token["zero_frac"] <= 1)).all()
    assert traced.points["resid_post"].overall["zero_frac"][-1] == 0   # NaN is not a zero
    assert any("inf" in note.lower() or "nan" in note.lower() for note in traced.notes)
    assert not np.isfinite(traced.logits).all()


# ---------------------------------------------------------------------------------------------
# What is kept, and what is refused
def test_auto_attention_keeps_no_layer_beyond_the_limit_and_a_chosen_layer_on_demand():
    n = ATTENTION_ALL_LAYERS_MAX_TOKENS + 1
    cfg = GPTConfig(vocab_size=101, context_length=n, emb_dim=16, n_heads=2, n_layers=2)
    model = build_model(cfg, device="cpu")
    ids = [i % 101 for i in range(n)]
    auto = trace(model, ids)
    assert auto.attention == {}
    assert auto.notes and str(ATTENTION_ALL_LAYERS_MAX_TOKENS) in auto.notes[0]
    assert auto.attention_entropy.shape == (2, 2, n)   # entropy is kept for every layer
    chosen = trace(model, ids, attention_layers=[1])
    assert list(chosen.attention) == [1] and chosen.attention[1].shape == (2, n, n)
    assert list(trace(model, ids, attention_layers=0).attention) == [0]
    at_limit = trace(model, ids[:ATTENTION_ALL_LAYERS_MAX_TOKENS])
    assert sorted(at_limit.attention) == [0, 1] and at_limit.notes == []
    assert trace(model, ids[:10], attention_layers=None).attention == {}


def test_attention_of_one_layer_on_demand_runs_only_the_blocks_up_to_it(monkeypatch):
    n = ATTENTION_ALL_LAYERS_MAX_TOKENS + 5
    cfg = GPTConfig(vocab_size=101, context_length=n, emb_dim=16, n_heads=2, n_layers=3)
    model = build_model(cfg, device="cpu")
    ids = [(5 * i) % 101 for i in range(n)]
    traced = trace(model, ids)
    everything = trace(model, ids, attention_layers="all")
    for layer in range(cfg.n_layers):
        shown = with_attention_of_layer(model, traced, layer)
        assert list(shown.attention) == [layer]             # one layer held at a time
        np.testing.assert_array_equal(shown.attention[layer], everything.attention[layer])
        assert shown.points is traced.points and traced.attention == {}
    # Layer 0 needs block 0 only: the later blocks must not run at all.
    for block in model.trf_blocks[1:]:
        monkeypatch.setattr(block, "forward", lambda *a, **k: pytest.fail("ran a later block"))
    assert with_attention_of_layer(model, traced, 0).attention[0].shape == (2, n, n)
    with pytest.raises(ValueError, match="Layer 3 does not exist"):
        with_attention_of_layer(model, traced, 3)


def test_a_trace_runs_the_fused_attention_and_rebuilds_the_books_weights(monkeypatch):
    cfg = GPTConfig(vocab_size=101, context_length=40, emb_dim=16, n_heads=2, n_layers=3)
    model = build_model(cfg, device="cpu")
    ids = [(3 * i) % 101 for i in range(40)]
    book = record_everything(model, ids)      # the book's explicit path hands over its weights
    monkeypatch.setattr(MultiHeadAttention, "forward",     # the book's explicit steps
                        lambda *a: pytest.fail("a trace took the explicit path"))
    full = trace(model, ids, lens="all")
    for layer in range(cfg.n_layers):
        np.testing.assert_allclose(full.attention[layer], book.layers[layer]["attn_pattern"],
                                   rtol=1e-6, atol=1e-7)
    # Without entropy only the kept layer's weights are computed; the rest is said to be NaN.
    lean = trace(model, ids, lens="all", attention_layers=[1], entropy=False)
    np.testing.assert_array_equal(lean.lens_ids, full.lens_ids)
    np.testing.assert_array_equal(lean.next_ids, full.next_ids)
    np.testing.assert_allclose(lean.next_probs, full.next_probs, rtol=1e-5)
    assert np.isnan(lean.attention_entropy[[0, 2]]).all()      # not computed: said so
    np.testing.assert_allclose(lean.attention_entropy[1], full.attention_entropy[1], rtol=1e-6)
    np.testing.assert_array_equal(lean.attention[1], full.attention[1])
    one = trace(model, ids, attention_layers=[2])    # entropy of all, weights of one layer
    assert list(one.attention) == [2]
    np.testing.assert_array_equal(one.attention[2], full.attention[2])
    np.testing.assert_array_equal(one.attention_entropy, full.attention_entropy)


def test_long_inputs_get_the_same_attention_block_by_block():
    # Beyond ATTENTION_ALL_LAYERS_MAX_TOKENS the weights are computed per block as it runs
    # (one layer's T x T at a time) instead of in one batch at the end: same figures.
    n = ATTENTION_ALL_LAYERS_MAX_TOKENS + 3
    cfg = GPTConfig(vocab_size=101, context_length=n, emb_dim=16, n_heads=2, n_layers=2)
    model = build_model(cfg, device="cpu")
    ids = [(11 * i) % 101 for i in range(n)]
    long = trace(model, ids, attention_layers="all")
    short = trace(model, ids[:ATTENTION_ALL_LAYERS_MAX_TOKENS], attention_layers="all")
    book = record_everything(model, ids)
    for layer in range(cfg.n_layers):
        np.testing.assert_allclose(long.attention[layer], book.layers[layer]["attn_pattern"],
                                   rtol=1e-6, atol=1e-7)
        m = ATTENTION_ALL_LAYERS_MAX_TOKENS    # causal: the first m rows do not see the rest
        np.testing.assert_allclose(long.attention[layer][:, :m, :m], short.attention[layer],
                                   rtol=1e-5, atol=1e-7)
        np.testing.assert_allclose(long.attention_entropy[layer, :, :m],
                                   short.attention_entropy[layer], rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("kwargs, ids, message", [
    ({"attention_layers": [CFG.n_layers]}, PROMPT, "Layer"),
    ({"attention_layers": [-1]}, PROMPT, "Layer"),
    ({"attention_layers": ["0"]}, PROMPT, "Layer"),
    ({"lens": [T]}, PROMPT, "Position"),
    ({"lens": [-1]}, PROMPT, "Position"),
    ({}, [], "no tokens"),
    ({}, [1] * (CFG.context_length + 1), "context_length"),
    ({}, [CFG.vocab_size], "vocabulary"),
    ({"top_k": 0}, PROMPT, "top_k"),
], ids=["layer-too-high", "layer-negative", "layer-not-int", "position-too-high",
        "position-negative", "empty-prompt", "too-long-prompt", "unknown-token", "top-k-zero"])
def test_bad_requests_raise_value_error_with_a_message(model, kwargs, ids, message):
    with pytest.raises(ValueError, match=message):
        trace(model, ids, **kwargs)


def test_trace_memory_stays_bounded_at_the_full_context():
    n = 1024
    cfg = GPTConfig(vocab_size=101, context_length=n, emb_dim=32, n_heads=4, n_layers=2)
    model = build_model(cfg, device="cpu")
    ids = [(7 * i) % 101 for i in range(n)]

    class CountBytes:   # what a cache of every probe point (attention included) would hold
        raw = 0

        def wants_attention(self):
            return True

        def record(self, name, x):
            if name not in UNREDUCED or name == "attn_pattern":   # activations and patterns
                CountBytes.raw += x.nelement() * x.element_size()

    with torch.inference_mode(), recording(CountBytes()):
        model(torch.tensor([ids]))
    raw = CountBytes.raw
    n_points = len(BLOCK_PROBE_POINTS)
    attention = cfg.n_layers * cfg.n_heads * n * n * 4
    activations = cfg.n_layers * n * 4 * ((n_points - 2) * cfg.emb_dim + 2 * cfg.ff_hidden_dim)
    assert raw == attention + activations + 2 * n * cfg.emb_dim * 4

    traced = trace(model, ids, attention_layers=None)
    assert traced.attention == {}
    assert traced.nbytes() < raw / 20
    assert traced.nbytes() < cfg.n_heads * n * n * 4   # smaller than one layer's attention
    with_layer = trace(model, ids, attention_layers=[0])
    assert with_layer.nbytes() - traced.nbytes() == cfg.n_heads * n * n * 4


@pytest.mark.parametrize("budget_mb", [0.001, 1, 50, 400, 10_000])
def test_longest_trace_is_the_longest_input_whose_estimate_fits(budget_mb):
    cfg = GPTConfig(vocab_size=50257, context_length=1024, emb_dim=768, n_heads=12, n_layers=1)
    budget = budget_mb * 2 ** 20
    n = longest_trace(cfg, budget)
    assert 0 <= n <= cfg.context_length
    assert n == 0 or trace_peak_bytes(cfg, n) <= budget
    assert n == cfg.context_length or trace_peak_bytes(cfg, n + 1) > budget
    # The head's logits count for at most HEAD_ROWS positions; attention for all of them.
    assert trace_peak_bytes(cfg, 1024) - trace_peak_bytes(cfg, 1023) == 12 * 12 * (2 * 1023 + 1)


# ---------------------------------------------------------------------------------------------
# Recording is inert outside a trace, and private to each trace
def test_a_plain_forward_after_a_trace_is_unchanged_and_records_nothing(model):
    before = plain_logits(model, PROMPT)
    trace(model, PROMPT, lens="all")
    assert model_module._ACTIVE.get() is None
    assert not model_module.recorder_wants_attention()
    torch.testing.assert_close(plain_logits(model, PROMPT), before, rtol=0, atol=0)


def test_a_trace_that_fails_midway_leaves_no_recorder_behind(model, monkeypatch):
    import explorer.probes.recorder as probes

    def broken(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(probes.Recorder, "_reduce_pending", broken)
    with pytest.raises(RuntimeError):
        trace(model, PROMPT)
    assert model_module._ACTIVE.get() is None


def test_concurrent_traces_on_one_shared_model_each_get_their_own_results():
    cfg = GPTConfig(vocab_size=101, context_length=64, emb_dim=64, n_heads=4, n_layers=4)
    model = build_model(cfg, device="cpu")
    prompts = [[(3 * i + 1) % 101 for i in range(40)], [(5 * i + 2) % 101 for i in range(23)]]
    expected = [trace(model, p, lens="all", keep_logits=True) for p in prompts]

    rounds = 4
    results = [[None] * rounds for _ in prompts]
    errors = []
    barrier = threading.Barrier(len(prompts))

    def run(which):
        try:
            barrier.wait()
            for r in range(rounds):
                results[which][r] = trace(model, prompts[which], lens="all", keep_logits=True)
        except Exception as exc:   # surfaced below; a thread's exception is otherwise lost
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(prompts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for which, exp in enumerate(expected):
        for got in results[which]:
            assert got.token_ids == exp.token_ids
            np.testing.assert_allclose(got.logits, exp.logits, rtol=1e-5, atol=1e-6)
            np.testing.assert_array_equal(got.lens_ids, exp.lens_ids)
            assert sorted(got.attention) == sorted(exp.attention)
            for layer in exp.attention:
                np.testing.assert_allclose(got.attention[layer], exp.attention[layer],
                                           rtol=1e-5, atol=1e-7)
            for point, stats in exp.points.items():
                for s in STAT_NAMES:
                    np.testing.assert_allclose(got.points[point].per_token[s],
                                               stats.per_token[s], rtol=1e-5, atol=1e-6)
                np.testing.assert_array_equal(got.points[point].hist_counts.sum(-1),
                                              stats.hist_counts.sum(-1))
    assert model_module._ACTIVE.get() is None



# ---------------------------------------------------------------------------------------------
# The CPU kernels and the PyTorch reductions are two ways to the same figures
@pytest.mark.native
@pytest.mark.skipif(not stat_kernels.available(), reason="no C compiler")
@pytest.mark.parametrize("name", ["gpt2-like", "relu", "post_ln", "mean_dwarfs_spread"])
def test_cpu_kernels_and_torch_reductions_give_the_same_statistics(monkeypatch, name):
    cfg = CFG.replace(activation="relu") if name == "relu" else \
        CFG.replace(norm_placement="post") if name == "post_ln" else CFG
    model = build_model(cfg, device="cpu")
    if name == "mean_dwarfs_spread":
        with torch.no_grad():
            model.tok_emb.weight.add_(1000.0)
    kernels = trace(model, PROMPT)
    monkeypatch.setattr(stat_kernels, "available", lambda: False)
    reductions = trace(model, PROMPT)
    for group in ("points", "final"):
        for point, got in getattr(kernels, group).items():
            expected = getattr(reductions, group)[point]
            for s in STAT_NAMES:
                np.testing.assert_allclose(got.per_token[s], expected.per_token[s], rtol=2e-5,
                                           atol=1e-5, err_msg=f"{point} {s}")
                np.testing.assert_allclose(got.overall[s], expected.overall[s], rtol=2e-5,
                                           atol=1e-5, err_msg=f"{point} {s}")
            np.testing.assert_array_equal(got.hist_edges, expected.hist_edges)
            np.testing.assert_array_equal(got.hist_counts.sum(-1), expected.hist_counts.sum(-1))
            # A value on a bin edge may round to either side: at most one or two such values.
            assert np.abs(got.hist_counts - expected.hist_counts).sum() <= 4, point


@pytest.mark.native
@pytest.mark.skipif(not stat_kernels.available(), reason="no C compiler")
def test_point_stats_kernel_counts_each_value_in_its_bin_and_refuses_inf():
    x = np.array([[0.0, 0.5, 0.99, 1.0, 2.5], [3.999, 4.0, 0.001, 1.5, 2.0]], np.float32)
    counts = np.zeros(5, np.int64)                 # 4 bins over [0, 4] + a slot for the max
    sums = np.empty((6, 2), np.float32)
    assert stat_kernels.point_stats(x, sums, counts) == (0.0, 4.0)
    np.testing.assert_array_equal(counts, [4, 2, 2, 1, 1])   # [0,1) [1,2) [2,3) [3,4) {4}
    per_token, _ = direct_stats(x)
    np.testing.assert_allclose(sums[0] / 5, per_token["mean"], rtol=1e-6)
    np.testing.assert_allclose(np.sqrt(sums[1] / 5), per_token["std"], rtol=1e-6)
    np.testing.assert_array_equal(sums[2], per_token["min"])
    np.testing.assert_array_equal(sums[3], per_token["max"])
    np.testing.assert_allclose(sums[4] / 5, per_token["abs_mean"], rtol=1e-6)
    np.testing.assert_array_equal(sums[5], [4, 5])             # non-zeros
    for bad in (np.inf, np.nan):
        y = x.copy()
        y[1, 2] = bad
        untouched = np.full(5, -1)
        assert np.isnan(stat_kernels.point_stats(y, sums, untouched)).all()
        assert (untouched == -1).all()
    with pytest.raises(TypeError, match="256"):
        stat_kernels.point_stats(x, sums, np.zeros(257, np.int64))


@pytest.mark.parametrize("width", [50257, 256 * 40, 256 * 40 + 1])
def test_row_topk_is_torch_topk_even_with_the_winner_in_a_short_last_group(width):
    generator = torch.Generator().manual_seed(width)
    x = torch.randn(6, width, generator=generator)
    x[0, -1] = 50.0                     # the best entry in the last (short) group
    x[1, -3:] = torch.tensor([40.0, 41.0, 42.0])
    x[2, :] = -torch.inf                # nothing possible but a few entries
    x[2, [5, width - 1]] = torch.tensor([1.0, 2.0])
    for k in (1, 5):
        values, ids = row_topk(x, k)
        expected = torch.topk(x, k, dim=-1)
        torch.testing.assert_close(values, expected.values, rtol=0, atol=0)
        finite = torch.isfinite(expected.values)
        torch.testing.assert_close(ids[finite], expected.indices[finite], rtol=0, atol=0)


@pytest.mark.native
@pytest.mark.skipif(not stat_kernels.available(), reason="no C compiler")
@pytest.mark.parametrize("lo, hi", [(0.0, 1.0), (-3.5, 2.25), (5.0, 5.0), (1000.0, 1000.001),
                                    (-1e30, 1e30), (0.0, 0.0), (-7.0, -7.0)])
def test_histogram_span_rule_is_the_same_in_the_kernel_and_in_python(lo, hi):
    kernel = stat_kernels._load().hist_span(lo, hi, HIST_BINS)
    assert kernel == stat_kernels.hist_span(lo, hi, HIST_BINS)


@pytest.mark.parametrize("compiler", ["no-such-compiler-here", "false"])
def test_without_a_working_c_compiler_traces_use_pytorch_and_say_why(without_compiler,
                                                                     tmp_path, compiler,
                                                                     caplog):
    without_compiler(stat_kernels, compiler)
    with caplog.at_level("WARNING", logger="explorer.native"):
        assert not stat_kernels.available()
    assert "PyTorch's reductions" in caplog.text
    assert list(tmp_path.iterdir()) == []                # no half-built file left behind
    model = build_model(CFG, device="cpu")
    traced = trace(model, PROMPT)
    per_token, _ = direct_stats(record_everything(model, PROMPT).layers[1]["ff_post"])
    np.testing.assert_allclose(traced.points["ff_post"].per_token["std"][1], per_token["std"],
                               rtol=1e-4)


@pytest.mark.parametrize("vocab", [5000, 2048 * 3, 100])
def test_the_traces_blocked_head_product_equals_the_output_head(vocab):
    torch.manual_seed(vocab)
    head = torch.nn.Linear(48, vocab, bias=False)
    x = torch.randn(7, 48)
    with torch.inference_mode():
        got = head_product(head, x)
        torch.testing.assert_close(got, head(x), rtol=1e-5, atol=1e-5)
        assert got.shape == (7, vocab) and got.is_contiguous()
    with_grad = head_product(head, x)          # gradients on: the plain product, which keeps them
    assert with_grad.requires_grad
    torch.testing.assert_close(with_grad.detach(), got, rtol=1e-5, atol=1e-5)
