"""A class on one free Space: 30 students walk through the app at once, then 8 start training.
Run: python bench/classroom.py [--quick] [--students N --spread S --trainers N ...].

The real app (``python app.py``) runs as a subprocess with GPT_EXPLORER_MEMORY_MB=6000 (a
free Space's budget). Every student is a ``gradio_client.Client`` of its own (its own
session) and does "the walk": /build the book's GPT_CONFIG_124M with random weights, /trace
"Every effort moves you", /attention of layer 0, and /generate 20 greedy tokens (streamed,
consumed to the end). Clients are connected before the clock starts (a student's page is
open); the walk is timed from the first call to the last update.

With ``--zerogpu`` the app runs under the real ZeroGPU client (PyPI's ``spaces``) against a fake
scheduler (tests/zerogpu_scheduler.py: a quota per X-IP-Token; the client's own forked and
reused workers, messages and duration factor). Every student sends the same X-IP-Token, as a
class behind one address does on the Space's huggingface.co page: the report adds the GPU
seconds charged to that address. ``--spent``
starts with its quota used up: every walk must still complete, on the CPU, saying so.
``--large`` then builds a random gpt2-large and traces a long text, with quota left (it goes
to the GPU) and without (done on the CPU, or refused with ZeroGPU's retry time, within 2 s).

Targets (issue "A class on one Space"):
- burst: p95 of the walk <= 4x the solo walk; 0 errors; the server's peak RSS (VmHWM) within
  the memory budget plus a margin for Python + torch + Gradio;
- training burst: every trainer sees live curves (>= 2 streamed updates with a rising step),
  none is refused.

The clients run in this process, on the same cores as the server: their own CPU (JSON and
SSE parsing, 30 heartbeats) is part of what a class costs a 2-core machine, and is counted.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import re
import statistics
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from _common import (OthersCPU, load_average, mb, print_table, verdict,  # first: explorer
                     wait_for_quiet)
from app_memory import prompt_of, proc_memory, running_app  # the app as a subprocess

from gradio_client import Client

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "tests"))
from zerogpu_scheduler import token  # noqa: E402 - the fake scheduler's X-IP-Token

from explorer.book.config import GPT_CONFIG_124M, PRESETS, GPTConfig
from explorer.book.knobs import KNOBS
from explorer.runtime.memory import BUDGET_ENV
from explorer.runtime.training.setup import (DEFAULT_CONTEXT, DEFAULT_PRESET, DEFAULT_STEPS,
                                             DEFAULT_VARIANTS, TrainingSettings)

PROMPT = "Every effort moves you"
TRACE_VIEW = ("norm1: before vs after LayerNorm", "resid_pre", "std")
NEW_TOKENS = 20
CALLS = ("build", "trace", "attention", "generate")
RATIO_TARGET = 4.0
GPU_SECONDS_TARGET = 10.0      # charged to a class's address for its whole walk burst
STAND_IN = ("tests/zerogpu_scheduler.py",)   # runs app.py under the real client, faked far end
CLASS_IP = "127.0.0.1"
CLASS_TOKEN = token(CLASS_IP)     # the X-IP-Token of the class's one address
LARGE_TOKENS = (256, 1000)     # a long trace for the GPU; one too long for the CPU's fallback
MARGIN_MB = 1500          # Python + torch + Gradio beside the budgeted models
REFUSED = re.compile(r"running on this server|too many|busy", re.I)
STEP = re.compile(r"step ([\d,]+) of")


# --------------------------------------------------------------------------------- clients
def connect(url: str) -> Client:
    # ssl_verify=False: plain HTTP on the loopback; verification would load the CA bundle
    # for every call (tens of ms of CPU on the cores the server uses; tests/local_client.py).
    # On ZeroGPU every student sends the class's X-IP-Token (huggingface.co's page would).
    headers = {"X-IP-Token": CLASS_TOKEN} if os.environ.get("ZEROGPU_LEDGER") else None
    return Client(url, verbose=False, ssl_verify=False, download_files=False,
                  analytics_enabled=False, headers=headers)


def close_soon(client: Client) -> None:
    """Close without waiting for the heartbeat thread (it leaves at its next beat)."""
    threading.Thread(target=client.close, daemon=True).start()


def connect_many(url: str, n: int) -> tuple[list[Client], float]:
    """``n`` clients, connected two at a time; and the seconds that took."""
    started = time.perf_counter()
    with ThreadPoolExecutor(2) as pool:
        clients = list(pool.map(lambda _: connect(url), range(n)))
    return clients, time.perf_counter() - started


def build_args() -> tuple:
    """/build's positional inputs: preset, the 13 knobs, seed, device, dtype, random weights."""
    cfg = GPTConfig.from_dict(GPT_CONFIG_124M).to_dict()
    return ("gpt2-small", *(cfg[k.field] for k in KNOBS), 123, "cpu", "float32", "random",
            "small", None, None)


