"""The page's view settings (explorer/app/prefs.py): the language and lecture mode are the
session's (``Session.prefs``, set by the toggles and /view_settings), ``handler`` puts them in
place for the whole call (every step of a stream too, as they are then), and the figures and
texts follow them."""
import gradio as gr
import pytest

from explorer.app import i18n, prefs
from explorer.app.languages import messages
from explorer.app.layout import build_app, redrawn, view_settings
from explorer.app.plots.statistics import layer_stats_figure
from explorer.app.plots.style import LECTURE_INK
from explorer.app.handlers import handler
from explorer.app.session import Session
from explorer.book.errors import ExplorerError
from explorer.book.tokenizer import get_tokenizer
from explorer.probes import trace
from explorer.runtime.build import build_model
from explorer.book.config import PRESETS

ZH = prefs.Prefs("zh")


@pytest.fixture(scope="module")
def demo():
    return build_app()


def _session(lang="en", lecture=False) -> Session:
    session = Session()
    session.prefs = prefs.Prefs(lang, lecture)
    return session


def test_no_event_takes_the_view_settings_but_the_one_that_sets_them(demo):
    """Language and lecture mode are the session's, not every event's last two inputs."""
    takers = set()
    for fn in demo.fns.values():
        names = {getattr(block, "elem_id", None) for block in fn.inputs}
        if names & {"lang", "lecture"} and fn.fn is not None:   # (not the page's own js)
            takers.add(fn.fn.__name__)
    assert takers == {"view_settings", "redrawn", "open_link"}   # (a link's first language)
    public = [fn for fn in demo.fns.values() if fn.api_name and fn.api_visibility == "public"]
    assert len(public) >= 15
    assert "view_settings" in {fn.api_name for fn in public}


def test_view_settings_become_the_sessions_and_every_view_is_drawn_in_them():
    session = Session()
    assert view_settings(session, "zh", False) == {"session": session}
    assert session.prefs == prefs.Prefs("zh", False)
    out = redrawn(session, "zh", True)             # a toggle on the page: every view again
    assert out["session"] is session and session.prefs == prefs.Prefs("zh", True)
    assert out["status"] == messages("zh")["status.no_model"]
    assert prefs.current() == prefs.Prefs()          # (nothing left in place after the call)


def test_the_handler_puts_the_sessions_settings_in_place_and_keeps_them_for_nested_calls():
    seen = []

    @handler(outputs=())
    def inner():
        seen.append(prefs.current())
        return {}

    @handler(outputs=("x",))
    def outer(x, session):
        seen.append(prefs.current())
        inner()             # no session: the caller's settings stay
        return {"x": x}

    assert outer(1, _session("zh", True)) == {"x": 1}
    assert seen == [prefs.Prefs("zh", True)] * 2
    assert prefs.current() == prefs.Prefs()          # and they are gone after the call
    outer(2, None)                                    # an API call without a session
    assert seen[-1] == prefs.Prefs()


def test_a_stream_follows_its_sessions_settings_at_every_step_run_elsewhere():
    """Gradio runs each step of a generator in a copy of its own context: the settings must be
    in place again at every step, and a toggle during the stream shows from its next step."""
    import contextvars

    @handler(outputs=("lang",))
    def stream(session):
        for _ in range(3):
            yield {"lang": prefs.current().lang}

    session = _session("zh")
    steps = stream(session)
    got = [contextvars.copy_context().run(next, steps)["lang"] for _ in range(2)]
    session.prefs = prefs.Prefs("en")
    got.append(contextvars.copy_context().run(next, steps)["lang"])
    assert got == ["zh", "zh", "en"]


@pytest.mark.parametrize("lang, lecture, message", [
    ("fr", False, "lang must be one of en, zh"),
    (["zh"], False, "lang must be one of en, zh"),
    ("zh", "yes", "lecture must be true or false"),
])
def test_malformed_view_settings_are_refused_with_a_message(lang, lecture, message):
    session = Session()
    with pytest.raises(gr.Error, match=message):
        view_settings(session, lang, lecture)
    assert session.prefs == prefs.Prefs()


def test_a_message_from_the_core_is_shown_in_the_pages_language():
    @handler(outputs=())
    def refused(session):
        raise ExplorerError("prompt.empty", "The prompt is empty: type some text first.")

    with pytest.raises(gr.Error) as english:
        refused(_session("en"))
    with pytest.raises(gr.Error) as chinese:
        refused(_session("zh"))
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
    looks = [fig.layout.template.layout for fig in (plain, lecture)]   # each mode's template
    assert looks[1].font.size > looks[0].font.size
    assert looks[1].title.font.size > looks[0].title.font.size
    assert looks[1].font.color == LECTURE_INK
    assert looks[1].xaxis.tickfont.size > looks[0].xaxis.tickfont.size
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


# ---------------------------------------------------------------------------------------------
# Inputs by name: a handler that declares its inputs is wired with them, in its parameters' order
def test_a_handler_declares_its_inputs_once_and_every_event_of_it_takes_them(demo):
    from explorer.app.tabs import attention, inside

    assert inside.run_trace.inputs == ("trace_prompt", "session", *inside.CHOICES)
    runs = [fn for fn in demo.fns.values() if getattr(fn.fn, "__name__", "") == "run_trace"]
    assert runs                                 # the Trace button and the prompt's Enter
    for fn in runs:
        assert tuple(b.elem_id if b.elem_id else "session" for b in fn.inputs) == \
            inside.run_trace.inputs
    [shown] = [fn for fn in demo.fns.values()
               if getattr(fn.fn, "__name__", "") == "show_attention"]
    assert tuple(b.elem_id or "session" for b in shown.inputs) == \
        attention.show_attention.inputs


def test_inputs_that_do_not_fit_the_parameters_are_refused_when_the_page_is_made():
    with pytest.raises(TypeError, match="takes"):
        @handler(outputs=("x",), inputs=("a", "session"))
        def two_names_one_parameter(a):
            return {}
