"""Issue 47, part B: lecture mode at 1280x720 (a projector), in English and 中文, and the
streams. One test per behaviour; the item of the issue is in each docstring.

Each test opens a page of its own (a session of its own) at 1280x720 with lecture mode on, and
measures what a lecturer would see with bounding boxes in the viewport (what is on screen
without scrolling, after the app's own scroll)."""
import re

import pytest

from page_widgets import RECORD_TOASTS, choose, expect, set_number, tab, toasts
from zh_text import zh

pytestmark = pytest.mark.browser

PROJECTOR = {"width": 1280, "height": 720}
SLOW = 90_000          # a build, a trace or a training run's first points on a busy machine
TABS = ("1 · Build", "2 · Inside the forward pass", "3 · Attention", "4 · Activation functions",
        "5 · Generate", "6 · Train", "7 · Knock out")
LANGS = ("en", "zh")


def said(lang, text):
    return zh(text) if lang == "zh" else text


@pytest.fixture
def open_page(browser, app_url):
    """A factory: a fresh page at 1280x720 in ``lang``, lecture mode on, its toasts recorded
    and its uncaught errors in ``page.errors``."""
    contexts = []

    def open_(lang="en", lecture=True):
        context = browser.new_context(viewport=PROJECTOR, locale="en-US")
        contexts.append(context)
        context.set_default_timeout(30_000)
        page = context.new_page()
        page.errors = []
        page.on("pageerror", lambda error: page.errors.append(str(error)))
        page.add_init_script(f"({RECORD_TOASTS})()")
        page.goto(f"{app_url}?lang={lang}", wait_until="domcontentloaded")
        expect(page.locator("#build_btn")).to_have_text(said(lang, "Build the model"))
        if lecture:
            page.locator("#lecture input").set_checked(True)
            expect(page.locator("body.lecture")).to_be_attached()
        return page

    yield open_
    for context in contexts:
        context.close()


def box(page, selector):
    """The viewport box (x, y, r, b, w, h) of the first visible ``selector``, or None."""
    return page.evaluate("""(sel) => {
      const e = [...document.querySelectorAll(sel)].find((e) => e.getBoundingClientRect().width);
      if (!e) return null;
      const r = e.getBoundingClientRect();
      return {x: r.left, y: r.top, r: r.right, b: r.bottom, w: r.width, h: r.height};
    }""", selector)


def train(page, lang, steps, preset="teach-tiny"):
    """Start a run of ``steps`` steps of two variants of ``preset`` (not waiting for it)."""
    tab(page, said(lang, "6 · Train"))
    boxes = page.locator("#train_variants")
    for name in ("pre-LN (book)", "post-LN", "no shortcut"):
        boxes.get_by_label(said(lang, name), exact=True).set_checked(name != "post-LN")
    choose(page, "train_preset", preset)
    set_number(page, "train_steps", steps)
    page.locator("#train_btn").click()


# =============================================================================================
# Item 5: every input shows its whole value
CUT_INPUTS_JS = """() => [...document.querySelectorAll('input[type=number]')]
  .filter((e) => e.getBoundingClientRect().width > 0
                 && !e.closest('.block').querySelector('input[type=range]'))
  .map((e) => { if (e.value.length < 5) e.value = '10000';   // five digits: 10000 steps
                return {id: e.closest('[id]').id, value: e.value, text: e.scrollWidth,
                        box: e.clientWidth}; })
  .filter((e) => e.text > e.box + 1)"""


@pytest.mark.parametrize("lang", LANGS)
def test_every_number_box_shows_five_digits_whole_in_lecture_mode(open_page, lang):
    """Item 5: the Train tab's number boxes cut their last digit (steps 1000 read "100"). Each
    tab's number boxes (a slider's own box aside: its range is its own) must show five digits
    whole, in lecture mode's type."""
    page = open_page(lang)
    cut = {}
    for name in TABS:
        tab(page, said(lang, name))
        page.wait_for_timeout(300)      # the tab laid out
        found = page.evaluate(CUT_INPUTS_JS)
        if found:
            cut[name] = found
    assert not cut, f"number boxes whose value is cut at 1280x720 ({lang}): {cut}"


