"""The idle-priority worker (explorer/idle_work.py): every job runs exactly once, a batch's
caller gets its results and its errors, and held-back inputs never exceed the batch's bound."""
import os
import sys
import threading

import pytest

from explorer import idle_work

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="SCHED_IDLE")


@linux_only
def test_the_worker_runs_at_idle_priority():
    assert idle_work.available()
    thread = idle_work._thread
    for _ in range(200):                      # the thread sets its policy as it starts
        if os.sched_getscheduler(thread.native_id) == os.SCHED_IDLE:
            break
        threading.Event().wait(0.01)
    assert os.sched_getscheduler(thread.native_id) == os.SCHED_IDLE


def test_every_job_runs_once_and_finish_waits_for_all():
    batch = idle_work.Batch(max_bytes=1 << 30)
    done, lock = [], threading.Lock()

    def job(i):
        def run():
            with lock:
                done.append(i)
        return run

    for i in range(200):
        batch.submit(job(i), nbytes=10)
    batch.finish()
    assert sorted(done) == list(range(200))
    assert batch.left == 0 and batch.held == 0


def test_a_jobs_error_reaches_the_caller_and_the_other_jobs_still_run():
    batch = idle_work.Batch(max_bytes=1 << 30)
    done = []

    def fail():
        raise ValueError("bad activation")

    batch.submit(lambda: done.append(1))
    batch.submit(fail)
    batch.submit(lambda: done.append(3))
    with pytest.raises(ValueError, match="bad activation"):
        batch.finish()
    assert sorted(done) == [1, 3]


@linux_only
def test_over_its_bound_a_batch_runs_its_oldest_jobs_on_the_callers_thread(idle_worker_busy):
    assert idle_work.available()
    with idle_worker_busy():
        batch = idle_work.Batch(max_bytes=100)
        ran_on = []
        for _ in range(4):
            batch.submit(lambda: ran_on.append(threading.current_thread()), nbytes=60)
            assert batch.held <= 100            # never more than the bound held back
        assert ran_on == [threading.current_thread()] * 3   # the worker is busy elsewhere
        batch.finish()
        assert len(ran_on) == 4


@linux_only
def test_finish_does_not_wait_long_for_a_descheduled_worker():
    """The worker holding a job (here: stuck on purpose, as when no core is idle for it):
    finish() runs that job itself after LATE_S instead of waiting."""
    assert idle_work.available()
    started, release = threading.Event(), threading.Event()
    runs = []

    def job():
        runs.append(threading.current_thread())
        if threading.current_thread() is idle_work._thread:
            started.set()
            release.wait(30)

    batch = idle_work.Batch(max_bytes=1 << 30)
    batch.submit(job)
    try:
        if not started.wait(20):
            pytest.skip("no idle core for the worker within 20 s")
        batch.finish()                             # returns although the worker is stuck
        assert runs == [idle_work._thread, threading.current_thread()]
        assert batch.left == 0
    finally:
        release.set()


@linux_only
def test_a_cancelled_batch_drops_its_waiting_jobs(idle_worker_busy):
    assert idle_work.available()
    with idle_worker_busy():
        batch = idle_work.Batch(max_bytes=1 << 30)
        ran = []
        for i in range(5):
            batch.submit(lambda i=i: ran.append(i), nbytes=7)
        assert batch.left == 5 and batch.held == 35
        batch.cancel()
        batch.finish()                     # nothing left to wait for
        assert ran == [] and batch.left == 0 and batch.held == 0
        assert not any(job.batch is batch for job in idle_work._queue)
