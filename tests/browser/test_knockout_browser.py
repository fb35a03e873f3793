"""Tab 7, Knock out, in a real browser at a projector's 1280x720: teach-tiny built and the default
prompt traced, "Which parts matter" draws the map, a click on a head's cell makes that knock-out
model B (the status line, the interventions box, the Inside tab's figures show A and B), an
intervention typed and applied changes B again, and "Remove B" ends the comparison. One test in
中文: the tab's title and the map's captions. GPT_EXPLORER_SCREENSHOTS=<folder> saves a
full-page screenshot of each step."""
import os
import re

import pytest

from zh_text import zh
from explorer.book.config import PRESETS
from explorer.app.session import DEFAULT_PROMPT

from page_widgets import choose, expect, tab

pytestmark = pytest.mark.browser

from source_texts import source_texts  # noqa: E402

from .test_browser import TAB_INSIDE, build, status, trace  # noqa: E402

SOURCE = source_texts()
PROJECTOR = {"width": 1280, "height": 720}
TAB_KNOCK = "7 · Knock out"
HEAD_CELL = "zero trf_blocks[1].att head 0"
HEAD_B = "A with trf_blocks[1].att head 0 zeroed"        # knock.b_what + intervention.zero_head
TYPED = "identity trf_blocks[0].norm2"
TYPED_B = "A with trf_blocks[0].norm2 replaced by the identity"
HEADS_CAPTION = SOURCE["knock.heads_caption"][0]          # (English text, where)
PARTS_CAPTION = SOURCE["knock.parts_caption"][0]


def _open(browser, app_url):
    context = browser.new_context(viewport=PROJECTOR)
    context.set_default_timeout(30_000)
    pg = context.new_page()
    pg.errors = []
    pg.on("pageerror", lambda error: pg.errors.append(str(error)))
    pg.goto(app_url, wait_until="domcontentloaded")     # never "networkidle": SSE heartbeat
    expect(pg.locator("#build_btn")).to_be_visible()
    return context, pg


@pytest.fixture(scope="module")
def page(browser, app_url):
    context, pg = _open(browser, app_url)
    yield pg
    context.close()
    assert not pg.errors, f"uncaught errors in the page: {pg.errors}"


def shot(page, folder, name):
    if folder:
        page.wait_for_timeout(300)  # plotly's transitions
        page.screenshot(path=os.path.join(folder, f"{name}.png"), full_page=True)


def stats_title(page):
    return page.locator("#stats_plot [data-testid=plotly] .gtitle")


def draw_map(page):
    page.locator("#knock_map_btn").click()
    expect(page.locator("#knock_map table")).to_have_count(2, timeout=60_000)
    expect(page.locator(f'#knock_map td[data-knock="{HEAD_CELL}"]')).to_be_visible()


def b_is(page, what):
    """B is ``what``: the status line says so, and the Inside tab's statistics show A and B."""
    expect(status(page)).to_contain_text(f"Compared with B: {what},")
    tab(page, TAB_INSIDE)
    expect(stats_title(page)).to_contain_text("A and B")
    legend = page.locator("#stats_plot [data-testid=plotly] .legendtext")
    expect(legend.first).to_contain_text(re.compile(r"^A · "))
    expect(legend.filter(has_text=re.compile(r"^B · ")).first).to_be_attached()
    tab(page, TAB_KNOCK)


def test_a_click_on_the_map_makes_that_knock_out_model_b(page, shots):
    build(page, "teach-tiny")
    trace(page, DEFAULT_PROMPT)
    expect(stats_title(page)).not_to_contain_text("A and B")
    tab(page, TAB_KNOCK)
    expect(page.locator("#knock_note")).to_contain_text("No intervention yet")
    draw_map(page)
    captions = page.locator("#knock_map caption")
    expect(captions).to_have_text([HEADS_CAPTION, PARTS_CAPTION])
    expect(page.locator("#knock_map p").filter(has_text="tokens ·").first).to_contain_text(
        "4 tokens · the model's own loss")
    expect(page.locator("#knock_map .knock-measured")).to_contain_text(DEFAULT_PROMPT)
    cell = page.locator(f'#knock_map td[data-knock="{HEAD_CELL}"]')
    cell.click()
    expect(page.locator("#knock_spec textarea, #knock_spec input")).to_have_value(
        HEAD_CELL)
    expect(page.locator("#knock_note")).to_contain_text(f"B = {HEAD_B}.")
    # the map stays, the clicked cell outlined
    expect(page.locator("#knock_map table")).to_have_count(2)
    expect(cell).to_have_class(re.compile(r"\bwalk-current\b"))
    shot(page, shots, "k1_knockout_clicked")
    b_is(page, HEAD_B)


