"""The page: the title and its toggles, the status line and the tabs (``explorer.app.tabs``),
composed and wired by name (``page.Page``); the style sheet and the script the page runs."""
from __future__ import annotations

import json
from pathlib import Path

import gradio as gr

from . import gradio_private, prefs, prompts, refresh, share_view
from .handlers import handler
from .i18n import label, t
from .zerogpu_note import zerogpu_note
from ..book.errors import Message
from ..runtime import heap
from .languages import LANGUAGES, messages
from .page import Page
from .plots.generation import NEXT_TOKEN_CSS
from .plots.model import ARCHITECTURE_CSS
from .plots.walk import STAGE_CSS
from .session import Session
from .shared import NO_MODEL_STATUS
from .tabs import TABS, build, knockout_map, pin, train

STATIC = Path(__file__).parent / "static"
LOCALES = {code: locale for code, (_, locale) in LANGUAGES.items()}   # Gradio's, by language
# The kinds of Gradio's message boxes, which it titles in English (each other language's words
# for them: TOAST_CSS).
TOAST_TITLES = {"error": Message("toast.error", "Error"),
                "warning": Message("toast.warning", "Warning")}


def _toast_title_css(locale: str, kind: str, word: str) -> str:
    """In another language, the title's English word hidden and that language's word shown in
    its place (the count of messages kept), by the page's lang (page.js sets it to the locale).
    Should Gradio rename its classes, the boxes are titled in English again."""
    title = f"html:lang({locale}) .toast-title.{kind}"
    return (f"{title} {{font-size: 0;}}\n"
            f"{title}::before, {title} > * {{font-size: var(--text-lg);}}\n"
            f"{title}::before {{content: {json.dumps(word, ensure_ascii=False)};}}\n")


TOAST_CSS = "".join(_toast_title_css(LOCALES[code], kind, messages(code)[m.id])
                    for code in LANGUAGES for kind, m in TOAST_TITLES.items()
                    if m.id in messages(code))
CSS = ((STATIC / "page.css").read_text() + NEXT_TOKEN_CSS + ARCHITECTURE_CSS + STAGE_CSS
       + share_view.SHARE_CSS + TOAST_CSS)
# Run by the page when it loads (page.js), with each language's Gradio locale and the switch
# of Gradio's locale (which has no public way).
JS = ("() => { (" + (STATIC / "page.js").read_text()
      + f")({json.dumps(LOCALES)}, {gradio_private.SWITCH_LOCALE_JS}); }}")


@refresh.renders(*(f"{tab.ID}_tab" for tab in TABS))
def _tab_titles(session) -> dict:
    """The tabs' titles in the page's language (the browser's translation, made when the page
    loaded, stays until they are sent again)."""
    return {f"{tab.ID}_tab": gr.update(label=t(*tab.TITLE)) for tab in TABS}


@handler(outputs=("session",))
def view_settings(session, lang, lecture):
    """/view_settings: the language ("en", "zh") and lecture mode (true or false) of this
    session's texts and figures from now on (the page's toggles set them too)."""
    session.prefs = prefs.parse(lang, lecture)
    return {"session": session}


@handler(outputs=("session", "zerogpu_note", refresh.all_outputs))
def redrawn(session, lang, lecture, request: gr.Request = None):
    """A toggle changed: the session's settings, and every view drawn again in them (streams
    follow at their next update; the Train tab's job is known by the session's hash)."""
    view_settings(session, lang, lecture)
    if request is not None and getattr(request, "session_hash", None):
        session.session_hash = request.session_hash
    with prefs.using(session.prefs):
        return {"session": session, **zerogpu_note(session, request),
                **refresh.render_all(session)}


