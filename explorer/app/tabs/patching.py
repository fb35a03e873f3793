"""Tab 8, Patching: which parts carry the answer? For a clean and a corrupted prompt and a
right and a wrong answer, model A's patching maps (``explorer.probes.patching``) and each
part's direct contribution to the logit difference. A click on a cell makes that patch model
B: every tab then shows A beside B on the corrupted prompt."""
from __future__ import annotations

import time
from dataclasses import dataclass

import gradio as gr

from ...book.errors import ExplorerError, Message
from ...book.tokenizer import get_tokenizer
from ...probes.interventions import Interventions
from ...probes.direct import direct_attribution
from ...probes.maps import patching_numbers
from ...probes.patching import answer_id, estimate_sent, exact_tables, make_pair, plan, take_exact
from ...runtime import offload
from ...runtime.patching_pairs import honesty, pair_texts
from ...runtime.placement import Work
from .. import comparison, refresh
from ..handlers import handler
from ..i18n import label, say, t
from ..inputs import as_choice, as_flag, selected
from ...probes.budget import TRACE_MEMORY_SHARE
from ...probes.prompts import prompt_ids
from ..page import on_load_js
from ..plots.patching import attribution_html, patching_html
from ..prompts import trace_all
from ..session import Session, View
from ..shared import CACHE, check_model, model_a
from ..textbox import Textbox

TITLE = ("tab.patching", "8 · Patching")
ID = "patching"
PAIRS = {"ioi": ("patch.pair_ioi", "GPT-2: indirect object (Mary and John)"),
         "copying": ("patch.pair_copying", "copying task: one symbol of the first half changed")}
MAX_ANSWER_CHARS = 100      # an answer is one token: longer text is not one
UPDATE_S = 0.25             # the stream sends the maps at most this often (and at its end)


@dataclass(frozen=True)
class PatchView(View):
    """The maps and the attribution of model A (kept while B changes: B is A patched)."""

    result: object = None           # explorer.probes.patching.Patching
    attribution: object = None      # DirectAttribution, or a Message why there is none
    weights_key: object = None


@dataclass(frozen=True)
class PatchPair(View):
    """The pair last chosen or patched (its four texts), for a share link: the link reads the
    session, as /share_link's inputs stay the page's older ones."""

    texts: tuple[str, ...] = ()      # (clean, corrupted, right, wrong)


@handler(outputs=("patch_clean", "patch_corrupted", "patch_right", "patch_wrong"))
def pair_chosen(choice, session):
    """/patching_pair: the boxes filled with a ready-made pair for model A."""
    check_model(session)
    choice = as_choice(choice, Message("field.patch_pair", "ready-made pair"), PAIRS)
    clean, corrupted, right, wrong = pair_texts(choice, session.models[0].key.config)
    session.show(PatchPair, texts=(clean, corrupted, right, wrong))
    return {"patch_clean": clean, "patch_corrupted": corrupted, "patch_right": right,
            "patch_wrong": wrong}


def _answer(text, model, name: Message) -> int:
    if not isinstance(text, str) or not text or len(text) > MAX_ANSWER_CHARS:
        raise ExplorerError("patch.answer_text", "{name} must be the text of one token (at "
                            "most {most} characters), such as “ Mary”.", name=name,
                            most=MAX_ANSWER_CHARS)
    return answer_id(text, model.cfg, get_tokenizer())


@handler(outputs=("patch_map", "patch_dla", "patch_numbers", "session"))
def patch_maps(clean, corrupted, right, wrong, everywhere, session):
    """/patching_map (streams): both patching maps of model A for the pair, estimated, then
    exact where they count (every cell with ``everywhere``), and the direct logit attribution
    of the clean prompt."""
    everywhere = as_flag(everywhere, Message("field.patch_everywhere", "exact everywhere"))
    model = model_a(session)
    # limits before work: the prompts' length in characters (prompt_ids), then in tokens
    clean_ids, corrupted_ids = (prompt_ids(p, model) for p in (clean, corrupted))
    pair = make_pair(model.cfg, clean_ids, corrupted_ids,
                     _answer(right, model, Message("field.patch_right", "the right answer")),
                     _answer(wrong, model, Message("field.patch_wrong", "the wrong answer")),
                     get_tokenizer())
    session.show(PatchPair, texts=(clean, corrupted, right, wrong))   # (checked: all text)
    key = session.models[0].key.weights_key
    budget = CACHE.budget_bytes * TRACE_MEMORY_SHARE
    n = len(pair.clean)
    # a clean pass, a corrupted pass and a backward pass
    result, _ = offload.compute(key, model, estimate_sent, (pair,), {"max_bytes": budget},
                                Work.forward(model.cfg, n, passes=3))
    try:
        attribution = direct_attribution(model, pair.clean, pair.right, pair.wrong)
    except ExplorerError as refused:          # a post-LN model: said in its place
        attribution = refused.message
    session.show(PatchView, result=result, attribution=attribution, weights_key=key)
    yield _update(session)
    sent = time.perf_counter()
    for cells in plan(result, everywhere):
        if session.view(PatchView).result is not result:
            return                     # another map began
        # each cell: the rest of the model from its block, at most a pass
        tables, _ = offload.compute(key, model, exact_tables, (result, cells),
                                    {"max_bytes": budget},
                                    Work.forward(model.cfg, n, passes=len(cells)))
        take_exact(result, tables)
        if time.perf_counter() - sent >= UPDATE_S:
            sent = time.perf_counter()
            yield _update(session)
    yield _update(session)


