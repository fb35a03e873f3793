"""A job run where the policy says (``placement``): here on the CPU, or as one GPU call.

A GPU call is a pure computation. The model's key and the inputs go in, plain data comes out
(the probes return numpy arrays and Python numbers). Sessions, the model cache, the shared
results and the training lab stay in this process, so whatever sessions share is shared on
ZeroGPU too.

On ZeroGPU the call is ``spaces.GPU``: it runs in a worker process forked from the server,
with its arguments and results pickled. The client keeps a worker per GPU function and reuses
it while it is idle, so a worker may have been forked before the model it is asked for was
built (a model built later, a trained one after "Use this model"). The worker takes the model
from the cache it was forked with; if it is not there, the call says so at once and is made
again with the model itself (its tensors go through shared memory). The worker keeps one model
on its GPU for the next call, never more: its memory is the forked cache (shared with the
server until either writes) and one model.

What fails inside a worker comes back as a value, not as the client's wrapped exception
(which keeps only the class's name): an ``ExplorerError`` whole, so that the page says it in
its own words; anything else as its class and words, and the CPU takes over.

When a GPU call cannot run (the visitor's quota is used up, no GPU is free, or the call was
cut off), the CPU does the job if its estimate is within ``CPU_FALLBACK_SECONDS``, and the
result says why it ran there; otherwise the user is told when to try again.
"""
from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass, replace

import torch

from ..book.errors import ExplorerError, Message
from .placement import (CPU_FALLBACK_SECONDS, MAX_ASK_SECONDS, Placement, Work, gpu_kind,
                        place)

# What ZeroGPU says when a call cannot run, by kind: the client's own words (PyPI's ``spaces``,
# spaces/zero/client.py ``schedule`` and wrappers.py), raised as gr.Error. tests/test_zerogpu.py
# makes the installed client say each one. "quota": the visitor's daily quota, a signed-in
# visitor's ("free ZeroGPU quota", "Pro ZeroGPU quota"), the runs limit, the Space's own pool
# (a call without an X-IP-Token), a duration above the visitor's maximum, or too many credits
# held by running tasks.
FAILURES = {
    "quota": re.compile(r"exceeded your (?:(?:free|Pro) )?(?:Zero)?GPU (?:quota|runs limit)"
                        r"|GPU quota exceeded|has reached its GPU limit"
                        r"|requested GPU duration \(\d+s\) is larger than the maximum allowed"
                        r"|too many ZeroGPU credits", re.I),
    "no_gpu": re.compile(r"No GPU (?:is currently |was )?available", re.I),
    "aborted": re.compile(r"GPU task aborted", re.I),
}
# "Try again in 2:05:11", or in "1 day, 0:00:00" (Python's words for a timedelta).
RETRY = re.compile(r"Try again in ((?:\d+ days?, )?\d+:\d\d:\d\d)", re.I)

@dataclass(frozen=True)
class Ran:
    """Where a job ran, for the page: "on the GPU, 0.4 s" or "on the CPU" (and why)."""
    where: str                  # "cpu" or "gpu"
    seconds: float
    failure: str = ""           # why a GPU call fell back to the CPU: a key of FAILURES
    retry: str = ""             # when ZeroGPU said to try again ("2:05:11"), if it did

    def note(self) -> Message:
        if self.where == "gpu":
            return Message("ran.gpu", "on the GPU, {seconds:.2f} s", seconds=self.seconds)
        if self.failure == "quota":
            return Message("ran.cpu_quota", "ran on the CPU: this network's GPU quota is used "
                           "up for now{retry}", retry=_retry_words(self.retry))
        if self.failure == "no_gpu":
            return Message("ran.cpu_no_gpu", "ran on the CPU: no GPU was free")
        if self.failure == "aborted":
            return Message("ran.cpu_aborted", "ran on the CPU: the GPU call was cut off")
        if self.failure == "failed":
            return Message("ran.cpu_failed", "ran on the CPU: the GPU call failed")
        return Message("ran.cpu", "on the CPU")


def _retry_words(retry: str) -> Message | str:
    return Message("ran.retry", " (ZeroGPU: try again in {retry})", retry=retry) if retry \
        else ""


# ---------------------------------------------------------------------------------------------
# The models a call may use. The app says where they are (its cache, looked into without a lock
# or a build); a worker forked before a model was built is sent the model.
_models = None            # key -> model, or None if the cache has none (ModelCache.peek)
_on_gpu: dict = {}        # in a worker: the last key's model on the GPU, kept for the next call
_in_call = False          # in a worker, inside a GPU call


def use_models(find) -> None:
    """``find(key) -> model or None``: where a GPU call's worker looks for the model of a key.
    It must neither build nor wait for a lock (the worker is a fork: a lock another thread
    held at the fork stays held there)."""
    global _models
    _models = find


