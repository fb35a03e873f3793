"""Issue 49: a link made on the Patching tab, opened in a fresh browser, fills the tab's four
boxes with its pair and says that the maps must be drawn again (Patch)."""
from urllib.parse import quote

import pytest

from page_widgets import expect

pytestmark = pytest.mark.browser

PAIR = {"clean": "When Mary and John went", "corrupted": "When Alice and Bob went",
        "right": " Mary", "wrong": " John"}
LINK = ("?preset=teach-tiny&tab=patching&"
        + "&".join(f"{k}={quote(v, safe='')}" for k, v in PAIR.items()) + "&lang=en")


def test_a_patching_link_fills_the_four_boxes(browser, app_url):
    context = browser.new_context(viewport={"width": 1280, "height": 720})
    context.set_default_timeout(20_000)
    page = context.new_page()
    try:
        page.goto(app_url + LINK, wait_until="domcontentloaded")
        expect(page.get_by_role("tab", name="8 · Patching", exact=True)) \
            .to_have_attribute("aria-selected", "true", timeout=30_000)
        for name, text in PAIR.items():
            # (an input's value keeps the answers' leading space)
            expect(page.locator(f"#patch_{name} textarea")).to_have_value(text, timeout=30_000)
        expect(page.locator("#share_note")).to_contain_text("press Patch")
    finally:
        context.close()
