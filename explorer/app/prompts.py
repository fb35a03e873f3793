"""The session's one prompt (``session.Prompt``) and the page's boxes that show it. A tab that
uses its box's text makes it the session's prompt (``use``); the boxes are drawn from the
session with the trace, with every view, and when a tab is chosen, but only when the prompt
changed since they were last drawn (a language switch keeps what the user typed)."""
from __future__ import annotations

from ..probes.budget import check_trace_size
from ..probes.prompts import models_prompt_ids
from . import refresh
from .handlers import handler
from .pickers import chosen
from .results import shared_trace
from .session import Prompt
from .shared import CACHE, models_of

BOXES = ("trace_prompt", "gen_prompt", "knock_prompt")


def prompt_of(session) -> str:
    return session.view(Prompt).text


def use(session, text) -> None:
    """``text`` becomes the session's prompt (not text: the tab's own checks refuse it)."""
    if isinstance(text, str) and text != prompt_of(session):
        session.show(Prompt, text=text)


def set_by_task(session, text: str) -> None:
    """The prompt of model A's task: another model A brings back the prompt of now."""
    before = session.view(Prompt)
    session.show(Prompt, text=text, task=session.keys[0],
                 before=before.before if before.task is not None else before.text)


def trace_all(session, prompt) -> None:
    """Every model of the session traces ``prompt``, which becomes the session's."""
    models = models_of(session)
    ids = models_prompt_ids(prompt, models)
    for model in models:
        if len(ids) <= model.cfg.context_length:   # longer: trace() says to shorten it
            check_trace_size(model.cfg, len(ids), CACHE.budget_bytes)
    session.traces = tuple(shared_trace(key, model, ids)
                           for key, model in zip(session.keys, models))
    session.prompt = prompt
    use(session, prompt)


@refresh.renders(*BOXES, of_trace=True)
def render(session) -> dict:
    """Every prompt box, if the prompt changed (the map's only while it measures the prompt)."""
    prompt = session.view(Prompt)
    if prompt.text == prompt.drawn:
        return {}
    session.show(Prompt, drawn=prompt.text)
    boxes = [b for b in BOXES if b != "knock_prompt" or chosen(session, "knock_text")
             == "the prompt"]
    return {box: prompt.text for box in boxes}


@handler(outputs=(*BOXES, "session"))
def shown(session):
    """A tab chosen: its prompt box shows the session's prompt (another tab may have set it)."""
    return {**render(session), "session": session}


def wire(page):
    for tab_id in page.tab_ids:
        page.on(page[f"{tab_id}_tab"].select, shown, ["session"], api_visibility="private",
                show_progress="hidden")
