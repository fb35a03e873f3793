"""The knock-out map's figure (``explorer.app.plots.knockout``) from plain data: one colour
scale for both tables with its key and numbers, changes below the noise floor left white,
estimated cells marked "≈", and one outline, B's. Then the tab's stream: the estimate first,
exact cells after, Stop, exact everywhere, and the text measured."""
import re

import numpy as np

from explorer.app.plots.knockout import NEUTRAL, colour, knockout_map_html
from explorer.book.tokenizer import get_tokenizer
from explorer.probes.attribution import Attribution
from explorer.probes.knockouts import PARTS

FLOOR = 1e-4


def made(exact_heads=False):
    """2 blocks x 2 heads: a head change of +0.5 equal to a part's, one below the floor."""
    heads = np.array([[0.5, 1e-5], [-0.25, 0.01]])
    parts = np.full((2, len(PARTS)), np.nan)
    parts[:, :4] = [[0.5, 0.02, -0.003, 0.0], [0.1, 0.05, 0.2, 0.3]]
    exact = np.full_like(parts, np.nan)
    exact[:, 4] = [2.0, 1.0]                                     # the shortcuts: exact only
    return Attribution(
        token_ids=[464, 3139, 373], clean_loss=5.0, clean_prob=0.1,
        head_estimate=heads, part_estimate=parts,
        head_loss=heads.copy() if exact_heads else np.full_like(heads, np.nan),
        head_prob=np.full_like(heads, np.nan), part_loss=exact,
        part_prob=np.full_like(parts, np.nan), has_part=np.ones_like(parts, bool),
        floor=FLOOR, seconds=0.1, layer_labels=["trf_blocks[0]", "trf_blocks[1]"])


def cells(page):
    """{spec: (background, text, classes)} of every clickable cell."""
    found = re.findall(r'<td data-knock="([^"]+)"(?: class="([^"]*)")?[^>]*style="background:'
                       r'(#[0-9a-f]{6});[^"]*">([^<]*)</td>', page)
    return {spec: (bg, text, classes) for spec, classes, bg, text in found}


def test_one_colour_scale_for_both_tables_and_its_key_with_numbers():
    page = knockout_map_html(made())
    shown = cells(page)
    head, part = shown["zero trf_blocks[0].att head 0"], shown["zero trf_blocks[0].att"]
    # the same change, the same colour, in either table; the largest change (a shortcut's
    # exact 2.0) sets the scale, so a 0.5 is not painted full
    assert head[0] == part[0] == colour(0.5, 2.0, FLOOR)
    assert shown["remove trf_blocks[0].shortcut"][0] == colour(2.0, 2.0, FLOOR)
    assert head[0] != shown["remove trf_blocks[0].shortcut"][0]
    key = re.search(r'<p class="knock-scale">(.*?)</p>', page).group(1)
    assert "+2.000" in key and "-2.000" in key and "1.0e-4" in key
    # each table on its own scale would have painted the head full: not so
    assert head[0] != colour(0.5, 0.5, FLOOR)


def test_changes_below_the_noise_floor_are_white():
    shown = cells(knockout_map_html(made()))
    white = "#%02x%02x%02x" % NEUTRAL
    assert shown["zero trf_blocks[0].att head 1"][0] == white          # 1e-5 < floor
    assert shown["identity trf_blocks[0].norm2"][0] == white           # 0
    assert shown["zero trf_blocks[1].att head 1"][0] != white          # 0.01 > floor
    assert colour(-FLOOR * 2, 1.0, FLOOR) != white and colour(FLOOR / 2, 1.0, FLOOR) == white


def test_estimates_read_approximately_and_exact_cells_plainly():
    shown = cells(knockout_map_html(made()))
    assert shown["zero trf_blocks[0].att head 0"][1] == "≈+0.500"
    assert "estimated" in shown["zero trf_blocks[0].att head 0"][2]
    assert shown["remove trf_blocks[1].shortcut"][1] == "+1.000"          # exact
    exact = cells(knockout_map_html(made(exact_heads=True)))
    assert exact["zero trf_blocks[0].att head 0"][1] == "+0.500"
    # the probability has no estimate: an estimated cell is blank until exact
    prob = cells(knockout_map_html(made(), "probability"))
    assert prob["zero trf_blocks[0].att head 0"][1] == "…"


def test_only_bs_cell_is_outlined_and_the_text_measured_is_shown():
    page = knockout_map_html(made(), current="zero trf_blocks[1].att head 1", applied=3)
    assert len(re.findall(r'class="[^"]*walk-current', page)) == 1
    assert 'data-knock="zero trf_blocks[1].att head 1" class="walk-current estimated"' in page
    assert 'data-applied="3"' in page           # the page's clicks up to 3 were applied
    assert "Measured on: <q>The capital was</q>" in page


# ---------------------------------------------------------------------------------------------
# The tab's stream (handlers, no browser)
def _session():
    from explorer.app import shared
    from explorer.app.session import Made, Model, Session
    from explorer.book.config import PRESETS
    from explorer.runtime.sources import ModelKey
    shared.RESULTS.clear()
    key = ModelKey(PRESETS["teach-tiny"], 123, "cpu", "float32")
    return Session(models=(Model(key, Made("built", "teach-tiny")),))


