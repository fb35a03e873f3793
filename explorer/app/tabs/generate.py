"""Tab 5, Generate: stream a generation token by token (or advance one token at a time, for
lectures) with the next-token candidates and a step table; and the logit lens of the prompt.
Two models generate from the same prompt in lockstep (one token of A, then one of B, each
with its own KV cache and random generator, so each text is exactly what that model generates
alone), their bars side by side at every step."""
from __future__ import annotations

import math
import secrets
import time

import gradio as gr

from ... import native
from ...book.errors import ExplorerError, Message
from ...book.generate import check_generation_args, generate_steps
from ...book.tokenizer import get_tokenizer
from ...probes import trace
from ...probes.compare import first_parting, lockstep, parted
from .. import comparison, gpu, refresh
from ..handlers import handler
from ..i18n import label, say, t
from ..inputs import (MAX_NEW_TOKENS, as_choice, as_flag, as_int, check_trace_size,
                      models_prompt_ids, prompt_ids)
from ..plots.generation import next_token_bars_html, parted_texts_html, steps_table_html
from ..plots.labels import visible_token
from ..plots.lens import logit_lens_figure
from ..session import Generation
from ..shared import CACHE, DEFAULT_PROMPT, NAMES, NO_MODEL_NOTE, models_of, session_of

TITLE = ("tab.generate", "5 · Generate")
ID = "generate"
SHOW_TOP = 10          # next-token candidates shown as bars
LENS_POSITIONS = 32    # the logit lens reads the prompt's last 32 positions
DECODING = ("greedy", "sample")
# Every step is its own update, at most 30 a second (a faster model waits for the screen). Two
# updates that reach the page within one animation frame would show only the second: the bars
# and the speed line hold a generation's last LIVE_STEPS steps (each new one is appended, and
# an appended string travels as its new part only), and the page paints them one a frame
# (static/page.js, gptExplorer.paintSteps). The step table re-renders all its rows, so it
# follows twice a second, and completely at the end.
STREAM_INTERVAL_S = 1 / 30
TABLE_INTERVAL_S = 0.5
LIVE_STEPS = 16
# The C one-token step and greedy summary, where they apply (else the model's own forward).
FAST_DECODING = dict(step=native.model_step, summarize=native.next_token_summary)
SHOWN = ("gen_output", "bars", "history", "speed", "session")
HEADERS = {1: (("gen.step", "step"), ("gen.token", "token"), ("gen.probability", "probability"),
               ("gen.rank", "rank"), ("gen.entropy", "entropy (bits)"), ("gen.ms", "ms")),
           2: (("gen.step", "step"), ("gen.token_a", "A: token"),
               ("gen.probability_a", "A: probability"), ("gen.token_b", "B: token"),
               ("gen.probability_b", "B: probability"), ("gen.part", "part"))}
MAX_NEW = Message("field.max_new", "max new tokens")


def _arguments(max_new_tokens, mode, temperature, top_k, seed):
    max_new = as_int(max_new_tokens, MAX_NEW)
    if not 1 <= max_new <= MAX_NEW_TOKENS:
        raise ExplorerError("gen.max_new_range", "max new tokens must be between 1 and {most} in the "
                            "explorer (got {n}).", most=MAX_NEW_TOKENS, n=max_new)
    mode = as_choice(mode, Message("field.decoding", "decoding"), DECODING)
    for value, name, wanted in (
            (temperature, Message("field.temperature", "temperature"),
             Message("gen.above_zero", "a number above 0")),
            (top_k, Message("field.top_k", "top-k"), Message("gen.whole", "a whole number")),
            (seed, Message("field.seed", "seed"), Message("gen.whole", "a whole number"))):
        # greedy decoding ignores these boxes' values, but not what kind of value they hold
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
            raise ExplorerError("gen.kind", "{name} must be {wanted} (got {value}).", name=name,
                                wanted=wanted, value=f"{value!r:.80}")
    if mode == "greedy":
        return max_new, 0.0, None, None
    temperature = 0.0 if temperature is None else float(temperature)
    if not math.isfinite(temperature):
        raise ExplorerError("gen.temperature_finite", "temperature must be a finite number "
                            "above 0 (got {value}).", value=temperature)
    if not temperature > 0:
        raise ExplorerError("gen.temperature_zero", "Sampling needs a temperature above 0 (0 "
                                                    "would be greedy decoding).")
    top_k = None if top_k in (None, 0, "") else as_int(top_k, Message("field.top_k", "top-k"))
    return max_new, temperature, top_k, as_int(seed, Message("field.seed", "seed"))


