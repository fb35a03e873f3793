"""The page's shareable link: the "Copy link" button (its box shows the link, and the page
copies it to the clipboard), and a link opened: the widgets, the tab and the model it names.

The logic is ``share`` (no Gradio): this module maps widgets to it. Opening a link:
``demo.load`` hands ``window.location.search`` to ``open_link`` (through ``js=``), which sets
the Build tab's widgets and the prompts, and says what it could not use (a warning and a
note, in the page's language). Then, if the link names a model, the page chooses the link's
tab and presses Build (``gptExplorer.openFromLink``), so the model is built exactly as the
button builds it: random weights from the config and seed, or pretrained GPT-2 of a size.

The defaults a link is measured against are the widgets' own first values, and the tabs are
the page's own ``gr.Tabs`` (one source of truth: the page).
"""
from __future__ import annotations

import inspect
import json
from types import SimpleNamespace

import gradio as gr

from ..book.config import PRESETS, GPTConfig
from ..book.load_weights import gpt2_config
from ..runtime.build import check_seed
from . import i18n, prefs
from .i18n import label, t
from .share import MAX_PROMPT_CHARS, LINK_WEIGHTS, Page, Rules, link_query, read_query
from .shared import CACHE, as_choice, as_int, friendly
from .tabs.build import _BY_FIELD, GPT2_SIZE_CHOICES, KNOBS, WEIGHTS_CHOICES

# The page's part (static/page.js): the link's query for open_link; after it, press Build if
# the link names a model; after "Copy link", the full address in the box and the clipboard.
# The button keeps its own size at the end of the header's row, as the toggles do.
SHARE_CSS = """
#header > #share_btn {flex: 0 0 auto !important; width: auto !important; min-width: 0 !important;}
"""
READ_LINK_JS = ("(query, lang, lecture) => [window.location.search, "
                "gptExplorer.initialLang(), lecture]")
OPEN_JS = "(builds, tab) => gptExplorer.openFromLink(builds, %s.indexOf(tab))"
COPY_JS = "(query) => gptExplorer.shareLink(query)"


def _message(problem) -> str:
    """A problem of ``share`` in the page's language. Its values are HTML-escaped (a link's
    text is anyone's, and the warning renders HTML); a refusal from the core is translated
    first, and so is what a value should have been."""
    values = {}
    for key, value in problem.values.items():
        if key == "message":
            value = i18n.translate(value)
        elif key == "what":
            value = t(value)
        values[key] = inert(value) if isinstance(value, str) else value
    return t(problem.text, **values)


# HTML's special characters, and those Markdown would read as a link, emphasis or code, as
# entities (in one pass): the note (Markdown) and the warning (HTML) show them as themselves.
_INERT = str.maketrans({c: f"&#{ord(c)};" for c in "&<>\"'[]()*_`#!~|\\"})


def inert(text: str) -> str:
    """A link's text as a message can show it: neither HTML nor Markdown."""
    return text.translate(_INERT)


@friendly
def shown():
    """The link's row and box, once there is a link (the API's /share_link returns plain
    values; the page shows them in a second step)."""
    return gr.update(visible=True), gr.update(visible=True)


def copy_button():
    """The "Copy link" button, not rendered yet: the header puts it in its row."""
    return gr.Button(label("Copy link"), elem_id="share_btn", size="sm", scale=0,
                     min_width=130, render=False)


def create_ui(button):
    """The link's box and note, where this is called, and the hidden values the link needs;
    ``button``: ``copy_button()``. The row is hidden (it takes no room on a projector) until
    there is a link, or a message about the link that opened the page (then without the
    box)."""
    with gr.Row(elem_id="share_row", visible=False) as row:
        box = gr.Textbox(label=label("link to this page"), elem_id="share_link",
                         interactive=False, buttons=["copy"], visible=False, scale=3)
        note = gr.Markdown(elem_id="share_note")
    query = gr.Textbox(visible=False, elem_id="link_query")       # the link that opened it
    tab = gr.Textbox("build", visible=False, elem_id="current_tab")
    builds = gr.Checkbox(False, visible=False, elem_id="link_builds")
    return SimpleNamespace(button=button, row=row, box=box, note=note, query=query, tab=tab,
                           builds=builds)