# ---------------------------------------------------------------------------------- a walk
def timed(record: dict, name: str, call):
    started = time.perf_counter()
    out = call()
    record[name] = time.perf_counter() - started
    return out


def generate(client: Client, record: dict) -> str:
    """Stream 20 greedy tokens to the end; record the time to the first update too."""
    started = time.perf_counter()
    job = client.submit(PROMPT, NEW_TOKENS, "greedy", 1.0, 50, 123, False, api_name="/generate")
    for _ in job:
        record.setdefault("generate first update", time.perf_counter() - started)
    return job.result()[0]   # raises the server's error, if any


def walk(client: Client) -> dict:
    """One student's walk: {call: seconds, "walk": seconds, "text": generated text}."""
    record: dict = {}
    started = time.perf_counter()
    timed(record, "build", lambda: client.predict(*build_args(), api_name="/build"))
    out = timed(record, "trace", lambda: client.predict(PROMPT, 0, *TRACE_VIEW,
                                                         api_name="/trace"))
    record["trace note"] = str(out[1])        # the summary: where it ran, shared or not
    timed(record, "attention", lambda: client.predict(0, "mean", api_name="/attention"))
    record["text"] = timed(record, "generate", lambda: generate(client, record))
    record["walk"] = time.perf_counter() - started
    return record


def solo(url: str, repeats: int) -> list[dict]:
    """One warm-up walk (the model is built and cached), then ``repeats`` walks, one at a time,
    each by a new student."""
    records = []
    for i in range(repeats + 1):
        client = connect(url)
        try:
            record = walk(client)
        finally:
            close_soon(client)
        if i:
            records.append(record)
        print(f"  solo walk {'warm-up' if not i else i}: {record['walk']:.2f} s "
              + ", ".join(f"{c} {record[c]:.2f}" for c in CALLS))
    return records


