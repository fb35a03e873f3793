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

# What a model-changing endpoint returns first (its API's order): the status line and the
# Build tab's views of the new model; then everything else that follows it.
FIRST = ("status", "arch", "params_table", "params_plot", "memory")
# (module, function) -> (outputs, function): a module loaded again (a test's reload) replaces
# its own registrations, in their place.
_new_model: dict[tuple[str, str], tuple[tuple[str, ...], Callable]] = {}
_redraw: dict[tuple[str, str], tuple[tuple[str, ...], Callable]] = {}


def _register(registry, outputs):
    def register(fn):
        name = (fn.__module__, fn.__qualname__)
        taken = {n for key, (names, _) in registry.items() if key != name for n in names}
        if taken & set(outputs):
            raise RuntimeError(f"registered twice: {sorted(taken & set(outputs))}")
        registry[name] = (tuple(outputs), fn)
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
    return tuple(name for names, _ in _new_model.values() for name in names)


def redraw_outputs() -> tuple[str, ...]:
    return tuple(name for names, _ in _redraw.values() for name in names)


def new_model(session) -> dict:
    out = {}
    for _, fn in _new_model.values():
        out.update(fn(session))
    return out


def redraw(session) -> dict:
    out = {}
    for _, fn in _redraw.values():
        out.update(fn(session))
    return out


@on_new_model("status", *WEIGHTS_NOTES)
@on_redraw("status", *WEIGHTS_NOTES)
def _models_named(session) -> dict:
    """The status line and every tab's note of the weights it shows (first: the status line
    is every model-changing endpoint's first output)."""
    note = weights_note(session)
    return {"status": status_line(session), **{name: note for name in WEIGHTS_NOTES}}
