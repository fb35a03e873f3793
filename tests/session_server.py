"""A GPT Explorer server in its own process, for tests that measure it (tests/test_sessions.py).

Prints its URL, then answers each line on stdin: ``sessions`` prints one JSON line with the
number of sessions Gradio holds; ``measure`` that and its resident memory (after a garbage
collection and heap.trim); ``quit`` closes the server.
"""
import gc
import json
import os
import sys

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402

from explorer.app.server import create_demo, launch_options  # noqa: E402
from explorer.runtime import heap  # noqa: E402


def resident_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def main():
    torch.set_num_threads(1)
    demo = create_demo()
    _, url, _ = demo.launch(prevent_thread_lock=True, quiet=True,
                            **{**launch_options(host="127.0.0.1"), "server_port": None})
    print(url, flush=True)
    for line in sys.stdin:
        if line.strip() == "sessions":
            print(json.dumps({"sessions": len(demo.state_holder.session_data)}), flush=True)
        elif line.strip() == "measure":
            gc.collect()
            heap.trim()
            print(json.dumps({"rss": resident_bytes(),
                              "sessions": len(demo.state_holder.session_data)}), flush=True)
        elif line.strip() == "quit":
            break
    demo.close()


if __name__ == "__main__":
    main()
