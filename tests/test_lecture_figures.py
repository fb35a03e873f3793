"""What a lecturer saw at 1280x720, each checked on the figure's data and layout: attention
maps whose colour scale did not start at 0 (uniform 0.25 looked black), the 4.4 demo's bar
labels cut by the next bar, and in lecture mode a clipped parameter chart, an attention map
squashed to ~110 px, the loss legend over the loss plot, and the Train tab's blocker: a loss
figure whose title, notes and legend left its plot less than nothing, which plotly.js 3.3.1
refuses ("Something went wrong with axis scaling") and the page froze.

The sizes are estimates of what plotly.js draws (Arial: ~0.52-0.6 of the type size a letter;
checked against the browser at 1280x720, tests/browser/test_train_browser.py)."""
import base64
import json
import math

import numpy as np
import pytest

from explorer.app import prefs
from explorer.app.plots.attention import attention_figure, attention_grid_figure
from explorer.app.plots.curves import gpt_gradient_figure, gradient_figure
from explorer.app.plots.model import parameter_figure
from explorer.app.plots.style import _wrap
from explorer.app.plots.training import grad_norm_figure, loss_figure
from explorer.book.config import PRESETS, count_parameters
from explorer.book.gradients import gpt_gradients, shortcut_demo
from explorer.book.tokenizer import get_tokenizer
from explorer.probes import trace
from explorer.runtime.build import build_model
from explorer.runtime.training.setup import VARIANT_CHOICES
from explorer.runtime.training.views import JobView, RunView

from test_one_path import single_figures

TEXT = "Every effort moves you forward, said the lecturer and smiled."
LECTURE = prefs.Prefs(lecture=True)
MODES = {"normal": prefs.Prefs(), "lecture": LECTURE}


@pytest.fixture(scope="module")
def traces():
    ids = get_tokenizer().encode(TEXT)
    return [trace(build_model(PRESETS["teach-tiny"], seed=seed, device="cpu"), ids)
            for seed in (123, 7)]


def decode(z):
    if isinstance(z, dict):
        data = np.frombuffer(base64.b64decode(z["bdata"]), dtype=z["dtype"])
        return data.reshape([int(s) for s in str(z.get("shape", data.size)).split(",")])
    return np.asarray(z, dtype=float)


def colour_range(heatmap: dict, layout: dict):
    """The colours' [min, max] as plotly.js 3 takes them (colorscale/calc.js): zmin and zmax
    (a coloraxis's cmin and cmax) when both are set; else the data's, ignoring the one set."""
    axis = layout.get(heatmap.get("coloraxis", ""), None)
    low, high = (axis.get("cmin"), axis.get("cmax")) if axis else (heatmap.get("zmin"),
                                                                   heatmap.get("zmax"))
    if low is not None and high is not None:
        return low, high
    z = decode(heatmap["z"])
    return float(np.nanmin(z)), float(np.nanmax(z))


def weight_maps(fig):
    data = json.loads(fig.to_json())
    return [(d, data["layout"]) for d in data["data"]
            if d["type"] == "heatmap" and d.get("name") not in ("masked", "A − B")]


def plot_height(layout: dict, data=()) -> float:
    """The plotting area's height: the figure less its title and notes (margin.t), and less
    what plotly.js puts under the plot (tick labels, axis title, a legend below)."""
    bottom = 0.0
    for name, axis in layout.items():
        if not name.startswith("xaxis") or axis.get("showticklabels") is False:
            continue
        size = axis.get("tickfont", {}).get("size", 16)
        labels = [str(x) for x in axis.get("ticktext") or ["0.5"]]
        turned = abs(axis.get("tickangle") or 0) >= 60
        ticks = 0.6 * size * max(map(len, labels)) if turned else 1.3 * size
        title = axis.get("title", {})
        bottom = max(bottom, ticks + 8 + (1.3 * title.get("font", {}).get("size", 18) + 12
                                          if title.get("text") else 0))
    legend = layout.get("legend", {})
    if layout.get("showlegend") and legend.get("orientation") == "h":
        size = legend.get("font", {}).get("size", 18)
        entries = [40 + 0.6 * size * len(d["name"]) for d in data
                   if d.get("name") and d.get("showlegend") is not False]
        rows, line = 1, 0.0
        for width in entries:                       # in a figure half the page wide
            rows, line = (rows + 1, width) if line and line + width > 560 else (rows,
                                                                                 line + width)
        bottom += rows * 1.6 * size + 10
    return layout["height"] - layout["margin"]["t"] - max(bottom, 40)


# ---------------------------------------------------------------------------------------------
def test_attention_colour_scales_start_at_zero_for_one_and_two_models(traces):
    figures = [attention_figure(traces[:1], 0, 1), attention_figure(traces[:1], 0, "mean"),
               attention_figure(traces, 0, 1), attention_grid_figure(traces[:1], 0),
               attention_grid_figure(traces, 0)]
    for fig in figures:
        maps = weight_maps(fig)
        assert maps
        for heatmap, layout in maps:
            low, high = colour_range(heatmap, layout)
            assert low == 0, fig.layout.title.text
            assert high >= float(np.nanmax(decode(heatmap["z"]))) - 1e-6


