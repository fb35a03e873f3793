"""A ``gradio_client.Client`` for the test servers (plain HTTP on the loopback).

gradio_client opens a fresh ``httpx`` client for every call, and each one loads the CA bundle
into a new TLS context unless verification is off: tens of milliseconds of CPU a call, spent in
the same process as the server under test. No request here uses TLS, so there is nothing to
verify."""
import contextlib
import threading

from gradio_client import Client


def local_client(url: str, **kwargs) -> Client:
    if not url.startswith("http://127.0.0.1:"):
        raise ValueError(f"local_client is for the test servers on the loopback, not {url}")
    return Client(url, verbose=False, ssl_verify=False, **kwargs)


def close_soon(client: Client) -> None:
    """``client.close()`` without waiting for it: it waits up to a second for the client's
    heartbeat thread, which is blocked reading its stream and leaves at the next heartbeat
    either way (the server ends the session when that stream closes)."""
    threading.Thread(target=client.close, daemon=True, name="close-gradio-client").start()


@contextlib.contextmanager
def launched(**options):
    """The app (a new page) served on the loopback at a free port: yields its URL, then closes
    it. ``options``: more of ``demo.launch``'s (they win over the loopback and the port)."""
    from explorer.app.server import create_demo
    demo = create_demo()
    _, url, _ = demo.launch(prevent_thread_lock=True, quiet=True,
                            **{"server_name": "127.0.0.1", "server_port": None, **options})
    try:
        yield url
    finally:
        demo.close()
