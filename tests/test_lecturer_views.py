"""What a lecturer meets on a first walk through the tabs, checked without a browser (the walk
itself is tests/browser/test_lecturer_walk.py): quiet views without a trace, choices that follow
the model, "Next token" during a stream, the 4.4 demo with a large model, hints, byte chips."""
import json
import logging

import gradio as gr
import pytest

from explorer.app import share_view, shared
from explorer.app.handlers import handler
from explorer.app.pickers import HIST_PAIRS
from explorer.app.session import Session
from explorer.app.plots.generation import next_token_bars_html
from explorer.app.tabs import attention, build, generate, gradients, inside
from explorer.book.config import PRESETS
from explorer.book.errors import ExplorerError
from explorer.book.tokenizer import get_tokenizer
from explorer.probes import trace


def built(preset="teach-tiny", **changes):
    """/build's outputs (by name) in a new session."""
    cfg = {**PRESETS[preset].to_dict(), **changes}
    return build.build(preset, *cfg.values(), 123, "cpu", "float32", session=Session(),
                       progress=lambda *a, **k: None)


def plot_text(fig):
    return json.dumps(fig.to_plotly_json(), ensure_ascii=False)


def test_a_rebuild_resetting_layer_and_head_pickers_stays_quiet_without_a_trace():
    state = built()["session"]
    assert state.traces == ()
    # the change handlers the build sets off: no error, nothing redrawn (the choice is kept)
    assert set(attention.choice_changed(state, 0, "mean")) == {"session"}
    pair = next(iter(HIST_PAIRS))
    assert set(inside.choice_changed(state, 0, pair, "resid_pre", "std")) == {"session"}
    # the API endpoints still say what is missing
    with pytest.raises(gr.Error, match="Trace a prompt first"):
        attention.attention_views(state, 0, "mean")


def test_probe_choices_follow_a_model_without_layernorm():
    out = built(norm_placement="none")
    pair_update, point_update = out["pair"], out["heat_point"]
    pairs = [value for _, value in pair_update["choices"]]   # (shown, value)
    assert pairs and all("norm" not in p for p in pairs)
    assert pair_update["value"] == pairs[0]
    assert not any(p.startswith(("ln", "final_norm")) for p in point_update["choices"])
    # the default choices of that model trace at once, and its main chart has data (the
    # residual stream entering and leaving each block: its scale drifts)
    state = out["session"]
    traced = inside.run_trace("Every effort moves you", state, 0, pair_update["value"],
                              point_update["value"], "std")
    assert state.traces and "None of these probe points" not in plot_text(traced["stats_plot"])
    assert any(d.y is not None and len(d.y) for d in traced["stats_plot"].data)
    # a model with LayerNorm keeps every comparison
    assert [value for _, value in built()["pair"]["choices"]] == list(HIST_PAIRS)


def test_next_token_during_a_stream_is_refused_with_a_message_and_the_stream_ends_unlocked():
    state = built()["session"]
    updates = []
    for update in generate.generate("Every effort moves you", 5, "greedy", 1.0, 50, 123, False,
                                    state):
        updates.append((update, state.generation.streaming))
    assert all(streaming for _, streaming in updates[:-1]) and not updates[-1][1]
    state.generation.streaming = True      # as during the stream
    with pytest.warns(UserWarning, match="still streaming"):   # gr.Warning outside a request
        refused = generate.next_token("Every effort moves you", updates[-2][0]["gen_output"],
                                      "greedy", 1.0, 50, 123, state)
    assert refused == {}
    state.generation.streaming = False
    after = generate.next_token("Every effort moves you", updates[-1][0]["gen_output"],
                                "greedy", 1.0, 50, 123, state)
    assert len(state.generation.rows) == 6 and after["speed"].startswith("6 tokens")
    # Stop (or a failed stream) unlocks the session
    state.generation.streaming = True
    generate.stopped(state)
    assert state.generation.streaming is False


