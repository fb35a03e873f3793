"""The server log: an expected refusal is one line (no traceback), an unexpected error is its
traceback, once. Through the app's API, against the app in this process (so that what the
server prints, on stderr or through logging, is captured here)."""
import logging

import pytest
from local_client import local_client

from explorer.app import shared
from explorer.app.server import create_demo, launch_options, show_app_log

from bad_inputs import build_args


@pytest.fixture(scope="module")
def app_url():
    show_app_log()   # as `python app.py` does: the app's log on stderr, beside Gradio's
    demo = create_demo()
    _, url, _ = demo.launch(prevent_thread_lock=True, quiet=True,
                            **{**launch_options(host="127.0.0.1"), "server_port": None})
    yield url
    demo.close()


def refused(url, args):
    client = local_client(url)
    try:
        with pytest.raises(Exception) as error:
            client.predict(*args, api_name="/build")
    finally:
        client.close()
    return str(error.value)


def tracebacks(capfd):
    """Tracebacks the server printed (Gradio's, and the app log's) since the last look."""
    return capfd.readouterr().err.count("Traceback (most recent call last)")


@pytest.mark.parametrize("changes, message", [
    ({"n_heads": 128}, "divisible by n_heads"),                        # a bad config
    ({"n_layers": 10 ** 6}, "memory budget"),                          # a model too big
])
def test_an_expected_refusal_logs_one_line(app_url, capfd, caplog, changes, message):
    capfd.readouterr()
    with caplog.at_level(logging.INFO, logger="gpt_explorer"):
        assert message in refused(app_url, build_args(**changes))
    assert tracebacks(capfd) == 0
    lines = [r.getMessage() for r in caplog.records if r.name.startswith("gpt_explorer")]
    assert len(lines) == 1 and message in lines[0], lines


def test_an_unexpected_error_logs_its_traceback_once(app_url, capfd, caplog, monkeypatch):
    def broken(key, progress=None, keep=()):
        raise RuntimeError("a bug")
    monkeypatch.setattr(shared.CACHE, "get", broken)
    capfd.readouterr()
    with caplog.at_level(logging.INFO, logger="gpt_explorer"):
        assert "This is a bug in GPT Explorer (RuntimeError)" in refused(app_url, build_args())
    assert tracebacks(capfd) == 1
