"""The Train tab in a real browser, at a projector's 1280x720: two variants train, their
curves grow while the page watches, no error toast; the trained model then becomes the
session's model and the Attention tab shows it. GPT_EXPLORER_SCREENSHOTS=<folder> saves the
views."""
import re

import pytest

from explorer.runtime.training.setup import DEFAULT_CORPUS_NAME, DEFAULT_EVAL_FREQ

from page_widgets import expect

pytestmark = pytest.mark.browser

from .test_browser import choose, set_number, shot, status, tab, trace  # noqa: E402

TAB_TRAIN = "6 · Train"
STEPS = 30


def points_per_curve(page):
    """Markers drawn per loss curve (train and validation of every variant), in trace order."""
    return page.locator("#train_loss_plot g.scatterlayer g.trace").evaluate_all(
        "traces => traces.map(t => t.querySelectorAll('path.point').length)")


@pytest.fixture
def figures_often(monkeypatch):
    """The figures with every update (a live page gets them every FIGURE_SECONDS; this job
    ends within a few seconds): the test watches them grow."""
    from explorer.app.tabs import train_live

    monkeypatch.setattr(train_live, "FIGURE_SECONDS", 0.0)


def test_two_variants_train_and_their_curves_grow(page, shots, figures_often):
    page.set_viewport_size({"width": 1280, "height": 720})
    tab(page, TAB_TRAIN)
    variants = page.locator("#train_variants")
    variants.get_by_label("post-LN", exact=True).uncheck()      # the default has three
    expect(variants.locator("input:checked")).to_have_count(2)
    choose(page, "train_preset", "teach-tiny")
    set_number(page, "train_steps", STEPS)
    set_number(page, "train_context", 16)
    page.locator("#train_btn").click()

    curves = page.locator("#train_loss_plot g.scatterlayer g.trace")
    expect(curves).to_have_count(4)                  # 2 variants x (train, validation)
    # The curves grow while the job trains: first a few points, then more on every curve.
    page.wait_for_function(
        """() => { const t = document.querySelectorAll('#train_loss_plot g.scatterlayer g.trace');
                   return t.length == 4 && [...t].every(x => x.querySelectorAll('path.point').length >= 1); }""")
    early = points_per_curve(page)
    # Each update changes the drawn plot (explorer/app/live_figure.py): no new plot per update,
    # which a throttled page paid 1-2 s for (gr.Plot draws every value in a new one).
    plots = page.locator("#train_loss_plot .js-plotly-plot, #train_grad_plot .js-plotly-plot")
    expect(plots).to_have_count(2)
    plots.evaluate_all("plots => plots.forEach(p => { p.dataset.drawnSince = 'early'; })")
    expect(page.locator("#train_progress")).to_contain_text("Finished", timeout=120_000)
    expect(page.locator("#train_progress")).to_contain_text(f"step {STEPS} of {STEPS}")
    evaluations = STEPS // DEFAULT_EVAL_FREQ
    page.wait_for_function(
        f"""() => [...document.querySelectorAll('#train_loss_plot g.scatterlayer g.trace')]
                 .every(x => x.querySelectorAll('path.point').length >= {evaluations})""")
    late = points_per_curve(page)
    assert all(b > a for a, b in zip(early, late)), (early, late)
    assert plots.evaluate_all("plots => plots.map(p => p.dataset.drawnSince)") == ["early"] * 2
    for label in ("pre-LN (book)", "no shortcut"):
        expect(page.locator("#train_table")).to_contain_text(label)
    expect(page.locator("#train_grad_plot g.hm image")).to_have_count(2)
    expect(page.locator("#train_samples")).to_contain_text("Every effort moves you")
    expect(page.locator("[data-testid=toast-body]")).to_have_count(0)
    shot(page, shots, "7_train_finished_1280x720")


def test_replay_draws_the_finished_job_again_and_ends_on_it(page, shots, monkeypatch):
    """Issue 34, part 3: Replay draws the finished job's curves again from its first steps,
    then ends on the whole run."""
    from explorer.app.tabs import train as train_tab

    monkeypatch.setattr(train_tab, "REPLAY_FRAME_SECONDS", 0.5)   # 10 s: 20 frames, 30 steps
    tab(page, TAB_TRAIN)
    finished = points_per_curve(page)
    page.locator("#train_replay_speed").get_by_label("10 s", exact=True).check()
    page.locator("#train_replay_btn").click()
    progress = page.locator("#train_progress")
    expect(progress).to_contain_text("Replay of the recorded run")
    page.wait_for_function(
        """() => [...document.querySelectorAll('#train_loss_plot g.scatterlayer g.trace')]
                 .some(x => x.querySelectorAll('path.point').length >= 1)""")
    during = points_per_curve(page)
    shot(page, shots, "7b_train_replay_1280x720")
    expect(progress).to_contain_text(f"Finished — step {STEPS} of {STEPS}", timeout=60_000)
    assert sum(during) < sum(finished), (during, finished)
    page.wait_for_function(
        f"""() => [...document.querySelectorAll('#train_loss_plot g.scatterlayer g.trace')]
                 .map(x => x.querySelectorAll('path.point').length).join() == "{','.join(map(str, finished))}" """)
    expect(page.locator("[data-testid=toast-body]")).to_have_count(0)