def arriving(url: str, n: int, spread_s: float, visit, failed) -> tuple[list, float]:
    """``n`` sessions, each in its own thread, arriving evenly within ``spread_s``: each
    result is ``visit(client)``, or ``failed(message)`` where it raised. The clients are closed
    at the end (the app cancels a closed session's job). Returns the results and the connect
    time."""
    clients, connect_s = connect_many(url, n)
    results: list = [None] * n
    start = time.perf_counter() + 0.5

    def session(i):
        time.sleep(max(0.0, start + i * spread_s / n - time.perf_counter()))
        try:
            results[i] = visit(clients[i])
        except Exception as exc:  # noqa: BLE001 - counted and reported
            results[i] = failed(str(exc)[:300])

    threads = [threading.Thread(target=session, args=(i,)) for i in range(n)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    for c in clients:
        close_soon(c)
    return results, connect_s


def burst(url: str, students: int, spread_s: float) -> tuple[list[dict], float]:
    """``students`` walks arriving evenly within ``spread_s``; a failed walk is
    {"error": message}. Returns the records and the connect time."""
    return arriving(url, students, spread_s, walk, lambda message: {"error": message})


# ------------------------------------------------------------------------------- training
def train_args() -> tuple:
    """The Train tab's defaults, in /train_start's order."""
    book = TrainingSettings()
    return ("the default story", "", None, list(DEFAULT_VARIANTS), DEFAULT_PRESET,
            DEFAULT_STEPS, book.batch_size, DEFAULT_CONTEXT, book.lr, book.warmup_steps)


def step_of(update) -> int | None:
    match = STEP.search(str(update[0]))   # the progress markdown is the first output
    return int(match.group(1).replace(",", "")) if match else None


def watch_training(client: Client, watch_s: float | None) -> dict:
    """Start this session's job and poll its stream (every 0.1 s) for ``watch_s`` seconds
    (None: to the end); then stop it. Returns the updates' (seconds, step) and the outcome."""
    started = time.perf_counter()
    job = client.submit(*train_args(), api_name="/train_start")
    updates: list[tuple[float, int | None]] = []
    while not job.done() and (watch_s is None or time.perf_counter() - started < watch_s):
        outs = job.outputs()
        updates += [(time.perf_counter() - started, step_of(o)) for o in outs[len(updates):]]
        time.sleep(0.1)
    watched = [s for _, s in updates if s is not None]   # live is judged within the watch
    error = job.exception() if job.done() else None
    if not job.done():
        client.predict(api_name="/train_stop")   # stop after the current step; stream ends
        try:
            job.result(timeout=60)
        except Exception:  # noqa: BLE001 - the stream's end, not the measurement
            pass
    outs = job.outputs()
    now = time.perf_counter() - started
    updates += [(now, step_of(o)) for o in outs[len(updates):]]
    steps = [s for _, s in updates if s is not None]
    return {"updates": updates, "error": None if error is None else str(error)[:300],
            "live": len(watched) >= 2 and max(watched) > watched[0],
            "first": updates[0][0] if updates else None,
            "first step": next((t for t, s in updates if s), None),   # step >= 1 shown
            "last": updates[-1][0] if updates else None,
            "last step": max(steps, default=None)}


def train_burst(url: str, trainers: int, within_s: float, watch_s: float | None) -> list[dict]:
    def failed(message):
        return {"updates": [], "error": message, "live": False, "first": None,
                "first step": None, "last": None, "last step": None}
    return arriving(url, trainers, within_s, lambda c: watch_training(c, watch_s), failed)[0]


# -------------------------------------------------------------------------------- ZeroGPU
def ledger_of(path) -> dict:
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {"charged": {}, "calls": []}


def zerogpu_rows(records, ledger, spent: bool) -> list[list[str]]:
    charged = ledger["charged"].get(CLASS_IP, 0.0) - (ledger.get("quota_s", 0) if spent else 0)
    outcomes: dict[str, int] = {}
    for call in ledger["calls"]:
        outcomes[call["outcome"]] = outcomes.get(call["outcome"], 0) + 1
    ok = [r for r in records if "error" not in r]
    on_cpu = sum("on the CPU" in r.get("trace note", "") for r in ok)
    shared = sum("shared cache" in r.get("trace note", "") for r in ok)
    rows = [["GPU calls (by outcome)", ", ".join(f"{k} {v}" for k, v in outcomes.items())
             or "none", "(info)", ""],
            [f"GPU seconds charged to {CLASS_IP} (the class)", f"{max(charged, 0.0):.1f} s",
             f"<= {GPU_SECONDS_TARGET:g} s", verdict(charged <= GPU_SECONDS_TARGET)],
            ["traces from the shared cache", f"{shared} of {len(ok)}", "(as without)", ""]]
    if spent:
        rows.append(["walks done on the CPU, saying so", f"{on_cpu} of {len(records)}",
                     f"{len(records)}", verdict(on_cpu == len(records))])
    return rows


def large_build_args() -> tuple:
    cfg = GPTConfig.from_dict(PRESETS["gpt2-large"]).to_dict()
    return ("gpt2-large", *(cfg[k.field] for k in KNOBS), 123, "auto", "float32", "random",
            "small", None, None)


def large_trace(spent: bool, memory_mb: int) -> list[list[str]]:
    """A random gpt2-large, then a trace of LARGE_TOKENS[0] tokens (with quota left: the GPU;
    spent: the CPU, saying so) and of LARGE_TOKENS[1] (spent: refused with the retry time)."""
    ledger = tempfile.NamedTemporaryFile(suffix=".json", delete=False).name
    os.environ.update(ZEROGPU_LEDGER=ledger, ZEROGPU_SPENT=f"{CLASS_IP}=120" if spent else "")
    rows = []
    with running_app("bench_classroom_large_", STAND_IN) as (proc, url):
        client = connect(url)
        started = time.perf_counter()
        client.predict(*large_build_args(), api_name="/build")
        print(f"  gpt2-large built in {time.perf_counter() - started:.1f} s")
        for tokens in LARGE_TOKENS if spent else LARGE_TOKENS[:1]:
            started = time.perf_counter()
            try:
                note = str(client.predict(prompt_of(tokens), 0, *TRACE_VIEW,
                                          api_name="/trace")[1])
            except Exception as exc:  # noqa: BLE001 - a refusal is one of the outcomes
                note = f"refused: {exc}"
            seconds = time.perf_counter() - started
            where = ("GPU" if "on the GPU" in note else "refused" if note.startswith("refused")
                     else "CPU" if "on the CPU" in note else "?")
            said_why = "quota" in note and ("try again" in note or where == "CPU")
            if not spent:
                ok = where == "GPU"
                target = "on the GPU"
            else:
                ok = (where == "CPU" and said_why) or (where == "refused" and said_why
                                                       and seconds <= 2.0)
                target = "CPU with the note, or refused with the retry time within 2 s"
            rows.append([f"gpt2-large trace of {tokens} tokens, quota "
                         f"{'spent' if spent else 'left'}",
                         f"{where}, {seconds:.1f} s", target, verdict(ok)])
            print(f"  {tokens} tokens: {where} in {seconds:.1f} s: {note[:160]}")
        close_soon(client)
    charged = ledger_of(ledger)["charged"].get(CLASS_IP, 0.0) - (120 if spent else 0)
    rows.append([f"gpt2-large: GPU seconds charged (quota {'spent' if spent else 'left'})",
                 f"{max(charged, 0):.1f} s", "(info)", ""])
    os.unlink(ledger)
    return rows


# --------------------------------------------------------------------------------- memory
class RSSSampler:
    """The server's VmRSS sampled every 0.2 s in a thread (VmHWM is read from the kernel)."""

    def __init__(self, pid: int):
        self.pid, self.peak = pid, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.is_set():
            try:
                self.peak = max(self.peak, proc_memory(self.pid)["VmRSS"])
            except OSError:
                return
            time.sleep(0.2)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


class OthersThanUs(OthersCPU):
    """The share of the CPU that processes other than this bench and its server used (other
    agents' tests on a shared machine): the load average would count our own threads."""

    def __init__(self, server_pid: int):
        self.server_pid = server_pid

    def _sample(self):
        sample = OthersCPU._sample()
        try:
            with open(f"/proc/{self.server_pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            return None
        if sample is None:
            return None
        total, busy, mine = sample
        return total, busy, mine + int(fields[11]) + int(fields[12])   # + server utime, stime


def others_row(what: str, meter) -> list[str]:
    share = "n/a" if meter.share is None else f"{meter.share:.0%}"
    return [f"other processes' CPU share during {what}", share, "(info: ~0 % for clean figures)",
            ""]


# --------------------------------------------------------------------------------- report
def pct(values, q: float) -> float:
    """The q-th percentile (nearest rank, as for latencies)."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


def call_rows(solo_records, burst_records) -> list[list[str]]:
    """Median seconds per call, solo and in the burst."""
    rows = []
    for name in (*CALLS, "generate first update", "walk"):
        s = [r[name] for r in solo_records if name in r]
        b = [r[name] for r in burst_records if name in r]
        rows.append([name, f"{statistics.median(s):.2f} s" if s else "-",
                     f"{statistics.median(b):.2f} s" if b else "-",
                     f"{max(b):.2f} s" if b else "-",
                     f"{statistics.median(b) / statistics.median(s):.1f}x" if s and b else "-"])
    return rows


def walk_report(solo_records, records, args, connect_s) -> list[list[str]]:
    ok = [r for r in records if "error" not in r]
    errors = [r["error"] for r in records if "error" in r]
    solo_s = statistics.median(r["walk"] for r in solo_records)
    print(f"\nPer call (median seconds; {len(solo_records)} solo walks, {len(ok)} walks in the "
          f"burst; clients connected in {connect_s:.1f} s before it):")
    print_table(call_rows(solo_records, ok), ["call", "solo", "burst p50", "burst max",
                                              "burst/solo"])
    texts = {r["text"] for r in [*solo_records, *ok]}
    print(f"generated texts: {len(texts)} distinct (greedy: 1 expected)")
    for e in errors[:3]:
        print(f"  error: {e}")
    rows = [["solo walk (median)", f"{solo_s:.2f} s", "", ""]]
    if ok:
        times = [r["walk"] for r in ok]
        p95 = pct(times, 95)
        rows += [[f"burst ({args.students} in {args.spread:g} s): p50 / p95 / max",
                  f"{statistics.median(times):.2f} / {p95:.2f} / {max(times):.2f} s", "", ""],
                 ["burst p95 / solo", f"{p95 / solo_s:.1f}x", f"<= {RATIO_TARGET:g}x",
                  verdict(p95 <= RATIO_TARGET * solo_s)]]
    rows.append(["burst errors", f"{len(errors)} of {len(records)}", "0",
                 verdict(not errors)])
    return rows


def train_report(results, args) -> list[list[str]]:
    refused = [r for r in results if r["error"] and REFUSED.search(r["error"])]
    other = [r for r in results if r["error"] and r not in refused]
    live = [r for r in results if r["live"]]
    print(f"\nTrainers ({args.trainers} within {args.within:g} s, watched "
          f"{'to the end' if args.full_training else f'{args.watch_seconds:g} s'}):")
    rows = []
    for i, r in enumerate(results):
        first = f"{r['first']:.1f} s" if r["first"] is not None else "-"
        outcome = "refused" if r in refused else "error" if r in other else (
            "live" if r["live"] else "no live curve")
        rows.append([str(i + 1), outcome, str(len(r["updates"])), first,
                     str(r["last step"] if r["last step"] is not None else "-"),
                     f"{r['last']:.1f} s" if r["last"] is not None else "-",
                     (r["error"] or "")[:90]])
    print_table(rows, ["#", "outcome", "updates", "first update", "last step", "last update",
                       "message"])
    firsts = [r["first"] for r in live]
    stepped = [r["first step"] for r in live if r["first step"] is not None]
    out = [["trainers refused", f"{len(refused)} of {len(results)}", "0", verdict(not refused)],
           ["trainers with live curves", f"{len(live)} of {len(results)}", f"{len(results)}",
            verdict(len(live) == len(results))]]
    if firsts:
        out.append(["time to first update (live ones): median / max",
                    f"{statistics.median(firsts):.1f} / {max(firsts):.1f} s", "(info)", ""])
    if stepped:
        out.append(["time to step 1 shown (live ones): median / max",
                    f"{statistics.median(stepped):.1f} / {max(stepped):.1f} s", "(info)", ""])
    lasts = [r["last"] for r in live]
    if args.full_training and lasts:
        out.append(["call to last update, full training (live ones): median / max",
                    f"{statistics.median(lasts):.1f} / {max(lasts):.1f} s", "(info)", ""])
    if other:
        out.append(["trainers with other errors", str(len(other)), "0", "FAIL"])
    return out


def memory_rows(hwm: int, sampled: int, idle: int, walk_hwm: int | None,
                budget_mb: int) -> list[list[str]]:
    limit = (budget_mb + MARGIN_MB) * 1e6
    rows = [["server idle RSS", mb(idle), "", ""]]
    if walk_hwm is not None:
        rows.append(["server VmHWM after the walk burst", mb(walk_hwm), "(info)", ""])
    return rows + [["server peak RSS: VmHWM (sampled VmRSS)", f"{mb(hwm)} ({mb(sampled)})",
                    f"<= {budget_mb:,} + {MARGIN_MB:,} MB", verdict(hwm <= limit)]]


# ----------------------------------------------------------------------------------- main
def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--students", type=int, default=30)
    p.add_argument("--spread", type=float, default=5.0, help="seconds the students arrive in")
    p.add_argument("--repeats", type=int, default=5, help="solo walks (after one warm-up)")
    p.add_argument("--trainers", type=int, default=8)
    p.add_argument("--within", type=float, default=2.0, help="seconds the trainers start in")
    p.add_argument("--watch-seconds", type=float, default=20.0)
    p.add_argument("--full-training", action="store_true",
                   help="watch every training stream to its end")
    p.add_argument("--memory-mb", type=int, default=6000, help=f"{BUDGET_ENV} of the app")
    p.add_argument("--skip-walk", action="store_true")
    p.add_argument("--skip-train", action="store_true")
    p.add_argument("--max-load", type=float, help="wait (up to 60 s) for a lower load first")
    p.add_argument("--zerogpu", action="store_true",
                   help="the app under the real ZeroGPU client and a fake scheduler; report the GPU seconds charged")
    p.add_argument("--spent", action="store_true",
                   help="with --zerogpu: the class's quota is used up from the start")
    p.add_argument("--large", action="store_true",
                   help="with --zerogpu: then a gpt2-large trace with quota left, and spent")
    p.add_argument("--quick", action="store_true",
                   help="10 students, 3 solo walks, 3 trainers watched 8 s: checks the script")
    args = p.parse_args()
    if args.quick:
        args.students, args.repeats, args.trainers, args.watch_seconds = 10, 3, 3, 8.0
    return args


def main():
    args = parse_args()
    load = wait_for_quiet(args.max_load) if args.max_load else load_average()
    print(f"load average (1 min) at start: {load:.2f}; {os.cpu_count()} CPUs")
    os.environ[BUDGET_ENV] = str(args.memory_mb)   # start_app passes our environment on
    rows, walk_hwm = [], None
    ledger = tempfile.NamedTemporaryFile(suffix=".json", delete=False).name
    if args.zerogpu:
        os.environ.update(ZEROGPU_LEDGER=ledger,
                          ZEROGPU_SPENT=f"{CLASS_IP}=120" if args.spent else "")
    records = []
    with running_app("bench_classroom_", STAND_IN if args.zerogpu else ()) as (proc, url):
        time.sleep(1.0)   # let startup allocations settle
        idle = proc_memory(proc.pid)["VmRSS"]
        print(f"app up at {url} ({BUDGET_ENV}={args.memory_mb}); idle RSS {mb(idle)}")
        with RSSSampler(proc.pid) as sampler:
            if not args.skip_walk:
                with OthersThanUs(proc.pid) as others_solo:
                    solo_records = solo(url, args.repeats)
                print(f"burst: {args.students} students within {args.spread:g} s ...")
                with OthersThanUs(proc.pid) as others:
                    records, connect_s = burst(url, args.students, args.spread)
                rows += walk_report(solo_records, records, args, connect_s)
                rows += [others_row("the solo walks", others_solo),
                         others_row("the walk burst", others)]
                walk_hwm = proc_memory(proc.pid)["VmHWM"]
            if not args.skip_train:
                print(f"training burst: {args.trainers} trainers within {args.within:g} s ...")
                with OthersThanUs(proc.pid) as others:
                    results = train_burst(url, args.trainers, args.within,
                                          None if args.full_training else args.watch_seconds)
                rows += train_report(results, args)
                rows.append(others_row("the training burst", others))
        rows += memory_rows(proc_memory(proc.pid)["VmHWM"], sampler.peak, idle, walk_hwm,
                            args.memory_mb)
    if args.zerogpu:
        rows += zerogpu_rows(records, ledger_of(ledger), args.spent)
    else:
        ok = [r for r in records if "error" not in r]
        rows.append(["traces from the shared cache",
                     f"{sum('shared cache' in r.get('trace note', '') for r in ok)} of "
                     f"{len(ok)}", "(info)", ""])
    os.unlink(ledger)
    if args.zerogpu and args.large:
        print("gpt2-large on the real client: quota left, then spent ...")
        rows += large_trace(False, args.memory_mb) + large_trace(True, args.memory_mb)
    print()
    print_table(rows, ["figure", "measured", "target", ""])
    print(f"load average (1 min) at the end: {load_average():.2f}")


if __name__ == "__main__":
    main()
