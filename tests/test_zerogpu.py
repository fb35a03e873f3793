"""ZeroGPU (explorer/runtime/offload.py, placement.py): CPU first, a GPU call only where the
policy says it pays, the state in the server, and the CPU taking over when a call cannot run.

These tests run the real ``spaces`` client (PyPI's, pinned in requirements-dev.txt) as on a
ZeroGPU Space, against a fake scheduler (tests/zerogpu_scheduler.py): an HTTP server on the
loopback that keeps a quota per X-IP-Token. The client forks and reuses its workers, pickles
the arguments, wraps the exceptions and applies its duration factor as it does on a Space. Its
"GPU" is this CPU: the tests that send work to it make the CPU's rates slow (``slow_cpu``), so
that a teaching model's work counts as long."""
import contextlib
import math
import os
import sys
import threading
from dataclasses import replace
from types import SimpleNamespace

import gradio as gr
import numpy as np
import pytest
import torch

import explorer.app.server  # noqa: F401 - the app as the server imports it
from explorer.app import shared
from explorer.app.pickers import HIST_PAIRS
from explorer.app.session import Session
from explorer.app.tabs import attention, build, generate, inside, knockout, knockout_map
from explorer.book.config import PRESETS
from explorer.book.errors import ExplorerError, Message, Text
from explorer.app.i18n import say
from explorer.probes import trace
from explorer.runtime import offload, placement
from explorer.runtime.training import gpu_chunks
from explorer.runtime.build import resolve_device
from explorer.runtime.placement import Rates
from explorer.runtime.training.job import TrainingJob
from explorer.runtime.training.setup import (default_corpus, default_settings, make_variants,
                                             story_text)
from zerogpu_scheduler import POOL, Scheduler, real_client, request_with_token, token

PROMPT = "Every effort moves you"
# The client reads the GPU model from the NVIDIA driver once at import, before the shim
# (tests/zerogpu_scheduler.py) is in place: it says so, and the shim answers from then on.
# A call made outside a served event has no Gradio queue to tell of its wait: the client says so.
pytestmark = [pytest.mark.filterwarnings("ignore:Error while reading infos from Nvidia"),
              pytest.mark.filterwarnings("ignore:ZeroGPU. Cannot get Gradio app Queue")]
ANONYMOUS = POOL         # a call made outside a Gradio request has no X-IP-Token: the pool


def no_progress(*args, **kwargs):
    return None


def built(preset="teach-tiny") -> Session:
    cfg = PRESETS[preset]
    return build.build(preset, *cfg.to_dict().values(), 123, "auto", "float32",
                       session=Session(), progress=no_progress)["session"]


def traced(session, prompt=PROMPT) -> dict:
    return inside.run_trace(prompt, session, 0, next(iter(HIST_PAIRS)), "ln1_out", "std")


@pytest.fixture
def zero_gpu(monkeypatch):
    """The real ``spaces`` client against a fake scheduler (SPACES_ZERO_GPU=true), and nothing
    shared yet. The scheduler is what the test sees: its calls, its ledger."""
    scheduler = Scheduler()
    scheduler.spaces = real_client(monkeypatch, scheduler)
    offload.forget_gpu()
    shared.RESULTS.clear()
    yield scheduler
    scheduler.idle()
    scheduler.spaces.forget()
    scheduler.close()
    offload.forget_gpu()
    shared.RESULTS.clear()
    # A test that turns ZeroGPU off to compare with the CPU builds its model on the client's
    # pretend CUDA, whose tensors the client remakes inside each op (as inference tensors under
    # inference_mode): no later test may be handed that model for a gradient.
    shared.CACHE.clear()


@pytest.fixture
def slow_cpu(monkeypatch):
    """A CPU so slow on paper that a teaching model's work goes to the GPU; and calls that ask
    for time enough on a busy machine (the stand-in's "GPU" is this CPU, after a fork)."""
    monkeypatch.setitem(placement.RATES, "cpu", Rates(flops_per_second=1e3, bytes_per_second=1e3,
                                                      seconds_per_layer_step=10.0,
                                                      call_seconds=0.0,
                                                      weight_bytes_per_second=math.inf))
    monkeypatch.setitem(placement.RATES, "zerogpu", replace(placement.RATES["zerogpu"],
                                                            call_seconds=15.0))


