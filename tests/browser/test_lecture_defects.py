"""The 19 defects a lecturer found at 1280x720 (a projector), in English and 中文, with lecture
mode on and off: one test each, named after the behaviour that must hold (the defect's number
is in its docstring).

Each test opens a page of its own (a session of its own: no leftovers of another test) at
1280x720 and drives it as the lecturer did. Layout defects are measured with bounding boxes,
and a screenshot of what was measured is saved (GPT_EXPLORER_SCREENSHOTS=<folder>/defects, or
a temporary folder; its path is printed) so that a person can look at it.

Two new elem_ids are assumed: ``gen_clear_btn`` (clears the generated text, defect 6) and
``share_close_btn`` (closes the share-link box, defect 8)."""
import os
import re
import socket
import time

import pytest

from zh_text import zh as _zh
from explorer.app.shared import DEFAULT_PRESET
from explorer.book.config import PRESETS, count_parameters
from explorer.book.tokenizer import get_tokenizer

from page_widgets import (RECORD_TOASTS, PlaywrightError, choose, expect, set_number,
                          set_slider, tab, toasts)

pytestmark = pytest.mark.browser

PROJECTOR = {"width": 1280, "height": 720}
SLOW = 60_000          # a build or trace of GPT-2 small on a busy 2-core machine
SHORT = 8_000          # for what is there at once, or never (a defect): fail fast
TRAIN_WAIT_S = 180     # a teaching model's short training run, on a busy machine
TABS = ("1 · Build", "2 · Inside the forward pass", "3 · Attention", "4 · Activation functions",
        "5 · Generate", "6 · Train", "7 · Knock out", "8 · Patching")
BUILD, INSIDE, ATTENTION, ACTIVATIONS, GENERATE, TRAIN, KNOCK_OUT, PATCHING = TABS
PROMPT = "Every effort moves you"


# ---------------------------------------------------------------------------------------------
# fixtures
@pytest.fixture
def open_page(browser, app_url):
    """A factory: a fresh page at 1280x720 (``query``: a link's "?..."; ``locale``: the
    browser's language; ``init``: a script run before the page's own), its toasts recorded
    and its uncaught errors in ``page.errors``."""
    contexts = []

    def open_(query="", locale="en-US", init=None):
        context = browser.new_context(viewport=PROJECTOR, locale=locale)
        contexts.append(context)
        context.set_default_timeout(30_000)
        page = context.new_page()
        page.errors = []
        page.on("pageerror", lambda error: page.errors.append(str(error)))
        page.add_init_script(f"({RECORD_TOASTS})()")
        if init:   # a script of the test's, run before the page's own
            page.add_init_script(f"({init})()")
        page.goto(app_url + query, wait_until="domcontentloaded")   # never "networkidle"
        expect(page.locator("#build_btn")).to_be_visible()
        return page

    yield open_
    for context in contexts:
        context.close()


@pytest.fixture(scope="module")
def shot_dir(tmp_path_factory):
    folder = os.environ.get("GPT_EXPLORER_SCREENSHOTS")
    if folder:
        folder = os.path.join(folder, "defects")
        os.makedirs(folder, exist_ok=True)
        return folder
    return str(tmp_path_factory.mktemp("defect-shots"))


def shot(page, folder, name, selector=None):
    """A screenshot of ``selector`` (scrolled into view), or of the viewport."""
    path = os.path.join(folder, f"{name}.png")
    page.wait_for_timeout(300)   # plotly's transitions
    if selector:
        page.locator(selector).first.scroll_into_view_if_needed()
        page.locator(selector).first.screenshot(path=path)
    else:
        page.screenshot(path=path)
    print(f"screenshot: {path}")
    return path


# ---------------------------------------------------------------------------------------------
# page helpers
def zh(text):
    return _zh(text)


def lecture(page, on):
    page.locator("#lecture input").set_checked(on)
    if on:
        expect(page.locator("body.lecture")).to_be_attached()
    else:
        expect(page.locator("body.lecture")).not_to_be_attached()


def build(page, preset, status=None, timeout=SLOW):
    """Build ``preset`` from the Build tab; waits for this build's own status line."""
    tab(page, BUILD)
    if page.locator("#preset input").input_value() != preset:
        choose(page, "preset", preset)
        expect(page.locator("#emb_dim input")).to_have_value(str(PRESETS[preset].emb_dim))
    page.locator("#build_btn").click()
    expect(page.locator("#status")).to_contain_text(
        status or re.compile(rf"Model ready — {re.escape(preset)},"), timeout=timeout)


def trace(page, prompt=PROMPT):
    tab(page, INSIDE)
    n = len(get_tokenizer().encode(prompt))
    page.locator("#trace_prompt textarea").fill(prompt)
    page.locator("#trace_btn").click()
    expect(page.get_by_text(re.compile(rf"^{n} tokens · traced in"))).to_be_visible(
        timeout=SLOW)
    expect(page.locator("#chips .chip")).to_have_count(n)


