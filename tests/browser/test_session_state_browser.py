"""Issue 47, items 1, 4 and 21, in a real browser at 1280x720 (a projector): one prompt for
every tab; a link from 中文 + lecture mode with a knocked-out B reopens all of it in a fresh
browser; a link asking for layer 9999 and head 9999 says what it changed.

Set GPT_EXPLORER_SCREENSHOTS=<folder> to keep the screenshots (state_*.png)."""
import os
import re
from urllib.parse import quote

import pytest

from page_widgets import expect, tab

pytestmark = pytest.mark.browser

PROJECTOR = {"width": 1280, "height": 720}
CAT = "The cat sat on the mat"
B = "zero trf_blocks[1].att head 2"


@pytest.fixture
def fresh(browser):
    """A fresh browser (a context of its own: no session, no storage), at projector size."""
    context = browser.new_context(viewport=PROJECTOR)
    context.grant_permissions(["clipboard-read", "clipboard-write"])
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


def test_a_prompt_traced_on_tab_2_is_the_prompt_of_tabs_5_and_7(fresh, app_url, shots):
    """Item 1: tab 7 still showed (and measured) "Every effort moves you"."""
    page = fresh
    page.goto(app_url + "?preset=teach-tiny&tab=inside&lang=en", wait_until="domcontentloaded")
    expect(page.locator("#status")).to_contain_text("Model ready", timeout=60_000)
    box = page.locator("#trace_prompt textarea")
    box.fill(CAT)
    page.locator("#trace_btn").click()
    expect(page.locator("#chips")).to_contain_text("mat")
    tab(page, "7 · Knock out")
    expect(page.locator("#knock_prompt textarea")).to_have_value(CAT)
    tab(page, "5 · Generate")
    expect(page.locator("#gen_prompt textarea")).to_have_value(CAT)
    shot(page, shots, "state_one_prompt_generate")


def test_a_link_from_zh_lecture_mode_and_b_reopens_all_of_it(fresh, browser, app_url, shots):
    """Item 4: the link reopened without B and without lecture mode."""
    page = fresh
    link = (f"?preset=teach-tiny&b={quote(B, safe='')}&tab=attention&layer=1&head=3"
            "&lecture=true&lang=zh")
    page.goto(app_url + link, wait_until="domcontentloaded")
    expect(page.locator("#status")).to_contain_text("B", timeout=60_000)
    expect(page.locator("#status")).to_contain_text("trf_blocks[1].att")
    expect(page.locator("body")).to_have_class(re.compile(r"\blecture\b"))
    expect(page.locator("#lecture input")).to_be_checked()
    expect(page.get_by_role("tab", name="3 · 注意力", exact=True)) \
        .to_have_attribute("aria-selected", "true")
    expect(page.locator("#att_head input")).to_have_value("3")
    expect(page.locator("#att_layer input[type=number]")).to_have_value("1")
    expect(page.locator("#share_row")).to_be_hidden()          # nothing left out
    shot(page, shots, "state_link_zh_lecture_b")
    # ... and the page's own link carries all of it again
    page.locator("#share_btn").click()
    made = page.locator("#share_link textarea, #share_link input").first
    expect(made).to_have_value(re.compile(r"lecture=true"))
    value = made.input_value()
    assert "b=" + quote(B, safe="") in value and "lang=zh" in value and "head=3" in value
    expect(page.locator("#share_note")).to_contain_text("授课模式")


def test_a_link_asking_for_layer_and_head_9999_says_what_it_changed(fresh, app_url, shots):
    """Item 21: put right to the last layer and "mean", silently."""
    page = fresh
    page.goto(app_url + "?preset=teach-tiny&tab=attention&layer=9999&head=9999&lang=en",
              wait_until="domcontentloaded")
    note = page.locator("#share_note")
    expect(note).to_contain_text("layer 9999 → 1", timeout=60_000)
    expect(note).to_contain_text("head 9999 → mean")
    expect(note).to_be_in_viewport()
    expect(page.locator("#att_layer input[type=number]")).to_have_value("1")
    shot(page, shots, "state_link_9999")
