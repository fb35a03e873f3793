"""Every bad input gets a clear answer: the catalogue of ``tests/bad_inputs.py`` through the
Python API and through the app's API (gradio_client, against the app launched in-process with
its real launch options).

Each case asserts a message that matches a key phrase, or a correct result; never traceback
text in the message; an answer within the case's time limit (no hang). After the first refusal
of each endpoint in each area, a follow-up call on the same endpoint in the same session must
succeed (the session is still usable); the other refusals share sessions, several in a row.
No refusal may take the server's unexpected-error path, and the server serves a new session
at the end.
"""
import http.client
import json
import logging
import re
import urllib.error
import urllib.parse
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import pytest
import torch
from local_client import close_soon, local_client

from explorer.runtime.cache import ModelCache
from explorer.book.config import PRESETS
from explorer.book.generate import generate_text_simple
from explorer.runtime.build import build_model
from explorer.app.server import create_demo, launch_options
from explorer.book.tokenizer import get_tokenizer

from bad_inputs import (CASES, HTTP_CASES, PROMPT, TRACE_VIEW, build_args, gen_args,
                        share_args, train_args)

CALL_TIMEOUT_S = 60
APP_WORKERS = 6
ENDPOINTS = ("/preset_config", "/build", "/trace", "/inside_views", "/attention",
             "/activation_curves", "/generate", "/next_token", "/logit_lens", "/export_stats",
             "/export_attention", "/train_start", "/train_stop", "/train_continue",
             "/train_use", "/train_export",
             "/export_model", "/stage_details", "/share_link")
# A valid call per endpoint, and what the session needs before it.
FOLLOW_UP = {
    "/preset_config": (None, ("teach-tiny",)),
    "/build": (None, build_args()),
    "/trace": ("built", (PROMPT, 1, *TRACE_VIEW)),
    "/inside_views": ("traced", (1, *TRACE_VIEW)),
    "/attention": ("traced", (1, "0")),
    "/activation_curves": (None, (-3, 3, ["gelu", "silu"], True, 0)),
    "/generate": ("built", gen_args(n=3)),
    "/next_token": ("built", (PROMPT, "", "greedy", 1.0, 50, 123)),
    "/logit_lens": ("built", (PROMPT,)),
    "/export_stats": ("traced", ("JSON",)),
    "/export_attention": ("traced", (0, "mean")),
    "/train_start": (None, train_args()),
    "/train_stop": ("trained", ()),
    "/train_continue": ("stopped", ()),
    "/train_use": ("trained", ("no shortcut",)),
    "/train_export": ("trained", ("no shortcut",)),
    "/export_model": ("built", (False,)),
    "/stage_details": ("built", ("attention", 0, PROMPT)),
    "/share_link": (None, share_args()),
}


def is_plain_message(message: str) -> bool:
    return bool(message.strip()) and "Traceback" not in message and 'File "' not in message