def test_the_stream_draws_the_estimate_first_then_exact_cells_and_stop_keeps_them():
    from explorer.app.tabs import knockout, knockout_map
    session = _session()
    stream = knockout_map.parts_map("Every effort moves you forward", "loss", True, session)
    first = next(stream)["knock_numbers"]
    assert first["exact_cells"] == 0 and first["cells"] == 18
    knockout_map.UPDATE_S, kept = 0.0, knockout_map.UPDATE_S       # every cell its own update
    try:
        second = next(stream)["knock_numbers"]
        assert second["exact_cells"] == 1
        stopped = knockout_map.stopped(session)["knock_map"]
        assert "Stopped: 1 of 18 cells exact" in stopped
        assert list(stream) == [], "no cell after Stop"
    finally:
        knockout_map.UPDATE_S = kept
    result = session.view(knockout_map.MapView).result
    assert result.n_exact == 1 and stopped.count('class="estimated"') == 17   # the rest
    # pressed again: it goes on from there, and ends exact everywhere
    last = list(knockout_map.parts_map("Every effort moves you forward", "loss", True,
                                   session))[-1]
    assert session.view(knockout_map.MapView).result is result
    assert last["knock_numbers"]["exact_cells"] == 18
    assert "Spearman" in last["knock_map"]


def test_exact_everywhere_is_the_exact_map():
    from explorer.app import shared
    from explorer.app.tabs import knockout, knockout_map
    from explorer.book.tokenizer import get_tokenizer
    from explorer.probes.knockouts import importance
    session = _session()
    numbers = list(knockout_map.parts_map("Every effort moves you forward", "loss", True,
                                      session))[-1]["knock_numbers"]
    exact = importance(shared.models_of(session)[0],
                       get_tokenizer().encode("Every effort moves you forward"))
    # A loss change is the difference of two float32 losses near 11, 2**-20 (~1e-6) apart at
    # the finest; the map's cells run in other batches than importance()'s: 4 such steps.
    np.testing.assert_allclose(np.array(numbers["head_loss"], float), exact.head_loss,
                               rtol=0, atol=4e-6)
    np.testing.assert_allclose(np.array(numbers["part_loss"], float), exact.part_loss,
                               rtol=0, atol=4e-6)
    np.testing.assert_allclose(np.array(numbers["head_prob"], float), exact.head_prob,
                               rtol=0, atol=1e-7)
    # without it: the top 10 and the exact-only shortcuts, the rest estimates
    numbers = list(knockout_map.parts_map("Every effort moves", "loss", False,
                                      session))[-1]["knock_numbers"]
    assert numbers["exact_cells"] == 10 + 2


def test_the_text_radio_fills_the_box_the_map_measures():
    from explorer.app import shared
    from explorer.app.tabs import knockout, knockout_map
    from explorer.app import prompts
    session = _session()
    prompts.use(session, "Hello there")        # (the session's prompt: one for every tab)
    assert knockout_map.text_chosen("the prompt", session) == {"knock_prompt": "Hello there"}
    story = knockout_map.text_chosen("the training story", session)["knock_prompt"]
    model = shared.models_of(session)[0]
    assert len(get_tokenizer().encode(story)) == min(64, model.cfg.context_length)
    last = list(knockout_map.parts_map(story, "loss", False, session))[-1]
    assert last["knock_numbers"]["token_ids"] == get_tokenizer().encode(story)
    assert "Measured on: <q>" + story[:20] in last["knock_map"].replace("&#x27;", "'")


def test_non_finite_values_are_drawn_and_never_formatted_as_numbers():
    """Issue 47, item 23: a NaN floor read "+nan" and was split on "e" (a ValueError); a
    knock-out whose loss overflows is exact, and reads so, not "not computed yet"."""
    from explorer.app.plots.knockout import _number
    assert _number(float("nan")) == "NaN" and _number(float("inf")) == "∞"
    result = made()
    result.floor = float("nan")
    result.part_loss[1, 0] = float("inf")                  # exact: the loss overflowed
    page = knockout_map_html(result)
    shown = cells(page)
    assert shown["zero trf_blocks[1].att"][1] == "∞"
    assert "activations overflow" in page and "+nan" not in page


def test_the_map_of_a_model_whose_activations_overflow_says_so_for_both_metrics(monkeypatch):
    """Issue 47, item 23, through the tab's handler: "This is a bug in GPT Explorer
    (ValueError)" for both metrics, from a NaN noise floor formatted "+nan"."""
    import gradio as gr
    import pytest
    import torch
    from explorer.app.tabs import knockout_map
    from explorer.book.config import PRESETS
    from explorer.runtime.build import build_model
    model = build_model(PRESETS["teach-tiny"], seed=123, device="cpu")
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(1e30)                                  # weights near 1e30 (a checkpoint's)
    monkeypatch.setattr(knockout_map, "model_a", lambda session: model)
    for metric in ("loss", "probability"):
        with pytest.raises(gr.Error) as err:
            list(knockout_map.parts_map("Every effort moves you", metric, False, _session()))
        assert "activations overflow" in err.value.message
        assert "bug" not in err.value.message
