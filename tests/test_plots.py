import base64
import json
import re

import numpy as np
import pytest
import torch

from explorer.app.plots.attention import (GRID_MAX_HEADS, GRID_MAX_SIDE, _downsample_attention,
                                          attention_figure, attention_grid_figure,
                                          entropy_figure)
from explorer.app.plots.curves import activation_figure, gpt_gradient_figure, gradient_figure
from explorer.app.plots.generation import NEXT_TOKEN_CSS, next_token_bars_html
from explorer.app.plots.labels import MAX_TICK_LABELS, human_count, readable_tokens, token_label
from explorer.app.plots.lens import logit_lens_figure
from explorer.app.plots.model import architecture_html, parameter_figure
from explorer.app.plots.statistics import histogram_figure, layer_stats_figure, token_heatmap_figure
from explorer.app.plots.style import MASK_COLOR, ORANGE
from explorer.app.plots.training import (grad_norm_figure, loss_figure, progress_markdown,
                                         samples_markdown, table_rows)
from explorer.runtime.training.views import JobView, RunView
from explorer.book.config import PRESETS, GPTConfig, count_parameters
from explorer.book.curves import ACTIVATION_LABELS, activation_curves
from explorer.book.gradients import gpt_gradients, shortcut_demo
from explorer.runtime.build import build_model
from explorer.book.probe_points import POINT_LABELS
from explorer.probes import trace
from explorer.book.tokenizer import get_tokenizer

TEXT = "Every effort moves you forward, said the <b>lecturer</b> & smiled.\n  Then:"
COLOR_RE = re.compile(r"^(#[0-9a-f]{6}|rgb\(\d{1,3},\d{1,3},\d{1,3}\)|[a-z]+)$")


# ---------------------------------------------------------------------------------------------
# Fixtures: traces of real models (module-scoped: built once)
@pytest.fixture(scope="module")
def ids():
    return get_tokenizer().encode(TEXT)


@pytest.fixture(scope="module")
def tiny(ids):
    model = build_model(PRESETS["teach-tiny"], device="cpu")
    return trace(model, ids, lens="all")


@pytest.fixture(scope="module")
def long_trace():
    """T = 1024 on a model with context_length 1024; attention kept for layer 0 only."""
    cfg = GPTConfig(emb_dim=64, n_heads=4, n_layers=2, context_length=1024)
    model = build_model(cfg, device="cpu")
    ids = (get_tokenizer().encode(TEXT) * 100)[:1024]
    return trace(model, ids, attention_layers=[0], lens="all")


@pytest.fixture(scope="module")
def overflow_trace():
    """No norms, no shortcuts and weights x 1e6 (a private model): activations overflow."""
    cfg = GPTConfig(vocab_size=1000, context_length=32, emb_dim=32, n_heads=4, n_layers=4,
                    norm_placement="none", shortcut=False)
    model = build_model(cfg, device="cpu")
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(1e6)
    t = trace(model, list(range(20)), lens="all")
    assert any("inf or NaN" in n for n in t.notes)   # the premise of the tests below
    return t


def all_figures(t, layer=0):
    """Every figure function applied to one trace (the figures a UI shows for it)."""
    curves = activation_curves()
    ff = t.points["ff_pre"]
    kept = sorted(t.attention)
    figs = {
        "parameters": parameter_figure([count_parameters(t.config)]),
        "layer_stats": layer_stats_figure([t]),
        "layer_stats_resid": layer_stats_figure([t], points=("resid_pre", "ff_pre", "ff_out")),
        "histogram": histogram_figure([t], layer),
        "histogram_ff": histogram_figure([t], layer, ("ff_pre", "ff_post")),
        "histogram_final": histogram_figure([t], layer, ("final_norm_in",
                                                         "final_norm_out")),
        "token_heatmap": token_heatmap_figure([t]),
        "token_heatmap_mean": token_heatmap_figure([t], "ff_post", "mean"),
        "entropy": entropy_figure([t]),
        "activation": activation_figure(curves, ("gelu", "relu", "silu"),
                                        derivatives=True,
                                        ff_inputs=[(ff.hist_counts[layer],
                                                    ff.hist_edges[layer])]),
        "activation_plain": activation_figure(curves),
        "logit_lens": logit_lens_figure([t]),
    }
    if kept:
        figs["attention"] = attention_figure([t], kept[0], 1)
        figs["attention_mean"] = attention_figure([t], kept[0], "mean")
        figs["attention_grid"] = attention_grid_figure([t], kept[0])
    return figs