def _update(session) -> dict:
    shown = session.view(PatchView)
    dla = None if isinstance(shown.attribution, Message) else shown.attribution
    return {**_views(session), "patch_numbers": patching_numbers(shown.result, dla),
            "session": session}


def _views(session) -> dict:
    shown = session.view_of_a(PatchView)
    if shown is None:
        return {"patch_map": patching_html(None), "patch_dla": attribution_html(None)}
    note = honesty(session.models[0].key.source)
    dla = shown.attribution
    return {"patch_map": patching_html(shown.result, session.b_interventions or None,
                                       say(note) if note else ""),
            "patch_dla": (attribution_html(None) + f"<p>{say(dla)}</p>"
                          if isinstance(dla, Message) else attribution_html(dla))}


def note(session) -> str:
    if len(session.models) == 2 and session.models[1].key.interventions:
        spec = session.models[1].key.interventions
        if any(item.info.patch for item in spec):
            return t("patch.note_b", "**B** = A with {what}, run on the corrupted prompt: every "
                     "tab shows A beside B (a difference is A − B).",
                     what=say(spec.describe()))
    return t("patch.note", "Which parts carry the answer? Patching takes one part's output "
             "from the clean run into the corrupted run and measures how much of the clean "
             "answer comes back. Click a cell of a map to make that patch model B.")


def patched(session, interventions: Interventions, corrupted) -> None:
    """Model B = model A with ``interventions`` (patches), both traced on the corrupted prompt."""
    comparison.intervened(session, interventions)
    trace_all(session, corrupted)


@handler(outputs=("session", *refresh.FIRST, refresh.all_outputs))
def patch_b(spec, corrupted, session):
    """/patch: model B = model A with the patch ``spec`` (the string form, e.g. "patch
    trf_blocks[1].att head 0 from 3,18,…"), both traced on ``corrupted``."""
    patched(session, Interventions.parse(spec), corrupted)
    return {"session": session, **refresh.render_all(session)}   # (the prompt boxes: corrupted)


@handler(outputs=("session", *refresh.FIRST, refresh.all_outputs))
def cell_clicked(corrupted, session, evt: gr.EventData):
    """A cell of a map was clicked: its patch becomes model B."""
    return patch_b(selected(evt, Message("field.patch_map", "the patching map")), corrupted,
                   session)


@refresh.renders("patch_note", "patch_map", "patch_dla", "patch_pair")
def render(session) -> dict:
    return {"patch_note": note(session), **_views(session),
            "patch_pair": gr.update(choices=[(t(*v), k) for k, v in PAIRS.items()])}


def create(page):
    page.add(gr.Markdown(note(Session()), elem_id="patch_note"))
    with gr.Row():
        page.add(gr.Radio([(t(*v), k) for k, v in PAIRS.items()], value="copying",
                          label=label("patch.pair", "ready-made pair"), elem_id="patch_pair"))
        page.add(gr.Button(label("patch.use_pair", "Use this pair"), scale=0, min_width=130,
                           elem_id="patch_pair_btn"))
    with gr.Row():
        page.add(Textbox("", label=label("patch.clean", "clean prompt"), lines=1, max_lines=3,
                         scale=3, elem_id="patch_clean"))
        page.add(Textbox("", label=label("patch.right", "right answer"), lines=1, scale=1,
                         min_width=100, elem_id="patch_right"))
    with gr.Row():
        page.add(Textbox("", label=label("patch.corrupted", "corrupted prompt (same number of "
                                                            "tokens)"), lines=1, max_lines=3,
                         scale=3, elem_id="patch_corrupted"))
        page.add(Textbox("", label=label("patch.wrong", "wrong answer"), lines=1, scale=1,
                         min_width=100, elem_id="patch_wrong"))
    with gr.Row():
        page.add(gr.Checkbox(False, label=label("patch.everywhere", "exact everywhere"),
                             min_width=120, elem_id="patch_everywhere"))
        page.add(gr.Button(label("patch.run", "Patch"), variant="primary", scale=0,
                           min_width=120, elem_id="patch_btn"))
    page.add(gr.HTML(patching_html(None), elem_id="patch_map", js_on_load=on_load_js("patch")))
    page.add(gr.HTML(attribution_html(None), elem_id="patch_dla"))
    page.add(gr.JSON(visible=False, elem_id="patch_numbers"))
    # the API's way to make a patch model B (a click on a cell sends its own event)
    page.add(Textbox("", visible=False, elem_id="patch_spec"))
    page.add(gr.Button(visible=False, elem_id="patch_b_btn"))


def wire(page):
    queue = dict(concurrency_limit=1, concurrency_id="build",
                 show_progress_on=[page["patch_note"]])
    page.on("patch_pair_btn.click", pair_chosen, ["patch_pair", "session"],
            api_name="patching_pair", show_progress="hidden")
    patched = page.on("patch_btn.click", patch_maps, ["patch_clean", "patch_corrupted",
                                                      "patch_right", "patch_wrong",
                                                      "patch_everywhere", "session"],
                      api_name="patching_map", concurrency_limit=1, concurrency_id="knockout",
                      show_progress_on=[page["patch_map"]])
    # lecture mode: the map's progress on screen at once, and the maps once made
    for event in (page["patch_btn"].click, patched.then):
        event(None, None, None, js="() => gptExplorer.showWhole('patch_map')",
              api_visibility="private")
    page.on("patch_b_btn.click", patch_b, ["patch_spec", "patch_corrupted", "session"],
            api_name="patch", **queue)
    page.on("patch_map.select", cell_clicked, ["patch_corrupted", "session"],
            api_visibility="private", **queue)
