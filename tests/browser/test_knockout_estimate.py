"""The knock-out map in a real browser at 1280x720 (issue 35): drawn from the estimate and made
exact in place, the text it measured shown above it and editable there, one colour key with
numbers, and clicks on cells queued, never dropped: three quick clicks make three B's in turn,
the page lists those waiting, and B's cell alone is outlined."""
import re

import pytest

from page_widgets import expect, tab

from .test_browser import build, status  # noqa: E402
from .test_knockout_browser import TAB_KNOCK, _open

pytestmark = pytest.mark.browser

CLICKS = ["zero trf_blocks[0].att head 1", "zero trf_blocks[1].att head 2",
          "zero trf_blocks[1].ff"]


@pytest.fixture(scope="module")
def page(browser, app_url):
    context, pg = _open(browser, app_url)
    yield pg
    context.close()
    assert not pg.errors, f"uncaught errors in the page: {pg.errors}"


def test_the_map_measures_the_text_above_it_and_ends_exact_everywhere(page):
    build(page, "teach-tiny")
    tab(page, TAB_KNOCK)
    page.locator("#knock_prompt textarea").fill("One two three four five six")
    page.locator("#knock_everywhere input").check()
    page.locator("#knock_map_btn").click()
    expect(page.locator("#knock_map .knock-measured")).to_contain_text(
        "One two three four five six")
    expect(page.locator("#knock_map .knock-agreement")).to_contain_text("Spearman")
    expect(page.locator("#knock_map td.estimated")).to_have_count(0)      # all exact now
    key = page.locator("#knock_map .knock-scale")
    expect(key).to_contain_text("noise floor")
    expect(key.locator("span")).to_have_count(7)
    expect(page.locator("#knock_map .knock-status")).to_contain_text("Every cell exact")


def test_quick_clicks_are_queued_and_each_is_applied_in_turn(page):
    tab(page, TAB_KNOCK)
    cells = [page.locator(f'#knock_map td[data-knock="{spec}"]') for spec in CLICKS]
    for cell in cells:
        cell.click()
    queue = page.locator("#knock_map .knock-queue")
    # the last click is never dropped: it becomes B, after the others
    expect(status(page)).to_contain_text("trf_blocks[1].ff", timeout=60_000)
    expect(page.locator("#knock_spec textarea, #knock_spec input")).to_have_value(CLICKS[-1])
    expect(queue).to_have_text("")
    current = page.locator("#knock_map td.walk-current")
    expect(current).to_have_count(1)
    expect(current).to_have_attribute("data-knock", CLICKS[-1])
    expect(page.locator("#knock_map td.knock-queued")).to_have_count(0)
    # a click while another is being applied: listed (and its cell striped) until applied
    page.evaluate("""(specs) => {
        for (const spec of specs) {
          document.querySelector(`#knock_map td[data-knock="${spec}"]`).click();
        }}""", CLICKS[:2])
    expect(queue).to_contain_text(re.compile(re.escape(CLICKS[1])))
    expect(status(page)).to_contain_text("trf_blocks[1].att head 2", timeout=60_000)
    expect(queue).to_have_text("")
    expect(page.locator("#knock_map td.walk-current")).to_have_attribute("data-knock",
                                                                         CLICKS[1])