@pytest.fixture(scope="module")
def tiny_figures(tiny):
    figs = all_figures(tiny)
    figs["gradient"] = gradient_figure(shortcut_demo(False), shortcut_demo(True))
    figs["gpt_gradient"] = gpt_gradient_figure(
        gpt_gradients(PRESETS["teach-tiny"], tiny.token_ids[:12]),
        gpt_gradients(PRESETS["teach-tiny"].replace(shortcut=False), tiny.token_ids[:12]),
        ("with shortcut", "without shortcut"))
    figs["train_loss"] = loss_figure(job_view())
    figs["train_grad_norms"] = grad_norm_figure(job_view())
    return figs


def run_view(label, diverged_at=None, **changes):
    fields = dict(label=label, config={}, parameters=6_536_704, tokens_seen=640,
                  train_loss_now=9.5, val_loss_now=9.8, seconds_per_step=0.05, diverged=False,
                  diverged_at=None, note="", eval_steps=[0, 5, 10], eval_tokens=[32, 192, 352],
                  train_losses=[10.9, 10.1, 9.5], val_losses=[10.9, 10.3, 9.8],
                  grad_steps=[0, 1, 2], grad_norms=[[1.0, 0.5], [0.8, 0.4], [0.7, 0.3]],
                  sample="Every effort moves you <b>the</b>", sample_step=10)
    if diverged_at is not None:
        fields.update(diverged=True, diverged_at=diverged_at, train_loss_now=float("nan"),
                      val_loss_now=float("inf"), grad_norms=[[1.0, float("inf")],
                                                             [float("nan"), 0.0], [2.0, 3.0]])
    return RunView(**{**fields, **changes})


def job_view(runs=None):
    runs = runs or [run_view("pre-LN (book)"), run_view("no LayerNorm", diverged_at=7)]
    return JobView(status="running", message="", step=10, total_steps=20, tokens_seen=640,
                   total_tokens=1280, epoch=0, batches_per_epoch=40, corpus="a <story>",
                   seconds=3.0, runs=runs)


def test_training_views_show_a_diverged_run_as_such_and_escape_user_text():
    view = job_view()
    rows = table_rows(view)["data"]
    assert rows[0][3:5] == ["9.500", "9.800"] and rows[0][-1] == "no"
    assert rows[1][3:5] == ["NaN", "inf"] and rows[1][-1] == "yes, at step 7"
    loss = loss_figure(view).to_plotly_json()
    assert [t["line"]["dash"] for t in loss["data"]] == ["solid", "dash"] * 2
    assert len({t["line"]["color"] for t in loss["data"]}) == 2      # one colour per variant
    assert "no LayerNorm diverged at step 7" in json.dumps(loss["layout"]["title"])
    grads = grad_norm_figure(view).to_plotly_json()
    assert [t["type"] for t in grads["data"]] == ["heatmap", "heatmap"]
    assert "&lt;b&gt;" in samples_markdown(view) and "<b>the" not in samples_markdown(view)
    assert "a &lt;story&gt;" in progress_markdown(view) and "step 10 of 20" in progress_markdown(
        view)
    # nothing trained yet: hints, no crash
    assert loss_figure(None).layout.title.text and grad_norm_figure(job_view([])).layout.height


