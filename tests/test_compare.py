"""Comparing two models (issue 19): a model pinned as B beside the session's model A, shown
together in every view. The handlers are called as the page calls them (plain functions off
ZeroGPU); one test goes through the API (gradio_client)."""
import re
import types

import numpy as np
import pytest
import torch

from explorer.app import comparison, prefs
from explorer.app.i18n import say
from explorer.app.plots.generation import next_token_bars_html
from explorer.app.session import Session
from explorer.app.shared import CACHE, models_of
from explorer.app.tabs import activations, attention, build, generate, inside, pin
from explorer.book.config import PRESETS
from explorer.book.generate import generate_steps, lockstep
from explorer.book.tokenizer import get_tokenizer
from explorer.probes.compare import compare_configs, first_parting, parted, series_pair
from explorer.runtime.cache import ModelCache
from explorer.runtime.memory import model_bytes
from explorer.runtime.sources import ModelKey

PROMPT = "Every effort moves you"
PAIR = "norm1: before vs after LayerNorm"
REQUEST = types.SimpleNamespace(session_hash="test-compare")


def no_progress(*args, **kwargs):
    return None


def built(preset="teach-tiny", session=None, seed=123, **changes):
    """The session after building ``preset`` (with ``changes``) in ``session`` (a new one by
    default)."""
    session = Session() if session is None else session
    cfg = {**PRESETS[preset].to_dict(), **changes}
    build.build(preset, *cfg.values(), seed, "cpu", "float32", session=session,
                progress=no_progress)
    return session


def pinned(session):
    pin.pin_model(session, REQUEST)
    return session


def traced(session, layer=0):
    return inside.run_trace(PROMPT, session, layer, PAIR, "resid_pre", "std")


def generated(session, n=8, mode="greedy", **kwargs):
    args = {**dict(temperature=1.0, top_k=50, seed=123, stop_at_eot=False), **kwargs}
    return list(generate.generate(PROMPT, n, mode, args["temperature"], args["top_k"],
                                  args["seed"], args["stop_at_eot"], session))


def attention_input(trace):
    """The statistics of what each block's attention reads: norm1's output in a pre-LN block,
    the block input itself (not normalised) in post-LN and no-LN blocks."""
    point = {"pre": "ln1_out", "post": "resid_pre", "none": "resid_pre"}
    return trace.points[point[trace.config["norm_placement"]]]


# ---------------------------------------------------------------------------------------------
def test_comparing_a_model_with_itself_shows_zero_differences_everywhere():
    state = pinned(built("teach-tiny"))      # A and B: the same model
    assert state.comparing and state.keys[0] == state.keys[1]
    # Build: nothing differs
    views = build.model_views(state)
    arch, table = views["arch"], views["params_table"]
    assert "the same model: nothing differs" in arch and "outline:" not in arch
    assert {row[3] for row in table["data"]} == {"same"}
    # Inside: every statistic at every probe point and layer, and the figures' notes
    out = traced(state)
    tr_a, tr_b = state.traces
    for point in [*tr_a.points, *tr_a.final]:
        for stat in ("mean", "std", "rms", "min", "max", "abs_mean", "zero_frac"):
            assert np.all(series_pair(tr_a, tr_b, point, stat)[2] == 0), (point, stat)
    assert "zero at every layer" in str(out["stats_plot"].layout.title.subtitle.text)
    # Attention: the difference map is zero (one head and the mean), both entropy maps equal
    for head in ("mean", "0", "3"):
        views = attention.attention_views(state, 1, head)
        att, entropy = views["att_plot"], views["entropy_plot"]
        difference = [d for d in att.data if d.name == "A − B"][0]
        assert np.nanmax(np.abs(difference.z)) == 0
        assert "zero everywhere" in att.layout.title.subtitle.text
    assert "zero for every head" in entropy.layout.title.subtitle.text
    # Generate: the two never part; the logit lens agrees everywhere
    final = generated(state, 10)[-1]
    assert "agree on every token so far" in final["history"] and "≠" not in final["history"]
    lens = generate.logit_lens(PROMPT, state)["lens_plot"]
    assert "agree at 4 of 4 positions" in lens.layout.title.subtitle.text
    a, b = lens.data
    assert np.array_equal(a.z, b.z) and a.text == b.text


