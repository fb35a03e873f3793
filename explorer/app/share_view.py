"""The page's shareable link: the "Copy link" button (its box shows the link, which the page
copies to the clipboard), and a link opened (``demo.load`` hands ``window.location.search`` to
``open_link``): the Build tab's widgets, the prompts, the tab, the model the link names, built
as the Build button builds it, and every view drawn from the session. What a link could not
use is said, in the page's language. The link itself is ``runtime.links`` (no Gradio)."""
from __future__ import annotations

import inspect
import json
from dataclasses import dataclass, replace

import gradio as gr

from ..book.config import GPTConfig
from ..book.errors import ExplorerError, Message
from ..book.load_weights import gpt2_config
from ..probes.interventions import Interventions
from ..probes.prompts import prompt_text
from ..runtime.links import (MAX_LINK_PROMPT_CHARS, LINK_WEIGHTS, VIEW_TABS, Page, Rules,
                             link_query, read_query)
from . import comparison, pickers, prefs, prompts, refresh
from .handlers import handler
from .i18n import label, say, t
from .inputs import as_choice
from .languages import LANGUAGES
from .pickers import choose, chosen
from .session import AttentionShown, Changed, Prompt, View
from .shared import CACHE, status_line
from .tabs import build
from .tabs.knockout_map import MapView
from .tabs.patching import PatchPair
from .textbox import Textbox

# The button keeps its own size at the end of the header's row, as the toggles do.
SHARE_CSS = """
#header > #share_btn {flex: 0 0 auto !important; width: auto !important; min-width: 0 !important;}
#share_row {position: relative;}
#share_close_btn {flex: 0 0 auto !important; min-width: 0 !important;}
"""
READ_LINK_JS = ("(query, session, lang, device, dtype) => [window.location.search, "
                "session, gptExplorer.initialLang(), device, dtype]")
COPY_JS = "(query) => gptExplorer.shareLink(query)"


def _message(problem: Message) -> str:
    """A problem of ``links`` in the page's language. Its values are HTML-escaped (a link's
    text is anyone's, and the warning renders HTML); a refusal from the core is said in the
    page's language first."""
    values = {}
    for key, value in problem.fields.items():
        value = say(value) if isinstance(value, (Message, ExplorerError)) else value
        values[key] = inert(value) if isinstance(value, str) else value
    return say(Message(problem.id, problem.text, **values))


# HTML's special characters, and those Markdown would read as a link, emphasis or code, as
# entities (in one pass): the note (Markdown) and the warning (HTML) show them as themselves.
_INERT = str.maketrans({c: f"&#{ord(c)};" for c in "&<>\"'[]()*_`#!~|\\"})


def inert(text: str) -> str:
    """A link's text as a message can show it: neither HTML nor Markdown."""
    return text.translate(_INERT)


def rules_of(page) -> Rules:
    """The defaults a link is measured against (the widgets' first values), and the tabs."""
    default = Page(preset=page["preset"].value,
                   config=GPTConfig.from_dict({k: page[k].value for k in build.FIELDS}),
                   weights=page["weights"].value, size=page["gpt2_size"].value,
                   seed=int(page["seed"].value), prompt=page["trace_prompt"].value,
                   tab=page.tab_ids[0], lang=page["lang"].value)
    return Rules(default=default, tabs=page.tab_ids, sizes=build.GPT2_SIZE_CHOICES,
                 langs=tuple(LANGUAGES), check_config=CACHE.check_budget,
                 check_size=lambda size: CACHE.check_budget(
                     gpt2_config(f"gpt2-{size}"), what=f"pretrained GPT-2 {size}"))


# ---------------------------------------------------------------------------------------------
LINK_OUTPUTS = ("preset", *build.FIELDS, "seed", "weights", "gpt2_size", "trace_prompt",
                "gen_prompt", "current_tab", "share_note", "share_row", "session", "tabs",
                "lecture", "patch_clean", "patch_corrupted", "patch_right", "patch_wrong")