# ---------------------------------------------------------------------------------------------
# Plain data of a generation, and its views
def _row(index, steps):
    if len(steps) == 1:
        s = steps[0]
        return [index + 1, visible_token(s.text, 24), f"{100 * s.prob:.3g} %", s.rank,
                f"{s.entropy_bits:.2f}", f"{s.seconds * 1000:.1f}"]
    cells = [[visible_token(s.text, 16), f"{100 * s.prob:.3g} %"] if s is not None
             else ["", ""] for s in steps]
    differ = any(s is None for s in steps) or steps[0].token_id != steps[1].token_id
    return [index + 1, *cells[0], *cells[1], "≠" if differ else ""]


def _decode(ids):
    tokenizer = get_tokenizer()
    return tokenizer.decode([i for i in ids if i < tokenizer.n_vocab])


def _runs(ids, flags):
    """Generated ids as runs of (text, parted): consecutive tokens with the same flag are
    decoded together (so a character made of several byte tokens stays whole)."""
    runs, start = [], 0
    for i in range(1, len(ids) + 1):
        if i == len(ids) or flags[i] != flags[start]:
            runs.append((_decode(ids[start:i]), flags[start]))
            start = i
    return runs


def _bars(step, name=None, new=(), flags=(), stopped=False) -> dict:
    """What one model's bars show, as plain data (kept in the session, to draw them again)."""
    chosen = step.top_ids.index(step.token_id) if step.token_id in step.top_ids else None
    side = dict(texts=list(step.top_texts), probs=[float(p) for p in step.top_probs],
                chosen=chosen)
    if name is not None:
        tokenizer = get_tokenizer()
        tail = new[-4:]
        side.update(name=name, tail=[(tokenizer.token_text(i) if i < tokenizer.n_vocab
                                      else f"<id {i}>", flag)
                                     for i, flag in zip(tail, flags[len(new) - len(tail):])],
                    note=t("gen.stopped_eot", "stopped at <|endoftext|>") if stopped else "")
    return side


def speed_text(speed) -> str:
    path = say(speed["path"])
    if len(speed["contexts"]) == 1:
        text = t("gen.speed", "{n} tokens · <b>{rate:.1f} tokens/s</b> · {path}", n=speed["n"],
                 rate=speed["rate"], path=path)
        if not speed["cached"][0]:
            text += t("gen.window_full", " · window full: recomputing the last context_length "
                                         "tokens")
        return text
    text = t("gen.speed_pair", "{n} steps of A and B · <b>{rate:.1f} steps/s</b> (a step: one "
                               "token of each) · {path}", n=speed["n"], rate=speed["rate"],
             path=path)
    for name, cached in zip(NAMES, speed["cached"]):
        if not cached:
            text += t("gen.window_full_of", " · {name}'s window is full: it recomputes its last "
                                            "context_length tokens", name=name)
    if speed["contexts"][0] != speed["contexts"][1]:
        text += t("gen.contexts", " · context: A {a:,} tokens, B {b:,}", a=speed["contexts"][0],
                  b=speed["contexts"][1])
    if speed["vocabs"][0] != speed["vocabs"][1]:
        text += t("gen.vocabs", " · vocabularies of {a:,} and {b:,} entries: the bars compare "
                                "token texts", a=speed["vocabs"][0], b=speed["vocabs"][1])
    return text


