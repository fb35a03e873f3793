"""The ZeroGPU stand-in (tests/zerogpu_standin.py) behaves as ``spaces.GPU`` on a ZeroGPU Space:
the task runs in a forked worker, everything crossing is pickled, a generator streams, the
visitor's quota is checked before and charged after, and failures come as ZeroGPU words them.

The tasks are module-level functions: a worker is a fork, so it has them already, but what they
return must pickle."""
import contextvars
import json
import os
import pickle
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import gradio as gr
import pytest
from gradio.context import LocalContext

import zerogpu_standin
from zerogpu_standin import ABORTED_MESSAGE, NO_GPU_MESSAGE, ArgumentsNotPicklable, install

QUOTA_WORDING = re.compile(r"You have exceeded your GPU quota \((\d+)s requested vs\. (\d+)s "
                           r"left\)\. Try again in (\d+):(\d\d):(\d\d)")


@pytest.fixture
def zero_gpu(monkeypatch):
    return install(monkeypatch)


def where_am_i(tag):
    return {"tag": tag, "pid": os.getpid(), "parent": os.getppid(),
            "in_worker": zerogpu_standin.in_worker(), "worker_pid": zerogpu_standin.worker_pid()}


def append_and_return(items):
    items.append("changed in the worker")
    return items


def return_a_lock():
    return threading.Lock()


def sleep_then_return(seconds):
    time.sleep(seconds)
    return seconds


def raise_value_error(text):
    raise ValueError(text)


class CarriesALock(Exception):
    def __init__(self):
        super().__init__("carries a lock")
        self.lock = threading.Lock()


def raise_unpicklable():
    raise CarriesALock()


def wait_for_file_between_yields(path, wait_s):
    yield ("first", os.getpid())
    give_up = time.monotonic() + wait_s
    while not os.path.exists(path) and time.monotonic() < give_up:
        time.sleep(0.01)
    yield "released" if os.path.exists(path) else "never released"


def yield_then_raise():
    yield 1
    raise KeyError("after one")


def yield_then_sleep(seconds):
    yield "first"
    time.sleep(seconds)
    yield "too late"


def count_slowly(n):
    for i in range(n):
        time.sleep(0.05)
        yield i


def matmul_sum(n):
    import torch
    a = torch.ones(n, n)
    return float((a @ a).sum())


def request_from(ip):
    return gr.Request(client={"host": ip})


def as_visitor(ip, fn, *args):
    """Call ``fn`` as Gradio would within a request from ``ip``."""
    def call():
        LocalContext.request.set(request_from(ip))
        return fn(*args)
    return contextvars.copy_context().run(call)


# ---------------------------------------------------------------------------------------------
# Where the task runs, and what crosses
def test_the_task_runs_in_a_forked_worker(zero_gpu):
    on_gpu = zero_gpu.GPU(where_am_i)
    seen = on_gpu("x")
    assert seen["tag"] == "x"
    assert seen["pid"] != os.getpid() and seen["parent"] == os.getpid()
    assert seen["in_worker"] and seen["worker_pid"] == seen["pid"]
    assert not zerogpu_standin.in_worker() and zerogpu_standin.worker_pid() is None
    assert zero_gpu.calls[-1].pid == seen["pid"] and zero_gpu.calls[-1].outcome == "ok"
    with pytest.raises(ProcessLookupError):
        os.kill(seen["pid"], 0)           # reaped, not a zombie


def test_every_form_of_the_decorator_works(zero_gpu):
    @zero_gpu.GPU
    def bare(x):
        return x + 1

    @zero_gpu.GPU(duration=7)
    def with_seconds(x):
        return x + 2

    assert bare(1) == 2 and with_seconds(1) == 3
    assert zero_gpu.GPU(where_am_i, duration=lambda tag: len(tag))("abcd")["in_worker"]
    assert [c.asked for c in zero_gpu.calls] == [60, 7, 4]


def test_arguments_and_results_are_pickled_copies(zero_gpu):
    items = ["mine"]
    back = zero_gpu.GPU(append_and_return)(items)
    assert items == ["mine"]                        # the worker changed its own copy
    assert back == ["mine", "changed in the worker"] and back is not items


@pytest.mark.parametrize("argument", [lambda: 1, threading.Lock()], ids=["lambda", "lock"])
def test_an_unpicklable_argument_raises_in_the_caller_and_nothing_runs(zero_gpu, argument):
    with pytest.raises(pickle.PicklingError):
        zero_gpu.GPU(where_am_i)(argument)
    assert issubclass(ArgumentsNotPicklable, TypeError)   # what ZeroGPU lets through for a lock
    call = zero_gpu.calls[-1]
    assert (call.outcome, call.pid, zero_gpu.charged("-")) == ("error", None, 0)


def test_an_unpicklable_result_raises_pickling_error_in_the_caller(zero_gpu):
    with pytest.raises(pickle.PicklingError, match="result"):
        zero_gpu.GPU(return_a_lock)()


