"""A fake ZeroGPU scheduler: the far end of the real ``spaces`` client (PyPI's ``spaces``,
pinned in requirements-dev.txt), so that the tests run the client itself as on a Space: its
``schedule`` / ``allow`` / ``release`` calls, its forked and reused workers, its exception
wrapping, its messages and its duration factor. Only the scheduler is ours.

The scheduler answers the calls the client makes (``spaces/zero/api.py``):

- ``POST /startup-report``: 200;
- ``POST /schedule?durationSeconds=&token=&taskId=...``: a GPU (200, JSON), a quota refusal
  (429, ``{"left", "wait"}``: the client turns it into its own wording), no GPU (503), or a
  wait in the queue (an event stream that ends "succeeded" or "failed");
- ``POST /allow?allowToken=&pid=``: the worker's process id, which the scheduler kills when
  the call runs past its duration (as ZeroGPU cuts a task off);
- ``POST /release?allowToken=&fail=``: the call ends; the visitor is charged the seconds it
  held the GPU (the whole duration, if it was cut off).

Quotas are kept per visitor, named by the ``X-IP-Token`` the client forwards (``token``); a call
without one is charged to the Space's own pool (``POOL``). A spent quota comes back whole 24 h
after its first use (ZeroGPU's daily reset).

In a test::

    scheduler = Scheduler()                 # on 127.0.0.1, a port of its own
    spaces = real_client(monkeypatch, scheduler)
    ...
    scheduler.close()

The client needs a few shims on torch's CPU wheel (``real_client``), each one said where it is.

The app under it, for a benchmark (settings from ZEROGPU_QUOTA_S, _SPENT, _FAIL, _LEDGER: see
``from_environment``)::

    python tests/zerogpu_scheduler.py app.py [args]
"""
from __future__ import annotations

import base64
import contextlib
import dataclasses
import json
import math
import multiprocessing
import os
import signal
import sys
import threading
import time
import uuid
from collections import defaultdict, deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

QUOTA_SECONDS = 120          # an anonymous visitor's daily ZeroGPU quota (hub-docs, Aug 2026)
POOL = "space"               # who pays for a call without an X-IP-Token: the Space's pool
DAY_SECONDS = 24 * 3600
# The Space's hardware as the client reads it from the NVIDIA driver (spaces/zero/config.py):
# ZeroGPU's default "large" size today, whose duration factor is 1.5 (spaces/zero/configs.json).
HARDWARE = "NVIDIA RTX PRO 6000 Blackwell Server Edition"


def token(visitor: str, user: str | None = None, level: str = "regular") -> str:
    """An X-IP-Token for ``visitor``: a JWT whose payload the client reads (it only decodes
    it; the scheduler checks it). ``user``: a signed-in visitor's name; ``level`` their
    account ("regular" or "pro")."""
    payload = {"ip": visitor, **({"user": user, "level": level} if user else {})}
    body = base64.urlsafe_b64encode(json.dumps(payload).encode()).decode().rstrip("=")
    return f"e30.{body}.fake"


def visitor_of(token_value: str | None) -> str:
    if not token_value:
        return POOL
    body = token_value.split(".")[1]
    payload = json.loads(base64.urlsafe_b64decode(body + "=="))
    return payload.get("user") or payload["ip"]


class Headers(dict):
    """Request headers as the client reads them (it asks for a ``__dict__`` and ``get``)."""


def request_with_token(token_value: str | None, host: str = "127.0.0.1"):
    """A Gradio request, as the client sees one, from a visitor with ``token_value``."""
    from types import SimpleNamespace
    headers = Headers({"x-ip-token": token_value} if token_value else {})
    return SimpleNamespace(headers=headers, client=SimpleNamespace(host=host),
                           username=None, session_hash=uuid.uuid4().hex)


@dataclasses.dataclass
class Call:
    task_id: int
    visitor: str
    asked: float                 # durationSeconds, as the client sent it (its factor applied)
    outcome: str = "scheduled"   # ok, failed, aborted, quota, limit, runs, pool, no_gpu, queue
    pid: int | None = None
    started: float | None = None
    charged: float = 0.0
    gpu: int | None = None
    token: str = ""