def show_attention(page):
    tab(page, ATTENTION)
    page.locator("#att_btn").click()
    expect(page.locator("#att_plot .gtitle")).to_contain_text("Attention in layer",
                                                              timeout=SLOW)
    expect(page.locator("#att_plot g.hm image").first).to_be_attached()


def train(page, steps, variants=None, wait=True):
    """Train teach-tiny for ``steps`` steps in the Train tab (``variants``: the two or three
    to keep checked; default: the page's default three); waits for "Finished" if ``wait``."""
    tab(page, TRAIN)
    if variants:
        boxes = page.locator("#train_variants")
        for name in ("pre-LN (book)", "post-LN", "no shortcut"):
            boxes.get_by_label(name, exact=True).set_checked(name in variants)
    choose(page, "train_preset", "teach-tiny")
    set_number(page, "train_steps", steps)
    page.locator("#train_btn").click()
    if wait:
        expect(page.locator("#train_progress")).to_contain_text(
            "Finished", timeout=TRAIN_WAIT_S * 1000)


def visible(page, text):
    """The elements that show ``text`` (a regex or substring) and are visible now."""
    return page.get_by_text(text).filter(visible=True)


# ---------------------------------------------------------------------------------------------
# measuring
BOXES_JS = """([selector, inner]) => {
  const box = (e) => { const r = e.getBoundingClientRect();
                       return {x: r.left, y: r.top, r: r.right, b: r.bottom, w: r.width,
                               h: r.height}; };
  const root = document.querySelector(selector);
  return [...root.querySelectorAll(inner)].filter((e) => e.getBoundingClientRect().width > 0)
    .map((e) => ({...box(e), cls: e.getAttribute('class') || '',
                  text: (e.textContent || '').trim().slice(0, 60)}));
}"""


def boxes(page, selector, inner):
    """The boxes (x, y, r, b, w, h, cls, text) of the visible ``inner`` elements of
    ``selector``, in page pixels."""
    return page.evaluate(BOXES_JS, [selector, inner])


def overlap(a, b, slack=1.5):
    """Whether two boxes share more than ``slack`` px in both directions."""
    return (min(a["r"], b["r"]) - max(a["x"], b["x"]) > slack
            and min(a["b"], b["b"]) - max(a["y"], b["y"]) > slack)


def inside(inner, outer, slack=1.5):
    return (inner["x"] >= outer["x"] - slack and inner["r"] <= outer["r"] + slack
            and inner["y"] >= outer["y"] - slack and inner["b"] <= outer["b"] + slack)


def svg_box(page, elem_id):
    found = boxes(page, f"#{elem_id}", ".js-plotly-plot .main-svg")
    return found[0] if found else None


def overlapping_titles(page, elem_id, with_="gtitle"):
    """Pairs of a figure's titles (plot title, subtitle, axis and colour-bar titles) whose
    text boxes overlap; with ``with_`` (a class), only the pairs with that title."""
    titles = [t for t in boxes(page, f"#{elem_id}", "svg text")
              if "title" in t["cls"] and t["text"]]
    return [(a["text"], b["text"]) for i, a in enumerate(titles) for b in titles[i + 1:]
            if overlap(a, b) and (not with_ or with_ in a["cls"].split() + b["cls"].split())]


def title_px(page, elem_id):
    """The font size of a figure's title, in px (0: no title drawn)."""
    return page.evaluate("""(sel) => { const t = document.querySelector(sel + ' .gtitle');
        return t ? parseFloat(getComputedStyle(t).fontSize) : 0; }""", f"#{elem_id}")


def min_font_px(page, selector):
    """The smallest computed font size of any visible text inside ``selector``, and where."""
    return page.evaluate("""(sel) => {
      const root = document.querySelector(sel);
      const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
      let least = [Infinity, ''], node;
      while ((node = walker.nextNode())) {
        const text = node.textContent.trim(), e = node.parentElement;
        if (!text || !e.getBoundingClientRect().width) continue;
        const px = parseFloat(getComputedStyle(e).fontSize);
        if (px < least[0]) least = [px, e.tagName.toLowerCase() + ': ' + text.slice(0, 30)];
      }
      return least;
    }""", selector)


# =============================================================================================
def test_lecture_mode_training_runs_to_the_last_step(open_page):
    """Defect 1: with lecture mode on, a teach-tiny run stopped at step 2 of 30 ("Something
    went wrong with axis scaling", twice) and the tabs stopped answering clicks. The run must
    reach its last step, with no error in the page, and the tabs must still switch."""
    page = open_page()
    lecture(page, True)
    train(page, 30, wait=False)
    progress = page.locator("#train_progress")
    deadline = time.monotonic() + TRAIN_WAIT_S
    while "Finished" not in progress.inner_text():
        assert not page.errors, (f"the page threw {page.errors} while training in lecture "
                                 f"mode; progress: {progress.inner_text().strip()!r}")
        assert time.monotonic() < deadline, f"no end: {progress.inner_text().strip()!r}"
        page.wait_for_timeout(500)
    expect(progress).to_contain_text("step 30 of 30")
    page.get_by_role("tab", name=BUILD, exact=True).click()
    expect(page.get_by_role("tab", name=BUILD, exact=True)).to_have_attribute(
        "aria-selected", "true", timeout=SHORT)
    assert not page.errors, f"uncaught errors in the page: {page.errors}"


