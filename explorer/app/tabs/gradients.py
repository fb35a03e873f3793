"""The shortcut lesson (book 4.4), in tab 2: one backward pass through the book's 5-layer
network, and through the session's GPT, each with and without shortcut connections."""
from __future__ import annotations

from types import SimpleNamespace

import gradio as gr

from ...book.gradients import gpt_gradients, shortcut_demo
from ...book.tokenizer import get_tokenizer
from ...runtime.memory import model_bytes
from ..i18n import label, t
from ..plots.curves import gpt_gradient_figure, gradient_figure
from ..plots.style import empty_figure
from ..shared import DEFAULT_PROMPT, friendly

# Two trainable copies of the session's config are built: only for models up to this size.
MAX_MODEL_BYTES = 200 * 1024 ** 2


@friendly
def gradient_views(state):
    return (*_lesson(state), {**(state or {}), "gradients_shown": True})


@friendly
def redraw(state):
    """The charts again (language, lecture mode), if they are shown."""
    if not (state and state.get("gradients_shown")):
        return gr.skip(), gr.skip()
    return _lesson(state)


def _lesson(state):
    book = gradient_figure(shortcut_demo(False), shortcut_demo(True))
    if not state or "key" not in state:
        return book, empty_figure(t("Your GPT config, per block"),
                                  t("Build a model (tab 1) to compare its blocks too."), 500)
    cfg = state["key"].config
    if model_bytes(cfg) > MAX_MODEL_BYTES:
        # The book's chart does not depend on the model: show it, and say why this one is not
        return book, empty_figure(
            t("Your GPT config, per block"), t("This model is too large for this comparison:"
                                                "<br>it builds two trainable copies (at most "
                                                "200 MB).<br>Build a teaching preset to see it."),
            500)
    ids = get_tokenizer().encode(DEFAULT_PROMPT + " forward, one step at a time.")
    ids = ids[: cfg.context_length]
    # The lesson builds the config fresh: under the session's seed, or the book's 123 when the
    # session's weights were loaded (they have no seed).
    seed = 123 if state["key"].seed is None else state["key"].seed
    with_sc = gpt_gradients(cfg.replace(shortcut=True), ids, seed=seed)
    without = gpt_gradients(cfg.replace(shortcut=False), ids, seed=seed)
    # the first one drawn in blue: "with shortcut", as in the book's chart beside it
    return book, gpt_gradient_figure(with_sc, without, (t("with shortcut"),
                                                        t("without shortcut")))


def create_ui():
    with gr.Accordion(label("Why shortcut connections? (book 4.4)"), open=False):
        button = gr.Button(label("Run one backward pass"), elem_id="grad_btn")
        with gr.Row():
            book_plot = gr.Plot(show_label=False, label=label("The book's 5-layer network"),
                                elem_id="book_grad_plot")
            gpt_plot = gr.Plot(show_label=False, label=label("Your GPT config, per block"),
                               elem_id="gpt_grad_plot")
    return SimpleNamespace(button=button, book_plot=book_plot, gpt_plot=gpt_plot)


def cleared():
    """Charts of a model that is gone (after a rebuild): none until the button is pressed."""
    return None, None


def create_event_handlers(lesson, state, view, redrawn):
    for event in redrawn:
        event.then(redraw, [state, *view], [lesson.book_plot, lesson.gpt_plot],
                   api_visibility="private", show_progress="hidden")
    lesson.button.click(gradient_views, [state, *view],
                        [lesson.book_plot, lesson.gpt_plot, state],
                        api_name="gradients", concurrency_limit=1)