# =============================================================================================
# Item 6: every tab's main figure on screen, the knock-out map included
@pytest.mark.parametrize("lang", LANGS)
def test_the_knockout_maps_first_table_is_on_screen(open_page, lang):
    """Item 6: the knock-out map's first table started at y = 820, below a 720 px screen."""
    page = open_page(lang)
    page.locator("#build_btn").click()
    expect(page.locator("#status")).to_contain_text("teach-small", timeout=SLOW)
    tab(page, said(lang, "7 · Knock out"))
    page.locator("#knock_map_btn").click()
    expect(page.locator("#knock_map table")).to_have_count(2, timeout=SLOW)
    page.wait_for_timeout(500)
    table = box(page, "#knock_map table")
    assert 0 <= table["y"] and table["b"] <= PROJECTOR["height"], (
        f"the map's first table spans y = {table['y']:.0f}..{table['b']:.0f} px, not within "
        f"the {PROJECTOR['height']} px screen ({lang})")


# =============================================================================================
# Items 8 and 7 (the loss figure): the Train tab while it trains
@pytest.mark.parametrize("lang", LANGS)
def test_the_progress_line_and_the_loss_plot_are_on_screen_while_training(open_page, lang):
    """Item 8: the Train progress line sat on the screen's bottom edge (below it once the
    curves came); item 7: the loss figure's title and subtitle left a plot about 150 px high.
    While a job trains, the progress line and the whole loss figure must be on screen, its
    plot at least 200 px high."""
    page = open_page(lang)
    train(page, lang, 300)
    page.wait_for_function("""() => document.querySelectorAll(
        '#train_loss_plot g.scatterlayer g.trace path.point').length >= 2""", timeout=SLOW)
    page.evaluate("() => window.scrollTo(0, 0)")   # the tab's top, as a lecturer shows it
    page.wait_for_timeout(500)
    page.screenshot(path=f"/tmp/lecture_projector_train_{lang}.png")
    screen = PROJECTOR["height"]
    progress = box(page, "#train_progress")
    figure = box(page, "#train_loss_plot .main-svg")
    plot = box(page, "#train_loss_plot rect.nsewdrag")
    problems = []
    if not (0 <= progress["y"] and progress["b"] <= screen - 8):
        problems.append(f"the progress line spans y = {progress['y']:.0f}..{progress['b']:.0f}")
    if not (0 <= figure["y"] and figure["b"] <= screen):
        problems.append(f"the loss figure spans y = {figure['y']:.0f}..{figure['b']:.0f}")
    if plot["h"] < 200:
        problems.append(f"the loss plot is {plot['h']:.0f} px high")
    assert not problems, f"at 1280x720 ({lang}), while training: {problems}"


# =============================================================================================
# Item 12: the live axes fixed to the planned steps
AXIS_RANGES_JS = """() => {
  window.__ranges = [];
  const read = () => {
    for (const id of ['train_loss_plot', 'train_grad_plot']) {
      const plot = document.querySelector('#' + id + ' .js-plotly-plot');
      const axis = plot && plot._fullLayout && plot._fullLayout.xaxis;
      const traces = plot && plot.data ? plot.data.length : 0;
      if (axis && traces) window.__ranges.push([id, axis.range[0], axis.range[1]]);
    }
    setTimeout(read, 200);
  };
  read();
}"""


def test_the_live_training_axes_show_the_planned_steps_from_the_start(open_page):
    """Item 12: the live training figures' x axes rescaled on every update (0-450, then 0-800,
    then 0-1000). From its first points on, each figure's x axis must span the planned steps,
    and never change."""
    page = open_page("en")
    steps = 300
    page.evaluate(AXIS_RANGES_JS)
    train(page, "en", steps)
    # two evaluations at least (steps 0 and 10): the curves have moved on once
    page.wait_for_function("""() => document.querySelectorAll(
        '#train_loss_plot g.scatterlayer g.trace path.point').length >= 4""", timeout=SLOW)
    page.wait_for_timeout(2500)      # one more figure update
    ranges = page.evaluate("() => window.__ranges")
    for figure in ("train_loss_plot", "train_grad_plot"):
        seen = sorted({(round(low, 3), round(high, 3)) for id_, low, high in ranges
                       if id_ == figure})
        assert seen, f"{figure}: no range read"
        assert len(seen) == 1, f"{figure}: the x axis changed while training: {seen}"
        low, high = seen[0]
        assert low <= 0 and steps <= high <= 1.1 * steps, (
            f"{figure}: the x axis spans {low}..{high}, not the planned {steps} steps")


