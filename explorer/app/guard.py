"""The HTTP edge of a public server: what Gradio's defaults let through, refused here.

Two Starlette (pure ASGI) middlewares on Gradio's FastAPI app, and ``protect_launch``, which
hands them to every ``demo.launch()`` (through Gradio's ``app_kwargs``) together with the
launch settings that keep monitoring off:

- ``HostCheck``: only the hosts the server was started for (or an IP address) may name it in
  ``Host``, so a DNS rebinding page (``evil.example`` resolving to 127.0.0.1) cannot talk to a
  loopback server.
- ``RequestCheck``: requests that Gradio answers with a bare ``500 Internal Server Error``
  (an unknown endpoint, an unknown ``fn_index``, an empty ``session_hash``, an upload part
  without a filename, the wrong number of inputs) get a 4xx answer with a message instead;
  and a text box's value must arrive as text (Gradio's Textbox turns any JSON value into text,
  so a list ``["hi"]`` would reach the handler as the string ``"['hi']"``, and no handler
  could tell); a file input's value must be file objects or null. Every other input's type is
  checked by its handler (``shared.as_*``).

Every refusal logs one line (``gpt_explorer.http``); nothing here logs a traceback.
"""
from __future__ import annotations

import functools
import ipaddress
import json
import logging
import os
import re

import gradio as gr
from starlette.middleware import Middleware
from starlette.responses import JSONResponse

from .gradio_private import api_info, function_id, functions, is_session_value, label_key
from .i18n import english

log = logging.getLogger("gpt_explorer.http")

ALLOWED_HOSTS_ENV = "GPT_EXPLORER_ALLOWED_HOSTS"   # extra host names, comma-separated; "*": any
MONITORING_ENV = "GPT_EXPLORER_MONITORING"          # "1": Gradio's /monitoring pages on
LOCAL_HOSTS = ("localhost", "127.0.0.1", "::1")
SHARE_DOMAIN = ".gradio.live"                        # Gradio's share links (--share)
API = "/gradio_api"
_NAMED_ROUTE = re.compile(rf"^{API}/(call/v2|call|run|api)/([^/]+)/?$")
MAX_JSON_BODY = 8 * 1024 ** 2   # a call's JSON (a 20,000-character prompt is far below this)


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


def _host_name(header: str) -> str:
    """``Host`` without its port, lower case; IPv6 literals keep no brackets."""
    header = header.strip().lower()
    if header.startswith("["):                      # [::1]:7860
        return header[1:].split("]", 1)[0]
    if header.count(":") == 1:                      # name:port
        return header.split(":", 1)[0]
    return header                                   # name, or a bare IPv6 address


def allowed_hosts(server_name: str | None, share: bool = False) -> set[str]:
    """The names this server answers to: the localhost names, the address it binds, the
    Space's own host (``SPACE_HOST`` on Hugging Face Spaces), and ``GPT_EXPLORER_ALLOWED_HOSTS``
    (comma-separated; ``*`` turns the check off). A share link adds ``*.gradio.live``."""
    hosts = set(LOCAL_HOSTS)
    for name in (server_name or "", os.environ.get("SPACE_HOST", "")):
        hosts.update(_host_name(h) for h in name.split(",") if h.strip())
    hosts.update(_host_name(h) for h in os.environ.get(ALLOWED_HOSTS_ENV, "").split(",")
                 if h.strip())
    if share:
        hosts.add("*" + SHARE_DOMAIN)
    return hosts


def _json_answer(status: int, message: str) -> JSONResponse:
    # Gradio's own refusals (HTTPException) answer {"detail": ...}; so do these.
    return JSONResponse({"detail": message}, status_code=status)