def test_pre_ln_and_post_ln_differ_where_expected_computed_independently():
    """Same seed, same weights; only norm1's place differs. At layer 0 pre-LN's norm1 input
    is the block input (the embeddings), post-LN's the embeddings plus attention's output of
    them; attention reads the normalised input in pre-LN and the raw block input in post-LN."""
    state = built("teach-tiny", pinned(built("teach-tiny")), norm_placement="post")
    post, pre = models_of(state)                                    # A: post-LN, B: pre-LN
    assert torch.equal(post.tok_emb.weight, pre.tok_emb.weight)
    traced(state)
    tr_post, tr_pre = state.traces

    ids = torch.tensor([get_tokenizer().encode(PROMPT)])
    with torch.no_grad():
        emb = pre.tok_emb(ids) + pre.pos_emb(torch.arange(ids.shape[1]))   # (1, T, emb)
        post_sum = emb + post.trf_blocks[0].att(emb)                      # before post's norm1
    stats = {stat: [float(getattr(x, stat)()) if stat == "mean" else
                    float(x.std(unbiased=False)) for x in (post_sum, emb)]
             for stat in ("mean", "std")}
    for stat, (a, b) in stats.items():
        series_a, series_b, diff = series_pair(tr_post, tr_pre, "ln1_in", stat)
        assert series_a[0] == pytest.approx(a, abs=1e-5)
        assert series_b[0] == pytest.approx(b, abs=1e-5)
        assert diff[0] == pytest.approx(a - b, abs=1e-5) and abs(diff[0]) > 1e-3
    # the block input, the same in both, is not normalised: what post-LN's attention reads
    token_std = emb[0].std(dim=-1, unbiased=False).numpy()
    np.testing.assert_allclose(attention_input(tr_post).per_token["std"][0], token_std,
                               rtol=1e-5)
    assert token_std.min() > 1.2
    np.testing.assert_allclose(attention_input(tr_pre).per_token["std"][0], 1.0, atol=1e-3)
    # the figure says it, and draws it
    stats_figure = traced(state)["stats_plot"]
    notes = stats_figure.layout.title.subtitle.text
    assert "post-LN, attention reads the block input (not normalised)" in notes
    assert "pre-LN, norm1 normalises the block input" in notes
    before_means = [d for d in stats_figure.data if d.xaxis == "x" and d.mode == "lines+markers"
                    and d.line.dash is None]
    assert [float(d.y[0]) for d in before_means] == pytest.approx(
        [stats["mean"][0], stats["mean"][1]], abs=1e-5)
    assert "norm_placement" in build.model_views(state)["arch"]


@pytest.mark.parametrize("mode", ["greedy", "sample"])
def test_a_lockstep_generation_equals_two_separate_generations(mode):
    state = built("teach-small", pinned(built("teach-tiny")))
    model_a, model_b = models_of(state)
    ids = get_tokenizer().encode(PROMPT)
    kwargs = dict(temperature=0.8 if mode == "sample" else 0.0,
                  top_k=40 if mode == "sample" else None, seed=7 if mode == "sample" else None,
                  show_top=10, **generate.FAST_DECODING)
    alone = [[s.token_id for s in generate_steps(m, ids, 15, **kwargs)]
             for m in (model_a, model_b)]
    final = generated(state, 15, mode, temperature=0.8, top_k=40, seed=7)[-1]
    gen = state.generation
    assert gen.ids[0] == ids + alone[0] and gen.ids[1] == ids + alone[1]
    tokenizer = get_tokenizer()
    assert final["gen_output"] == PROMPT + tokenizer.decode(alone[0])
    assert f"part at step {first_parting(*alone) + 1}" in final["history"]
    assert len(re.findall(r"<tr", final["history"])) == 15 + 1   # header + one row per step
    # Next token continues both, as two separate generations of one more token would
    after = generate.next_token(PROMPT, final["gen_output"], mode, 0.8, 40, 7, state)
    bars, speed = after["bars"], after["speed"]
    for model, got, before in ((model_a, state.generation.ids[0], alone[0]),
                               (model_b, state.generation.ids[1], alone[1])):
        step = next(iter(generate_steps(model, ids + before, 1,
                                        **{**kwargs, "seed": None if mode == "greedy" else
                                           7 + len(ids) + len(before)})))
        assert got == ids + before + [step.token_id]
    assert "16 steps of A and B" in speed and bars.count('class="s"') == 2


def test_lockstep_pairs_a_stopped_model_with_none_and_parted_counts_it():
    pairs = list(lockstep(iter([1, 2, 3]), iter([1, 5])))
    assert pairs == [(1, 1), (2, 5), (3, None)]
    assert parted([1, 2, 3], [1, 5]) == [False, True, True]
    assert first_parting([1, 2], [1, 2]) is None