def device() -> torch.device:
    """Where the work in hand runs: the GPU inside a GPU call, else the CPU (on ZeroGPU the
    server's torch says CUDA is there, but it cannot start there)."""
    return torch.device("cuda") if _in_call and torch.cuda.is_available() else \
        torch.device("cpu")


class _Stale:
    """A worker's answer when it has no model of the key: make the call again, with it."""


class _Failed:
    """What failed in a worker: an ``ExplorerError`` whole, or another error's class and
    words (the client would keep only the class's name)."""

    def __init__(self, error: Exception):
        self.error = error if isinstance(error, ExplorerError) else None
        self.kind, self.text = type(error).__name__, str(error)[:2000]


class WorkerFailed(RuntimeError):
    """A GPU call's worker raised ``kind``: ``text`` (the CPU may take over)."""


def _checked(result):
    """``result``, or what the worker raised, raised here."""
    if isinstance(result, _Failed):
        if result.error is not None:
            raise result.error
        raise WorkerFailed(f"{result.kind}: {result.text}")
    return result


def _worker_model(key, sent=None):
    if key not in _on_gpu:
        model = sent if sent is not None else _models(key)
        if model is None:
            return None
        _on_gpu.clear()                   # one model on the GPU at a time
        _on_gpu[key] = model.to(device())   # the worker's own copy (a forked process)
    return _on_gpu[key]


# ``asked``: the seconds the call asks for (``_asked`` hands them to ZeroGPU). ``key`` None:
# a job that carries its own state (``call``). ``model``: sent when the worker had none.
def _gpu_task(asked, key, fn, args, kwargs, model=None):
    global _in_call
    _in_call = True                       # this process is the worker: it stays so
    try:
        if key is not None:
            found = _worker_model(key, model)
            if found is None:
                return _Stale()
            args = (found, *args)
        return fn(*args, **kwargs)
    except Exception as e:  # noqa: BLE001 - it comes back whole (_checked raises it)
        return _Failed(e)


def _gpu_stream(asked, key, fn, args, kwargs, model=None):
    global _in_call
    _in_call = True
    try:
        found = _worker_model(key, model)
        if found is None:
            yield _Stale()
            return
        yield from fn(found, *args, **kwargs)
    except Exception as e:  # noqa: BLE001 - as in _gpu_task
        yield _Failed(e)


def _asked(asked, *args, **kwargs) -> int:
    """The duration handed to ``spaces.GPU`` for ``asked`` seconds. The client multiplies it by
    its hardware's duration factor (spaces/zero/configs.json: 1.5 on ZeroGPU's default "large"
    size) before it asks ZeroGPU and counts the quota, so it asks ``asked`` seconds in all,
    and never more than ``MAX_ASK_SECONDS``: all an anonymous visitor has in a day."""
    factor = _duration_factor()
    return max(1, min(math.ceil(asked / factor), math.floor(MAX_ASK_SECONDS / factor)))


def _duration_factor() -> float:
    try:
        from spaces.zero import config     # only on ZeroGPU, where the client is installed
        return float(config.get_config()["duration_factor"])
    except Exception:  # noqa: BLE001 - a client without it: its largest factor (0.51.3's)
        return 1.5


_calls = None


def _gpu_calls():
    """``spaces.GPU`` over the two tasks, made once (ZeroGPU's start-up check looks for at
    least one ``@spaces.GPU`` function: ``prepare()`` makes them at start-up)."""
    global _calls
    if _calls is None:
        import spaces
        _calls = (spaces.GPU(_gpu_task, duration=_asked),
                  spaces.GPU(_gpu_stream, duration=_asked))
    return _calls


def prepare() -> None:
    """At start-up on ZeroGPU: the ``spaces.GPU`` functions exist before the first request."""
    if gpu_kind() == "zerogpu":
        _gpu_calls()


def forget_gpu() -> None:
    """Make the ``spaces.GPU`` functions again at the next call (a test swaps ``spaces``)."""
    global _calls
    _calls = None


# ---------------------------------------------------------------------------------------------
def compute(key, model, fn, args=(), kwargs=None, work: Work | None = None):
    """``(fn(model, *args, **kwargs), Ran)``, computed where the policy places ``work`` (no
    work given: here). ``fn`` and its arguments must pickle (a module-level function, plain
    data) and it must return plain data: a GPU call sends them to another process."""
    return _run(_placement(work), key.weights_key, model, fn, args, kwargs or {})


def call(fn, args=(), kwargs=None, placement: Placement | None = None, *,
         fallback_always=False):
    """``(fn(*args, **kwargs), Ran)``: a job that carries its own state (a training job's
    steps), run where ``placement`` says. ``fallback_always``: the CPU takes over whatever
    its estimate (a job in the background, which can be stopped)."""
    placement = placement or Placement("cpu", 0.0, None)
    return _run(placement, None, None, fn, args, kwargs or {}, fallback_always)