def open_link_handler(rules):
    @handler(outputs=(*LINK_OUTPUTS, refresh.all_outputs), name="open_link",
             inputs=("link_query", "session", "lang", "device", "dtype"))
    def open_link(query, session, lang, device, dtype):
        reading = read_query(query, rules)
        # The page's first language (the link's, else the browser's) and the link's lecture
        # mode are the session's at once: the toggles' own events, which set them too, may
        # come after this one.
        session.prefs = replace(session.prefs, lang=prefs.parse(lang, False).lang,
                                lecture=session.prefs.lecture or reading.page.lecture)
        with prefs.using(session.prefs):
            out = _opened(reading, session)
            if reading.builds:
                out.update(_built(session, reading.page, out.get("share_note"), device, dtype))
            if reading.page.pair:
                # the maps are computed, not carried (as the note on making a link says):
                # said after what the link could not use, so that its heading stays first
                out.update(share_row=gr.update(visible=True), share_note="\n\n".join(filter(
                    None, [out.get("share_note"), t(
                        "share.pair_maps", "The link filled the Patching tab's prompts and "
                                           "answers; its maps are computed, not carried: press "
                                           "**Patch** to draw them.")])))
            return out
    return open_link


def _opened(reading, session) -> dict:
    """The widgets, prompts and notes of a link read (``links.read_query``)."""
    messages = [_message(p) for p in reading.problems]
    p = reading.page
    # the page's toggle too (its change event sets the style)
    out = {"session": session, **({"lecture": True} if p.lecture else {})}
    if messages:
        gr.Warning("<br>".join(messages))
        out.update(_listed(None, messages))
    if not reading.builds:
        return out
    # The tab's layer and head wait in the session, not in its pickers: the model the link
    # builds fits the pickers to them (a head set before, beyond the picker's heads, was
    # refused by the language's redraw, racing the link).
    layer_picker, head_picker = VIEW_TABS.get(p.tab, (None, None))
    if layer_picker:
        choose(session, **{layer_picker: p.layer})
    if head_picker:
        choose(session, **{head_picker: p.head})
    prompts.use(session, p.prompt)
    if p.pair:
        # the pair fills the boxes and is the session's (a link made again carries it)
        session.show(PatchPair, texts=p.pair)
        out.update(zip(("patch_clean", "patch_corrupted", "patch_right", "patch_wrong"), p.pair))
    return {**out, "preset": p.preset, **{k: getattr(p.config, k) for k in build.FIELDS},
            "seed": p.seed, "weights": p.weights, "gpt2_size": p.size,
            **prompts.render(session), "current_tab": p.tab,
            "tabs": gr.Tabs(selected=p.tab)}   # (an update of the Tabs: no tab is mounted again)


def _built(session, p, note, device, dtype) -> dict:
    """The link's model (page ``p``) built (as the Build button builds it), its prompt traced
    for the Inside and Attention tabs, and every view drawn; or why not (the page keeps the
    rest). ``note``: the link's note so far."""
    left_out = []
    try:
        # (the Build button's handler: a refusal comes said, and logged, as a gr.Error)
        build.build(p.preset, *(getattr(p.config, k) for k in build.FIELDS), p.seed, device,
                    dtype, p.weights, p.size, session=session,
                    progress=lambda *args, **kwargs: None)
        if p.b:
            fitted = session.view(Changed)      # (what the build's fitting said stays said)
            try:
                comparison.intervened(session, Interventions.parse(p.b))
            except ExplorerError as refused:
                left_out.append(t("share.b_refused", "Model B ({spec}) does not fit this model: "
                                                     "{reason} The page shows A alone.",
                                  spec=inert(p.b), reason=say(refused.message)))
            session.views[Changed] = fitted
        if p.tab in ("inside", "attention"):
            prompts.trace_all(session, p.prompt)
        if p.tab == "attention":
            session.show(AttentionShown, on=True)      # (the link's layer and head)
    except (ExplorerError, gr.Error) as refused:
        reason = say(refused.message)
        gr.Warning(reason)
        return {"share_note": t("share.not_built", "**This link could not be opened in "
                                                   "full:** {reason} The page kept what it "
                                                   "could set; press **Build the model** to "
                                                   "try again.", reason=reason),
                "share_row": gr.update(visible=True), "status": status_line(session)}
    drawn = refresh.render_all(session)
    # What this model cannot show (a layer it lacks) is said with the link's other problems.
    changed = [say(n) for n in session.view(Changed).notes]
    if changed:
        left_out.append(t("share.fitted", "The link's choices were fitted to this model: "
                                          "{changes}.", changes="; ".join(changed)))
        session.forget(Changed)                  # (said here: not twice on the page)
        drawn["status"] = status_line(session)
    if left_out:
        drawn.update(_listed(note, left_out))
    return drawn