class HostCheck:
    """Refuse (400) a request whose ``Host`` is not one of ``hosts``."""

    def __init__(self, app, hosts: set[str]):
        self.app = app
        self.any = "*" in hosts
        self.exact = {h for h in hosts if not h.startswith("*.")}
        self.suffixes = tuple(h[1:] for h in hosts if h.startswith("*."))

    def allows(self, host: str) -> bool:
        if self.any or host in self.exact or (self.suffixes and host.endswith(self.suffixes)):
            return True
        # An address typed as such (a pod's or a LAN's IP) cannot be DNS-rebound: rebinding
        # needs a name the attacker controls.
        try:
            ipaddress.ip_address(host)
            return True
        except ValueError:
            return False

    async def __call__(self, scope, receive, send):
        if scope["type"] in ("http", "websocket"):
            headers = dict(scope.get("headers") or [])
            host = _host_name(headers.get(b"host", b"").decode("latin-1"))
            if not self.allows(host):
                log.warning("refused a request for host %r (%s %s)", host,
                            scope.get("method", "WS"), scope.get("path"))
                if scope["type"] == "websocket":
                    await send({"type": "websocket.close", "code": 1008})
                    return
                await _json_answer(400, f"This server does not answer to the host {host!r}. "
                                        f"An operator can allow it in {ALLOWED_HOSTS_ENV}.")(
                    scope, receive, send)
                return
        await self.app(scope, receive, send)