# =============================================================================================
# Item 13: Replay with no finished job
@pytest.mark.parametrize("lang", LANGS)
def test_replay_without_a_finished_job_says_so_beside_its_button_and_nothing_else(open_page,
                                                                                    lang):
    """Item 13: Replay with no finished job gave a clear message, but also three red "Error"
    badges, and the message's toast covered Stop and Continue. It must say so beside the
    button: no error, no toast, and Stop and Continue uncovered."""
    page = open_page(lang)
    tab(page, said(lang, "6 · Train"))
    page.locator("#train_replay_btn").click()
    note = page.locator("#train_replay_note")
    expect(note).to_contain_text(said(lang, "Replay draws a finished job again: press Train "
                                            "and let it finish first (a job another session "
                                            "finished counts too).")[:12])
    page.wait_for_timeout(1000)      # an error's badges and toast would have come by now
    badges = page.locator(".error").filter(visible=True)
    assert badges.count() == 0, f"error marks shown: {badges.all_inner_texts()}"
    assert not toasts(page), f"toasts shown: {toasts(page)}"
    for button in ("#train_stop_btn", "#train_continue_btn"):
        page.locator(button).scroll_into_view_if_needed()
        middle = box(page, button)
        x, y = middle["x"] + middle["w"] / 2, middle["y"] + middle["h"] / 2
        on_top = page.evaluate("([x, y, sel]) => !!document.elementFromPoint(x, y)"
                               ".closest(sel)", [x, y, button])
        assert on_top, f"{button} is covered ({lang})"


# =============================================================================================
# Item 9: the generated text follows its newest tokens
TEXT_SCROLL_JS = """() => {
  window.__text = [];
  const read = () => {
    const box = document.querySelector('#gen_output textarea');
    if (box && box.value) window.__text.push({top: box.scrollTop, seen: box.clientHeight,
                                              all: box.scrollHeight});
    setTimeout(read, 100);
  };
  read();
}"""


def build(page, preset=None):
    """Build the Build tab's preset (the default: teach-small)."""
    page.locator("#build_btn").click()
    expect(page.locator("#status")).to_contain_text(preset or "teach-small", timeout=SLOW)


def test_the_generated_text_follows_its_newest_tokens(open_page):
    """Item 9: while generating, the Text box stayed scrolled to its top, so new tokens left
    the screen after about 4 lines. Once the text is longer than its box, the box must show
    its end: at every read but a few (a read may fall between a new text and its scroll),
    and at the end."""
    page = open_page("en")
    build(page)
    tab(page, "5 · Generate")
    n = 100
    box = page.locator("#max_new input[type=number]")
    box.fill(str(n))
    box.press("Enter")
    page.evaluate(TEXT_SCROLL_JS)
    page.locator("#gen_btn").click()
    expect(page.locator("#history tbody tr")).to_have_count(n, timeout=SLOW)   # the end
    page.wait_for_timeout(500)
    reads = [r for r in page.evaluate("() => window.__text") if r["all"] > r["seen"] + 40]
    assert reads, "the text never grew longer than its box"
    behind = [r for r in reads if r["all"] - r["top"] - r["seen"] > 4]
    assert len(behind) <= max(2, len(reads) // 10), (
        f"the box did not show the text's end at {len(behind)} of {len(reads)} reads, e.g. "
        f"{behind[:3]}")
    assert reads[-1]["all"] - reads[-1]["top"] - reads[-1]["seen"] <= 4, reads[-1]


