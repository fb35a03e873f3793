"""The user's input, checked: an API call can send any JSON value for any input, and Gradio lets
some through as they came (a list passes its check of a dropdown's choices). A value the
explorer cannot use is an ``ExplorerError`` naming the input (``name``: a ``Message``)."""
from __future__ import annotations

import numpy as np

from ..book.errors import ExplorerError, Message
from . import gradio_private

# The app's limits (one source of truth; the README quotes them).
MAX_NEW_TOKENS = 500
MAX_DIGITS = 30     # a whole number typed in a box; longer is not a count anyone means


def kind_of(value) -> Message:
    kinds = {list: ("input.kind_list", "a list"), dict: ("input.kind_object", "a JSON object"),
             str: ("input.kind_text", "text"), bool: ("input.kind_flag", "true/false"),
             type(None): ("input.kind_nothing", "nothing")}
    if type(value) in kinds:
        return Message(*kinds[type(value)])
    return Message("input.kind_other", "a {type}", type=type(value).__name__)


def _shown(value) -> str:
    return f"{value!r:.60}"


def as_int(value, name: Message) -> int:
    """A whole number (a box or slider's value)."""
    if value is None or (isinstance(value, float) and not np.isfinite(value)):
        raise ExplorerError("input.int_empty", "{name} is empty: enter a whole number.",
                            name=name)
    if isinstance(value, float) and value != int(value):
        raise ExplorerError("input.int", "{name} must be a whole number (got {value}).",
                            name=name, value=value)
    if isinstance(value, bool) or not isinstance(value, (int, float, str, np.integer,
                                                         np.floating)):
        raise ExplorerError("input.int", "{name} must be a whole number (got {value}).",
                            name=name, value=kind_of(value))
    if isinstance(value, str) and len(value.strip()) > MAX_DIGITS:
        raise ExplorerError("input.int_long", "{name} must be a whole number of at most "
                            "{most} digits.", name=name, most=MAX_DIGITS)
    try:
        return int(value)
    except (TypeError, ValueError):
        raise ExplorerError("input.int", "{name} must be a whole number (got {value}).",
                            name=name, value=_shown(value)) from None


def as_number(value, name: Message) -> float:
    """A finite number (a slider's value)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ExplorerError("input.number", "{name} must be a number (got {value}).",
                            name=name, value=kind_of(value))
    if not np.isfinite(value):
        raise ExplorerError("input.number_finite", "{name} must be a finite number (got "
                            "{value}).", name=name, value=value)
    return float(value)


def as_choice(value, name: Message, options):
    """One of ``options`` (a dropdown's or radio's value)."""
    options = list(options)
    if not isinstance(value, str) or value not in options:
        raise ExplorerError("input.choice", "{name} must be one of {options} (got {value}).",
                            name=name, options=", ".join(map(str, options)),
                            value=repr(value) if isinstance(value, str) else kind_of(value))
    return value


def as_choices(value, name: Message, options) -> list:
    """A list of some of ``options`` (a checkbox group's value)."""
    options = list(options)
    if not isinstance(value, list) or not all(isinstance(v, str) and v in options
                                              for v in value):
        raise ExplorerError("input.choices", "{name} must be a list of some of {options} "
                            "(got {value}).", name=name, options=", ".join(options),
                            value=f"{value!r:.80}")
    return value


def as_flag(value, name: Message) -> bool:
    """A checkbox's value: true or false."""
    if not isinstance(value, bool):
        raise ExplorerError("input.flag", "{name} must be true or false (got {value}).",
                            name=name, value=kind_of(value))
    return value


def selected(event, name: Message):
    """A select event's ``value`` (a cell of the knock-out map, a stage of the diagram), from a
    ``gr.EventData``: ``gr.SelectData`` would fail on an API call's data inside Gradio, before
    the handler could say why."""
    data = gradio_private.event_data(event) if event is not None else None
    if not isinstance(data, dict) or "value" not in data:
        got = (Message("input.no_value", "no “value”") if isinstance(data, dict)
               else kind_of(data))
        raise ExplorerError("input.select_event", "A click on “{name}” came without what was "
                            "clicked (the event's data must be a JSON object with a “value”; "
                            "got {value}).", name=name, value=got)
    return data["value"]


def layer_in(n_layers: int, layer, name: Message) -> int:
    layer = as_int(layer, name)
    if not 0 <= layer < n_layers:
        raise ExplorerError("input.layer_missing", "Layer {layer} does not exist: this model "
                            "has layers 0 to {last}.", layer=layer, last=n_layers - 1)
    return layer
