"""The shortcut lesson (book 4.4), in tab 2: one backward pass through the book's 5-layer
network, and through the session's GPT, each with and without shortcut connections."""
from __future__ import annotations

from types import SimpleNamespace

import gradio as gr

from ...book.gradients import gpt_gradients, shortcut_demo
from ...book.tokenizer import get_tokenizer
from ...runtime.cache import model_bytes
from ..plots.curves import gpt_gradient_figure, gradient_figure
from ..shared import DEFAULT_PROMPT, friendly

# Two trainable copies of the session's config are built: only for models up to this size.
MAX_MODEL_BYTES = 200 * 1024 ** 2


@friendly
def gradient_views(state):
    book = gradient_figure(shortcut_demo(False), shortcut_demo(True))
    if not state or "key" not in state:
        return book, None
    cfg = state["key"].config
    if model_bytes(cfg) > MAX_MODEL_BYTES:
        raise gr.Error("The GPT gradient comparison builds two trainable copies; use a model "
                       "under 200 MB (a teaching preset) for it.")
    ids = get_tokenizer().encode(DEFAULT_PROMPT + " forward, one step at a time.")
    ids = ids[: cfg.context_length]
    with_sc = gpt_gradients(cfg.replace(shortcut=True), ids, seed=state["key"].seed)
    without = gpt_gradients(cfg.replace(shortcut=False), ids, seed=state["key"].seed)
    return book, gpt_gradient_figure(without, with_sc, ("without shortcut", "with shortcut"))


def create_ui():
    with gr.Accordion("Why shortcut connections? (book 4.4)", open=False):
        button = gr.Button("Run one backward pass")
        with gr.Row():
            book_plot = gr.Plot(show_label=False, label="The book's 5-layer network")
            gpt_plot = gr.Plot(show_label=False, label="Your GPT config, per block")
    return SimpleNamespace(button=button, book_plot=book_plot, gpt_plot=gpt_plot)


def create_event_handlers(lesson, state):
    lesson.button.click(gradient_views, state, [lesson.book_plot, lesson.gpt_plot],
                        api_name="gradients", concurrency_limit=1)
