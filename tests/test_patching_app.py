"""The Patching tab through its handlers (issue 49): the ready-made pairs, both maps and the
direct attribution of model A, a click on a cell making that patch model B run on the
corrupted prompt in every view, honest notes, refusals with their reasons, and the named
endpoints."""
import gradio as gr
import numpy as np
import pytest

from explorer.book.config import PRESETS
from explorer.book.tokenizer import get_tokenizer
from explorer.probes import intervening, trace
from explorer.probes.patching import logit_diff
from explorer.runtime.sources import ModelKey

from test_zerogpu import slow_cpu, zero_gpu  # noqa: F401 - the ZeroGPU stand-in's fixtures

IOI = ("When Mary and John went to the store, John gave a drink to",
       "When Alice and Bob went to the store, Bob gave a drink to", " Mary", " John")


def drawn(session, *pair, everywhere=False):
    """The maps' last update (the stream's end)."""
    from explorer.app.tabs import patching
    return list(patching.patch_maps(*pair, everywhere, session))[-1]


@pytest.fixture
def session():
    from explorer.app import shared
    from explorer.app.session import Made, Model, Session
    shared.RESULTS.clear()
    key = ModelKey(PRESETS["teach-tiny"], 123, "cpu", "float32")
    return Session(models=(Model(key, Made("built", "teach-tiny")),))


def test_the_ioi_pair_maps_both_ways_and_says_random_weights_mean_nothing(session):
    from explorer.app.tabs import patching
    pair = patching.pair_chosen("ioi", session)
    assert (pair["patch_clean"], pair["patch_corrupted"], pair["patch_right"],
            pair["patch_wrong"]) == IOI
    out = drawn(session, *IOI, everywhere=True)
    numbers = out["patch_numbers"]
    cfg = PRESETS["teach-tiny"]
    assert np.shape(numbers["head_share_exact"]) == (cfg.n_layers, cfg.n_heads)
    assert np.shape(numbers["resid_share_exact"]) == (cfg.n_layers, 14)
    assert numbers["exact_cells"] == numbers["cells"]             # exact everywhere
    # block 0, every position: the corrupted run's share 0 where the tokens are the same
    assert numbers["resid_share_exact"][0][0] == 0
    assert "random weights" in out["patch_map"] and "says nothing" in out["patch_map"]
    assert " Mary→ Alice" in out["patch_map"] and " John→ Bob" in out["patch_map"]
    dla = numbers["direct_attribution"]
    assert dla["total"] == pytest.approx(dla["model_diff"], abs=1e-4)
    assert "the model's own logit difference" in out["patch_dla"]


def test_a_click_on_a_cell_makes_that_patch_b_traced_on_the_corrupted_prompt(session):
    from explorer.app import shared
    from explorer.app.tabs import patching
    out = drawn(session, *IOI)
    spec = str(session.view(patching.PatchView).result.intervention(("head", 1, 2)))
    assert f'data-patch="{spec}"' in out["patch_map"]
    clicked = patching.cell_clicked(IOI[1], session, gr.EventData(None, {"value": spec}))
    a, b = session.models
    assert str(b.key.interventions) == spec and b.key.weights_key == a.key
    assert clicked["trace_prompt"] == IOI[1] and session.prompt == IOI[1]
    model = shared.models_of(session)[0]
    ids = get_tokenizer().encode(IOI[1])
    with intervening(model, b.key.interventions):
        patched = trace(model, ids)
    assert np.array_equal(session.traces[1].next_probs, patched.next_probs)
    assert np.array_equal(session.traces[0].next_probs, trace(model, ids).next_probs)
    # the map of A stays, with B's cell outlined; B's share is the cell's exact value
    assert 'class="patch-current"' in clicked["patch_map"]
    result = session.view(patching.PatchView).result
    right, wrong = (get_tokenizer().encode(a)[0] for a in IOI[2:])
    with intervening(model, b.key.interventions):
        b_diff = logit_diff(model, ids, right, wrong)
    assert result.head_exact[1, 2] + result.corrupted_diff == pytest.approx(b_diff, abs=1e-5)
    assert "run on the corrupted prompt" in clicked["patch_note"]