def test_a_smaller_model_brings_every_layer_picker_within_its_layers(open_page):
    """Defect 2: layer 9 and 10 chosen on GPT-2 small, then teach-tiny (2 layers) built: the
    sliders kept 9 and 10 (maximum 1), a toast said "Value 10 is greater than maximum value 1"
    and Show attention gave three bare "Error" badges."""
    page = open_page()
    build(page, "gpt2-small")
    tab(page, ATTENTION)
    set_slider(page, "att_layer", 9)
    tab(page, ACTIVATIONS)
    set_slider(page, "act_layer", 10)
    build(page, "teach-tiny")
    last = PRESETS["teach-tiny"].n_layers - 1
    in_range = re.compile(rf"^[0-{last}]$")
    for elem_id, tab_name in (("act_layer", ACTIVATIONS), ("att_layer", ATTENTION)):
        tab(page, tab_name)
        expect(page.locator(f"#{elem_id} input[type=number]"),
               f"#{elem_id} after building a {last + 1}-layer model").to_have_value(
            in_range, timeout=SHORT)
    trace(page)
    expect(page.locator("#inside_layer input[type=number]")).to_have_value(in_range)
    show_attention(page)
    bad = [t for t in toasts(page) if "greater than maximum" in t]
    assert not bad, f"toasts after the rebuild: {bad}"
    expect(page.locator("#att_plot")).not_to_contain_text("Error")


def test_figures_redrawn_in_a_hidden_tab_fill_their_tab(open_page, shot_dir):
    """Defect 3: figures redrawn while their tab was hidden (after the lecture-mode or the
    language toggle) came out 700 px wide in a 1216 px tab (the attention title over its
    subtitle), and the training gradient plot blank; revisiting the tab did not fix them."""
    page = open_page()
    build(page, "teach-tiny")
    trace(page)
    show_attention(page)
    tab(page, ACTIVATIONS)
    expect(page.locator("#act_plot g.scatterlayer path.js-line").first).to_be_visible()
    train(page, 4, variants=("pre-LN (book)", "no shortcut"))
    expect(page.locator("#train_grad_plot g.hm image").first).to_be_attached()
    figures = {"act_plot": ACTIVATIONS, "att_plot": ATTENTION, "train_grad_plot": TRAIN}
    drawn = {elem_id: page.locator(f"#{elem_id} .gtitle").text_content() for elem_id in figures}
    sizes = {}
    for elem_id, name in figures.items():
        tab(page, name)
        sizes[elem_id] = title_px(page, elem_id)

    def check(round_name, tab_name, redrawn):
        problems = []
        for elem_id, name in figures.items():
            tab(page, tab_name(name))
            try:   # wait for this figure's redraw (a larger title, or one in Chinese)
                page.wait_for_function(redrawn, arg=[f"#{elem_id}", sizes[elem_id],
                                                     drawn[elem_id]], timeout=15_000)
            except PlaywrightError:
                pass   # measured as it is
            page.wait_for_timeout(500)
            shot(page, shot_dir, f"d3_{round_name}_{elem_id}", f"#{elem_id}")
            container = boxes(page, "body", f"#{elem_id}")[0]
            svg = svg_box(page, elem_id)
            marks = page.locator(f"#{elem_id} g.hm image, #{elem_id} path.js-line").count()
            if svg is None or svg["h"] < 100 or marks == 0:
                problems.append(f"#{elem_id} is blank (svg {svg}, {marks} heat maps/lines)")
                continue
            if svg["w"] < 0.95 * container["w"]:
                problems.append(f"#{elem_id} is {svg['w']:.0f} px wide in a "
                                f"{container['w']:.0f} px tab")
            titles = overlapping_titles(page, elem_id)   # the plot title and another
            if titles:
                problems.append(f"#{elem_id}: titles overlap: {titles}")
        assert not problems, f"after the {round_name} toggle in another tab: {problems}"

    tab(page, BUILD)
    lecture(page, True)
    check("lecture-mode", lambda name: name, """([sel, px]) => {
        const t = document.querySelector(sel + ' .gtitle');
        return t && parseFloat(getComputedStyle(t).fontSize) > px; }""")
    tab(page, BUILD)
    page.locator("#lang input[value=zh]").check()
    expect(page.locator("#build_btn")).to_have_text(zh("Build the model"))
    check("language", zh, """([sel, px, text]) => {
        const t = document.querySelector(sel + ' .gtitle');
        return t && t.textContent !== text; }""")