# =============================================================================================
# Item 10: Stop ends the generation at the step on screen
PAINTED_JS = """() => {
  window.__painted = [];
  const frame = () => {
    const m = /^(\\d+) (?:tokens|个词元) ·/.exec(document.querySelector('#speed').innerText);
    const n = m ? +m[1] : null, last = window.__painted[window.__painted.length - 1];
    if (n !== null && n !== last) window.__painted.push(n);
    requestAnimationFrame(frame);
  };
  requestAnimationFrame(frame);
}"""
STOP_JS = """() => {   // Stop pressed, and the step on screen at that moment
  const m = /^(\\d+) (?:tokens|个词元) ·/.exec(document.querySelector('#speed').innerText);
  document.querySelector('#stop_btn').click();
  return +m[1];
}"""


@pytest.mark.parametrize("lang", LANGS)
def test_stop_ends_the_generation_at_the_step_on_screen(open_page, lang):
    """Item 10: Stop clicked while step 66 was shown stopped at 91, and steps 71-90 were never
    shown (the page shows the steps in turn, behind the model). After Stop, the speed line,
    the step table and the text must end at the step on screen when Stop was pressed, and
    every step up to it must have been shown."""
    page = open_page(lang)
    build(page)
    tab(page, said(lang, "5 · Generate"))
    box = page.locator("#max_new input[type=number]")
    box.fill("500")
    box.press("Enter")
    page.evaluate(PAINTED_JS)
    page.locator("#gen_btn").click()
    page.wait_for_function("() => window.__painted.some((n) => n >= 40)", timeout=SLOW)
    on_screen = page.evaluate(STOP_JS)
    # Stop's call and the cancelled stream's both end it: the speed line's last word
    ended = said(lang, " · <b>stopped</b>").replace("<b>", "").replace("</b>", "").strip(" ·")
    try:
        page.wait_for_function(
            """([n, ended]) => {
              const m = /^(\\d+) (?:tokens|个词元) ·/.exec(document.querySelector('#speed')
                                                                .innerText);
              return m && +m[1] === n && document.querySelector('#speed').innerText
                                                 .includes(ended);
            }""", arg=[on_screen, ended], timeout=SLOW)
    except Exception:
        raise AssertionError(f"Stop pressed at step {on_screen}; the speed line says: "
                             f"{page.locator('#speed').inner_text()!r}") from None
    final = on_screen
    expect(page.locator("#history tbody tr")).to_have_count(final)
    expect(page.locator("#history tbody tr").first.locator("td").first).to_have_text(
        str(final))
    painted = page.evaluate("() => window.__painted")
    unseen = sorted(set(range(1, final + 1)) - set(painted))
    assert not unseen, f"steps {unseen} were never shown (stopped at {final})"


# =============================================================================================
# Item 11: switching the language keeps the page's place
def test_switching_the_language_keeps_the_pages_place(open_page):
    """Item 11: switching the language scrolled the page to its top (mid-training, the live
    figures left the screen). On the Inside tab, traced and scrolled down to its figure, the
    switch to 中文 must leave the page where it was once the views are drawn again."""
    page = open_page("en")
    build(page)
    tab(page, "2 · Inside the forward pass")
    page.locator("#trace_btn").click()
    expect(page.locator("#stats_plot .gtitle")).to_be_visible(timeout=SLOW)
    page.wait_for_timeout(500)
    page.evaluate("() => window.scrollTo(0, 300)")
    assert page.evaluate("() => window.scrollY") == 300
    # (clicked as a lecturer does, the toggle on screen, without the test's own scrolling)
    page.evaluate("() => document.querySelector('#lang input[value=zh]').click()")
    expect(page.locator("#trace_btn")).to_have_text(zh("Trace"))
    expect(page.locator("#stats_plot .gtitle")).to_contain_text(zh("Statistics across layers"),
                                                                 timeout=SLOW)
    page.wait_for_timeout(1500)      # every view drawn again, and the page settled
    assert page.evaluate("() => window.scrollY") == 300, "the switch moved the page"


# =============================================================================================
# Item 7: the A/B parameter table's every column whole
CUT_CELLS_JS = """() => {
  const root = document.querySelector('#params_table').getBoundingClientRect();
  return [...document.querySelectorAll('#params_table th, #params_table td')]
    .filter((e) => e.getBoundingClientRect().width > 0 && e.offsetParent !== null)
    .filter((e) => { const r = e.getBoundingClientRect(), text = e.querySelector('.text');
                     return r.right > root.right + 1 || r.left < root.left - 1
                            || (text && text.scrollWidth > text.clientWidth + 1); })
    .map((e) => e.innerText.trim());
}"""