def bar_labels(fig):
    """Each bar's (value, label) as plotly prints it ('%{x:.2~g}')."""
    return [(v, f"{v:.2g}".replace("e-0", "e-")) for bar in fig.data for v in
            (bar.x if bar.orientation == "h" else bar.y) if v is not None]


@pytest.mark.parametrize("mode", MODES)
def test_the_4_4_demos_bar_labels_never_reach_the_neighbouring_bars(mode):
    with prefs.using(MODES[mode]):
        fig = gradient_figure(shortcut_demo(False), shortcut_demo(True))
    layout = json.loads(fig.to_json())["layout"]
    size = fig.data[0].textfont.size
    n_bars = len(fig.data) * len(fig.data[0].y if fig.data[0].orientation == "h"
                                 else fig.data[0].x)
    # half the page: ~380 px of bars across, and the height the layout leaves
    across, along = 380, plot_height(layout, json.loads(fig.to_json())["data"])
    slot = (along if fig.data[0].orientation == "h" else across) / n_bars * (1 - fig.layout.bargap)
    widest = max(0.52 * size * len(label) for _, label in bar_labels(fig))
    if fig.data[0].orientation == "h":
        assert slot >= 1.1 * size               # a label is no higher than its bar's slot
        low, high = fig.layout.xaxis.range          # log10 units
        for value, label in bar_labels(fig):         # and fits right of its bar
            room = (high - math.log10(value)) / (high - low) * across
            assert room >= 0.52 * size * len(label) + 4, (value, label)
    else:
        assert slot >= widest, "a label wider than its bar runs into the next bar"


def test_in_lecture_mode_the_parameter_chart_keeps_its_title_and_labels():
    counts = count_parameters(PRESETS["teach-tiny"])
    with prefs.using(LECTURE):
        fig = parameter_figure([counts])
    width = 600                                    # half the page at 1280 px
    size = fig.layout.template.layout.title.font.size     # lecture mode's template
    for line in fig.layout.title.text.split("<br>"):
        text = line.replace("<b>", "").replace("</b>", "")
        assert 14 + 0.56 * size * len(text) <= width - 10, text
    # every label fits right of its bar: ~315 px of bars, labels may reach 40 px further
    end = fig.layout.xaxis.range[1]
    for value, text in zip(fig.data[0].x, fig.data[0].text):
        room = (end - value) / end * 315 + 40
        assert room >= 0.52 * fig.data[0].textfont.size * len(text), text
    assert fig.layout.height - fig.layout.margin.t >= 150 + 70   # the bars and the x axis


def test_in_lecture_mode_one_attention_heatmap_keeps_250_px(traces):
    with prefs.using(LECTURE):
        fig = attention_figure(traces[:1], 0, "mean")
    data = json.loads(fig.to_json())
    assert plot_height(data["layout"]) >= 250
    assert data["layout"]["height"] <= SCREEN


SCREEN = 700           # a projector's 720 px, less the figure's frame: the page scrolls to it
COPYING_TEXT = "@2>1:?7)@2>1:?7)"                 # 16 one-letter tokens
LONG_TEXT = " ".join(["word"] * 40)               # more query labels than a screen holds


@pytest.fixture(scope="module")
def texts():
    tiny = [build_model(PRESETS["teach-tiny"], seed=seed, device="cpu") for seed in (123, 7)]
    return {name: [trace(model, get_tokenizer().encode(text)) for model in tiny]
            for name, text in (("the", TEXT), ("copying", COPYING_TEXT), ("long", LONG_TEXT))}


@pytest.mark.parametrize("text", ["the", "copying", "long"])
@pytest.mark.parametrize("n_models", [1, 2])
def test_in_lecture_mode_attention_labels_every_query_that_a_screen_holds(texts, text,
                                                                          n_models):
    """Issue 47, item 7: A, B and A − B kept a 250 px plot, so the copying task's 16 tokens
    were labelled every other one. Each query label keeps 1.3 type sizes (20 px type) of the
    plot; every token is labelled while the whole figure fits a projector's screen, and a
    longer prompt's labels are thinned to what does. Each key is labelled where the labels
    fit across a panel, level or turned (A/B of the 12-token text had 3 of 12)."""
    with prefs.using(LECTURE):
        fig = attention_figure(texts[text][:n_models], 0, "mean")
    layout = json.loads(fig.to_json())["layout"]
    n_tokens = len(texts[text][0].token_ids)
    rows = len(layout["yaxis"]["tickvals"])
    assert layout["height"] <= SCREEN
    assert plot_height(layout) >= 1.3 * 20 * rows - 4
    if text == "long":
        assert 2 <= rows < n_tokens
        assert plot_height(layout) + 1.3 * 20 > SCREEN - (layout["height"] - plot_height(layout))
    else:
        assert rows == n_tokens
    if text != "long":          # every key labelled too: level, or turned where only so
        assert len(layout["xaxis"]["tickvals"]) == n_tokens     # they all fit (A/B of "the")


