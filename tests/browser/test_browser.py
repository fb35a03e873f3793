"""The app in a real browser: a lecturer's path through the five tabs.

One app, one Chromium page (tests/browser/conftest.py); the tests run in file order and share
the page, but each one makes sure of what it needs (a built model, a trace), so each can fail
on its own. Every wait is for something only the new result shows (see the Gradio notes:
leftovers of an earlier figure must not pass a check). Set GPT_EXPLORER_SCREENSHOTS=<folder>
to save a full-page screenshot of every tab once its content is drawn."""
import os
import re

import pytest

from explorer.book.config import PRESETS, count_parameters
from explorer.book.tokenizer import get_tokenizer
from explorer.app.session import DEFAULT_PROMPT

from page_widgets import expect, tab, choose, set_number

pytestmark = pytest.mark.browser

TAB_BUILD = "1 · Build"
TAB_INSIDE = "2 · Inside the forward pass"
TAB_ATTENTION = "3 · Attention"
TAB_ACTIVATIONS = "4 · Activation functions"
TAB_GENERATE = "5 · Generate"
MAX_NEW = 12
# ~60 GPT-2 tokens: a longer prompt for the screenshots of a real-size model
LONG_PROMPT = ("Every effort moves you forward, one step at a time. The transformer reads the "
               "prompt token by token; each block mixes information across positions with "
               "causal self-attention, then refines every position on its own with a small "
               "feed-forward network, and the shortcut connections carry the signal through.")


# ---------------------------------------------------------------------------------------------
# helpers
def shot(page, folder, name):
    """Full-page screenshot into the screenshot folder, if one is set."""
    if folder:
        page.wait_for_timeout(300)  # let plotly finish its transitions
        page.screenshot(path=os.path.join(folder, f"{name}.png"), full_page=True)


def status(page):
    return page.locator("#status")


def build(page, preset, seed=123, timeout=20_000):
    """Build ``preset`` with ``seed`` in the Build tab; waits for this build's own status line."""
    tab(page, TAB_BUILD)
    if page.locator("#preset input").input_value() != preset:
        choose(page, "preset", preset)
        expect(page.locator("#emb_dim input")).to_have_value(str(PRESETS[preset].emb_dim))
    set_number(page, "emb_dim", PRESETS[preset].emb_dim)
    set_number(page, "n_heads", PRESETS[preset].n_heads)
    set_number(page, "seed", seed)
    page.locator("#build_btn").click()
    expect(status(page)).to_contain_text(re.compile(
        rf"Model ready — {re.escape(preset)}, .* seed {seed},"), timeout=timeout)


def ensure_model(page):
    if "Model ready" not in status(page).inner_text():
        build(page, "teach-tiny")


def history_rows(page):
    """The body rows of the step table, newest first."""
    return page.locator("#history tbody tr")


def expect_history_rows(page, n):
    expect(history_rows(page)).to_have_count(n)


def trace(page, prompt):
    """Trace ``prompt`` in tab 2; waits for this trace's own summary line."""
    tab(page, TAB_INSIDE)
    n_tokens = len(get_tokenizer().encode(prompt))
    page.locator("#trace_prompt textarea").fill(prompt)
    page.locator("#trace_btn").click()
    expect(page.get_by_text(re.compile(rf"^{n_tokens} tokens · traced in"))).to_be_visible()
    return n_tokens


# ---------------------------------------------------------------------------------------------
def test_page_opens_on_the_build_tab(page):
    expect(page).to_have_title("GPT Explorer")
    expect(page.locator("#title h1")).to_have_text("GPT Explorer")
    expect(page.get_by_role("tab", name=TAB_BUILD, exact=True)).to_have_attribute(
        "aria-selected", "true")
    expect(page.locator("#build_btn")).to_be_visible()
    expect(status(page)).to_contain_text("No model yet")