class RequestCheck:
    """Answer with 4xx and a message where Gradio would fail with a bare 500."""

    def __init__(self, app, blocks):
        self.app = app
        self.blocks = blocks
        self._api_info = None

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope.get("method") != "POST":
            await self.app(scope, receive, send)
            return
        path = scope.get("path", "")
        if path.rstrip("/") == f"{API}/upload":
            await self._upload(scope, receive, send)
            return
        named = _NAMED_ROUTE.match(path)
        route = named.group(1) if named else path.rstrip("/")[len(API) + 1:]
        headers = dict(scope.get("headers") or [])
        is_json = b"json" in headers.get(b"content-type", b"")
        if not named and route not in ("queue/join", "component_server") and not is_json:
            await self.app(scope, receive, send)
            return
        body, more = b"", True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body += message.get("body", b"")
            more = message.get("more_body", False)
            if len(body) > MAX_JSON_BODY:
                await self._refuse(scope, receive, send, 413, "The request is too large.")
                return
        problem = (self._problem(route, named.group(2) if named else None, body)
                   if named or route in ("queue/join", "component_server") else _parse(body)[1])
        if problem is not None:
            await self._refuse(scope, receive, send, *problem)
            return
        body = self._with_view_settings(route, named.group(2) if named else None, body)
        sent = False

        async def replay():
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()
        await self.app(scope, replay, send)

    def _problem(self, route, api_name, body):
        """(status, message) for a request Gradio cannot answer properly, else None."""
        fns = functions(self.blocks)
        fn = None
        if api_name is not None:
            fn = next((f for f in fns.values() if f.api_name == api_name), None)
            if fn is None:
                return 404, (f"There is no endpoint /{api_name}. The endpoints are listed at "
                             f"{API}/info.")
        payload, problem = _parse(body)
        if problem is not None or not isinstance(payload, dict):
            return problem
        session = payload.get("session_hash")
        if isinstance(session, str) and not session.strip():
            return 422, "session_hash is empty: leave it out, or send a non-empty string."
        if route == "component_server":
            component = payload.get("component_id")
            if isinstance(component, int) and component not in self.blocks.blocks:
                return 404, f"There is no component with component_id {component}."
            return None
        if route == "queue/join":                      # names the function by its index
            index = payload.get("fn_index")
            if isinstance(index, bool):
                return 422, "fn_index must be a whole number (the function's index)."
            if isinstance(index, int):
                if index not in fns:
                    return 404, (f"There is no function with fn_index {index}. The endpoints "
                                 f"are listed at {API}/info.")
                fn = fns[index]
        data = payload.get("data")
        if fn is None:
            return None
        if route == "call/v2":                         # the inputs by parameter name
            return (self._texts(fn, self._named(fn.api_name, payload, "Textbox"))
                    or self._files(fn, self._named(fn.api_name, payload, "File")))
        # (/run and /api answer "join the queue" themselves: api_open=False)
        if isinstance(data, list) and route in ("call", "queue/join"):
            problem = self._arity(fn, route, len(data))
            if problem is not None:
                return problem
            inputs = list(fn.inputs)
            if len(data) != len(inputs):               # /call without the State inputs
                inputs = [b for b in inputs if not is_session_value(b)]
            given = list(zip(inputs, data))
            return (self._texts(fn, [(_label(block), value) for block, value in given
                                     if isinstance(block, gr.Textbox)])
                    or self._files(fn, [(_label(block), value) for block, value in given
                                        if isinstance(block, gr.File)]))
        return None

    def _fn(self, route, api_name, payload):
        if api_name is not None:
            return next((f for f in functions(self.blocks).values()
                         if f.api_name == api_name), None)
        index = payload.get("fn_index") if route == "queue/join" else None
        return functions(self.blocks).get(index) if isinstance(index, int) and \
            not isinstance(index, bool) else None

    def _with_view_settings(self, route, api_name, body):
        """A call that leaves out the page's two view settings (``lang``, ``lecture``: every
        event's last two inputs, added after the API was first published) gets their defaults,
        English and no lecture mode."""
        if route not in ("call", "queue/join"):
            return body
        payload, _ = _parse(body)
        data = payload.get("data") if isinstance(payload, dict) else None
        fn = self._fn(route, api_name, payload) if isinstance(data, list) else None
        if fn is None or len(data) + 2 not in _input_counts(fn, route) \
                or not _ends_with_view(fn):
            return body
        payload["data"] = data + [block.value for block in fn.inputs[-2:]]
        return json.dumps(payload).encode()

    def _named(self, api_name, payload, component):
        """/call/v2: the (label, value) of each input of this component ("Textbox", "File"),
        found by its parameter name in Gradio's own API description (/gradio_api/info)."""
        if self._api_info is None:
            self._api_info = api_info(self.blocks)
        endpoint = self._api_info.get("named_endpoints", {}).get(f"/{api_name}", {})
        return [(_english(p.get("label")), payload[p["parameter_name"]])
                for p in endpoint.get("parameters", [])
                if p.get("component") == component and p.get("parameter_name") in payload]

    @staticmethod
    def _files(fn, labelled):
        """A file input (the Build tab's checkpoint upload) takes what gradio_client's
        ``handle_file`` sends, file objects with a "path" (one, or a list), or null; Gradio's
        own check of anything else fails with a validation traceback."""
        for label, value in labelled:
            items = value if isinstance(value, list) else [value]
            if value is None or all(isinstance(item, dict) and isinstance(item.get("path"), str)
                                    for item in items):
                continue
            return 422, (f"{label or 'A file input'} of /{fn.api_name} must be uploaded files "
                         f"(objects with a \"path\", as gradio_client's handle_file sends), "
                         f"or null.")
        return None

    @staticmethod
    def _texts(fn, labelled):
        for label, value in labelled:
            if value is not None and not isinstance(value, str):
                kind = {list: "a list", dict: "a JSON object", bool: "true/false"}.get(
                    type(value), f"a {type(value).__name__}")
                return 422, (f"{label or 'A text input'} of /{fn.api_name} must be text (got "
                             f"{kind}).")
        return None

    @staticmethod
    def _arity(fn, route, given):
        """Gradio fails (a traceback in the server log) when an event gets the wrong number of
        inputs. /call also takes them without the session's own (State) values."""
        inputs = list(fn.inputs)
        counts = _input_counts(fn, route)
        view = _ends_with_view(fn)
        if given in counts or (view and given + 2 in counts):
            return None
        names = [_label(block) or type(block).__name__.lower()
                 for block in inputs[:-2 if view else None]
                 if route == "queue/join" or not is_session_value(block)]
        what = f"/{fn.api_name}" if fn.api_name else f"function {function_id(fn)}"
        then = ", then optionally lang and lecture (the page's language and lecture mode)" \
            if view else ""
        return 422, (f"{what} takes {min(counts) - (2 if view else 0)} input value(s) "
                     f"({', '.join(names)}){then}; got {given}.")

    async def _upload(self, scope, receive, send):
        """Gradio's upload route raises (a bare 500) on a ``files`` part that is a plain form
        field (no filename). The body streams through (never held here); the refusal is made
        only if nothing has been answered yet."""
        started = False

        async def watch(message):
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)
        try:
            await self.app(scope, receive, watch)
        except (TypeError, ValueError, KeyError) as exc:
            if started:
                raise
            await self._refuse(scope, receive, send, 400,
                               "Each part named 'files' must be a file, with a filename.",
                               detail=f"{type(exc).__name__}: {exc}")

    @staticmethod
    async def _refuse(scope, receive, send, status, message, detail=""):
        log.warning("refused %s %s: %d %s%s", scope.get("method"), scope.get("path"), status,
                    message, f" ({detail})" if detail else "")
        await _json_answer(status, message)(scope, receive, send)


