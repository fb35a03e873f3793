"""The Attention tab's head scores in a real browser (1280x720): a random model names no head,
and says what uniform attention scores on the prompt (issue 47, item 14: it named random heads
at 0.5, the chance level of a 2-token prompt); a head with a real job (a checkpoint with a
first-token head made by hand) is named with its chance level, and a click on it shows it."""
import re

import pytest
import torch

from page_widgets import expect, tab

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def small_page(browser, app_url):
    context = browser.new_context(viewport={"width": 1280, "height": 720})
    page = context.new_page()
    page.goto(app_url, wait_until="domcontentloaded")   # never "networkidle": SSE heartbeat
    yield page
    context.close()


@pytest.fixture(scope="module")
def first_token_checkpoint(tmp_path_factory):
    """teach-tiny whose block 0, head 0 puts all its attention on position 0: position 0
    stands out in dimension 0 (the keys read it), and every query reads a constant (norm1's
    shift)."""
    from explorer.book.config import PRESETS
    from explorer.book.model import GPTModel
    from explorer.runtime.export import export_model
    torch.manual_seed(0)
    model = GPTModel(PRESETS["teach-tiny"]).eval()
    att, norm = model.trf_blocks[0].att, model.trf_blocks[0].norm1
    hd = model.cfg.emb_dim // model.cfg.n_heads
    with torch.no_grad():
        model.pos_emb.weight[0, 0] += 30.0
        norm.shift[1] = 5.0
        att.W_key.weight[:hd] = 0
        att.W_query.weight[:hd] = 0
        att.W_key.weight[0, 0] = 2.0
        att.W_query.weight[0, 1] = 2.0
    folder = tmp_path_factory.mktemp("first-token-head")
    export_model(model, folder)
    return folder / "model.safetensors"


def show_attention(page, prompt, tokens):
    tab(page, "2 · Inside the forward pass")
    page.locator("#trace_prompt textarea").fill(prompt)
    page.locator("#trace_btn").click()
    expect(page.locator("#chips .chip")).to_have_count(tokens)
    tab(page, "3 · Attention")
    page.locator("#att_btn").click()


def test_a_random_model_names_no_head_and_says_the_chance_level(small_page):
    page = small_page
    page.locator("#build_btn").click()
    expect(page.locator("#status")).to_contain_text("Model ready")
    # two tokens: query 1 splits its attention between them, so random heads score about
    # 0.5 for the previous token: what uniform attention scores, no job
    show_attention(page, "Hello world", 2)
    expect(page.locator("#att_named")).to_contain_text(
        "No head has a clear job here: no score is half the way from what uniform attention "
        "scores on this prompt (previous token 0.50, first token 0.50")
    expect(page.locator("#att_named input[type=radio]")).to_have_count(0)


def test_a_named_head_shows_its_chance_level_and_is_shown_when_clicked(
        small_page, first_token_checkpoint, shots):
    page = small_page
    tab(page, "1 · Build")
    page.locator("#weights").get_by_label("from a file", exact=True).check()
    page.locator("#weights_path textarea, #weights_path input").first.fill(
        str(first_token_checkpoint))
    page.locator("#build_btn").click()
    expect(page.locator("#status")).to_contain_text("weights: from file model.safetensors")
    show_attention(page, "Every effort moves you", 4)
    named = page.locator("#att_named input[type=radio]")
    expect(named).to_have_count(1)
    expect(page.locator("#att_named")).to_contain_text(re.compile(
        r"layer 0, head 0: first token, 1\.00 \(uniform attention: 0\.36\)"))
    named.first.check()
    expect(page.locator("#att_plot .gtitle")).to_contain_text("Attention in layer 0, head 0")
    expect(page.locator("#att_head input")).to_have_value("0")
    if shots:
        page.screenshot(path=f"{shots}/attention_head_scores.png", full_page=True)
