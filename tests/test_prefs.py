"""The page's view settings (explorer/app/prefs.py): the language and lecture mode reach every
handler as its last two inputs, ``handler`` puts them in place for the whole call (every step
of a stream too), and the figures and texts follow them."""
import inspect

import gradio as gr
import pytest

from explorer.app import i18n, prefs
from explorer.app.languages import messages
from explorer.app.layout import build_app
from explorer.app.plots.statistics import layer_stats_figure
from explorer.app.plots.style import LECTURE_INK
from explorer.app.handlers import handler
from explorer.book.errors import ExplorerError
from explorer.book.tokenizer import get_tokenizer
from explorer.probes import trace
from explorer.runtime.build import build_model
from explorer.book.config import PRESETS

ZH = prefs.Prefs("zh")


@pytest.fixture(scope="module")
def demo():
    return build_app()


def _view_inputs(fn):
    return tuple(getattr(block, "elem_id", None) for block in list(fn.inputs)[-2:])


def test_every_handler_that_takes_the_view_settings_gets_them_as_its_last_inputs(demo):
    wired = 0
    for fn in demo.fns.values():
        if fn.fn is None:
            continue
        names = list(inspect.signature(fn.fn).parameters)[-2:]
        if names == ["lang", "lecture"]:
            assert _view_inputs(fn) == ("lang", "lecture"), fn.name
            wired += 1
    assert wired >= 30


def test_every_public_endpoint_speaks_the_pages_language(demo):
    public = [fn for fn in demo.fns.values() if fn.api_name and fn.api_visibility == "public"]
    assert len(public) >= 15
    for fn in public:
        assert _view_inputs(fn) == ("lang", "lecture"), fn.api_name


def test_the_handler_puts_the_settings_in_place_and_keeps_them_for_nested_calls():
    seen = []

    @handler(outputs=())
    def inner():
        seen.append(prefs.current())
        return {}

    @handler(outputs=("x",))
    def outer(x):
        seen.append(prefs.current())
        inner()             # no settings given: the caller's stay
        return {"x": x}

    assert outer(1, "zh", True) == {"x": 1}
    assert seen == [prefs.Prefs("zh", True)] * 2
    assert prefs.current() == prefs.Prefs()          # and they are gone after the call
    outer(2)
    assert seen[-1] == prefs.Prefs()


def test_the_handler_keeps_the_settings_for_every_step_of_a_stream_run_elsewhere():
    """Gradio runs each step of a generator in a copy of its own context: the settings must be
    in place again at every step."""
    import contextvars

    @handler(outputs=("lang",))
    def stream():
        for _ in range(3):
            yield {"lang": prefs.current().lang}

    steps = stream("zh", False)
    got = [contextvars.copy_context().run(next, steps)["lang"] for _ in range(3)]
    assert got == ["zh"] * 3


@pytest.mark.parametrize("lang, lecture, message", [
    ("fr", False, "lang must be one of en, zh"),
    (["zh"], False, "lang must be one of en, zh"),
    ("zh", "yes", "lecture must be true or false"),
])
def test_malformed_view_settings_are_refused_with_a_message(lang, lecture, message):
    @handler(outputs=())
    def ran():
        return {}

    with pytest.raises(gr.Error, match=message):
        ran(lang, lecture)


def test_a_message_from_the_core_is_shown_in_the_pages_language():
    @handler(outputs=())
    def refused():
        raise ExplorerError("prompt.empty", "The prompt is empty: type some text first.")

    with pytest.raises(gr.Error) as english:
        refused("en", False)
    with pytest.raises(gr.Error) as chinese:
        refused("zh", False)
    assert english.value.message == "The prompt is empty: type some text first."
    assert chinese.value.message == messages("zh")["prompt.empty"]


def test_say_fills_the_fields_of_a_message_and_says_a_message_inside_another(monkeypatch):
    from explorer.book.errors import Message
    monkeypatch.setitem(messages("zh"), "test.layer", "第 {layer} 层有 {n} 个头。")
    monkeypatch.setitem(messages("zh"), "test.pre", "前置归一化")
    inner = Message("test.pre", "pre-LN")
    with prefs.using(ZH):
        assert i18n.t("test.layer", "Layer {layer} has {n} heads.", layer=3, n=12) == \
            "第 3 层有 12 个头。"
        assert i18n.t("test.layer", "Layer {layer} has {n} heads.", layer=inner, n=2) == \
            "第 前置归一化 层有 2 个头。"
        assert i18n.t("test.unknown", "Nothing like it.") == "Nothing like it."
        assert i18n.say("plain text") == "plain text"
    assert i18n.t("test.layer", "Layer {layer} has {n} heads.", layer=3, n=12) == \
        "Layer 3 has 12 heads."


def test_lecture_mode_makes_every_figure_larger_thicker_and_darker():
    model = build_model(PRESETS["teach-tiny"], seed=123, device="cpu")
    tr = trace(model, get_tokenizer().encode("Every effort moves you"))
    plain = layer_stats_figure([tr])
    with prefs.using(prefs.Prefs("en", True)):
        lecture = layer_stats_figure([tr])
    assert lecture.layout.font.size > plain.layout.font.size
    assert lecture.layout.title.font.size > plain.layout.title.font.size
    assert lecture.layout.font.color == LECTURE_INK
    assert lecture.layout.xaxis.tickfont.size > plain.layout.xaxis.tickfont.size
    widths = [(a.line.width, b.line.width) for a, b in zip(plain.data, lecture.data)
              if a.line.width]
    assert widths and all(b > a for a, b in widths)
    assert lecture.layout.height <= plain.layout.height


def test_the_figures_say_their_titles_in_the_pages_language():
    model = build_model(PRESETS["teach-tiny"], seed=123, device="cpu")
    tr = trace(model, get_tokenizer().encode("Every effort moves you"))
    with prefs.using(ZH):
        fig = layer_stats_figure([tr])
    assert fig.layout.title.text == f"<b>{messages('zh')['statistics.statistics_across_layers']}</b>"
    assert layer_stats_figure([tr]).layout.title.text == "<b>Statistics across layers</b>"


def test_no_choice_has_a_value_that_the_browser_would_translate(demo):
    """Gradio's frontend translates every text of the page that is one of its i18n keys: a
    choice's value among them would come back translated (and be refused)."""
    from explorer.app.i18n import _BROWSER
    keys = {key for texts in _BROWSER.values() for key in texts}
    checked = 0
    for block in demo.blocks.values():
        for choice in getattr(block, "choices", None) or []:
            value = choice[1] if isinstance(choice, (tuple, list)) else choice
            assert value not in keys, (type(block).__name__, block.elem_id, value)
            checked += 1
    assert checked > 50
