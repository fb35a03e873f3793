"""A tour of every tab in English and in 简体中文, at 1280x720 (a projector), as a lecturer
clicks through them: build a teaching model, trace, show attention, the activation curves,
generate, train two variants for a few steps.

In the zh-CN browser locale no English may be left in a view: labels, status lines, notes,
tables and every figure's text (titles, axes, legends, ticks) are checked for English phrases
that are not code names. Then the language toggle switches the page back to English, labels
and figures alike; and in lecture mode each tab's main figure fits in the 1280x720 viewport.

With GPT_EXPLORER_SCREENSHOTS=<folder> the tours save the README's screenshots, one per tab,
to <folder>/en/ and <folder>/zh/ (the viewport, what a projector shows)."""
import os
import re

import pytest

from zh_text import zh as _zh
from explorer.book.config import PRESETS, count_parameters

from page_widgets import expect

pytestmark = pytest.mark.browser

PROJECTOR = {"width": 1280, "height": 720}
SLOW = 60_000
PRESET = "teach-small"
TABS = ("1 · Build", "2 · Inside the forward pass", "3 · Attention", "4 · Activation functions",
        "5 · Generate", "6 · Train")
SHOT_NAMES = ("build", "inside", "attention", "activations", "generate", "train")
# Each tab's main figure (lecture mode: inside the viewport)
MAIN_VIEW = {"2 · Inside the forward pass": "#stats_plot", "3 · Attention": "#att_plot",
             "4 · Activation functions": "#act_plot", "5 · Generate": "#bars",
             "6 · Train": "#train_loss_plot", "1 · Build": "#params_plot"}

# English that may stay in the Chinese page: the book's and PyTorch's names, units, formats,
# model and preset names, the prompt's tokens.
CODE_WORDS = set("""
GPT GPTModel GPT_CONFIG_124M LayerNorm norm1 norm2 final_norm out_head tok_emb pos_emb drop_emb
drop_shortcut trf_blocks att ff ff_expansion ff_pre ff_post ff_out resid_pre resid_mid resid_post
ln1_in ln1_out ln2_in ln2_out final_norm_in final_norm_out attn_out vocab_size context_length
emb_dim n_heads n_layers drop_rate qkv_bias norm_placement shortcut activation tie_weights
pos_encoding pre post none learned rope RoPE GELU ReLU SiLU gelu gelu_exact relu silu tanh
Linear Dropout Identity MultiHeadAttention TransformerBlock FeedForward softmax logits logit
teach tiny small deep medium large xl gpt2 OpenAI Hugging Face hub safetensors model
config json pth CSV JSON cpu cuda auto float32 bfloat16 mean std rms min max abs_mean zero_frac
nonfinite inf NaN lr seed batch MB KB GB params bits ms s Every effort moves you Weights
English Gradio API x torch manual_seed cfg batch T sha256 ln log10 grad Settings endoftext
""".split())
WORD = re.compile(r"[A-Za-z][A-Za-z_0-9']*")


def english_phrases(text: str) -> list[str]:
    """Runs of two or more English words, none of them a code name, in ``text``."""
    found = []
    for line in text.splitlines():
        run = []
        for word in WORD.findall(line) + [None]:
            if word is not None and word.strip("'") not in CODE_WORDS and len(word) > 1:
                run.append(word)
                continue
            if len(run) >= 2:
                found.append(" ".join(run))
            run = []
    return found


def visible_text(page) -> str:
    """The text a viewer sees: the page's visible text and every figure's SVG text (not
    Gradio's announcements for screen readers, e.g. its untranslated "common.complete", and not
    what the models wrote: the samples of the training lab)."""
    return page.evaluate("""() => {
        const hidden = [...document.querySelectorAll('[aria-live], .sr-only, #train_samples li')];
        const before = hidden.map(e => e.style.display);
        hidden.forEach(e => { e.style.display = 'none'; });
        const texts = [document.body.innerText];
        hidden.forEach((e, i) => { e.style.display = before[i]; });
        for (const t of document.querySelectorAll('.js-plotly-plot svg text')) {
            if (t.getBoundingClientRect().width > 0) texts.push(t.textContent);
        }
        return texts.join('\\n');
    }""")


def zh(text: str) -> str:
    return _zh(text)


@pytest.fixture(scope="module", params=["en", "zh"])
def tour(request, browser, app_url):
    lang = request.param
    context = browser.new_context(viewport=PROJECTOR,
                                  locale="zh-CN" if lang == "zh" else "en-US")
    context.set_default_timeout(30_000)
    page = context.new_page()
    page.__errors = []
    page.on("pageerror", lambda exc: page.__errors.append(str(exc)))
    page.goto(app_url, wait_until="domcontentloaded")
    say = zh if lang == "zh" else (lambda text: text)
    expect(page.locator("#build_btn")).to_have_text(say("Build the model"))
    expect(page.locator("#lang input[value=%s]" % lang)).to_be_checked()
    page.say = say
    page.lang = lang
    yield page
    context.close()
    assert not page.__errors, f"uncaught exceptions in the page: {page.__errors}"


def go(page, name):
    page.get_by_role("tab", name=page.say(name), exact=True).click()
    expect(page.get_by_role("tab", name=page.say(name), exact=True)).to_have_attribute(
        "aria-selected", "true")


