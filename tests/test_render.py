"""Every view is drawn from the session by its tab's one ``render`` (explorer/app/refresh.py):
a new model, a language or lecture-mode switch, a link and Remove B all return
``render_all``. What the user may have typed since the models changed is drawn again only
for new models."""
import pytest

from explorer.app import prefs, refresh
from explorer.app.layout import build_app, redrawn
from explorer.app.session import Session
from explorer.app.tabs import TABS, build, generate, knockout, knockout_map, pin
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
    # (the ZeroGPU note is the request's, not a model's: a toggle redraws it in its language)
    assert toggled - {"session", "zerogpu_note"} <= built
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


def test_an_intervention_traces_the_sessions_prompt_again_for_both_in_one_call(session):
    """(Where the page chained the Inside tab's trace and the attention after it.)"""
    from explorer.app.tabs import attention, inside
    prompt = "Every effort moves you"
    inside.run_trace.__wrapped__(prompt, session, 0, "norm1: before vs after LayerNorm",
                                 "resid_pre", "std")
    attention.attention_views.__wrapped__(session, 1, "3")       # the lecturer's layer, head
    out = knockout.intervene("zero trf_blocks[0].att head 2", session)
    assert len(session.traces) == 2 and session.prompt == prompt
    assert out["chips"] and out["trace_info"]
    hint = attention.hints()["att_plot"]
    assert out["att_plot"] is not hint and session.view(attention.Shown).on
    # Issue 47, item 3: the Attention tab stays where the lecturer put it (it moved, silently,
    # to the block after the knocked-out one: layer 1 here, but layer 9 from 3 on GPT-2)
    attention.attention_views.__wrapped__(session, 0, "3")
    out = knockout.intervene("zero trf_blocks[1].att head 2", session)
    assert out["att_layer"]["value"] == 0 and out["att_head"]["value"] == "3"
    assert "Changed" not in out["status"]
    fresh = Session()                          # nothing traced: nothing traced for it either
    fresh.with_models(session.models[:1])
    knockout.intervene("zero trf_blocks[0].att head 1", fresh)
    assert fresh.traces == ()


def test_a_link_is_opened_in_one_call_its_model_built_and_its_tab_drawn():
    """(Where the page chained the Build button's handler, a trace and the attention.)"""
    from explorer.app import share_view
    from explorer.runtime.links import Page, Rules
    tabs = ("build", "inside", "attention")
    rules = Rules(default=Page(preset="teach-small", config=PRESETS["teach-small"],
                               weights="random", size="small", seed=123,
                               prompt="Every effort moves you", tab="build", lang="en"),
                  tabs=tabs, sizes=("small",), langs=("en", "zh"))
    open_link = share_view.open_link_handler(rules)
    session = Session()
    out = open_link("?preset=teach-tiny&tab=attention&layer=1&head=3&lang=zh", session, "zh",
                    "cpu", "float32")
    assert session.prefs.lang == "zh" and session.models and len(session.traces) == 1
    assert out["tabs"].selected == "attention" and out["preset"] == "teach-tiny"
    assert out["att_head"]["value"] == "3" and out["att_layer"]["value"] == 1
    assert out["att_plot"] is not None and "3" in out["att_plot"].layout.title.text
    refused = Session()
    with pytest.warns(UserWarning):
        out = open_link("?preset=teach-tiny&tab=inside", refused, "en", "tpu", "float32")
    assert not refused.models and out["preset"] == "teach-tiny"      # what it could set
    assert "could not be opened in full" in out["share_note"]
    assert out["tabs"].selected == "inside"


def test_each_views_state_says_what_new_models_and_remove_b_leave_of_it(session):
    from explorer.app.pickers import Pickers
    from explorer.app.shared import BuildRefused
    from explorer.app.tabs import activations, attention, gradients, walk
    kinds = {Pickers: dict(att_layer=1), BuildRefused: dict(message="no"),
             build.Preview: dict(preset="teach-small"), attention.Shown: dict(on=True),
             activations.Curves: dict(shown=(-3, 3, ["gelu"], False, 0)),
             gradients.Lesson: dict(on=True), walk.Stage: dict(chosen=("attention", 0)),
             knockout_map.MapView: dict(applied=3)}

    def shown(s):
        for kind, changes in kinds.items():
            s.show(kind, **changes)
        return s
    shown(session).with_models(session.models * 2)          # B pinned: new models
    assert set(session.views) == {Pickers, activations.Curves, knockout_map.MapView}
    assert session.view(Pickers).att_layer == 1
    assert session.view(knockout_map.MapView).applied == 3
    shown(session).without_b()
    assert set(session.views) == {Pickers, activations.Curves, knockout_map.MapView,
                                  BuildRefused, attention.Shown}
    assert session.view(build.Preview) == build.Preview()    # (a default, not kept)