@pytest.mark.parametrize("lang", LANGS)
def test_the_parameter_table_of_a_and_b_shows_every_column_whole(open_page, lang):
    """Item 7: the A − B column of the A/B parameter table was cut off. With GPT-2 small as A
    and teach-small pinned as B (nine-digit counts), every cell of the table must be inside
    it and whole."""
    page = open_page(lang)
    build(page)
    page.locator("#pin_btn").click()
    expect(page.locator("#status")).to_contain_text("teach-small", timeout=SLOW)
    choose(page, "preset", "gpt2-small")
    page.locator("#build_btn").click()
    expect(page.locator("#status")).to_contain_text("gpt2-small", timeout=SLOW)
    expect(page.locator("#params_table")).to_contain_text("163,009,536")
    page.wait_for_timeout(500)
    cut = page.evaluate(CUT_CELLS_JS)
    assert not cut, f"cells cut or outside the table at 1280x720 ({lang}): {cut}"


# =============================================================================================
# Item 7: the copying model's heatmap labels every token
LABELS_JS = """(axis) => [...document.querySelectorAll(`#att_plot g.${axis}tick text`)]
  .map((e) => e.textContent)"""


def test_a_heatmap_of_one_letter_words_labels_every_token(open_page):
    """Item 7: the copying model's attention heatmap labelled every other token of its
    16-token text ("@2>1:?7)@2>1:?7)", one letter a token). Each of its tokens must have its
    label on both axes in lecture mode, the whole figure on screen."""
    page = open_page("en")
    build(page)
    tab(page, "2 · Inside the forward pass")
    text = "@2>1:?7)@2>1:?7)"
    page.locator("#trace_prompt textarea").fill(text)
    page.locator("#trace_btn").click()
    expect(page.locator("#chips .chip")).to_have_count(16, timeout=SLOW)
    tab(page, "3 · Attention")
    page.locator("#att_btn").click()
    expect(page.locator("#att_plot g.hm image").first).to_be_attached(timeout=SLOW)
    page.wait_for_timeout(1000)                       # the page's own scroll
    for axis in "xy":
        labels = page.evaluate(LABELS_JS, axis)
        assert labels == list(text), f"{axis} axis labels: {labels}"
    figure = box(page, "#att_plot .js-plotly-plot")
    assert 0 <= figure["y"] and figure["b"] <= PROJECTOR["height"], figure


# =============================================================================================
# Item 7: A/B attention in lecture mode: every label, the whole figure on screen
COPYING_TEXT = "@2>1:?7)@2>1:?7)"      # the copying task's text: 16 one-letter tokens


SENTENCE = "Every effort moves you forward, said the lecturer and smiled."    # 12 tokens


def assert_figure_on_screen(page, elem_id, shot):
    """The figure in ``elem_id`` whole within the 720 px screen (a screenshot in /tmp)."""
    figure = box(page, f"#{elem_id} .js-plotly-plot")
    page.screenshot(path=f"/tmp/lecture_projector_{shot}.png")
    assert 0 <= figure["y"] and figure["b"] <= PROJECTOR["height"], (
        f"{elem_id} spans y = {figure['y']:.0f}..{figure['b']:.0f} px")


def with_b(page, lang):
    """Model B beside A: A with one head zeroed (Intervene, tab 7)."""
    tab(page, said(lang, "7 · Knock out"))
    page.locator("#knock_spec textarea").fill("zero trf_blocks[1].att head 2")
    page.locator("#knock_btn").click()
    expect(page.locator("#status")).to_contain_text("trf_blocks[1].att", timeout=SLOW)


@pytest.mark.parametrize("lang, text", [("en", None), ("zh", None), ("en", COPYING_TEXT),
                                        ("zh", SENTENCE)])
