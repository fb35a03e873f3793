"""Every event's handler is wrapped once, here.

``@handler(outputs=(...))`` declares the names (elem_ids) of the components a handler may
update (a function among them gives more names, once the page is put together); the handler
returns (or yields) ``{name: value}`` for some of them, and ``Page.on`` hands Gradio
``{component: value}``. So no output is ever found by its position.

The wrapper also:
- takes the page's view settings (``lang``, ``lecture``: every event's last two inputs, optional
  for API calls) and puts them in place for the call (``prefs``);
- shows a user error (``ExplorerError``, raised by the core or by the app's input checks) in the
  page's language, and logs it as one line;
- treats anything else as a bug: its traceback is logged once and the page says so briefly;
- gives the memory of the call's temporaries back to the system when it ends (``heap.trim``).
"""
from __future__ import annotations

import functools
import inspect
import logging

import gradio as gr

from ..book.errors import ExplorerError
from ..runtime import heap
from . import prefs
from .i18n import say, t

log = logging.getLogger("gpt_explorer")

PREF_PARAMETERS = [inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=None)
                   for name in ("lang", "lecture")]


def _error(text: str) -> gr.Error:
    # It stays until it is closed: a lecturer may be talking when it comes.
    return gr.Error(text, duration=None, print_exception=False)


def shown_error(exc: BaseException, name: str) -> gr.Error:
    """The gr.Error the page shows for ``exc`` raised in handler ``name``, logged once."""
    if isinstance(exc, ExplorerError):
        # (a reason kept from the page, such as why a server path was refused, is logged)
        log.info("%s refused: %s", name, " ".join([str(exc), *getattr(exc, "__notes__", ())]))
        return _error(say(exc.message))
    if isinstance(exc, gr.Error):        # Gradio's own (ZeroGPU's quota), or a test's
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


def handler(outputs=(), name: str | None = None):
    """Wrap an event's function: view settings, errors, memory (see the module's doc).
    ``outputs``: the names of the components it may update."""
    def wrap(fn):
        label = name or fn.__name__
        signature = inspect.signature(fn)
        positional = [p for p in signature.parameters.values()
                      if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]

        def split(args, kwargs):
            """(fn's own arguments, the view settings of this call)."""
            kwargs = dict(kwargs)
            given = [kwargs.pop("lang", None), kwargs.pop("lecture", None)]
            if len(args) > len(positional):
                given = (list(args[len(positional):]) + [None, None])[:2]
                args = args[:len(positional)]
            if given == [None, None]:
                return args, kwargs, prefs.current()
            now = prefs.current()
            try:
                settings = prefs.parse(now.lang if given[0] is None else given[0],
                                       now.lecture if given[1] is None else given[1])
            except ExplorerError as exc:
                raise shown_error(exc, label) from None
            return args, kwargs, settings

        def checked(result):
            allowed = declared(wrapper)
            if not isinstance(result, dict) or not set(result) <= set(allowed):
                got = sorted(result) if isinstance(result, dict) else type(result).__name__
                raise RuntimeError(f"{label} returned {got}, not some of its outputs "
                                   f"{list(allowed)}")
            return result

        if inspect.isgeneratorfunction(fn):
            @functools.wraps(fn)
            def wrapper(*args, **kwargs):
                args, kwargs, settings = split(args, kwargs)
                # Gradio runs each step of a generator in a context of its own.
                steps = fn(*args, **kwargs)
                try:
                    for result in prefs.each_step_using(settings, steps):
                        yield checked(result)
                except Exception as exc:  # noqa: BLE001 - said to the user
                    with prefs.using(settings):
                        raise shown_error(exc, label) from None
                finally:
                    steps.close()   # stopped by the page (Stop, a closed tab): end the work
                    heap.trim()
        else:
            @functools.wraps(fn)
            def wrapper(*args, **kwargs):
                args, kwargs, settings = split(args, kwargs)
                with prefs.using(settings):
                    try:
                        return checked(fn(*args, **kwargs))
                    except Exception as exc:  # noqa: BLE001 - said to the user
                        raise shown_error(exc, label) from None
                    finally:
                        heap.trim()
        wrapper.__signature__ = signature.replace(
            parameters=[*signature.parameters.values(), *PREF_PARAMETERS])
        wrapper.outputs = (outputs,) if callable(outputs) else tuple(outputs)
        return wrapper
    return wrap


def declared(fn) -> tuple[str, ...]:
    """The output names of handler ``fn``: its own, and those of any function among them
    (``refresh.new_model_outputs``: known once every tab has registered)."""
    names = []
    for item in fn.outputs:
        names += list(item()) if callable(item) else [item]
    return tuple(dict.fromkeys(names))
