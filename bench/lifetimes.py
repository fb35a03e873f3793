"""Memory that visitors' work holds, and whether it is given back: issue 32's three figures.
Run: python bench/lifetimes.py [--only dropped|burst|cached] [--jobs 10 --burst 20 --requests 500].

The real app (``python app.py``) runs as a subprocess, as a Space would run it, with
GPT_EXPLORER_MEMORY_MB=1500, GPT_EXPLORER_RESULTS_MB=16 and GPT_EXPLORER_TRAIN_JOBS=2. Each
scenario gets a fresh server; memory is the server's /proc/<pid>/status (VmRSS now, VmHWM the
highest of its life):

- dropped: ten sessions, one after the other, each start a distinct training job (its own
  number of steps), watch two updates, let go of the stream and close the tab. RSS is read when
  the server is idle again, against the RSS after one such job before them (what a first job
  costs once: the tokenizer, torch's kernels).
- burst: twenty sessions start twenty distinct jobs at once (two may train; the rest are
  refused). The figure is the rise of VmHWM over the RSS before the burst.
- cached: one session builds GPT_CONFIG_124M (random weights) and traces 500 distinct prompts;
  the shared results cache may hold 16 MB of them. The figure is the RSS after the 500th trace
  minus the RSS after the 20th (the cache already in use, the allocator warm).

Targets (issue 32): after the dropped jobs, RSS back within 60 MB of where it started; the
burst's peak rise within the memory budget (the two jobs that may train need about 1 GB; the
others are refused before their models are built); the cached requests within the results
limit plus 25 MB of allocator slack.
"""
from __future__ import annotations

import argparse
import os
import threading
import time
import urllib.request

from _common import mb, print_table, verdict  # first: sets up explorer
from app_memory import proc_memory, running_app
from classroom import build_args, close_soon, connect, train_args

SETTINGS = {"GPT_EXPLORER_MEMORY_MB": "1500", "GPT_EXPLORER_RESULTS_MB": "16",
            "GPT_EXPLORER_TRAIN_JOBS": "2"}
DROPPED_TARGET_MB = 60
BURST_TARGET_MB = 1500         # the training budget (GPT_EXPLORER_MEMORY_MB)
CACHED_TARGET_MB = 16 + 25     # the results limit, and room for the allocator


def distinct_job(i: int) -> tuple:
    """The Train tab's defaults with ``60 + i`` steps: a job of its own for each ``i``."""
    args = list(train_args())
    args[5] = 60 + i
    return tuple(args)


def close_tab(url: str, client) -> None:
    """What a closing page does: its heartbeat stream ends, and the app unloads the session
    (``Client.close`` leaves only at the next heartbeat, 15 s later)."""
    heartbeat = urllib.request.urlopen(f"{url}gradio_api/heartbeat/{client.session_hash}")
    heartbeat.read(1)
    heartbeat.close()
    close_soon(client)


def settle(pid: int, seconds: float = 8.0) -> int:
    """The server's RSS once its CPU has been idle for a while (jobs cancelled, tabs gone)."""
    def cpu():
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])
    deadline = time.monotonic() + 120
    last = cpu()
    while time.monotonic() < deadline:
        time.sleep(seconds / 4)
        now = cpu()
        if now - last <= 2:        # clock ticks: well under 1 % of a core
            break
        last = now
    time.sleep(seconds)
    return proc_memory(pid)["VmRSS"]


def dropped(url: str, pid: int, jobs: int) -> list[str]:
    before = None
    for i in range(-1, jobs):       # -1: a first job pays what any first job does (warm-up)
        client = connect(url)
        job = client.submit(*distinct_job(i), api_name="/train_start")
        deadline = time.monotonic() + 120
        while len(job.outputs()) < 2 and not job.done() and time.monotonic() < deadline:
            time.sleep(0.1)
        job.cancel()              # let go of the stream...
        close_tab(url, client)    # ...and close the tab
        time.sleep(1.0)
        if before is None:
            before = settle(pid)
    after = settle(pid)
    grew = after - before
    return ["RSS after dropped jobs", f"{jobs} jobs", f"{mb(before)} -> {mb(after)}",
            f"{mb(grew)}", f"{verdict(grew <= DROPPED_TARGET_MB * 1e6)} (<= +{DROPPED_TARGET_MB} MB)"]


def burst(url: str, pid: int, jobs: int) -> list[str]:
    clients = [connect(url) for _ in range(jobs)]
    before = settle(pid, 2.0)
    # VmHWM only rises: read the peak of the burst against the RSS before it.
    hwm_before = proc_memory(pid)["VmHWM"]
    go = threading.Barrier(jobs)
    outcomes: list = [None] * jobs

    def start(i):
        go.wait()
        job = clients[i].submit(*distinct_job(i), api_name="/train_start")
        deadline = time.monotonic() + 60
        while not job.done() and len(job.outputs()) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        outcomes[i] = "refused" if job.done() and job.exception() else "trains"
        job.cancel()

    threads = [threading.Thread(target=start, args=(i,)) for i in range(jobs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    peak = max(proc_memory(pid)["VmHWM"], hwm_before)
    for c in clients:
        close_soon(c)
    rise = peak - before
    trains = outcomes.count("trains")
    return ["peak RSS, distinct jobs at once", f"{jobs} jobs ({trains} train)",
            f"{mb(before)} -> peak {mb(peak)}", f"{mb(rise)}",
            f"{verdict(rise <= BURST_TARGET_MB * 1e6)} (<= +{BURST_TARGET_MB} MB)"]


def cached(url: str, pid: int, requests: int) -> list[str]:
    client = connect(url)
    try:
        client.predict(*build_args(), api_name="/build")
        warm = 20
        for i in range(requests):
            client.predict(f"Every effort moves you, step {i}", 0,
                           "norm1: before vs after LayerNorm", "resid_pre", "std",
                           api_name="/trace")
            if i + 1 == warm:
                after_warm = proc_memory(pid)["VmRSS"]
        after = proc_memory(pid)["VmRSS"]
    finally:
        close_soon(client)
    grew = after - after_warm
    return ["RSS after distinct cached requests", f"{requests} traces",
            f"{mb(after_warm)} -> {mb(after)}", f"{mb(grew)}",
            f"{verdict(grew <= CACHED_TARGET_MB * 1e6)} (<= +{CACHED_TARGET_MB} MB)"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=("dropped", "burst", "cached"))
    parser.add_argument("--jobs", type=int, default=10)
    parser.add_argument("--burst", type=int, default=20)
    parser.add_argument("--requests", type=int, default=500)
    args = parser.parse_args()
    os.environ.update(SETTINGS)
    scenarios = {"dropped": lambda u, p: dropped(u, p, args.jobs),
                 "burst": lambda u, p: burst(u, p, args.burst),
                 "cached": lambda u, p: cached(u, p, args.requests)}
    rows = []
    for name, run in scenarios.items():
        if args.only not in (None, name):
            continue
        with running_app(f"gpt_explorer_{name}_") as (proc, url):
            rows.append(run(url, proc.pid))
            print("  ".join(rows[-1]), flush=True)
    print_table(rows, ["figure", "work", "RSS", "change", "target"])


if __name__ == "__main__":
    main()
