"""A stand-in for Hugging Face's ``spaces`` package as it behaves on a ZeroGPU Space, for tests
and benchmarks (there is no GPU and no ZeroGPU scheduler here).

What it keeps of the real ``spaces.GPU`` (spaces/zero/wrappers.py and client.py):

- every call runs the task in another process, a fork of the caller; the arguments are pickled
  in the caller (a pickling error is raised there, and nothing runs), the result, each yielded
  value and any exception come back pickled; a generator's values come back one by one, as the
  task yields them, drained by a thread so that a slow reader never slows the task;
- the task runs in a new thread of the worker, as ZeroGPU's worker runs it in a thread pool.
  This matters on the CPU: GNU OpenMP's thread team belongs to the thread that started it, and
  in a fork that team is gone, so the forking thread's next parallel region (any torch matmul,
  once the server has run one) waits for ever. A new thread gets a new team;
- a call made inside a worker runs the task at once, in that worker;
- the quota belongs to the visitor, known here by the client IP of Gradio's current request
  ("-" outside a request): a duration above what is left is refused with ZeroGPU's wording, and
  a call is charged the seconds it really ran, or the whole duration asked if it was aborted;
- a task that runs past its duration is killed: "GPU task aborted".

What it adds: ``fail_next`` (no GPU, or an abort, on request), a record of every call, and a
JSON ledger for a benchmark. What it leaves out: the wait in ZeroGPU's queue, the reuse of an
idle worker between calls (here every call forks afresh, so nothing a task builds survives it),
Gradio's progress and log messages from inside a task, and the cap on a single duration.

In a test::

    from zerogpu_standin import install
    zero_gpu = install(monkeypatch)          # sys.modules["spaces"], SPACES_ZERO_GPU=true

The app under it, in a subprocess (settings from ZEROGPU_STANDIN_QUOTA_S, _SPENT, _FAIL,
_LEDGER, see ``main``)::

    python tests/zerogpu_standin.py app.py [args]      # or: python -m tests.zerogpu_standin
"""
from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import functools
import inspect
import json
import math
import multiprocessing
import os
import pickle
import queue
import runpy
import signal
import sys
import tempfile
import threading
import time
import traceback
import types
from collections import defaultdict, deque
from datetime import timedelta
from pathlib import Path

ZERO_GPU_ENV = "SPACES_ZERO_GPU"
QUOTA_SECONDS = 120.0          # an anonymous visitor's daily quota
REFILL_SECONDS = 24 * 3600     # a spent quota comes back, linearly, over a day
DEFAULT_DURATION = 60          # ZeroGPU's, when no duration is given
ANONYMOUS = "-"                # the visitor of a call made outside any Gradio request

QUOTA_MESSAGE = ("You have exceeded your GPU quota ({asked}s requested vs. {left}s left). "
                 "Try again in {wait}")
NO_GPU_MESSAGE = "No GPU is currently available for you after 60s"
ABORTED_MESSAGE = "GPU task aborted"

OUTCOMES = ("ok", "error", "aborted", "closed", "quota", "no_gpu")
FAILURES = ("no_gpu", "abort")

# A worker that outlives its caller's watch (the caller's process died) ends itself this long
# after its duration.
WORKER_GRACE_SECONDS = 5.0

_worker_pid: int | None = None   # set in a worker, right after the fork
# Held from a pipe's creation until the caller has closed the pipe's writing end: a worker
# forked meanwhile would hold a copy of it, and the caller would see no end when its own
# worker dies.
_fork_lock = threading.Lock()


def in_worker() -> bool:
    """True inside a ZeroGPU worker (a task's process), False in the server."""
    return _worker_pid is not None and _worker_pid == os.getpid()


def worker_pid() -> int | None:
    """The worker's process id inside a worker, else None."""
    return os.getpid() if in_worker() else None


