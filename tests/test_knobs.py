"""The one table of config knobs (``explorer.book.knobs``): one row per GPTConfig field, and
everything that follows from a row (the Build tab's widget and check, /build's parameters, a
comparison's names, the diagram's outline, the C step's support) follows from it."""
import inspect
import typing
from dataclasses import fields

import gradio as gr
import pytest

from explorer.app.layout import build_app
from explorer.app.shared import DEFAULT_CONFIG
from explorer.app.tabs.build import FIELDS, build, knob_value, knob_widget, preset_values
from explorer.book.config import GPTConfig
from explorer.book.errors import ExplorerError, Message
from explorer.book.knobs import KNOBS, short_name

FIELD_TYPES = typing.get_type_hints(GPTConfig)
KINDS = {"count": int, "rate": float, "choice": str, "flag": bool}
# The widget (and, for numbers, the rounding) each kind needs.
WIDGETS = {"count": (gr.Number, 0), "rate": (gr.Number, None), "choice": (gr.Radio, None),
           "flag": (gr.Checkbox, None)}


def test_every_config_field_has_exactly_one_knob_row_in_config_order():
    assert [knob.field for knob in KNOBS] == [f.name for f in fields(GPTConfig)]


@pytest.mark.parametrize("knob", KNOBS, ids=lambda k: k.field)
def test_each_row_is_complete_and_fits_its_field(knob):
    assert KINDS[knob.kind] is FIELD_TYPES[knob.field]
    assert isinstance(knob.label, Message) and knob.label.id == f"knob.{knob.field}"
    assert isinstance(knob.parts, frozenset)
    if knob.kind == "choice":
        assert knob.choices and knob.choices[0] == getattr(GPTConfig(), knob.field)
        values = knob.choices
    elif knob.kind == "flag":
        values = (True, False)
    else:
        values = (getattr(GPTConfig(), knob.field),)
    for value in values:      # a model is named by every value of every knob
        assert str(short_name(knob.field, value))
    assert len({k.naming for k in KNOBS}) == len(KNOBS)   # one naming order


def test_build_takes_the_preset_and_every_knob_by_name_in_config_order():
    names = list(inspect.signature(build).parameters)
    assert names == ["preset", *[f.name for f in fields(GPTConfig)], "seed", "device", "dtype",
                     "weights", "size", "weights_path", "weights_upload", "session",
                     "progress"]
    assert preset_values("gpt2-small") == {name: getattr(GPTConfig(), name) for name in FIELDS}


@pytest.mark.parametrize("knob", KNOBS, ids=lambda k: k.field)
def test_each_knob_row_builds_the_widget_and_value_of_its_field(knob):
    widget_class, precision = WIDGETS[knob.kind]
    default = getattr(DEFAULT_CONFIG, knob.field)
    with gr.Blocks():
        widget = knob_widget(knob, default)
    assert type(widget) is widget_class
    assert widget.elem_id == knob.field
    assert getattr(widget.label, "key", widget.label) == knob.label.id   # the browser's key
    if widget_class is gr.Number:
        assert widget.precision == precision
    # What the page sends back for the default, read as the config reads it.
    value = knob_value(knob, widget.preprocess(default))
    assert type(value) is FIELD_TYPES[knob.field] and value == default
    if widget_class is gr.Radio:
        assert [c[1] for c in widget.choices] == list(knob.choices)
        for choice in knob.choices:   # every choice offered is one the config takes
            assert getattr(GPTConfig.from_dict({knob.field: choice}), knob.field) == choice


@pytest.mark.parametrize("knob", KNOBS, ids=lambda k: k.field)
def test_an_empty_knob_is_refused_with_a_message_naming_it(knob):
    with pytest.raises(ExplorerError) as refused:
        knob_value(knob, None)
    assert str(refused.value).startswith(f"{knob.label.text} is empty: enter ")


def test_the_page_shows_one_widget_per_knob_with_the_default_presets_values():
    config = build_app().get_config_file()
    by_id = {c["props"].get("elem_id"): c for c in config["components"]}
    for knob in KNOBS:
        shown = by_id[knob.field]
        assert shown["type"] == WIDGETS[knob.kind][0].__name__.lower()
        assert shown["props"]["value"] == getattr(DEFAULT_CONFIG, knob.field)


def test_the_c_step_knows_exactly_the_knobs_the_table_says_it_computes():
    from explorer.native import decode
    assert decode._KNOBS == {knob.field for knob in KNOBS if knob.fast_step}