def _run(placement, key, model, fn, args, kwargs, fallback_always=False):
    here = (model,) if key is not None else ()
    failure = None
    if placement.where == "gpu":
        gpu_call, _ = _gpu_calls()
        started = time.perf_counter()
        try:
            result = gpu_call(placement.ask_seconds, key, fn, args, kwargs)
            if isinstance(result, _Stale):      # a worker forked before the model was built
                result = gpu_call(placement.ask_seconds, key, fn, args, kwargs, model)
            return _checked(result), Ran("gpu", time.perf_counter() - started)
        except ExplorerError:
            raise                                # the user's to read, in their language
        except Exception as e:  # noqa: BLE001 - only ZeroGPU's own failures fall back
            failure = _fallback(e, placement, fallback_always)
    started = time.perf_counter()
    result = fn(*here, *args, **kwargs)
    return result, _ran_here(started, failure)


def _gpu_items(gpu_stream, ask, key, fn, args, kwargs, model):
    """The GPU call's items; made again with ``model`` if its worker had none."""
    stale = False
    for item in gpu_stream(ask, key, fn, args, kwargs):
        if isinstance(item, _Stale):
            stale = True
            continue
        yield _checked(item)
    if stale:
        for item in gpu_stream(ask, key, fn, args, kwargs, model):
            yield _checked(item)


class Stream:
    """A job that yields (a generation): iterate it; ``ran`` says where it runs. A GPU call
    that cannot run, or is cut off, falls back to the CPU, which goes on from where the call
    stopped (it computes the items given again, and gives the rest)."""

    def __init__(self, key, model, fn, args=(), kwargs=None, work: Work | None = None):
        self._job = (key, model, fn, args, kwargs or {})
        self.placement = _placement(work)
        self.ran = Ran(self.placement.where, 0.0)

    def __iter__(self):
        key, model, fn, args, kwargs = self._job
        started = time.perf_counter()
        done = 0                  # items given: the CPU, taking over, computes them again
        if self.placement.where == "gpu":
            _, gpu_stream = _gpu_calls()
            try:
                for item in _gpu_items(gpu_stream, self.placement.ask_seconds, key.weights_key,
                                       fn, args, kwargs, model):
                    self.ran = Ran("gpu", time.perf_counter() - started)
                    done += 1
                    yield item
                return
            except ExplorerError:
                raise
            except Exception as e:  # noqa: BLE001 - only ZeroGPU's own failures fall back
                failure = _fallback(e, self.placement)
            self.ran = _ran_here(started, failure)
            started = time.perf_counter()
        # (a generation's steps are a function of its arguments: the same again)
        for index, item in enumerate(fn(model, *args, **kwargs)):
            self.ran = replace(self.ran, seconds=time.perf_counter() - started)
            if index >= done:
                yield item


def _placement(work: Work | None) -> Placement:
    if work is None:
        return Placement("cpu", 0.0, None)
    return place(work, gpu_kind())


def _ran_here(started: float, failure) -> Ran:
    kind, retry = failure or ("", "")
    return Ran("cpu", time.perf_counter() - started, kind, retry)


def _fallback(error: Exception, placement: Placement, always=False) -> tuple[str, str]:
    """``(kind, retry)`` of a ZeroGPU failure the CPU can make up for; otherwise raise what
    the user should read (the error itself, if it is not ZeroGPU's)."""
    text = str(error)
    if isinstance(error, WorkerFailed):
        kind = "failed"
    elif isinstance(error, (ConnectionError, EOFError)):
        # the worker died while the client was passing it tensors (ZeroGPU cut it off): the
        # client's own "GPU task aborted" never came
        kind = "aborted"
    else:
        kind = next((k for k, pattern in FAILURES.items() if pattern.search(text)), None)
    if kind is None:
        raise error
    found = RETRY.search(text)
    retry = found.group(1) if found else ""
    if always or placement.cpu_seconds <= CPU_FALLBACK_SECONDS:
        return kind, retry
    if kind == "failed":
        raise error                       # a bug in the work itself: the page says so
    seconds, limit = placement.cpu_seconds, CPU_FALLBACK_SECONDS
    if kind == "quota":
        raise ExplorerError("gpu.quota_used_up", "This needs a GPU: about {seconds:,.0f} s on "
                            "the CPU, more than the {limit:.0f} s it may take instead, and this "
                            "network's GPU quota is used up for now{retry}. Sign in to Hugging "
                            "Face for a quota of your own, or use a smaller model or a shorter "
                            "text.", seconds=seconds, limit=limit,
                            retry=_retry_words(retry)) from None
    raise ExplorerError("gpu.unavailable", "This needs a GPU: about {seconds:,.0f} s on the CPU, "
                        "more than the {limit:.0f} s it may take instead, and none could be used "
                        "just now ({why}). Try again in a minute, or use a smaller model or a "
                        "shorter text.", seconds=seconds, limit=limit, why=text[:200]) from None
