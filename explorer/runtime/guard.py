"""The HTTP edge of a public server: what Gradio's defaults let through, refused here.

``edge_options`` gives ``demo.launch`` (``server.launch_options``) two Starlette middlewares,
through Gradio's public ``app_kwargs``, and keeps Gradio's monitoring pages off:

- ``HostCheck``: Starlette's ``TrustedHostMiddleware`` for the hosts the server was started
  for, so that a DNS rebinding page (``evil.example`` resolving to 127.0.0.1) cannot talk to a
  loopback server; a host written as an IP address passes too (rebinding needs a name).
- ``RequestCheck``: plain HTTP and JSON hygiene that needs nothing of Gradio's insides: a JSON
  body no larger than 8 MB, JSON that Python's parser cannot take (too deep, an integer too
  long), an empty ``session_hash``, an endpoint name that Gradio's own API description
  (``/gradio_api/info``) does not list, an ``fn_index`` that the page's own config (``/config``,
  what every browser reads) does not list, and an upload part that is not a file. Gradio
  answers each of these with a bare ``500 Internal Server Error``; here they get a 4xx and a
  message.

A text box's value must be text: the app's ``textbox.Textbox`` checks that (a public
``preprocess``).
Everything else about a call (how many inputs, a file input's form) is Gradio's own to answer.
Every refusal here logs one line (``gpt_explorer.http``), never a traceback.
"""
from __future__ import annotations

import ipaddress
import json
import logging
import os
import re

from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.responses import JSONResponse

from .memory import env_megabytes

log = logging.getLogger("gpt_explorer.http")

ALLOWED_HOSTS_ENV = "GPT_EXPLORER_ALLOWED_HOSTS"   # extra host names, comma-separated; "*": any
MONITORING_ENV = "GPT_EXPLORER_MONITORING"          # "1": Gradio's /monitoring pages on
UPLOAD_ENV = "GPT_EXPLORER_MAX_UPLOAD_MB"
LOCAL_HOSTS = ("localhost", "127.0.0.1", "::1")
SHARE_DOMAIN = ".gradio.live"                        # Gradio's share links (--share)
API = "/gradio_api"
# Gradio's documented routes that name an endpoint (its guide "Querying Gradio Apps with Curl")
_NAMED_ROUTE = re.compile(rf"^{API}/(?:call/v2|call|run|api)/([^/]+)/?$")
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


def _is_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        return False


class HostCheck(TrustedHostMiddleware):
    """Starlette's host check, with two additions: a host written as an IP address (a pod's or
    a LAN's) passes, since DNS rebinding needs a name the attacker controls; and a refusal
    says what to do, in the JSON form of Gradio's own refusals."""

    def __init__(self, app, hosts: set[str]):
        super().__init__(app, allowed_hosts=sorted(hosts), www_redirect=False)

    def allows(self, host: str) -> bool:
        return (self.allow_any or _is_address(host) or any(
            host == pattern or (pattern.startswith("*.") and host.endswith(pattern[1:]))
            for pattern in self.allowed_hosts))

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
    """Answer with 4xx and a message where Gradio would fail with a bare 500 (the module's
    doc); a request that passes reaches Gradio byte for byte."""

    def __init__(self, app):
        self.app = app
        self._endpoints = self._events = None

    async def __call__(self, scope, receive, send):
        path = scope.get("path", "")
        if scope["type"] != "http" or scope.get("method") != "POST" \
                or not path.startswith(API + "/"):
            await self.app(scope, receive, send)
            return
        if path.rstrip("/") == f"{API}/upload":
            await self._upload(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        if b"json" not in headers.get(b"content-type", b"") and not _NAMED_ROUTE.match(path):
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
                await _refuse(scope, receive, send, 413, "The request is too large.")
                return
        problem = self._problem(scope, path, body)
        if problem is not None:
            await _refuse(scope, receive, send, *problem)
            return
        sent = False

        async def replay():
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()
        await self.app(scope, replay, send)

    def _problem(self, scope, path, body):
        """(status, message) for a request Gradio cannot answer properly, else None."""
        named = _NAMED_ROUTE.match(path)
        if named and named.group(1) not in self._endpoint_names(scope):
            return 404, (f"There is no endpoint /{named.group(1)}. The endpoints are listed "
                         f"at {API}/info.")
        payload, problem = _parse(body)
        if problem is None and isinstance(payload, dict):
            session = payload.get("session_hash")
            if isinstance(session, str) and not session.strip():
                return 422, "session_hash is empty: leave it out, or send a non-empty string."
            index = payload.get("fn_index")
            if (path.rstrip("/") == f"{API}/queue/join" and isinstance(index, int)
                    and not isinstance(index, bool) and index not in self._event_ids(scope)):
                return 404, (f"There is no function with fn_index {index}. The endpoints are "
                             f"listed at {API}/info.")
        return problem

    def _event_ids(self, scope) -> set[int]:
        """The ids of the page's events, as its public config lists them (``/config``)."""
        if self._events is None:
            config = scope["app"].get_blocks().get_config_file()
            self._events = {d["id"] for d in config.get("dependencies", [])}
        return self._events

    def _endpoint_names(self, scope) -> set[str]:
        """The named endpoints of Gradio's own API description (what /gradio_api/info lists)."""
        if self._endpoints is None:
            info = scope["app"].get_blocks().get_api_info() or {}
            self._endpoints = {name.lstrip("/") for name in info.get("named_endpoints", {})}
        return self._endpoints

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
            await _refuse(scope, receive, send, 400,
                          "Each part named 'files' must be a file, with a filename.",
                          detail=f"{type(exc).__name__}: {exc}")


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


# Whether the running server can be reached from beyond this machine: it listens on more than
# the loopback, or through a share link. Set by the launch options (``edge_options``).
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


def edge_options(server_name: str, share: bool) -> dict:
    """``demo.launch``'s options for the edge: the two middlewares, and monitoring off unless
    ``GPT_EXPLORER_MONITORING=1`` (Gradio's /monitoring/summary shows every session's request
    counts to anyone). Notes whether the server is reachable from outside (server paths)."""
    _reach["beyond_this_machine"] = bool(share) or not is_loopback(server_name)
    return dict(app_kwargs={"middleware": [
                    Middleware(HostCheck, hosts=allowed_hosts(server_name, bool(share))),
                    Middleware(RequestCheck)]},
                enable_monitoring=_env_flag(MONITORING_ENV))


def max_upload_bytes(budget_bytes: int, environ=os.environ) -> int:
    """The largest upload: a checkpoint no larger than the memory budget (a larger one could
    not be loaded anyway), or ``GPT_EXPLORER_MAX_UPLOAD_MB`` if that is smaller."""
    limit = env_megabytes(UPLOAD_ENV, environ)
    return budget_bytes if limit is None else min(budget_bytes, limit)