def test_the_language_toggle_translates_the_tabs_not_opened_yet(open_page):
    """Defect 4: on a fresh page, 中文 chosen on the Build tab: the tabs never opened kept
    their English labels."""
    page = open_page()
    page.locator("#lang input[value=zh]").check()
    expect(page.locator("#build_btn")).to_have_text(zh("Build the model"))
    expect(page.get_by_role("tab")).to_have_text([zh(name) for name in TABS], timeout=SHORT)
    tab(page, zh(TRAIN))
    expect(page.locator("#train_btn")).to_have_text(zh("Train"))
    tab(page, zh(GENERATE))
    expect(page.locator("#gen_btn")).to_have_text(zh("Generate"))
    expect(page.locator("#step_btn")).to_have_text(zh("Next token"))


def test_lecture_mode_from_the_start_draws_every_figure_in_full(open_page, shot_dir):
    """Defect 5: lecture mode on from the start: the parameter chart's title and its top bar's
    label were clipped at the figure's right edge, the attention heatmap squashed to ~110 px,
    and the loss legend drawn over the loss plot's axis."""
    page = open_page()
    lecture(page, True)
    problems = []

    build(page, "teach-tiny")
    shot(page, shot_dir, "d5_params_plot", "#params_plot")
    svg = svg_box(page, "params_plot")
    for text in boxes(page, "#params_plot", "text.gtitle, text.bartext"):
        if not inside(text, svg):
            problems.append(f"params_plot: {text['text']!r} is clipped (text {text['x']:.0f}"
                            f"..{text['r']:.0f} px, figure {svg['x']:.0f}..{svg['r']:.0f})")

    trace(page)
    expect(page.locator("#inside_weights")).to_be_hidden()   # (class weights-note: it steps
    show_attention(page)                                      # aside in lecture mode)
    expect(page.locator("#attention_weights")).to_be_hidden()
    shot(page, shot_dir, "d5_att_plot", "#att_plot")
    heat = boxes(page, "#att_plot", "g.hm image")[0]
    if heat["h"] < 250:
        problems.append(f"att_plot: the heatmap is {heat['h']:.0f} px high (< 250)")
    titles = overlapping_titles(page, "att_plot", with_=None)   # (the squash's other sign)
    if titles:
        problems.append(f"att_plot: titles overlap: {titles}")

    train(page, 6, variants=("pre-LN (book)", "no shortcut"), wait=False)
    # measured as soon as the curves have points (what it shows while it trains)
    page.wait_for_function("""() => document.querySelectorAll(
        '#train_loss_plot g.scatterlayer g.trace path.point').length >= 2""",
                           timeout=TRAIN_WAIT_S * 1000)
    shot(page, shot_dir, "d5_train_loss_plot", "#train_loss_plot")
    legend = boxes(page, "#train_loss_plot", "g.legend")
    plot = boxes(page, "#train_loss_plot", "rect.nsewdrag, g.xtick text, text.xtitle")
    covered = [p.get("text") or p["cls"] for p in plot if legend and overlap(legend[0], p)]
    if covered:
        problems.append(f"train_loss_plot: the legend covers the plot: {covered}")
    assert not problems, problems


def test_next_token_starts_from_a_new_prompt_and_the_text_can_be_cleared(open_page):
    """Defect 6: after a generation, a new prompt typed and "Next token" pressed: the old text
    went on and the new prompt was ignored; and nothing cleared the text."""
    page = open_page()
    build(page, "teach-tiny")
    tab(page, GENERATE)
    set_slider(page, "max_new", 3)
    page.locator("#gen_prompt textarea").fill(PROMPT)
    page.locator("#gen_btn").click()
    expect(page.locator("#speed")).to_contain_text("3 tokens ·")
    output = page.locator("#gen_output textarea")
    expect(output).to_have_value(re.compile("^" + re.escape(PROMPT) + "."))
    new_prompt = "The cat sat on the mat"
    page.locator("#gen_prompt textarea").fill(new_prompt)
    page.locator("#step_btn").click()
    expect(output).to_have_value(re.compile("^" + re.escape(new_prompt) + "."),
                                 timeout=SHORT)
    page.locator("#gen_clear_btn").click(timeout=SHORT)
    expect(output).to_have_value("", timeout=SHORT)


def _hub_reachable():
    try:
        socket.create_connection(("huggingface.co", 443), timeout=3).close()
        return True
    except OSError:
        return False


# The elements that show the word "Error" itself: visible, and not of no size.
SHOWN_ENGLISH_ERRORS = """() => [...document.querySelectorAll('body *')].filter((e) =>
    [...e.childNodes].some((n) => n.nodeType === Node.TEXT_NODE && n.data.trim() === 'Error')
    && e.getClientRects().length > 0 && parseFloat(getComputedStyle(e).fontSize) > 0)
  .map((e) => e.outerHTML.slice(0, 120))"""