def test_an_intervention_typed_and_applied_changes_b(page, shots):
    tab(page, TAB_KNOCK)
    page.locator("#knock_spec textarea, #knock_spec input").fill(TYPED)
    page.locator("#knock_btn").click()
    expect(status(page)).to_contain_text(f"Compared with B: {TYPED_B},")
    expect(status(page)).not_to_contain_text(HEAD_B)
    expect(page.locator("#knock_note")).to_contain_text(f"B = {TYPED_B}.")
    b_is(page, TYPED_B)
    current = page.locator("#knock_map .walk-current")      # B's cell outlined, not the last
    expect(current).to_have_count(1)                         # one clicked
    expect(current).to_have_attribute("data-knock", TYPED)
    shot(page, shots, "k2_knockout_typed")
    # a refusal: a message, and the status line above still says which models A and B are
    page.locator("#knock_spec textarea, #knock_spec input").fill("hello world")
    page.locator("#knock_btn").click()
    toast = page.locator("[data-testid=toast-body]").filter(has_text="hello")
    expect(toast.first).to_be_visible()
    toast.first.locator("[data-testid=toast-close]").click()
    expect(status(page)).to_be_visible()
    expect(status(page)).to_contain_text(f"Compared with B: {TYPED_B},")
    expect(page.locator("#status .error")).to_have_count(0)


def test_remove_b_ends_the_comparison(page):
    tab(page, TAB_KNOCK)
    page.locator("#knock_remove_btn").click()
    expect(status(page)).not_to_contain_text("Compared with")
    expect(page.locator("#knock_note")).to_contain_text("No intervention yet")
    expect(page.locator("#knock_map table")).to_have_count(2)     # A's map stays
    expect(page.locator("#knock_map .walk-current")).to_have_count(0)
    trace(page, DEFAULT_PROMPT)
    expect(stats_title(page)).not_to_contain_text("A and B")


def test_the_tab_and_its_map_in_chinese(browser, app_url, shots):
    context, page = _open(browser, app_url)
    try:
        page.locator("#lang input[value=zh]").check()
        expect(page.locator("#build_btn")).to_have_text(zh("Build the model"))
        build_zh = zh("1 · Build")
        tab(page, build_zh)
        choose(page, "preset", "teach-tiny")
        expect(page.locator("#emb_dim input")).to_have_value(str(PRESETS["teach-tiny"].emb_dim))
        page.locator("#build_btn").click()
        expect(status(page)).to_contain_text(re.compile(r"teach-tiny"), timeout=30_000)
        tab(page, zh(TAB_KNOCK))
        assert zh(TAB_KNOCK) == "7 · 敲掉部件"
        expect(page.locator("#knock_map_btn")).to_have_text(zh("Which parts matter"))
        page.locator("#knock_map_btn").click()
        expect(page.locator("#knock_map caption")).to_have_text(
            [zh(HEADS_CAPTION), zh(PARTS_CAPTION)], timeout=60_000)
        assert zh(HEADS_CAPTION) != HEADS_CAPTION and zh(PARTS_CAPTION) != PARTS_CAPTION
        expect(page.locator("#knock_map th").first).to_have_text(zh("block"))
        page.locator(f'#knock_map td[data-knock="{HEAD_CELL}"]').click()
        expect(status(page)).to_contain_text("trf_blocks[1].att 的头 0 置零")
        shot(page, shots, "k3_knockout_zh")
        # lecture mode: what is typed and chosen reads as large as the page's text
        page.locator("#lecture input").check()
        expect(page.locator("body.lecture")).to_have_count(1)
        for box in ("#knock_spec textarea, #knock_spec input",
                    "#knock_heads textarea, #knock_heads input",
                    "#knock_kind input"):
            px = float(page.locator(box).first.evaluate(
                "(el) => parseFloat(getComputedStyle(el).fontSize)"))
            assert px >= 19, f"{box}: {px} px text in lecture mode"
        assert not page.errors, f"uncaught errors in the page: {page.errors}"
    finally:
        context.close()
