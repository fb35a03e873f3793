"""Tab 8, Patching: which parts carry the answer? A clean prompt, a corrupted one of the same
length, a right and a wrong answer; both patching maps of model A (each head; the residual
stream at each block and position), estimated at once and made exact where they count
(``explorer.probes.patching``), and each part's direct contribution to the answer's logit
difference. A click on a cell makes that patch model B (A run on the corrupted prompt with
the part taken from the clean run): every tab then shows A beside B on the corrupted prompt,
as for any model B."""
from __future__ import annotations

import time
from dataclasses import dataclass

import gradio as gr

from ...book.errors import ExplorerError, Message
from ...book.tokenizer import get_tokenizer
from ...probes.interventions import Interventions
from ...probes.direct import direct_attribution
from ...probes.patching import (answer_id, estimate_sent, exact_tables, make_pair, plan,
                                take_exact)
from ...runtime import offload
from ...runtime.training.copying_task import CopyingTask, copying_pair
from ...runtime.placement import Work
from .. import comparison, refresh
from ..handlers import handler
from ..i18n import label, say, t
from ..inputs import TRACE_MEMORY_SHARE, as_choice, as_flag, prompt_ids, selected
from ..plots.patching import attribution_html, patching_html
from ..prompts import trace_all
from ..session import Session, View
from ..shared import CACHE, check_model, model_a
from ..textbox import Textbox

TITLE = ("tab.patching", "8 · Patching")
ID = "patching"
IOI = ("When Mary and John went to the store, John gave a drink to",
       "When Alice and Bob went to the store, Bob gave a drink to", " Mary", " John")
PAIRS = {"ioi": ("patch.pair_ioi", "GPT-2: indirect object (Mary and John)"),
         "copying": ("patch.pair_copying", "copying task: one symbol of the first half changed")}
MAX_ANSWER_CHARS = 100      # an answer is one token: longer text is not one
UPDATE_S = 0.25             # the stream sends the maps at most this often (and at its end)
GPT2_REPO = "openai-community/gpt2"


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


def pair_texts(choice: str, cfg) -> tuple[str, str, str, str]:
    """(clean, corrupted, right, wrong) of a ready-made pair, refused where model A cannot
    read it."""
    if choice == "ioi":
        if cfg.vocab_size < get_tokenizer().n_vocab:
            raise ExplorerError("patch.ioi_needs_gpt2", "The indirect-object pair is GPT-2 "
                                "text, but model A reads only the first {vocab} token ids. "
                                "Build GPT-2 small (pretrained) in the Build tab first.",
                                vocab=cfg.vocab_size)
        return IOI
    task = CopyingTask()
    if cfg.vocab_size < task.n_words:
        raise ExplorerError("patch.copying_needs_words", "The copying pair uses the task's "
                            "{n} words (token ids 0 to {last}); model A reads only {vocab}.",
                            n=task.n_words, last=task.n_words - 1, vocab=cfg.vocab_size)
    return copying_pair(task)


def gpt2_cached() -> bool:
    """GPT-2 small's weights are in this server's Hugging Face cache (no word to the hub)."""
    try:
        from huggingface_hub import try_to_load_from_cache
        return isinstance(try_to_load_from_cache(GPT2_REPO, "model.safetensors"), str)
    except Exception:  # noqa: BLE001 - no cache at all: not cached
        return False


def honesty(session) -> Message | None:
    """What the maps of model A are worth: nothing, said plainly, for random weights."""
    key = session.models[0].key
    if key.source.kind != "random":
        return None
    cached = (Message("patch.gpt2_cached", "GPT-2 small's pretrained weights are cached on "
                      "this server: build it in the Build tab (pretrained) to see the real "
                      "circuit.") if gpt2_cached() else
              Message("patch.gpt2_not_cached", "GPT-2 small's pretrained weights are not "
                      "cached on this server: the Build tab downloads them once, where the hub "
                      "can be reached; offline, train the copying task in the Train tab."))
    return Message("patch.random", "Model A has random weights: these maps show how its random "
                   "parts happen to move this logit difference, which says nothing about how a "
                   "trained model finds the answer. {cached}", cached=cached)


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
    """/patching_map: both patching maps of model A for the pair (the head map: each head at
    every position; the residual map: the stream entering each block at each position), in
    shares of the clean result recovered, and the direct logit attribution of the clean
    prompt. A stream: first the estimate, then the cells made exact where they count (every
    cell with ``everywhere``, or where the estimate is not to be trusted)."""
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
    return {**_views(session), "patch_numbers": numbers(shown.result, shown.attribution),
            "session": session}