# ---------------------------------------------------------------------------------------------
# Helpers
def walk(obj, path=""):
    """Yield (path, key, value) for every dict entry in a JSON tree."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield path, k, v
            yield from walk(v, f"{path}.{k}")
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from walk(v, f"{path}[{i}]")


def colours(fig_json: dict):
    """Every colour value in a figure's JSON: strings (or lists of strings) under a key that
    names a colour, and the colours of every colorscale."""
    for path, key, value in walk(fig_json):
        k = key.lower()
        if k == "colorscale":
            assert isinstance(value, list), f"{path}.colorscale must be explicit: {value!r}"
            for _, c in value:
                yield f"{path}.colorscale", c
        elif "color" in k and k not in ("coloraxis", "colorbar", "autocolorscale", "colorsrc"):
            for c in value if isinstance(value, list) else [value]:
                if isinstance(c, str):
                    yield f"{path}.{key}", c


def decode(array_json) -> np.ndarray:
    """A numpy array as plotly 7 serialises it: {"dtype", "bdata", "shape"}."""
    data = np.frombuffer(base64.b64decode(array_json["bdata"]), dtype=array_json["dtype"])
    shape = [int(s) for s in str(array_json.get("shape", data.size)).split(",")]
    return data.reshape(shape)


def _reject_constant(name):
    raise AssertionError(f"{name} in a figure's JSON")


def tick_texts(fig_json, axis):
    return fig_json["layout"][axis].get("ticktext", [])


# ---------------------------------------------------------------------------------------------
# Every figure
def test_every_figure_serialises_with_height_title_and_lean_template(tiny_figures):
    for name, fig in tiny_figures.items():
        data = json.loads(fig.to_json())
        layout = data["layout"]
        assert isinstance(layout.get("height"), int) and layout["height"] >= 250, name
        assert layout["title"]["text"], name
        # our own lean template, not plotly's default one (6.4 KB) on the wire
        assert len(json.dumps(layout["template"])) < 1500, name


def test_every_figure_uses_only_plotly_js_3_colours(tiny_figures):
    for name, fig in tiny_figures.items():
        text = fig.to_json()
        found = list(colours(json.loads(text)))
        assert found, name
        for where, c in found:
            assert COLOR_RE.match(c), f"{name}: {where} = {c!r}"
        assert "rgba(" not in text, name


def test_every_font_is_at_least_15px(tiny_figures):
    for name, fig in tiny_figures.items():
        for path, key, value in walk(json.loads(fig.to_json())):
            if key == "size" and ("font" in path.rsplit(".", 1)[-1]):
                assert value >= 15, f"{name}: {path} size {value}"
        assert fig.layout.template.layout.font.size >= 15, name


def test_figures_with_axes_have_axis_titles(tiny_figures):
    for name, fig in tiny_figures.items():
        if name == "attention_grid":      # small multiples: head titles, no axes
            continue
        layout = json.loads(fig.to_json())["layout"]
        assert layout["xaxis"]["title"]["text"], name
        assert layout["yaxis"]["title"]["text"], name


def test_modebar_is_left_visible(tiny_figures):
    for fig in tiny_figures.values():
        layout = json.loads(fig.to_json())["layout"]
        assert "modebar" not in layout or layout["modebar"].get("remove") is None


# ---------------------------------------------------------------------------------------------
# Tokens on axes
def test_token_text_appears_in_tick_text(tiny, tiny_figures):
    labels = [token_label(t) for t in tiny.tokens]
    assert "␣effort" in labels
    assert any("↵" in lab for lab in labels) and any("&lt;" in lab for lab in labels)
    att = json.loads(tiny_figures["attention"].to_json())
    assert tick_texts(att, "xaxis") == labels          # ≤ 64 tokens: every token
    assert tick_texts(att, "yaxis") == labels
    heat = json.loads(tiny_figures["token_heatmap"].to_json())
    assert tick_texts(heat, "xaxis") == labels
    lens = json.loads(tiny_figures["logit_lens"].to_json())
    assert tick_texts(lens, "xaxis") == labels[-len(tick_texts(lens, "xaxis")):]


def test_token_label_makes_spaces_visible_and_escapes_markup():
    assert token_label(" the") == "␣the"
    assert token_label("\n\n") == "↵↵"
    assert token_label("<b>") == "&lt;b&gt;"
    assert token_label("") == "∅"
    assert token_label("x" * 40).endswith("…")


def test_long_inputs_label_every_nth_token(long_trace):
    fig = json.loads(token_heatmap_figure([long_trace]).to_json())
    assert len(tick_texts(fig, "xaxis")) <= MAX_TICK_LABELS
    assert "last 128 of 1024" in fig["layout"]["title"]["subtitle"]["text"]
    assert decode(fig["data"][0]["z"]).shape == (2, 128)


# ---------------------------------------------------------------------------------------------
# Attention
def test_masked_triangle_is_nan_and_marked(tiny, tiny_figures):
    fig = json.loads(tiny_figures["attention"].to_json())
    z = decode(fig["data"][0]["z"])
    n = len(tiny.tokens)
    assert z.shape == (n, n) and z.dtype == np.float32
    future = np.triu(np.ones((n, n), dtype=bool), k=1)
    assert np.isnan(z[future]).all()
    assert np.isfinite(z[~future]).all()
    np.testing.assert_allclose(z[~future], tiny.attention[0][1][~future], rtol=1e-6)
    # the future is a gap over the grey background, as in the grid of heads and in every
    # panel of two models' figure (no second trace: it would double the bytes)
    assert fig["layout"]["plot_bgcolor"] == MASK_COLOR
    assert fig["data"][0]["hoverongaps"] is False and len(fig["data"]) == 1
    assert "query" in fig["data"][0]["hovertemplate"]
    assert "key" in fig["data"][0]["hovertemplate"]


def test_attention_mean_head_is_the_average(tiny, tiny_figures):
    z = np.array(tiny_figures["attention_mean"].data[0].z)
    lower = np.tril(np.ones(z.shape, dtype=bool))
    np.testing.assert_allclose(z[lower], tiny.attention[0].mean(0)[lower], rtol=1e-5)


def test_attention_at_1024_tokens_is_cropped_and_small(long_trace):
    fig = attention_figure([long_trace], 0, 2)
    text = fig.to_json()
    assert len(text) <= 1_000_000
    data = json.loads(text)
    z = decode(data["data"][0]["z"])
    assert z.shape == (128, 128)
    np.testing.assert_allclose(z[-1], long_trace.attention[0][2][-1, -128:], rtol=1e-6)
    assert "last 128 of 1024" in data["layout"]["title"]["subtitle"]["text"]
    assert len(tick_texts(data, "yaxis")) <= 64


def test_attention_grid_at_1024_tokens_is_small(long_trace):
    fig = attention_grid_figure([long_trace], 0)
    text = fig.to_json()
    assert len(text) <= 1_000_000
    data = json.loads(text)
    heatmaps = [d for d in data["data"] if d["type"] == "heatmap"]
    assert len(heatmaps) == 4
    assert all(d["coloraxis"] == "coloraxis" for d in heatmaps)
    for d in heatmaps:
        assert max(decode(d["z"]).shape) <= GRID_MAX_SIDE
    titles = [a["text"] for a in data["layout"]["annotations"]]
    assert titles == ["head 0", "head 1", "head 2", "head 3"]
    assert data["layout"]["xaxis"]["showticklabels"] is False


def test_attention_grid_with_25_heads_at_1024_tokens_stays_under_300_kb():
    cfg = GPTConfig(vocab_size=1000, emb_dim=100, n_heads=25, n_layers=1, context_length=1024)
    model = build_model(cfg, device="cpu")
    t = trace(model, [i % 1000 for i in range(1024)], attention_layers=[0], lens=None)
    fig = attention_grid_figure([t], 0)
    assert len(fig.to_json()) < 300_000
    assert len(fig.data) == 25
    assert json.loads(fig.to_json())["layout"]["annotations"][24]["text"] == "head 24"


def test_block_average_ignores_future_cells():
    n = 6
    w = np.tril(np.ones((n, n), dtype=np.float32))
    w /= w.sum(-1, keepdims=True)
    z, starts = _downsample_attention(w[None], 3)
    assert starts.tolist() == [0, 2, 4]
    assert np.isnan(z[0][0, 1]) and np.isnan(z[0][0, 2]) and np.isnan(z[0][1, 2])
    # block (rows 0-1, cols 0-1): allowed cells (0,0)=1, (1,0)=.5, (1,1)=.5 -> mean 2/3
    assert z[0][0, 0] == pytest.approx(2 / 3)


def test_entropy_figure_shows_the_mean_over_queries(tiny, tiny_figures):
    z = np.array(tiny_figures["entropy"].data[0].z)
    np.testing.assert_allclose(z, tiny.attention_entropy.mean(-1), rtol=1e-6)
    assert tiny_figures["entropy"].data[0].texttemplate == "%{z:.2f}"


# ---------------------------------------------------------------------------------------------
# Layer statistics and histograms
def test_layer_stats_draws_mean_std_and_band_per_point(tiny, tiny_figures):
    fig = tiny_figures["layer_stats"]
    names = {tr.name for tr in fig.data if tr.showlegend is not False}
    assert names == {POINT_LABELS["ln1_in"], POINT_LABELS["ln1_out"]}
    assert sum(tr.fill == "tonexty" for tr in fig.data) == 2
    means = [tr for tr in fig.data if tr.line.dash is None and tr.mode == "lines+markers"]
    np.testing.assert_allclose(means[0].y, tiny.series("ln1_in", "mean"), rtol=1e-6)
    assert fig.layout.xaxis.dtick == 1


def test_layer_stats_without_norms_says_so(overflow_trace):
    fig = layer_stats_figure([overflow_trace])
    assert "ln1_in" in fig.layout.title.subtitle.text
    fig = layer_stats_figure([overflow_trace], points=("resid_pre", "ln1_out"))
    assert "ln1_out" in fig.layout.title.subtitle.text
    assert "gaps" in fig.layout.title.subtitle.text


def test_histogram_is_a_density(tiny, tiny_figures):
    for bar in tiny_figures["histogram"].data:
        area = float(np.sum(np.asarray(bar.y, dtype=np.float64)
                            * np.asarray(bar.width, dtype=np.float64)))
        assert area == pytest.approx(1.0, rel=1e-4)
        assert 0 < bar.opacity < 1
    assert tiny_figures["histogram"].layout.barmode == "overlay"


# ---------------------------------------------------------------------------------------------
# Overflowing model: nothing raises
def test_a_trace_with_inf_and_nan_builds_every_figure(overflow_trace):
    for layer in range(overflow_trace.n_layers):
        for name, fig in all_figures(overflow_trace, layer).items():
            # strict JSON: a bare NaN/Infinity would break JSON.parse in the browser
            json.loads(fig.to_json(), parse_constant=_reject_constant)
    heat = token_heatmap_figure([overflow_trace])
    assert "gaps" in heat.layout.title.subtitle.text


# ---------------------------------------------------------------------------------------------
# Next token, logit lens
def one_model_bars(texts, probs, chosen=None):
    """One model's next-token bars (``next_token_bars_html`` of one side)."""
    return next_token_bars_html([dict(texts=texts, probs=probs, chosen=chosen)])