def test_a_and_b_attention_labels_every_token_and_shows_whole(open_page, lang, text):
    """Item 7: with B beside A, the Attention tab's heatmaps (A, B and A − B) kept a 250 px
    plot: the 4-token prompt's key labels fell below a 720 px screen (y = 743), and the
    copying task's 16 tokens were labelled every other one on both axes, the key axis's
    title cut at the screen's bottom (y = 741); a sentence of 12 had 3 key labels. Every
    token must have its label on both axes, and after Show attention the whole figure must
    be on screen."""
    page = open_page(lang)
    build(page)
    if text:
        tab(page, said(lang, "2 · Inside the forward pass"))
        page.locator("#trace_prompt textarea").fill(text)
        page.locator("#trace_btn").click()
        expect(page.locator("#chips .chip")).to_have_count(
            len(text) if text == COPYING_TEXT else 12, timeout=SLOW)
    with_b(page, lang)
    tab(page, said(lang, "3 · Attention"))
    page.evaluate("() => window.scrollTo(0, 0)")      # the tab's top, as a lecturer opens it
    page.locator("#att_btn").click()
    expect(page.locator("#att_plot g.hm image")).to_have_count(3, timeout=SLOW)
    page.wait_for_timeout(1000)                       # the page's own scroll, if any
    keys, queries = page.evaluate(LABELS_JS, "x"), page.evaluate(LABELS_JS, "y")
    words = ["Every", "␣effort", "␣moves", "␣you"]
    tokens = {None: words, COPYING_TEXT: list(COPYING_TEXT),
              SENTENCE: [*words, "␣forward", ",", "␣said", "␣the", "␣lecturer", "␣and",
                         "␣smiled", "."]}[text]
    assert keys == queries == tokens, (keys, queries)
    assert_figure_on_screen(page, "att_plot", f"ab_attention_{lang}_{len(tokens)}")


# =============================================================================================
# Items 6 and 7: the Activations and Patching tabs' main views with B, on screen
@pytest.mark.parametrize("lang", LANGS)
def test_the_activation_figure_with_b_fits_under_its_controls(open_page, lang):
    """With B, the status line takes a second line, and the Activations tab's figure (drawn
    as the tab opens, no button to scroll to it) ended at y = 740: its legend's second row
    below a 720 px screen. The whole figure must be on screen at the tab's top."""
    page = open_page(lang)
    build(page)
    with_b(page, lang)
    tab(page, said(lang, "2 · Inside the forward pass"))
    page.locator("#trace_btn").click()                 # the real inputs' bars, A's and B's
    expect(page.locator("#stats_plot .gtitle")).to_be_visible(timeout=SLOW)
    tab(page, said(lang, "4 · Activation functions"))
    page.evaluate("() => window.scrollTo(0, 0)")
    expect(page.locator("#act_plot g.legend g.traces")).to_have_count(4, timeout=SLOW)
    page.wait_for_timeout(500)
    assert_figure_on_screen(page, "act_plot", f"activations_ab_{lang}")


@pytest.mark.parametrize("lang", LANGS)
def test_patch_brings_the_patching_maps_on_screen(open_page, lang):
    """The Patching tab's maps came under its boxes and buttons, from y = 860 down: pressing
    Patch at the tab's top showed none of them. After Patch, the map's summary and its first
    table (the heads) must be on screen."""
    page = open_page(lang)
    build(page)
    tab(page, said(lang, "8 · Patching"))
    page.evaluate("() => window.scrollTo(0, 0)")
    page.locator("#patch_pair input[value=ioi]").check()
    page.locator("#patch_pair_btn").click()
    expect(page.locator("#patch_right textarea, #patch_right input")).not_to_have_value("")
    page.locator("#patch_btn").click()
    expect(page.locator("#patch_map table.patch-heads")).to_be_visible(timeout=SLOW)
    page.wait_for_timeout(2000)                        # the page's own scroll
    page.screenshot(path=f"/tmp/lecture_projector_patching_{lang}.png")
    summary, heads = box(page, "#patch_map .patch-summary"), box(page, "#patch_map table.patch-heads")
    assert 0 <= summary["y"] and heads["b"] <= PROJECTOR["height"], (
        f"summary from y = {summary['y']:.0f}, heads' table to {heads['b']:.0f} px ({lang})")
