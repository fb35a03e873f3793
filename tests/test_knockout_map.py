"""The knock-out map's figure (``explorer.app.plots.knockout``) from plain data: one colour
scale for both tables with its key and numbers, changes below the noise floor left white,
estimated cells marked "≈", and one outline, B's."""
import re

import numpy as np

from explorer.app.plots.knockout import NEUTRAL, colour, knockout_map_html
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
