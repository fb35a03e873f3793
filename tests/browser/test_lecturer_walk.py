"""A lecturer's first walk through the tabs, on a projector (1280x720).

Build a teaching preset, trace, change the attention layer and head, rebuild with another
preset (GPT-2 small), trace again, generate, and press "Next token" while the generation
streams. The walk fails on any error toast, on any uncaught exception in the page, and when
the next-token bars are not inside the viewport while tokens stream.

With GPT_EXPLORER_SCREENSHOTS=<folder> it saves the README's screenshots, one per tab, at
1280x720 (the viewport, what a projector shows): build, inside, attention, activations,
generate.png."""
import os
import re

import pytest

from explorer.app.inputs import MAX_NEW_TOKENS
from explorer.app.session import DEFAULT_PROMPT
from explorer.book.config import PRESETS, count_parameters
from explorer.book.tokenizer import get_tokenizer

from page_widgets import RECORD_TOASTS, choose, expect, set_slider, tab, toasts

pytestmark = pytest.mark.browser

PROJECTOR = {"width": 1280, "height": 720}
SLOW = 60_000   # builds and traces of GPT-2 small on a busy 2-core machine
FIRST, SECOND = "teach-small", "gpt2-small"


@pytest.fixture(scope="module")
def walk(browser, app_url):
    context = browser.new_context(viewport=PROJECTOR)
    context.set_default_timeout(30_000)
    expect.set_options(timeout=30_000)   # a busy machine: waits, never sleeps
    page = context.new_page()
    page.__errors = []
    page.on("pageerror", lambda exc: page.__errors.append(str(exc)))
    page.add_init_script(f"({RECORD_TOASTS})()")
    page.goto(app_url, wait_until="domcontentloaded")
    expect(page.locator("#build_btn")).to_be_visible()
    yield page
    expect.set_options(timeout=5_000)    # Playwright's default, for the other modules
    context.close()


def assert_no_errors(page):
    assert not page.__errors, f"uncaught exceptions in the page: {page.__errors}"
    errors = toasts(page, "error")
    assert not errors, f"error toasts: {errors}"


def shot(page, folder, name):
    if folder:
        page.evaluate("() => window.scrollTo(0, 0)")
        page.wait_for_timeout(300)  # let plotly finish its transitions
        page.screenshot(path=os.path.join(folder, f"{name}.png"))


def build(page, preset):
    tab(page, "1 · Build")
    choose(page, "preset", preset)
    expect(page.locator("#emb_dim input")).to_have_value(str(PRESETS[preset].emb_dim))
    # the diagram follows the preset at once, as a preview (item 6)
    expect(page.get_by_text(re.compile(rf"Preview of {re.escape(preset)}"))).to_be_visible()
    page.locator("#build_btn").click()
    total = count_parameters(PRESETS[preset]).total
    expect(page.locator("#status")).to_contain_text(
        re.compile(rf"Model ready — {re.escape(preset)}, {total:,} parameters"), timeout=SLOW)
    expect(page.locator("#params_plot .gtitle")).to_contain_text(f"({total:,})")


def trace(page, prompt=DEFAULT_PROMPT):
    tab(page, "2 · Inside the forward pass")
    n = len(get_tokenizer().encode(prompt))
    page.locator("#trace_prompt textarea").fill(prompt)
    page.locator("#trace_btn").click()
    expect(page.get_by_text(re.compile(rf"^{n} tokens · traced in"))).to_be_visible(
        timeout=SLOW)
    expect(page.locator("#chips .chip")).to_have_count(n)
    expect(page.locator("#stats_plot g.scatterlayer path.js-line").first).to_be_visible()


def show_attention(page, layer, head):
    """Move the layer slider and the head dropdown; each redraws the attention view."""
    tab(page, "3 · Attention")
    set_slider(page, "att_layer", layer)
    choose(page, "att_head", head)
    expect(page.locator("#att_plot .gtitle")).to_contain_text(f"Attention in layer {layer}",
                                                               timeout=SLOW)
    expect(page.locator("#att_plot .gtitle")).to_contain_text(f"head {head}")
    expect(page.locator("#att_plot g.hm image").first).to_be_attached()