def _gpt2_in_cache():
    from huggingface_hub import constants
    return os.path.isdir(os.path.join(constants.HF_HUB_CACHE, "models--openai-community--gpt2"))


def test_offline_pretrained_gpt2_answers_fast_and_its_advice_stays(open_page):
    """Defect 7: without a network, "pretrained GPT-2" showed ~23.5 s of "...cache – 0.0 %"
    while the hub was retried; then the advice (a toast) faded after ~10 s, leaving a red
    "Error" badge; in Chinese the toast's title stayed "Error". The advice must come within a
    few seconds and stay on the page."""
    if _gpt2_in_cache():
        pytest.skip("GPT-2 small is in this machine's Hugging Face cache: it would load")
    if _hub_reachable():
        pytest.skip("the Hugging Face hub is reachable: this test needs a machine offline")
    # the advice names the command that fills the cache (the progress line names the cache)
    advice = re.compile(r"hf download|huggingface-cli download")
    for locale in ("en-US", "zh-CN"):
        page = open_page(locale=locale)
        page.locator("#weights input[value=pretrained]").check()
        page.locator("#build_btn").click()
        started = time.monotonic()
        try:
            expect(visible(page, advice).first).to_be_visible(timeout=8_000)
        except AssertionError:
            raise AssertionError(
                f"[{locale}] no advice on the page {time.monotonic() - started:.1f} s after "
                f"the click; status: {page.locator('#status').inner_text().strip()!r}") from None
        if locale == "en-US":   # (once is enough: 15 s)
            page.wait_for_timeout(15_000)
            assert visible(page, advice).count(), (
                f"[{locale}] the advice left the page within 15 s; status: "
                f"{page.locator('#status').inner_text().strip()!r}")
        else:   # (the box's title is Gradio's "Error" at no size, the style sheet's word shown)
            english = page.evaluate(SHOWN_ENGLISH_ERRORS)
            assert not english, f"an English 'Error' in the Chinese page: {english}"


def test_the_share_box_can_be_closed_and_never_shows_an_old_link(open_page):
    """Defect 8: the share-link box (~100-140 px) stayed on every tab, could not be closed,
    pushed the lecture-mode figures down, and showed the old link after a rebuild."""
    page = open_page()
    build(page, "teach-tiny")
    page.locator("#share_btn").click()
    row = page.locator("#share_row")
    link = page.locator("#share_link textarea, #share_link input").first
    expect(row).to_be_visible()
    expect(link).to_have_value(re.compile(r"\?preset=teach-tiny"))
    tab(page, INSIDE)
    page.wait_for_timeout(500)   # a box that goes with the tab has gone
    if row.is_visible():
        close = page.locator("#share_close_btn")
        expect(close, "the share box stays on every tab: it needs a close button").to_be_visible(
            timeout=SHORT)
        close.click()
        expect(row).to_be_hidden(timeout=SHORT)
    tab(page, BUILD)
    page.locator("#share_btn").click()
    expect(row).to_be_visible()
    build(page, "teach-small")
    try:
        page.wait_for_function("""() => {
            const row = document.querySelector('#share_row');
            const box = document.querySelector('#share_link textarea, #share_link input');
            const shown = row && row.getBoundingClientRect().height > 0;
            return !shown || !box || !box.value.includes('preset=teach-tiny'); }""",
                               timeout=SHORT)
    except PlaywrightError:
        pytest.fail(f"after building teach-small the share box still shows the old link: "
                    f"{link.input_value()}")


def test_a_link_to_the_attention_tab_draws_its_layer_and_head(open_page):
    """Defect 9: a link with tab=attention (and layer=1, head=2) built the model but drew
    nothing, and its layer and head were ignored."""
    page = open_page("?preset=teach-tiny&tab=attention&layer=1&head=2")
    expect(page.locator("#status")).to_contain_text("Model ready — teach-tiny", timeout=SLOW)
    expect(page.get_by_role("tab", name=ATTENTION, exact=True)).to_have_attribute(
        "aria-selected", "true")
    expect(page.locator("#att_layer input[type=number]")).to_have_value("1", timeout=SHORT)
    expect(page.locator("#att_head input")).to_have_value("2")
    expect(page.locator("#att_plot .gtitle")).to_contain_text("Attention in layer 1",
                                                              timeout=SLOW)
    expect(page.locator("#att_plot .gtitle")).to_contain_text("head 2")
    expect(page.locator("#att_plot g.hm image").first).to_be_attached()