@pytest.fixture(scope="module", autouse=True)
def one_torch_thread():
    """Tiny models, many small calls: one intra-op thread (two spin-wait each other into the
    ground on a 2-core machine shared with other work). Same numbers either way."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@dataclass
class Env:
    model: torch.nn.Module
    tok: object
    cache: ModelCache


@pytest.fixture(scope="module")
def env():
    return Env(build_model(PRESETS["teach-tiny"], seed=123, device="cpu"), get_tokenizer(),
               ModelCache())


# ---------------------------------------------------------------------------------------------
# Python API
def run_bounded(fn, seconds):
    """fn() in a worker thread; (result, exception, elapsed). A hang fails the test instead of
    blocking the run."""
    box = {}

    def target():
        started = time.perf_counter()
        try:
            box["result"] = fn()
        except BaseException as exc:  # noqa: BLE001 - reported to the test
            box["error"] = exc
        box["elapsed"] = time.perf_counter() - started

    worker = threading.Thread(target=target, daemon=True)
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        pytest.fail(f"no answer within {seconds} s (a hang)")
    return box.get("result"), box.get("error"), box["elapsed"]


PY_CASES = [c for c in CASES if c.python is not None]
APP_CASES = [c for c in CASES if c.api is not None]


def test_catalogue_is_large_and_covers_every_endpoint():
    assert len(CASES) >= 60
    assert len({c.id for c in CASES}) == len(CASES)
    assert {c.area for c in CASES} == {"config", "prompt", "generation", "index", "order",
                                          "weights", "type", "training"}
    assert {c.api for c in APP_CASES} == set(ENDPOINTS)
    for c in CASES:
        assert (c.py_expect is None) == (c.python is None or c.py_check is not None), c.id
        assert (c.app_expect is None) == (c.api is None or c.app_check is not None), c.id


@pytest.mark.parametrize("case", PY_CASES, ids=[c.id for c in PY_CASES])
def test_python_api(case, env):
    result, error, elapsed = run_bounded(lambda: case.python(env), case.max_seconds)
    assert elapsed < case.max_seconds
    if case.py_expect is None:
        assert error is None, f"{type(error).__name__}: {error}"
        assert case.py_check(result, env)
    else:
        assert isinstance(error, ValueError), f"expected a ValueError, got {error!r}"
        assert re.search(case.py_expect, str(error), re.S), str(error)
        assert is_plain_message(str(error))


# ---------------------------------------------------------------------------------------------
# The app's API
class AppMessage(Exception):
    """An error answer from the app, by either route."""


def call(client, api, args, timeout=CALL_TIMEOUT_S):
    job = client.submit(*args, api_name=api)
    try:
        return job.result(timeout=timeout)
    except TimeoutError:
        raise
    except Exception as exc:  # noqa: BLE001 - the app's message, whatever the client wraps it in
        raise AppMessage(str(exc)) from exc


def raw_call(url, session_hash, api, args, timeout=CALL_TIMEOUT_S):
    """The same call as plain JSON (Python's json writes NaN and Infinity, which
    gradio_client refuses to send), in the given session."""
    body = json.dumps({"data": list(args), "session_hash": session_hash}).encode()
    request = urllib.request.Request(f"{url}gradio_api/call{api}", data=body,
                                     headers={"Content-Type": "application/json"})
    try:
        event_id = json.load(urllib.request.urlopen(request, timeout=timeout))["event_id"]
    except urllib.error.HTTPError as refused:   # the server's own check: 4xx and a message
        if not 400 <= refused.code < 500:
            raise
        raise AppMessage(json.loads(refused.read())["detail"]) from None
    stream = urllib.request.urlopen(f"{url}gradio_api/call{api}/{event_id}",
                                    timeout=timeout).read().decode()
    events = re.findall(r"^event: (\w+)\ndata: (.*)$", stream, re.M)
    kind, data = events[-1]
    if kind == "error":
        raise AppMessage(json.loads(data)["error"] if data.startswith("{") else data)
    return json.loads(data)


def set_up(client, build, traced):
    if build is not None:
        call(client, "/build", build_args(**build))
    if traced:
        call(client, "/trace", (PROMPT, 0, *TRACE_VIEW))


def follow_up(client, api, env, has=None):
    """The session still works: a valid call on the same endpoint succeeds (after building
    teach-tiny, and tracing, where the endpoint needs that and the session has not: ``has``
    is what it has, None, "built" or "traced")."""
    needs, args = FOLLOW_UP[api]
    if needs == "built" and has is None or needs == "traced" and has != "traced":
        set_up(client, {} if has is None else None, traced=needs == "traced")
    if needs == "trained":
        call(client, "/train_start", train_args())
    elif needs == "stopped":
        watch_then_stop(client, "/train_start", train_args(steps=1000))
    if api == "/train_continue":
        result = watch_then_stop(client, api, args)
    else:
        result = call(client, api, args)
    if api.startswith("/train_"):
        if api == "/train_use":
            assert "trained 2 steps on" in result[0]
        elif api == "/train_export":
            assert len(result) == 2        # model.safetensors and config.json
        else:
            assert "Finished" in result[0] or "Stopped" in result[0], result[0]
        return True
    if api == "/build":
        assert "Model ready" in result[0]
    elif api == "/trace":
        assert "4 tokens" in result[1]
    elif api == "/generate":
        ids = torch.tensor([env.tok.encode(PROMPT)])
        expected = generate_text_simple(env.model, ids, 3, 64)
        assert result[0] == env.tok.decode(expected[0].tolist())
    else:
        assert result is not None
    return True


def watch_then_stop(client, api, args):
    """A training stream (/train_start or /train_continue) watched until it shows steps,
    then stopped; its last view."""
    job = client.submit(*args, api_name=api)
    for update in job:
        if "step 0 of" not in update[0]:
            break
    call(client, "/train_stop", ())
    return job.result(timeout=CALL_TIMEOUT_S)


def session_groups(cases, chunk=8):
    """Which cases share a session. A case that succeeds changes its session, and a case
    followed up leaves it changed: each gets a session of its own. The other cases are
    refusals, which change nothing: they share sessions by setup, a few at a time, so that a
    session also takes many refusals in a row. The follow-ups: the first refusal of each
    endpoint in each area."""
    followed, alone, shared = set(), [], {}
    for c in cases:
        if c.app_expect is not None and (c.api, c.area) not in followed:
            followed.add((c.api, c.area))
            alone.append(([c], True))
        elif c.app_expect is None:
            alone.append(([c], False))
        else:
            shared.setdefault((json.dumps(c.build, sort_keys=True), c.traced), []).append(c)
    chunks = [(group[i:i + chunk], False) for group in shared.values()
              for i in range(0, len(group), chunk)]
    return alone + chunks


def run_session(client, url, cases, with_follow_up, env) -> dict:
    """``cases`` (with the same setup) in one new session of ``client``."""
    client.reset_session()
    outcomes = {c.id: {"message": None, "result": None, "follow_up": None} for c in cases}
    try:
        set_up(client, cases[0].build, cases[0].traced)
    except Exception as exc:  # noqa: BLE001 - reported by the test
        for outcome in outcomes.values():
            outcome["setup_error"] = f"{type(exc).__name__}: {exc}"
        return outcomes
    for case in cases:
        outcome = outcomes[case.id]
        args = case.args(env) if callable(case.args) else case.args
        started = time.perf_counter()
        try:
            if case.raw:
                outcome["result"] = raw_call(url, client.session_hash, case.api, args)
            else:
                outcome["result"] = call(client, case.api, args)
        except AppMessage as exc:
            outcome["message"] = str(exc)
        except Exception as exc:  # noqa: BLE001 - reported by the test
            outcome["setup_error"] = f"{type(exc).__name__}: {exc}"
        outcome["elapsed"] = time.perf_counter() - started
    if with_follow_up and outcome["message"] is not None:
        has = None if case.build != {} else "traced" if case.traced else "built"
        try:
            outcome["follow_up"] = follow_up(client, case.api, env, has)
        except Exception as exc:  # noqa: BLE001 - reported by the test
            outcome["follow_up"] = f"{type(exc).__name__}: {exc}"
    return outcomes


class _Collect(logging.Handler):
    def __init__(self):
        super().__init__(logging.ERROR)
        self.records = []

    def emit(self, record):
        self.records.append(record)


@pytest.fixture(scope="module")
def app_url():
    from explorer.app import shared
    from explorer.runtime.training.lab import TrainingLab
    # Follow-ups of the training endpoints train a few steps in several sessions at once.
    lab, shared.LAB = shared.LAB, TrainingLab(max_jobs=APP_WORKERS)
    demo = create_demo()
    options = {**launch_options(host="127.0.0.1"), "server_port": None}
    _, url, _ = demo.launch(prevent_thread_lock=True, quiet=True, **options)
    yield url
    demo.close()
    shared.LAB = lab


@pytest.fixture(scope="module")
def app_outcomes(app_url, env):
    """Every app case, several sessions at a time (see session_groups)."""
    unexpected = _Collect()
    logging.getLogger("gpt_explorer").addHandler(unexpected)
    local, clients = threading.local(), []

    def run(group):
        if not hasattr(local, "client"):  # one client per worker, a new session per group
            local.client = local_client(app_url)
            clients.append(local.client)
        return run_session(local.client, app_url, *group, env)

    outcomes = {}
    try:
        with ThreadPoolExecutor(APP_WORKERS) as pool:
            for result in pool.map(run, session_groups(APP_CASES), timeout=20 * CALL_TIMEOUT_S):
                outcomes.update(result)
    finally:
        logging.getLogger("gpt_explorer").removeHandler(unexpected)
        for client in clients:
            close_soon(client)
    outcomes["_unexpected"] = [r.getMessage() for r in unexpected.records]
    return outcomes


@pytest.mark.parametrize("case", APP_CASES, ids=[c.id for c in APP_CASES])
def test_app_api(case, app_outcomes, env):
    outcome = app_outcomes[case.id]
    assert "setup_error" not in outcome, outcome["setup_error"]
    assert outcome["elapsed"] < case.max_seconds
    message = outcome["message"]
    if case.app_expect is None:
        assert message is None, message
        assert case.app_check(outcome["result"], env)
    else:
        assert message is not None, f"no error; the app answered {str(outcome['result'])[:200]}"
        assert re.search(case.app_expect, message, re.S), message
        assert is_plain_message(message), message
        assert outcome["follow_up"] in (True, None), f"session unusable: {outcome['follow_up']}"


def test_every_endpoint_works_again_after_an_error(app_outcomes):
    recovered = {c.api for c in APP_CASES if app_outcomes[c.id]["follow_up"] is True}
    assert recovered == set(ENDPOINTS)


def test_no_bad_input_reached_the_unexpected_error_path(app_outcomes):
    """Every refusal was a message raised on purpose, not an exception we did not foresee
    ("This is a bug ...", logged with its traceback)."""
    assert app_outcomes["_unexpected"] == []


def test_server_still_serves_a_new_session_after_the_catalogue(app_url, app_outcomes, env):
    client = local_client(app_url)
    try:
        assert follow_up(client, "/generate", env)
        assert follow_up(client, "/attention", env)
    finally:
        client.close()


# ---------------------------------------------------------------------------------------------
# Raw HTTP: requests that reach Gradio's routes directly (tests/bad_inputs.py HTTP_CASES)
def fetch(url, case):
    """The case's request, exactly as written (no client-side normalising)."""
    address = urllib.parse.urlparse(url)
    headers = {k: v.format(port=address.port) for k, v in case.headers}
    body = case.body
    if isinstance(body, dict) and isinstance(body.get("fn_index"), str):
        body = {**body, "fn_index": fn_index(url, body["fn_index"])}
    if isinstance(body, dict):
        body = json.dumps(body).encode()
        headers.setdefault("Content-Type", "application/json")
    conn = http.client.HTTPConnection(address.hostname, address.port, timeout=CALL_TIMEOUT_S)
    try:
        conn.request(case.method, case.path, body=body, headers=headers)
        response = conn.getresponse()
        status, text = response.status, response.read().decode("utf-8", "replace")
    finally:
        conn.close()
    if case.stream and status == 200:      # the call's answer: its event stream
        event = json.loads(text)["event_id"]
        name = case.path.rstrip("/").rsplit("/", 1)[-1]
        text = urllib.request.urlopen(f"{url}gradio_api/call/{name}/{event}",
                                      timeout=CALL_TIMEOUT_S).read().decode()
    return status, text


