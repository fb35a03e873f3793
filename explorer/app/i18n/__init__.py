"""The page in English or 简体中文.

Two kinds of text, two catalogues:

- The core's messages (``book``, ``probes``, ``runtime``, ``native``) are ``Message``s with a
  stable id and named fields (``explorer/book/errors.py``): raised as ``ExplorerError``, or
  handed out as ``Text`` (a ``str`` that carries its message: a caption, a note, a progress
  report). Their translations are ``<lang>.json`` beside this file, by id:
  ``{"language": {...}, "messages": {"<id>": "<text with the same {fields}>"}}``; the
  languages are the files present.
- The app's own texts are keyed by their English (``ZH``: ``zh_ui``, ``zh_share``,
  ``zh_compare``): ``t("Trace a prompt first.")`` is that sentence in English and its
  translation in Chinese; a text without a translation stays English.

- ``label(text)``: a widget's label, a choice's name or a static Markdown, translated in the
  browser by Gradio's own i18n (``I18N``, given to ``launch``), by the browser's locale or the
  page's language toggle (``static/page.js``).
- ``t(template, **values)``: text that the app makes (status lines, notes, figures, tables,
  error messages), in the language of the call being handled (``prefs.current()``).
- ``translate(x)``: a ``Message``, an ``ExplorerError``, a ``Text`` or a plain string (Gradio's
  own texts, the app's) in the current language.
"""
from __future__ import annotations

import functools
import json
import re
import string
from pathlib import Path

import gradio as gr

from ...book.errors import ExplorerError, Message
from ..prefs import current
from .zh_compare import ZH_COMPARE
from .zh_share import ZH_SHARE
from .zh_ui import ZH_UI

HERE = Path(__file__).resolve().parent
ZH: dict[str, str] = {**ZH_UI, **ZH_COMPARE, **ZH_SHARE}   # the app's texts, by their English

# Gradio's frontend translates, for the browser's locale (zh-CN), the texts given to ``label``:
# only those. (It translates any text of the page that is one of its keys, a dropdown's choice
# names too: a name translated there, not by the server, comes back as the dropdown's value.)
_BROWSER: dict[str, str] = {}
I18N = gr.I18n(**{"zh-CN": _BROWSER})

_FIELD = re.compile(r"\{([^{}]+)\}")


@functools.cache
def catalogue(lang: str) -> dict:
    """``<lang>.json``: its ``language`` (name, locale) and ``messages`` (id -> text); empty
    for English, the messages' own language, or a language without a file."""
    path = HERE / f"{lang}.json"
    if lang == "en" or not path.is_file():
        return {"language": {}, "messages": {}}
    return json.loads(path.read_text(encoding="utf-8"))


def label(text: str) -> gr.I18nData | str:
    """A widget's text for the browser to translate (``I18N``)."""
    if text not in ZH:
        return text
    _BROWSER[text] = ZH[text]
    return I18N(text)


def t(template: str, **values) -> str:
    """``template`` in the current language, its ``{fields}`` filled from ``values``."""
    text = ZH.get(template, template) if current().lang == "zh" else template
    return text.format(**values) if values else text


def message_of(exc: BaseException) -> Message | str:
    """What a refusal says: an ``ExplorerError``'s message, else the exception's text."""
    return exc.message if isinstance(exc, ExplorerError) else str(exc)


def translate(x):
    """``x`` in the current language: a ``Message`` (or an ``ExplorerError``'s, or a ``Text``'s)
    by its id, falling back to its English; a plain string by the app's catalogue; anything
    else as it came."""
    if isinstance(x, ExplorerError):
        x = x.message
    elif isinstance(getattr(x, "message", None), Message) and isinstance(x, str):
        x = x.message                                        # a Text
    lang = current().lang
    if isinstance(x, Message):
        return say(x, lang)
    if lang == "en" or not isinstance(x, str) or not x:
        return x
    return _app_text(x)


def say(message: Message, lang: str) -> str:
    """``message`` in ``lang``: its translation by id (English where it has none), each field
    that is a message said in ``lang`` too, and each plain field that is one of the app's
    texts (a variant's name, the default story's) translated unless it is quoted (``!r``: what
    the user typed, shown as typed)."""
    template = catalogue(lang)["messages"].get(message.id)
    if template is None:
        template = message.text
    quoted = {name for _, name, _, conversion in string.Formatter().parse(template)
              if name and conversion == "r"}
    values = {}
    for name, value in message.fields.items():
        if isinstance(value, str) and isinstance(getattr(value, "message", None), Message):
            value = value.message                            # a Text
        if isinstance(value, Message):
            value = say(value, lang)
        elif lang != "en" and isinstance(value, str) and name not in quoted:
            value = ZH.get(value, value) if lang == "zh" else value
        values[name] = value
    try:
        return template.format(**values)
    except (KeyError, IndexError, ValueError):   # a translation with a broken field: English
        return message.text.format(**values)


def _app_text(text: str) -> str:
    """One of the app's texts, whole or made from one of its templates."""
    if text in ZH and "{" not in text:
        return ZH[text]
    for pattern, fields, chinese in _patterns():
        found = pattern.fullmatch(text)
        if found:
            # a value that is itself an entry (a variant's name) is translated too, unless it
            # is quoted (!r): what the user typed, shown as typed
            values = {f: v if f.endswith("!r") else ZH.get(v, v)
                      for f, v in zip(fields, found.groups())}
            return _FIELD.sub(lambda m: values.get(m.group(1), m.group(0)), chinese)
    return text


@functools.cache
def _patterns() -> list[tuple[re.Pattern, list[str], str]]:
    """Each templated key of the app's catalogue as a regular expression (a field matches any
    text), for the app's texts made in English before they reach ``translate`` (a trained
    model's caption); the templates with most fixed text first, so that a general one never
    shadows a specific one."""
    out = []
    for key, chinese in ZH.items():
        parts = _FIELD.split(key)          # text, field, text, field, ..., text
        if len(parts) == 1:
            continue
        fields, regex, seen = [], "", set()
        for i, part in enumerate(parts):
            if i % 2 == 0:
                regex += re.escape(part)
            elif part in seen:
                regex += "(?:.+?)"          # a field repeated: the first one's value is kept
            else:
                seen.add(part)
                fields.append(part)
                regex += "(.+?)"
        fixed = sum(len(p) for p in parts[::2])
        out.append((fixed, re.compile(regex, re.DOTALL), fields, chinese))
    out.sort(key=lambda item: -item[0])
    return [(pattern, fields, chinese) for _, pattern, fields, chinese in out]
