"""The Build tab's table of config knobs: one row per GPTConfig field, each building the widget
and the value its field takes."""
import inspect
import typing
from dataclasses import fields

import gradio as gr
import pytest

from explorer.app.layout import build_app
from explorer.app.shared import DEFAULT_CONFIG
from explorer.app.tabs.build import KNOB_TABLE, KNOBS, build, preset_values
from explorer.book.config import GPTConfig

FIELD_TYPES = typing.get_type_hints(GPTConfig)
# The widget (and, for numbers, the rounding) each field type needs.
WIDGETS = {int: (gr.Number, 0), float: (gr.Number, None), str: (gr.Radio, None),
           bool: (gr.Checkbox, None)}


def test_every_config_field_has_exactly_one_knob_row():
    rows = [knob.field for knob in KNOB_TABLE]
    assert sorted(rows) == sorted(f.name for f in fields(GPTConfig))
    assert len(rows) == len(set(rows))


def test_build_takes_the_preset_and_every_knob_by_name_in_config_order():
    names = list(inspect.signature(build).parameters)
    assert names == ["preset", *[f.name for f in fields(GPTConfig)], "seed", "device", "dtype",
                     "weights", "size", "weights_path", "weights_upload", "state", "progress",
                     "lang", "lecture"]   # the page's view settings, last (explorer/app/prefs.py)
    assert preset_values("gpt2-small") == [getattr(GPTConfig(), name) for name in KNOBS]


@pytest.mark.parametrize("knob", KNOB_TABLE, ids=lambda k: k.field)
def test_each_knob_row_builds_the_widget_and_value_of_its_field(knob):
    field_type = FIELD_TYPES[knob.field]
    widget_class, precision = WIDGETS[field_type]
    default = getattr(DEFAULT_CONFIG, knob.field)
    with gr.Blocks():
        widget = knob.widget(default)
    assert type(widget) is widget_class
    assert widget.elem_id == knob.field
    assert getattr(widget.label, "key", widget.label) == knob.label   # translated: its key
    if widget_class is gr.Number:
        assert widget.precision == precision
    # What the page sends back for the default, read as the config reads it.
    value = knob.parse(widget.preprocess(default))
    assert type(value) is field_type and value == default
    if widget_class is gr.Radio:
        assert [c[1] for c in widget.choices] == list(knob.choices)
        for choice in knob.choices:   # every choice offered is one the config takes
            assert getattr(GPTConfig.from_dict({knob.field: choice}), knob.field) == choice


@pytest.mark.parametrize("knob", KNOB_TABLE, ids=lambda k: k.field)
def test_an_empty_knob_is_refused_with_a_message_naming_it(knob):
    with pytest.raises(gr.Error) as refused:
        knob.parse(None)
    assert refused.value.message.startswith(f"{knob.field} is empty: enter ")


def test_the_page_shows_one_widget_per_knob_with_the_default_presets_values():
    config = build_app().get_config_file()
    by_id = {c["props"].get("elem_id"): c for c in config["components"]}
    for knob in KNOB_TABLE:
        shown = by_id[knob.field]
        assert shown["type"] == WIDGETS[FIELD_TYPES[knob.field]][0].__name__.lower()
        assert shown["props"]["value"] == getattr(DEFAULT_CONFIG, knob.field)