@pytest.fixture
def cpu_may_take_over(monkeypatch):
    monkeypatch.setattr(offload, "CPU_FALLBACK_SECONDS", math.inf)


def tasks(scheduler):
    """The calls the scheduler saw: (the GPU function, how it ended)."""
    names = {id(offload._gpu_task): "_gpu_task", id(offload._gpu_stream): "_gpu_stream"}
    return [(names.get(c.task_id, c.task_id), c.outcome) for c in scheduler.calls]


# ---------------------------------------------------------------------------------------------
def test_a_lecture_walk_runs_on_the_cpu_and_spends_no_gpu_quota(zero_gpu):
    session = built("teach-tiny")
    out = traced(session)
    assert "on the CPU" in out["trace_info"]
    session = attention.attention_views(out["session"], 1, "mean")["session"]
    updates = list(generate.generate(PROMPT, 20, "greedy", 1.0, 50, 123, False, session))
    assert "on the CPU" in updates[-1]["speed"]
    session = updates[-1]["session"]
    generate.next_token(PROMPT, updates[-1]["gen_output"], "greedy", 1.0, 50, 123, session)
    generate.logit_lens(PROMPT, session)
    final = list(knockout_map.parts_map(story_text(), "loss", False, session))[-1]
    assert final["knock_numbers"]["exact_cells"] > 0
    assert zero_gpu.calls == [] and zero_gpu.charged(ANONYMOUS) == 0
    # the lecture's default training comparison trains here too
    job = TrainingJob(make_variants(), default_corpus(), default_settings())
    assert job.placement.where == "cpu"


def test_long_work_runs_in_a_gpu_call_in_another_process_and_equals_the_cpus(zero_gpu, slow_cpu):
    session = built("teach-tiny")
    out = traced(session)
    assert tasks(zero_gpu) == [("_gpu_task", "ok")]
    assert zero_gpu.calls[0].pid not in (None, os.getpid())
    assert "on the GPU" in out["trace_info"]
    model, _ = shared.CACHE.get(session.keys[0])
    here = trace(model, out["session"].traces[0].token_ids)
    there = out["session"].traces[0]
    for point, stats in here.points.items():
        for name, values in stats.overall.items():
            np.testing.assert_allclose(there.points[point].overall[name], values, rtol=1e-6)
    np.testing.assert_array_equal(there.next_ids, here.next_ids)
    # A second session asking the same: the shared result, no second call.
    again = traced(built("teach-tiny"))
    assert "shared cache" in again["trace_info"] and len(zero_gpu.calls) == 1


def test_a_generation_streams_from_one_gpu_call_step_by_step(zero_gpu, slow_cpu):
    session = built("teach-tiny")
    updates = list(generate.generate(PROMPT, 6, "greedy", 1.0, 50, 123, False, session))
    assert tasks(zero_gpu) == [("_gpu_stream", "ok")]
    assert "on the GPU" in updates[-1]["speed"]
    model, _ = shared.CACHE.get(session.keys[0])
    ids = list(updates[-1]["session"].generation.ids[0])
    from explorer.book.generate import generate_steps
    start = updates[-1]["session"].generation.start
    expected = [s.token_id for s in generate_steps(model, ids[:start], 6)]
    assert ids[start:] == expected


def test_a_generation_cut_off_mid_stream_goes_on_on_the_cpu_with_the_same_tokens(
        zero_gpu, slow_cpu, cpu_may_take_over):
    session = built("teach-tiny")
    zero_gpu.fail_next("abort")    # cut off as it starts
    updates = list(generate.generate(PROMPT, 8, "greedy", 1.0, 50, 123, False, session))
    assert tasks(zero_gpu) == [("_gpu_stream", "aborted")]
    assert "ran on the CPU: the GPU call was cut off" in updates[-1]["speed"]
    gen = updates[-1]["session"].generation
    model, _ = shared.CACHE.get(session.keys[0])
    from explorer.book.generate import generate_steps
    expected = [s.token_id for s in generate_steps(model, gen.ids[0][:gen.start], 8)]
    assert gen.ids[0][gen.start:] == expected


