"""How long "pretrained GPT-2" takes to answer on a machine that cannot reach the hub, and
where the hub's cache already holds the file: ``explorer.runtime.hub.pretrained_source``
against an empty cache and against an address where nothing listens (a refused connection;
a firewall that drops packets waits ``REACH_TIMEOUT_S`` instead), with huggingface_hub's own
client for comparison (it retries with back-off before it looks in its cache).

    python bench/offline_hub.py
"""
from __future__ import annotations

import tempfile
import time

import _common  # noqa: F401 - the repository root on sys.path

from explorer.book.errors import ExplorerError
from explorer.runtime import hub

NOWHERE = "http://127.0.0.1:9"   # nothing listens there


def seconds(fn) -> float:
    started = time.perf_counter()
    try:
        fn()
    except Exception:  # noqa: BLE001 - the refusal is the answer being timed
        pass
    return time.perf_counter() - started


def main():
    from huggingface_hub import hf_hub_download
    with tempfile.TemporaryDirectory() as cache:
        explorer_s = seconds(lambda: hub.pretrained_source("small", cache_dir=cache,
                                                           endpoint=NOWHERE))
        try:
            hub.pretrained_source("small", cache_dir=cache, endpoint=NOWHERE)
        except ExplorerError as exc:
            advice = "hf download" in str(exc)
        client_s = seconds(lambda: hf_hub_download("openai-community/gpt2", "model.safetensors",
                                                   cache_dir=cache, endpoint=NOWHERE))
    rows = [["the explorer's answer (the advice)", f"{explorer_s:.2f} s", str(advice)],
            ["huggingface_hub's hf_hub_download alone", f"{client_s:.2f} s", "-"]]
    _common.print_table(rows, ["offline, empty cache", "answer after", "names `hf download`"])


if __name__ == "__main__":
    main()
