"""Every event's handler is wrapped once, here.

``@handler(outputs=(...))`` declares the names (elem_ids) of the components a handler may
update; it returns (or yields) ``{name: value}`` for some of them, and ``Page.on`` hands Gradio
``{component: value}``: no output is found by its position. The wrapper also
- hands a handler that takes ``session`` a Session (an API client may send none);
- puts the session's view settings (``prefs``) in place for the call, and each step of a stream;
- shows a user error (``ExplorerError``) in the page's language, logged as one line;
- treats anything else as a bug: its traceback logged once, and a short message shown;
- gives the memory of the call's temporaries back to the system (``heap.trim``).
"""
from __future__ import annotations

import functools
import inspect
import logging
import time

import gradio as gr

from ..book.errors import ExplorerError
from ..runtime import heap
from . import prefs
from .i18n import say, t
from .session import Session

log = logging.getLogger("gpt_explorer")


def _error(text: str) -> gr.Error:
    # It stays until it is closed: a lecturer may be talking when it comes.
    return gr.Error(text, duration=None, print_exception=False)


def shown_error(exc: BaseException, name: str) -> gr.Error:
    """The gr.Error the page shows for ``exc`` raised in handler ``name``, logged once."""
    if isinstance(exc, ExplorerError):
        # (a reason kept from the page, such as why a server path was refused, is logged)
        log.info("%s refused: %s", name, " ".join([str(exc), *getattr(exc, "__notes__", ())]))
        return _error(say(exc.message))
    if isinstance(exc, gr.Error):
        # Gradio's own (ZeroGPU's quota), a test's, or one a handler called here has shown
        # (and logged: print_exception is then off)
        if exc.print_exception:
            exc.print_exception = False
            log.info("%s refused: %s", name, exc.message)
        return exc
    if isinstance(exc, MemoryError) or type(exc).__name__ == "OutOfMemoryError":
        log.warning("%s: out of memory", name)
        return _error(t("error.memory", "Out of memory: choose a smaller model or a shorter "
                                        "prompt."))
    log.exception("unexpected error in %s", name)
    return _error(t("error.bug", "This is a bug in GPT Explorer ({kind}), not something you "
                                 "did: the model and your session are unchanged, and the "
                                 "details are in the server log.", kind=type(exc).__name__))


class Pause:
    """A stream's wait between two updates, yielded rather than slept. Served by Gradio
    (``Page.on``), the wait holds no thread: Gradio runs each step of a sync generator in one
    of its 40 threads, so 40 streams sleeping there left none for anyone's click. Called
    directly, the handler sleeps it."""

    def __init__(self, seconds: float):
        self.seconds = seconds


def handler(outputs=(), name: str | None = None, inputs=None, pauses=False):
    """Wrap an event's function (see the module's doc). ``outputs``: the names it may update (a
    function among them gives more, once the page is made); ``inputs`` (optional): the names its
    parameters take, in order; ``pauses``: a stream that yields ``Pause`` (Gradio awaits them)."""
    def wrap(fn):
        label = name or fn.__name__
        signature = inspect.signature(fn)
        takes_session = "session" in signature.parameters
        params = [p for p in signature.parameters if p != "request"]
        if inputs is not None and len(inputs) != len(params):
            raise TypeError(f"{label} takes {params}, not the inputs {list(inputs)}")

        def given(args, kwargs):
            """The call's arguments (``session`` a Session), and its view settings: the
            session's, read again at each step of a stream (a toggle during a training job
            changes what it shows next); without a session, the caller's."""
            if takes_session:
                try:
                    bound = signature.bind_partial(*args, **kwargs)
                except TypeError:     # (the call itself fails, and says so)
                    pass
                else:
                    if not isinstance(bound.arguments.get("session"), Session):
                        bound.arguments["session"] = Session()
                    session = bound.arguments["session"]
                    return bound.args, bound.kwargs, lambda: session.prefs
            now = prefs.current()
            return args, kwargs, lambda: now

        def checked(result):
            allowed = declared(wrapper)
            if not isinstance(result, dict) or not set(result) <= set(allowed):
                got = sorted(result) if isinstance(result, dict) else type(result).__name__
                raise RuntimeError(f"{label} returned {got}, not some of its outputs "
                                   f"{list(allowed)}")
            return result

        if inspect.isgeneratorfunction(fn):
            def stepped(args, kwargs, pausing):
                args, kwargs, settings = given(args, kwargs)
                # Gradio runs each step of a generator in a context of its own.
                steps = fn(*args, **kwargs)
                try:
                    for result in prefs.each_step_using(settings, steps):
                        if isinstance(result, Pause):
                            if pausing:
                                yield result
                            else:
                                time.sleep(result.seconds)
                            continue
                        yield checked(result)
                except Exception as exc:  # noqa: BLE001 - said to the user
                    with prefs.using(settings()):
                        raise shown_error(exc, label) from None
                finally:
                    steps.close()   # stopped by the page (Stop, a closed tab): end the work
                    heap.trim()

            @functools.wraps(fn)
            def wrapper(*args, **kwargs):
                yield from stepped(args, kwargs, False)
            # The same steps, its pauses yielded (Page.on awaits them)
            wrapper.pausing = lambda *args, **kwargs: stepped(args, kwargs, True)
        else:
            @functools.wraps(fn)
            def wrapper(*args, **kwargs):
                args, kwargs, settings = given(args, kwargs)
                with prefs.using(settings()):
                    try:
                        return checked(fn(*args, **kwargs))
                    except Exception as exc:  # noqa: BLE001 - said to the user
                        raise shown_error(exc, label) from None
                    finally:
                        heap.trim()
        wrapper.pauses = pauses
        wrapper.outputs = (outputs,) if callable(outputs) else tuple(outputs)
        wrapper.inputs = None if inputs is None else tuple(inputs)
        return wrapper
    return wrap


def declared(fn) -> tuple[str, ...]:
    """The output names of handler ``fn``: its own, and those of any function among them
    (``refresh.all_outputs``: known once every tab has registered)."""
    names = []
    for item in fn.outputs:
        names += list(item()) if callable(item) else [item]
    return tuple(dict.fromkeys(names))
