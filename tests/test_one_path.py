"""One path for one or two models: every figure takes a list of one or two traces (counts,
lenses, bars). With one it is the single model's figure as it was before the compare_* twins
were folded in (the same JSON, up to what changed on purpose); with two it adds what a
comparison shows: a panel per model, A − B, one colour scale."""
import hashlib
import json
import math

import numpy as np
import pytest

from explorer.app.plots.attention import attention_figure, attention_grid_figure, entropy_figure
from explorer.app.plots.curves import activation_figure
from explorer.app.plots.generation import next_token_bars_html, steps_table_html
from explorer.app.plots.lens import logit_lens_figure
from explorer.app.plots.model import architecture_html, parameter_figure
from explorer.app.plots.statistics import histogram_figure, layer_stats_figure, token_heatmap_figure
from explorer.app.plots.style import MASK_COLOR, MODEL_COLORS
from explorer.book.config import PRESETS, count_parameters
from explorer.book.curves import activation_curves
from explorer.book.tokenizer import get_tokenizer
from explorer.probes import trace
from explorer.runtime.build import build_model

TEXT = "Every effort moves you forward, said the <b>lecturer</b> & smiled.\n  Then:"
NAMES = ("A · teach-tiny", "B · seed 7")


@pytest.fixture(scope="module")
def tiny():
    return trace(build_model(PRESETS["teach-tiny"], device="cpu"),
                 get_tokenizer().encode(TEXT), lens="all")


@pytest.fixture(scope="module")
def other():
    """The same architecture with other weights (seed 7): model B."""
    return trace(build_model(PRESETS["teach-tiny"], seed=7, device="cpu"),
                 get_tokenizer().encode(TEXT), lens="all")


def single_figures(t):
    """The single model's figures, as tests/test_plots.py draws them."""
    ff = t.points["ff_pre"]
    return {
        "parameters": parameter_figure([count_parameters(t.config)]),
        "layer_stats": layer_stats_figure([t]),
        "layer_stats_resid": layer_stats_figure([t], points=("resid_pre", "ff_pre", "ff_out")),
        "histogram": histogram_figure([t], 0),
        "histogram_ff": histogram_figure([t], 0, ("ff_pre", "ff_post")),
        "histogram_final": histogram_figure([t], 0, ("final_norm_in", "final_norm_out")),
        "token_heatmap": token_heatmap_figure([t]),
        "token_heatmap_mean": token_heatmap_figure([t], "ff_post", "mean"),
        "entropy": entropy_figure([t]),
        "activation": activation_figure(activation_curves(), ("gelu", "relu", "silu"),
                                        derivatives=True,
                                        ff_inputs=[(ff.hist_counts[0], ff.hist_edges[0])]),
        "activation_plain": activation_figure(activation_curves()),
        "logit_lens": logit_lens_figure([t]),
        "attention": attention_figure([t], 0, 1),
        "attention_mean": attention_figure([t], 0, "mean"),
        "attention_grid": attention_grid_figure([t], 0),
    }


# What changed on purpose, and is left out of the comparison: the min-max bands and the
# histogram bars now belong to their legend entry (legendgroup); the attention maps' colour
# scales end at their largest weight (zmax, cmax: with zmin alone plotly.js ignored zmin 0);
# and one head's map lost its grey "masked" trace (the future is a gap over the grey
# background, as in the grid). Arrays count by dtype and shape (their bytes depend on the
# machine's float maths), lists of data by length, numbers by 4 significant digits.
CHANGED_ON_PURPOSE = {"legendgroup", "zmax", "cmax"}
DROPPED_TRACES = {"masked"}
DATA_KEYS = {"x", "y", "z", "text", "customdata", "width"}


def canonical(value, key=None):
    if isinstance(value, dict):
        if "bdata" in value:
            return {"dtype": value["dtype"], "shape": value.get("shape")}
        return {k: canonical(v, k) for k, v in sorted(value.items())
                if k not in CHANGED_ON_PURPOSE}
    if isinstance(value, list):
        if key in DATA_KEYS:
            return f"list of {len(value)}"
        return [canonical(v) for v in value]
    if isinstance(value, float) and math.isfinite(value):
        return float(f"{value:.4g}")
    return value