def history_html(session, live=False) -> str:
    """The step table (newest first); with two models, both texts over it with the tokens
    where they part marked."""
    gen = session.generation
    rows = gen.rows if gen else []
    width = 2 if gen and len(gen.ids) == 2 else 1
    table = steps_table_html([t(*h) for h in HEADERS[width]], rows,
                             caption=t("gen.steps_pair", "Steps of A and B (newest first)")
                             if width == 2 else t("gen.steps", "Steps (newest first)"),
                             live=live)
    if width == 1:
        return table
    new = [ids[gen.start:] for ids in gen.ids]
    flags = parted(*new)
    return parted_texts_html(gen.prompt, [_runs(ids, flags[:len(ids)]) for ids in new],
                             comparison.names(session), first_parting(*new)) + table


def bars_hint() -> str:
    return ('<section class="nt-bars"><h4>' + t("gen.bars_title", "Next-token candidates")
            + '</h4><p class="hint">' + t("gen.bars_hint", "Press <b>Generate</b> or <b>Next "
                                                         "token</b>: the model's top 10 "
                                                         "candidates for the next token appear "
                                                         "here, as bars on a 0–100 % scale.")
            + "</p></section>")


def _step(tag, run, step, html) -> str:
    return f'<{tag} class="nt-step" data-run="{run}" data-step="{step}">{html}</{tag}>'


def _logged(gen):
    """This step's bars and speed line after the run's last ones (see LIVE_STEPS)."""
    n = gen.speed["n"]
    bars, speed = gen.log
    if len(bars) >= LIVE_STEPS:  # a new stretch, overlapping the last one's end
        bars, speed = bars[-4:], speed[-4:]
    gen.log = ([*bars, _step("div", gen.run, n, next_token_bars_html(gen.bars))],
               [*speed, _step("span", gen.run, n, speed_text(gen.speed))])


def shown(session, live=False, table=True) -> dict:
    gen = session.generation
    if gen is None:
        return {"gen_output": "", "bars": bars_hint(), "history": history_html(session),
                "speed": ""}
    bars, speed = (("".join(gen.log[0]), "".join(gen.log[1])) if gen.log[0] else
                   (next_token_bars_html(gen.bars), speed_text(gen.speed)))
    return {"gen_output": gen.text, "bars": bars,
            "history": history_html(session, live) if table else gr.skip(), "speed": speed}


def _record(gen, steps, models, rate, new):
    """The latest step of every model into ``gen`` (``rate``: steps a second so far)."""
    n = max(len(x) for x in new)
    flags = parted(*new) if len(new) == 2 else []
    names = NAMES if len(new) == 2 else (None,)
    for side, step in enumerate(steps):
        if step is not None:
            gen.bars[side] = _bars(step, names[side], new[side], flags,
                                   stopped=len(new[side]) < n)
    last = [s for s in steps if s is not None][0]
    gen.speed = dict(n=n, rate=rate, path=native.decoding_label(last.fast_step),
                     cached=[bool(s.cached) if s is not None else True for s in steps],
                     contexts=[m.cfg.context_length for m in models],
                     vocabs=[m.cfg.vocab_size for m in models])
    gen.text = gen.prompt + _decode(new[0])


def _streams(models, ids_per_model, n, temperature, top_k, seed, stop):
    """Each model's step generator, checked and ready before the first token of any."""
    streams = [generate_steps(m, ids, n, temperature=temperature, top_k=top_k, seed=seed,
                              stop_at_eot=stop, show_top=SHOW_TOP, **FAST_DECODING)
               for m, ids in zip(models, ids_per_model)]
    return lockstep(*streams) if len(streams) == 2 else ((s,) for s in streams[0])


