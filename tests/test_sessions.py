"""Closed sessions leave nothing behind: a server that served 100 sessions (each opens the
page's heartbeat, builds teach-tiny, traces a prompt and leaves) holds no entry for any of
them and has grown by at most 15 MB. Gradio alone keeps every closed session's entry, with a
copy of the page config (about 300 KB here), until 10,000 of them have piled up.

The server runs in a subprocess (tests/session_server.py), so its memory is its own."""
import http.client
import json
import os
import subprocess
import sys
import time
import urllib.parse
import uuid
from pathlib import Path

import pytest

from bad_inputs import PROMPT, TRACE_VIEW, build_args

SESSIONS = 100
WARM_UP = 10
MAX_GROWTH_MB = 15
SERVER = Path(__file__).with_name("session_server.py")


class Server:
    def __init__(self):
        env = {**os.environ, "GRADIO_ANALYTICS_ENABLED": "False"}
        self.process = subprocess.Popen([sys.executable, str(SERVER)], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, text=True, env=env)
        url = urllib.parse.urlparse(self.process.stdout.readline().strip())
        self.address = (url.hostname, url.port)

    def ask(self, command):
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()
        return json.loads(self.process.stdout.readline())

    def measure(self):
        return self.ask("measure")

    def close(self):
        try:
            self.process.stdin.write("quit\n")
            self.process.stdin.flush()
            self.process.wait(timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            self.process.kill()
            self.process.wait()


def call(address, session, api, args):
    """/gradio_api/call: join the queue, then read the result's event stream to its end."""
    conn = http.client.HTTPConnection(*address, timeout=60)
    try:
        conn.request("POST", f"/gradio_api/call{api}",
                     json.dumps({"data": list(args), "session_hash": session}),
                     {"Content-Type": "application/json"})
        response = conn.getresponse()
        assert response.status == 200, response.read()[:300]
        event_id = json.loads(response.read())["event_id"]
        conn.request("GET", f"/gradio_api/call{api}/{event_id}")
        stream = conn.getresponse().read().decode()
    finally:
        conn.close()
    assert "event: complete" in stream, stream[-300:]


def one_session(address):
    """Open the page's heartbeat, build, trace, and leave (close the heartbeat)."""
    session = uuid.uuid4().hex
    heartbeat = http.client.HTTPConnection(*address, timeout=60)
    try:
        heartbeat.request("GET", f"/gradio_api/heartbeat/{session}")
        response = heartbeat.getresponse()
        assert response.status == 200
        assert response.read(11) == b"data: ALIVE"   # the session is open
        call(address, session, "/build", build_args())
        call(address, session, "/trace", (PROMPT, 0, *TRACE_VIEW))
    finally:
        heartbeat.close()   # the tab goes away: Gradio runs the unload events


def settled(server, sessions, polls=100):
    """The measure once the server holds at most ``sessions`` sessions (unload runs in the
    background after a disconnect), or after ``polls`` tries."""
    for _ in range(polls):
        if server.ask("sessions")["sessions"] <= sessions:
            break
        time.sleep(0.1)
    return server.measure()


@pytest.fixture(scope="module")
def server():
    s = Server()
    yield s
    s.close()


def test_closed_sessions_are_forgotten_and_free_their_memory(server):
    for _ in range(WARM_UP):          # caches, allocator arenas, the model: all in place
        one_session(server.address)
    before = settled(server, 0)
    for _ in range(SESSIONS):
        one_session(server.address)
    after = settled(server, before["sessions"])
    growth_mb = (after["rss"] - before["rss"]) / 1024 ** 2
    print(f"RSS growth after {SESSIONS} closed sessions: {growth_mb:.1f} MB; sessions held: "
          f"{before['sessions']} -> {after['sessions']}")
    assert after["sessions"] == before["sessions"] == 0
    assert growth_mb <= MAX_GROWTH_MB