class ArgumentsNotPicklable(pickle.PicklingError, TypeError):
    """The call's arguments cannot be pickled for the worker. ZeroGPU lets pickle's own error
    through, which is a PicklingError for a lambda but a TypeError for a lock: this is both."""


@dataclasses.dataclass(frozen=True)
class Call:
    task: str
    ip: str
    asked: float           # the duration asked for, seconds
    used: float            # wall seconds the worker ran (0 if none ran)
    charged: float         # what the visitor's quota paid: used, or asked if aborted
    outcome: str           # one of OUTCOMES
    pid: int | None = None  # the worker's


def visitor_ip() -> str:
    """The client IP of the Gradio request being served in this context, else ``ANONYMOUS``."""
    context = sys.modules.get("gradio.context")   # no Gradio imported: no request either
    if context is None:
        return ANONYMOUS
    request = context.LocalContext.request.get(None)
    host = getattr(getattr(request, "client", None), "host", None) if request is not None else None
    return str(host) if host else ANONYMOUS


def _gradio_error(message: str) -> Exception:
    import gradio as gr
    return gr.Error(message)


def _seconds(value) -> float:
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, (int, float)) and math.isfinite(value) and value >= 0:
        return float(value)
    return float(DEFAULT_DURATION)


def _clock(seconds: float) -> str:
    """H:MM:SS, the hours unbounded."""
    seconds = max(0, math.ceil(seconds))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


# ---------------------------------------------------------------------------------------------
# The worker side. After the fork only this runs: the task, pickle and the pipe; then os._exit,
# so nothing of the server (atexit hooks, buffered streams, other threads' locks) is touched.
def _worker(task, payload: bytes, writer, generator: bool, deadline: float) -> None:
    global _worker_pid
    _worker_pid = os.getpid()
    try:
        thread = threading.Thread(target=contextvars.copy_context().run,
                                  args=(_work, task, payload, writer, generator), daemon=True)
        thread.start()
        thread.join(max(0.0, deadline - time.monotonic()) + WORKER_GRACE_SECONDS)
    finally:
        os._exit(0)


def _work(task, payload, writer, generator):
    try:
        args, kwargs = pickle.loads(payload)
        if generator:
            for value in task(*args, **kwargs):
                if not _send(writer, "item", value):
                    return
            _send(writer, "end", None)
        else:
            _send(writer, "return", task(*args, **kwargs))
    except Exception as error:  # noqa: BLE001 - every error goes back to the caller
        _send_error(writer, error)


def _send(writer, kind, value) -> bool:
    try:
        data = pickle.dumps((kind, value), protocol=pickle.HIGHEST_PROTOCOL)
    except Exception as error:  # noqa: BLE001 - PicklingError, TypeError, AttributeError...
        what = "a yielded value" if kind == "item" else "its result"
        problem = pickle.PicklingError(f"the ZeroGPU worker cannot pickle {what}: {error}")
        _send_error(writer, problem)
        return False
    writer.send_bytes(data)
    return True


def _send_error(writer, error: BaseException) -> None:
    # As ZeroGPU's worker prints it; os.write, as sys.stderr's lock may have been held by
    # another of the server's threads at the fork.
    with contextlib.suppress(Exception):
        os.write(2, ("Traceback in the ZeroGPU worker:\n"
                     + "".join(traceback.format_exception(error))).encode(errors="replace"))
    try:
        data = pickle.dumps(("raise", error), protocol=pickle.HIGHEST_PROTOCOL)
        pickle.loads(data)    # the caller must be able to rebuild it
    except Exception:  # noqa: BLE001 - an exception that does not travel: say what it was
        try:
            described = repr(error)
        except Exception:  # noqa: BLE001
            described = type(error).__qualname__
        data = pickle.dumps(("raise", RuntimeError(
            f"{described} (raised in the ZeroGPU worker; it cannot be pickled)")))
    writer.send_bytes(data)


