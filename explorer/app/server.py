"""Launching the app: safe defaults (loopback only, no share link, uploads no larger than a
checkpoint the memory budget can hold: ``runtime.guard``, ``runtime.server_paths``)."""
from __future__ import annotations

import argparse
import logging
import os
import sys
import threading

import gradio as gr

from .. import native
from ..runtime.heap import release_freed_memory_promptly
from ..runtime.guard import edge_options, max_upload_bytes
from ..runtime.server_paths import default_host
from .i18n import browser_i18n
from .layout import CSS, JS, build_app
from .shared import CACHE

QUEUE_MAX_SIZE = 64  # waiting requests beyond this are told the server is busy
# Events processed at once (the queue's slots, and the threads a sync step may take; Gradio's
# default is 40). A watched training job holds a slot for its whole stream, but no thread
# between updates (handlers.Pause): with 40, a class of 40 watching left no slot for a click.
# The work that loads the CPU has limits of its own (each event's concurrency_limit).
EVENTS_AT_ONCE = 256


def launch_options(host=None, port=None, share=False) -> dict:
    """``demo.launch``'s options, every launch's (``python app.py``, a Space, the tests): call
    it once the page is made (its labels' translations)."""
    host = host or default_host()
    return dict(
        **edge_options(host, share),      # host check, 4xx for malformed calls, no monitoring
        server_name=host,
        server_port=port or int(os.environ.get("GRADIO_SERVER_PORT", "7860")),
        share=share,
        # Gradio's bundled semibold face lacks glyphs (a fallback capital "B"): use 400/700.
        theme=gr.themes.Default(
            text_size=gr.themes.sizes.text_lg,
            font=[gr.themes.LocalFont("Source Sans Pro", weights=(400, 700)),
                  "ui-sans-serif", "system-ui", "sans-serif"]),
        css=CSS,
        js=JS,
        i18n=browser_i18n(),
        # a checkpoint, or the Train tab's .txt (the lab refuses text over 1 MB itself)
        max_file_size=max_upload_bytes(CACHE.budget_bytes),
        ssr_mode=False,
        # Gradio's own input checks (text sent where a number goes) said, never a traceback
        show_error=True,
        max_threads=EVENTS_AT_ONCE,
    )


def create_demo() -> gr.Blocks:
    release_freed_memory_promptly()
    # The C kernels compile once per machine: while the server starts, not in the first trace.
    threading.Thread(target=native.warm_up, name="warm-up", daemon=True).start()
    demo = build_app()
    # api_open=False: /gradio_api/run/<name> would run an event outside the queue, skipping
    # its concurrency limit (two traces at a time); every call goes through the queue instead.
    demo.queue(max_size=QUEUE_MAX_SIZE, default_concurrency_limit=2, api_open=False)
    return demo


class _ToStderr(logging.Handler):
    """Writes to whatever ``sys.stderr`` is when a record comes (not the stream of the moment
    the handler was made, which a test runner may have closed since)."""

    def emit(self, record):
        try:
            sys.stderr.write(self.format(record) + "\n")
        except Exception:  # noqa: BLE001 - logging must never raise
            self.handleError(record)


def show_app_log():
    """The app's own log on stderr: a refusal is one line, an unexpected error its traceback
    (once). Without this, Python shows only warnings and worse."""
    app_log = logging.getLogger("gpt_explorer")
    if not any(isinstance(h, _ToStderr) for h in app_log.handlers):
        handler = _ToStderr()
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: "
                                               "%(message)s"))
        app_log.addHandler(handler)
        app_log.setLevel(logging.INFO)


def main(argv=None):
    parser = argparse.ArgumentParser(description="GPT Explorer")
    parser.add_argument("--host", help="address to bind (default GRADIO_SERVER_NAME, else "
                                       "0.0.0.0 on a Hugging Face Space, else 127.0.0.1)")
    parser.add_argument("--port", type=int, help="port (default 7860, or GRADIO_SERVER_PORT)")
    parser.add_argument("--share", action="store_true", help="ask Gradio for a public link")
    args = parser.parse_args(argv)
    show_app_log()
    demo = create_demo()
    # quiet: Gradio's own start-up lines suggest `share=True`; this app has --share
    _, local_url, share_url = demo.launch(**launch_options(args.host, args.port, args.share),
                                          quiet=True, prevent_thread_lock=True)
    print(f"GPT Explorer is running: open {local_url} in a browser"
          + (f" (public link: {share_url})" if share_url else
             " (start it with --share for a public link)") + ". Ctrl+C stops it.", flush=True)
    try:
        demo.block_thread()
    except KeyboardInterrupt:
        demo.close()