def test_next_token_after_a_new_prompt_starts_from_it_and_clear_empties_the_text():
    state = built()["session"]
    list(generate.generate("Every effort moves you", 3, "greedy", 1.0, 50, 123, False, state))
    shown = state.generation.text
    after = generate.next_token("Once upon a time", shown, "greedy", 1.0, 50, 123, state)
    assert after["gen_output"].startswith("Once upon a time")
    assert len(state.generation.rows) == 1
    cleared = generate.clear(state)
    assert cleared["gen_output"] == "" and state.generation is None


def test_the_4_4_book_chart_is_shown_when_the_model_is_too_large(monkeypatch):
    state = built()["session"]
    monkeypatch.setattr(gradients, "MAX_MODEL_BYTES", 0)
    out = gradients.gradient_views(state)
    assert out["book_grad_plot"].data                # the book's chart, whatever the model
    assert "too large" in plot_text(out["gpt_grad_plot"])
    out = gradients.gradient_views(None)             # before any build
    assert out["book_grad_plot"].data and "Build a model" in plot_text(out["gpt_grad_plot"])


def test_views_before_a_trace_are_hints_and_a_rebuild_clears_old_results():
    out = built()
    assert all("Press Trace" in plot_text(out[name]) for name in inside.VIEWS)
    assert out["export_stats_file"]["visible"] is False   # no old export file
    assert all("Press Show attention" in plot_text(out[name]) for name in attention.VIEWS)
    assert out["book_grad_plot"] is None and out["gpt_grad_plot"] is None
    assert "Press <b>Generate</b>" in out["bars"]
    assert out["export_note"] == "" and out["export_files"] is None   # no old export either
    assert "share_row" not in out               # no link was shown: the box is left alone
    session = out["session"]
    session.show(share_view.LinkBox, open=True)   # as /share_link leaves it (the box shows it)
    cfg = PRESETS["teach-tiny"].to_dict()
    again = build.build("teach-tiny", *cfg.values(), 124, "cpu", "float32", session=session,
                        progress=lambda *a, **k: None)
    assert again["share_row"]["visible"] is False and again["share_link"]["value"] == ""


def test_bytes_of_one_character_are_grouped_under_it():
    ids = get_tokenizer().encode("战争 moves")
    state = built()["session"]
    model, _ = shared.CACHE.get(state.keys[0])
    chips = inside.chips_html(trace(model, ids))
    assert chips.count('class="chip"') == len(ids)   # one chip per token, still
    assert '<b>战</b>' in chips and '<b>争</b>' in chips
    assert chips.count('class="chip-group"') == 2


def test_bars_are_drawn_on_a_0_to_100_percent_scale():
    bars = next_token_bars_html([dict(texts=["a", "b"], probs=[0.0002, 0.0001], chosen=None)])
    assert 'style="width:0.0%"' in bars               # a sliver (min-width), not a full bar
    assert "100 %" in bars and "a full bar is 100 %" in bars


def test_expected_refusals_log_one_line_and_no_traceback(caplog):
    @handler(outputs=())
    def refuse():
        raise ExplorerError("config.heads", "emb_dim must be divisible by n_heads")

    with caplog.at_level(logging.INFO, logger="gpt_explorer"), \
            pytest.raises(gr.Error) as caught:
        refuse()
    assert caught.value.print_exception is False
    assert [r.getMessage() for r in caplog.records] == [
        "refuse refused: emb_dim must be divisible by n_heads"]
    assert all(r.exc_info is None for r in caplog.records)


def test_any_other_error_is_a_bug_shown_briefly_and_logged_with_its_traceback(caplog):
    """A ValueError that is no ExplorerError (torch's, numpy's, Python's own from our bug: say
    "tuple.index(x): x not in tuple") is never shown as if the student's input were wrong."""
    @handler(outputs=())
    def trip():
        int("not a number")

    with caplog.at_level(logging.INFO, logger="gpt_explorer"), \
            pytest.raises(gr.Error) as caught:
        trip()
    assert "This is a bug in GPT Explorer (ValueError)" in caught.value.message
    assert "invalid literal" not in caught.value.message
    assert [(r.levelno, r.exc_info is not None) for r in caplog.records] == [(logging.ERROR, True)]