def run_view(label, evals=1, grads=1, **changes):
    """A variant's live view after ``evals`` evaluation points: the first step's, by default."""
    fields = dict(label=label, config={}, parameters=6_536_704, tokens_seen=128,
                  train_loss_now=10.9, val_loss_now=10.95, seconds_per_step=0.3,
                  diverged=False, diverged_at=None, note="",
                  eval_steps=list(range(0, 5 * evals, 5)),
                  eval_tokens=list(range(32, 32 + 160 * evals, 160)),
                  train_losses=list(np.linspace(10.9, 9.5, evals)),
                  val_losses=list(np.linspace(10.95, 9.8, evals)), grad_steps=list(range(grads)),
                  grad_norms=[[1.0, 0.5]] * grads, sample="", sample_step=None)
    return RunView(**{**fields, **changes})


def job(n_variants, evals=1, grads=1):
    labels = list(VARIANT_CHOICES)[:n_variants]
    return JobView(status="running", message="", step=grads, total_steps=30, tokens_seen=128,
                   total_tokens=3840, epoch=0, batches_per_epoch=40, corpus="a story",
                   seconds=1.0, runs=[run_view(label, evals, grads) for label in labels])


@pytest.mark.parametrize("mode", MODES)
def test_the_loss_legend_sits_outside_the_plot_one_entry_per_variant(mode):
    with prefs.using(MODES[mode]):
        fig = loss_figure(job(3, evals=4, grads=20))
    legend = fig.layout.legend
    assert fig.layout.showlegend and legend.x >= 1 and legend.xanchor == "left"
    assert legend.orientation != "h" and legend.yref in (None, "paper")
    # one per variant; and in lecture mode, what the solid and the dashed line are (the note
    # that said it took the plot's room: issue 47, item 7)
    styles = [d.name for d in fig.data if d.legendgroup == "styles"]
    variants = [d for d in fig.data if d.legendgroup != "styles"]
    shown = [d.name for d in variants if d.showlegend is not False]
    assert shown == [d.name for d in variants if d.line.dash == "solid"]
    assert styles == (["train", "val"] if mode == "lecture" else [])


def figures_of_a_training_run():
    """The Train tab's figures as the page draws them while 1 to 4 variants train: after the
    first step (one evaluation point), a few steps and many."""
    for n in range(1, 5):
        for evals, grads in ((1, 1), (1, 2), (4, 20), (60, 200)):
            yield f"{n} variants, {evals} evaluations", loss_figure(job(n, evals, grads))
            yield f"{n} variants, {grads} gradient steps", grad_norm_figure(job(n, evals, grads))


@pytest.mark.parametrize("mode", MODES)
def test_no_figure_leaves_its_plot_too_little_room(traces, mode):
    """The blocker: plotly.js 3.3.1 throws "Something went wrong with axis scaling" (and the
    page's later updates froze) when the margins leave an axis a negative length. Every
    figure keeps its plot at least 100 px high, and every log axis a positive range."""
    with prefs.using(MODES[mode]):
        figures = [*figures_of_a_training_run(), *single_figures(traces[0]).items(),
                   ("gradient", gradient_figure(shortcut_demo(False), shortcut_demo(True))),
                   ("gpt gradient", gpt_gradient_figure(
                       gpt_gradients(PRESETS["teach-tiny"], traces[0].token_ids[:8]),
                       gpt_gradients(PRESETS["teach-tiny"].replace(shortcut=False),
                                     traces[0].token_ids[:8])))]
    for name, fig in figures:
        data = json.loads(fig.to_json())
        layout = data["layout"]
        if layout.get("xaxis", {}).get("visible") is False:     # a hint, no axes
            continue
        rows = 1 + max((int(k[5:] or 1) - 1) // 2 for k in layout if k.startswith("yaxis")) \
            if name.endswith("gradient steps") else 1
        assert plot_height(layout, data["data"]) / rows >= 100, f"{mode}: {name}"
        for key, axis in layout.items():
            if key[1:5] == "axis" and axis.get("type") == "log" and "range" in axis:
                assert all(math.isfinite(v) for v in axis["range"]), f"{name}: {key}"
                assert axis["range"][0] < axis["range"][1], f"{name}: {key}"


@pytest.mark.parametrize("width", range(4, 24))
def test_a_wrapped_chinese_title_never_starts_a_line_with_closing_punctuation(width):
    """Issue 47, item 7: Chinese axis titles wrapped leaving a lone "）" on a line. A line
    never starts with punctuation that closes, nor ends with punctuation that opens."""
    for text in ("块（输入 → 输出）", "交叉熵损失（每个词元，nats）", "注意力权重（查询 → 键）",
                 "下一个词元的概率（%）"):
        lines = _wrap(text, width).split("<br>")
        assert "".join(lines).replace(" ", "") == text.replace(" ", "")
        assert not [line for line in lines[1:] if line[0] in "）」』】》，。、：；！？)"], lines
        assert not [line for line in lines[:-1] if line[-1] in "（「『【《"], lines