def test_next_token_bars_are_under_2_kb_for_10_candidates():
    texts = [" the", " a", "\n\n", " international", "<|endoftext|>", " of", "ing", " and",
             " to", " 1234567890"]
    probs = [0.31234, 0.12, 0.08, 0.05, 0.04, 0.03, 0.02, 0.015, 0.01, 0.005]
    bars = one_model_bars(texts, probs, chosen=3)
    assert len(bars.encode()) <= 2000
    # the worst case: long pieces that need escaping, non-ASCII, probabilities with many digits
    nasty = ["<" * 30, "&" * 30, "日本語のテキストです" * 3, " " * 40, "\n" * 40] * 2
    worst = one_model_bars(nasty, [1 / 3 ** i for i in range(10)], chosen=9)
    assert len(worst.encode()) <= 2000


def bar_rows(bars_html):
    """(token, width %, colour, label) of each bar, top to bottom."""
    return re.findall(r'<div><span>(.*?)</span><b><i( class=c)? style="width:([\d.]+)%"></i>'
                      r'</b><span>(.*?)</span></div>', bars_html)


def test_next_token_bars_show_candidates_in_order_with_the_chosen_one_marked():
    bars = one_model_bars([" the", "<u>", "&"], [0.5, 0.25, 0.125], chosen=1)
    rows = bar_rows(bars)
    assert [r[0] for r in rows] == ["␣the", "&lt;u&gt;", "&amp;"]   # token text never markup
    assert "<u>" not in bars
    assert [float(r[2]) for r in rows] == [50.0, 25.0, 12.5]   # true scale: full track = 100 %
    assert [r[1] for r in rows] == ["", " class=c", ""]             # the chosen one stands out
    assert f"i.c {{background: {ORANGE};}}" in NEXT_TOKEN_CSS
    assert [r[3] for r in rows] == ["50 %", "25 % ◀ chosen", "12.5 %"]
    assert bar_rows(one_model_bars(["a"], [0.000171234]))[0][3] == "0.0171 %"
    assert "chosen" not in one_model_bars(["a"], [1.0])
    assert bar_rows(one_model_bars(["a", "b"], [0.0, 0.0]))[0][2] == "0.0"


