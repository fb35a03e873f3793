"""A shared link and the guided walk of the diagram, in a real browser at 1280x720 (a
projector): open a link with a preset, a changed knob, a seed, a prompt and a tab, and see
them restored and the model built; make a link with "Copy link" (the box and the clipboard);
then click two stages of the Build tab's diagram and see their shapes and statistics; and a
hostile link gets a message and the defaults.

Set GPT_EXPLORER_SCREENSHOTS=<folder> to keep the screenshots (share_*.png)."""
import os
import re
from urllib.parse import quote

import pytest

from explorer.book.config import PRESETS, count_parameters

from page_widgets import expect

pytestmark = pytest.mark.browser

PROJECTOR = {"width": 1280, "height": 720}
PROMPT = "The cat sat on the mat"          # 6 GPT-2 tokens
LINK = f"?preset=teach-tiny&n_layers=3&seed=7&prompt={quote(PROMPT)}&tab=inside&lang=en"


@pytest.fixture(scope="module")
def projector(browser, app_url):
    """A page of its own at projector size, with the clipboard allowed (127.0.0.1 is a
    secure context)."""
    context = browser.new_context(viewport=PROJECTOR)
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=app_url.rstrip("/"))
    context.set_default_timeout(20_000)
    page = context.new_page()
    errors = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    yield page
    context.close()
    assert not errors, f"uncaught errors in the page: {errors}"


def shot(page, shots, name):
    if shots:
        page.wait_for_timeout(300)
        page.screenshot(path=os.path.join(shots, f"{name}.png"))


def test_a_link_restores_its_model_prompt_and_tab(projector, app_url, shots):
    page = projector
    page.goto(app_url + LINK, wait_until="domcontentloaded")
    cfg = PRESETS["teach-tiny"].replace(n_layers=3)
    # the model itself: built as the Build button builds it (a custom config, seed 7)
    expect(page.locator("#status")).to_contain_text(
        re.compile(rf"Model ready — custom config, {count_parameters(cfg).total:,} parameters"
                   rf".* seed 7"), timeout=30_000)
    # the tab and the prompt
    expect(page.get_by_role("tab", name="2 · Inside the forward pass", exact=True)) \
        .to_have_attribute("aria-selected", "true")
    expect(page.locator("#trace_prompt textarea")).to_have_value(PROMPT)
    shot(page, shots, "share_opened_inside")
    # the Build tab's widgets
    page.get_by_role("tab", name="1 · Build", exact=True).click()
    expect(page.locator("#preset input")).to_have_value("teach-tiny")
    expect(page.locator("#n_layers input")).to_have_value("3")
    expect(page.locator("#seed input")).to_have_value("7")
    expect(page.locator("#emb_dim input")).to_have_value(str(cfg.emb_dim))


def test_copy_link_shows_the_link_and_copies_it(projector, app_url, shots):
    page = projector
    page.get_by_role("tab", name="2 · Inside the forward pass", exact=True).click()
    page.locator("#share_btn").click()
    box = page.locator("#share_link textarea, #share_link input").first
    expect(box).to_have_value(re.compile(r"^http://127\.0\.0\.1:\d+/\?preset=teach-tiny"
                                         r"&n_layers=3&seed=7&prompt=The%20cat"))
    link = box.input_value()
    assert link.endswith("&tab=inside&lang=en")
    expect(page.locator("#share_note")).to_contain_text("This link opens the page")
    copied = page.evaluate("navigator.clipboard.readText()")
    assert copied == link
    shot(page, shots, "share_copied")


def test_clicking_two_stages_shows_their_shapes_and_statistics(projector, shots):
    page = projector
    page.get_by_role("tab", name="1 · Build", exact=True).click()
    card = page.locator("#walk_card")
    # a block's stage: the feed-forward network, first of block 0, then (the block picker
    # shows for a block's stages) of block 2; its hidden layer is 4 x wider
    page.locator('#arch [data-stage="feed_forward"]').click()
    expect(card).to_contain_text("Feed-forward network")
    expect(card).to_contain_text("block 0 of 3")
    block = page.locator("#walk_block input[type=number]")
    block.fill("2")
    block.press("Enter")
    expect(card).to_contain_text("block 2 of 3")
    expect(card).to_contain_text("book §4.3, in the transformer block of §4.5")
    expect(card).to_contain_text("(1, 6, 256)")     # ff_pre: (batch, tokens, 4 x 64)
    expect(card).to_contain_text("(1, 6, 64)")      # ff_out
    expect(card.locator("tr")).to_have_count(4)     # header + ff_pre, ff_post, ff_out
    shot(page, shots, "share_walk_feed_forward")
    # the keyboard: focus the final norm and press Enter
    final = page.locator('#arch [data-stage="final_norm"]')
    final.focus()
    final.press("Enter")
    expect(card).to_contain_text("Final LayerNorm")
    expect(card).to_contain_text("book §4.2, 4.6")
    expect(card).not_to_contain_text("block 2")
    expect(page.locator("#walk_block")).to_be_hidden()     # a model's stage has no block
    expect(card.locator("td", has_text="final_norm_out")).to_have_count(1)
    shot(page, shots, "share_walk_final_norm")


def test_a_hostile_link_gets_a_message_and_the_defaults(projector, app_url, shots):
    page = projector
    hostile = ("?preset=%3Cscript%3Ealert(1)%3C%2Fscript%3E&n_layers=" + "9" * 40
               + "&prompt=" + "a" * 3000 + "&evil=1&tab=inside&tab=train")
    page.goto(app_url + hostile, wait_until="domcontentloaded")
    note = page.locator("#share_note")
    expect(note).to_contain_text("could not be used in full")
    expect(note).to_contain_text("<script>alert(1)</script>")   # shown as text, not run
    expect(note).to_contain_text("evil")
    expect(page.locator("#status")).to_contain_text("Model ready — teach-small")
    expect(page.get_by_role("tab", name="1 · Build", exact=True)) \
        .to_have_attribute("aria-selected", "true")
    shot(page, shots, "share_hostile")