def shot(page, folder, name):
    if folder:
        os.makedirs(os.path.join(folder, page.lang), exist_ok=True)
        page.evaluate("() => window.scrollTo(0, 0)")
        page.wait_for_timeout(400)   # plotly's transitions
        page.screenshot(path=os.path.join(folder, page.lang, f"{name}.png"))


def no_english_left(page, where):
    if page.lang != "zh":
        return
    left = english_phrases(visible_text(page))
    assert not left, f"English left in the Chinese page ({where}): {sorted(set(left))[:20]}"


def test_a_tour_of_every_tab(tour, shots):
    page, say = tour, tour.say
    total = count_parameters(PRESETS[PRESET]).total
    go(page, TABS[0])
    page.locator("#build_btn").click()
    expect(page.locator("#status")).to_contain_text(f"{total:,}", timeout=SLOW)
    expect(page.locator("#params_plot .gtitle")).to_contain_text(f"{total:,}")
    no_english_left(page, TABS[0])
    shot(page, shots, SHOT_NAMES[0])

    go(page, TABS[1])
    page.locator("#trace_btn").click()
    expect(page.locator("#chips .chip")).to_have_count(4, timeout=SLOW)
    expect(page.locator("#stats_plot .gtitle")).to_have_text(say("Statistics across layers"))
    expect(page.locator("#hist_plot g.barlayer").first).to_be_attached()
    no_english_left(page, TABS[1])
    shot(page, shots, SHOT_NAMES[1])

    go(page, TABS[2])
    page.locator("#att_btn").click()
    expect(page.locator("#att_plot g.hm image").first).to_be_attached(timeout=SLOW)
    expect(page.locator("#entropy_plot g.hm image").first).to_be_attached()
    no_english_left(page, TABS[2])
    shot(page, shots, SHOT_NAMES[2])

    go(page, TABS[3])
    expect(page.locator("#act_plot g.barlayer").first).to_be_attached()   # real inputs
    no_english_left(page, TABS[3])
    shot(page, shots, SHOT_NAMES[3])

    go(page, TABS[4])
    page.locator("#gen_btn").click()
    expect(page.locator("#speed")).to_contain_text("20", timeout=SLOW)
    expect(page.locator("#history tbody tr")).to_have_count(20, timeout=SLOW)
    page.get_by_text(say("Logit lens: what each layer would predict")).click()   # opens it
    page.locator("#lens_btn").click()
    expect(page.locator("#lens_plot g.hm image").first).to_be_attached(timeout=SLOW)
    no_english_left(page, TABS[4])
    shot(page, shots, SHOT_NAMES[4])

    go(page, TABS[5])
    page.locator("#train_preset input").click()
    page.get_by_role("option", name="teach-tiny", exact=True).click()
    steps = page.locator("#train_steps input")
    # evaluations at steps 0 and 5: two points of each curve (three for the screenshot)
    steps.fill("12" if shots else "6")
    page.locator("#train_btn").click()
    expect(page.locator("#train_progress")).to_contain_text(say("Finished"), timeout=SLOW * 2)
    expect(page.locator("#train_loss_plot g.scatterlayer path.js-line").first).to_be_attached(
        timeout=SLOW)
    for variant in ("pre-LN (book)", "post-LN", "no shortcut"):
        expect(page.locator("#train_table")).to_contain_text(say(variant))
    no_english_left(page, TABS[5])
    shot(page, shots, SHOT_NAMES[5])
    # the toasts and the sessions' logs are checked by the other browser tests


def test_the_language_toggle_switches_labels_and_figures(tour):
    page = tour
    other = "en" if page.lang == "zh" else "zh"
    say = zh if other == "zh" else (lambda text: text)
    page.locator(f"#lang input[value={other}]").check()
    go_to = say(TABS[1])
    expect(page.get_by_role("tab", name=go_to, exact=True)).to_be_visible()
    page.get_by_role("tab", name=go_to, exact=True).click()
    expect(page.locator("#trace_btn")).to_have_text(say("Trace"))
    # the figure already drawn is drawn again, in the other language
    expect(page.locator("#stats_plot .gtitle")).to_have_text(say("Statistics across layers"))
    page.locator(f"#lang input[value={page.lang}]").check()
    expect(page.locator("#trace_btn")).to_have_text(page.say("Trace"))


def test_in_lecture_mode_each_tabs_main_view_fits_on_the_projector(tour):
    page = tour
    if page.lang != "zh":
        pytest.skip("once is enough: the Chinese page")
    page.locator("#lecture input").check()
    expect(page.locator("body.lecture")).to_be_attached()
    for name, selector in MAIN_VIEW.items():
        go(page, name)
        page.evaluate("() => window.scrollTo(0, 0)")
        view = page.locator(selector)
        expect(view).to_be_visible()
        try:   # the figures are drawn again for lecture mode: wait for the new one
            page.wait_for_function("""(sel) => {
                const r = document.querySelector(sel).getBoundingClientRect();
                return r.top >= 0 && r.bottom <= window.innerHeight + 1;
            }""", arg=selector, timeout=20_000)
        except Exception:  # noqa: BLE001 - say where it is
            pytest.fail(f"{name}: {selector} is not inside the 1280x720 viewport in lecture "
                        f"mode: {view.bounding_box()}")
    page.locator("#lecture input").uncheck()
    expect(page.locator("body.lecture")).not_to_be_attached()