class Scheduler:
    """``gpus`` GPUs for the Space; ``quota_s`` a day for each visitor (``quotas`` by name for
    others, ``pool_s`` for the Space's pool); ``queue_s``: how long a call waits for a busy GPU
    before "failed" (ZeroGPU: 60 s)."""

    def __init__(self, quota_s: float = QUOTA_SECONDS, *, gpus: int = 1, pool_s: float = 3600,
                 quotas: dict | None = None, queue_s: float = 60.0, runs_limit: int | None = None,
                 max_duration_s: float | None = None, ledger: str | None = None):
        self.quota_s, self.pool_s, self.quotas = quota_s, pool_s, dict(quotas or {})
        self.ledger = ledger
        self.queue_s, self.runs_limit = queue_s, runs_limit
        self.max_duration_s = max_duration_s
        self.calls: list[Call] = []
        self._spent = defaultdict(float)
        self._first_use: dict[str, float] = {}
        self._runs = defaultdict(int)
        self._failures: deque = deque()
        self._lock = threading.Condition()
        self._free = list(range(gpus))
        self._by_token: dict[str, Call] = {}
        self._pid_on_gpu: dict = {}   # (task, GPU) -> the worker last allowed there
        self.startup_reports = 0
        scheduler = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"

            def log_message(self, *args):     # quiet
                pass

            def do_POST(self):  # noqa: N802
                url = urlparse(self.path)
                query = {k: v[0] for k, v in parse_qs(url.query).items()}
                scheduler._answer(self, url.path, query)

            do_GET = do_POST  # noqa: N815

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True,
                                        name="fake-zerogpu-scheduler")
        self._thread.start()

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    # -- the ledger ------------------------------------------------------------------------------
    def quota_of(self, visitor: str) -> float:
        if visitor == POOL:
            return self.pool_s
        return self.quotas.get(visitor, self.quota_s)

    def charged(self, visitor: str) -> float:
        with self._lock:
            return self._spent[visitor]

    def left(self, visitor: str) -> float:
        with self._lock:
            return self._left(visitor)

    def _left(self, visitor):
        first = self._first_use.get(visitor)
        if first is not None and time.time() - first >= DAY_SECONDS:
            self._spent[visitor], self._runs[visitor] = 0.0, 0
            del self._first_use[visitor]
        return max(0.0, self.quota_of(visitor) - self._spent[visitor])

    def spend(self, visitor: str, seconds: float) -> None:
        with self._lock:
            self._first_use.setdefault(visitor, time.time())
            self._spent[visitor] += seconds

    def fail_next(self, kind: str, n: int = 1, *, after: float = 0.0) -> None:
        """The next ``n`` calls: "no_gpu" (503), "queue" (the queue's "failed"), or "abort"
        (the worker is killed ``after`` seconds into the call)."""
        assert kind in ("no_gpu", "queue", "abort")
        with self._lock:
            self._failures.extend([(kind, after)] * n)

    def idle(self, timeout: float = 30.0) -> bool:
        """Wait until no call holds a GPU."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while any(c.outcome == "scheduled" and c.started is not None for c in self.calls):
                if not self._lock.wait(max(0.0, deadline - time.monotonic())):
                    return False
        return True

    def outcomes(self) -> list[str]:
        return [c.outcome for c in self.calls]

    def write_ledger(self) -> None:
        """{"quota_s", "charged": {visitor: seconds}, "calls": [...]} into ``ledger`` (a JSON
        file, replaced whole: a reader never sees half of it)."""
        if self.ledger is None:
            return
        with self._lock:
            state = {"quota_s": self.quota_s, "charged": dict(self._spent),
                     "calls": [dataclasses.asdict(c) for c in self.calls]}
        partial = f"{self.ledger}.{os.getpid()}.tmp"
        with open(partial, "w") as f:
            json.dump(state, f, indent=1)
        os.replace(partial, self.ledger)

    # -- the calls -------------------------------------------------------------------------------
    def _answer(self, handler, path, query):
        try:
            self._answer_call(handler, path, query)
        finally:
            if path in ("/schedule", "/release"):
                self.write_ledger()

    def _answer_call(self, handler, path, query):
        if path == "/startup-report":
            self.startup_reports += 1
            return self._json(handler, 200, {})
        if path == "/schedule":
            return self._schedule(handler, query)
        if path == "/allow":
            return self._allow(handler, query)
        if path == "/release":
            return self._release(handler, query)
        return self._json(handler, 404, {"detail": "not found"})

    @staticmethod
    def _json(handler, status, body, headers=()):
        data = json.dumps(body).encode()
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(data)))
        for name, value in headers:
            handler.send_header(name, value)
        handler.end_headers()
        handler.wfile.write(data)

    def _schedule(self, handler, query):
        token_value = query.get("token")
        visitor = visitor_of(token_value)
        asked = float(query.get("durationSeconds", 60))
        call = Call(int(query.get("taskId", 0)), visitor, asked)
        payload = json.loads(base64.urlsafe_b64decode(token_value.split(".")[1] + "==")) \
            if token_value else {}
        auth = [("X-Authenticated", payload["level"])] if "user" in payload else []
        with self._lock:
            self.calls.append(call)
            left = self._left(visitor)
            first = self._first_use.get(visitor)
            wait = int(first + DAY_SECONDS - time.time()) if first else DAY_SECONDS
            limit = self.max_duration_s if self.max_duration_s is not None \
                else self.quota_of(visitor)
            failure = self._failures.popleft() if self._failures else None
            if asked > limit:
                call.outcome = "limit"
                return self._json(handler, 429, {"left": int(left), "wait": -1}, auth)
            if self.runs_limit is not None and self._runs[visitor] >= self.runs_limit:
                call.outcome = "runs"
                return self._json(handler, 429, {"left": int(left), "wait": 0}, auth)
            if asked > left:
                call.outcome = "pool" if visitor == POOL else "quota"
                return self._json(handler, 429, {"left": int(left), "wait": max(1, wait)}, auth)
            if failure and failure[0] == "no_gpu":
                call.outcome = "no_gpu"
                return self._json(handler, 503, {"detail": "no GPU"})
            if failure and failure[0] == "queue":
                call.outcome = "queue"
                return self._events(handler, "event: failed\n\n")
            queued = not self._free
            deadline = time.monotonic() + self.queue_s
            while not self._free:
                if not self._lock.wait(max(0.0, deadline - time.monotonic())) \
                        and not self._free:
                    call.outcome = "queue"
                    return self._events(handler, "event: failed\n\n")
            call.gpu = self._free.pop(0)
            call.token = uuid.uuid4().hex
            call.started = time.monotonic()
            call.pid = self._pid_on_gpu.get((call.task_id, call.gpu))   # a reused worker: no allow
            self._first_use.setdefault(visitor, time.time())
            self._runs[visitor] += 1
            self._by_token[call.token] = call
            cut = failure[1] if failure and failure[0] == "abort" else call.asked
        # ZeroGPU cuts off a task that runs past its duration: its process is killed.
        timer = threading.Timer(cut, self._cut_off, (call,))
        timer.daemon = True
        timer.start()
        answer = {"idle": True, "nvidiaIndex": call.gpu, "nvidiaUUID": f"GPU-fake-{call.gpu}",
                  "allowToken": call.token}
        if queued:
            return self._events(handler, f"event: succeeded\ndata: {json.dumps(answer)}\n\n")
        return self._json(handler, 200, answer, auth)

    @staticmethod
    def _events(handler, text):
        # One event, in one write: the client reads each chunk of the stream as one event.
        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream")
        handler.end_headers()
        handler.wfile.write(text.encode())

    def _allow(self, handler, query):
        with self._lock:
            call = self._by_token.get(query.get("allowToken"))
            if call is None:
                return self._json(handler, 404, {})
            call.pid = self._pid_on_gpu[call.task_id, call.gpu] = int(query["pid"])
            due = call.outcome == "aborted"        # cut off before its worker had started
        if due:
            with contextlib.suppress(ProcessLookupError):
                os.kill(call.pid, signal.SIGKILL)
        return self._json(handler, 200, {})

    def _cut_off(self, call):
        with self._lock:
            if call.outcome != "scheduled" or call.token not in self._by_token:
                return
            call.outcome = "aborted"
            pid = call.pid
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    def _release(self, handler, query):
        with self._lock:
            call = self._by_token.pop(query.get("allowToken"), None)
            if call is None:
                return self._json(handler, 404, {})
            used = time.monotonic() - call.started
            if call.outcome == "aborted":
                used = call.asked
            elif call.outcome == "scheduled":
                call.outcome = "failed" if query.get("fail") in ("True", "true", "1") else "ok"
            call.charged = used
            self._spent[call.visitor] += used
            self._free.append(call.gpu)
            self._free.sort()
            self._lock.notify_all()
        return self._json(handler, 200, {})


# -------------------------------------------------------------------------------------------------
def not_in_bad_fork() -> bool:
    return False


def real_client(monkeypatch, scheduler: Scheduler, *, hardware: str = HARDWARE):
    """PyPI's ``spaces`` imported as on a ZeroGPU Space (SPACES_ZERO_GPU=true), talking to
    ``scheduler``; ``monkeypatch`` undoes it all (``forget_real_client``)."""
    for name in [m for m in sys.modules if m == "spaces" or m.startswith("spaces.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setenv("SPACES_ZERO_GPU", "true")
    monkeypatch.setenv("SPACES_ZERO_DEVICE_API_URL", scheduler.url)
    import gradio as gr
    launch = gr.Blocks.launch
    before = set(multiprocessing.active_children())
    import torch
    # The client patches torch in the server (its CUDA emulation); monkeypatch keeps what each
    # of those names was, so that undoing a test's own patch never leaves the client's behind.
    for owner, names in ((torch, ("device", "asarray")),
                         (torch.Tensor, ("_make_subclass",)),
                         (torch.UntypedStorage, ("__new__", "device")),
                         (torch.cuda, ("_exchange_device", "_maybe_exchange_device",
                                       "is_available", "device_count", "current_device",
                                       "synchronize", "get_device_capability",
                                       "get_device_properties", "get_device_name", "cudart")),
                         (torch.cuda.memory, ("memory_stats_as_nested_dict",))):
        for name in names:
            if name in vars(owner) or hasattr(owner, name):
                monkeypatch.setattr(owner, name, getattr(owner, name))
    # Shim 0: the client reads the CUDA version torch was built for (the format of its fake
    # CUDA memory statistics); the CPU wheel says None. ZeroGPU's wheels are CUDA 12.
    monkeypatch.setattr(torch.version, "cuda", "12.8")
    # ... and keeps CUDA's low-level start (to refuse it in the server): the CPU wheel has none.
    def no_cuda():
        raise RuntimeError("torch's CPU wheel has no CUDA")
    monkeypatch.setattr(torch._C, "_cuda_init", no_cuda, raising=False)
    # ... and asks, in a forked process, whether CUDA was started before it was imported: the
    # CPU wheel's answer is a lambda, which cannot be sent to that process.
    monkeypatch.setattr(torch.cuda, "_is_in_bad_fork", not_in_bad_fork)
    import spaces
    import spaces.zero.config
    import spaces.zero.torch
    # Shim 1: the Space's GPU, as the client reads its model from the NVIDIA driver's files
    # (/proc/driver/nvidia, absent here): it picks the duration factor of ZeroGPU's hardware.
    # (The fake CUDA properties the server's torch shows were read at import: an H200's.)
    monkeypatch.setattr(spaces.zero.config, "_read_gpu_information",
                        lambda: f"Model: \t{hardware}\n")
    spaces.zero.config.get_config.cache_clear()
    # Shim 2: a worker starts CUDA (``torch.Tensor([0]).cuda()``) and moves the packed tensors
    # there, then synchronizes; torch's CPU wheel has no CUDA. The worker skips both and runs
    # the task on the CPU (nothing was packed: the app keeps its models on the CPU).
    monkeypatch.setattr(spaces.zero.torch, "init", lambda nvidia_uuid: None)
    monkeypatch.setattr(spaces.zero.torch, "move", lambda callback=None: None)

    def forget():
        spaces.zero.torch.unpatch()          # torch as it was before the client patched it
        gr.Blocks.launch = launch            # the client wraps launch for its start-up report
        for child in set(multiprocessing.active_children()) - before:
            child.terminate()                # its workers (daemons that would idle on)
            child.join(10)
        spaces.zero.config.get_config.cache_clear()
        for name in [m for m in sys.modules if m == "spaces" or m.startswith("spaces.")]:
            del sys.modules[name]            # a later import reads its settings again
    spaces.forget = forget
    return spaces


# -------------------------------------------------------------------------------------------------
def from_environment(environ=os.environ) -> Scheduler:
    """A scheduler set up from ZEROGPU_QUOTA_S (each visitor's seconds a day), ZEROGPU_SPENT
    ("10.0.0.7=120,space=30": already spent), ZEROGPU_FAIL ("no_gpu=2,abort=1": the next calls
    fail so) and ZEROGPU_LEDGER (a JSON file, rewritten after every call)."""
    scheduler = Scheduler(float(environ.get("ZEROGPU_QUOTA_S", QUOTA_SECONDS)),
                          ledger=environ.get("ZEROGPU_LEDGER") or None)

    def pairs(name):
        for item in filter(None, (s.strip() for s in environ.get(name, "").split(","))):
            key, _, value = item.rpartition("=")
            yield key, value
    for visitor, seconds in pairs("ZEROGPU_SPENT"):
        scheduler.spend(visitor, float(seconds))
    for kind, n in pairs("ZEROGPU_FAIL"):
        scheduler.fail_next(kind, int(n))
    scheduler.write_ledger()
    return scheduler


def main(argv=None) -> None:
    """``python tests/zerogpu_scheduler.py app.py [args]``: app.py as ``__main__`` (as ``python
    app.py`` runs it), with the real ``spaces`` client as on a ZeroGPU Space, talking to a
    fake scheduler in this process (``from_environment``). For the benchmarks."""
    import runpy

    import pytest
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv:
        sys.exit("usage: python tests/zerogpu_scheduler.py SCRIPT [ARGS...]")
    scheduler = from_environment()
    real_client(pytest.MonkeyPatch(), scheduler)     # (never undone: the process is the app)
    script = os.path.abspath(argv[0])
    sys.argv = [argv[0], *argv[1:]]
    sys.path[0] = os.path.dirname(script)     # as `python SCRIPT` sets it
    runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    main()
