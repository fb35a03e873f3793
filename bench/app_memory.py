"""Peak memory of the running app and the size of its largest UI update, driven like a lecture.
Run: python bench/app_memory.py [--quick | --preset P --tokens T].

Targets (issue "Speed"): the peak memory of the app serving gpt2-small is <= 1.5x the weights'
size; one UI update (the largest figure payload the app sends) is <= 1 MB at T = 1024.

The real app (``python app.py``) runs as a subprocess; a gradio_client session builds the model,
traces a T-token prompt, switches views, shows attention, reads the logit lens, generates up to
T tokens and exports. Memory is the server's /proc/<pid>/status: VmRSS (now) and VmHWM (the
highest RSS of its life). Payload is ``json.dumps`` of every output value as gradio_client
receives it (a plot is {"type": "plotly", "plot": "<figure JSON>"}, as on the wire); files are
skipped. Streamed updates are counted whole, though Gradio sends later ones as diffs: an
upper bound.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

from _common import ROOT, load_average, mb, print_table, verdict  # first: sets up explorer

from gradio_client import Client

from explorer.book.config import PRESETS, count_parameters
from explorer.book.tokenizer import get_tokenizer

PAYLOAD_LIMIT = 1_000_000
MEMORY_RATIO = 1.5
PAIR = "norm1: before vs after LayerNorm"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def proc_memory(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM of ``pid`` in bytes."""
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                out[key] = int(value.split()[0]) * 1024
    return out


def start_app(port: int, temp_dir: str, log, launcher=()):
    """``launcher``: what runs app.py (``python tests/zerogpu_scheduler.py``: under the real
    ZeroGPU client and a fake scheduler); plain ``python`` by default."""
    env = {**os.environ, "GRADIO_ANALYTICS_ENABLED": "False", "GRADIO_TEMP_DIR": temp_dir}
    command = [sys.executable, *launcher, "app.py", "--port", str(port)]
    proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/"
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the app exited with code {proc.returncode}")
        try:
            urllib.request.urlopen(url, timeout=5).close()
            return proc, url
        except OSError:
            time.sleep(0.5)
    raise RuntimeError("the app did not answer within 180 s")


@contextlib.contextmanager
def running_app(prefix: str, launcher=()):
    """``python app.py`` (with this process's environment) on a free port, up and answering:
    yields (process, url). On the way out the server is stopped and its files removed; on an
    error the tail of its log is printed first."""
    temp_dir = tempfile.mkdtemp(prefix=prefix)
    log = open(os.path.join(temp_dir, "server.log"), "w+")
    proc = None
    try:
        proc, url = start_app(free_port(), os.path.join(temp_dir, "gradio"), log, launcher)
        yield proc, url
    except BaseException:
        log.seek(0)
        print("server log (tail):\n" + log.read()[-3000:])
        raise
    finally:
        if proc is not None:
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
        log.close()
        shutil.rmtree(temp_dir, ignore_errors=True)