def fingerprint(fig) -> str:
    data = json.loads(fig.to_json())
    data["data"] = [d for d in data["data"] if d.get("name") not in DROPPED_TRACES]
    text = json.dumps(canonical(data), sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


# The fingerprints of these figures drawn by the code before the change (single-model figure
# functions of one trace, normal mode; plots/compare_* still beside them).
BEFORE = {
    "parameters": "b53b56afdd36d529",
    "layer_stats": "fcf7250c4906b4ed",
    "layer_stats_resid": "0945c8c131d7b214",
    "histogram": "22361b4cfea7f2ba",
    "histogram_ff": "8e6e68be2a626cbb",
    "histogram_final": "7c5e746145aa6a79",
    "token_heatmap": "2e6ddb86b87e3153",
    "token_heatmap_mean": "e1252e39278ac2bd",
    "entropy": "8cbcafe639008c6d",
    "activation": "51f4f0426c6ae992",
    "activation_plain": "adf51b4a7d6d0ff8",
    "logit_lens": "44cbaaa9eab6f17e",
    "attention": "c0d401816c456966",
    "attention_mean": "c472866446cfacb1",
    "attention_grid": "eba1f07d700185e5",
}


@pytest.mark.parametrize("name", sorted(BEFORE))
def test_a_one_trace_figure_is_the_single_model_figure_it_was(tiny, name):
    assert fingerprint(single_figures(tiny)[name]) == BEFORE[name]


def test_a_figure_takes_a_list_of_one_or_two_models(tiny):
    with pytest.raises(TypeError, match=r"list of one or two traces"):
        layer_stats_figure(tiny)
    with pytest.raises(ValueError, match="one or two models"):
        entropy_figure([tiny] * 3)
    with pytest.raises(ValueError, match="2 traces but 1 names"):
        layer_stats_figure([tiny, tiny], ["A"])


# ---------------------------------------------------------------------------------------------
# Two models: the panels and the difference
def test_two_traces_add_the_difference_panel_a_minus_b(tiny, other):
    fig = attention_figure([tiny, other], 1, 2, NAMES)
    titles = [a.text for a in fig.layout.annotations]
    assert titles[:3] == [*NAMES, "A − B (difference)"]
    weights = [d for d in fig.data if d.name == "weight"]
    difference, = [d for d in fig.data if d.name == "A − B"]
    assert [d.xaxis for d in weights] == ["x", "x2"] and difference.xaxis == "x3"
    a, b = (np.asarray(tiny.attention[1][2]), np.asarray(other.attention[1][2]))
    lower = np.tril(np.ones(a.shape, dtype=bool))
    np.testing.assert_allclose(np.asarray(difference.z)[lower], (a - b)[lower], atol=1e-6)
    assert np.isnan(np.asarray(difference.z)[~lower]).all()          # the future: masked
    # every panel draws its future cells the same way: gaps over the grey background
    for d in fig.data:
        assert np.isnan(np.asarray(d.z)[~lower]).all() and d.hoverongaps is False
    assert fig.layout.plot_bgcolor == MASK_COLOR
    # one colour scale for A and B: the same range, one colour bar
    assert {(d.zmin, d.zmax) for d in weights} == {(0, weights[0].zmax)}
    assert [d.showscale for d in weights] == [None, False]
    assert "largest |A − B|" in fig.layout.title.subtitle.text


def test_one_trace_has_no_difference_panel(tiny):
    fig = attention_figure([tiny], 1, 2)
    assert [d.name for d in fig.data] == ["weight"]
    assert not fig.layout.annotations and "A − B" not in fig.layout.title.text


def test_two_traces_of_the_statistics_compare_per_point_and_say_the_difference(tiny, other):
    fig = layer_stats_figure([tiny, other], NAMES)
    means = [d for d in fig.data if d.mode == "lines+markers" and d.line.dash is None]
    # a panel per point, a colour per model, in both panels
    assert [(d.xaxis, d.line.color) for d in means] == [
        ("x", MODEL_COLORS[0]), ("x2", MODEL_COLORS[0]), ("x", MODEL_COLORS[1]),
        ("x2", MODEL_COLORS[1])]
    assert {d.marker.size for d in fig.data if d.mode == "lines+markers"} == {9}
    assert "largest |A − B| over layers 0–1" in fig.layout.title.subtitle.text
    hist = histogram_figure([tiny, other], 1, names=NAMES)
    assert {d.xaxis for d in hist.data} == {"x", "x2"} and hist.layout.xaxis2.matches == "x"
    heat = token_heatmap_figure([tiny, other], names=NAMES)
    assert len({(d.zmin, d.zmax) for d in heat.data}) == 1          # one colour scale
    entropy = entropy_figure([tiny, other], NAMES)
    assert "largest |A − B|" in entropy.layout.title.subtitle.text


def test_two_lenses_stack_and_count_where_the_final_predictions_agree(tiny, other):
    fig = logit_lens_figure([tiny, other], NAMES)
    assert [d.yaxis for d in fig.data] == ["y", "y2"]
    assert "agree at" in fig.layout.title.subtitle.text
    assert fig.layout.xaxis.showticklabels is False            # the bottom panel names them
    same = logit_lens_figure([tiny, tiny], NAMES)
    n = len(tiny.lens_positions)
    assert f"agree at {n} of {n} positions" in same.layout.title.subtitle.text


def test_two_parameter_counts_are_grouped_bars_with_a_on_top():
    a, b = count_parameters(PRESETS["teach-tiny"]), count_parameters(PRESETS["teach-small"])
    fig = parameter_figure([a, b], NAMES)
    assert [d.name for d in fig.data] == [NAMES[1], NAMES[0]]      # B first: A drawn on top
    assert fig.layout.barmode == "group"
    assert "A − B: −" in fig.layout.title.subtitle.text
    one = parameter_figure([a])
    assert one.data[0].name is None and "%" in one.data[0].text[0]


def test_two_diagrams_outline_what_differs():
    a, b = PRESETS["teach-tiny"], PRESETS["teach-tiny"].replace(norm_placement="post")
    html = architecture_html([a, b], names=NAMES)
    assert html.count('class="cmp-arch"') == 2 and "norm_placement" in html
    assert html.count("outline:4px") >= 2 * 3         # norm1, norm2, final_norm in both
    assert "the same model" in architecture_html([a, a], names=NAMES)
    assert "different weights: A random, seed 1; B random, seed 2" in architecture_html(
        [a, a], names=NAMES, weights=["random, seed 1", "random, seed 2"])
    assert "outline:4px" not in architecture_html([a])


def test_two_models_activation_inputs_are_two_bars_under_the_curves(tiny, other):
    hists = [(tr.points["ff_pre"].hist_counts[1], tr.points["ff_pre"].hist_edges[1])
             for tr in (tiny, other)]
    fig = activation_figure(activation_curves(), ("gelu",), False, hists, NAMES)
    bars = [d for d in fig.data if d.type == "bar"]
    assert [d.name for d in bars] == [f"real feed-forward inputs of {n}" for n in NAMES]
    assert fig.data[0].type == fig.data[1].type == "bar"          # both under the curves
    one = activation_figure(activation_curves(), ("gelu",), False, hists[:1])
    assert one.data[0].name == "real feed-forward inputs" and one.data[0].opacity is None


def test_bars_of_one_or_two_models_share_their_rows():
    side = dict(texts=[" the", "<u>"], probs=[0.5, 0.25], chosen=0)
    one = next_token_bars_html([side])
    two = next_token_bars_html([{**side, "name": "A", "tail": [(" x", True)]},
                                {**side, "name": "B", "tail": [(" y", False)]}])
    row = '<div><span>␣the</span><b><i class=c style="width:50.0%"></i></b>'
    assert row in one and two.count(row) == 2           # the same row, in each side
    assert "◀ chosen" in one and "◀ chosen" not in two  # two sides are half as wide
    assert two.count('class="s"') == 2 and "<mark>␣x</mark>" in two
    with pytest.raises(ValueError, match="same length"):
        next_token_bars_html([{**side, "probs": [1.0]}])


def test_one_step_table_for_one_model_and_lockstep_truncates_alike():
    rows = [[i, "a", "1 %", "b", "2 %", "≠" if i % 2 else ""] for i in range(50, 0, -1)]
    live = steps_table_html(["step"] * 6, rows, live=True)
    assert live.count("<tr") == 1 + 40 + 1 and "10 earlier steps" in live
    assert live.count('<tr class="p">') == 20               # the lockstep rows that part
    assert steps_table_html(["step"] * 6, rows).count("<tr") == 1 + 50
