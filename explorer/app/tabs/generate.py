"""Tab 5, Generate: stream a generation token by token (or one token at a time, for lectures)
with the next-token candidates and a step table; and the logit lens of the prompt. Two models
generate in lockstep (``book.generate.lockstep``: each text is what that model makes alone),
their bars side by side at every step."""
from __future__ import annotations

import math
import secrets
import time
from dataclasses import replace

import gradio as gr

from ... import native
from ...book.errors import ExplorerError, Message
from ...book.generate import lockstep
from .. import comparison, refresh
from ..handlers import handler
from ..i18n import label, t
from ..textbox import Textbox
from ..inputs import MAX_NEW_TOKENS, as_choice, as_flag, as_int, as_number
from ...probes.budget import check_trace_size
from ...probes.prompts import models_prompt_ids, prompt_ids
from ..plots.generation import steps_table_html
from ..plots.lens import MAX_LENS_POSITIONS, logit_lens_figure
from ..prompts import use
from ..results import generation_steps, next_step, shared_trace
from ..session import DEFAULT_PROMPT, Generation
from ..shared import CACHE, models_of
from ...probes.compare import NAMES
from . import generate_views as views

TITLE = ("tab.generate", "5 · Generate")
ID = "generate"
WEIGHTS_NOTE = refresh.weights_note_of(ID, in_lecture=True)
SHOW_TOP = 10          # next-token candidates shown as bars
DECODING = ("greedy", "sample")
# At most 30 steps a second (the screen's pace), sent at most twice a second with the steps
# made since: an update costs the page the same whatever it holds, and one per step left a
# slow page no time to paint or answer a click (bench/README.md). The page shows the steps in
# turn (page.js, gptExplorer.paintSteps); the step table follows once a second.
STEP_INTERVAL_S = 1 / 30
STREAM_INTERVAL_S = 0.5
TABLE_INTERVAL_S = 1.0
# Stop ends a stream at the step the page shows: each step's bars and speed line are kept
# this many steps (the page is two updates behind the model at most).
KEPT_STEPS = 128
# The C one-token step and greedy summary, where they apply (else the model's own forward).
FAST_DECODING = dict(step=native.model_step, summarize=native.next_token_summary)
SHOWN = ("gen_output", "bars", "history", "speed", "session")
# #bars and #speed, once drawn, are handed to the page's script (gptExplorer.paintSteps).
STEP_ROOT_JS = ("const ex = (window.gptExplorer = window.gptExplorer || {}); "
                "(ex.stepRoots = ex.stepRoots || {}).NAME = element; "
                "if (ex.stepRootLoaded) ex.stepRootLoaded();")
MAX_NEW = Message("field.max_new", "max new tokens")
TEMPERATURE = Message("field.temperature", "temperature")
TOP_K = Message("field.top_k", "top-k")
SEED = Message("field.seed", "seed")
SHOWN_STEP_JS = ("() => { const ex = window.gptExplorer; "
                 "return ex && ex.shownStep ? ex.shownStep() : null; }")


def _arguments(max_new_tokens, mode, temperature, top_k, seed):
    """(max new tokens, temperature, top-k, seed) for ``generation_steps``, which checks them
    as ``check_generation_args`` does; greedy decoding: temperature 0, no top-k or seed."""
    max_new = as_int(max_new_tokens, MAX_NEW)
    mode = as_choice(mode, Message("field.decoding", "decoding"), DECODING)
    # greedy decoding ignores the sampling boxes' values, but not what kind of value they hold
    temperature, top_k, seed = (None if value is None else as_number(value, name)
                                for value, name in ((temperature, TEMPERATURE), (top_k, TOP_K),
                                                    (seed, SEED)))
    if mode == "greedy":
        return max_new, 0.0, None, None
    if temperature is None or not temperature > 0:
        raise ExplorerError("gen.temperature_zero", "Sampling needs a temperature above 0 (0 "
                                                    "would be greedy decoding).")
    return max_new, temperature, as_int(top_k, TOP_K) if top_k else None, as_int(seed, SEED)


def _streams(keys, models, ids, n, temperature, top_k, seed, stop):
    """Each model's steps (shared), checked before the first token of any; whether they all
    come from the shared cache; and where they are decoded."""
    streams, shared, where = zip(*(generation_steps(key, m, ids, n, temperature=temperature,
                                                    top_k=top_k, seed=seed, stop_at_eot=stop,
                                                    show_top=SHOW_TOP, **FAST_DECODING)
                                   for key, m in zip(keys, models)))
    pairs = lockstep(*streams) if len(streams) == 2 else ((s,) for s in streams[0])
    return pairs, all(shared), lambda: [note for said in where for note in said()]


