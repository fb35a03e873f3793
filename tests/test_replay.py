"""Replay of a finished training job (issue 34, part 3): the view cut back to an earlier step
keeps exactly what had been recorded by then, and /train_replay draws the recorded history
frame by frame, ending on the whole run."""
import json
from types import SimpleNamespace

import pytest
from local_client import local_client
from test_plots import decode

from explorer.app import shared
from explorer.app.tabs import train as train_tab
from explorer.runtime.training.replay import replay_steps, view_at
from explorer.runtime.training.lab import TrainingLab
from explorer.runtime.training.views import JobView, RunView


def recorded_run(label="pre-LN"):
    """20 steps (counted from 0): evaluations at steps 0, 5, 10, 15, 19; gradient norms at
    every step; a sample after the 20th."""
    evals = [0, 5, 10, 15, 19]
    return RunView(label=label, config={}, parameters=1, tokens_seen=320,
                   train_loss_now=4.0, val_loss_now=4.5, seconds_per_step=0.1, diverged=False,
                   diverged_at=None, note="", eval_steps=evals,
                   eval_tokens=[16 * s for s in evals],
                   train_losses=[10.0 - s / 4 for s in evals],
                   val_losses=[10.5 - s / 4 for s in evals],
                   grad_steps=list(range(20)), grad_norms=[[float(s)] * 2 for s in range(20)],
                   sample="Every effort moves you on", sample_step=20)


def finished_view():
    return JobView(status="finished", message="", step=20, total_steps=20, tokens_seen=320,
                   total_tokens=320, epoch=1, batches_per_epoch=10, corpus="the default story",
                   seconds=8.0, runs=[recorded_run("pre-LN"), recorded_run("no shortcut")])


def test_a_view_cut_back_keeps_what_was_recorded_by_then():
    whole = finished_view()
    at = view_at(whole, 11)            # 11 steps done: steps 0 .. 10
    assert at.step == 11 and at.tokens_seen == 176 and at.seconds == pytest.approx(4.4)
    for run, full in zip(at.runs, whole.runs):
        assert run.eval_steps == [0, 5, 10]
        assert run.eval_tokens == [0, 80, 160]
        assert run.train_losses == full.train_losses[:3]
        assert run.val_losses == full.val_losses[:3]
        assert run.train_loss_now == full.train_losses[2]
        assert run.grad_steps == list(range(11)) and run.grad_norms == full.grad_norms[:11]
        assert run.sample == "" and run.sample_step is None      # drawn after step 19
    assert view_at(whole, 10).runs[0].eval_steps == [0, 5]
    assert view_at(whole, 20) == whole
    assert whole.runs[0].eval_steps == [0, 5, 10, 15, 19]        # the recorded view unchanged


def test_replay_frames_rise_to_the_last_step_without_repeats():
    assert replay_steps(20, 4) == [5, 10, 15, 20]
    assert replay_steps(3, 15) == [1, 2, 3]
    assert replay_steps(0, 5) == [0]


@pytest.fixture
def lab(monkeypatch):
    fresh = TrainingLab(max_jobs=1)
    monkeypatch.setattr(shared, "LAB", fresh)
    monkeypatch.setattr(train_tab, "REPLAY_FRAME_SECONDS", 0.01)   # a frame per step
    yield fresh
    for session in list(fresh._members):
        fresh.cancel(session)


START = dict(data="the default story", text="", upload=None,
             variants=["pre-LN (book)", "no shortcut"], preset="teach-tiny", steps=10,
             batch_size=2, context_length=16, lr=0.0004, warmup_steps=0,
             api_name="/train_start")


def loss_points(figure_json):
    return [decode(trace["x"]).size for trace in json.loads(figure_json)["data"]]


def test_replay_draws_the_recorded_history_then_the_whole_run(app_url, lab):
    c = local_client(app_url)
    # no finished job: a note beside the button (the last output), not an error
    assert "Replay draws a finished job" in c.predict("10 s", api_name="/train_replay")[-1]
    finished = c.predict(**START)
    assert "Finished" in finished[0]
    streamed = [update[0] for update in c.submit("10 s", api_name="/train_replay")]
    assert streamed[-1] == finished[0]
    # the frames themselves, from the handler (gradio_client patches one figure in place)
    request = SimpleNamespace(session_hash=c.session_hash, headers={}, client=None)
    frames = [f for f in train_tab.train_replay("10 s", request=request)
              if isinstance(f, dict) and "train_progress" in f]   # (not the note, nor a pause)
    steps = [int(f["train_progress"].split("step ")[1].split(" of")[0]) for f in frames]
    assert steps == list(range(1, START["steps"] + 1))          # a frame per step, here
    assert all("Replay of the recorded run" in f["train_progress"] for f in frames[:-1])
    recorded = lab.job(c.session_hash).view()
    for step, frame in zip(steps, frames):
        evaluated = sum(s < step for s in recorded.runs[0].eval_steps)
        assert loss_points(frame["train_loss_plot"]) == [evaluated] * 4
    assert frames[-1]["train_progress"] == finished[0]
    assert frames[-1]["train_table"] == train_tab.table_rows(recorded)
    # a second session asking for the same job gets it finished, and is told so
    again = local_client(app_url).predict(**START)
    assert "had finished already" in again[0]


def test_replay_refuses_an_unknown_speed(app_url, lab):
    c = local_client(app_url)
    with pytest.raises(Exception, match="10 s"):
        c.predict("fast", api_name="/train_replay")