def numbers(result, attribution) -> dict:
    """The maps and the attribution as plain numbers (for the API)."""
    def grid(a):
        return [[None if v != v else float(v) for v in row] for row in a]
    out = {"clean_ids": list(result.pair.clean), "corrupted_ids": list(result.pair.corrupted),
           "right": result.pair.right, "wrong": result.pair.wrong,
           "clean_diff": result.clean_diff, "corrupted_diff": result.corrupted_diff,
           "layers": list(result.layer_labels),
           "head_share_estimate": grid(result.shares(result.head_estimate)),
           "head_share_exact": grid(result.shares(result.head_exact)),
           "resid_share_estimate": grid(result.shares(result.resid_estimate)),
           "resid_share_exact": grid(result.shares(result.resid_exact)),
           "noise_floor": result.floor, "first_order_miss": result.miss,
           "exact_cells": result.n_exact, "cells": len(result.cells())}
    if not isinstance(attribution, Message):
        out["direct_attribution"] = {
            "heads": grid(attribution.heads), "ff": [float(v) for v in attribution.ff],
            "tok_emb": attribution.tok_emb, "pos_emb": attribution.pos_emb,
            "biases": attribution.biases, "total": attribution.total,
            "model_diff": attribution.model_diff, "final_norm_scale": attribution.final_scale}
    return out


def _shown(session) -> PatchView | None:
    """The view if it was made for the session's model A; None (and forgotten) otherwise."""
    shown = session.view(PatchView)
    if shown.result is None:
        return None
    if not session.models or session.models[0].key.weights_key != shown.weights_key:
        session.forget(PatchView)
        return None
    return shown


def _current(session) -> str | None:
    b = session.models[1].key.interventions if len(session.models) == 2 else None
    return str(b) if b else None


def _views(session) -> dict:
    shown = _shown(session)
    if shown is None:
        return {"patch_map": patching_html(None), "patch_dla": attribution_html(None)}
    note = honesty(session)
    dla = shown.attribution
    return {"patch_map": patching_html(shown.result, _current(session),
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
    """Model B = model A with ``interventions`` (patches), and both models traced on the
    corrupted prompt: the views compare A and B there."""
    comparison.intervened(session, interventions)
    trace_all(session, corrupted)


@handler(outputs=("session", *refresh.FIRST, refresh.all_outputs))
def patch_b(spec, corrupted, session):
    """/patch: model B = model A with the patch ``spec`` (the string form, e.g. "patch
    trf_blocks[1].att head 0 from 3,18,…"), both traced on ``corrupted``."""
    if not isinstance(spec, str):
        raise ExplorerError("knock.spec_not_text", "The interventions must be text, such as "
                                                   "'zero trf_blocks[3].att head 5'.")
    patched(session, Interventions.parse(spec), corrupted)
    return {"session": session, **refresh.render_all(session)}   # (the prompt boxes: corrupted)


@handler(outputs=("session", *refresh.FIRST, refresh.all_outputs))
def cell_clicked(corrupted, session, evt: gr.EventData):
    """A cell of a map was clicked: its patch becomes model B."""
    return patch_b.__wrapped__(selected(evt, Message("field.patch_map", "the patching map")),
                               corrupted, session)


@refresh.renders("patch_note", "patch_map", "patch_dla", "patch_pair")
def render(session) -> dict:
    return {"patch_note": note(session), **_views(session),
            "patch_pair": gr.update(choices=[(t(*v), k) for k, v in PAIRS.items()])}


# A click (or Enter) on a cell: its patch, as the select event's value.
PATCH_JS = """
const choose = (target) => {
  const cell = target && target.closest ? target.closest('td[data-patch]') : null;
  if (!cell || !element.contains(cell)) return false;
  trigger('select', {value: cell.getAttribute('data-patch'), selected: true});
  return true;
};
element.addEventListener('click', (event) => { choose(event.target); });
element.addEventListener('keydown', (event) => {
  if ((event.key === 'Enter' || event.key === ' ') && choose(event.target)) {
    event.preventDefault();
  }
});
"""


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
    page.add(gr.HTML(patching_html(None), elem_id="patch_map", js_on_load=PATCH_JS))
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
    page.on("patch_btn.click", patch_maps, ["patch_clean", "patch_corrupted", "patch_right",
                                            "patch_wrong", "patch_everywhere", "session"],
            api_name="patching_map", concurrency_limit=1, concurrency_id="knockout",
            show_progress_on=[page["patch_map"]])
    page.on("patch_b_btn.click", patch_b, ["patch_spec", "patch_corrupted", "session"],
            api_name="patch", **queue)
    page.on("patch_map.select", cell_clicked, ["patch_corrupted", "session"],
            api_visibility="private", **queue)
