"""What a lecturer's walk (issue 32) found in the app's Python: a re-imported export keeps the
note of where its weights came from; Remove B keeps model A's traces and views; a knock-out B
is described on the Build tab as A with the knock-out; Show attention after a new model (such
as a trained one just used) traces the prompt instead of refusing; a refused build stays said
on the status line. (The browser side: tests/browser/test_walk_defects.py.)"""
import gradio as gr
import pytest
import torch

from explorer.book.config import PRESETS
from explorer.book.errors import Text
from explorer.book.model import GPTModel
from explorer.runtime.cache import ModelCache
from explorer.runtime.checkpoints import file_source
from explorer.runtime.export import export_model
from explorer.runtime.loading import load_file
from explorer.runtime.sources import ModelKey, WeightsSource

PROMPT = "Every effort moves you"
TRAINED = "trained 150 steps on the story's start (pre-LN (book))"


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


def _tiny_model():
    torch.manual_seed(0)
    return GPTModel(PRESETS["teach-tiny"]).eval()


# ---------------------------------------------------------------------------------------------
def test_a_reimported_export_keeps_the_note_of_where_its_weights_came_from(tmp_path):
    """Item 13: "trained 150 steps" was lost when Train's export came back in on the Build
    tab (weights: from a file): the caption said only "from file model.safetensors"."""
    caption = Text("train.caption", "trained {steps} steps on {corpus} ({variant})",
                   steps=150, corpus="the story's start", variant="pre-LN (book)")
    files = export_model(_tiny_model(), tmp_path / "out", source=WeightsSource.trained(caption))
    _, source, _ = file_source(files[0])
    assert source.caption.startswith("from file model.safetensors (sha256 ")
    assert source.caption.endswith(": " + TRAINED)
    # the same with its config.json uploaded beside it, and through load_file
    _, source, _ = file_source(files[0], files[1])
    assert source.caption.endswith(TRAINED)
    _, key = load_file(files[0], cache=ModelCache())
    assert key.source.caption.endswith(TRAINED)
    # exported again from the file: the same note, not "from file …: from file …"
    again = export_model(_tiny_model(), tmp_path / "again", source=source)
    _, source, _ = file_source(again[0])
    assert source.caption.count("from file") == 1 and source.caption.endswith(TRAINED)


def test_a_files_note_is_plain_text_of_bounded_length(tmp_path):
    """A note comes from a file (anyone's): shown as plain words, never as Markdown or HTML,
    and cut to a caption's length."""
    from explorer.runtime.checkpoints import MAX_NOTE_CHARS
    hostile = "<img src=x onerror=alert(1)> **bold** [link](javascript:x) `code`\n" + "a" * 500
    files = export_model(_tiny_model(), tmp_path, source=WeightsSource.trained(hostile))
    _, source, _ = file_source(files[0])
    assert not set("<>*[]`\n") & set(source.note)
    assert len(source.note) == MAX_NOTE_CHARS and source.note.endswith("…")


def test_remove_b_keeps_model_as_traces_and_views(session):
    """Item 13: after Remove B (Knock out tab), Inside and Attention were emptied; they keep
    showing model A's trace."""
    from explorer.app.pickers import HIST_PAIRS
    from explorer.app.tabs import attention, build, inside, knockout, pin
    knockout.intervene("zero trf_blocks[0].att head 1", session)
    traced(session)
    attention.attention_views(session, 1, "2")
    a_trace = session.traces[0]
    out = pin.unpin_model(session, None)
    assert len(session.models) == 1 and not session.models[0].key.interventions
    assert session.traces == (a_trace,)
    assert 'class="chip"' in out["chips"] and "4 tokens" in out["trace_info"]
    assert "Attention in layer 1" in out["att_plot"].layout.title.text
    assert "head 2" in out["att_plot"].layout.title.text
    assert "B" not in {trace.name for trace in out["att_plot"].data if trace.name}
    # the views drawn are those of A alone, as a fresh trace of A draws them
    fresh = inside.views(session, 1, next(iter(HIST_PAIRS)), "ln1_out", "std")
    assert out["stats_plot"] == fresh["stats_plot"]
    # any other change of model still drops the results: a new model A starts with hints
    pin.pin_model(session, None)
    assert session.traces == ()
    traced(session)
    out = build.build("teach-tiny", *[getattr(PRESETS["teach-tiny"], f) for f in build.FIELDS],
                      7, "cpu", "float32", session=session)
    assert session.traces == () and out["chips"] == ""
    assert "Press Trace" in str(out["stats_plot"].layout.annotations[0].text)


def test_a_knocked_out_b_is_described_as_a_with_the_knock_out(session):
    """Item 13: the Build tab said "Same architecture, different weights: A random, seed 123;
    B random, seed 123" of a knock-out B, which runs on A's own weights."""
    from explorer.app.tabs import build, knockout
    knockout.intervene("zero trf_blocks[0].att head 1", session)
    views = build.model_views(session)
    assert "different weights" not in views["arch"]
    assert "B is A with trf_blocks[0].att head 1 zeroed: A&#x27;s own weights" in views["arch"]
    # the two together hold A's weights once (B has no copy)
    a_mb = views["memory"].split("A **")[1].split(" MB")[0]
    together = views["memory"].split("the two together **")[1].split(" MB")[0]
    assert together == a_mb


def test_show_attention_after_a_new_model_traces_the_prompt(session):
    """Item 13: after "Use this model" (a new model A: no trace yet), Show attention gave three
    "Error" badges and "Trace a prompt first"; it traces the session's prompt instead."""
    from explorer.app.session import Made, Model
    from explorer.app.tabs import attention
    traced(session)
    trained = ModelKey(PRESETS["teach-tiny"], 7, "cpu", "float32")   # (as Use makes it A)
    session.with_model_a(Model(trained, Made("trained", "pre-LN (book)")))
    assert session.traces == ()
    with pytest.raises(gr.Error, match="Trace a prompt first"):
        attention.attention_views(session, 0, "mean")          # /attention for API clients
    out = attention.show_attention(session, 1, "mean")
    assert len(session.traces) == 1 and session.prompt == PROMPT
    assert "Attention in layer 1" in out["att_plot"].layout.title.text
    assert 'class="chip"' in out["chips"]            # the Inside tab shows the trace too
    again = attention.show_attention(session, 0, "mean")
    assert "chips" not in again and session.prompt == PROMPT   # a trace there: not again


def test_a_refused_build_stays_on_the_status_line_until_the_next_model(session):
    """Item 13: offline, the advice for pretrained GPT-2 was only in a message box; the status
    line said "No model yet". A refused build's message stays on the status line."""
    from explorer.app.tabs import build
    cfg = PRESETS["teach-tiny"]
    values = [getattr(cfg, f) for f in build.FIELDS]
    values[build.FIELDS.index("n_heads")] = 5          # 64 is not divisible by 5
    with pytest.raises(gr.Error) as refused:
        build.build("teach-tiny", *values, 123, "cpu", "float32", session=session)
    status = build.build_refused(session)["status"]
    assert "Model ready" in status
    assert status.endswith("\n\n**Not built:** " + refused.value.message)
    build.build("teach-tiny", *[getattr(cfg, f) for f in build.FIELDS], 123, "cpu", "float32",
                session=session)
    assert "Not built" not in build.build_refused(session)["status"]
