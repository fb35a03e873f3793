"""The page in every language of ``languages.LANGUAGES`` (one catalogue file each).

Each text is written once, in English, where it is made, with a stable id and named fields:

- ``t(id, text, **fields)``: text the server makes (status lines, notes, figures, tables, the
  app's messages) in the language of the call being handled (``prefs.current()``);
- ``say(message)``: a ``Message`` (the core's, or ``t``'s) or an ``ExplorerError`` in that
  language; a field that is itself a message is said in it too;
- ``label(id, text)``: a widget's label, a choice's name or a static Markdown, translated in the
  browser by Gradio's own i18n (``browser_i18n()``, given to ``launch`` once the page is made),
  by the browser's locale or the page's language toggle (``static/page.js``). Its keys are ids,
  so no text of the page is ever mistaken for one.
"""
from __future__ import annotations

import gradio as gr

from ...book.errors import ExplorerError, Message
from ..prefs import current
from ..languages import LANGUAGES, messages

# The browser's catalogues (by Gradio locale): only the labels' texts, filled as the page's
# widgets are made.
_BROWSER: dict[str, dict[str, str]] = {locale: {} for _, locale in LANGUAGES.values()}


_KEY = gr.I18n()    # its call makes a label's key for the browser (the catalogues: below)


def browser_i18n() -> gr.I18n:
    """Gradio's i18n for ``launch``: every label of the page made so far, in every language
    (call it once the page is made)."""
    return gr.I18n(**{locale: dict(texts) for locale, texts in _BROWSER.items()})


def text_in(lang: str, message: Message) -> str:
    """``message``'s text (its template, fields not filled in) in ``lang``."""
    if lang == "en":
        return message.text
    return messages(lang).get(message.id, message.text)


def say(message, lang: str | None = None) -> str:
    """A message in the page's language (or ``lang``); plain text stays as it is."""
    if isinstance(message, ExplorerError):
        message = message.message
    elif isinstance(getattr(message, "message", None), Message):
        message = message.message                 # a Text: a str that carries its message
    if not isinstance(message, Message):
        return message
    lang = lang or current().lang
    values = {k: say(v, lang) if isinstance(v, (Message, ExplorerError))
              or isinstance(getattr(v, "message", None), Message) else v
              for k, v in message.fields.items()}
    text = text_in(lang, message)
    return text.format(**values) if values else text   # (a text without fields: as written)


def t(id: str, text: str, **fields) -> str:
    """``text`` (English, with ``{fields}``) in the page's language."""
    return say(Message(id, text, **fields))


def english(id: str) -> str:
    """The English text of a label's ``id``."""
    return _BROWSER["en"].get(id, id)


def label(id: str, text: str):
    """A widget's text for the browser to translate (``browser_i18n``)."""
    for code, (_, locale) in LANGUAGES.items():
        _BROWSER[locale][id] = text_in(code, Message(id, text))
    return _KEY(id)