def test_logit_lens_shows_guesses_and_caps_positions(tiny, long_trace):
    fig = logit_lens_figure([tiny])
    heat = fig.data[0]
    assert np.array(heat.z).shape == (tiny.n_layers, min(32, len(tiny.tokens)))
    assert heat.customdata is not None and "final prediction" in heat.hovertemplate
    long = logit_lens_figure([long_trace])
    assert np.array(long.data[0].z).shape == (2, 32)
    assert "last 32 of 1024" in long.layout.title.subtitle.text
    short = trace(build_model(PRESETS["teach-tiny"], device="cpu"), tiny.token_ids[:6],
                  lens="all")
    cells = logit_lens_figure([short]).data[0].text
    assert [list(r) for r in cells] == [[token_label(t) for t in row]
                                        for row in short.lens_texts]


# ---------------------------------------------------------------------------------------------
# Parameters, curves, gradients, architecture
def test_parameter_figure_skips_zero_parts_and_names_the_total():
    counts = count_parameters(PRESETS["gpt2-small"])
    fig = parameter_figure([counts])
    assert "163 M" in fig.layout.title.text
    assert any("38.6 M" in t for t in fig.data[0].text)
    tied = count_parameters(PRESETS["gpt2-small"].replace(tie_weights=True,
                                                          pos_encoding="rope"))
    names = list(parameter_figure([tied]).data[0].y)
    assert "output head" not in names and "position embedding" not in names


