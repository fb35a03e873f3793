"""Issue 47, items 1-3: what several tabs show (the prompt, the layer and head, B's
intervention) lives in the session; every tab draws it from there, no tab reads or writes
another tab's widgets, and a new model keeps what still fits and says what it changed."""
import pytest

from explorer.app import prompts, refresh
from explorer.app.layout import build_app
from explorer.app.pickers import choose, chosen
from explorer.app.session import Prompt, Session
from explorer.app.tabs import attention, build, generate, inside, knockout, knockout_map, walk
from explorer.book.config import PRESETS

TINY = PRESETS["teach-tiny"]
VIEW = (0, "norm1: before vs after LayerNorm", "resid_pre", "std")
CAT = "The cat sat on the mat"


@pytest.fixture(scope="module")
def page():
    """The page (every tab registered its render), as layout.py makes it."""
    app = build_app()
    return getattr(app, "parts", None)


@pytest.fixture
def session(page):
    return built("teach-tiny", Session())


def built(preset, session):
    cfg = PRESETS[preset]
    return build.build(preset, *cfg.to_dict().values(), 123, "cpu", "float32",
                       session=session, progress=lambda *a, **k: None)


def test_a_trace_on_tab_2_is_the_prompt_of_tabs_5_and_7_and_of_the_walk(session):
    """Item 1: tab 7 showed and measured "Every effort moves you" after "The cat sat on the
    mat" was traced on tab 2."""
    session = session["session"]
    out = inside.trace_shown.__wrapped__(CAT, session, *VIEW)
    assert out["gen_prompt"] == CAT and out["knock_prompt"] == CAT and out["trace_prompt"] == CAT
    assert knockout_map.text_chosen("the prompt", session) == {"knock_prompt": CAT}
    assert walk.stage_clicked.__wrapped__(0, session, _Selected("embeddings"))["walk_card"]
    assert session.walk[0] == CAT
    # the story and back: the map's box says the story while it measures it, not the prompt
    assert knockout_map.text_chosen("the training story", session)["knock_prompt"] != CAT
    other = "A second prompt, generated from"
    list(generate.generate(other, 1, "greedy", 1.0, 50, 123, False, session))
    shown = prompts.shown(session)                      # tab 2 chosen: it shows tab 5's prompt
    assert shown["trace_prompt"] == other and "knock_prompt" not in shown
    assert set(prompts.shown(session)) == {"session"}, "drawn once"
    assert knockout_map.text_chosen("the prompt", session) == {"knock_prompt": other}


def test_a_language_switch_keeps_a_prompt_typed_and_not_yet_used(session):
    from explorer.app.layout import redrawn
    session = session["session"]
    inside.trace_shown.__wrapped__(CAT, session, *VIEW)
    assert not set(prompts.BOXES) & set(redrawn(session, "zh", True))


def test_the_copying_tasks_prompt_goes_with_its_model_and_the_page_says_so(session):
    """Item 2: after Use this model (the copying task), a new build kept the task's symbols
    as the prompt of tabs 2, 5 and 7."""
    session = session["session"]
    inside.trace_shown.__wrapped__(CAT, session, *VIEW)
    session.with_model_a(session.models[0])          # as train_use does for the task's model
    prompts.set_by_task(session, "@2>1:?7)@2>1:?7)")
    shown = refresh.render_all(session)
    assert shown["trace_prompt"] == shown["gen_prompt"] == "@2>1:?7)@2>1:?7)"
    knockout.intervene("zero trf_blocks[0].att head 1", session)      # B beside it: kept
    assert prompts.prompt_of(session) == "@2>1:?7)@2>1:?7)"
    out = built("teach-small", session)
    assert out["trace_prompt"] == out["gen_prompt"] == out["knock_prompt"] == CAT
    assert "Changed to fit this model" in out["status"]
    assert "prompt is yours again" in out["status"]


def test_use_this_model_sets_the_sessions_prompt_not_the_tabs_widgets():
    import inspect

    from explorer.app.tabs import train
    source = inspect.getsource(train.train_use)
    assert "set_by_task" in source and "PROMPTS}" not in source


def test_intervene_leaves_the_attention_layer_and_head_as_chosen(session):
    """Item 3: layer 3, head 7, then Intervene "zero trf_blocks[8].att head 2": Attention
    moved to layer 9, silently."""
    session = built("teach-deep", session["session"])["session"]
    n = session.models[0].key.config.n_layers
    inside.run_trace.__wrapped__(CAT, session, *VIEW)
    attention.attention_views.__wrapped__(session, 1, "2")
    out = knockout.intervene(f"zero trf_blocks[{n - 2}].att head 2", session)
    assert (chosen(session, "att_layer"), chosen(session, "att_head")) == (1, "2")
    assert out["att_layer"]["value"] == 1 and out["att_head"]["value"] == "2"


def test_a_smaller_model_fits_the_pickers_and_says_what_it_changed(session):
    session = session["session"]
    choose(session, att_layer=9, att_head="7", inside_layer=5)
    out = built("teach-tiny", session)
    assert out["att_layer"]["value"] == TINY.n_layers - 1 and out["att_head"]["value"] == "mean"
    status = out["status"]
    assert "Changed to fit this model" in status
    assert "layer 9 → 1" in status and "head 7 → mean" in status and "layer 5 → 1" in status
    again = built("teach-tiny", session)                 # nothing to change: nothing said
    assert "Changed" not in again["status"]
    from explorer.app.layout import redrawn
    choose(session, att_layer=9)
    built("teach-small", session)
    zh = redrawn(session, "zh", False)["status"]
    assert "Changed" not in zh and "层" in zh


def test_no_tab_reads_another_tabs_widgets_or_writes_them_but_through_the_render(page):
    """Item 1: knock_text and the walk read Inside's trace_prompt; train_use wrote three
    tabs' prompts; intervene set Attention's view. A tab's events read its own widgets (and
    the page's: the session, the toggles); another tab's widget is written only by that
    tab's own render, from the session (``refresh``)."""
    rendered = set(refresh.all_outputs())
    read, written = [], []
    for tab, fn, inputs, outputs in page.events:
        if tab is None:
            continue
        read += [(tab, fn, n) for n in inputs if page.owners.get(n) not in (None, tab)]
        written += [(tab, fn, n) for n in outputs
                    if page.owners.get(n) not in (None, tab) and n not in rendered]
    assert read == [] and written == []
    assert page.owners["trace_prompt"] == "inside" and page.owners["knock_prompt"] == "knockout"


class _Selected:
    """A select event's data, as Gradio hands it to a handler."""

    def __init__(self, value):
        self._data = {"value": value}
        self.value = value
        self.target = None