def create_event_handlers(ui, demo, tabs, build_tab, prompts, state, view):
    """``tabs``: the page's gr.Tabs; ``build_tab``: the Build tab's widgets; ``prompts``: the
    Inside tab's prompt (the one a link carries) and any other prompt box it fills too."""
    pages = [tab for tab in tabs.children if isinstance(tab, gr.Tab)]
    ids = tuple(str(tab.id) for tab in pages)
    ui.tab.value = ids[0]
    default = Page(preset=build_tab.preset.value,
                   config=GPTConfig.from_dict({k: w.value for k, w in
                                               zip(KNOBS, build_tab.knobs)}),
                   weights=build_tab.weights.value, size=build_tab.size.value,
                   seed=int(build_tab.seed.value), prompt=prompts[0].value, tab=ids[0],
                   lang=view[0].value)
    rules = Rules(default=default, tabs=ids, sizes=GPT2_SIZE_CHOICES,
                  check_config=lambda cfg: CACHE.check_budget(cfg),
                  check_size=lambda size: CACHE.check_budget(
                      gpt2_config(f"gpt2-{size}"), what=f"pretrained GPT-2 {size}"))

    # The tab in view, for the link: each tab says so when it is chosen (no server call).
    for tab in pages:
        tab.select(None, None, ui.tab, js=f"() => {json.dumps(str(tab.id))}",
                   api_visibility="private")

    @friendly
    def open_link(query):
        reading = read_query(query, rules)
        messages = [_message(p) for p in reading.problems]
        if messages:
            gr.Warning("<br>".join(messages))
        note, row = ((t("**This link could not be used in full:**") + "\n\n"
                      + "\n".join(f"- {m}" for m in messages), gr.update(visible=True))
                     if messages else (gr.skip(), gr.skip()))
        if not reading.builds:
            return (*[gr.skip()] * (5 + len(KNOBS) + len(prompts)), False, note, row)
        page = reading.page
        knobs = [getattr(page.config, k) for k in KNOBS]
        return (page.preset, *knobs, page.seed, page.weights, page.size,
                *[page.prompt] * len(prompts), page.tab, True,
                note, row)

    signature = inspect.Signature(
        [inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD)
         for name in ("preset", *KNOBS, "seed", "weights", "size", "prompt", "tab", "state")])

    def share_link(*args):
        """/share_link: the query string ("?...") of a link to this page (the page adds its
        address), and a note on what the link cannot carry."""
        given = signature.bind(*args).arguments
        preset = as_choice(given["preset"], "preset", PRESETS)
        weights = as_choice(given["weights"], "weights", WEIGHTS_CHOICES)
        size = as_choice(given["size"], "size", GPT2_SIZE_CHOICES)
        tab = as_choice(given["tab"], "tab", ids)
        seed = check_seed(as_int(given["seed"], "seed"))   # a link that could never build
        prompt = given["prompt"]
        if not isinstance(prompt, str):
            raise gr.Error(t("The prompt must be text."))
        notes = []
        config = GPTConfig.from_dict({k: _BY_FIELD[k].parse(given[k]) for k in KNOBS})
        if weights not in LINK_WEIGHTS:
            notes.append(t("A link cannot carry a checkpoint file: it opens this config "
                           "with random weights (seed {seed}).", seed=seed))
            weights = "random"
        session = given["state"] if isinstance(given["state"], dict) else {}
        if (session.get("status") or {}).get("kind") == "trained":
            notes.append(t("A link cannot carry the weights trained in the Train tab: it "
                           "opens the Build tab's config and weights."))
        if len(prompt) > MAX_PROMPT_CHARS or not prompt.strip():
            if prompt.strip():
                notes.append(t("The prompt has {n:,} characters; a link carries at most "
                               "{most:,}, so it opens with the default prompt.",
                               n=len(prompt), most=MAX_PROMPT_CHARS))
            prompt = default.prompt
        if weights == "random":
            rules.check_config(config)   # the memory budget: a link that could never build
        page = Page(preset=preset, config=config, weights=weights, size=size, seed=seed,
                    prompt=prompt, tab=tab, lang=prefs.current().lang)
        note = t("This link opens the page with this model, prompt and tab; the page copied "
                 "it to the clipboard (or copy it from the box).")
        return link_query(page, rules), " ".join([note, *notes])

    share_link.__signature__ = signature
    share_link = friendly(share_link)

    opened = demo.load(
        open_link, [ui.query, *view],
        [build_tab.preset, *build_tab.knobs, build_tab.seed, build_tab.weights, build_tab.size,
         *prompts, ui.tab, ui.builds, ui.note, ui.row],
        js=READ_LINK_JS, api_visibility="private", show_progress="hidden")
    # The link's tab is chosen in the page, as a click would choose it: an update of the
    # gr.Tabs (gr.Tabs(selected=...), even gr.skip()) makes Gradio mount every tab's widgets
    # again, and a widget whose value is one of the browser's i18n keys (the Train tab's
    # "the default story") then comes back translated, which its handler refuses.
    opened.success(None, [ui.builds, ui.tab], None, js=OPEN_JS % json.dumps(ids),
                   api_visibility="private")
    ui.button.click(
        share_link, [build_tab.preset, *build_tab.knobs, build_tab.seed, build_tab.weights,
                     build_tab.size, prompts[0], ui.tab, state, *view],
        [ui.box, ui.note], api_name="share_link", show_progress="hidden") \
        .success(shown, view, [ui.row, ui.box], api_visibility="private",
                 show_progress="hidden") \
        .success(None, ui.box, ui.box, js=COPY_JS, api_visibility="private")
    return opened
