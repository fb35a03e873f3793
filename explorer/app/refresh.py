"""What follows the session everywhere: each tab registers here what it shows again when the
session's models change (its results back to their hints, its pickers fitted to the new model)
and when the page's language or lecture mode changes (its views drawn again from the session).

A handler that changes the session's models (a build, "Use this model", pinning, an
intervention) returns ``new_model(session)`` with its own outputs and declares
``NEW_MODEL`` among them, so no view can be left showing a model that is gone, and no picker
can keep a layer the new model does not have.
"""
from __future__ import annotations

from typing import Callable

from .shared import WEIGHTS_NOTES, status_line, weights_note

_new_model: list[tuple[tuple[str, ...], Callable]] = []
_redraw: list[tuple[tuple[str, ...], Callable]] = []


def _register(registry, outputs):
    taken = {name for names, _ in registry for name in names}
    if taken & set(outputs):
        raise RuntimeError(f"registered twice: {sorted(taken & set(outputs))}")

    def register(fn):
        registry.append((tuple(outputs), fn))
        return fn
    return register


def on_new_model(*outputs: str):
    """Decorate ``fn(session) -> {name: value}``: run whenever the session's models change."""
    return _register(_new_model, outputs)


def on_redraw(*outputs: str):
    """Decorate ``fn(session) -> {name: value}``: run when the language or lecture mode
    changes."""
    return _register(_redraw, outputs)


def new_model_outputs() -> tuple[str, ...]:
    return tuple(name for names, _ in _new_model for name in names)


def redraw_outputs() -> tuple[str, ...]:
    return tuple(name for names, _ in _redraw for name in names)


def new_model(session) -> dict:
    out = {}
    for _, fn in _new_model:
        out.update(fn(session))
    return out


def redraw(session) -> dict:
    out = {}
    for _, fn in _redraw:
        out.update(fn(session))
    return out


@on_new_model("status", *WEIGHTS_NOTES)
@on_redraw("status", *WEIGHTS_NOTES)
def _models_named(session) -> dict:
    """The status line and every tab's note of the weights it shows (first: the status line
    is every model-changing endpoint's first output)."""
    note = weights_note(session)
    return {"status": status_line(session), **{name: note for name in WEIGHTS_NOTES}}