def _new(session, prompt, models, **options) -> Generation:
    """A generation of ``prompt`` by every model, not started; the prompt is the session's."""
    ids = models_prompt_ids(prompt, models)
    use(session, prompt)
    return Generation(prompt, len(ids), [list(ids) for _ in models], [], [None] * len(models),
                      {}, prompt, keys=session.keys, **options)


@handler(outputs=SHOWN)
def generate(prompt, max_new_tokens, mode, temperature, top_k, seed, stop_at_eot, session):
    """/generate (streams): every model from the same prompt, step by step."""
    models = models_of(session)
    gen = _new(session, prompt, models, streaming=True, run=secrets.token_hex(4))
    max_new, temperature, top_k, seed = _arguments(max_new_tokens, mode, temperature, top_k,
                                                   seed)
    stop = as_flag(stop_at_eot, Message("field.stop_eot", "stop at <|endoftext|>"))
    pairs, shared, where = _streams(session.keys, models, gen.ids[0][:gen.start], max_new,
                                    temperature, top_k, seed, stop)
    session.generation = gen
    started = time.perf_counter()
    paced = sent = table_sent = -math.inf
    fresh = True              # the next step starts a new update's steps (gen.log)
    for steps in pairs:
        if session.generation is not gen or not gen.streaming:
            return      # a new model or generation took its place, or Stop: not a step more
        for side, step in enumerate(steps):
            if step is not None:
                gen.ids[side].append(step.token_id)
        new = [i[gen.start:] for i in gen.ids]
        n = max(len(x) for x in new)
        gen.rows.insert(0, views.row(n - 1, steps))
        views.record(gen, steps, models, n / max(time.perf_counter() - started, 1e-9), new,
                     shared, where())
        gen.shown[n] = (list(gen.bars), gen.speed)     # where a Stop may end it (``stopped``)
        gen.shown.pop(n - KEPT_STEPS, None)
        views.logged(gen, fresh)
        fresh = False
        wait = paced + STEP_INTERVAL_S - time.perf_counter()
        if wait > 0:
            time.sleep(wait)
        paced = time.perf_counter()
        if paced - sent < STREAM_INTERVAL_S:
            continue
        sent = paced
        with_table = sent - table_sent >= TABLE_INTERVAL_S
        table_sent = sent if with_table else table_sent
        yield {**views.shown(session, live=True, table=with_table), "session": session}
        fresh = True
    gen.streaming = False
    gen.shown = {}             # (a stream that ended is not cut back by a late Stop)
    if gen.rows:
        # The whole final state, with the steps of the last update (a busy page may not have
        # painted them yet); later views show the last step's bars alone.
        final = views.shown(session)
        gen.log = ((), ())
        yield {**final, "session": session}


@handler(outputs=SHOWN)
def next_token(prompt, output, mode, temperature, top_k, seed, session):
    """/next_token: one more token of every model after the text shown; a new prompt (or an
    edited text) starts anew."""
    gen = session.generation
    if gen is not None and gen.streaming:
        # The stream's next update would overwrite this step: refuse it, visibly.
        gr.Warning(t("gen.still_streaming", "A generation is still streaming: wait for it to "
                                            "finish (or press Stop), then press Next token."))
        return {}
    models = models_of(session)
    continuing = (gen is not None and gen.keys == session.keys and gen.prompt == prompt
                  and output == gen.text)
    if not continuing:
        gen = _new(session, prompt, models)
    _, temperature, top_k, seed = _arguments(1, mode, temperature, top_k, seed)
    steps, where = [], []
    for key, model, ids in zip(session.keys, models, gen.ids):
        step, said = next_step(
            key, model, ids, temperature=temperature, top_k=top_k,
            seed=None if seed is None else seed + len(ids),   # another draw each step, repeatable
            show_top=SHOW_TOP, **FAST_DECODING)
        ids.append(step.token_id)
        steps.append(step)
        where += said
    new = [ids[gen.start:] for ids in gen.ids]
    n = max(len(x) for x in new)
    gen.rows.insert(0, views.row(n - 1, steps))
    views.record(gen, steps, models, 1 / max(max(s.seconds for s in steps), 1e-9), new,
                 where=where)
    gen.log = ((), ())          # one step, one update: nothing for the page to catch up on
    session.generation = gen
    return {**views.shown(session), "session": session}