def test_build_teach_tiny_draws_its_parameter_chart(page, shots):
    build(page, "teach-tiny")
    total = count_parameters(PRESETS["teach-tiny"]).total
    expect(status(page)).to_contain_text(f"{total:,} parameters")
    # the chart on the page before the build was the default preset's: wait for this one
    expect(page.locator("#params_plot [data-testid=plotly] .main-svg").first).to_be_visible()
    expect(page.locator("#params_plot .gtitle")).to_contain_text(f"({total:,})")
    expect(page.locator("#params_plot g.trace.bars .point").first).to_be_visible()
    shot(page, shots, "1_build_teach-tiny")


def test_trace_draws_statistics_and_token_chips(page, shots):
    ensure_model(page)
    n_tokens = trace(page, DEFAULT_PROMPT)
    assert n_tokens == 4
    expect(page.locator("#chips .chip")).to_have_count(n_tokens)
    expect(page.locator("#chips .chip").first).to_contain_text("Every")
    stats = page.locator("#stats_plot [data-testid=plotly]")
    expect(stats.locator(".main-svg").first).to_be_visible()
    expect(stats.locator("g.scatterlayer g.trace path.js-line").first).to_be_visible()
    assert stats.locator("g.scatterlayer g.trace").count() >= 2
    expect(page.locator("#hist_plot [data-testid=plotly] .main-svg").first).to_be_visible()
    expect(page.locator("#heat_plot [data-testid=plotly] .main-svg").first).to_be_visible()
    shot(page, shots, "2_inside_after_trace")


def test_attention_heatmap_is_drawn(page, shots):
    ensure_model(page)
    if not page.locator("#chips .chip").count():
        trace(page, DEFAULT_PROMPT)
    tab(page, TAB_ATTENTION)
    page.locator("#att_btn").click()
    att = page.locator("#att_plot [data-testid=plotly]")
    expect(att.locator(".gtitle")).to_contain_text("Attention in layer 0")
    heat = att.locator("g.hm image")
    expect(heat.first).to_be_attached()
    assert float(heat.first.get_attribute("width")) > 50  # a raster, not a zero-size stub
    expect(page.locator("#entropy_plot [data-testid=plotly] .main-svg").first).to_be_visible()
    expect(page.locator("#grid_plot [data-testid=plotly] .main-svg").first).to_be_visible()
    shot(page, shots, "3_attention")


def test_activation_functions_tab_draws_curves(page, shots):
    tab(page, TAB_ACTIVATIONS)
    act = page.locator("#act_plot [data-testid=plotly]")
    expect(act.locator("g.scatterlayer g.trace path.js-line").first).to_be_visible()
    shot(page, shots, "4_activation_functions")


BAR_SNAPSHOTS = """() => {
  // Record every distinct state of the bar chart's labels and of the output text while
  // tokens stream in (a MutationObserver for the plot, a 5 ms poll for the textarea value).
  window.__bars = []; window.__texts = [];
  const box = document.querySelector('#bars');
  const ta = document.querySelector('#gen_output textarea');
  const record = () => {
    const s = Array.from(box.querySelectorAll('.nt-bars div')).map(t => t.textContent).join('|');
    if (s && window.__bars[window.__bars.length - 1] !== s) window.__bars.push(s);
    if (window.__texts[window.__texts.length - 1] !== ta.value) window.__texts.push(ta.value);
  };
  window.__observer = new MutationObserver(record);
  window.__observer.observe(box, {subtree: true, childList: true, characterData: true,
                                  attributes: true});
  window.__poll = setInterval(record, 5);
}"""


def bar_labels(page):
    """The bars shown (the last update of a stream also holds its last steps, hidden)."""
    return "|".join(page.locator("#bars .nt-bars div").filter(visible=True).all_text_contents())