def _listed(note: str | None, problems: list) -> dict:
    """The link's note with ``problems`` listed under it (first: its heading)."""
    note = note or t("share.not_in_full", "**This link could not be used in full.**")
    return {"share_note": note + "\n\n" + "\n".join(f"- {m}" for m in problems),
            "share_row": gr.update(visible=True)}


def share_link(rules, *args):
    """/share_link: the query string ("?...") of a link to this page (the page adds its
    address), and a note on what the link cannot carry."""
    given = SHARE_SIGNATURE.bind(*args).arguments
    preset, weights, size = build.form_choices(given)
    config, seed = build.form_config(given)
    tab = as_choice(given["tab"], Message("field.tab", "tab"), rules.tabs)
    prompt = prompt_text(given["prompt"])
    notes = []
    if weights not in LINK_WEIGHTS:
        notes.append(t("share.no_file", "A link cannot carry a checkpoint file: it opens this "
                                        "config with random weights (seed {seed}).", seed=seed))
        weights = "random"
    session = given["session"]
    if session.models and session.models[0].made.how == "trained":
        notes.append(t("share.no_trained", "A link cannot carry the weights trained in the "
                                           "Train tab: it opens the Build tab's config and "
                                           "weights."))
    # The page's prompt box may be one the user has not typed in since another tab used
    # another prompt: then the session's prompt is the page's (an API client's is its own).
    boxes = session.view(Prompt)
    prompt = boxes.text if prompt == boxes.drawn else prompt
    if len(prompt) > MAX_LINK_PROMPT_CHARS or not prompt.strip():
        if prompt.strip():
            notes.append(t("share.prompt_long", "The prompt has {n:,} characters; a link "
                                                "carries at most {most:,}, so it opens with "
                                                "the default prompt.", n=len(prompt),
                           most=MAX_LINK_PROMPT_CHARS))
        prompt = rules.default.prompt
    if weights == "random":
        rules.check_config(config)   # the memory budget: a link that could never build
    b = str(session.models[1].key.interventions or "") if session.comparing else ""
    if session.comparing and not b:
        notes.append(t("share.no_pinned", "A link cannot carry a model B pinned beside A (only "
                                          "an intervention): it opens A alone."))
    pair = session.view(PatchPair).texts if tab == "patching" else ()
    if any(len(text) > MAX_LINK_PROMPT_CHARS for text in pair):
        notes.append(t("share.pair_long", "A prompt of the patching pair is longer than a link "
                                          "carries ({most:,} characters): the link leaves the "
                                          "pair out.", most=MAX_LINK_PROMPT_CHARS))
        pair = ()
    left = _choices_left_out(session, tab)
    if left:
        notes.append(t("share.choices_left", "A link does not carry this tab's other choices "
                                             "({which}): they open at their defaults.",
                       which=", ".join(left)))
    layer_picker, head_picker = VIEW_TABS.get(tab, (None, None))
    layer = int(chosen(session, layer_picker)) if layer_picker else 0
    head = str(chosen(session, head_picker)) if head_picker else "mean"
    page = Page(preset=preset, config=config, weights=weights, size=size, seed=seed,
                prompt=prompt, tab=tab, lang=prefs.current().lang, layer=layer, head=head,
                lecture=prefs.current().lecture, b=b, pair=pair)
    session.show(LinkBox, open=True)    # (new models close the box: render)
    note = t("share.note", "This link opens the page with this model and B's intervention, "
                           "the prompt, the tab with its layer and head (and the Patching "
                           "tab's pair), the language and lecture mode; the page copied it to "
                           "the clipboard (or copy it from the box). What was computed (a "
                           "generation, the knock-out and patching maps, a training job) is "
                           "not in it: press its button again there.")
    return {"share_row": gr.update(visible=True), "share_box": gr.update(visible=True),
            "share_link": link_query(page, rules), "share_note": " ".join([note, *notes])}


# A tab's choices that a link has no field for, by picker, with their widgets' labels; the
# Generate tab's settings are its widgets' own, which the session never sees.
UNCARRIED = {"inside": {"pair": ("inside.pair", "distribution"),
                        "heat_point": ("inside.heat_point", "heatmap: probe point"),
                        "heat_stat": ("inside.heat_stat", "heatmap: statistic")},
             "knockout": {"knock_text": ("knock.text", "text")}}


