"""Every view is drawn from the session by its tab's one ``render`` (explorer/app/refresh.py):
a new model, a language or lecture-mode switch, a link and Remove B all return
``render_all``. What the user may have typed since the models changed is drawn again only
for new models."""
import pytest

from explorer.app import prefs, refresh
from explorer.app.layout import build_app, redrawn
from explorer.app.session import Session
from explorer.app.tabs import TABS, build, generate, knockout, pin
from explorer.book.config import PRESETS

TINY = PRESETS["teach-tiny"]


@pytest.fixture(scope="module", autouse=True)
def page():
    return build_app()      # (every tab registered its render)


@pytest.fixture
def session():
    return build.build("teach-tiny", *TINY.to_dict().values(), 123, "cpu", "float32",
                       session=Session(), progress=lambda *a, **k: None)["session"]


def test_every_tab_has_one_render_and_no_other_hook():
    rendered = {fn.__module__ for _, fn in refresh._renders.values()}
    for tab in TABS:
        assert tab.__name__ in rendered, tab.__name__
        assert not hasattr(tab, "_new_model") and not hasattr(tab, "_redraw"), tab.__name__
    assert not hasattr(refresh, "on_new_model") and not hasattr(refresh, "on_redraw")


def test_a_model_changing_endpoint_and_a_toggle_update_the_same_views(session):
    built = set(build.build.outputs[-1]()) | set(build.build.outputs[:-1])
    toggled = set(redrawn(session, "en", False))
    assert toggled - {"session"} <= built
    assert set(refresh.all_outputs()) <= built


def test_a_language_switch_keeps_what_the_user_typed_and_a_new_model_redraws_it(session):
    assert not session.new_models                 # (the build drew the page)
    out = redrawn(session, "zh", True)
    typed = {"knock_spec", "gen_output", *build.FIELDS, "export_files", "walk_stage"}
    assert not typed & set(out), typed & set(out)
    assert "模型" in out["status"]
    knockout.intervene("zero trf_blocks[0].att head 1", session)     # B: new models
    assert not session.new_models
    with prefs.using(session.prefs):
        out = pin.unpin_model(session)                # Remove B: every view, new models
    assert out["knock_spec"] == "" and out["gen_output"] == ""
    assert out["n_layers"] == TINY.n_layers


def test_a_render_is_the_sessions_alone(session):
    list(generate.generate("Every effort moves you", 3, "greedy", 1.0, 50, 123, False,
                           session))
    first = refresh.render_all(session)
    again = refresh.render_all(session)
    assert first.keys() == again.keys()
    assert first["speed"] == again["speed"] and first["bars"] == again["bars"]
