"""Many students at once: 16 gradio_client sessions build, trace, look at attention and
generate on the teaching presets, against the app launched in this process. No errors, every
answer is the engine's own, memory stays within the model cache's budget plus a stated margin,
and one student's long generation does not hold up the others.

GPT_EXPLORER_LOAD_ROUNDS (default 1) sets how many rounds each session runs (more rounds
also let the long generation run to its end);
GPT_EXPLORER_LOAD_REPORT, if set, writes the figures as JSON (a file name, put under bench/out/
unless it is a path, or "1" for bench/out/load_report.json). ``pytest -s`` prints them.

Also here: the model cache's own guarantees (budget, least-recently-used eviction, the guard
that refuses before allocating) and the release of a session's state when its client leaves.
"""
import base64
import contextlib
import gc
import json
import os
import re
import statistics
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
import torch
from local_client import local_client

import explorer.runtime.cache as cache_module
from explorer.app import shared
from explorer.app.tabs.build import FIELDS as KNOBS
from explorer.runtime.cache import ModelCache
from explorer.runtime.memory import model_bytes
from explorer.book.config import PRESETS
from explorer.book.generate import generate_steps, generate_text_simple
from explorer.runtime.build import build_model
from explorer.probes import trace, trace_peak_bytes
from explorer.app.server import create_demo, launch_options
from explorer.book.tokenizer import get_tokenizer

MB = 1024 ** 2
SESSIONS = 16
ROUNDS = int(os.environ.get("GPT_EXPLORER_LOAD_ROUNDS", "1"))
PRESET_NAMES = ("teach-tiny", "teach-small")
SEEDS = (123, 7, 42)
PROMPTS = ("Every effort moves you", "Hello, I am", "The quick brown fox jumps over the lazy dog")
NEW_TOKENS = 8
LONG_GENERATION = 300
LONG_PLAN = ("teach-small", 7, PROMPTS[1])  # a model and prompt that a session also uses
# The cache budget during the load: less than the six models the sessions use (231 MB),
# so that the cache evicts (least recently used first) while sessions work.
LOAD_BUDGET = 160 * MB
# What the server may hold beyond the cached models: models still in use by a request after
# their eviction, the traces kept in 16 sessions' state, activations of the requests in flight
# (build 1, inspect 2, generate 4 at a time), Gradio's buffers and thread stacks.
RSS_MARGIN = 600 * MB
TRACE_WHILE_GENERATING_S = 4.0
CALL_TIMEOUT_S = 120
TRACE_VIEW = ("norm1: before vs after LayerNorm", "resid_pre", "std")
ROOT = Path(__file__).resolve().parent.parent


def rss_bytes(field="VmRSS") -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"{field} not in /proc/self/status")


def build_args(preset, seed):
    cfg = PRESETS[preset].to_dict()
    return (preset, *[cfg[k] for k in KNOBS], seed, "cpu", "float32")