def test_use_this_model_shows_the_trained_models_config_on_the_build_tab(open_page):
    """Defect 10: after GPT-2 small was built, a teach-tiny variant trained and "Use this
    model" pressed, the Build form still showed 768 and 12 heads beside the trained model's
    diagram."""
    page = open_page()
    build(page, "gpt2-small")
    train(page, 3, variants=("pre-LN (book)", "no shortcut"))
    choose(page, "train_choice", "pre-LN (book)")
    page.locator("#train_use_btn").click()
    expect(page.locator("#status")).to_contain_text("trained 3 steps")
    tab(page, BUILD)
    expect(page.locator("#arch")).to_contain_text("2 × TransformerBlock")
    tiny = PRESETS["teach-tiny"]
    for knob in ("emb_dim", "n_heads", "n_layers"):
        expect(page.locator(f"#{knob} input"), f"#{knob} beside the trained model").to_have_value(
            str(getattr(tiny, knob)), timeout=SHORT)


def test_a_new_model_clears_the_old_export(open_page):
    """Defect 11: the export's note and download links stayed after other models were
    built."""
    page = open_page()
    build(page, "teach-tiny")
    page.get_by_text("Export this model (model.safetensors + config.json)").click()
    page.locator("#export_btn").click()
    expect(page.locator("#export_note")).to_contain_text("Exported", timeout=SLOW)
    expect(page.locator("#export_files a[href$='/config.json']")).to_have_count(1)
    build(page, "teach-small")
    expect(page.locator("#export_note")).not_to_contain_text("Exported", timeout=SHORT)
    expect(page.locator("#export_files a[href]")).to_have_count(0)


def test_every_file_save_pretrained_writes_can_be_uploaded(open_page, tmp_path):
    """Defect 12: uploading all that transformers' save_pretrained writes (model.safetensors,
    config.json, generation_config.json) was refused because of generation_config.json."""
    transformers = pytest.importorskip("transformers")
    cfg = transformers.GPT2Config(n_layer=2, n_head=2, n_embd=64, vocab_size=50257,
                                  n_positions=64)
    transformers.GPT2LMHeadModel(cfg).save_pretrained(tmp_path)
    files = sorted(p.name for p in tmp_path.iterdir())
    assert "generation_config.json" in files, files   # what the lecturer uploaded
    page = open_page()
    page.locator("#weights input[value=file]").check()
    page.locator("#weights_upload input[type=file]").set_input_files(
        [str(tmp_path / name) for name in files])
    for name in files:
        expect(page.locator(f"#weights_upload a[href$='/{name}']")).to_have_count(1)
    page.locator("#build_btn").click()
    page.wait_for_function("""() => /Model ready/.test(document.querySelector('#status')
        .innerText) || window.__toasts.some((t) => t.kind === 'error')""", timeout=SLOW)
    assert not toasts(page, "error"), f"the upload of {files} was refused: {toasts(page, 'error')}"
    expect(page.locator("#status")).to_contain_text("weights: from file model.safetensors")


def test_inside_tab_charts_a_model_without_layernorm(open_page):
    """Defect 13: with norm_placement "none", the Inside tab's main chart read "None of these
    probe points was recorded"."""
    page = open_page()
    tab(page, BUILD)
    choose(page, "preset", "teach-tiny")
    expect(page.locator("#emb_dim input")).to_have_value(str(PRESETS["teach-tiny"].emb_dim))
    page.locator("#norm_placement input[value=none]").check()   # after the preset's values
    expect(page.locator("#norm_placement input[value=none]")).to_be_checked()
    build(page, "teach-tiny", status="Model ready — custom config")
    trace(page)
    stats = page.locator("#stats_plot")
    expect(stats).not_to_contain_text("None of these probe points was recorded",
                                      timeout=SHORT)
    expect(stats.locator("g.scatterlayer path.js-line").first).to_be_visible()


def test_chinese_build_tab_shows_no_markdown_asterisks(open_page):
    """Defect 14: the Chinese notes showed raw Markdown ("**比较两个模型：**" in the pin
    note)."""
    page = open_page(locale="zh-CN")
    expect(page.locator("#build_btn")).to_have_text(zh("Build the model"))
    page.locator("#build_btn").click()   # the status line and the model's notes too
    total = count_parameters(PRESETS[DEFAULT_PRESET]).total
    expect(page.locator("#params_plot .gtitle")).to_contain_text(f"{total:,}", timeout=SLOW)
    text = page.evaluate("() => document.body.innerText")
    raw = [line.strip() for line in text.splitlines() if "**" in line]
    assert not raw, f"raw Markdown in the Chinese Build tab: {raw}"