def test_the_knock_out_map_in_gpu_calls_equals_the_cpus(zero_gpu, slow_cpu, monkeypatch):
    session = built("teach-tiny")
    text = story_text()
    on_gpu = list(knockout_map.parts_map(text, "loss", True, session))[-1]["knock_numbers"]
    calls = len(zero_gpu.calls)
    assert calls >= 2 and {o for _, o in tasks(zero_gpu)} == {"ok"}
    assert "on the GPU" in knockout_map.status_text(session.view(knockout_map.MapView).status)
    monkeypatch.setenv("SPACES_ZERO_GPU", "false")
    here = list(knockout_map.parts_map(text, "loss", True, built("teach-tiny")))[-1]["knock_numbers"]
    assert len(zero_gpu.calls) == calls
    assert on_gpu["exact_cells"] == here["exact_cells"] == on_gpu["cells"]
    for name in ("head_loss", "part_loss", "head_estimate"):
        np.testing.assert_allclose(np.array(on_gpu[name], dtype=float),
                                   np.array(here[name], dtype=float), rtol=1e-5, atol=1e-6)


def test_a_training_job_in_gpu_chunks_equals_the_same_job_on_the_cpu(zero_gpu, monkeypatch):
    monkeypatch.setattr(gpu_chunks, "CHUNK_GPU_SECONDS", 10.0)
    settings = default_settings(steps=12, eval_freq=4)

    def job():
        return TrainingJob(make_variants(["pre-LN (book)", "post-LN"], "teach-tiny"),
                           default_corpus(), settings)
    chunked = job()
    chunked.placement = placement.Placement("gpu", 300.0, 30.0)  # 2.5 s a step: 4 a call
    chunked.start()
    assert chunked.wait(120) and chunked.status == "finished", chunked.message
    assert tasks(zero_gpu) == [("_gpu_task", "ok")] * 3
    monkeypatch.setenv("SPACES_ZERO_GPU", "false")
    here = job()
    assert here.placement.where == "cpu"
    here.start()
    assert here.wait(120) and here.status == "finished"
    for a, b in zip(chunked.view().runs, here.view().runs):
        assert (a.train_losses, a.val_losses, a.grad_norms, a.sample) == \
            (b.train_losses, b.val_losses, b.grad_norms, b.sample)
    for a, b in zip(chunked.runs, here.runs):
        for (name, x), y in zip(a.model.state_dict().items(), b.model.state_dict().values()):
            assert torch.equal(x, y), name
    assert "on the GPU" in str(chunked.view().where)


@contextlib.contextmanager
def visitor(token_value):
    """Calls made as in a Gradio request whose page sent ``token_value`` as X-IP-Token."""
    from gradio.context import LocalContext
    reset = LocalContext.request.set(request_with_token(token_value))
    try:
        yield
    finally:
        LocalContext.request.reset(reset)


STUDENT = "10.0.0.7"
# Each quota or limit refusal of ZeroGPU, in the installed client's own words: the scheduler
# answers 429 as ZeroGPU does, and the client (spaces/zero/client.py, ``schedule``) words it.
REFUSALS = {
    "an anonymous visitor's quota": (token(STUDENT), {}, "quota"),
    "a free account's quota": (token(STUDENT, user="ada"), {}, "quota"),
    "a Pro account's quota": (token(STUDENT, user="ada", level="pro"), {}, "quota"),
    "the runs limit": (token(STUDENT), {"runs_limit": 0}, "runs"),
    "the Space's pool (no X-IP-Token)": (None, {}, "pool"),
    "a duration over the maximum": (token(STUDENT), {"max_duration_s": 1}, "limit"),
}


def refused(scheduler, name):
    """Set ``scheduler`` to refuse as ``REFUSALS[name]`` says; the visitor's token."""
    token_value, settings, _ = REFUSALS[name]
    for setting, value in settings.items():
        setattr(scheduler, setting, value)
    if not settings:
        who = STUDENT if token_value else ANONYMOUS
        who = "ada" if "account" in name else who
        scheduler.spend(who, scheduler.quota_of(who))
    return token_value