def test_the_trace_button_draws_the_other_tabs_views_of_the_trace_in_its_own_event(session):
    """(Where the page chained the activation curves after the trace.) /trace keeps its five
    outputs for API clients."""
    from explorer.app.tabs import activations, attention, inside
    view = (0, "norm1: before vs after LayerNorm", "resid_pre", "std")
    activations.activation_view(-4, 4, ["gelu"], False, 0, session)   # (as the page's load)
    assert len(activations.render(session)["act_plot"].data) == 1, "no trace: the curve alone"
    inside.run_trace.__wrapped__("Every effort moves you", session, *view)
    attention.attention_views.__wrapped__(session, 0, "mean")
    shown = attention.render(session)["att_plot"]
    out = inside.trace_shown.__wrapped__("A different prompt, longer than the first", session,
                                         *view)
    assert len(out["act_plot"].data) > 1, "the curves over the new trace's FFN inputs"
    assert out["att_plot"].to_json() != shown.to_json(), "the attention shown, of the new trace"
    assert set(inside.run_trace.outputs) == {"chips", "trace_info", *inside.VIEWS, "session"}
    config = build_app().config
    ids = {c["id"] for c in config["components"]
           if c.get("props", {}).get("elem_id") in ("trace_btn", "trace_prompt", "att_named")}
    started = {i for i, d in enumerate(config["dependencies"])
               if {t[0] for t in d["targets"]} & ids}
    # (the page's own script may follow: a named head's figure scrolled into view)
    assert started and not [d["api_name"] for d in config["dependencies"]
                            if d["trigger_after"] in started and d["backend_fn"]], (
        "no event chained after them")


def test_a_named_head_shows_its_layer_and_head_and_their_views_in_one_event(session):
    from explorer.app.tabs import attention, inside
    inside.run_trace.__wrapped__("Every effort moves you", session, 0,
                                 "norm1: before vs after LayerNorm", "resid_pre", "std")
    out = attention.named_head_chosen(session, "0:1:2")
    assert out["att_layer"] == 1 and out["att_head"] == "2"
    assert "att_plot" in out and session.view(attention.Shown).on
    for forged in ("", None, "0:1", "a:b:c", {"value": 1}):
        assert attention.named_head_chosen(session, forged) == {}


def test_a_toggle_draws_the_train_tabs_job_again_in_the_new_language(session, monkeypatch):
    """(Where the page chained /train_view after the toggle.)"""
    from types import SimpleNamespace

    from explorer.app import shared
    from explorer.app.tabs import train
    from explorer.runtime.training.lab import TrainingLab
    lab = TrainingLab(max_jobs=1)
    monkeypatch.setattr(shared, "LAB", lab)
    request = SimpleNamespace(session_hash="toggler")
    try:
        last = list(train.train_start("the default story", "", None,
                                      ["pre-LN (book)", "no shortcut"], "teach-tiny", 2, 2, 16,
                                      0.0004, 0, session=session, request=request))[-1]
        assert "Finished" in last["train_progress"]
        out = redrawn(session, "zh", False, request)
        assert out["train_progress"] != last["train_progress"]
        assert "步" in out["train_progress"], out["train_progress"]
        assert out["train_loss_plot"] is not None and "train_choice" in out
        assert "train_progress" not in redrawn(Session(), "en", False), \
            "a session the lab knows nothing of: its Train view stays as it is"
    finally:
        lab.cancel("toggler")


def test_a_choice_made_while_the_last_one_is_drawn_is_never_dropped():
    """Gradio's default for an event is to drop a trigger while it is pending: moving the
    layer slider and then the head would leave the view on the old head."""
    config = build_app().config
    elem = {c["id"]: c.get("props", {}).get("elem_id") for c in config["components"]}
    chosen = [d for d in config["dependencies"]
              if d["targets"] and all(event == "input" for _, event in d["targets"])]
    assert {elem[t[0]] for d in chosen for t in d["targets"]} >= {"att_layer", "att_head",
                                                                 "inside_layer", "preset"}
    assert {d["trigger_mode"] for d in chosen} == {"always_last"}


@pytest.mark.parametrize("order", ["stop_first", "failure_first"])
def test_stop_ends_the_generation_at_the_step_shown_whichever_call_comes_first(session, order):
    """Stop sends the step on screen (``stopped(session, shown)``); the stream it cancels ends
    in a failure whose own ``stopped(session)`` knows no step. Either may be served first:
    the generation must end at the step shown (issue 47, item 10)."""
    stream = generate.generate("Every effort moves you", 40, "greedy", 1.0, 50, 123, False,
                               session)
    for _ in stream:                            # stream until a few steps are there to cut to
        gen = session.generation
        if gen is not None and len(gen.rows) >= 6:
            break
    shown = sorted(gen.shown)[len(gen.shown) // 2]   # the page shows steps behind the model
    made = len(gen.rows)
    assert shown < made
    calls = [(session, shown), (session,)] if order == "stop_first" else [(session,),
                                                                           (session, shown)]
    for args in calls:
        out = generate.stopped(*args)
    stream.close()
    gen = session.generation
    assert sorted(r[0] for r in gen.rows) == list(range(1, shown + 1)), (shown, made)
    assert gen.speed.get("stopped") and not gen.streaming
    assert out["gen_output"] == gen.text


def test_next_token_after_stop_goes_on_before_the_cancelled_streams_own_call(session):
    """Stop's call copied the generation cut to the step shown while it was still marked as
    streaming; the cancelled stream's own call (its failure) unmarked it, but a Next token
    served between the two was refused ("still streaming") and the page added no step: CI's
    lecturer walk, once, under load. After Stop's call alone, Next token adds one step."""
    stream = generate.generate("Every effort moves you", 40, "greedy", 1.0, 50, 123, False,
                               session)
    for _ in stream:
        gen = session.generation
        if gen is not None and len(gen.rows) >= 6:
            break
    shown = sorted(gen.shown)[0]
    out = generate.stopped(session, shown)
    assert not session.generation.streaming
    after = generate.next_token("Every effort moves you", out["gen_output"], "greedy", 1.0, 50,
                                123, session)
    stream.close()
    assert sorted(r[0] for r in session.generation.rows) == list(range(1, shown + 2))
    assert after["gen_output"].startswith(out["gen_output"])
    assert len(after["gen_output"]) > len(out["gen_output"])
