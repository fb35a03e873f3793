"""Work done on CPU time that nothing else wants: a background thread under Linux's
``SCHED_IDLE`` policy, which the kernel runs only on a core that would otherwise be idle.

A forward pass keeps about 1.7-1.8 of two cores busy here (its threads sleep between operations).
A trace's statistics (~35 ms of CPU time at T = 128 on GPT-2 small) fit in what it leaves, and
done there they no longer hold up the forward pass; at normal priority the same thread slowed
the forward pass more than it saved, by taking cores from its threads.

``Batch`` is one caller's set of jobs (one trace). ``finish()`` runs on the calling thread
whatever the background thread has not started, and gives the job that thread is on a few ms
before running it too, so a fully busy machine (no idle core, where an idle-priority thread may
wait a long while for the CPU) costs about what doing the work in place would. Jobs held back
must not pile up memory: once a batch holds more than ``max_bytes`` of pending inputs,
``submit`` runs its oldest jobs in place first. Elsewhere than Linux, ``available()`` is False
and callers work in place.
"""
from __future__ import annotations

import collections
import os
import threading

_lock = threading.Lock()
_work_ready = threading.Condition(_lock)
_queue: collections.deque = collections.deque()   # _Job, oldest first
_thread: threading.Thread | None = None
_usable: bool | None = None
LATE_S = 0.005    # how long finish() waits for the job the idle-priority thread is on


def available() -> bool:
    """Whether the idle-priority thread runs (started on the first call)."""
    global _thread, _usable
    if _usable is None:
        with _lock:
            if _usable is None:
                _usable = hasattr(os, "sched_setscheduler") and hasattr(os, "SCHED_IDLE")
                if _usable:
                    _thread = threading.Thread(target=_serve, name="explorer-idle",
                                               daemon=True)
                    _thread.start()
    return _usable


def _serve() -> None:
    global _usable, _running
    try:
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))   # 0: this thread
    except OSError:
        _usable = False
        return
    while True:
        with _lock:
            while not _queue:
                _work_ready.wait()
            job = _running = _queue.popleft()
        _run(job)
        with _lock:
            _running = None


class _Job:
    __slots__ = ("batch", "work", "nbytes", "finished")

    def __init__(self, batch, work, nbytes):
        self.batch, self.work, self.nbytes, self.finished = batch, work, nbytes, False


_running: _Job | None = None      # the job the idle-priority thread is on


def _run(job: _Job) -> None:
    """Run a job; the first run of it to end counts (a job is only run twice when its caller
    stopped waiting for a descheduled worker: both runs write the same results)."""
    try:
        job.work()
    except BaseException as exc:  # noqa: BLE001 - handed to the batch's caller
        job.batch.error = job.batch.error or exc
    with _lock:
        if not job.finished:
            job.finished = True
            job.batch.left -= 1
            job.batch.held -= job.nbytes
            job.batch.done.notify_all()


class Batch:
    """One caller's jobs: each a function of no arguments that writes its own results, and that
    may be run a second time (it must then write the same results)."""

    def __init__(self, max_bytes: int):
        self.max_bytes = max_bytes
        self.left = 0              # submitted and not finished
        self.held = 0              # bytes of input that those jobs keep alive
        self.error: BaseException | None = None
        self.done = threading.Condition(_lock)

    def submit(self, work, nbytes: int = 0) -> None:
        with _lock:
            _queue.append(_Job(self, work, nbytes))
            self.left += 1
            self.held += nbytes
            _work_ready.notify()
        while self.held > self.max_bytes and self._run_one():
            pass

    def finish(self) -> None:
        """Every job done, on this thread where the background one has not started them;
        raises the first job's exception, if any. A job the background thread is on gets
        ``LATE_S`` to end: on a machine with no idle core that thread may not run again for a
        long while, so after that the job is run here too."""
        while self._run_one():
            pass
        with _lock:
            self.done.wait_for(lambda: self.left == 0, timeout=LATE_S)
            late = _running if _running is not None and _running.batch is self else None
        if late is not None and not late.finished:
            _run(late)
        with _lock:
            self.done.wait_for(lambda: self.left == 0)
        if self.error is not None:
            raise self.error

    def cancel(self) -> None:
        """Drop the jobs not yet started (the caller gave up: nobody will read their
        results); one already running ends on its own."""
        with _lock:
            mine = [job for job in _queue if job.batch is self]
            for job in mine:
                _queue.remove(job)
                job.finished = True
                self.left -= 1
                self.held -= job.nbytes

    def _run_one(self) -> bool:
        """Run this batch's oldest waiting job here; False if none is waiting."""
        with _lock:
            job = next((j for j in _queue if j.batch is self), None)
            if job is None:
                return False
            _queue.remove(job)
        _run(job)
        return True
