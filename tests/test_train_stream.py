"""The Train tab's live stream (issue 32): the progress line at most every POLL_SECONDS, the
figures, table and samples at most every FIGURE_SECONDS, and the whole view whenever the job
ends, the sharing line changes or the page's language changes. A job that steps on its own
clock stands in for the lab, so the test counts what each update carries, not seconds."""
from dataclasses import replace
from types import SimpleNamespace

import pytest

from explorer.app import prefs, shared
from explorer.app.tabs import train_live
from explorer.runtime.training.views import JobView, RunView

FULL = set(train_live.LIVE)


def run_view(step, evals):
    return RunView(label="pre-LN", config={}, parameters=1, tokens_seen=step * 8,
                   train_loss_now=5.0, val_loss_now=5.0, seconds_per_step=0.1, diverged=False,
                   diverged_at=None, note="", eval_steps=list(range(evals)),
                   eval_tokens=[0] * evals, train_losses=[5.0] * evals,
                   val_losses=[5.0] * evals, grad_steps=list(range(step)),
                   grad_norms=[[1.0]] * step, sample="", sample_step=None)


class SteppingJob:
    """A job that makes one step (and an evaluation every second step) per poll, and finishes
    after ``steps``."""

    def __init__(self, steps):
        self.key, self.step, self.steps = ("stub", id(self)), 0, steps

    @property
    def running(self):
        return self.step < self.steps

    def view(self):
        return JobView(status="running" if self.running else "finished", message="",
                       step=self.step, total_steps=self.steps, tokens_seen=self.step * 8,
                       total_tokens=self.steps * 8, epoch=0, batches_per_epoch=10,
                       corpus="the default story", seconds=float(self.step),
                       runs=[run_view(self.step, self.step // 2)])


@pytest.fixture
def stream(monkeypatch):
    """(updates, job, clock): a stream of a SteppingJob, one poll per fake second."""
    watching = {"on": True}
    monkeypatch.setattr(shared, "LAB", SimpleNamespace(
        watching=lambda owner, job: watching["on"], members=lambda job: 1,
        watchers=lambda job: 1))
    now = [0.0]

    def poll(seconds):
        now[0] += seconds
        job.step = min(job.step + 1, job.steps)

    monkeypatch.setattr(train_live.time, "sleep", poll)
    job = SteppingJob(steps=30)
    updates = train_live.watch(job, "owner", clock=lambda: now[0])
    return updates, job, now


def test_between_figures_only_the_progress_line_is_sent(stream):
    updates, job, now = stream
    sent = [(now[0], set(update)) for update in updates]
    whole = [t for t, names in sent if names == FULL]
    light = [names for _, names in sent if names != FULL]
    assert len(sent) == job.steps + 1                        # every step's progress line
    assert light and all(names == {"train_progress"} for names in light)
    gaps = [b - a for a, b in zip(whole, whole[1:-1])]       # (the last one: the job ended)
    assert gaps and min(gaps) >= train_live.FIGURE_SECONDS
    assert len(whole) <= job.steps / train_live.FIGURE_SECONDS + 2
    assert sent[0][1] == FULL and sent[-1][1] == FULL        # the first view, and the end


def test_the_last_view_is_whole_and_shows_the_end(stream):
    updates, job, _ = stream
    last = list(updates)[-1]
    assert set(last) == FULL
    assert f"{job.steps:,} of {job.steps:,}" in last["train_progress"]


def test_a_language_change_redraws_the_whole_view_at_the_next_poll(stream, monkeypatch):
    updates, job, now = stream
    first = next(updates)
    assert set(first) == FULL
    assert set(next(updates)) == {"train_progress"}
    with prefs.using(prefs.parse("zh", False)):     # the session's, at this step (handler)
        changed = next(updates)
    assert set(changed) == FULL
    assert "步" in changed["train_progress"]


def test_another_run_of_the_same_job_shows_its_own_time(monkeypatch):
    """The figures are shared by the job's key; a second run of that job (the first one
    forgotten) took another time, and its progress line says so."""
    monkeypatch.setattr(shared, "LAB", SimpleNamespace(
        watching=lambda owner, job: True, members=lambda job: 1, watchers=lambda job: 1))
    lines = []
    for seconds_a_step in (1.0, 3.0):
        job = SteppingJob(steps=4)
        job.key, job.step = ("stub", "the same"), 4          # finished, one key for both
        finished = job.view()
        job.view = lambda finished=finished, s=seconds_a_step: \
            replace(finished, seconds=4 * s)
        lines.append(list(train_live.watch(job, "owner"))[-1]["train_progress"])
    assert "4 s." in lines[0] and "12 s." in lines[1], lines
