"""The Train tab's live view of a training job, and the stream that sends it while the job
trains."""
from __future__ import annotations

import time

import gradio as gr

from .. import prefs, shared
from ..handlers import Pause
from ..i18n import say
from ..live_figure import value_of
from ..plots.training import (grad_norm_figure, loss_figure, progress_markdown,
                              samples_markdown, table_rows, variant_name)
from ..results import shared_figures
from ...runtime.training.copying_task import induction_variant
from ...runtime.training.lab import session_view
from ...runtime.training.views import Redraws

POLL_SECONDS = 1.0      # how often the progress line is sent while a job trains
# ... and the rest at most this often: redrawing the figures is most of what an update costs
# the page, and once a second left a slow page little time to answer a click (bench/README.md)
FIGURE_SECONDS = 2.0
LIVE = ("train_progress", "train_loss_plot", "train_table", "train_grad_plot", "train_samples",
        "train_choice")


def live(view, sharing: str = "") -> dict:
    """The live view (``sharing``: what the session shares of the job)."""
    return {**_drawn(view, sharing), "train_choice": choice_of(view)}


def live_of(job, seen, view, sharing) -> dict:
    """``live(view, sharing)``, drawn once for every session that sees ``job`` at the same
    point (``seen``). Keyed by the job's key: the job itself would keep its models alive."""
    return {**shared_figures(("train", job.key, seen), lambda: _drawn(view, sharing)),
            "train_choice": choice_of(view)}


def _drawn(view, sharing) -> dict:
    return {"train_progress": progress_markdown(view) + sharing,
            "train_loss_plot": value_of(loss_figure(view)), "train_table": table_rows(view),
            "train_grad_plot": value_of(grad_norm_figure(view)),
            "train_samples": samples_markdown(view)}


def choice_of(view, keep=False):
    """The trained variants to choose from; unless ``keep``, one chosen (on the copying task
    the one with the induction head, else the first)."""
    labels = [r.label for r in view.runs] if view is not None else []
    choices = [(variant_name(n), n) for n in labels]
    return gr.update(choices=choices) if keep else gr.update(
        choices=choices, value=labels[induction_variant(view.runs)] if labels else None)


def drawing_of(view, sharing) -> tuple:
    """What a drawing of ``view`` shows: the key of its figures in the shared cache (the
    seconds too: another run of the same job took another time)."""
    return (view.status, sharing, prefs.current(), view.step,
            tuple(len(r.eval_steps) for r in view.runs), tuple(r.sample_step for r in view.runs),
            round(view.seconds))


def job_view(job, owner) -> tuple:
    """``job``'s view as this session sees it, and the line saying what it shares of it."""
    view, sharing = session_view(shared.LAB, owner, job)
    return view, "" if sharing is None else " " + say(sharing)


def watch(job, owner, clock=time.monotonic, note="", pausing=False):
    """Yield the live view while ``job`` trains and this session watches it: what changed,
    every POLL_SECONDS at most (``Redraws``: the whole view or the progress line); last, the
    whole view once the job ended or the session stopped watching."""
    redraws = Redraws(FIGURE_SECONDS, clock)
    while True:
        running = job.running and shared.LAB.watching(owner, job)
        # (in the session's view settings of this step: handlers.handler)
        view, sharing = job_view(job, owner)
        sharing += note
        seen = drawing_of(view, sharing)
        redraw = redraws.redraw(seen, running)
        if redraw == "whole":
            yield live_of(job, seen, view, sharing)
        elif redraw == "progress":
            yield {"train_progress": progress_markdown(view) + sharing}
        if not running:
            return
        if pausing:
            yield Pause(POLL_SECONDS)       # the handler's: served, it holds no thread
        else:
            time.sleep(POLL_SECONDS)