def _choices_left_out(session, tab: str) -> list[str]:
    """The names of the tab's choices a link leaves out that are not at their defaults."""
    default = pickers.defaults(session)
    left = [t(*text) for name, text in UNCARRIED.get(tab, {}).items()
            if chosen(session, name) not in (None, getattr(default, name))]
    if tab == "knockout" and session.view(MapView).metric != MapView().metric:
        left.append(t("knock.metric", "the map shows"))
    if tab == "generate":
        left.append(t("gen.settings", "decoding, temperature, top-k and sampling seed"))
    return left


SHARE_SIGNATURE = inspect.Signature(
    [inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD)
     for name in ("preset", *build.FIELDS, "seed", "weights", "size", "prompt", "tab",
                  "session")])


# The link's row: its box (a column: the API leaves layouts out of /share_link's values), the
# link and its note.
BOX = ("share_row", "share_box", "share_link", "share_note")


def closed() -> dict:
    """The row closed (its ×, another tab, a new model): no room taken, no old link shown."""
    return {"share_row": gr.update(visible=False), "share_box": gr.update(visible=False),
            "share_link": gr.update(value=""), "share_note": ""}


@dataclass(frozen=True)
class LinkBox(View):
    """Whether the box shows a link made on this page (what a link that opened the page could
    not use stays said)."""

    open: bool = False


def _closed_link(session) -> dict:
    if not session.view(LinkBox).open:
        return {}
    session.forget(LinkBox)
    return closed()


left = handler(outputs=BOX, name="left")(_closed_link)   # another tab: the box takes no room


@refresh.renders(*BOX)
def render(session) -> dict:
    """A link made for the models that were is not these models': its box closes."""
    return _closed_link(session) if session.new_models else {}


def copy_button():
    """The "Copy link" button, for the header to render in its row."""
    return gr.Button(label("share.copy", "Copy link"), elem_id="share_btn", size="sm", scale=0,
                     min_width=130, render=False)


def create(page, button):
    """The link's row (hidden until there is a link, or a note on the link that opened the
    page), and the hidden values the link needs."""
    page.add(button)
    with page.add(gr.Row(elem_id="share_row", visible=False)):
        with page.add(gr.Column(scale=3, min_width=160, visible=False, elem_id="share_box")):
            page.add(Textbox(label=label("share.box", "link to this page"),
                             elem_id="share_link", interactive=False, buttons=["copy"]))
        page.add(gr.Markdown(elem_id="share_note"))
        page.add(gr.Button("×", elem_id="share_close_btn", size="sm", scale=0, min_width=40))
    page.add(Textbox(visible=False, elem_id="link_query"))       # the link that opened it
    page.add(Textbox("build", visible=False, elem_id="current_tab"))


def wire(page):
    rules = rules_of(page)
    # The tab in view, for the link: each tab says so when it is chosen (no server call).
    for tab_id in page.tab_ids:
        page[f"{tab_id}_tab"].select(None, None, page["current_tab"],
                                     js=f"() => {json.dumps(tab_id)}",
                                     api_visibility="private")
    page.on(page.demo.load, open_link_handler(rules), js=READ_LINK_JS,
            api_visibility="private", show_progress_on=[page["status"]],
            concurrency_id="build")

    clicked = page.on("share_btn.click", share_link_for(rules),
                      ["preset", *build.FIELDS, "seed", "weights", "gpt2_size", "trace_prompt",
                       "current_tab", "session"], api_name="share_link",
                      show_progress="hidden")
    clicked.success(None, page["share_link"], page["share_link"], js=COPY_JS,
                    api_visibility="private")
    page.on("share_close_btn.click", handler(outputs=BOX)(closed), [],
            api_visibility="private", show_progress="hidden")
    page.on([page[f"{tab_id}_tab"].select for tab_id in page.tab_ids], left, ["session"],
            api_visibility="private", show_progress="hidden")


def share_link_for(rules):
    """``share_link`` with the page's rules (its defaults and tabs) given."""
    def link(*args):
        return share_link(rules, *args)
    link.__signature__ = SHARE_SIGNATURE      # /share_link's parameters, by name
    return handler(outputs=BOX, name="share_link")(link)