@handler(outputs=SHOWN)
@gpu.gpu_work(duration=gpu.generate_seconds)
def generate(prompt, max_new_tokens, mode, temperature, top_k, seed, stop_at_eot, session):
    """/generate (streams): every model from the same prompt, step by step."""
    session = session_of(session)
    models = models_of(session)
    ids = models_prompt_ids(prompt, models)
    max_new, temperature, top_k, seed = _arguments(max_new_tokens, mode, temperature, top_k,
                                                   seed)
    for model in models:
        check_generation_args(max_new, temperature, top_k, seed, model.cfg.vocab_size)
    stop = as_flag(stop_at_eot, Message("field.stop_eot", "stop at <|endoftext|>"))
    pairs = _streams(models, [ids] * len(models), max_new, temperature, top_k, seed, stop)
    gen = Generation(prompt, len(ids), [list(ids) for _ in models], [], [None] * len(models),
                     {}, prompt, streaming=True, keys=session.keys, run=secrets.token_hex(4))
    session.generation = gen
    started = time.perf_counter()
    sent = table_sent = -math.inf
    for steps in pairs:
        for side, step in enumerate(steps):
            if step is not None:
                gen.ids[side].append(step.token_id)
        new = [i[gen.start:] for i in gen.ids]
        n = max(len(x) for x in new)
        gen.rows.insert(0, _row(n - 1, steps))
        _record(gen, steps, models, n / max(time.perf_counter() - started, 1e-9), new)
        _logged(gen)
        if session.generation is not gen:      # a new model (or generation) took its place
            return
        wait = sent + STREAM_INTERVAL_S - time.perf_counter()
        if wait > 0:
            time.sleep(wait)
        sent = time.perf_counter()
        with_table = sent - table_sent >= TABLE_INTERVAL_S
        table_sent = sent if with_table else table_sent
        yield {**shown(session, live=True, table=with_table), "session": session}
    gen.streaming = False
    if gen.rows:
        # The final state, always complete, with the last step's bars alone: after the same
        # wait as every update, so that the page has painted the steps before it.
        wait = sent + STREAM_INTERVAL_S - time.perf_counter()
        if wait > 0:
            time.sleep(wait)
        gen.log = ((), ())
        yield {**shown(session), "session": session}


@handler(outputs=SHOWN)
@gpu.gpu_work(duration=gpu.forward_seconds)
def next_token(prompt, output, mode, temperature, top_k, seed, session):
    """/next_token: one more token of every model, continuing the generation the page shows
    (from the same prompt); a new prompt (or a changed text) starts anew."""
    session = session_of(session)
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
        ids = models_prompt_ids(prompt, models)
        gen = Generation(prompt, len(ids), [list(ids) for _ in models], [],
                         [None] * len(models), {}, prompt, keys=session.keys)
    _, temperature, top_k, seed = _arguments(1, mode, temperature, top_k, seed)
    steps = []
    for model, ids in zip(models, gen.ids):
        step = next(iter(generate_steps(
            model, ids, 1, temperature=temperature, top_k=top_k,
            seed=None if seed is None else seed + len(ids),   # another draw each step, repeatable
            show_top=SHOW_TOP, **FAST_DECODING)))
        ids.append(step.token_id)
        steps.append(step)
    new = [ids[gen.start:] for ids in gen.ids]
    n = max(len(x) for x in new)
    gen.rows.insert(0, _row(n - 1, steps))
    _record(gen, steps, models, 1 / max(max(s.seconds for s in steps), 1e-9), new)
    gen.log = ((), ())          # one step, one update: nothing for the page to catch up on
    session.generation = gen
    return {**shown(session), "session": session}


@handler(outputs=SHOWN)
def clear(session):
    """The Clear button: no generation; the prompt stays."""
    session = session_of(session)
    session.generation = None
    return {**shown(session), "session": session}


@handler(outputs=SHOWN)
def stopped(session):
    """After Stop (or a failure): the generation as far as the server got (a step or two past
    the page's last update, perhaps), with the whole step table, no longer streaming."""
    session = session_of(session)
    if session.generation is not None:
        session.generation.streaming = False
        session.generation.log = ((), ())
    return {**shown(session), "session": session}