def test_a_pair_that_does_not_fit_is_refused_before_anything_is_built(monkeypatch):
    small, big = PRESETS["teach-tiny"], PRESETS["teach-small"]
    need = model_bytes(small) + model_bytes(big)
    cache = ModelCache(budget_bytes=need - 1)
    keys = [cache.key(small), cache.key(big)]
    with pytest.raises(ValueError, match=r"together need \d[\d,]* MB .* but [\d,]+ MB are "
                                         r"allowed"):
        cache.check_together(keys)
    assert len(cache) == 0
    # exactly enough: both are built, and building the second never evicts the first
    cache = ModelCache(budget_bytes=need)
    a, b = cache.get_together(keys)
    assert keys[0] in cache and keys[1] in cache and a is not b
    # through the Build tab: B pinned, A alone fits, the pair does not; nothing is built
    state = pinned(built("teach-small"))
    monkeypatch.setattr(CACHE, "budget_bytes", need - 1)
    seed = 98765   # a model no other test built
    with pytest.raises(Exception, match=r"together need .* MB"):
        built("teach-tiny", state, seed=seed)
    assert CACHE.key(small, seed=seed, device="cpu") not in CACHE


def test_views_say_what_is_compared_when_layers_contexts_and_vocabularies_differ():
    # A: teach-tiny (2 layers, context 64), B: teach-small (4 layers, context 128, more vocab)
    state = built("teach-tiny", pinned(built("teach-small", vocab_size=50304)))
    assert [d[0] for d in compare_configs(state.keys[0].config,
                                          state.keys[1].config).differences] == [
        "vocab_size", "context_length", "emb_dim", "n_layers"]
    assert comparison.names(state) == ("A · 2 layers, emb_dim 64…",
                                       "B · 4 layers, emb_dim 128…")
    with pytest.raises(Exception, match="model A's context_length is 64"):
        inside.run_trace("word " * 100, state, 0, PAIR, "resid_pre", "std")
    stats_figure = traced(state)["stats_plot"]
    assert "only B has layers 2–3 (not compared)" in stats_figure.layout.title.subtitle.text
    speed = generated(state, 3)[-1]["speed"]
    assert "context: A 64 tokens, B 128" in speed
    assert "vocabularies of 50,257 and 50,304 entries" in speed
    entropy = attention.attention_views(state, 1, "mean")["entropy_plot"]
    assert "A has 2 layers × 4 heads, B 4 × 4" in entropy.layout.title.subtitle.text
    figure = activations.activation_view(-4, 4, ["gelu"], False, 1, state)["act_plot"]
    assert sum(d.type == "bar" for d in figure.data) == 2


def test_bar_updates_stay_within_2_kb_per_model():
    state = built("teach-small", pinned(built("teach-tiny")))
    for update in generated(state, 12):
        for side in state.generation.bars:
            assert len(next_token_bars_html([side]).encode()) <= 2000
        # an update holds the steps made since the one before: 2 KB a model for each
        bars = update["bars"]
        steps = max(bars.count('class="nt-step"'), 1)
        assert len(bars.encode()) <= steps * (2 * 2000 + 200)


def test_unpinning_keeps_model_a_and_its_trace_and_forgets_b():
    state = built("teach-small", pinned(built("teach-tiny")))
    traced(state)
    a_trace = state.traces[0]
    status = pin.unpin_model(state, REQUEST)["status"]
    assert not state.comparing and "Compared with" not in status
    assert state.keys[0].config == PRESETS["teach-small"] and state.traces == (a_trace,)
    assert traced(state)["stats_plot"].layout.title.text == "<b>Statistics across layers</b>"


def test_a_pinned_trained_model_is_held_for_the_session_until_unpinned():
    from explorer.runtime.sources import WeightsSource
    from explorer.runtime.build import build_model
    model = build_model(PRESETS["teach-tiny"], seed=5, device="cpu")
    key = ModelKey(PRESETS["teach-tiny"], None, "cpu", "float32",
                   WeightsSource.trained("trained 1 step on test"))
    CACHE.hold("test-compare", key, model)
    try:
        from explorer.app.session import Made, Model
        state = pinned(Session(models=(Model(key, Made("trained", "pre-LN (book)",
                                                       caption="x")),)))
        CACHE.release("test-compare")           # "Use this model" of another variant, say
        assert models_of(state)[1] is model
        pin.unpin_model(state, REQUEST)
        assert key not in CACHE
    finally:
        CACHE.release("test-compare")
        pin.release("test-compare")


