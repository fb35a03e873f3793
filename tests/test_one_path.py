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
# functions of one trace, normal mode; plots/compare_* still beside them), taken again when the
# look moved into plotly templates (issue 48): the JSON changed, the drawn figures did not
# (before and after compared pixel by pixel in Chromium). The activation figures' were taken
# again when their right margin went to automargin (dd5cd1b: the plot 19 px wider).
BEFORE = {
    "parameters": "0eebc366eb203a71",
    "layer_stats": "8d4d42a18bb7d301",
    "layer_stats_resid": "658e3e6f7ba8f3be",
    "histogram": "4eb0a012a9ddb46f",
    "histogram_ff": "91407f558511dff4",
    "histogram_final": "39b9dab4be0651af",
    "token_heatmap": "30904f6eaf55a75b",
    "token_heatmap_mean": "550e6105b2d89443",
    "entropy": "55afd6353d11463b",
    "activation": "5f0fb437baa10439",
    "activation_plain": "63ff7dfe41deb39a",
    "logit_lens": "f8d41983cf37d715",
    "attention": "b72ef9686e55c6cd",
    "attention_mean": "4b2468fc060187b7",
    "attention_grid": "4a24972fafd751fe",
}


@pytest.mark.parametrize("name", sorted(BEFORE))
def test_a_one_trace_figure_is_the_single_model_figure_it_was(tiny, name):
    assert fingerprint(single_figures(tiny)[name]) == BEFORE[name]


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


def test_one_step_table_for_one_model_and_lockstep_truncates_alike():
    rows = [[i, "a", "1 %", "b", "2 %", "≠" if i % 2 else ""] for i in range(50, 0, -1)]
    live = steps_table_html(["step"] * 6, rows, live=True)
    assert live.count("<tr") == 1 + 40 + 1 and "10 earlier steps" in live
    assert live.count('<tr class="p">') == 20               # the lockstep rows that part
    assert steps_table_html(["step"] * 6, rows).count("<tr") == 1 + 50