def _parse(body: bytes):
    """(the JSON of a request, None), or (None, (status, message)) for JSON that Gradio's own
    parser would fail on with a bare 500: nested too deeply for Python's recursion, or holding
    an integer too long for Python to convert. Other malformed JSON: (None, None), and Gradio
    answers it with a 422 itself."""
    try:
        return json.loads(body), None
    except RecursionError:
        return None, (422, "The request's JSON is nested too deeply to be a call of this app.")
    except ValueError as exc:      # JSONDecodeError, UnicodeDecodeError, the digit limit
        if "digits" in str(exc) and "integer" in str(exc):
            return None, (422, "A number in the request has more than 4,300 digits: no input "
                               "of this app takes one that long.")
        return None, None


VIEW_ELEM_IDS = ("lang", "lecture")   # the page's view settings (layout.header)


def _input_counts(fn, route) -> set[int]:
    """How many input values a call may send: all, or (/call) all but the State values."""
    inputs = list(fn.inputs)
    counts = {len(inputs)}
    if route != "queue/join":
        counts.add(sum(1 for block in inputs if not is_session_value(block)))
    return counts


def _label(block) -> str | None:
    """A component's label in English (a translated label is an I18nData: its id)."""
    return _english(getattr(block, "label", None))


def _english(text):
    key = label_key(text)
    return english(key) if key is not None else text


def _ends_with_view(fn) -> bool:
    return tuple(getattr(b, "elem_id", None) for b in list(fn.inputs)[-2:]) == VIEW_ELEM_IDS


# Whether the running server can be reached from beyond this machine: it listens on more than
# the loopback, or through a share link. Set by every launch (``protect_launch``).
_reach = {"beyond_this_machine": False}


def is_loopback(host: str | None) -> bool:
    host = _host_name(host or "")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def reachable_from_outside() -> bool:
    """Whether the server was launched on more than the loopback (``--host 0.0.0.0``, the
    Docker image, a Space) or with a share link (``--share``)."""
    return _reach["beyond_this_machine"]


def protect_launch(demo) -> None:
    """Make every ``demo.launch(...)`` (``python app.py``, the tests, a Space) carry the
    middlewares above and keep monitoring off unless ``GPT_EXPLORER_MONITORING=1``."""
    launch = demo.launch

    @functools.wraps(launch)
    def protected_launch(*args, **options):
        server_name = (options.get("server_name") or os.environ.get("GRADIO_SERVER_NAME")
                       or "127.0.0.1")
        share = options.get("share")
        if share is None:       # Gradio's own default: GRADIO_SHARE
            share = os.environ.get("GRADIO_SHARE", "").strip().lower() in ("1", "true")
        _reach["beyond_this_machine"] = bool(share) or not is_loopback(server_name)
        app_kwargs = dict(options.get("app_kwargs") or {})
        app_kwargs["middleware"] = [
            *app_kwargs.get("middleware", []),
            Middleware(HostCheck, hosts=allowed_hosts(server_name, bool(share))),
            Middleware(RequestCheck, blocks=demo),
        ]
        options["app_kwargs"] = app_kwargs
        # Gradio's /monitoring/summary shows every session's request counts to anyone.
        if options.get("enable_monitoring") is None:
            options["enable_monitoring"] = _env_flag(MONITORING_ENV)
        return launch(*args, **options)

    demo.launch = protected_launch
