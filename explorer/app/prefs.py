"""The page's two view settings, language and lecture mode, which every handler's text and
figures follow.

They are the session's (``Session.prefs``): the header's toggles (``lang``: a language of
``languages.LANGUAGES``; ``lecture``: true or false) set them, and so does the API's
``/view_settings``. ``handlers.handler`` puts the session's in place for the duration of a
handler's call (a context variable, as a web framework holds a request's locale), so that
``i18n.t`` and the figures' style (``plots.style``) read them without every function passing
them on.
"""
from __future__ import annotations

import contextvars
from contextlib import contextmanager
from dataclasses import dataclass

from ..book.errors import ExplorerError
from .languages import LANGUAGES


@dataclass(frozen=True)
class Prefs:
    lang: str = "en"
    lecture: bool = False


_CURRENT: contextvars.ContextVar[Prefs] = contextvars.ContextVar("gpt_explorer_prefs",
                                                                 default=Prefs())


def current() -> Prefs:
    return _CURRENT.get()


@contextmanager
def using(prefs: Prefs):
    token = _CURRENT.set(prefs)
    try:
        yield prefs
    finally:
        _CURRENT.reset(token)


def each_step_using(prefs_now, steps):
    """The values of the generator ``steps``, each step computed under ``prefs_now()`` (read
    again for each: a toggle changes a stream's next step): Gradio (and ZeroGPU's worker) run
    each step of a generator in a context of their own."""
    while True:
        with using(prefs_now()):
            try:
                value = next(steps)
            except StopIteration:
                return
        yield value


def parse(lang, lecture) -> Prefs:
    """The two toggles' values as an API call may send them (checked: any JSON value can
    arrive)."""
    if lang is None:
        lang = "en"
    if not isinstance(lang, str) or lang not in LANGUAGES:
        raise ExplorerError("prefs.lang", "lang must be one of {options} (got {value}).",
                            options=", ".join(LANGUAGES),
                            value=repr(lang) if isinstance(lang, str) else type(lang).__name__)
    if lecture is None:
        lecture = False
    if not isinstance(lecture, bool):
        raise ExplorerError("prefs.lecture", "lecture must be true or false (got {kind}).",
                            kind=type(lecture).__name__)
    return Prefs(lang, lecture)