def test_human_count():
    assert human_count(38_597_376) == "38.6 M"
    assert human_count(163_009_536) == "163 M"
    assert human_count(1_536) == "1.54 K"
    assert human_count(512) == "512"
    assert human_count(1_557_611_200) == "1.56 B"
    assert human_count(999_999) == "1.00 M"
    assert human_count(999) == "999"


def test_activation_figure_puts_real_inputs_under_the_curves(tiny_figures):
    fig = tiny_figures["activation"]
    assert fig.data[0].type == "bar"                 # drawn first, underneath
    curves = [tr for tr in fig.data if tr.type == "scatter"]
    assert len(curves) == 6
    assert sum(tr.line.dash == "dash" for tr in curves) == 3
    assert all(tr.yaxis == "y2" for tr in curves)
    assert fig.layout.yaxis2.overlaying == "y"


def test_gradient_figures_use_log_scale(tiny_figures):
    assert tiny_figures["gradient"].layout.xaxis.type == "log"       # the bars lie down
    assert tiny_figures["gpt_gradient"].layout.yaxis.type == "log"
    names = [tr.name for tr in tiny_figures["gradient"].data]
    assert names == ["without shortcut", "with shortcut"]
    assert tiny_figures["gradient"].layout.barmode == "group"


@pytest.mark.parametrize("placement", ["pre", "post", "none"])
def test_architecture_html_follows_the_variant(placement):
    cfg = PRESETS["gpt2-small"].replace(norm_placement=placement)
    out = architecture_html([cfg], [count_parameters(cfg)])
    assert "<script" not in out and "http" not in out
    assert "768 → 3072 → 768" in out and "12 × TransformerBlock" in out
    att, norm1 = out.index("Masked multi-head attention"), out.find("norm1")
    if placement == "pre":
        assert 0 < norm1 < att
    elif placement == "post":
        assert norm1 > att
    else:
        assert norm1 == -1 and "No final norm" in out
    assert out.count("Add the shortcut") == 2
    assert "38.6 M params" in out