def plan(session, round_):
    """The preset, seed and prompt of one session in one round: 6 models, shared by several
    sessions at any moment, and a different one for a session from round to round."""
    preset = PRESET_NAMES[session % 2]
    seed = SEEDS[(session // 2 + round_) % len(SEEDS)]
    return preset, seed, PROMPTS[(session + session // 6 + round_) % len(PROMPTS)]


def decode_z(figure_value):
    trace0 = json.loads(figure_value["plot"])["data"][0]
    z = trace0["z"]
    if isinstance(z, dict):  # plotly's base64 form
        shape = [int(n) for n in str(z["shape"]).split(",")]
        return np.frombuffer(base64.b64decode(z["bdata"]), dtype=z["dtype"]).reshape(shape)
    return np.array(z, dtype=float)


@contextlib.contextmanager
def one_torch_thread():
    """The references are computed with one intra-op thread (these small models give bitwise
    the same numbers with any count): on a 2-core machine shared with other work, torch's
    OpenMP threads spin-wait and make two threads many times slower than one."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


class References:
    """What the engine itself answers, computed outside the app before the load starts: the
    book's generate_text_simple and the probes' attention, for every (preset, seed, prompt) a
    session will use."""

    def __init__(self):
        with one_torch_thread():
            self._compute()

    def _compute(self):
        tok = get_tokenizer()
        self.total, self.generated, self.attention = {}, {}, {}
        used = {plan(i, r) for i in range(SESSIONS) for r in range(ROUNDS)}
        models = {}
        for preset, seed, prompt in sorted(used):
            cfg = PRESETS[preset]
            if (preset, seed) not in models:
                models[preset, seed] = build_model(cfg, seed=seed, device="cpu")
                self.total[preset, seed] = sum(
                    p.numel() for p in models[preset, seed].parameters())
            model, ids = models[preset, seed], tok.encode(prompt)
            out = generate_text_simple(model, torch.tensor([ids]), NEW_TOKENS,
                                       cfg.context_length)
            self.generated[preset, seed, prompt] = tok.decode(out[0].tolist())
            last = cfg.n_layers - 1
            self.attention[preset, seed, prompt] = trace(
                model, ids, attention_layers=[last], lens=None).attention[last].mean(0)
        self.long_model = models[LONG_PLAN[:2]]

    def long_text(self, n_tokens):
        """The long generation's first ``n_tokens``: the engine's KV-cached greedy steps (equal
        to the book's loop: test_generate), which cost far less than as many uncached passes;
        their start is the book's loop above."""
        prompt = LONG_PLAN[2]
        steps = generate_steps(self.long_model, get_tokenizer().encode(prompt), n_tokens)
        return prompt + get_tokenizer().decode([s.token_id for s in steps])


class CallFailed(Exception):
    """A call that the Recorder has already counted as an error."""


class Recorder:
    def __init__(self):
        self.lock = threading.Lock()
        self.latency: dict[str, list[float]] = {}
        self.errors: list[str] = []

    def call(self, client, api, *args):
        started = time.perf_counter()
        try:
            result = client.submit(*args, api_name=api).result(timeout=CALL_TIMEOUT_S)
        except Exception as exc:
            with self.lock:
                self.errors.append(f"{api}: {type(exc).__name__}: {exc}")
            raise CallFailed(api) from exc
        with self.lock:
            self.latency.setdefault(api, []).append(time.perf_counter() - started)
        return result

    def wrong(self, what):
        with self.lock:
            self.errors.append(f"wrong result: {what}")


class MemorySampler(threading.Thread):
    """The peak of this process's resident memory and of the cache's accounting."""

    def __init__(self, cache=None, interval=0.02):
        super().__init__(daemon=True)
        self.cache, self.interval = cache, interval
        self.peak_rss = rss_bytes()
        self.peak_cache = cache.used_bytes() if cache is not None else 0
        self.stop_event = threading.Event()

    def run(self):
        while not self.stop_event.is_set():
            self.peak_rss = max(self.peak_rss, rss_bytes())
            if self.cache is not None:
                self.peak_cache = max(self.peak_cache, self.cache.used_bytes())
            self.stop_event.wait(self.interval)

    def stop(self):
        self.stop_event.set()
        self.join()
        self.peak_rss = max(self.peak_rss, rss_bytes())


def percentile(values, q):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def session_work(client, index, refs, rec):
    try:
        _session_rounds(client, index, refs, rec)
    except CallFailed:
        pass  # counted where it happened; the session stops there
    except Exception as exc:  # noqa: BLE001 - a check that could not even run
        rec.wrong(f"session {index}: {type(exc).__name__}: {exc}")


def _session_rounds(client, index, refs, rec):
    tok = get_tokenizer()
    for round_ in range(ROUNDS):
        preset, seed, prompt = plan(index, round_)
        status = rec.call(client, "/build", *build_args(preset, seed))[0]
        if f"{refs.total[preset, seed]:,} parameters" not in status or f"seed {seed}" not in status:
            rec.wrong(f"session {index} build {preset}/{seed}: {status}")
        ids = tok.encode(prompt)
        chips, info = rec.call(client, "/trace", prompt, 0, *TRACE_VIEW)[:2]
        if not info.startswith(f"{len(ids)} tokens") or not all(
                f"<small>{i}</small>" in chips for i in ids):
            rec.wrong(f"session {index} trace {preset}/{seed} {prompt!r}: {info}")
        last = PRESETS[preset].n_layers - 1
        heatmap = rec.call(client, "/attention", last, "mean")[0]
        z, expected = decode_z(heatmap), refs.attention[preset, seed, prompt]
        lower = np.tril(np.ones_like(expected, dtype=bool))
        if z.shape != expected.shape or not np.allclose(z[lower], expected[lower], atol=1e-5):
            rec.wrong(f"session {index} attention {preset}/{seed} {prompt!r}")
        text = rec.call(client, "/generate", prompt, NEW_TOKENS, "greedy", 1.0, 50, 123,
                        False)[0]
        if text != refs.generated[preset, seed, prompt]:
            rec.wrong(f"session {index} generate {preset}/{seed} {prompt!r}: {text!r}")


def report_path():
    value = os.environ.get("GPT_EXPLORER_LOAD_REPORT", "").strip()
    if not value:
        return None
    if value.lower() in ("1", "true", "yes"):
        value = "load_report.json"
    path = Path(value)
    if not path.is_absolute() and path.parent == Path("."):
        path = ROOT / "bench" / "out" / path
    return path if path.is_absolute() else ROOT / path


@pytest.fixture(scope="module")
def app():
    demo = create_demo()
    options = {**launch_options(host="127.0.0.1"), "server_port": None}
    demo.launch(prevent_thread_lock=True, quiet=True, **options)
    yield demo
    demo.close()


@pytest.fixture
def load_cache(monkeypatch):
    """The app's shared cache, emptied and given the load test's budget (restored after)."""
    shared.CACHE.clear()
    monkeypatch.setattr(shared.CACHE, "budget_bytes", LOAD_BUDGET)
    yield shared.CACHE
    shared.CACHE.clear()


def test_sixteen_sessions_get_correct_answers_within_the_memory_budget(app, load_cache):
    app_url = app.local_url
    refs = References()
    rec = Recorder()
    with ThreadPoolExecutor(SESSIONS) as pool:
        clients = list(pool.map(lambda _: local_client(app_url), range(SESSIONS)))
    try:
        gc.collect()
        baseline = rss_bytes()
        sampler = MemorySampler(load_cache)
        sampler.start()
        started = time.perf_counter()
        with ThreadPoolExecutor(SESSIONS) as pool:
            futures = [pool.submit(session_work, c, i, refs, rec) for i, c in enumerate(clients)]
            for f in futures:
                f.result(timeout=ROUNDS * 4 * CALL_TIMEOUT_S)
        load_seconds = time.perf_counter() - started

        # One student generates a long text; another's trace must not wait for it.
        preset, seed, prompt = LONG_PLAN
        rec.call(clients[0], "/build", *build_args(preset, seed))
        long_job = clients[0].submit(prompt, LONG_GENERATION, "greedy", 1.0, 50, 123, False,
                                     api_name="/generate")
        while len(long_job.outputs()) < 3 and not long_job.done():  # it is streaming
            time.sleep(0.01)
        trace_started = time.perf_counter()
        info = rec.call(clients[2], "/trace", PROMPTS[2], 0, *TRACE_VIEW)[1]
        trace_while_generating = time.perf_counter() - trace_started
        still_streaming = not long_job.done()
        if ROUNDS == 1:  # the short run stops it here, as the page's Stop button does
            long_job.cancel()
        deadline = time.monotonic() + CALL_TIMEOUT_S
        while not long_job.done() and time.monotonic() < deadline:
            time.sleep(0.05)
        long_text, _, _, speed = long_job.outputs()[-1][:4]
        # "37 tokens · 25.1 tokens/s" (a stream's update: its last steps' lines, the newest last)
        streamed_tokens = int(re.findall(r"(\d+) tokens ·", speed)[-1])
        with one_torch_thread():
            expected_long = refs.long_text(streamed_tokens)
        # the session goes on after a long (or stopped) generation
        after = rec.call(clients[0], "/generate", prompt, NEW_TOKENS, "greedy", 1.0, 50, 123,
                         False)[0]
        sampler.stop()
    finally:
        with ThreadPoolExecutor(SESSIONS) as pool:
            list(pool.map(lambda c: c.close(), clients))

    latency = {api: {"n": len(v), "p50_ms": round(1000 * statistics.median(v), 1),
                     "p95_ms": round(1000 * percentile(v, 0.95), 1)}
               for api, v in sorted(rec.latency.items())}
    figures = {
        "sessions": SESSIONS, "rounds": ROUNDS, "seconds": round(load_seconds, 1),
        "requests": sum(len(v) for v in rec.latency.values()) + len(rec.errors),
        "errors": len(rec.errors), "latency": latency,
        "trace_while_generating_ms": round(1000 * trace_while_generating, 1),
        "long_generation_tokens_streamed": streamed_tokens,
        "cache_budget_mb": LOAD_BUDGET / MB, "cache_peak_mb": round(sampler.peak_cache / MB, 1),
        "rss_baseline_mb": round(baseline / MB, 1), "rss_peak_mb": round(sampler.peak_rss / MB, 1),
        "rss_growth_mb": round((sampler.peak_rss - baseline) / MB, 1),
        "rss_margin_mb": RSS_MARGIN / MB, "vm_hwm_mb": round(rss_bytes("VmHWM") / MB, 1),
        "cpu_count": os.cpu_count(), "load_average": round(os.getloadavg()[0], 2),
    }
    print("\nload test:", json.dumps(figures, indent=1))
    path = report_path()
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(figures, indent=1) + "\n", encoding="utf-8")

    assert rec.errors == []
    assert all(latency[api]["n"] >= SESSIONS * ROUNDS
               for api in ("/trace", "/attention", "/generate"))
    assert long_job.done()
    assert long_text == expected_long and streamed_tokens >= 3
    short = refs.generated[LONG_PLAN]  # the book's loop agrees where both have tokens
    assert long_text.startswith(short) or short.startswith(long_text)
    if ROUNDS > 1:  # the long run lets it finish
        assert streamed_tokens == LONG_GENERATION
    assert after == refs.generated[LONG_PLAN]
    assert info.startswith(f"{len(get_tokenizer().encode(PROMPTS[2]))} tokens")
    assert still_streaming, "the long generation ended before the trace: no overlap was tested"
    assert trace_while_generating < TRACE_WHILE_GENERATING_S
    assert sampler.peak_cache <= LOAD_BUDGET
    assert sampler.peak_rss - baseline <= LOAD_BUDGET + RSS_MARGIN


# ---------------------------------------------------------------------------------------------
# The model cache
TINY = PRESETS["teach-tiny"]


def test_cache_never_exceeds_its_budget_and_evicts_the_least_recently_used():
    size = model_bytes(TINY)
    cache = ModelCache(budget_bytes=int(2.5 * size))  # room for two teach-tiny models
    keys = [cache.key(TINY, seed=s, device="cpu") for s in (1, 2, 3, 4)]
    cache.get(keys[0])
    cache.get(keys[1])
    assert cache.used_bytes() == 2 * size
    cache.get(keys[0])                          # 0 is now the most recently used
    cache.get(keys[2])                          # evicts 1, the least recently used
    assert keys[0] in cache and keys[2] in cache and keys[1] not in cache
    assert cache.used_bytes() <= cache.budget_bytes
    cache.get(keys[3])                          # evicts 0
    assert [k in cache for k in keys] == [False, False, True, True]
    assert cache.used_bytes() <= cache.budget_bytes
    model, cached = cache.get(keys[1])          # an evicted model is rebuilt, identically
    assert not cached
    reference = build_model(TINY, seed=2, device="cpu")
    assert torch.equal(model.tok_emb.weight, reference.tok_emb.weight)
    assert len(cache) == 2 and cache.used_bytes() <= cache.budget_bytes


def test_cache_budget_holds_with_concurrent_builds():
    size = model_bytes(TINY)
    cache = ModelCache(budget_bytes=int(3.5 * size))
    keys = [cache.key(TINY, seed=s, device="cpu") for s in range(8)]
    peak = []

    def work(i):
        model, _ = cache.get(keys[i % len(keys)])
        peak.append(cache.used_bytes())
        return model.tok_emb.weight[0, 0].item()

    with ThreadPoolExecutor(8) as pool:
        firsts = list(pool.map(work, range(24)))
    assert max(peak) <= cache.budget_bytes and len(cache) <= 3
    assert firsts[:8] == firsts[8:16] == firsts[16:]  # same key, same weights, however built


def test_memory_guard_refuses_before_allocating(monkeypatch):
    def no_build(*args, **kwargs):
        raise AssertionError("build_model must not run for a refused config")

    monkeypatch.setattr(cache_module, "build_model", no_build)
    cache = ModelCache(budget_bytes=100 * MB)
    started = time.perf_counter()
    for changes in ({"n_layers": 10 ** 6}, {"emb_dim": 10 ** 6}, {"vocab_size": 10 ** 12},
                    {"context_length": 10 ** 9, "pos_encoding": "rope"}):
        with pytest.raises(ValueError, match=r"needs ([\d,]+) MB .* budget is 100 MB") as err:
            cache.key({**TINY.to_dict(), **changes})
        assert "GPT_EXPLORER_MEMORY_MB" in str(err.value)
    with pytest.raises(ValueError, match=r"needs 622 MB .* budget is 100 MB"):
        cache.key(PRESETS["gpt2-small"], device="cpu")  # the book's 621.83 MB, rounded up
    assert time.perf_counter() - started < 1.0
    assert len(cache) == 0


def test_a_model_at_the_budget_fits_and_one_byte_more_does_not():
    size = model_bytes(TINY)
    ModelCache(budget_bytes=size).key(TINY, device="cpu")
    with pytest.raises(ValueError, match="memory budget"):
        ModelCache(budget_bytes=size - 1).key(TINY, device="cpu")


def test_the_trace_size_guard_covers_a_traces_real_peak():
    """The app refuses a trace whose estimated memory (trace_peak_bytes) is over its share of
    the budget; the estimate must not be below what a trace really takes."""
    cfg = {"vocab_size": 1000, "context_length": 2048, "emb_dim": 64, "n_heads": 8,
           "n_layers": 2, "drop_rate": 0.0}
    model = build_model(cfg, device="cpu")
    ids = [i % 1000 for i in range(2048)]
    with one_torch_thread():
        trace(model, ids[:16])
        gc.collect()
        sampler = MemorySampler(interval=0.002)
        baseline = sampler.peak_rss
        sampler.start()
        trace(model, ids)
        sampler.stop()
    estimate = trace_peak_bytes(model.cfg, len(ids))
    assert estimate > 300 * MB  # the attention weights dominate
    assert sampler.peak_rss - baseline <= 1.2 * estimate


# ---------------------------------------------------------------------------------------------
# A session's state goes when its client goes
def test_session_state_is_released_when_the_client_disconnects(app, monkeypatch):
    # Gradio notices a closed client at its next heartbeat (every 15 s by default).
    monkeypatch.setenv("GRADIO_HEARTBEAT_INTERVAL", "0.2")
    client = local_client(app.local_url)
    session = client.session_hash
    client.predict(*build_args("teach-tiny", 123), api_name="/build")
    client.predict(PROMPTS[0], 0, *TRACE_VIEW, api_name="/trace")
    stored = app.state_holder.session_data[session].state_data  # Gradio's per-session store
    assert any(getattr(v, "traces", None) for v in stored.values())   # the app's Session
    client.close()
    deadline = time.monotonic() + 10
    while stored and time.monotonic() < deadline:
        time.sleep(0.05)
    assert stored == {}, "the session's model key and trace outlived its client"
