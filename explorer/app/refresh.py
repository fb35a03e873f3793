"""Every view drawn from the session: each tab registers its ``render(session) -> {name:
value}`` here, and ``render_all`` draws them all. A new model (a build, "Use this model",
pinning, an intervention, Remove B), a language or lecture-mode switch and a link each return
``render_all(session)`` with their own outputs (declaring ``all_outputs`` among them), so no
view can be left showing a model that is gone, in another language, or with a picker the
model does not fit.

A render is a function of the session alone. What the user may have typed since the models
changed (the Build tab's form, the interventions box, the generated text) and the files
exported for them are drawn only when the models changed since the page was last drawn
(``Session.new_models``). A view drawn from the session's trace is drawn again by every trace
too (``render_of_trace``).
"""
from __future__ import annotations

from typing import Callable

import gradio as gr

from .i18n import label
from .shared import NO_MODEL_NOTE, status_line, weights_note

# What a model-changing endpoint returns first (its API's order): the status line and the
# Build tab's views of the new model; then everything else that follows it.
FIRST = ("status", "arch", "params_table", "params_plot", "memory")
# (module, function) -> (outputs, function): a module loaded again (a test's reload) replaces
# its own registration, in its place.
_renders: dict[tuple[str, str], tuple[tuple[str, ...], Callable]] = {}
_of_trace: set[tuple[str, str]] = set()


def renders(*outputs: str, of_trace: bool = False):
    """Decorate a view's ``render(session) -> {name: value}`` (some of ``outputs``).
    ``of_trace``: the view shows the session's trace, so a new trace draws it again."""
    def register(fn):
        name = (fn.__module__, fn.__qualname__)
        taken = {n for key, (names, _) in _renders.items() if key != name for n in names}
        if taken & set(outputs):
            raise RuntimeError(f"rendered twice: {sorted(taken & set(outputs))}")
        _renders[name] = (tuple(outputs), fn)
        (_of_trace.add if of_trace else _of_trace.discard)(name)
        return fn
    return register


def all_outputs() -> tuple[str, ...]:
    return tuple(name for names, _ in _renders.values() for name in names)


def trace_outputs() -> tuple[str, ...]:
    return tuple(name for key in _renders if key in _of_trace for name in _renders[key][0])


def render_of_trace(session) -> dict:
    """The views of the session's trace in other tabs, after a new trace."""
    out = {}
    for key, (_, fn) in _renders.items():
        if key in _of_trace:
            out.update(fn(session))
    return out


def render_all(session) -> dict:
    """Every view, from the session; then the session knows the page shows its models. The
    status line last: it says what fitting the views to new models changed (``pickers``)."""
    out = {}
    for _, fn in _renders.values():
        if fn is not _models_named:
            out.update(fn(session))
    out.update(_models_named(session))
    session.drawn_for = session.keys
    return out


@renders("status")
def _models_named(session) -> dict:
    """The status line and every tab's note of the weights it shows (first: the status line
    is every model-changing endpoint's first output)."""
    note = weights_note(session)
    return {"status": status_line(session), **{name: note for name in _notes}}


_notes: list[str] = []   # the tabs' notes of the weights they show, as their modules load


def weights_notes() -> tuple[str, ...]:
    """Every tab's note of the weights it shows (``weights_note``), in the tabs' order."""
    return tuple(_notes)


def weights_note_of(tab: str, *, in_lecture: bool = False) -> Callable[[], gr.Markdown]:
    """Tab ``tab``'s note of the weights it shows, ``<tab>_weights``, drawn with the status line
    (and among /build's outputs): called as the tab's module loads; its ``create`` adds what
    this returns. Lecture mode hides the note (``.weights-note``, page.css) unless
    ``in_lecture``."""
    name = f"{tab}_weights"
    if name not in _notes:
        _notes.append(name)
        renders("status", *_notes)(_models_named)   # in its place: the first outputs
    return lambda: gr.Markdown(label(NO_MODEL_NOTE.id, NO_MODEL_NOTE.text), elem_id=name,
                               elem_classes=[] if in_lecture else ["weights-note"])
