"""The Knock out tab through its handlers: Intervene makes B = A run with interventions (A's
weights, not a copy), every view shows the pair, the map of which parts matter, and a click on
one of its cells."""
import json
import re

import gradio as gr
import numpy as np
import pytest

from explorer.book.config import PRESETS
from explorer.book.errors import ExplorerError
from explorer.book.generate import generate_steps
from explorer.probes import Interventions, intervening, trace
from explorer.runtime.sources import ModelKey

PROMPT = "Every effort moves you"


@pytest.fixture
def session():
    from explorer.app import shared
    from explorer.app.session import Made, Model, Session
    shared.RESULTS.clear()
    key = ModelKey(PRESETS["teach-tiny"], 123, "cpu", "float32")
    return Session(models=(Model(key, Made("built", "teach-tiny")),))


def traced(session):
    from explorer.app.pickers import HIST_PAIRS
    from explorer.app.tabs import inside
    return inside.run_trace(PROMPT, session, 1, next(iter(HIST_PAIRS)), "ln1_out", "std")


def test_intervene_makes_b_model_a_run_with_the_intervention(session):
    from explorer.app import shared
    from explorer.app.tabs import attention, knockout, knockout_map
    out = knockout.intervene("zero trf_blocks[1].att head 2", session)
    a, b = session.models
    assert b.key.interventions == Interventions.parse("zero trf_blocks[1].att head 2")
    assert b.key.weights_key == a.key and "A with" in out["status"]
    models = shared.models_of(session)
    assert models[0] is models[1], "B runs A's weights, not a copy"
    assert len(shared.CACHE) >= 1 and shared.CACHE.get(b.key)[0] is models[0]
    traced(session)
    ids = session.traces[0].token_ids
    plain = trace(models[0], ids)
    with intervening(models[0], b.key.interventions):
        knocked = trace(models[0], ids)
    assert np.array_equal(session.traces[0].next_probs, plain.next_probs)
    assert np.array_equal(session.traces[1].next_probs, knocked.next_probs)
    assert not np.array_equal(plain.next_probs, knocked.next_probs)
    # layer 0 is before the knock-out: A - B is zero there; layer 1's head 2 differs
    shown = attention.attention_views(session, 0, "mean")
    assert "A − B" in json.dumps(shown["att_plot"].to_plotly_json()["layout"], ensure_ascii=False)
    np.testing.assert_array_equal(session.traces[0].attention[0], session.traces[1].attention[0])


def test_generation_of_b_is_the_intervened_generation(session):
    from explorer.app import shared
    from explorer.app.tabs import generate, knockout, knockout_map
    knockout.intervene("identity trf_blocks[0].norm2; zero trf_blocks[1].ff", session)
    list(generate.generate(PROMPT, 6, "greedy", 1.0, 50, 123, False, session))
    model = shared.models_of(session)[0]
    start = session.generation.start
    plain = [s.token_id for s in generate_steps(model, session.generation.ids[0][:start], 6)]
    with intervening(model, session.models[1].key.interventions):
        knocked = [s.token_id for s in
                   generate_steps(model, session.generation.ids[1][:start], 6)]
    assert session.generation.ids[0][start:] == plain
    assert session.generation.ids[1][start:] == knocked


def drawn(session, everywhere=True):
    """The map's last update (the stream's end): exact everywhere by default."""
    from explorer.app.tabs import knockout, knockout_map
    return list(knockout_map.parts_map(PROMPT, "loss", everywhere, session))[-1]


def test_the_map_and_a_click_on_one_of_its_cells(session):
    from explorer.app.tabs import knockout, knockout_map
    out = drawn(session)
    numbers = out["knock_numbers"]
    cfg = PRESETS["teach-tiny"]
    assert np.shape(numbers["head_loss"]) == (cfg.n_layers, cfg.n_heads)
    assert 'data-knock="zero trf_blocks[1].att head 3"' in out["knock_map"]
    assert 'data-knock="remove trf_blocks[0].shortcut"' in out["knock_map"]
    clicked = knockout.cell_clicked(session, gr.SelectData(
        None, {"value": "zero trf_blocks[1].att head 3", "index": 7}))
    assert clicked["knock_spec"] == "zero trf_blocks[1].att head 3"
    assert str(session.models[1].key.interventions) == "zero trf_blocks[1].att head 3"
    assert session.view(knockout_map.MapView).result is not None, \
        "the map of A stays when B changes"
    probability = knockout_map.metric_changed("probability", session)["knock_map"]
    assert probability != out["knock_map"]
    # a random model's probabilities are ~1/50,257: its changes read in scientific notation,
    # never as a coloured "0"; each cell's title holds the value
    cells = re.findall(r'<td data-knock[^>]*>([^<]*)</td>', probability)
    assert cells and "0" not in cells and any("e-" in c for c in cells), cells[:12]