def inside_viewport(page, selector):
    # (the last element the selector finds that is shown: a streamed step can be replaced
    # between finding it and measuring it, so both happen in one script)
    box = page.evaluate("""(selector) => {
        const shown = Array.from(document.querySelectorAll(selector))
            .filter(el => el.getClientRects().length);
        if (!shown.length) return null;
        const r = shown[shown.length - 1].getBoundingClientRect();
        return {x: r.x, y: r.y, width: r.width, height: r.height};
    }""", selector)
    return (box is not None and box["y"] >= 0 and box["x"] >= 0
            and box["y"] + box["height"] <= PROJECTOR["height"]
            and box["x"] + box["width"] <= PROJECTOR["width"]), box


# ---------------------------------------------------------------------------------------------
def test_a_lecturers_walk_through_the_tabs(walk, shots):
    page = walk
    build(page, FIRST)
    shot(page, shots, "build")
    assert_no_errors(page)

    trace(page)
    shot(page, shots, "inside")
    show_attention(page, layer=PRESETS[FIRST].n_layers - 1, head="1")
    shot(page, shots, "attention")
    assert_no_errors(page)

    # A rebuild resets the layer slider and the head: quietly, no "Trace a prompt first".
    build(page, SECOND)
    tab(page, "3 · Attention")
    expect(page.locator("#att_plot")).to_contain_text("Press Show attention")
    assert_no_errors(page)
    trace(page)
    show_attention(page, layer=5, head="7")
    assert_no_errors(page)

    tab(page, "4 · Activation functions")
    expect(page.locator("#act_plot g.scatterlayer path.js-line").first).to_be_visible()
    shot(page, shots, "activations")

    # Generate: the bars are on screen while tokens stream, at 1280x720.
    tab(page, "5 · Generate")
    set_slider(page, "max_new", MAX_NEW_TOKENS)
    page.locator("#gen_btn").click()
    expect(page.locator("#speed")).to_contain_text(re.compile(r"\d+ tokens ·"), timeout=SLOW)
    shot(page, shots, "generate")   # (a moment into the stream; only when saving screenshots)

    # "Next token" while the generation streams: refused with a message, or, when the page
    # runs behind the server and the click arrives after the stream ended there, answered with
    # exactly one more step. Never lost either way. Clicked at the first streamed update, so
    # that the click usually lands mid-stream (the refusal itself is tested without a browser).
    page.locator("#step_btn").click()
    page.wait_for_function("""([total]) => {
        const refused = window.__toasts.some(t => t.text.includes('still streaming'));
        const n = /(\\d+) tokens/.exec(document.querySelector('#speed').innerText);
        return refused || (n && +n[1] === total);
    }""", arg=[MAX_NEW_TOKENS + 1], timeout=SLOW)
    if not any("still streaming" in text for text in toasts(page, "warning")):
        expect(page.locator("#history tbody tr").first.locator("td").first).to_have_text(
            str(MAX_NEW_TOKENS + 1))

    expect(page.locator("#bars .nt-bars i").first).to_be_attached()
    # (while it streams, #bars holds the last steps, one shown at a time)
    seen, box = inside_viewport(page, "#bars .nt-bars")
    assert seen, f"the next-token bars are not inside the 1280x720 viewport: {box}"
    for selector in ("#gen_output textarea", "#stop_btn", "#step_btn"):
        seen, box = inside_viewport(page, selector)
        assert seen, f"{selector} is not inside the 1280x720 viewport while streaming: {box}"

    page.locator("#stop_btn").click()
    # Stopped: the step table shows every step the speed line counts
    rows = page.locator("#history tbody tr")
    # (stopped, or ended before the click landed; a stream's own first steps match too)
    page.wait_for_function("""([total]) => {
        const speed = document.querySelector('#speed').innerText;
        const n = /(\\d+) tokens/.exec(speed);
        return n && (speed.includes('stopped') || +n[1] >= total)
            && document.querySelectorAll('#history tbody tr').length === +n[1]
            && !document.querySelector('#history').innerText.includes('earlier steps');
    }""", arg=[MAX_NEW_TOKENS], timeout=SLOW)
    before = rows.count()
    # After Stop, "Next token" goes on from what the page shows: exactly one more step.
    page.locator("#step_btn").click()
    expect(rows).to_have_count(before + 1, timeout=SLOW)
    expect(rows.first.locator("td").first).to_have_text(str(before + 1))
    assert_no_errors(page)