@handler(outputs=SHOWN)
def clear(session):
    """The Clear button: no generation; the prompt stays."""
    session.generation = None
    return {**views.shown(session), "session": session}


def cut_at(gen: Generation, step) -> Generation:
    """``gen`` as it was at ``step``, if that step is kept; else ``gen`` itself."""
    if isinstance(step, bool) or not isinstance(step, (int, float)) or step not in gen.shown:
        return gen
    step = int(step)
    bars, speed = gen.shown[step]
    ids = [i[:gen.start + step] for i in gen.ids]
    return replace(gen, ids=ids, rows=[r for r in gen.rows if r[0] <= step], bars=list(bars),
                   speed=dict(speed), text=gen.prompt + views.decode(ids[0][gen.start:]),
                   shown={})


@handler(outputs=SHOWN)
def stopped(session, shown=None):
    """After Stop (or a failure): the generation as far as the page showed it (``shown``: the
    step on screen when Stop was pressed), else as far as the server got, no longer streaming.
    A new object takes its place: a step the stream still makes goes to the old one."""
    gen = session.generation
    if gen is not None:
        # Stop's call and the cancelled stream's (a failure: no ``shown``) come in either
        # order, and the second may not come. The stream ends before the cut is copied from
        # it: a cut still marked streaming refused Next token until the second call came.
        stopping, gen.streaming = gen.streaming, False
        cut = cut_at(gen, shown)
        stopping = stopping or len(cut.ids[0]) < len(gen.ids[0])
        gen = replace(cut, log=((), ()))
        if stopping:                            # cut short: the speed line says so
            gen.speed = {**gen.speed, "stopped": True}
        session.generation = gen
    return {**views.shown(session), "session": session}


@handler(outputs=("lens_plot", "session"))
def logit_lens(prompt, session):
    """/logit_lens: final norm + output head on every block's output, at the prompt's last 32
    positions, for every model."""
    models = models_of(session)
    for model, name in zip(models, NAMES if len(models) == 2 else (None,)):
        ids = prompt_ids(prompt, model, name)      # within every model's vocabulary
    shortest = min(model.cfg.context_length for model in models)
    use(session, prompt)
    ids = ids[-shortest:]                    # the lens reads the last positions anyway
    for model in models:
        check_trace_size(model.cfg, len(ids), CACHE.budget_bytes)
    positions = list(range(max(0, len(ids) - MAX_LENS_POSITIONS), len(ids)))
    session.lenses = tuple(shared_trace(key, model, ids, attention_layers=None, lens=positions,
                                  entropy=False) for key, model in zip(session.keys, models))
    return {"lens_plot": logit_lens_figure(list(session.lenses), comparison.names(session)),
            "session": session}


def mode_choices():
    """The decoding choices, named by the server in the page's language."""
    return [(t("gen.greedy", "greedy"), "greedy"), (t("gen.sample", "sample"), "sample")]


@handler(outputs=("sampling",))
def sampling_controls(mode):
    """Temperature, top-k and seed matter only when sampling: shown only then."""
    return {"sampling": gr.update(visible=mode == "sample")}


@refresh.renders("gen_output", "bars", "history", "speed", "lens_plot", "mode")
def render(session) -> dict:
    """The last generation's views and the logit lens; the text (maybe edited) for new models
    only."""
    out = views.shown(session)
    if not session.new_models:
        out.pop("gen_output")
    out["lens_plot"] = (logit_lens_figure(list(session.lenses), comparison.names(session))
                        if session.lenses and len(session.lenses) == len(session.models)
                        else None)
    return {**out, "mode": gr.update(choices=mode_choices())}


def _step_root(name: str) -> str:
    return STEP_ROOT_JS.replace("NAME", name)


