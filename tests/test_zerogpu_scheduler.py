"""The fake ZeroGPU scheduler (tests/zerogpu_scheduler.py) answers the real ``spaces`` client as
ZeroGPU does: a call gets a GPU and a worker the client forks and reuses, a visitor's quota is
charged what the call held, a call past its duration is cut off, and the launcher runs a script
(the app, for the benchmarks) under it."""
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import gradio as gr
import pytest

import zerogpu_scheduler
from zerogpu_scheduler import Scheduler, real_client

pytestmark = [pytest.mark.filterwarnings("ignore:Error while reading infos from Nvidia"),
              pytest.mark.filterwarnings("ignore:GPU task is exceeding its requested duration")]


@pytest.fixture
def zero_gpu(monkeypatch):
    scheduler = Scheduler()
    spaces = real_client(monkeypatch, scheduler)
    yield scheduler, spaces
    spaces.forget()
    scheduler.close()


def where_am_i(tag):
    return os.getpid(), tag


def sleep_then_return(seconds):
    time.sleep(seconds)
    return seconds


def test_a_call_runs_in_a_forked_worker_the_client_reuses_and_is_charged(zero_gpu):
    scheduler, spaces = zero_gpu
    task = spaces.GPU(where_am_i, duration=4)
    (first, a), (second, b) = task("a"), task("b")
    assert first == second != os.getpid() and (a, b) == ("a", "b")
    assert scheduler.outcomes() == ["ok", "ok"]
    assert [c.asked for c in scheduler.calls] == [6, 6]       # 4 s x the factor 1.5
    assert 0 < scheduler.charged(zerogpu_scheduler.POOL) < 12


def test_a_task_past_its_duration_is_cut_off_and_charged_the_duration(zero_gpu):
    scheduler, spaces = zero_gpu
    with pytest.raises(gr.Error, match="GPU task aborted"):
        spaces.GPU(sleep_then_return, duration=1)(60)
    call = scheduler.calls[-1]
    assert (call.outcome, call.charged) == ("aborted", 2)     # 1 s x 1.5, as the client asked
    with pytest.raises(ProcessLookupError):
        os.kill(call.pid, 0)


def test_the_ledger_is_rewritten_after_every_call(tmp_path, monkeypatch):
    ledger = tmp_path / "ledger.json"
    scheduler = Scheduler(ledger=str(ledger))
    spaces = real_client(monkeypatch, scheduler)
    try:
        scheduler.spend("1.2.3.4", 5)
        scheduler.write_ledger()
        assert json.loads(ledger.read_text())["charged"] == {"1.2.3.4": 5}
        spaces.GPU(where_am_i, duration=2)("x")
        # The client releases the GPU after the result has reached the caller: the release
        # (and the ledger written after it) comes a moment later.
        deadline = time.monotonic() + 10
        state = json.loads(ledger.read_text())
        while state["calls"][0]["outcome"] == "scheduled" and time.monotonic() < deadline:
            time.sleep(0.02)
            state = json.loads(ledger.read_text())
        assert [c["outcome"] for c in state["calls"]] == ["ok"]
        assert state["charged"]["space"] == pytest.approx(scheduler.charged("space"))
    finally:
        spaces.forget()
        scheduler.close()


SCRIPT = """
import sys
import spaces
import spaces.zero.wrappers

@spaces.GPU(duration=4)
def where(x):
    return spaces.zero.wrappers.forked, x

@spaces.GPU(duration=20)
def too_long():
    return 0

for call in (lambda: where(1), lambda: where(2), too_long):
    try:
        print("RESULT", call())
    except Exception as error:
        print("FAILED", type(error).__name__, getattr(error, "message", str(error))[:50])
print("ARGV", sys.argv[1:], __name__)
"""


def test_the_launcher_runs_a_script_as_main_under_the_real_client(tmp_path):
    script, ledger = tmp_path / "script.py", tmp_path / "ledger.json"
    script.write_text(SCRIPT)
    env = {**os.environ, "ZEROGPU_SPENT": "space=3580",
           "ZEROGPU_FAIL": "no_gpu=1", "ZEROGPU_LEDGER": str(ledger)}
    env.pop("SPACES_ZERO_GPU", None)
    env["PYTHONWARNINGS"] = "ignore"
    launcher = Path(zerogpu_scheduler.__file__)
    done = subprocess.run([sys.executable, str(launcher), str(script), "--flag"], env=env,
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stdout.splitlines() if not line.startswith("SPACES_ZERO")]
    # The Space's pool (no X-IP-Token) has 20 s left: no GPU (injected), then a 6 s call (4 s x
    # the factor 1.5), then a 30 s one refused in the client's words.
    assert lines[:2] == ["FAILED Error No GPU was available", "RESULT (True, 2)"]
    assert lines[2].startswith("FAILED Error Space app has reached its GPU limit")
    assert lines[3] == "ARGV ['--flag'] __main__"
    state = json.loads(ledger.read_text())
    assert [c["outcome"] for c in state["calls"]] == ["no_gpu", "ok", "pool"]