# ---------------------------------------------------------------------------------------------
# The caller side
@dataclasses.dataclass
class _Run:
    name: str
    ip: str
    asked: float
    pid: int
    reader: object
    started: float
    abort_after: int | None       # kill after this many values (an injected abort), else None
    messages: queue.SimpleQueue = dataclasses.field(default_factory=queue.SimpleQueue)
    closed: bool = False          # the caller stopped reading (a generator closed early)


class ZeroGPUStandIn(types.ModuleType):
    """The ``spaces`` module: ``spaces.GPU`` plus the stand-in's controls and record."""

    def __init__(self, quota_s: float = QUOTA_SECONDS, *, refill_s: float = REFILL_SECONDS,
                 ledger: str | os.PathLike | None = None):
        super().__init__("spaces")
        self.quota_s = float(quota_s)
        self.refill_s = float(refill_s)
        self.ledger = Path(ledger) if ledger else None
        self.calls: list[Call] = []
        self.in_worker = in_worker
        self.worker_pid = worker_pid
        self._charged: dict[str, float] = defaultdict(float)
        self._failures: deque[tuple[str, int]] = deque()
        self._running = 0
        self._lock = threading.Condition()
        self._write_ledger()

    # --- the quota -------------------------------------------------------------------------
    def charged(self, ip: str) -> float:
        """Seconds charged to ``ip`` so far (``spend`` included)."""
        with self._lock:
            return self._charged.get(ip, 0.0)

    def left(self, ip: str) -> float:
        return max(0.0, self.quota_s - self.charged(ip))

    def spend(self, ip: str, seconds: float) -> None:
        """As if ``ip`` had already used ``seconds`` of its quota."""
        with self._lock:
            self._charged[ip] += float(seconds)
            self._write_ledger()

    def fail_next(self, kind: str, n: int = 1, *, after: int = 0) -> None:
        """The next ``n`` calls that pass the quota check fail: "no_gpu" (none runs) or "abort"
        (its worker is killed as if it ran past its duration, which is charged: a function's at
        once, a generator's after its first ``after`` values have come through)."""
        if kind not in FAILURES:
            raise ValueError(f"fail_next: kind is one of {FAILURES}, not {kind!r}")
        with self._lock:
            self._failures.extend([(kind, after)] * n)

    def idle(self, timeout: float = 30.0) -> bool:
        """Wait until no worker runs (a closed generator's runs on to its end); False if it
        takes longer than ``timeout``."""
        with self._lock:
            return self._lock.wait_for(lambda: self._running == 0, timeout)

    # --- the decorator ---------------------------------------------------------------------
    def GPU(self, task=None, *, duration=DEFAULT_DURATION, size=None, **_ignored):  # noqa: N802
        """``@spaces.GPU``, ``@spaces.GPU(duration=...)`` or ``spaces.GPU(fn, duration=...)``;
        ``duration``: seconds, a timedelta, or a function of the call's arguments that gives
        one of those."""
        if task is None:
            return functools.partial(self.GPU, duration=duration, size=size)
        if inspect.iscoroutinefunction(task):
            raise NotImplementedError("ZeroGPU runs no coroutine functions")
        spaces = self

        if inspect.isgeneratorfunction(task):
            @functools.wraps(task)
            def generator_on_gpu(*args, **kwargs):
                if in_worker():
                    yield from task(*args, **kwargs)
                    return
                run = spaces._start(task, duration, args, kwargs, generator=True)
                threading.Thread(target=spaces._watch, args=(run,), daemon=True,
                                 name=f"zerogpu-{run.pid}").start()
                try:
                    while True:
                        kind, value = run.messages.get()
                        if kind == "item":
                            yield value
                        elif kind == "end":
                            return
                        else:
                            raise value
                finally:
                    run.closed = True
            on_gpu = generator_on_gpu
        else:
            @functools.wraps(task)
            def regular_on_gpu(*args, **kwargs):
                if in_worker():
                    return task(*args, **kwargs)
                run = spaces._start(task, duration, args, kwargs, generator=False)
                spaces._watch(run)
                kind, value = run.messages.get()
                if kind == "raise":
                    raise value
                return value
            on_gpu = regular_on_gpu
        on_gpu.zerogpu = None     # as the real one marks it
        return on_gpu

    # --- one call --------------------------------------------------------------------------
    def _start(self, task, duration, args, kwargs, *, generator: bool) -> _Run:
        """Check the quota, then fork the worker. Raises what ZeroGPU raises before a task runs."""
        name = getattr(task, "__qualname__", repr(task))
        asked = _seconds(duration(*args, **kwargs) if callable(duration) else duration)
        ip = visitor_ip()
        with self._lock:
            left = max(0.0, self.quota_s - self._charged.get(ip, 0.0))
            failure = None
            if asked <= left and self._failures:
                failure = self._failures.popleft()
        if asked > left:
            self._record(Call(name, ip, asked, 0.0, 0.0, "quota"))
            wait = (asked - left) * self.refill_s / self.quota_s if self.quota_s > 0 \
                else self.refill_s
            raise _gradio_error(QUOTA_MESSAGE.format(
                asked=math.ceil(asked), left=math.floor(left), wait=_clock(wait)))
        if failure and failure[0] == "no_gpu":
            self._record(Call(name, ip, asked, 0.0, 0.0, "no_gpu"))
            raise _gradio_error(NO_GPU_MESSAGE)
        try:
            payload = pickle.dumps((args, kwargs), protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as error:  # noqa: BLE001 - PicklingError, TypeError, AttributeError
            self._record(Call(name, ip, asked, 0.0, 0.0, "error"))
            raise ArgumentsNotPicklable(
                f"the arguments of {name} cannot be pickled for the ZeroGPU worker: {error}"
            ) from error

        reader, writer = multiprocessing.Pipe(duplex=False)
        with _fork_lock:
            started = time.monotonic()
            pid = os.fork()
            if pid == 0:
                _worker(task, payload, writer, generator, started + asked)   # never returns
            writer.close()
        with self._lock:
            self._running += 1
        abort_after = None if failure is None else failure[1] if generator else 0
        return _Run(name, ip, asked, pid, reader, started, abort_after)

    def _watch(self, run: _Run) -> None:
        """Pass the worker's messages on until its end, kill it at its deadline, then charge."""
        deadline = run.started + run.asked
        passed = 0
        outcome, last = "aborted", None
        killed = True       # at its deadline, or by an injected abort; else it ended or died
        try:
            while run.abort_after is None or passed < run.abort_after:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or not run.reader.poll(remaining):
                    break                                   # ran past its duration
                try:
                    kind, value = pickle.loads(run.reader.recv_bytes())
                except EOFError:
                    killed = False                          # the worker died
                    break
                except Exception as error:  # noqa: BLE001 - cannot be rebuilt here
                    kind, value = "raise", RuntimeError(
                        f"a message from the ZeroGPU worker cannot be unpickled: {error!r}")
                if kind == "item":
                    passed += 1
                    if not run.closed:
                        run.messages.put((kind, value))
                    continue
                outcome, last, killed = ("error" if kind == "raise" else "ok"), (kind, value), False
                break
        finally:
            used = time.monotonic() - run.started
            with contextlib.suppress(ProcessLookupError):
                os.kill(run.pid, signal.SIGKILL)            # done or not, it ends here
            with contextlib.suppress(ChildProcessError):
                os.waitpid(run.pid, 0)
            run.reader.close()
        charged = run.asked if killed else used
        self._record(Call(run.name, run.ip, run.asked, used, charged,
                          "closed" if run.closed else outcome, run.pid), running=-1)
        run.messages.put(last or ("raise", _gradio_error(ABORTED_MESSAGE)))

    def _record(self, call: Call, running: int = 0) -> None:
        with self._lock:
            self.calls.append(call)
            self._charged[call.ip] += call.charged
            self._running += running
            self._write_ledger()
            self._lock.notify_all()

    def _write_ledger(self) -> None:
        """{"charged": {ip: seconds}, "calls": [...]}, replaced whole (a reader never sees half)."""
        if self.ledger is None:
            return
        state = {"quota_s": self.quota_s, "charged": dict(self._charged),
                 "calls": [dataclasses.asdict(c) for c in self.calls]}
        with tempfile.NamedTemporaryFile("w", dir=self.ledger.parent, prefix=self.ledger.name,
                                         suffix=".tmp", delete=False) as f:
            json.dump(state, f, indent=1)
        os.replace(f.name, self.ledger)


# ---------------------------------------------------------------------------------------------
# Installing it
def install(monkeypatch=None, **settings) -> ZeroGPUStandIn:
    """A new stand-in as ``sys.modules["spaces"]``, with SPACES_ZERO_GPU=true. With pytest's
    ``monkeypatch`` both are undone after the test; else they stay (see ``installed``).
    ``settings``: ZeroGPUStandIn's (quota_s, refill_s, ledger)."""
    spaces = ZeroGPUStandIn(**settings)
    if monkeypatch is not None:
        monkeypatch.setitem(sys.modules, "spaces", spaces)
        monkeypatch.setenv(ZERO_GPU_ENV, "true")
    else:
        sys.modules["spaces"] = spaces
        os.environ[ZERO_GPU_ENV] = "true"
    return spaces


@contextlib.contextmanager
def installed(**settings):
    """``install`` for the length of a ``with`` block."""
    saved = [(sys.modules, "spaces"), (os.environ, ZERO_GPU_ENV)]
    saved = [(where, key, where.get(key)) for where, key in saved]
    try:
        yield install(**settings)
    finally:
        for where, key, value in saved:
            if value is None:
                where.pop(key, None)
            else:
                where[key] = value


def from_environment(environ=os.environ) -> ZeroGPUStandIn:
    """A stand-in set up from ZEROGPU_STANDIN_QUOTA_S (seconds per IP), ZEROGPU_STANDIN_SPENT
    ("127.0.0.1=120,10.0.0.2=30": already spent), ZEROGPU_STANDIN_FAIL ("no_gpu=2,abort=1":
    the next calls fail, in that order) and ZEROGPU_STANDIN_LEDGER (a JSON file, rewritten after
    every call)."""
    spaces = ZeroGPUStandIn(float(environ.get("ZEROGPU_STANDIN_QUOTA_S", QUOTA_SECONDS)),
                            ledger=environ.get("ZEROGPU_STANDIN_LEDGER") or None)
    def pairs(name):
        for item in filter(None, (s.strip() for s in environ.get(name, "").split(","))):
            key, _, value = item.rpartition("=")
            yield key, value

    for ip, seconds in pairs("ZEROGPU_STANDIN_SPENT"):
        spaces.spend(ip, float(seconds))
    for kind, n in pairs("ZEROGPU_STANDIN_FAIL"):
        spaces.fail_next(kind, int(n))
    return spaces


def main(argv=None) -> None:
    """``python tests/zerogpu_standin.py app.py [args]``: runs app.py as ``__main__`` (as
    ``python app.py [args]`` would) with the stand-in, set up by ``from_environment``, as
    ``spaces``."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv:
        sys.exit("usage: python tests/zerogpu_standin.py SCRIPT [ARGS...]")
    spaces = from_environment()
    sys.modules["spaces"] = spaces
    os.environ[ZERO_GPU_ENV] = "true"
    script = os.path.abspath(argv[0])
    sys.argv = [argv[0], *argv[1:]]
    sys.path[0] = os.path.dirname(script)     # as `python SCRIPT` sets it
    runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    main()
