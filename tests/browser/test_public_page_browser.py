"""The page's own script through Gradio's public surface (issue 36), in a real browser at
1280x720: the language toggle switches Gradio's labels; a Chinese page titles its message
boxes in Chinese (a style-sheet rule, by the page's lang); a link opens on its tab (an update
of the gr.Tabs) and the widgets it set stay set; the Generate tab paints its steps without
polling for its elements.

Set GPT_EXPLORER_SCREENSHOTS=<folder> to keep the screenshots (public_*.png)."""
import os
import re

import pytest

from zh_text import zh

from page_widgets import RECORD_TOASTS, expect, set_number, set_slider, tab, toasts

pytestmark = pytest.mark.browser

PROJECTOR = {"width": 1280, "height": 720}
SLOW = 60_000
ATTENTION, GENERATE = "3 · Attention", "5 · Generate"

# What a reader sees as each message box's title: the title's own text, or, where the style
# sheet hid it (no size), the word it shows in its place.
SHOWN_TITLES = """() => [...document.querySelectorAll('[data-testid=toast-body]')].map((box) => {
  const title = box.querySelector('.toast-title');
  if (!title) return null;
  const own = [...title.childNodes].filter((n) => n.nodeType === Node.TEXT_NODE)
                                   .map((n) => n.data).join('').trim();
  const before = getComputedStyle(title, '::before').content;
  const hidden = parseFloat(getComputedStyle(title).fontSize) === 0;
  const word = before && before !== 'none' ? JSON.parse(before) : '';
  return {kind: ['error', 'warning'].find((k) => box.classList.contains(k)),
          shown: hidden ? word : own + word, width: title.getBoundingClientRect().width};
})"""


@pytest.fixture
def open_page(browser, app_url):
    """A factory: a fresh page at 1280x720 (``query``: a link's "?..."), its toasts recorded;
    no uncaught error in it by the end."""
    opened = []

    def open_(query=""):
        context = browser.new_context(viewport=PROJECTOR, locale="en-US")
        context.set_default_timeout(30_000)
        page = context.new_page()
        page.errors = []
        page.on("pageerror", lambda error: page.errors.append(str(error)))
        page.add_init_script(f"({RECORD_TOASTS})()")
        page.goto(app_url + query, wait_until="domcontentloaded")
        expect(page.locator("#build_btn")).to_be_visible()
        opened.append((context, page))
        return page

    yield open_
    for context, page in opened:
        context.close()
        assert not page.errors, f"uncaught errors in the page: {page.errors}"


def shot(page, folder, name):
    if folder is None:          # (conftest's shots: GPT_EXPLORER_SCREENSHOTS unset)
        return
    path = os.path.join(folder, f"public_{name}.png")
    page.wait_for_timeout(300)
    page.screenshot(path=path)
    print(f"screenshot: {path}")


def to_chinese(page):
    page.locator("#lang input[value=zh]").check()
    expect(page.locator("#build_btn")).to_have_text(zh("Build the model"))


def test_the_language_toggle_switches_gradios_labels_and_back(open_page, shots):
    page = open_page()
    expect(page.locator("html")).to_have_attribute("lang", "en")
    to_chinese(page)
    expect(page.locator("html")).to_have_attribute("lang", "zh-CN")
    expect(page.get_by_role("tab", name=zh(ATTENTION), exact=True)).to_be_visible()
    shot(page, shots, "zh_toggle")
    page.locator("#lang input[value=en]").check()
    expect(page.locator("#build_btn")).to_have_text("Build the model")
    expect(page.locator("html")).to_have_attribute("lang", "en")


def bad_config(page):
    """A build the core refuses (an embedding not divisible by the heads): an error box."""
    set_number(page, "emb_dim", 70)
    set_number(page, "n_heads", 4)
    page.locator("#build_btn").click()


def test_a_chinese_page_titles_its_message_boxes_in_chinese(open_page, shots):
    page = open_page()
    to_chinese(page)
    bad_config(page)
    box = page.locator("[data-testid=toast-body]")
    expect(box.first).to_be_visible()
    [title] = page.evaluate(SHOWN_TITLES)
    assert title["kind"] == "error", title
    assert title["shown"] == zh("Error") != "Error", title
    assert title["width"] > 10, title          # the word takes its room
    assert "divisible" not in box.first.inner_text()   # (the message itself: Chinese too)
    shot(page, shots, "zh_error_toast")
    box.first.locator("[data-testid=toast-close]").click()
    expect(box).to_have_count(0)
    # back in English, Gradio's own title
    page.locator("#lang input[value=en]").check()
    expect(page.locator("#build_btn")).to_have_text("Build the model")
    page.locator("#build_btn").click()
    expect(box.first).to_be_visible()
    assert [t["shown"] for t in page.evaluate(SHOWN_TITLES)] == ["Error"]
    assert any("divisible by n_heads" in text for text in toasts(page, "error"))


def test_a_chinese_link_opens_on_its_tab_with_its_widgets_set(open_page, shots):
    page = open_page("?preset=teach-tiny&seed=7&tab=attention&layer=1&head=2&lang=zh")
    expect(page.get_by_role("tab", name=zh(ATTENTION), exact=True)).to_have_attribute(
        "aria-selected", "true", timeout=SLOW)
    expect(page.locator("#status")).to_contain_text("teach-tiny", timeout=SLOW)
    expect(page.locator("#att_plot g.hm image").first).to_be_attached(timeout=SLOW)
    expect(page.locator("#att_layer input[type=number]")).to_have_value("1")
    expect(page.locator("#att_head input")).to_have_value("2")
    shot(page, shots, "zh_link_attention")
    # the Build tab kept what the link set before its tab was chosen (nothing mounted again)
    page.locator("#tabs [role=tab]").first.click()
    expect(page.locator("#preset input")).to_have_value("teach-tiny")
    expect(page.locator("#seed input")).to_have_value("7")
    assert not toasts(page, "error"), toasts(page, "error")


def test_the_generate_tab_paints_each_step_once_its_elements_are_drawn(open_page):
    """#bars and #speed tell the page's script when Gradio draws them (the tab first shown):
    a generation's steps are painted in turn, the last one left on screen."""
    page = open_page()
    page.locator("#build_btn").click()
    expect(page.locator("#status")).to_contain_text("Model ready", timeout=SLOW)
    tab(page, GENERATE)
    set_slider(page, "max_new", 8)
    page.locator("#gen_btn").click()
    # (the speed line holds each step's; the one on screen is the last)
    expect(page.locator("#speed .nt-step").filter(visible=True)).to_contain_text(
        re.compile(r"^\s*8 tokens"), timeout=SLOW)
    painting = page.evaluate("() => { const r = gptExplorer.stepRoots || {}; "
                             "return [!!(r.bars && r.bars.isConnected), "
                             "!!(r.speed && r.speed.isConnected)]; }")
    assert painting == [True, True]
    expect(page.locator("#bars .nt-step").filter(visible=True)).to_have_count(1)