def test_the_builder_and_bad_interventions_get_messages(session):
    from explorer.app.tabs import knockout, knockout_map
    spec = knockout.add_part("", "zero_heads", 1, False, "0, 2", session)["knock_spec"]
    spec = knockout.add_part(spec, "relu_ff", 0, True, "", session)["knock_spec"]
    assert spec == str(Interventions.parse(spec)) and "heads 0,2" in spec and "[*]" in spec
    # the heads box matters for heads only, the block for a block's parts only (the boxes
    # keep their values: a head "0", block 3)
    spec = knockout.add_part(spec, "zero_ff", 1, False, "0", session)["knock_spec"]
    spec = knockout.add_part(spec, "identity_final_norm", 1, False, "0", session)["knock_spec"]
    assert "zero trf_blocks[1].ff" in spec and "identity final_norm" in spec, spec
    # the box says B's interventions, tidied; Remove B empties it
    from explorer.app.tabs import pin
    out = knockout.intervene("ZERO trf_blocks[1].att  head 2", session)
    assert out["knock_spec"] == "zero trf_blocks[1].att head 2"
    assert pin.unpin_model(session)["knock_spec"] == ""
    for bad, message in (("", "Nothing to knock out"), ("zero trf_blocks[9].att head 1", "9"),
                         ("frobnicate trf_blocks[0].att", "frobnicate")):
        with pytest.raises((ExplorerError, gr.Error), match=message):
            knockout.intervene(bad, session)


def test_the_parts_to_knock_out_are_named_in_the_pages_language():
    """The builder's choices say what each knock-out does, in the page's language, after the
    string form's words (which stay code: the book's names)."""
    import re
    from explorer.app import prefs
    from explorer.app.session import Session
    from explorer.app.tabs import knockout, knockout_map
    from explorer.app.tabs.knockout import KIND_NAMES, kind_choices, render
    from explorer.probes.interventions import KINDS_BY_NAME
    with prefs.using(prefs.Prefs("zh")):
        zh = kind_choices()
        redrawn = render(Session())["knock_kind"]["choices"]
    en = kind_choices()
    assert [k for _, k in zh] == [k for _, k in en] == list(KIND_NAMES)
    assert [tuple(c) for c in redrawn] == zh
    for (zh_label, kind), (en_label, _) in zip(zh, en):
        form = knockout._form(KINDS_BY_NAME[kind])
        assert zh_label.endswith(" — " + form) and en_label.endswith(" — " + form)
        example = form.replace("[l]", "[1]").replace("head h", "head 0")
        assert str(Interventions.parse(example)) == example        # the box takes it
        assert re.search(r"[\u3400-\u9fff]", zh_label) and zh_label != en_label, zh_label


def test_the_map_is_forgotten_when_model_a_changes_and_kept_when_b_does(session):
    """The map describes model A: a knock-out as B keeps it; A rebuilt, even with the same
    shape and another seed, drops it (its numbers would be another model's)."""
    from explorer.app.plots.knockout import knockout_map_html
    from explorer.app.session import Made, Model
    from explorer.app.tabs import knockout, knockout_map
    out = drawn(session)
    knockout.intervene("zero trf_blocks[0].att head 1", session)
    kept = knockout.render(session)["knock_map"]
    assert 'data-knock="zero trf_blocks[0].att head 1" class="walk-current"' in kept
    assert kept.replace(' class="walk-current"', "") == out["knock_map"]
    for changed in (ModelKey(PRESETS["teach-tiny"], 7, "cpu", "float32"),
                    ModelKey(PRESETS["teach-tiny"].replace(n_heads=2), 123, "cpu", "float32")):
        drawn(session, everywhere=False)
        session.with_models((Model(changed, Made("built", "teach-tiny")),))
        assert knockout.render(session)["knock_map"] == knockout_map_html(None)
        assert session.view(knockout_map.MapView).result is None
        assert knockout_map.metric_changed("probability", session) == {}