def test_a_trained_variant_becomes_the_sessions_model(page, shots):
    tab(page, TAB_TRAIN)
    choose(page, "train_choice", "pre-LN (book)")
    page.locator("#train_use_btn").click()
    expect(status(page)).to_contain_text(
        re.compile(rf"trained {STEPS} steps on {re.escape(DEFAULT_CORPUS_NAME)}"))
    trace(page, "Every effort moves you")
    tab(page, "3 · Attention")
    # every tab's note, and the Build tab, name the trained weights
    expect(page.locator("#attention_weights")).to_contain_text(f"trained {STEPS} steps")
    page.locator("#att_btn").click()
    expect(page.locator("#att_plot g.hm image").first).to_be_attached()
    expect(page.locator("[data-testid=toast-body]")).to_have_count(0)
    shot(page, shots, "8_attention_trained_model")


def test_in_lecture_mode_three_variants_train_to_the_end_without_a_page_error(page, shots):
    """The lecturer's blocker: in lecture mode the first loss curves made plotly.js throw
    "Something went wrong with axis scaling" (the legend below left the plot no room) and
    the page froze at step 2; the same run finishes, with the legend beside the plot."""
    errors = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.locator("#lecture input").check()
    expect(page.locator("body.lecture")).to_have_count(1)
    tab(page, TAB_TRAIN)
    page.locator("#train_variants").get_by_label("post-LN", exact=True).check()
    expect(page.locator("#train_variants input:checked")).to_have_count(3)
    choose(page, "train_preset", "teach-tiny")
    set_number(page, "train_steps", STEPS)
    page.locator("#train_btn").click()
    # (the page still shows the first test's finished job until this one's first update)
    expect(page.locator("#train_table")).to_contain_text("post-LN", timeout=120_000)
    expect(page.locator("#train_progress")).to_contain_text(f"step {STEPS} of {STEPS}",
                                                            timeout=120_000)
    expect(page.locator("#train_progress")).to_contain_text("Finished")    # the final view
    # one per variant, and in lecture mode what the solid and the dashed line are (issue 47,
    # item 7: the note that said it left the plot ~150 px)
    legend = page.locator("#train_loss_plot .legendtext")
    expect(legend).to_have_count(5)
    assert sorted(legend.all_text_contents()) == sorted(
        ["pre-LN (book)", "post-LN", "no shortcut", "train", "val"])
    shot(page, shots, "9_train_lecture_finished_1280x720")
    page.locator("#lecture input").uncheck()
    assert not errors, errors


def test_switching_to_chinese_mid_training_redraws_the_live_view(page):
    """Issue 32, item 12: the progress line, figures and samples of a running job followed
    the language only once the job had ended."""
    page.set_viewport_size({"width": 1280, "height": 720})
    tab(page, TAB_TRAIN)
    choose(page, "train_preset", "teach-tiny")
    set_number(page, "train_steps", 400)
    set_number(page, "train_context", 16)
    page.locator("#train_btn").click()
    progress = page.locator("#train_progress")
    expect(progress).to_contain_text(re.compile(r"step \d+ of 400"))
    page.locator("#lang input[value=zh]").check()
    try:
        expect(progress).to_contain_text(re.compile(r"第 \d+ / 400 步"))
        expect(progress).not_to_contain_text("Finished")        # still training: live
    finally:
        page.locator("#train_stop_btn").click()
        page.locator("#lang input[value=en]").check()


def test_switching_language_after_a_job_finished_redraws_its_view(page):
    """The finished job's progress line, figures and samples follow the language too (they
    were redrawn only by the job's stream, which had ended)."""
    tab(page, TAB_TRAIN)
    choose(page, "train_preset", "teach-tiny")
    set_number(page, "train_steps", 5)
    set_number(page, "train_context", 16)
    page.locator("#train_btn").click()
    progress = page.locator("#train_progress")
    expect(progress).to_contain_text("Finished — step 5 of 5", timeout=120_000)
    page.locator("#lang input[value=zh]").check()
    try:
        expect(progress).to_contain_text("已完成")
        expect(page.locator("#train_loss_plot")).to_contain_text("损失")
    finally:
        page.locator("#lang input[value=en]").check()
    expect(progress).to_contain_text("Finished")