@pytest.mark.parametrize("name", REFUSALS)
def test_every_quota_and_limit_refusal_of_the_real_client_falls_back_to_the_cpu(
        zero_gpu, slow_cpu, cpu_may_take_over, name):
    """Finding 1: the client's refusals never matched ``offload.FAILURES["quota"]``."""
    session = built("teach-tiny")
    with visitor(refused(zero_gpu, name)):
        out = traced(session)
    assert tasks(zero_gpu) == [("_gpu_task", REFUSALS[name][2])]
    assert "ran on the CPU: this network's GPU quota is used up for now" in out["trace_info"]
    assert len(out["session"].traces[0].token_ids) == 4


@pytest.mark.parametrize("name", [n for n, (_, settings, _) in REFUSALS.items()
                                  if not settings])
def test_with_no_quota_left_a_job_too_long_for_the_cpu_is_refused_with_the_retry_time(
        zero_gpu, slow_cpu, name):
    session = built("teach-tiny")
    with visitor(refused(zero_gpu, name)), pytest.raises(gr.Error) as raised:
        traced(session)
    said = raised.value.message
    assert "quota is used up" in said and "bug" not in said.lower()
    if REFUSALS[name][0]:                # ZeroGPU says when a visitor's quota comes back
        assert "try again in 23:59:5" in said


@pytest.mark.parametrize("failure, said", [
    ("no_gpu", "ran on the CPU: no GPU was free"),
    ("abort", "ran on the CPU: the GPU call was cut off")])
def test_no_gpu_or_an_aborted_call_the_cpu_takes_over(zero_gpu, slow_cpu, cpu_may_take_over,
                                                       failure, said):
    session = built("teach-tiny")
    zero_gpu.fail_next(failure)
    out = traced(session)
    assert said in out["trace_info"]
    assert len(out["session"].traces[0].token_ids) == 4     # "Every effort moves you"


def test_a_class_behind_one_address_shares_its_quota_and_its_results(zero_gpu, slow_cpu):
    """Twelve students behind one address trace the same prompt at once: one GPU call, charged
    to that address alone, and the same result for everyone."""
    session = built("teach-tiny")
    from gradio.context import LocalContext
    results, errors = [], []

    def student(ip):
        LocalContext.request.set(request_with_token(token(ip)))
        try:
            results.append(traced(session)["session"].traces[0])
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)
    threads = [threading.Thread(target=student, args=("10.0.0.7",)) for _ in range(12)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert errors == [] and len(results) == 12
    assert tasks(zero_gpu) == [("_gpu_task", "ok")]
    assert zero_gpu.charged("10.0.0.7") > 0 and zero_gpu.charged("10.0.0.8") == 0
    assert all(np.array_equal(r.next_ids, results[0].next_ids) for r in results)


def test_on_zero_gpu_auto_means_the_cpu_and_cuda_is_refused_with_a_reason(zero_gpu,
                                                                          monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)   # as ZeroGPU patches it
    assert resolve_device("auto") == torch.device("cpu")
    with pytest.raises(ExplorerError, match="ZeroGPU"):
        resolve_device("cuda")


def test_at_start_up_the_server_has_a_spaces_gpu_function(zero_gpu):
    from spaces.zero.decorator import decorated_cache
    offload.forget_gpu()
    offload.prepare()
    assert offload._gpu_task in decorated_cache and offload._gpu_stream in decorated_cache


def test_off_zero_gpu_spaces_is_never_imported(monkeypatch):
    class Watch:
        attempts = 0

        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] == "spaces":
                Watch.attempts += 1
            return None
    monkeypatch.delitem(sys.modules, "spaces", raising=False)
    monkeypatch.setattr(sys, "meta_path", [Watch(), *sys.meta_path])
    monkeypatch.delenv("SPACES_ZERO_GPU", raising=False)
    offload.forget_gpu()
    offload.prepare()
    shared.RESULTS.clear()
    out = traced(built("teach-tiny"))
    assert "on the CPU" not in out["trace_info"]     # no GPU to call: nothing to say
    assert Watch.attempts == 0