def test_the_stream_sends_the_estimate_first_then_the_exact_cells(session):
    from explorer.app.tabs import patching
    updates = list(patching.patch_maps(*IOI, False, session))
    first, last = updates[0]["patch_numbers"], updates[-1]["patch_numbers"]
    assert len(updates) >= 2
    assert first["exact_cells"] < last["exact_cells"]
    assert "≈" in updates[0]["patch_map"]
    assert first["head_share_estimate"] == last["head_share_estimate"]


def test_the_patch_endpoint_takes_the_string_form(session):
    from explorer.app.tabs import patching
    ids = ",".join(map(str, get_tokenizer().encode(IOI[0])))
    patching.patch_b(f"patch trf_blocks[0].resid_pre at 1 from {ids}", IOI[1], session)
    assert session.models[1].key.interventions[0].kind == "patch_resid"


@pytest.mark.parametrize("clean,corrupted,right,wrong,message_id", [
    (IOI[0], "When Anastasia and Bob went to the store, Bob gave a drink to", " Mary", " John",
     "patching.lengths"),
    (IOI[0], IOI[1], " Anastasia", " John", "patching.answer_pieces"),
    (IOI[0], IOI[1], "x" * 101, " John", "patch.answer_text"),
    (IOI[0], IOI[0], " Mary", " John", "patching.same_prompts"),
    ("x" * 20_001, IOI[1], " Mary", " John", "prompt.too_long")])
def test_bad_pairs_are_refused_with_their_reason(session, clean, corrupted, right, wrong,
                                                 message_id, monkeypatch):
    from explorer.app.tabs import patching
    from explorer.probes import patching as core
    # limits before work: nothing is computed for a refused pair
    monkeypatch.setattr(core, "estimate", lambda *a, **k: pytest.fail("computed"))
    with pytest.raises(gr.Error) as error:
        drawn(session, clean, corrupted, right, wrong)
    said = {"patching.lengths": "“ An” · “ast” · “asia”",
            "patching.answer_pieces": "3 tokens", "patch.answer_text": "one token",
            "patching.same_prompts": "same tokens", "prompt.too_long": "20,001"}[message_id]
    assert said in str(error.value)


def test_the_copying_pair_needs_the_tasks_words_and_the_ioi_pair_gpt2s(session):
    from explorer.app.session import Made, Model
    from explorer.app.tabs import patching
    from explorer.runtime.training.copying_task import COPYING_MODEL
    pair = patching.pair_chosen("copying", session)        # a GPT-2 vocabulary reads them
    ids = get_tokenizer().encode(pair["patch_clean"])
    assert len(ids) == 12 and max(ids) < 32
    small = ModelKey(COPYING_MODEL, 1, "cpu", "float32")
    session.models = (Model(small, Made("built", "copying")),)
    with pytest.raises(gr.Error, match="Build GPT-2 small"):
        patching.pair_chosen("ioi", session)


def test_the_tab_is_named_in_chinese_and_its_views_redraw_in_it(session):
    from explorer.app import prefs
    from explorer.app.tabs import patching
    drawn(session, *IOI)
    session.prefs = prefs.parse("zh", False)
    with prefs.using(session.prefs):
        out = patching.render(session)
    assert "恢复的干净结果比例" in out["patch_map"] and "随机" in out["patch_map"]
    assert "直接 logit 归因" in out["patch_dla"]


def test_the_named_endpoints_through_a_client(app_url):
    from local_client import local_client
    c = local_client(app_url)
    c.predict("teach-tiny", 50257, 64, 64, 4, 2, 0.1, False, "pre", True, "gelu", 4, False,
              "learned", 123, "cpu", "float32", api_name="/build")
    pair = c.predict("ioi", api_name="/patching_pair")
    assert tuple(pair) == IOI
    maps, dla, numbers = c.predict(*pair, False, api_name="/patching_map")   # the stream's end
    assert "share of the clean result recovered" in maps and "σ =" in dla
    assert numbers["exact_cells"] >= 20 and len(numbers["resid_share_exact"][0]) == 14
    ids = ",".join(map(str, numbers["clean_ids"]))
    out = c.predict(f"patch trf_blocks[1].att head 0 from {ids}", IOI[1], api_name="/patch")
    assert "trf_blocks[1].att head 0 patched from the clean prompt" in out[0]      # the status
    with pytest.raises(Exception, match="“ An” · “ast” · “asia”"):
        c.predict(IOI[0], IOI[1], " Anastasia", " John", False, api_name="/patching_map")


