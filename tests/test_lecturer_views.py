"""What a lecturer meets on a first walk through the tabs, checked without a browser (the walk
itself is tests/browser/test_lecturer_walk.py): quiet views without a trace, choices that follow
the model, "Next token" during a stream, the 4.4 demo with a large model, hints, byte chips."""
import json
import logging

import gradio as gr
import pytest

from explorer.app import shared
from explorer.app.plots.generation import next_token_bars_html
from explorer.app.tabs import attention, build, generate, gradients, inside
from explorer.book.config import PRESETS
from explorer.book.errors import ExplorerError
from explorer.book.tokenizer import get_tokenizer
from explorer.probes import trace


def built(preset="teach-tiny", **changes):
    cfg = {**PRESETS[preset].to_dict(), **changes}
    out = build.build(preset, *cfg.values(), 123, "cpu", "float32", state=None,
                      progress=lambda *a, **k: None)
    return out


def plot_text(fig):
    return json.dumps(fig.to_plotly_json(), ensure_ascii=False)


def test_a_rebuild_resetting_layer_and_head_pickers_stays_quiet_without_a_trace():
    state = built()[5]
    assert "trace" not in state
    # the change handlers the build sets off: no error, nothing redrawn
    assert all(isinstance(x, type(gr.skip())) for x in
               attention.attention_views_if_traced(state, 0, "mean"))
    pair = next(iter(inside.HIST_PAIRS))
    assert all(isinstance(x, type(gr.skip())) for x in
               inside.inside_views_if_traced(state, 0, pair, "resid_pre", "std"))
    # the API endpoints still say what is missing
    with pytest.raises(gr.Error, match="Trace a prompt first"):
        attention.attention_views(state, 0, "mean")


def test_probe_choices_follow_a_model_without_layernorm():
    out = built(norm_placement="none")
    pair_update, point_update = out[-2:]
    pairs = [value for _, value in pair_update["choices"]]   # (shown, value)
    assert pairs and all("norm" not in p for p in pairs)
    assert pair_update["value"] == pairs[0]
    assert not any(p.startswith(("ln", "final_norm")) for p in point_update["choices"])
    # the default choices of that model trace at once
    state = out[5]
    tr_out = inside.run_trace("Every effort moves you", state, 0, pair_update["value"],
                              point_update["value"], "std")
    assert tr_out[-1]["trace"] is not None
    # a model with LayerNorm keeps every comparison
    assert [value for _, value in built()[-2]["choices"]] == list(inside.HIST_PAIRS)


def test_next_token_during_a_stream_is_refused_with_a_message_and_the_stream_ends_unlocked():
    state = built()[5]
    updates = list(generate.generate("Every effort moves you", 5, "greedy", 1.0, 50, 123, False,
                                     state))
    assert all(u[-1]["streaming"] for u in updates[:-1])
    final = updates[-1][-1]
    assert final["streaming"] is False
    with pytest.warns(UserWarning, match="still streaming"):   # gr.Warning outside a request
        refused = generate.next_token("Every effort moves you", updates[-2][0], "greedy", 1.0,
                                      50, 123, updates[-2][-1])
    assert all(isinstance(x, type(gr.skip())) for x in refused)
    text, _, table, speed, after = generate.next_token("Every effort moves you", final["gen_text"],
                                                       "greedy", 1.0, 50, 123, final)
    assert len(after["gen_rows"]) == 6 and speed.startswith("6 tokens")
    # Stop (or a failed stream) unlocks the session
    assert generate.stopped(updates[-2][-1])[1]["streaming"] is False


def test_the_4_4_book_chart_is_shown_when_the_model_is_too_large(monkeypatch):
    state = built()[5]
    monkeypatch.setattr(gradients, "MAX_MODEL_BYTES", 0)
    book, gpt, _ = gradients.gradient_views(state)
    assert book.data                                 # the book's chart, whatever the model
    assert "too large" in plot_text(gpt)
    book, gpt, _ = gradients.gradient_views(None)    # before any build
    assert book.data and "Build a model" in plot_text(gpt)


def test_views_before_a_trace_are_hints_and_a_rebuild_clears_old_results():
    cleared = inside.cleared()
    assert all("Press Trace" in plot_text(fig) for fig in cleared[2:5])
    assert cleared[5]["visible"] is False            # no old export file
    assert all("Trace a prompt" in plot_text(fig) for fig in attention.cleared()[:3])
    assert gradients.cleared() == (None, None)
    assert "Press <b>Generate</b>" in generate.cleared()[1]


def test_bytes_of_one_character_are_grouped_under_it():
    ids = get_tokenizer().encode("战争 moves")
    state = built()[5]
    model, _ = shared.CACHE.get(state["key"])
    chips = inside._chips(trace(model, ids))
    assert chips.count('class="chip"') == len(ids)   # one chip per token, still
    assert '<b>战</b>' in chips and '<b>争</b>' in chips
    assert chips.count('class="chip-group"') == 2


def test_bars_are_drawn_on_a_0_to_100_percent_scale():
    bars = next_token_bars_html([dict(texts=["a", "b"], probs=[0.0002, 0.0001], chosen=None)])
    assert 'style="width:0.0%"' in bars               # a sliver (min-width), not a full bar
    assert "100 %" in bars and "a full bar is 100 %" in bars


def test_expected_refusals_log_one_line_and_no_traceback(caplog):
    @shared.friendly
    def refuse():
        raise ExplorerError("config.heads", "emb_dim must be divisible by n_heads")

    with caplog.at_level(logging.INFO, logger="gpt_explorer"), \
            pytest.raises(gr.Error) as caught:
        refuse()
    assert caught.value.print_exception is False
    assert [r.getMessage() for r in caplog.records] == [
        "refuse refused: emb_dim must be divisible by n_heads"]
    assert all(r.exc_info is None for r in caplog.records)


def test_a_value_error_that_is_no_refusal_is_shown_but_logged_as_a_bug(caplog):
    """A ValueError from outside the app that is not an ExplorerError (torch's, numpy's, a
    core bug's) is still a message on the page, for now; the log has its traceback."""
    @shared.friendly
    def trip():
        int("not a number")

    with caplog.at_level(logging.INFO, logger="gpt_explorer"), \
            pytest.raises(gr.Error) as caught:
        trip()
    assert "invalid literal" in caught.value.message
    assert [(r.levelno, r.exc_info is not None) for r in caplog.records] == [(logging.ERROR, True)]