@handler(outputs=("lens_plot", "session"))
@gpu.gpu_work(duration=gpu.forward_seconds)
def logit_lens(prompt, session):
    """/logit_lens: final norm + output head on every block's output, at the prompt's last 32
    positions, for every model."""
    session = session_of(session)
    models = models_of(session)
    for model, name in zip(models, NAMES if len(models) == 2 else (None,)):
        ids = prompt_ids(prompt, model, name)      # within every model's vocabulary
    shortest = min(model.cfg.context_length for model in models)
    ids = ids[-shortest:]                    # the lens reads the last positions anyway
    for model in models:
        check_trace_size(model.cfg, len(ids), CACHE.budget_bytes)
    positions = list(range(max(0, len(ids) - LENS_POSITIONS), len(ids)))
    session.lenses = tuple(trace(model, ids, attention_layers=None, lens=positions,
                                 entropy=False) for model in models)
    return {"lens_plot": logit_lens_figure(list(session.lenses), comparison.names(session)),
            "session": session}


def mode_choices():
    """The decoding choices, named by the server in the page's language."""
    return [(t("gen.greedy", "greedy"), "greedy"), (t("gen.sample", "sample"), "sample")]


@handler(outputs=("sampling",))
def sampling_controls(mode):
    """Temperature, top-k and seed matter only when sampling: shown only then."""
    return {"sampling": gr.update(visible=mode == "sample")}


@refresh.on_new_model("gen_output", "bars", "history", "speed", "lens_plot")
def _new_model(session) -> dict:
    return {**shown(session), "lens_plot": None}


@refresh.on_redraw("bars", "history", "speed", "lens_plot", "mode")
def _redraw(session) -> dict:
    """The tab again (language, lecture mode): the last generation's bars, steps and speed,
    and the logit lens, as they were."""
    out = {k: v for k, v in shown(session).items() if k != "gen_output"}
    if len(session.lenses) == len(session.models) and session.lenses:
        out["lens_plot"] = logit_lens_figure(list(session.lenses), comparison.names(session))
    return {**out, "mode": gr.update(choices=mode_choices())}


# ---------------------------------------------------------------------------------------------
def create(page):
    # What a lecturer projects while tokens stream (the text and the bars) sits at the top,
    # side by side, so that it is on screen at 1280x720; the settings are above the buttons in
    # the same column, the step table and the logit lens below.
    with gr.Row(equal_height=False):
        with gr.Column(scale=1):
            page.add(gr.Textbox(DEFAULT_PROMPT, label=label("gen.prompt", "Prompt"), lines=2,
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
            page.add(gr.HTML(elem_id="speed"))   # lighter to redraw than Markdown, every step
            page.add(gr.Textbox(label=label("gen.text", "Text"), lines=4, max_lines=4,
                                autoscroll=True, elem_id="gen_output", interactive=False))
        with gr.Column(scale=1):
            page.add(gr.HTML(bars_hint(), label=label("gen.bars", "Next-token probabilities "
                                                      "(top 10)"), elem_id="bars"))
            page.add(gr.Checkbox(False, label=label("gen.stop_eot", "stop at <|endoftext|>"),
                                 elem_id="stop_eot"))
            # Under the bars (not above the text): the text and bars stay on a 720 px screen.
            page.add(gr.Markdown(label(NO_MODEL_NOTE.id, NO_MODEL_NOTE.text),
                                 elem_id="generate_weights"))
    page.add(gr.HTML(steps_table_html([t(*h) for h in HEADERS[1]], [],
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
    decoding = dict(concurrency_limit=4, concurrency_id="generate", show_progress="hidden")
    generating = page.on("gen_btn.click", generate,
                         ["gen_prompt", "max_new", *sampling, "stop_eot", "session"],
                         api_name="generate", **decoding)
    # No progress overlay: it would cover the speed line (and the result comes in a moment).
    page.on("step_btn.click", next_token, ["gen_prompt", "gen_output", *sampling, "session"],
            api_name="next_token", **decoding)
    page.on("gen_clear_btn.click", clear, ["session"], api_visibility="private",
            show_progress="hidden")
    stop = page["stop_btn"].click(None, None, None, cancels=[generating],
                                  api_visibility="private")
    page.then(stop, stopped, ["session"], success=False, api_visibility="private")
    page.then(generating, stopped, ["session"], on="failure", api_visibility="private")
    page.on("lens_btn.click", logit_lens, ["gen_prompt", "session"], api_name="logit_lens",
            concurrency_limit=2, concurrency_id="inspect")