# ---------------------------------------------------------------------------------------------
def test_an_error_that_is_not_zero_gpus_is_raised():
    fits = placement.Placement("gpu", 1.0, 0.5)
    with pytest.raises(ZeroDivisionError):
        offload._fallback(ZeroDivisionError("a bug"), fits)


def test_messages_and_errors_pickle_whole_for_a_gpu_calls_worker():
    import pickle
    error = ExplorerError("x.y", "{n} of {m}", n=1, m=Message("a.b", "two"))
    back = pickle.loads(pickle.dumps(error))
    assert isinstance(back, ExplorerError) and back.message == error.message
    text = Text("x.z", "{n} steps", n=3)
    again = pickle.loads(pickle.dumps(text))
    assert again == "3 steps" and again.message == text.message


# ---------------------------------------------------------------------------------------------
# Findings of issue 46, each on the real client.
def test_a_training_chunk_that_cannot_run_goes_on_on_the_cpu_and_stop_answers(zero_gpu,
                                                                             monkeypatch):
    """Finding 2: a chunk whose GPU call failed ("No GPU was available") deadlocked on the
    job's step lock: the CPU, taking over, took the lock its own chunk held."""
    job = TrainingJob(make_variants(["pre-LN (book)"], "teach-tiny"), default_corpus(),
                      default_settings(steps=2000, eval_freq=500))
    job.placement = placement.Placement("gpu", 1e4, 1.0)   # the whole job in one chunk
    zero_gpu.fail_next("no_gpu")
    job.start()
    for _ in range(600):                 # the CPU took over: steps are done (or it hangs)
        if job.steps_done >= 3:
            break
        threading.Event().wait(0.1)
    assert job.steps_done >= 3 and job.status == "running", job.message
    stopper = threading.Thread(target=job.stop, daemon=True)
    stopper.start()
    stopper.join(10)                     # Stop answers between two steps
    assert not stopper.is_alive()
    assert job.status == "stopped" and job.steps_done < 2000
    assert tasks(zero_gpu) == [("_gpu_task", "no_gpu")]
    assert "ran on the CPU: no GPU was free" in say(job.view().where)


def test_a_reused_worker_gets_the_trained_model_it_is_asked_for(zero_gpu, slow_cpu):
    """Finding 3: the client reuses a worker forked before "Use this model"; the trained
    model is not in the cache it was forked with (and cannot be built from its key)."""
    from explorer.app.session import Made, Model
    from explorer.runtime.sources import WeightsSource
    traced(built("teach-tiny"))                     # the worker is forked here
    job = TrainingJob(make_variants(["pre-LN (book)"], "teach-tiny"), default_corpus(),
                      default_settings(steps=2, eval_freq=1))
    job.advance(2)
    trained = job.trained_model(0)
    key = shared.CACHE.key(trained.model.cfg, device="cpu", dtype="float32",
                           source=WeightsSource.trained("trained 2 steps"))
    shared.CACHE.hold("a student", key, trained.model)
    session = Session()
    session.with_model_a(Model(key, Made("trained", "pre-LN (book)", caption="trained")))
    out = traced(session)
    assert "on the GPU" in out["trace_info"]
    pids = {c.pid for c in zero_gpu.calls}
    assert len(pids) == 1, "the client reused its worker"
    there, here = out["session"].traces[0], trace(trained.model, out["session"].traces[0].token_ids)
    np.testing.assert_array_equal(there.next_ids, here.next_ids)
    for point, stats in here.points.items():
        for name, values in stats.overall.items():
            np.testing.assert_allclose(there.points[point].overall[name], values, rtol=1e-6)


def refuses(model, *args):
    raise ExplorerError("session.no_model", "No model yet: build one in the Build tab first.")


def fails_on_the_gpu(model, *args):
    if offload._in_call:                  # in the worker
        raise MemoryError("CUDA out of memory")
    return "done here"


