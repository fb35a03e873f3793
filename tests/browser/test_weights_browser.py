"""Loaded weights in a real browser: a tiny GPT-2 saved by transformers' save_pretrained is
loaded from a file (by its path, then by upload), and every tab says which weights it shows;
trace, attention, the logit lens and generation run on it; the model is exported.
GPT_EXPLORER_SCREENSHOTS=<folder> saves a screenshot of each view."""
import re

import pytest

from explorer.book.tokenizer import get_tokenizer
from explorer.runtime.checkpoints import sha256_file

from page_widgets import expect

pytestmark = pytest.mark.browser

pytest.importorskip("transformers")

from .test_browser import (TAB_ACTIVATIONS, TAB_ATTENTION, TAB_BUILD,  # noqa: E402
                          TAB_GENERATE, TAB_INSIDE, shot, status, tab, trace)

PROMPT = "Every effort moves you"
TINY = dict(n_embd=64, n_layer=2, n_head=4, n_positions=64, vocab_size=50257)
NOTES = {TAB_INSIDE: "inside_weights", TAB_ATTENTION: "attention_weights",
         TAB_ACTIVATIONS: "activations_weights", TAB_GENERATE: "generate_weights"}


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    """Two tiny GPT-2s (different weights), each a save_pretrained folder."""
    from test_weights import make_hf_checkpoint
    made = []
    for seed in (0, 1):
        folder = tmp_path_factory.mktemp(f"tiny-gpt2-{seed}")
        made.append((make_hf_checkpoint(folder, seed=seed, **TINY), folder))
    return made


def caption_of(folder):
    digest = sha256_file(folder / "model.safetensors")
    return f"from file model.safetensors (sha256 {digest[:8]}…)"


def choose_weights(page, label):
    page.locator("#weights").get_by_label(label, exact=True).check()


def expect_notes(page, caption):
    for name, elem_id in NOTES.items():
        tab(page, name)
        expect(page.locator(f"#{elem_id}")).to_contain_text(f"Weights: {caption}")


def test_a_checkpoint_path_loads_and_every_tab_names_its_weights(page, checkpoints, shots):
    _, folder = checkpoints[0]
    caption = caption_of(folder)
    tab(page, TAB_BUILD)
    expect(page.locator("#weights_path")).to_be_hidden()
    choose_weights(page, "from a file")
    expect(page.locator("#weights_path")).to_be_visible()
    page.locator("#weights_path textarea, #weights_path input").first.fill(
        str(folder / "model.safetensors"))
    page.locator("#build_btn").click()
    expect(status(page)).to_contain_text(f"weights: {caption}")
    expect(page.locator("#build_btn")).to_have_text("Load the checkpoint")
    expect(page.locator("#n_heads")).to_be_hidden()                  # the checkpoint's config
    expect(page.locator(".gradio-container")).to_contain_text("2 × TransformerBlock")
    shot(page, shots, "w1_build_from_file")
    expect_notes(page, caption)


def test_trace_attention_lens_and_generation_run_on_the_loaded_weights(page, checkpoints,
                                                                        shots):
    hf, folder = checkpoints[0]
    caption = caption_of(folder)
    trace(page, PROMPT)
    expect(page.get_by_text(re.compile(r"tokens · traced in .*weights: from file"))).to_be_visible()
    shot(page, shots, "w2_inside_loaded")
    tab(page, TAB_ATTENTION)
    page.locator("#att_btn").click()
    att = page.locator("#att_plot [data-testid=plotly]")
    expect(att.locator(".gtitle")).to_contain_text("Attention in layer")
    expect(att.locator("g.hm image").first).to_be_attached()
    expect(page.locator("#attention_weights")).to_contain_text(caption)
    shot(page, shots, "w3_attention_loaded")

    tab(page, TAB_GENERATE)
    page.get_by_text("Logit lens: what each layer would predict").click()
    page.locator("#lens_btn").click()
    expect(page.locator("#lens_plot [data-testid=plotly] .main-svg").first).to_be_visible()
    expect(page.locator("#lens_plot g.hm image").first).to_be_attached()
    number = page.locator("#max_new input[type=number]")
    number.fill("6")
    number.press("Enter")
    page.locator("#gen_prompt textarea").fill(PROMPT)
    page.locator("#gen_btn").click()
    expect(page.locator("#speed")).to_contain_text("6 tokens ·")
    import torch
    tok = get_tokenizer()
    out = torch.tensor([tok.encode(PROMPT)])
    with torch.no_grad():
        for _ in range(6):
            out = torch.cat([out, hf(out).logits[:, -1:].argmax(-1)], dim=1)
    expect(page.locator("#gen_output textarea")).to_have_value(tok.decode(out[0].tolist()))
    shot(page, shots, "w4_generate_and_lens_loaded")


def test_an_upload_replaces_the_weights_and_the_captions_follow(page, checkpoints, shots):
    _, folder = checkpoints[1]
    caption = caption_of(folder)
    tab(page, TAB_BUILD)
    choose_weights(page, "from a file")
    page.locator("#weights_path textarea, #weights_path input").first.fill("")
    page.locator("#weights_upload input[type=file]").set_input_files(
        [str(folder / "model.safetensors"), str(folder / "config.json")])
    expect(page.locator("#weights_upload")).to_contain_text("config.json")
    page.locator("#build_btn").click()
    expect(status(page)).to_contain_text(f"weights: {caption}")
    expect_notes(page, caption)


def test_the_loaded_model_is_exported_as_safetensors_and_config(page, shots):
    tab(page, TAB_BUILD)
    page.get_by_text("Export this model (model.safetensors + config.json)").click()
    page.locator("#export_btn").click()
    expect(page.locator("#export_note")).to_contain_text("Exported from file model.safetensors")
    for name in ("model.safetensors", "config.json"):   # download links
        expect(page.locator(f"#export_files a[href$='/{name}']")).to_have_count(1)
    shot(page, shots, "w5_export")


def test_back_to_random_weights_of_the_checkpoints_shape(page):
    tab(page, TAB_BUILD)
    choose_weights(page, "random (seed)")
    expect(page.locator("#weights_path")).to_be_hidden()
    # The knobs show the last checkpoint's config: a random model of its shape.
    expect(page.locator("#n_heads input")).to_have_value("4")
    expect(page.locator("#emb_dim input")).to_have_value("64")
    page.locator("#build_btn").click()
    expect(status(page)).to_contain_text("weights: random, seed 123")
    expect_notes(page, "random, seed 123")
