"""Comparing two models in a real browser, at a projector's 1280x720: teach-small is pinned as
B, teach-tiny built as A, and every tab shows both (Build, Inside, Attention, Activation
functions, Generate with the logit lens); unpinning ends it. GPT_EXPLORER_SCREENSHOTS=<folder>
saves a full-page screenshot of each compare view."""
import os
import re

import pytest

from page_widgets import expect

pytestmark = pytest.mark.browser

from .test_browser import (TAB_ACTIVATIONS, TAB_ATTENTION, TAB_BUILD,  # noqa: E402
                           TAB_GENERATE, TAB_INSIDE, build, status, tab, trace)

PROJECTOR = {"width": 1280, "height": 720}
A_NAME, B_NAME = "A · 2 layers", "B · 4 layers"   # teach-tiny beside teach-small


@pytest.fixture(scope="module")
def page(browser, app_url):
    context = browser.new_context(viewport=PROJECTOR)
    context.set_default_timeout(30_000)
    pg = context.new_page()
    errors = []
    pg.on("pageerror", lambda error: errors.append(str(error)))
    pg.goto(app_url, wait_until="domcontentloaded")
    yield pg
    context.close()
    assert not errors, f"uncaught errors in the page: {errors}"


def shot(page, folder, name):
    if folder:
        page.wait_for_timeout(300)  # let plotly finish its transitions
        page.screenshot(path=os.path.join(folder, f"{name}.png"), full_page=True)


def plot(page, elem_id):
    return page.locator(f"#{elem_id} [data-testid=plotly]")


def test_a_pinned_model_is_shown_beside_the_next_one_in_every_tab(page, shots):
    build(page, "teach-small")
    page.locator("#pin_btn").click()
    # the pin waits in the builds' queue behind the build's follow-ups
    expect(page.locator("#pin_note")).to_contain_text("B (pinned)", timeout=20_000)
    build(page, "teach-tiny")
    expect(status(page)).to_contain_text("Compared with B: teach-small")
    # Build: both diagrams, what differs, both parameter breakdowns
    expect(page.locator(".cmp-arch")).to_have_count(2)
    expect(page.locator(".cmp-diff")).to_contain_text("n_layers")
    expect(plot(page, "params_plot").locator(".legendtext")).to_have_text(
        [re.compile(re.escape(A_NAME)), re.compile(re.escape(B_NAME))])
    expect(page.locator("#params_table")).to_contain_text("A − B")
    shot(page, shots, "c1_build")

    trace(page, "Every effort moves you")
    stats = plot(page, "stats_plot")
    expect(stats.locator(".gtitle")).to_contain_text("A and B")
    expect(stats.locator(".legendtext").first).to_contain_text(A_NAME)
    expect(plot(page, "hist_plot").locator(".gtitle")).to_contain_text("A and B")
    expect(plot(page, "heat_plot").locator("g.hm image")).to_have_count(2)
    shot(page, shots, "c2_inside")

    tab(page, TAB_ATTENTION)
    page.locator("#att_btn").click()
    att = plot(page, "att_plot")
    expect(att.locator(".gtitle")).to_contain_text("A, B and A − B")
    expect(att.locator("g.hm image")).to_have_count(3)
    expect(plot(page, "entropy_plot").locator("g.hm image")).to_have_count(2)
    expect(plot(page, "grid_plot").locator(".gtitle")).to_contain_text("A and B")
    shot(page, shots, "c3_attention")

    tab(page, TAB_ACTIVATIONS)
    expect(plot(page, "act_plot").locator(".legendtext")).to_contain_text(
        [re.compile("inputs of " + re.escape(A_NAME)), re.compile("inputs of "
                                                                   + re.escape(B_NAME))])
    shot(page, shots, "c4_activations")

    tab(page, TAB_GENERATE)
    page.locator("#gen_btn").click()
    expect(page.locator("#speed")).to_contain_text("20 steps of A and B")
    # (the stream's last update also holds its last steps, hidden)
    expect(page.locator("#bars .nt-bars.two .s").filter(visible=True)).to_have_count(2)
    expect(page.locator("#history .cmp-texts p")).to_have_count(2)
    expect(page.locator("#history tbody tr")).to_have_count(20)
    expect(page.locator("#history .cmp-texts h4")).to_contain_text(
        re.compile(r"part at step \d+|agree on every token"))
    shot(page, shots, "c5_generate")
    page.locator("#lecture input").check()             # on a projector: lecture mode
    expect(page.locator("body.lecture")).to_have_count(1)
    expect(page.locator("#bars .nt-bars.two .s")).to_have_count(2)   # redrawn, still both
    shot(page, shots, "c5_generate_lecture")
    page.locator("#lecture input").uncheck()
    page.get_by_text("Logit lens: what each layer would predict").click()
    page.locator("#lens_btn").click()
    expect(plot(page, "lens_plot").locator(".gtitle")).to_contain_text("Logit lens: A and B")
    shot(page, shots, "c6_logit_lens")


def test_unpinning_ends_the_comparison(page):
    tab(page, TAB_BUILD)
    page.locator("#unpin_btn").click()
    expect(status(page)).not_to_contain_text("Compared with")
    expect(page.locator(".cmp-arch")).to_have_count(0)
    trace(page, "Every effort moves you")
    expect(plot(page, "stats_plot").locator(".gtitle")).not_to_contain_text("A and B")
    tab(page, TAB_INSIDE)