def prompt_of(n_tokens: int) -> str:
    """A text that the GPT-2 tokenizer reads as exactly ``n_tokens`` tokens."""
    tok = get_tokenizer()
    text = " ".join(f"Step {i}: every effort moves you a little further along the road, and "
                    f"the model reads each word in its context." for i in range(n_tokens // 10 + 5))
    ids = tok.encode(text)
    for n in range(n_tokens, n_tokens - 20, -1):  # a cut can merge on re-encoding: try a few
        cut = tok.decode(ids[:n])
        extra = n_tokens - len(tok.encode(cut))
        if extra == 0:
            return cut
        if extra > 0:  # pad with single-token words
            padded = cut + " a" * extra
            if len(tok.encode(padded)) == n_tokens:
                return padded
    raise RuntimeError(f"could not make a prompt of exactly {n_tokens} tokens")


def sizes(values) -> list[int]:
    """Bytes of each output value as sent (JSON); 0 for files and for nothing."""
    out = []
    for v in values if isinstance(values, (tuple, list)) else [values]:
        if v is None or (isinstance(v, dict) and "path" in v):  # a file (download_files=False)
            out.append(0)
        else:
            out.append(len(json.dumps(v, ensure_ascii=False).encode()))
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="gpt2-small")
    parser.add_argument("--tokens", type=int, default=1024, help="prompt length T (at most "
                                                                  "the preset's context_length)")
    parser.add_argument("--new", type=int, default=20, help="tokens to generate")
    parser.add_argument("--quick", action="store_true",
                        help="teach-tiny (T=64): checks the script, not the targets")
    args = parser.parse_args()
    if args.quick:
        args.preset = "teach-tiny"
    cfg = PRESETS[args.preset]
    n_tokens = min(args.tokens, cfg.context_length)
    weights = count_parameters(cfg).total * 4  # float32
    print(f"load average before: {load_average():.2f}")

    steps = []  # (what, seconds, RSS after, VmHWM after, component sizes of each update)
    started = time.perf_counter()
    with running_app("bench_app_memory_") as (proc, url):
        client = Client(url, verbose=False, download_files=False, analytics_enabled=False)
        time.sleep(1.0)  # let startup allocations settle
        idle = proc_memory(proc.pid)["VmRSS"]
        print(f"app up in {time.perf_counter() - started:.1f} s; idle RSS {mb(idle)}")

        def step(what, call):
            t0 = time.perf_counter()
            updates = call()
            seconds = time.perf_counter() - t0
            m = proc_memory(proc.pid)
            steps.append((what, seconds, m["VmRSS"], m["VmHWM"], [sizes(u) for u in updates]))
            print(f"  {what}: {seconds:.1f} s, {len(updates)} update(s), RSS {mb(m['VmRSS'])}, peak {mb(m['VmHWM'])}")
            return updates[-1]

        def predict(*a, api_name):
            return lambda: [client.predict(*a, api_name=api_name)]

        d = cfg.to_dict()
        step("build", predict(args.preset, *(d[k] for k in (
            "vocab_size", "context_length", "emb_dim", "n_heads", "n_layers", "drop_rate",
            "qkv_bias", "norm_placement", "shortcut", "activation", "ff_expansion",
            "tie_weights", "pos_encoding")), 123, "cpu", "float32", api_name="/build"))

        # The app refuses a trace too large for its memory budget, naming the largest length.
        prompt = prompt_of(n_tokens)
        try:
            out = step(f"trace T={n_tokens}", predict(prompt, 0, PAIR, "resid_pre", "std",
                                                      api_name="/trace"))
        except Exception as exc:  # noqa: BLE001 - the app's message, reported below
            most = re.search(r"at most ([\d,]+) tokens", str(exc))
            if not most:
                raise
            print(f"the app refused T={n_tokens}: {exc}")
            n_tokens = int(most.group(1).replace(",", ""))
            prompt = prompt_of(n_tokens)
            out = step(f"trace T={n_tokens}", predict(prompt, 0, PAIR, "resid_pre", "std",
                                                      api_name="/trace"))
        print(f"  the app reports: {out[1]}")
        last = cfg.n_layers - 1
        step("activation_curves", predict(-4, 4, ["gelu", "relu"], False, last,
                                          api_name="/activation_curves"))
        step("inside_views", predict(last, "feed-forward hidden: before vs after activation",
                                     "ff_post", "std", api_name="/inside_views"))
        step("attention (mean)", predict(last, "mean", api_name="/attention"))
        step("attention (head 0)", predict(last, "0", api_name="/attention"))
        step("export_attention", predict(last, "0", api_name="/export_attention"))
        step("export_stats JSON", predict("JSON", api_name="/export_stats"))
        step("logit_lens", predict(prompt, api_name="/logit_lens"))
        # Generation ends at T tokens in all: the KV cache grows to the full context.
        gen_prompt = prompt_of(max(n_tokens - args.new, 1))

        def generate():
            job = client.submit(gen_prompt, args.new, "greedy", 1.0, 50, 123, False,
                                api_name="/generate")
            job.result()
            return job.outputs()  # every streamed update
        step(f"generate {args.new} (streamed)", generate)
        total_s = time.perf_counter() - started
        final = proc_memory(proc.pid)

    # Where the memory went, and each endpoint's largest update and component.
    rows = [[what, f"{s:.1f} s", mb(rss), mb(hwm),
             f"{max(max(u, default=0) for u in ups) / 1e3:,.1f} KB",
             f"{max(sum(u) for u in ups) / 1e3:,.1f} KB"]
            for what, s, rss, hwm, ups in steps]
    print(f"\n{args.preset}, T={n_tokens}: {total_s:.0f} s in all")
    print_table(rows, ["step", "time", "RSS after", "peak so far", "largest component",
                       "largest update"])

    peak = final["VmHWM"]
    component, comp_at, comp_i = max((size, what, i) for what, *_, ups in steps for u in ups
                                     for i, size in enumerate(u))
    update, upd_at = max((sum(u), what) for what, *_, ups in steps for u in ups)
    rows = [
        ["weights (float32)", mb(weights), "", ""],
        ["idle app RSS (Python, torch, Gradio)", f"{mb(idle)} = {idle / weights:.2f}x weights",
         "", ""],
        ["peak RSS (VmHWM) / weights", f"{mb(peak)} = {peak / weights:.2f}x",
         f"<= {MEMORY_RATIO}x", verdict(peak <= MEMORY_RATIO * weights)],
        ["(peak - idle app) / weights: what serving the model adds",
         f"{mb(peak - idle)} = {(peak - idle) / weights:.2f}x", f"<= {MEMORY_RATIO}x",
         verdict(peak - idle <= MEMORY_RATIO * weights)],
        [f"largest UI update (T={n_tokens})", f"{update / 1e3:,.1f} KB ({upd_at})", "<= 1 MB",
         verdict(update <= PAYLOAD_LIMIT)],
        ["largest single component", f"{component / 1e3:,.1f} KB ({comp_at}, output {comp_i + 1})", "(info)", ""],
    ]
    print()
    print_table(rows, ["figure", "measured", "target", ""])
    if idle + weights > MEMORY_RATIO * weights:  # the total target is out of reach
        print(f"The idle app ({mb(idle)}: Python, torch, Gradio) plus the weights is already "
              f"{(idle + weights) / weights:.2f}x the weights before any forward pass.")
    print("Two readings of the memory target: the total peak RSS (strict, out of reach when the "
          "idle app alone is large) and what serving the model adds to the idle app. "
          "Payload: JSON of each output value as gradio_client receives it.")
    print(f"load average after: {load_average():.2f}")


if __name__ == "__main__":
    main()