def fn_index(url, api_name):
    """The index of the event named ``api_name`` ("/trace") in the running app."""
    config = json.load(urllib.request.urlopen(f"{url}config", timeout=CALL_TIMEOUT_S))
    return next(d["id"] for d in config["dependencies"] if d.get("api_name") == api_name[1:])


class _Everything(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.records = []

    def emit(self, record):
        self.records.append(record)


@pytest.fixture(scope="module")
def http_outcomes(app_url):
    """Every raw HTTP case, one at a time, with what the server logged meanwhile."""
    outcomes, logged = {}, {}
    loggers = [logging.getLogger(name) for name in ("uvicorn.error", "gpt_explorer")]
    for case in HTTP_CASES:
        collect = _Everything()
        for logger in loggers:
            logger.addHandler(collect)
        try:
            outcomes[case.id] = fetch(app_url, case)
        finally:
            for logger in loggers:
                logger.removeHandler(collect)
        logged[case.id] = collect.records
    return outcomes, logged


@pytest.mark.parametrize("case", HTTP_CASES, ids=[c.id for c in HTTP_CASES])
def test_raw_http(case, http_outcomes):
    outcomes, logged = http_outcomes
    status, body = outcomes[case.id]
    assert status in case.status, f"{case.method} {case.path} answered {status}: {body[:300]}"
    assert re.search(case.expect, body, re.I), body[:300]
    assert is_plain_message(body), body[:300]
    # an expected refusal: at most one log line, and no traceback
    records = logged[case.id]
    assert len(records) <= 1, [r.getMessage() for r in records]
    assert not any(r.exc_info for r in records), [r.getMessage() for r in records]


@pytest.mark.parametrize("host", ["127.0.0.1:{port}", "localhost:{port}", "localhost",
                                  "LOCALHOST:{port}", "[::1]:{port}"])
def test_the_hosts_the_server_was_started_for_are_served(app_url, host):
    from bad_inputs import HttpCase

    status, body = fetch(app_url, HttpCase("own-host", "GET", "/config",
                                           headers=(("Host", host),)))
    assert status == 200, body[:300]