def test_parameter_table_shows_every_column_with_a_tied_head(open_page, shot_dir):
    """Defect 15: with tie_weights on, the parameter table's "share" column was pushed out of
    its box by the long "0 (tied: ...)" cell."""
    page = open_page()
    tab(page, BUILD)
    choose(page, "preset", "teach-tiny")
    expect(page.locator("#emb_dim input")).to_have_value(str(PRESETS["teach-tiny"].emb_dim))
    page.locator("#tie_weights input").check()   # after the preset's values
    expect(page.locator("#tie_weights input")).to_be_checked()
    build(page, "teach-tiny", status="Model ready — custom config")
    expect(page.locator("#params_table")).to_contain_text("tied")
    shot(page, shot_dir, "d15_params_table", "#params_table")
    table = boxes(page, "body", "#params_table")[0]
    headers = boxes(page, "#params_table", "th")
    names = [h["text"].split()[0] for h in headers]   # (a header's text ends with its menu)
    assert set(names) >= {"component", "parameters", "share"}, names
    out = [f"{h['text'].split()[0]} ({h['x']:.0f}..{h['r']:.0f} px)" for h in headers
           if not inside(h, table)]
    assert not out, (f"columns outside the table's box ({table['x']:.0f}..{table['r']:.0f} "
                     f"px): {out}")


def test_attention_colour_scale_starts_at_zero(open_page):
    """Defect 16: the attention colour scale ran from the smallest weight (~0.2) to 1, so a
    uniform 0.25 looked black. It must be anchored at 0."""
    page = open_page()
    build(page, "teach-tiny")
    trace(page)
    show_attention(page)
    # What plotly drew with (its full data: the range it computed, not only the one given),
    # for each heatmap with a colour bar (not the grey mask): its own range, or its shared
    # colour axis's.
    lows = page.evaluate("""() => { const gd = document.querySelector('#att_plot .js-plotly-plot');
        return gd._fullData.filter((t) => t.type === 'heatmap').map((t) => {
          const axis = t.coloraxis ? gd._fullLayout[t.coloraxis] : null;
          return axis ? (axis.showscale ? axis.cmin : null) : (t.showscale ? t.zmin : null);
        }).filter((low) => low !== null); }""")
    assert lows and all(low == 0 for low in lows), \
        f"the attention colour scale starts at {lows}, not 0"
    ticks = [float(t["text"].replace("−", "-")) for t in
             boxes(page, "#att_plot", "g.colorbar text")
             if re.fullmatch(r"[−\-]?[\d.]+", t["text"])]
    assert ticks and min(ticks) == 0, f"the colour bar's ticks: {ticks}"


def test_shortcut_demo_bar_labels_do_not_overlap(open_page, shot_dir):
    """Defect 17: in the 4.4 demo (Inside tab, "Why shortcut connections?") the bar labels
    were cut by the neighbouring bar."""
    page = open_page()
    build(page, "teach-tiny")
    tab(page, INSIDE)
    page.get_by_text("Why shortcut connections? (book 4.4)").click()
    page.locator("#grad_btn").click()
    expect(page.locator("#book_grad_plot g.point text").first).to_be_attached(timeout=SLOW)
    shot(page, shot_dir, "d17_book_grad_plot", "#book_grad_plot")
    area = boxes(page, "#book_grad_plot", "rect.nsewdrag")[0]
    points = page.evaluate("""() => [...document.querySelectorAll('#book_grad_plot g.point')]
        .map((p) => { const box = (e) => { const r = e.getBoundingClientRect();
                        return {x: r.left, y: r.top, r: r.right, b: r.bottom}; };
                      const bar = p.querySelector('path'), text = p.querySelector('text');
                      return {bar: bar && box(bar), label: text && box(text),
                              text: text ? text.textContent : ''}; })""")
    for p in points:   # a log axis: bars run far below the plot; keep the part drawn
        p["bar"] = {**p["bar"], "y": max(p["bar"]["y"], area["y"]),
                    "b": min(p["bar"]["b"], area["b"])}
    clashes = []
    for i, p in enumerate(points):
        if not p["label"]:
            continue
        for j, q in enumerate(points):
            if j != i and overlap(p["label"], q["bar"]):
                clashes.append(f"label {p['text']!r} over the bar of {q['text']!r}")
            if j > i and q["label"] and overlap(p["label"], q["label"]):
                clashes.append(f"label {p['text']!r} over label {q['text']!r}")
    assert not clashes, clashes


def test_walk_card_table_is_readable_on_a_projector(open_page, shot_dir):
    """Defect 18: the diagram-walk card's table was set in 11-13 px type, too small for a
    projector: at least 14 px, and 16 px in lecture mode."""
    page = open_page()
    build(page, "teach-tiny")
    card = page.locator("#walk_card")
    for on, least in ((False, 14), (True, 16)):
        lecture(page, on)
        page.locator('#arch [data-stage="feed_forward"]').click()
        expect(card).to_contain_text("Feed-forward network")
        expect(card.locator("td").first).to_be_visible()
        page.wait_for_timeout(300)   # the lecture style applied
        shot(page, shot_dir, f"d18_walk_card_lecture_{on}", "#walk_card")
        px, where = min_font_px(page, "#walk_card table")
        assert px >= least, (f"lecture mode {'on' if on else 'off'}: the walk card's table has "
                             f"{px:g} px text ({where}), under {least} px")