def test_generate_streams_text_bars_and_history(page, shots):
    ensure_model(page)
    tab(page, TAB_GENERATE)
    number = page.locator("#max_new input[type=number]")
    number.fill(str(MAX_NEW))
    number.press("Enter")
    expect(page.locator("#max_new input[type=range]")).to_have_value(str(MAX_NEW))
    prompt = page.locator("#gen_prompt textarea").input_value()
    page.evaluate(BAR_SNAPSHOTS)
    page.locator("#gen_btn").click()
    expect(page.locator("#speed")).to_contain_text(f"{MAX_NEW} tokens ·")
    expect_history_rows(page, MAX_NEW)
    page.evaluate("() => { clearInterval(window.__poll); window.__observer.disconnect(); }")
    snaps = page.evaluate("() => window.__bars")
    texts = page.evaluate("() => window.__texts")
    final = page.locator("#gen_output textarea").input_value()
    assert final.startswith(prompt) and len(final) > len(prompt)
    grown = [t for t in texts if t.startswith(prompt) and len(t) > len(prompt)]
    assert grown and grown[-1] == final
    print(f"streaming: {len(grown)} distinct texts, {len(set(snaps))} distinct bar charts seen")
    assert len(set(snaps)) >= 2, f"the probability bars never changed while streaming: {snaps}"
    assert "chosen" in snaps[-1]
    shown = page.locator("#bars .nt-step").filter(visible=True)
    expect(shown).to_have_count(1)                     # the last step's bars, alone
    expect(shown).to_have_attribute("data-step", str(MAX_NEW))
    shot(page, shots, "5_generate")


def test_next_token_adds_exactly_one_step(page):
    ensure_model(page)
    tab(page, TAB_GENERATE)
    before_rows = history_rows(page).count()
    before_text = page.locator("#gen_output textarea").input_value()
    before_bars = bar_labels(page)
    page.locator("#step_btn").click()
    n = before_rows + 1
    expect(page.locator("#speed")).to_contain_text(re.compile(rf"(^|\s){n} tokens ·"))
    expect_history_rows(page, n)
    expect(history_rows(page).first.locator("td").first).to_have_text(str(n))  # newest first
    after_text = page.locator("#gen_output textarea").input_value()
    if before_text:
        assert after_text.startswith(before_text) and len(after_text) > len(before_text)
    page.wait_for_timeout(300)  # nothing more arrives: still exactly one new row
    expect_history_rows(page, n)
    assert bar_labels(page) != before_bars


def test_bad_config_shows_a_message_and_the_page_recovers(page, shots):
    tab(page, TAB_BUILD)
    if page.locator("#preset input").input_value() != "teach-tiny":
        choose(page, "preset", "teach-tiny")
    set_number(page, "emb_dim", 70)
    set_number(page, "n_heads", 4)
    page.locator("#build_btn").click()
    toast = page.locator("[data-testid=toast-body]").filter(has_text="divisible by n_heads")
    expect(toast.first).to_be_visible()
    shot(page, shots, "6_error_toast")
    toast.first.locator("[data-testid=toast-close]").click()
    expect(toast).to_have_count(0)
    # the page still works: a new build (its own seed, so its own status line) succeeds
    build(page, "teach-tiny", seed=7)
    expect(page.locator("#params_plot .gtitle")).to_be_visible()


def test_gpt2_small_build_and_a_long_prompt(page, shots):
    """The real-size model: 163 M parameters, 12 layers and heads, a ~60-token prompt."""
    build(page, "gpt2-small", seed=123, timeout=60_000)
    expect(status(page)).to_contain_text("163,")
    expect(page.locator("#params_plot .gtitle")).to_contain_text("163")
    shot(page, shots, "7_build_gpt2-small")
    n_tokens = trace(page, LONG_PROMPT)
    assert 50 <= n_tokens <= 70
    expect(page.locator("#chips .chip")).to_have_count(n_tokens)
    shot(page, shots, "8_inside_gpt2-small_long_prompt")
    tab(page, TAB_ATTENTION)
    page.locator("#att_btn").click()
    att = page.locator("#att_plot [data-testid=plotly]")
    expect(att.locator(".gtitle")).to_contain_text("mean over 12 heads")
    expect(att.locator("g.hm image").first).to_be_attached()
    shot(page, shots, "9_attention_gpt2-small_long_prompt")
