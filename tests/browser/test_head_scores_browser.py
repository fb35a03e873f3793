"""The Attention tab's head scores in a real browser (1280x720): the heads with a clear job are
named, and a click on one shows that head."""
import re

import pytest

from page_widgets import expect, tab

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def small_page(browser, app_url):
    context = browser.new_context(viewport={"width": 1280, "height": 720})
    page = context.new_page()
    page.goto(app_url, wait_until="domcontentloaded")   # never "networkidle": SSE heartbeat
    yield page
    context.close()


def test_a_named_head_is_shown_when_clicked(small_page, shots):
    page = small_page
    page.locator("#build_btn").click()
    expect(page.locator("#status")).to_contain_text("Model ready")
    tab(page, "2 · Inside the forward pass")
    # two tokens: query 1 splits its attention between them, so some random heads give the
    # previous token half or more of it, and are named
    page.locator("#trace_prompt textarea").fill("Hello world")
    page.locator("#trace_btn").click()
    expect(page.locator("#chips .chip")).to_have_count(2)
    tab(page, "3 · Attention")
    page.locator("#att_btn").click()
    named = page.locator("#att_named input[type=radio]")
    expect(named.first).to_be_attached()
    expect(page.locator("#att_named")).to_contain_text(re.compile(
        r"layer \d+, head \d+: previous token, 0\.\d\d"))
    value = named.last.get_attribute("value")           # "model:layer:head"
    _, layer, head = value.split(":")
    named.last.check()
    expect(page.locator("#att_plot .gtitle")).to_contain_text(
        f"Attention in layer {layer}, head {head}")
    expect(page.locator("#att_head input")).to_have_value(head)
    if shots:
        page.screenshot(path=f"{shots}/attention_head_scores.png", full_page=True)
