"""Every use of Gradio's private parts, in one place (``tests/test_gradio_private.py`` pins
each to the pinned Gradio, 6.31): where a public API exists, the app uses it instead.

- A closed session's entry in Gradio's state holder (``forget_session``): Gradio deletes only
  its State values when the tab goes away, and keeps the entry (a copy of the page's config,
  about 300 KB) until 10,000 newer sessions push it out.
- Gradio's file cache (``cache_folder``, ``save_to_cache``): the exports are served from it
  and removed with it (``delete_cache``).
- How a translated label appears in Gradio's API description (``label_key``).
- The data an event came with (``event_data``): ``gr.SelectData`` reads its keys before the
  handler runs, so a forged select event failed in Gradio, not with a message.
- The page's language switch (``SWITCH_LOCALE_JS``, run in the browser): Gradio's public i18n
  (``gr.I18n``) follows the browser's language, and only Gradio's own Settings panel changes
  it; there is no public call, nor a ``?lang=`` parameter.
"""
from __future__ import annotations

import json

import gradio as gr
from gradio import processing_utils, utils

PINNED_GRADIO = "6.31.0"

# A JS function (locale) => Promise<bool>: Gradio's labels switched to ``locale`` (true), or
# Gradio's switch not found (false). It makes the call that Gradio's Settings panel makes,
# ``changeLocale`` of Gradio's core module: the page loaded that module already (its file name
# carries a content hash, /assets/core-<hash>.js, found among the page's loaded resources), and
# importing it again gives the same module.
SWITCH_LOCALE_JS = r"""(locale) => {
  const url = performance.getEntriesByType("resource").map((e) => e.name)
    .find((name) => /\/assets\/core-[\w-]+\.js$/.test(name));
  return (url ? import(url) : Promise.resolve(null)).then((core) => {
    if (!core || typeof core.changeLocale !== "function") return false;
    core.changeLocale(locale);
    return true;
  });
}"""


def forget_session(demo: gr.Blocks, session_hash: str | None) -> bool:
    """Drop a session's State values (running their ``delete_callback``) and Gradio's entry
    for it. True if there was one."""
    holder = getattr(demo, "state_holder", None)   # set by Gradio when the app starts
    if holder is None or not session_hash or session_hash not in holder:
        return False
    holder.delete_state(session_hash)
    with holder.lock:
        holder.session_data.pop(session_hash, None)
        holder.time_last_used.pop(session_hash, None)
    return True


def event_data(event: gr.EventData):
    """What the page (or an API call, any JSON value) sent with ``event``, unchecked."""
    return event._data


_I18N_PREFIX = "__i18n__"   # how Gradio writes a translated label into its API description


def label_key(text) -> str | None:
    """The id of a translated label (a ``gr.I18nData``, or its form in Gradio's API
    description); None for plain text."""
    if hasattr(text, "key"):
        return text.key
    if isinstance(text, str) and text.startswith(_I18N_PREFIX):
        try:
            return json.loads(text[len(_I18N_PREFIX):]).get("key")
        except (ValueError, AttributeError):
            return None
    return None


def cache_folder() -> str:
    return utils.get_upload_folder()


def save_to_cache(data: bytes, name: str) -> str:
    return processing_utils.save_bytes_to_cache(data, name, cache_dir=cache_folder())