def test_exceptions_come_back_with_their_type(zero_gpu, capfd):
    with pytest.raises(ValueError, match="^bad input$"):
        zero_gpu.GPU(raise_value_error)("bad input")
    assert zero_gpu.calls[-1].outcome == "error"
    assert "in raise_value_error" in capfd.readouterr().err    # the worker's traceback


def test_an_unpicklable_exception_comes_back_as_a_runtime_error_naming_it(zero_gpu):
    with pytest.raises(RuntimeError, match="CarriesALock"):
        zero_gpu.GPU(raise_unpicklable)()


def test_a_generator_streams_each_value_as_it_is_yielded(zero_gpu, tmp_path):
    release = tmp_path / "release"
    values = zero_gpu.GPU(wait_for_file_between_yields, duration=20)(str(release), 5.0)
    first, pid = next(values)        # the worker now waits for the file
    assert first == "first" and pid != os.getpid()
    release.touch()
    assert list(values) == ["released"]
    assert zero_gpu.calls[-1].outcome == "ok"


def test_a_generators_exception_comes_after_its_values(zero_gpu):
    values = zero_gpu.GPU(yield_then_raise)()
    assert next(values) == 1
    with pytest.raises(KeyError, match="after one"):
        next(values)


def test_a_closed_generators_worker_runs_on_and_is_charged(zero_gpu):
    values = zero_gpu.GPU(count_slowly)(6)
    assert next(values) == 0
    values.close()
    assert zero_gpu.idle(timeout=10)
    call = zero_gpu.calls[-1]
    assert call.outcome == "closed" and call.used >= 6 * 0.05


def test_torch_works_in_the_worker_after_the_server_used_its_threads(zero_gpu):
    # GNU OpenMP hangs in a fork's forking thread once the parent has used its thread team;
    # a task run on that thread would be aborted at its duration instead of returning.
    n = 256
    assert matmul_sum(n) == n ** 3          # the parent's thread team, started
    assert zero_gpu.GPU(matmul_sum, duration=10)(n) == n ** 3


# ---------------------------------------------------------------------------------------------
# The quota
def test_the_time_used_is_charged_not_the_time_asked(zero_gpu):
    assert zero_gpu.GPU(sleep_then_return, duration=30)(0.3) == 0.3
    call = zero_gpu.calls[-1]
    assert 0.3 <= call.used == call.charged < 10
    assert zero_gpu.charged("-") == pytest.approx(call.used)
    assert zero_gpu.left("-") == pytest.approx(120 - call.used)


def test_a_duration_above_the_quota_left_is_refused_in_zerogpus_words(zero_gpu, tmp_path):
    zero_gpu.spend("-", 110)
    with pytest.raises(gr.Error) as refused:
        zero_gpu.GPU(where_am_i, duration=20)("never")
    words = QUOTA_WORDING.fullmatch(refused.value.message)
    assert words, refused.value.message
    assert words.groups() == ("20", "10", "2", "00", "00")   # 10 s short: 10/120 of a day
    call = zero_gpu.calls[-1]
    assert (call.outcome, call.pid, zero_gpu.charged("-")) == ("quota", None, 110)
    assert zero_gpu.GPU(where_am_i, duration=10)("fits")["in_worker"]


def test_each_visitor_ip_has_its_own_quota(zero_gpu):
    on_gpu = zero_gpu.GPU(where_am_i, duration=30)
    zero_gpu.spend("10.0.0.1", 100)
    with pytest.raises(gr.Error, match="exceeded your GPU quota"):
        as_visitor("10.0.0.1", on_gpu, "a")
    assert as_visitor("10.0.0.2", on_gpu, "b")["in_worker"]
    assert on_gpu("c")["in_worker"]                        # no request: the "-" visitor
    assert [(c.ip, c.outcome) for c in zero_gpu.calls] == [
        ("10.0.0.1", "quota"), ("10.0.0.2", "ok"), ("-", "ok")]
    assert zero_gpu.charged("10.0.0.1") == 100
    assert 0 < zero_gpu.charged("10.0.0.2") < 30 and 0 < zero_gpu.charged("-") < 30