@pytest.mark.parametrize("cached", [True, False])
def test_on_random_weights_the_page_says_whether_gpt2s_weights_are_cached(session, cached,
                                                                         monkeypatch):
    from explorer.runtime import patching_pairs
    monkeypatch.setattr(patching_pairs, "gpt2_cached", lambda: cached)
    out = drawn(session, *IOI)
    said = "are cached on this server" if cached else "are not cached on this server"
    assert said in out["patch_map"] and "says nothing" in out["patch_map"]


@pytest.mark.parametrize("call", [
    lambda p, s: p.patch_maps([1, 2], IOI[1], " Mary", " John", False, s),
    lambda p, s: p.patch_maps(IOI[0], None, " Mary", " John", False, s),
    lambda p, s: p.patch_maps(IOI[0], IOI[1], 464, " John", False, s),
    lambda p, s: p.patch_maps(IOI[0], IOI[1], " Mary", {"a": 1}, False, s),
    lambda p, s: p.patch_maps(IOI[0], IOI[1], " Mary", "", False, s),
    lambda p, s: p.patch_maps(IOI[0], IOI[1], " Mary", " John", "yes", s),
    lambda p, s: p.pair_chosen(5, s),
    lambda p, s: p.pair_chosen("gpt-3", s),
    lambda p, s: p.patch_b(5, IOI[1], s),
    lambda p, s: p.patch_b("patch trf_blocks[9].att head 0 from 1,2", IOI[1], s),
    lambda p, s: p.patch_b("patch trf_blocks[0].att head 0 from 1,2", ["x"], s),
    lambda p, s: p.cell_clicked(IOI[1], s, gr.EventData(None, "not a cell")),
], ids=["clean list", "corrupted none", "right int", "wrong dict", "wrong empty",
        "flag text", "pair int", "pair unknown", "spec int", "no such block",
        "corrupted list", "click without value"])
def test_bad_inputs_get_a_message_never_the_bug_path(session, call):
    from explorer.app.tabs import patching

    def run():
        out = call(patching, session)
        return list(out) if hasattr(out, "__next__") else out
    with pytest.raises(gr.Error) as error:
        run()
    text = str(error.value)
    assert text.strip() and "bug" not in text and "Traceback" not in text, text


def test_the_patching_maps_in_gpu_calls_equal_the_cpus(monkeypatch, request):
    """On ZeroGPU (the stand-in: each call a forked process, arguments and results pickled),
    the estimate and the exact cells run as GPU calls and give the CPU's numbers."""
    from test_zerogpu import built, tasks
    from explorer.app.tabs import patching
    zero_gpu = request.getfixturevalue("zero_gpu")
    request.getfixturevalue("slow_cpu")
    on_gpu = list(patching.patch_maps(*IOI, True, built("teach-tiny")))[-1]["patch_numbers"]
    calls = len(zero_gpu.calls)
    assert calls >= 2 and {o for _, o in tasks(zero_gpu)} == {"ok"}
    monkeypatch.setenv("SPACES_ZERO_GPU", "false")
    here = list(patching.patch_maps(*IOI, True, built("teach-tiny")))[-1]["patch_numbers"]
    assert len(zero_gpu.calls) == calls
    assert on_gpu["exact_cells"] == here["exact_cells"] == on_gpu["cells"]
    for name in ("head_share_exact", "resid_share_exact", "head_share_estimate"):
        np.testing.assert_allclose(np.array(on_gpu[name], dtype=float),
                                   np.array(here[name], dtype=float), rtol=1e-5, atol=1e-6)


def test_a_patched_b_is_named_as_patched_in_legends_not_as_knocked_out(session):
    from explorer.app.comparison import names
    from explorer.app.tabs import patching
    ids = ",".join(map(str, get_tokenizer().encode(IOI[0])))
    patching.patch_b(f"patch trf_blocks[1].att head 0 at 13 from {ids}", IOI[1], session)
    a, b = names(session)
    assert "patched" in b and "knocked out" not in b and ids not in b
    assert "trf_blocks[1].att head 0" in b