def header(page):
    with gr.Row(elem_id="header", equal_height=False):
        gr.Markdown(label("page.title", "# GPT Explorer\nBuild the GPT of *Build a Large "
                                        "Language Model (From Scratch)*, chapter 4, and watch "
                                        "it work."), elem_id="title")
        lang = page.add(gr.Radio([(name, code) for code, (name, _) in LANGUAGES.items()],
                                 value="en", label=label("page.language", "language"),
                                 show_label=False, container=False, elem_id="lang", scale=0))
        lecture = page.add(gr.Checkbox(False, label=label("page.lecture", "lecture mode"),
                                       container=False, elem_id="lecture", scale=0))
        share = share_view.copy_button()
        share.render()
    return lang, lecture, share


def build_app() -> gr.Blocks:
    # delete_cache: the files Gradio serves (the exports) are removed an hour after they were
    # made, checked hourly; Gradio's default keeps them until the server stops.
    with gr.Blocks(title="GPT Explorer", delete_cache=(3600, 3600)) as demo:
        page = Page(demo)
        demo.parts = page     # (its components and events by name, for tests)
        page.add(gr.State(Session()), "session")
        lang, lecture, share = header(page)
        share_view.create(page, share)
        page.add(gr.Markdown(label(NO_MODEL_STATUS.id, NO_MODEL_STATUS.text),
                             elem_id="status"))
        page.add(gr.Markdown(visible=False, elem_id="zerogpu_note"))   # zerogpu_note.py
        # One gr.Tabs, each tab with an id: a link's tab is chosen by an update of the Tabs.
        # A figure drawn while its tab was hidden is laid out again when the tab shows.
        with page.add(gr.Tabs(elem_id="tabs")):
            for tab in TABS:
                with gr.Tab(label(*tab.TITLE), id=tab.ID) as block:
                    page.add(block, f"{tab.ID}_tab")
                    page.tab = tab.ID
                    tab.create(page)
                    page.tab = None
                block.select(None, None, None, js="() => gptExplorer.relayoutShown()",
                             api_visibility="private")
        page.tab_ids = tuple(tab.ID for tab in TABS)
        for tab in TABS:
            page.tab = tab.ID
            tab.wire(page)
        page.tab = None
        share_view.wire(page)
        prompts.wire(page)

        # The language or lecture mode changed: the page's own part first (Gradio's locale,
        # the style sheet's lecture class), then the session's settings, and every view is
        # drawn again.
        for toggle, js in ((lang, "(lang) => gptExplorer.setLang(lang)"),
                           (lecture, "(on) => gptExplorer.setLecture(on)")):
            drawn = page.then(toggle.change(None, toggle, None, js=js), redrawn,
                              ["session", "lang", "lecture"], api_visibility="private",
                              show_progress="hidden")
            drawn.then(None, None, None, js="() => gptExplorer.restorePlace()",
                       api_visibility="private")
        # The API's way to them (a client has no toggles to click); the button is never shown.
        page.add(gr.Button(visible=False, elem_id="view_settings_btn"))
        page.on("view_settings_btn.click", view_settings, ["session", "lang", "lecture"],
                api_name="view_settings", show_progress="hidden")
        # The page's first language: the link's ?lang=, else the browser's.
        demo.load(None, None, lang, js="() => gptExplorer.initialLang()")
        page.on(demo.load, build.path_box, [], api_visibility="private",
                show_progress="hidden")
        page.on(demo.load, zerogpu_note, ["session"], api_visibility="private",
                show_progress="hidden")
        # The browser tab (or API client) went away: forget the session now, not after
        # Gradio's one-hour grace period; its training job and trained models go with it.
        forget_closed_sessions(demo, on_close=[train.release, pin.release, knockout_map.release])
    return demo


def forget_closed_sessions(demo: gr.Blocks, on_close=()) -> None:
    """On every disconnect (``demo.unload``), forget that session, after each of ``on_close``
    (``release(session_hash)``) has let go of what it holds for it. One unload event: a second
    one would bring Gradio's entry for the session back after it was forgotten."""
    def forget_closed_session(request: gr.Request):
        session_hash = getattr(request, "session_hash", None)
        if session_hash:
            for release in on_close:
                release(session_hash)
        gradio_private.forget_session(demo, session_hash)
        heap.trim()      # what it held goes back to the system now, not at the next request

    demo.unload(forget_closed_session)