def test_an_explorer_error_raised_in_a_gpu_call_reaches_the_page_in_its_own_words(
        zero_gpu, slow_cpu):
    """Finding 4: the client wraps what a worker raises as "ZeroGPU worker error" and the
    class's name; the page must say the error itself, in either language."""
    session = built("teach-tiny")
    model, _ = shared.CACHE.get(session.keys[0])
    work = placement.Work.forward(PRESETS["teach-tiny"], 4)
    with pytest.raises(ExplorerError) as raised:
        offload.compute(session.keys[0], model, refuses, work=work)
    assert tasks(zero_gpu) == [("_gpu_task", "ok")]
    assert say(raised.value, "en") == "No model yet: build one in the Build tab first."
    assert say(raised.value, "zh") == "还没有模型：请先在“构建”标签页中构建一个。"


def test_another_error_in_a_gpu_call_lets_the_cpu_take_over_and_says_so(
        zero_gpu, slow_cpu, cpu_may_take_over):
    session = built("teach-tiny")
    model, _ = shared.CACHE.get(session.keys[0])
    work = placement.Work.forward(PRESETS["teach-tiny"], 4)
    result, ran = offload.compute(session.keys[0], model, fails_on_the_gpu, work=work)
    assert result == "done here" and ran.where == "cpu" and ran.failure == "failed"
    assert say(ran.note(), "en") == "ran on the CPU: the GPU call failed"


def one():
    return 1


def test_the_duration_asked_with_the_clients_factor_never_exceeds_an_anonymous_day(zero_gpu):
    """Finding 5: the client multiplies the duration by its hardware's factor (1.5 on the
    Space's default size): a 120 s ask became 180 s, more than an anonymous visitor's day."""
    from spaces.zero import config
    assert config.get_config()["duration_factor"] == 1.5
    estimates = (0.1, 3.0, 30.0, 58.0, 200.0, 1e4)
    for gpu_seconds in estimates:
        assert offload.call(one, placement=placement.Placement("gpu", 1e6, gpu_seconds))[0] == 1
    asked = [c.asked for c in zero_gpu.calls]       # what ZeroGPU was asked, factor applied
    assert max(asked) <= placement.MAX_ASK_SECONDS == 120
    for gpu_seconds, seconds in zip(estimates, asked):   # and never less than the ask
        assert seconds >= placement.ask_seconds(gpu_seconds)


def test_a_shared_jobs_gpu_chunks_are_charged_to_who_still_watches(zero_gpu, monkeypatch):
    """Finding 11: the job's chunks were made in the context of the request that started it,
    so a visitor who stopped watching and closed the tab paid for every chunk after."""
    from explorer.runtime.training.lab import TrainingLab
    monkeypatch.setattr(gpu_chunks, "CHUNK_GPU_SECONDS", 2.0)
    monkeypatch.setattr(TrainingJob, "__init__", on_the_gpu(TrainingJob.__init__))
    lab = TrainingLab(max_jobs=2)
    variants = make_variants(["pre-LN (book)"], "teach-tiny")
    settings = default_settings(steps=16, eval_freq=8)
    ada, bo = token("10.0.0.1"), token("10.0.0.2")
    with visitor(ada):
        job = lab.start("ada", variants, default_corpus(), settings, run=False)
    with visitor(bo):
        assert lab.start("bo", variants, default_corpus(), settings, run=False) is job
    with visitor(ada):                   # ada presses Train: the job starts in her request
        job.start()
    lab.stop("ada")                      # ada stops watching, and closes the tab
    lab.cancel("ada")
    seen = len(zero_gpu.calls)
    assert job.wait(120) and job.status == "finished", job.message
    after = zero_gpu.calls[seen:]
    assert after and {c.visitor for c in after} == {"10.0.0.2"}
    assert len(zero_gpu.calls) == 8      # 16 steps, 2 a chunk
    lab.cancel("bo")


def on_the_gpu(init):
    """A job trained in GPU chunks of 2 steps (1 s a step on paper)."""
    def made(self, *args, **kwargs):
        init(self, *args, **kwargs)
        self.placement = placement.Placement("gpu", 1e4, float(self.settings.steps))
    return made