# The page's queue stream, re-timed as a faster machine (or a busy network) delivers it: while
# window.__tap.pairing, the server's generation steps reach the page three at a time (the first
# held until the third comes, at most 200 ms); every other message at once. Of a 20-step
# stream, the last three are steps 19, 20 and the final update (it too says "20 tokens ·").
# __tap.sent: the step numbers the server sent (the newest step counter, "N tokens ·", in a
# message); __tap.completed: the stream has ended.
PAIRING_TAP = """() => {
  const tap = (window.__tap = {sent: [], pairing: false});
  const original = window.fetch.bind(window);
  const encoder = new TextEncoder(), decoder = new TextDecoder();
  window.fetch = async (input, init) => {
    const response = await original(input, init);
    const url = typeof input === "string" ? input : String((input && input.url) || input);
    if (!/\\/queue\\/data/.test(url) || !response.body) return response;
    const reader = response.body.getReader();
    const body = new ReadableStream({start(out) {
      let text = "", held = [], timer = null;
      const push = (s) => out.enqueue(encoder.encode(s));
      const flush = () => { clearTimeout(timer); if (held.length) push(held.join("")); held = []; };
      (async () => {
        try {
          for (;;) {
            const {done, value} = await reader.read();
            if (done) break;
            text += decoder.decode(value, {stream: true});
            let end;
            while ((end = text.indexOf("\\n\\n")) >= 0) {
              const message = text.slice(0, end + 2);
              text = text.slice(end + 2);
              // (a message carries the steps made since the one before: it sends them all)
              const counts = [...message.matchAll(/(?:"|>)(\\d+) tokens /g)].map((m) => +m[1]);
              const step = counts.length > 0;
              if (step) tap.sent.push(...counts);
              if (/process_completed/.test(message) && tap.sent.length) tap.completed = true;
              if (!step || !tap.pairing) { flush(); push(message); continue; }
              held.push(message);
              if (held.length === 1) timer = setTimeout(flush, 200);
              if (held.length === 3) flush();
            }
          }
          flush();
          if (text) push(text);
          out.close();
        } catch (error) {
          try { out.error(error); } catch (e) { /* cancelled */ }
        }
      })();
    }});
    return new Response(body, {status: response.status, headers: new Headers(response.headers)});
  };
}"""

# Every state of the step counter ("N tokens ·") and the bars that a frame painted: Gradio
# changes the page in tasks, never inside a frame callback, so a frame callback reads what
# that frame paints.
FRAME_RECORDER = """() => {
  window.__painted = [];
  const frame = () => {
    const speed = document.querySelector("#speed");
    const m = speed && /^\\s*(\\d+) tokens/.exec(speed.innerText);
    const bars = Array.from(document.querySelectorAll("#bars .nt-bars div"))   // shown rows
                            .filter((row) => row.offsetParent !== null).map(
                            (row) => row.textContent).join("|");
    const n = m ? +m[1] : null, last = window.__painted[window.__painted.length - 1];
    if (!last || last.n !== n || last.bars !== bars) window.__painted.push({n, bars});
    requestAnimationFrame(frame);
  };
  requestAnimationFrame(frame);
}"""


def test_every_streamed_step_reaches_the_screen(open_page):
    """Defect 19: a 20-token greedy stream of GPT-2 small painted the bars of only ~14 of its
    20 steps: all 20 updates reached the page, but when two came within one frame Gradio
    painted only the latest. Every step's bars must be painted (up to 30 steps/s).

    On a busy 2-core machine GPT-2 small streams ~20 tokens/s, each step in a frame of its
    own; the tap hands the page the server's steps three at a time, as they come on a faster
    machine or to a busy page, so that three updates arrive within one frame. The last three
    are steps 19, 20 and the final update: a final update with the last step's bars alone
    once wiped step 19 before it was painted."""
    page = open_page(init=PAIRING_TAP)
    build(page, "gpt2-small")
    tab(page, GENERATE)
    set_slider(page, "max_new", 20)
    page.locator("#mode input[value=greedy]").check()
    page.evaluate("() => { window.__tap.pairing = true; }")
    page.evaluate(FRAME_RECORDER)
    page.locator("#gen_btn").click()
    page.wait_for_function("() => window.__tap.completed", timeout=SLOW)   # the stream's end
    page.wait_for_timeout(500)   # the last messages painted
    sent = set(page.evaluate("() => window.__tap.sent"))
    painted = {f["n"] for f in page.evaluate("() => window.__painted") if f["n"] and f["bars"]}
    speed = page.locator("#speed").inner_text()
    rate = float(re.search(r"([\d.]+) tokens/s", speed).group(1))
    assert sent, "the tap saw none of the stream's steps (it must wrap the page's fetch)"
    if rate <= 30:
        assert sent == set(range(1, 21)), f"the server sent steps {sorted(sent)} ({speed})"
    missing = sorted(sent - painted)
    assert not missing, (f"the bars of steps {missing} never reached the screen "
                         f"({len(painted & sent)} of {len(sent)} painted; {speed})")