def test_calls_from_many_threads_each_get_a_worker_and_a_charge(zero_gpu):
    on_gpu = zero_gpu.GPU(sleep_then_return, duration=30)
    results = {}
    threads = [threading.Thread(target=lambda i=i: results.update(
        {i: as_visitor(f"10.0.1.{i}", on_gpu, 0.2)})) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == {i: 0.2 for i in range(4)}
    assert len({c.pid for c in zero_gpu.calls}) == 4
    assert all(0.2 <= zero_gpu.charged(f"10.0.1.{i}") < 30 for i in range(4))


# ---------------------------------------------------------------------------------------------
# Failures
def test_no_gpu_fails_the_next_calls_without_running_or_charging(zero_gpu):
    zero_gpu.fail_next("no_gpu", n=2)
    on_gpu = zero_gpu.GPU(where_am_i)
    for _ in range(2):
        with pytest.raises(gr.Error) as failed:
            on_gpu("x")
        assert failed.value.message == NO_GPU_MESSAGE
    assert on_gpu("x")["in_worker"]
    assert [(c.outcome, c.charged) for c in zero_gpu.calls[:2]] == [("no_gpu", 0)] * 2


def test_an_injected_abort_kills_the_worker_and_charges_the_duration(zero_gpu):
    zero_gpu.fail_next("abort")
    with pytest.raises(gr.Error) as failed:
        zero_gpu.GPU(sleep_then_return, duration=25)(0.1)
    assert failed.value.message == ABORTED_MESSAGE
    call = zero_gpu.calls[-1]
    assert (call.outcome, call.charged) == ("aborted", 25) and call.used < 25


def test_an_injected_abort_can_let_a_generators_first_values_through(zero_gpu):
    zero_gpu.fail_next("abort", after=2)
    got = []
    with pytest.raises(gr.Error, match=ABORTED_MESSAGE):
        for value in zero_gpu.GPU(count_slowly, duration=25)(10):
            got.append(value)
    assert got == [0, 1] and zero_gpu.charged("-") == 25


def test_a_task_past_its_duration_is_killed_and_charged_the_duration(zero_gpu):
    t0 = time.monotonic()
    with pytest.raises(gr.Error) as failed:
        zero_gpu.GPU(sleep_then_return, duration=1)(30)
    assert failed.value.message == ABORTED_MESSAGE and time.monotonic() - t0 < 10
    call = zero_gpu.calls[-1]
    assert (call.outcome, call.charged) == ("aborted", 1)
    with pytest.raises(ProcessLookupError):
        os.kill(call.pid, 0)


def test_a_generator_past_its_duration_keeps_what_it_yielded_then_fails(zero_gpu):
    got = []
    with pytest.raises(gr.Error, match=ABORTED_MESSAGE):
        for value in zero_gpu.GPU(yield_then_sleep, duration=1)(30):
            got.append(value)
    assert got == ["first"] and zero_gpu.calls[-1].outcome == "aborted"


# ---------------------------------------------------------------------------------------------
# Installing it, and the launcher
def test_install_makes_it_the_spaces_module_on_a_zero_gpu_space(monkeypatch):
    monkeypatch.delenv("SPACES_ZERO_GPU", raising=False)
    stand_in = install(monkeypatch, quota_s=30)
    import spaces
    assert spaces is stand_in and spaces.quota_s == 30
    assert os.environ["SPACES_ZERO_GPU"] == "true"


def test_installed_restores_what_was_there():
    before = sys.modules.get("spaces"), os.environ.get("SPACES_ZERO_GPU")
    with zerogpu_standin.installed() as stand_in:
        assert sys.modules["spaces"] is stand_in
    assert (sys.modules.get("spaces"), os.environ.get("SPACES_ZERO_GPU")) == before


def test_the_ledger_is_rewritten_after_every_call(tmp_path, monkeypatch):
    ledger = tmp_path / "ledger.json"
    stand_in = install(monkeypatch, ledger=ledger)
    stand_in.spend("1.2.3.4", 5)
    assert json.loads(ledger.read_text())["charged"] == {"1.2.3.4": 5}
    stand_in.GPU(where_am_i)("x")
    state = json.loads(ledger.read_text())
    assert [c["outcome"] for c in state["calls"]] == ["ok"]
    assert state["charged"]["-"] == pytest.approx(stand_in.charged("-"))


SCRIPT = """
import sys
import spaces

@spaces.GPU(duration=5)
def where(x):
    return spaces.in_worker(), x

@spaces.GPU(duration=20)
def too_long():
    return 0

for call in (lambda: where(1), lambda: where(2), too_long):
    try:
        print("RESULT", call())
    except Exception as error:
        print("FAILED", type(error).__name__)
print("ARGV", sys.argv[1:], __name__)
"""


def test_the_launcher_runs_a_script_as_main_under_the_stand_in(tmp_path):
    script, ledger = tmp_path / "script.py", tmp_path / "ledger.json"
    script.write_text(SCRIPT)
    env = {**os.environ, "ZEROGPU_STANDIN_QUOTA_S": "60", "ZEROGPU_STANDIN_SPENT": "-=50",
           "ZEROGPU_STANDIN_FAIL": "no_gpu=1", "ZEROGPU_STANDIN_LEDGER": str(ledger)}
    env.pop("SPACES_ZERO_GPU", None)
    launcher = Path(zerogpu_standin.__file__)
    done = subprocess.run([sys.executable, str(launcher), str(script), "--flag"], env=env,
                          capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "FAILED Error", "RESULT (True, 2)", "FAILED Error", "ARGV ['--flag'] __main__"]
    # 10 s left of 60: no GPU (injected), then a 5 s call, then a 20 s one refused.
    state = json.loads(ledger.read_text())
    assert [c["outcome"] for c in state["calls"]] == ["no_gpu", "ok", "quota"]
    assert state["quota_s"] == 60 and 50 < state["charged"]["-"] < 55
