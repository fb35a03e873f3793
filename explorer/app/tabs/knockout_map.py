"""Tab 7's map of which parts matter: what knocking out each head and each part of each block
of model A costs on a text, estimated at once, then made exact cell by cell in a stream."""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass

import gradio as gr

from ...book.errors import Message
from ...probes.attribution import TOP, estimate_sent, exact_tables, take_exact
from ...probes.maps import knockout_numbers, knockout_plan
from ...runtime import offload
from ...runtime.placement import Work
from ...runtime.training.setup import story_text
from ..handlers import handler
from ..i18n import say, t
from ..inputs import as_choice, as_flag
from ...probes.budget import TRACE_MEMORY_SHARE
from ...probes.prompts import prompt_ids
from ..pickers import choose, chosen
from ..plots.knockout import METRICS, knockout_map_html
from ..prompts import prompt_of, use
from ...runtime.results import where_noted
from ..session import View
from ..shared import CACHE, model_a

TEXTS = {"the prompt": ("knock.text_prompt", "the prompt"),
         "the training story": ("knock.text_story", "the training story (its first tokens)")}


@handler(outputs=("knock_prompt",))
def text_chosen(text, session):
    """The text radio fills the box above the map: the session's prompt, or the story."""
    text = as_choice(text, Message("field.knock_text", "text"), TEXTS)
    choose(session, knock_text=text)
    if text == "the prompt":
        return {"knock_prompt": prompt_of(session)}
    # (the model's context from its key: nothing is built for a radio button)
    return {"knock_prompt": story_text(session.models[0].key.config if session.models
                                       else None)}


# The sessions whose map is being made -> set when the session leaves: its map then stops at
# the next batch (it would hold a worker, and the next session's map, for nobody).
_LEFT: dict[str, threading.Event] = {}
UPDATE_S = 0.25            # the stream sends the map at most this often (and at its end)


def release(session_hash) -> None:
    """The page closed: a map it is making stops."""
    left = _LEFT.get(session_hash)
    if left is not None:
        left.set()


def _status(state: str, result, **fields) -> tuple:
    """The progress line's state, said in the page's language when drawn."""
    return (state, {"exact": result.n_exact, "cells": len(result.cells()), **fields})


def status_text(status) -> str:
    if not status:
        return ""
    state, f = status
    where = " · ".join(say(note) for note in f.get("where", ()))
    return _state_text(state, f) + (f" ({where})" if where else "")


def _state_text(state, f) -> str:
    if state == "estimating":
        return t("knock.estimating", "Estimating every cell from one backward pass …")
    if state == "refining":
        return t("knock.refining", "Computing exact values, largest estimate first: {exact} "
                                   "of {cells} cells exact …", **f)
    if state == "top_done":
        return t("knock.top_done", "The estimate's top {top} and the cells it cannot estimate "
                                   "are exact ({exact} of {cells} cells, {seconds:.1f} s). For "
                                   "the rest, tick <b>exact everywhere</b> and press the button "
                                   "again.", **f)
    if state == "stopped":
        return t("knock.stopped", "Stopped: {exact} of {cells} cells exact; the others are "
                                  "estimates (≈).", **f)
    return t("knock.all_exact", "Every cell exact ({seconds:.1f} s for the exact values).", **f)


@dataclass(frozen=True)
class MapView(View):
    """Model A's knock-out map (kept while B changes), and the last click applied."""

    result: object = None           # explorer.probes' KnockoutResult
    metric: str = "loss"
    weights_key: object = None      # model A's weights, which the map is of
    status: tuple | None = None     # its progress: (kind, fields)
    applied: int = 0


@handler(outputs=("knock_map", "knock_numbers", "session"))
def parts_map(prompt, metric, everywhere, session, request: gr.Request = None):
    """/knockout_map (streams): model A's map for the text ``prompt``, estimated, then exact
    where it counts (``knockout_plan``; every cell with ``everywhere``), coloured by
    ``metric``. Each update is the map so far."""
    metric = as_choice(metric, Message("field.knock_metric", "metric"), METRICS)
    everywhere = as_flag(everywhere, Message("field.knock_everywhere", "exact everywhere"))
    model = model_a(session)
    ids = prompt_ids(prompt, model)[-model.cfg.context_length:]
    if chosen(session, "knock_text") == "the prompt":
        use(session, prompt)                     # (the session's prompt, for every tab)
    key = session.models[0].key.weights_key
    owner = getattr(request, "session_hash", None) or object()   # none: an in-process call
    left = _LEFT.setdefault(owner, threading.Event())
    budget = CACHE.budget_bytes * TRACE_MEMORY_SHARE
    try:
        shown = session.view(MapView)
        if (shown.result is not None and shown.weights_key == key
                and shown.result.token_ids == ids):
            result = shown.result                # the same map: go on where it stopped
            where = shown.status[1].get("where", []) if shown.status else []
        else:
            # about a forward and a backward pass, and the passes of the exact-only cells
            result, ran = offload.compute(key, model, estimate_sent, (ids,),
                                          {"max_bytes": budget},
                                          Work.forward(model.cfg, len(ids), passes=3))
            where = where_noted(ran)
        session.show(MapView, result=result, metric=metric, weights_key=key,
                     status=_status("refining", result, where=where))
        yield _update(session, result)
        sent = time.perf_counter()
        for chunk in knockout_plan(result, everywhere):
            if left.is_set() or not _going_on(session, result):
                return             # the page left, Stop was pressed, or another map began
            # each cell: the rest of the model from its block, at most a pass
            tables, ran = offload.compute(key, model, exact_tables, (result, chunk),
                                          {"max_bytes": budget},
                                          Work.forward(model.cfg, len(ids), passes=len(chunk)))
            take_exact(result, tables)
            where = where_noted(ran)
            if not _going_on(session, result):
                return             # (the cell stays exact: the next redraw shows it)
            session.show(MapView, status=_status("refining", result, where=where))
            if time.perf_counter() - sent >= UPDATE_S:
                sent = time.perf_counter()
                yield _update(session, result)
        done = ("all_exact" if result.n_exact == len(result.cells()) else "top_done")
        session.show(MapView, status=_status(done, result, top=TOP,
                                             seconds=result.exact_seconds, where=where))
        yield _update(session, result)
    finally:
        _LEFT.pop(owner, None)


def _going_on(session, result) -> bool:
    shown = session.view(MapView)
    return shown.result is result and shown.status[0] != "stopped"


def _update(session, result) -> dict:
    return {"knock_map": map_html(session), "knock_numbers": knockout_numbers(result),
            "session": session}


@handler(outputs=("knock_map",))
def stopped(session):
    """Stop: the map keeps the cells made exact so far; the stream makes no more."""
    shown = session.view(MapView)
    if shown.status and shown.status[0] == "refining":
        session.show(MapView, status=_status("stopped", shown.result))
    return {"knock_map": map_html(session)}


def map_html(session) -> str:
    """Model A's map, if any, with B's knock-out outlined."""
    shown = session.view_of_a(MapView, keep=("metric", "applied"))
    if shown is None:
        return knockout_map_html(None, applied=session.view(MapView).applied)
    return knockout_map_html(shown.result, shown.metric,
                             current=session.b_interventions or None,
                             status=status_text(shown.status), applied=shown.applied)


@handler(outputs=("knock_map",))
def metric_changed(metric, session):
    shown = session.view_of_a(MapView, keep=("metric", "applied"))
    if shown is None:
        return {}
    metric = as_choice(metric, Message("field.knock_metric", "metric"), METRICS)
    session.show(MapView, metric=metric)
    return {"knock_map": map_html(session)}