# ---------------------------------------------------------------------------------------------
def create(page):
    # The text and the bars side by side at the top: on screen at 1280x720 for a lecture.
    with gr.Row(equal_height=False):
        with gr.Column(scale=1):
            page.add(Textbox(DEFAULT_PROMPT, label=label("gen.prompt", "Prompt"), lines=2,
                                max_lines=3, elem_id="gen_prompt"))
            with gr.Row():
                page.add(gr.Slider(1, MAX_NEW_TOKENS, value=20, step=1, scale=3,
                                   label=label("gen.max_new", "max new tokens"),
                                   elem_id="max_new"))
                page.add(gr.Radio(mode_choices(), value="greedy",
                                  label=label("gen.decoding", "decoding"), scale=2,
                                  elem_id="mode"))
            with page.add(gr.Row(visible=False, elem_id="sampling")):
                page.add(gr.Number(1.0, label=label("gen.temperature", "temperature"),
                                   min_width=100, elem_id="temperature"))
                page.add(gr.Number(50, label=label("gen.top_k", "top-k (0: all)"), precision=0,
                                   min_width=100, elem_id="top_k"))
                page.add(gr.Number(123, label=label("gen.seed", "sampling seed"), precision=0,
                                   min_width=100, elem_id="sampling_seed"))
            with gr.Row():
                page.add(gr.Button(label("gen.generate", "Generate"), variant="primary",
                                   elem_id="gen_btn", min_width=90))
                page.add(gr.Button(label("gen.next", "Next token"), elem_id="step_btn",
                                   min_width=90))
                page.add(gr.Button(label("gen.stop", "Stop"), variant="stop",
                                   elem_id="stop_btn", min_width=70))
                page.add(gr.Button(label("gen.clear", "Clear"), elem_id="gen_clear_btn",
                                   min_width=70))
            # (an HTML is lighter to redraw than Markdown, every step)
            page.add(gr.HTML(elem_id="speed", js_on_load=_step_root("speed")))
            page.add(Textbox(label=label("gen.text", "Text"), lines=4, max_lines=4,
                                autoscroll=True, elem_id="gen_output", interactive=False))
            page.add(gr.Number(None, precision=0, visible=False, elem_id="gen_shown"))
        with gr.Column(scale=1):
            page.add(gr.HTML(views.bars_hint(), label=label("gen.bars", "Next-token "
                                                            "probabilities (top 10)"),
                             elem_id="bars", js_on_load=_step_root("bars")))
            page.add(gr.Checkbox(False, label=label("gen.stop_eot", "stop at <|endoftext|>"),
                                 elem_id="stop_eot"))
            # Under the bars (not above the text): the text and bars stay on a 720 px screen.
            page.add(WEIGHTS_NOTE())
    page.add(gr.HTML(steps_table_html([t(*h) for h in views.HEADERS[1]], [],
                                      caption=t("gen.steps", "Steps (newest first)")),
                     label=label("gen.history", "Steps"), elem_id="history"))
    with gr.Accordion(label("gen.lens_title", "Logit lens: what each layer would predict"),
                      open=False):
        page.add(gr.Button(label("gen.lens", "Read the logit lens for the prompt"),
                           elem_id="lens_btn"))
        page.add(gr.Plot(show_label=False, label=label("gen.lens_plot", "Logit lens"),
                         elem_id="lens_plot"))


def wire(page):
    page.on("mode.change", sampling_controls, ["mode"], api_visibility="private")
    sampling = ["mode", "temperature", "top_k", "sampling_seed"]
    # A stream mostly waits for the screen, or is another session's: many may stream at once.
    decoding = dict(concurrency_limit=16, concurrency_id="generate", show_progress="hidden")
    generating = page.on("gen_btn.click", generate,
                         ["gen_prompt", "max_new", *sampling, "stop_eot", "session"],
                         api_name="generate", **decoding)
    # No progress overlay: it would cover the speed line (and the result comes in a moment).
    page.on("step_btn.click", next_token, ["gen_prompt", "gen_output", *sampling, "session"],
            api_name="next_token", **decoding)
    page.on("gen_clear_btn.click", clear, ["session"], api_visibility="private",
            show_progress="hidden")
    # Stop: the generation ends at the step the page shows (page.js says which).
    stop = page["stop_btn"].click(None, None, page["gen_shown"], cancels=[generating],
                                  js=SHOWN_STEP_JS, api_visibility="private")
    # (no progress overlay: its "processing" text hid the speed line's end)
    page.then(stop, stopped, ["session", "gen_shown"], success=False,
              api_visibility="private", show_progress="hidden")
    page.then(generating, stopped, ["session"], on="failure", api_visibility="private",
              show_progress="hidden")
    page.on("lens_btn.click", logit_lens, ["gen_prompt", "session"], api_name="logit_lens",
            concurrency_limit=2, concurrency_id="inspect")

