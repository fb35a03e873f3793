"""The shortcut lesson (book 4.4), in tab 2: one backward pass through the book's 5-layer
network, and through model A's config, each with and without shortcut connections."""
from __future__ import annotations

from dataclasses import dataclass

import gradio as gr

from ...book.gradients import gpt_gradients, shortcut_demo
from ...book.tokenizer import get_tokenizer
from ...runtime.memory import model_bytes
from .. import refresh
from ..handlers import handler
from ..i18n import label, t
from ..plots.curves import gpt_gradient_figure, gradient_figure
from ..plots.style import empty_figure
from ..session import DEFAULT_PROMPT, View

# Two trainable copies of the session's config are built: only for models up to this size.
MAX_MODEL_BYTES = 200 * 1024 ** 2
PLOTS = ("book_grad_plot", "gpt_grad_plot")
PER_BLOCK = ("gradients.per_block", "Your GPT config, per block")


def lesson(session) -> dict:
    book = gradient_figure(shortcut_demo(False), shortcut_demo(True))
    if not session.models:
        return {"book_grad_plot": book, "gpt_grad_plot": empty_figure(
            t(*PER_BLOCK), t("gradients.no_model", "Build a model (tab 1) to compare its "
                                                   "blocks too."), 500)}
    key = session.models[0].key
    cfg = key.config
    if model_bytes(cfg) > MAX_MODEL_BYTES:
        return {"book_grad_plot": book, "gpt_grad_plot": empty_figure(
            t(*PER_BLOCK), t("gradients.too_large", "This model is too large for this "
                                                    "comparison:<br>it builds two trainable "
                                                    "copies (at most 200 MB).<br>Build a "
                                                    "teaching preset to see it."), 500)}
    ids = get_tokenizer().encode(DEFAULT_PROMPT + " forward, one step at a time.")
    ids = ids[: cfg.context_length]
    # Built fresh: with the session's seed, or the book's 123 for loaded weights (no seed).
    seed = 123 if key.seed is None else key.seed
    with_sc = gpt_gradients(cfg.replace(shortcut=True), ids, seed=seed)
    without = gpt_gradients(cfg.replace(shortcut=False), ids, seed=seed)
    # the first one drawn in blue: "with shortcut", as in the book's chart beside it
    return {"book_grad_plot": book, "gpt_grad_plot": gpt_gradient_figure(
        with_sc, without, (t("gradients.with", "with shortcut"),
                           t("gradients.without", "without shortcut")))}


@dataclass(frozen=True)
class Lesson(View):
    """Whether the lesson's charts are shown for these models."""

    on: bool = False

    KEPT_BY_NEW_MODELS = KEPT_WITHOUT_B = False


@handler(outputs=(*PLOTS, "session"))
def gradient_views(session):
    """/gradients: the book's 4.4 gradients, and model A's config's per block."""
    session.show(Lesson, on=True)
    return {**lesson(session), "session": session}


@refresh.renders(*PLOTS)
def render(session) -> dict:
    """The lesson's charts, once the button was pressed for these models."""
    if session.view(Lesson).on:
        return lesson(session)
    return {"book_grad_plot": None, "gpt_grad_plot": None}


def create(page):
    with gr.Accordion(label("gradients.title", "Why shortcut connections? (book 4.4)"),
                      open=False):
        page.add(gr.Button(label("gradients.button", "Run one backward pass"),
                           elem_id="grad_btn"))
        with gr.Row():
            page.add(gr.Plot(show_label=False, label=label("gradients.book", "The book's "
                                                           "5-layer network"),
                             elem_id="book_grad_plot"))
            page.add(gr.Plot(show_label=False, label=label(*PER_BLOCK),
                             elem_id="gpt_grad_plot"))


def wire(page):
    page.on("grad_btn.click", gradient_views, ["session"], api_name="gradients",
            concurrency_limit=1)