def test_b_is_named_shortly_in_every_language(session):
    """A long intervention names B by its count in Chinese too (its characters are twice as
    wide as letters: a panel title of three such names ran into one line)."""
    from explorer.app import comparison, prefs
    from explorer.app.tabs import knockout, knockout_map
    knockout.intervene("identity trf_blocks[0].norm1; zero trf_blocks[1].ff", session)
    with prefs.using(prefs.Prefs("zh")):
        zh = comparison.names(session)
    en = comparison.names(session)
    assert en[1] == "B · knocked out: 2 parts"
    assert "2" in zh[1] and "trf_blocks" not in zh[1], zh
    knockout.intervene("zero trf_blocks[1].att head 2", session)
    with prefs.using(prefs.Prefs("zh")):
        assert "trf_blocks[1].att" in comparison.names(session)[1]


def test_a_knock_out_b_ends_when_model_a_changes_and_a_pinned_b_stays(session):
    """B = A knocked out is a view of A: a new A (built, loaded, trained) ends it, where a
    pinned B stays beside the next model."""
    from explorer.app.session import Made, Model
    from explorer.app.tabs import knockout, knockout_map
    knockout.intervene("zero trf_blocks[1].att head 2", session)
    same = Model(session.models[0].key, Made("built", "teach-tiny"))
    session.with_model_a(same)                       # the same model again: B stays
    assert len(session.models) == 2 and session.models[1].key.interventions
    small = Model(ModelKey(PRESETS["teach-small"], 123, "cpu", "float32"),
                  Made("built", "teach-small"))
    session.with_model_a(small)
    assert session.models == (small,)
    assert knockout.render(session)["knock_spec"] == ""
    pinned = Model(ModelKey(PRESETS["teach-tiny"], 7, "cpu", "float32"), Made("built", "x"))
    session.with_models((small, pinned))
    session.with_model_a(Model(ModelKey(PRESETS["teach-tiny"], 123, "cpu", "float32"),
                               Made("built", "teach-tiny")))
    assert session.models[1] is pinned


def test_a_knocked_out_head_keeps_its_pattern_and_b_does_not_name_it_by_its_job(session):
    """Issue 47, item 15: with B = A with the induction head zeroed, B's Attention view of that
    head was unchanged, named "induction, 0.81", and said only "A − B is zero everywhere"."""
    from explorer.app.tabs.head_scores import named_choices, removed_of
    from explorer.app.tabs import attention, knockout
    from explorer.probes.head_scores import HeadScores
    knockout.intervene("zero trf_blocks[1].att head 2", session)
    traced(session)
    assert removed_of(session) == [frozenset(), frozenset({(1, 2)})]
    shown = json.dumps(attention.attention_views(session, 1, 2)["att_plot"].to_plotly_json()[
        "layout"], ensure_ascii=False)
    assert "A − B is zero everywhere" in shown          # the pattern is the same ...
    assert ("knocking out head 2 of layer 1 removes its output, not its pattern"
            in shown.replace("<br>", " "))                         # ... and the page says why
    other = json.dumps(attention.attention_views(session, 1, 1)["att_plot"].to_plotly_json()[
        "layout"], ensure_ascii=False)
    assert "knocked out" not in other
    # the same scores in A and B (the pattern stays): A names the head, B does not
    job = np.zeros((2, 4))
    job[1, 2] = 0.81
    scores = HeadScores(previous=np.zeros((2, 4)), first=np.zeros((2, 4)), induction=job)
    radio = named_choices([scores, scores], ("A", "B"), 2, 4, 1, "2", removed_of(session))
    assert [text for text, _ in radio["choices"]] == [
        "A — layer 1, head 2: induction, 0.81 (uniform attention: 0.00)"]
    assert "1 knocked-out heads are not named" in radio["info"]