# ---------------------------------------------------------------------------------------------
# (Every compare text has its Chinese: tests/test_i18n.py, with ZH_COMPARE.)
def test_the_pair_budget_message_reads_in_chinese():
    cache = ModelCache(budget_bytes=1024 ** 2)
    with pytest.raises(ValueError) as refused:
        cache.check_together([ModelKey(PRESETS["teach-tiny"], 1, "cpu", "float32"),
                              ModelKey(PRESETS["teach-small"], 1, "cpu", "float32")])
    with prefs.using(prefs.Prefs(lang="zh")):
        chinese = say(refused.value)
    assert chinese != str(refused.value) and "MB" in chinese


# ---------------------------------------------------------------------------------------------
def test_the_same_endpoints_serve_a_comparison_through_the_api():
    import html
    import json

    from local_client import local_client

    from explorer.app.server import create_demo
    from explorer.app.plots.labels import visible_token
    from test_app import build_args

    demo = create_demo()
    _, url, _ = demo.launch(prevent_thread_lock=True, quiet=True, server_name="127.0.0.1",
                            server_port=None)
    try:
        c = local_client(url)
        c.predict(**build_args("teach-small"))
        status, arch, *_ = c.predict(api_name="/pin_model")
        assert "Compared with **B**" in status and "the same model" in arch
        status, arch = c.predict(**build_args("teach-tiny"))[:2]
        assert "Compared with **B**: teach-small" in status and "n_layers" in arch
        chips, info, stats, hist, heat = c.predict(PROMPT, 1, PAIR, "resid_pre", "std",
                                                   api_name="/trace")
        assert "(A) · traced in" in info and "(B)" in info
        for figure in (stats, hist, heat):
            assert "A and B" in json.loads(figure["plot"])["layout"]["title"]["text"]
        att, grid, entropy, named, scores = c.predict(1, "mean", api_name="/attention")
        assert "A, B and A − B" in json.loads(att["plot"])["layout"]["title"]["text"]
        # A's head scores, then B's (teach-tiny: 2 x 4 heads, teach-small: 4 x 4), each model's
        # followed by its row of chance levels ("uniform")
        assert scores["headers"][0] == "model"
        assert [row[0][0] for row in scores["data"]] == ["A"] * 9 + ["B"] * 17
        assert [row[1] for row in scores["data"]][8::17] == ["uniform", "uniform"]
        text, bars, history, speed = c.predict(PROMPT, 6, "greedy", 1.0, 50, 123, False,
                                               api_name="/generate")
        model_a, model_b = (CACHE.get(CACHE.key(PRESETS[p], device="cpu"))[0]
                            for p in ("teach-tiny", "teach-small"))
        ids = get_tokenizer().encode(PROMPT)
        alone_a, alone_b = ([s.token_id for s in generate_steps(m, ids, 6)]
                            for m in (model_a, model_b))
        assert text == PROMPT + get_tokenizer().decode(alone_a)
        # B's tokens, step by step, in the lockstep table (newest first)
        rows = re.findall(r"<tr[^>]*><td>\d+</td>(?:<td>[^<]*</td>){2}<td>([^<]*)</td>", history)
        assert [html.unescape(r) for r in rows[::-1]] == [
            visible_token(get_tokenizer().token_text(i), 16) for i in alone_b]
        # (the last update still holds the stream's last steps: the last is the current one)
        last_bars = bars.split('class="nt-step"')[-1]
        assert speed.split('class="nt-step"')[-1].count("6 steps of A and B") == 1
        assert 'data-step="6"' in last_bars and last_bars.count('class="s"') == 2
        text, *_ = c.predict(PROMPT, text, "greedy", 1.0, 50, 123, api_name="/next_token")
        lens = c.predict(PROMPT, api_name="/logit_lens")
        assert "Logit lens: A and B" in json.loads(lens["plot"])["layout"]["title"]["text"]
        status, *_ = c.predict(api_name="/unpin_model")
        assert "Compared with" not in status
        stats = c.predict(PROMPT, 1, PAIR, "resid_pre", "std", api_name="/trace")[2]
        assert "A and B" not in json.loads(stats["plot"])["layout"]["title"]["text"]
    finally:
        demo.close()


def test_a_prompt_beyond_bs_vocabulary_names_model_b():
    state = built("teach-tiny", pinned(built("teach-tiny", vocab_size=1000)))
    for call in (lambda: traced(state), lambda: generated(state, 2),
                 lambda: generate.logit_lens(PROMPT, state)):
        with pytest.raises(Exception, match=r"model B's vocab_size is 1,000"):
            call()