def test_architecture_html_shows_rope_tying_and_no_shortcut():
    cfg = PRESETS["teach-tiny"].replace(pos_encoding="rope", tie_weights=True, shortcut=False,
                                        activation="silu")
    out = architecture_html([cfg])
    assert "RoPE" in out and "pos_emb" not in out
    assert "tied to tok_emb" in out
    assert "Add the shortcut" not in out and "no shortcut connections" in out
    assert "SiLU" in out and "params" not in out


def test_architecture_html_escapes_text(monkeypatch):
    monkeypatch.setitem(ACTIVATION_LABELS, "gelu", "<i>GELU</i>")
    out = architecture_html([PRESETS["teach-tiny"]])
    assert "<i>" not in out and "&lt;i&gt;GELU" in out


def test_attention_grid_shows_at_most_32_heads():
    cfg = GPTConfig(vocab_size=1000, emb_dim=64, n_heads=64, n_layers=1, context_length=64)
    t = trace(build_model(cfg, device="cpu"), list(range(40)), lens=None)
    fig = attention_grid_figure([t], 0)
    assert len(fig.data) == GRID_MAX_HEADS
    assert "of 64" in fig.layout.title.text
    assert "first 32 of 64 heads" in fig.layout.title.subtitle.text


def test_a_character_split_into_byte_tokens_reads_as_its_bytes_then_as_itself():
    tokenizer = get_tokenizer()
    ids = tokenizer.encode("我爱 a🙂")
    shown = readable_tokens(ids, tokenizer.token_texts(ids))
    # 我 is E6 88 91: its first token shows two bytes, the one that completes it the character
    assert shown[:2] == ["E6 88", "91=我"]
    assert "=爱" in shown[2] + shown[3] + shown[4]
    whole = [s for s, i in zip(shown, ids) if "<0x" not in tokenizer.token_text(i)]
    assert " a" in whole or "a" in "".join(whole)       # whole tokens keep their own text
    assert all("<0x" not in s for s in shown)
    assert "".join(s.split("=")[-1] for s in shown if "=" in s).startswith("我爱")


def test_the_heatmaps_token_axis_shows_chinese_characters_where_their_bytes_join():
    model = build_model(PRESETS["teach-tiny"], seed=123, device="cpu")
    tr = trace(model, get_tokenizer().encode("从零构建大模型"))
    for fig in (token_heatmap_figure([tr], "resid_pre", "std"), attention_figure([tr], 0, "mean")):
        ticks = "".join(fig.layout.xaxis.ticktext)
        assert "=从" in ticks and "=零" in ticks and "<0x" not in ticks
