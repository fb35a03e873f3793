"""The page's two view settings, language and lecture mode, which every handler's text and
figures follow.

The header's toggles (``lang``: "en" or "zh"; ``lecture``: true or false) are the last two
inputs of every event, so the API has them too, as optional ``lang`` and ``lecture``
parameters. ``shared.friendly`` puts them in place for the duration of a handler's call (a
context variable, as a web framework holds a request's locale), so that ``i18n.t`` and the
figures' style (``plots.style``) read them without every function passing them on.
"""
from __future__ import annotations

import contextvars
from contextlib import contextmanager
from dataclasses import dataclass

LANGS = {"en": "English", "zh": "中文"}   # ours; the browser's Gradio locale for "zh" is zh-CN
GRADIO_LOCALES = {"en": "en", "zh": "zh-CN"}


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


def each_step_using(prefs: Prefs, steps):
    """The values of the generator ``steps``, each step computed under ``prefs``: Gradio (and
    ZeroGPU's worker) run each step of a generator in a context of their own."""
    while True:
        with using(prefs):
            try:
                value = next(steps)
            except StopIteration:
                return
        yield value


def parse(lang, lecture) -> Prefs:
    """The two inputs as an API call may send them (checked: any JSON value can arrive)."""
    if lang is None:
        lang = "en"
    if not isinstance(lang, str) or lang not in LANGS:
        got = repr(lang) if isinstance(lang, str) else type(lang).__name__
        raise ValueError(f"lang must be one of {', '.join(LANGS)} (got {got}).")
    if lecture is None:
        lecture = False
    if not isinstance(lecture, bool):
        raise ValueError(f"lecture must be true or false (got {type(lecture).__name__}).")
    return Prefs(lang, lecture)