def test_a_worker_that_died_while_tensors_were_passed_counts_as_cut_off():
    """Seen on the real client: ZeroGPU killed a chunk's worker while the client passed it the
    job's tensors, and the call raised ConnectionResetError, not "GPU task aborted"."""
    fits = placement.Placement("gpu", 1.0, 0.5)
    error = ConnectionResetError(104, "Connection reset by peer")
    assert offload._fallback(error, fits) == ("aborted", "")


def server_memory() -> int:
    """The server's own memory (anonymous pages) and what is in /dev/shm, where the client's
    pickler moves the tensors it passes to a worker."""
    shm = os.statvfs("/dev/shm")
    with open("/proc/self/status") as status:
        anon = next(int(line.split()[1]) for line in status if line.startswith("RssAnon"))
    return anon * 1024 + (shm.f_blocks - shm.f_bfree) * shm.f_frsize


def test_a_job_in_gpu_chunks_keeps_the_servers_peak_within_its_estimate(zero_gpu, monkeypatch):
    """Finding 10 (measured with the stand-in, whose plain pickles copied the job each way: 1,370
    MB over a 456 MB estimate): the real client's pickler moves the job's tensors into shared
    memory instead of copying them, so the server's peak stays within the lab's estimate."""
    from explorer.runtime.training.setup import job_bytes
    from explorer.runtime.memory import default_budget_bytes
    variants, settings = make_variants(), default_settings(steps=2, eval_freq=1)
    job = TrainingJob(variants, default_corpus(), settings)
    job.placement = placement.Placement("gpu", 1e5, 2 * 50.0)    # a step a chunk
    monkeypatch.setattr(gpu_chunks, "CHUNK_GPU_SECONDS", 50.0)
    estimate = job_bytes(variants, settings)
    base, peak, done = server_memory(), [0], threading.Event()

    def watch():
        while not done.is_set():
            peak[0] = max(peak[0], server_memory() - base)
            done.wait(0.01)
    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        job.start()
        assert job.wait(300) and job.status == "finished", job.message
    finally:
        done.set()
        watcher.join()
    assert [o for _, o in tasks(zero_gpu)] == ["ok", "ok"]
    assert peak[0] <= estimate <= default_budget_bytes()


def test_outside_huggingface_cos_frame_the_page_says_visitors_share_the_pool(monkeypatch):
    """Finding 6: ZeroGPU charges the visitor of the X-IP-Token, which the page sends only
    inside huggingface.co's frame; at the direct address every call is the Space's pool's."""
    from explorer.app.prefs import Prefs
    from explorer.app.session import Session
    from explorer.app.zerogpu_note import zerogpu_note
    monkeypatch.setenv("SPACES_ZERO_GPU", "true")
    monkeypatch.setenv("SPACE_ID", "teacher/gpt-explorer")
    link = "https://huggingface.co/spaces/teacher/gpt-explorer"
    direct = request_with_token(None)
    for lang, said in (("en", "shared pool"), ("zh", "共享额度")):
        session = Session(prefs=Prefs(lang, False))     # the note speaks the session's language
        note = zerogpu_note(session, request=direct)["zerogpu_note"]
        assert note["visible"] and said in note["value"] and link in note["value"]
    framed = request_with_token(token(STUDENT))
    assert zerogpu_note(None, request=framed)["zerogpu_note"]["visible"] is False
    monkeypatch.setenv("SPACES_ZERO_GPU", "false")
    assert zerogpu_note(None, request=direct)["zerogpu_note"]["visible"] is False


@pytest.mark.parametrize("token_value", [None, token(STUDENT)], ids=["pool", "visitor"])
def test_no_gpu_after_zero_gpus_queue_the_cpu_takes_over(zero_gpu, slow_cpu, cpu_may_take_over,
                                                         token_value):
    """The 60 s queue: when ZeroGPU's queue gives up ("No GPU was available after 60s", worded
    by the client, with or without its sign-up link), the CPU does the job and says so."""
    zero_gpu.fail_next("queue")
    with visitor(token_value):
        out = traced(built("teach-tiny"))
    assert tasks(zero_gpu) == [("_gpu_task", "queue")]
    assert "ran on the CPU: no GPU was free" in out["trace_info"]
