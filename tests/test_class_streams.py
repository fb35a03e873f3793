"""A class of 42 on one Space (issue 46, item 9): sessions that watch one shared training job,
or replay a finished one, must leave the server able to answer everyone else's clicks.

Gradio runs each step of a synchronous generator in one of its 40 worker threads; a stream that
slept between its updates there held one for its whole life, and the 41st click waited (30 s
for /preset_config while 42 sessions watched a job; 19-20 s while 42 replayed). The streams now
yield their pauses (``handlers.Pause``), which ``Page.on`` awaits without a thread.

The sessions here join the real queue over HTTP, as the page does, each with its own session
hash; the job is small (teach-tiny), so that what is measured is the server's threads, not its
CPU."""
import json
import threading
import time
import urllib.request
import uuid

import pytest
import torch

from explorer.app import shared
from explorer.app.server import create_demo, launch_options
from explorer.runtime.training.setup import TrainingSettings

from test_bad_inputs import fn_index, raw_call

SESSIONS = 42
ANSWER_S = 2.0             # the bound for another visitor's click
TIMEOUT_S = 60


@pytest.fixture(scope="module")
def app():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    demo = create_demo()
    _, url, _ = demo.launch(prevent_thread_lock=True, quiet=True,
                            **{**launch_options(host="127.0.0.1"), "server_port": None})
    yield url
    demo.close()
    torch.set_num_threads(before)


def train_args(steps) -> list:
    book = TrainingSettings()
    return ["the default story", "", None, ["pre-LN (book)", "post-LN"], "teach-tiny", steps,
            book.batch_size, 32, book.lr, 0, 50, 1, None]


class Stream:
    """One session's streaming event, joined as the page joins it; ``updates`` counts the
    updates its SSE stream brought so far."""

    def __init__(self, url, api, data):
        self.session = uuid.uuid4().hex[:11]
        body = json.dumps({"data": data, "fn_index": fn_index(url, api),
                           "session_hash": self.session, "event_data": None,
                           "trigger_id": None}).encode()
        request = urllib.request.Request(f"{url}gradio_api/queue/join", data=body,
                                         headers={"Content-Type": "application/json"})
        self.event = json.load(urllib.request.urlopen(request, timeout=TIMEOUT_S))["event_id"]
        self.response = urllib.request.urlopen(
            f"{url}gradio_api/queue/data?session_hash={self.session}", timeout=TIMEOUT_S)
        self.updates, self.ended, self.first = 0, False, threading.Event()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        try:
            for line in self.response:
                if not line.startswith(b"data:"):
                    continue
                message = json.loads(line[5:])
                if message.get("event_id") != self.event:
                    continue
                if message.get("msg") == "process_generating":
                    self.updates += 1
                    self.first.set()
                if message.get("msg") == "process_completed":
                    self.ended = True
                    self.first.set()
                    return
        except Exception:  # noqa: BLE001 - closed by the test
            self.ended = True
            self.first.set()

    def close(self):
        self.response.close()


def answered_seconds(url) -> float:
    """Another visitor picks a preset: the seconds until /preset_config answered."""
    started = time.perf_counter()
    raw_call(url, uuid.uuid4().hex[:11], "/preset_config", ["gpt2-small"])
    return time.perf_counter() - started


def many(url, api, data) -> list[Stream]:
    streams = [Stream(url, api, data) for _ in range(SESSIONS)]
    for stream in streams:
        assert stream.first.wait(TIMEOUT_S), "a stream never began"
    return streams


def test_while_42_sessions_watch_one_job_another_visitors_click_is_answered(app):
    streams = many(app, "/train_start", train_args(steps=1500))
    try:
        job = shared.LAB.job(streams[0].session)
        assert job is not None and all(shared.LAB.job(s.session) is job for s in streams)
        seconds = answered_seconds(app)
        still = sum(not s.ended for s in streams)
        assert still == SESSIONS, "the watchers' streams were to go on"
        assert seconds <= ANSWER_S, f"/preset_config answered after {seconds:.1f} s"
    finally:
        for stream in streams:
            shared.LAB.cancel(stream.session)
            stream.close()


def test_while_42_sessions_replay_a_finished_job_another_visitors_click_is_answered(app):
    args = train_args(steps=4)
    first = Stream(app, "/train_start", args)           # trains it; the others find it done
    assert first.first.wait(TIMEOUT_S)
    job = shared.LAB.job(first.session)
    assert job.wait(TIMEOUT_S) and job.done
    finished = [Stream(app, "/train_start", args) for _ in range(SESSIONS)]
    for stream in finished:
        assert stream.first.wait(TIMEOUT_S)
    replays = []
    try:
        for stream in finished:
            replay = Stream.__new__(Stream)
            replays.append(replay)
            replay_in(app, replay, stream.session)
        for replay in replays:
            assert replay.first.wait(TIMEOUT_S)
        seconds = answered_seconds(app)
        assert sum(not r.ended for r in replays) == SESSIONS, "the replays were to go on"
        assert seconds <= ANSWER_S, f"/preset_config answered after {seconds:.1f} s"
    finally:
        for stream in [first, *finished, *replays]:
            shared.LAB.cancel(getattr(stream, "session", ""))
            stream.close()


def replay_in(url, replay: Stream, session: str) -> None:
    """/train_replay over 60 s, in the session ``session`` (which has the finished job)."""
    body = json.dumps({"data": ["60 s", None], "fn_index": fn_index(url, "/train_replay"),
                       "session_hash": session, "event_data": None,
                       "trigger_id": None}).encode()
    request = urllib.request.Request(f"{url}gradio_api/queue/join", data=body,
                                     headers={"Content-Type": "application/json"})
    replay.session = session
    replay.event = json.load(urllib.request.urlopen(request, timeout=TIMEOUT_S))["event_id"]
    replay.response = urllib.request.urlopen(
        f"{url}gradio_api/queue/data?session_hash={session}", timeout=TIMEOUT_S)
    replay.updates, replay.ended, replay.first = 0, False, threading.Event()
    threading.Thread(target=replay._read, daemon=True).start()
