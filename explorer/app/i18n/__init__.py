"""The page in English or 简体中文.

English text is the key: ``t("Trace a prompt first.")`` is that sentence in English and its
translation from the catalogue (``ZH``) in Chinese; a text without a translation stays English.

- ``label(text)``: a widget's label, a choice's name or a static Markdown, translated in the
  browser by Gradio's own i18n (``I18N``, given to ``launch``), by the browser's locale or the
  page's language toggle (``static/page.js``).
- ``t(template, **values)``: text that the server makes (status lines, notes, figures, tables,
  error messages), in the language of the call being handled (``prefs.current()``).
- ``translate(message)``: a message from the core (``book``, ``probes``, ``runtime``: English
  f-strings, raised as ``ValueError``). Its catalogue key is the f-string as written in the
  source, ``{...}`` fields included (``ast.unparse``'s spelling), so a message is matched field
  by field and each field's text goes into the Chinese sentence.
"""
from __future__ import annotations

import functools
import re

import gradio as gr

from ..prefs import current
from .zh_compare import ZH_COMPARE
from .zh_core import ZH_CORE
from .zh_share import ZH_SHARE
from .zh_ui import ZH_UI

ZH: dict[str, str] = {**ZH_CORE, **ZH_UI, **ZH_COMPARE, **ZH_SHARE}

# Gradio's frontend translates, for the browser's locale (zh-CN), the texts given to ``label``:
# only those. (It translates any text of the page that is one of its keys, a dropdown's choice
# names too: a name translated there, not by the server, comes back as the dropdown's value.)
_BROWSER: dict[str, str] = {}
I18N = gr.I18n(**{"zh-CN": _BROWSER})

_FIELD = re.compile(r"\{([^{}]+)\}")


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


def translate(message: str) -> str:
    """A message of the core (or of Gradio) in the current language; unknown: as it came."""
    if current().lang == "en" or not isinstance(message, str) or not message:
        return message
    if message in ZH and "{" not in message:
        return ZH[message]
    for pattern, fields, chinese in _patterns():
        found = pattern.fullmatch(message)
        if found:
            # a value that is itself a catalogue entry (a variant's name) is translated too,
            # unless it is quoted (!r): what the user typed, shown as typed
            values = {f: v if f.endswith("!r") else ZH.get(v, v)
                      for f, v in zip(fields, found.groups())}
            return _FIELD.sub(lambda m: values.get(m.group(1), m.group(0)), chinese)
    return message


@functools.cache
def _patterns() -> list[tuple[re.Pattern, list[str], str]]:
    """Each templated key as a regular expression (a field matches any text), the templates
    with most fixed text first, so that a general one never shadows a specific one."""
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
                regex += f"(?:.+?)"         # a field repeated: the first one's value is kept
            else:
                seen.add(part)
                fields.append(part)
                regex += "(.+?)"
        fixed = sum(len(p) for p in parts[::2])
        out.append((fixed, re.compile(regex, re.DOTALL), fields, chinese))
    out.sort(key=lambda item: -item[0])
    return [(pattern, fields, chinese) for _, pattern, fields, chinese in out]
