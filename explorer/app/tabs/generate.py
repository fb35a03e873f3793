"""Tab 5, Generate: stream a generation token by token (or advance one token at a time, for
lectures) with the next-token candidates and a step table; and the logit lens of the prompt."""
from __future__ import annotations

import math
import time
from types import SimpleNamespace

import gradio as gr

from ... import native
from ...book.generate import check_generation_args, generate_steps
from ...book.tokenizer import get_tokenizer
from ...probes import trace
from ...probes.compare import first_parting, lockstep, parted
from .. import gpu, i18n, pinning
from ..i18n import label, t
from ..plots.generation import next_token_bars_html, parted_texts_html, steps_table_html
from ..plots.labels import visible_token
from ..plots.lens import logit_lens_figure
from ..shared import (DEFAULT_PROMPT, MAX_NEW_TOKENS, NO_MODEL_NOTE, as_choice, as_flag, as_int,
                      check_trace_size, friendly, model_of, prompt_ids)
from .inside import pair_prompt_ids

SHOW_TOP = 10          # next-token candidates shown as bars
LENS_POSITIONS = 32    # the logit lens reads the prompt's last 32 positions
HISTORY_HEADERS = ["step", "token", "probability", "rank", "entropy (bits)", "ms"]
# The history lists the newest step first, so the live row is always in sight (while
# streaming, only the newest LIVE_TABLE_ROWS of it: plots.generation).
# A page redraws the text and bars up to 40 times a second (a browser keeps up: see
# bench/browser_rate.py); a faster model skips steps on screen, never the last one, and a
# slower one's late step is held back a few ms rather than skipped. The step
# table re-renders all its rows, so it follows twice a second, and completely at the end.
STREAM_INTERVAL_S = 0.025
TABLE_INTERVAL_S = 0.5
# The C one-token step and greedy summary, where they apply (else the model's own forward).
FAST_DECODING = dict(step=native.model_step, summarize=native.next_token_summary)
DECODING = ("greedy", "sample")


def _generation_args(max_new_tokens, mode, temperature, top_k, seed):
    max_new = as_int(max_new_tokens, "max new tokens")
    if not 1 <= max_new <= MAX_NEW_TOKENS:
        raise gr.Error(t("max new tokens must be between 1 and {most} in the explorer (got "
                         "{n}).", most=MAX_NEW_TOKENS, n=max_new))
    mode = as_choice(mode, "decoding", DECODING)
    for value, name, wanted in ((temperature, "temperature", "a number above 0"),
                                (top_k, "top-k", "a whole number"),
                                (seed, "seed", "a whole number")):
        # greedy decoding ignores these boxes' values, but not what kind of value they hold
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
            raise gr.Error(t("{name} must be {wanted} (got {value}).", name=t(name),
                             wanted=t(wanted), value=f"{value!r:.80}"))
    if mode == "greedy":
        return max_new, 0.0, None, None
    try:
        temperature = 0.0 if temperature is None else float(temperature)
    except (TypeError, ValueError):
        raise gr.Error(t("{name} must be {wanted} (got {value}).", name=t("temperature"),
                         wanted=t("a number above 0"), value=repr(temperature))) from None
    if not math.isfinite(temperature):
        raise gr.Error(t("temperature must be a finite number above 0 (got {value}).",
                         value=temperature))
    if not temperature > 0:
        raise gr.Error(t("Sampling needs a temperature above 0 (0 would be greedy decoding)."))
    top_k = None if top_k in (None, 0, "") else as_int(top_k, "top-k")
    seed = as_int(seed, "seed")
    return max_new, temperature, top_k, seed


def _step_row(step):
    return [step.index + 1, visible_token(step.text, 24), f"{100 * step.prob:.3g} %",
            step.rank, f"{step.entropy_bits:.2f}", f"{step.seconds * 1000:.1f}"]


def _table(rows, live=False):
    """The step table, newest first; while streaming only the newest rows."""
    return steps_table_html([t(h) for h in HISTORY_HEADERS], rows,
                            caption=t("Steps (newest first)"), live=live)


def full_table(state):
    """The whole step table from the session (after Stop: the last update showed the newest
    rows only)."""
    if pinning.comparing(state) and state.get("pinned_gen_ids"):
        return _pair_table(state)
    return _table((state or {}).get("gen_rows", []))


def _bars_of(step):
    """What the bars show, as plain data (kept in the state, to draw them again): one side."""
    chosen = step.top_ids.index(step.token_id) if step.token_id in step.top_ids else None
    return [dict(texts=list(step.top_texts), probs=[float(p) for p in step.top_probs],
                 chosen=chosen)]


def _speed_of(n, rate, step):
    return dict(n=n, rate=rate, cached=step.cached, path=native.decoding_label(step.fast_step))


def _speed(speed):
    note = "" if speed["cached"] else t(" · window full: recomputing the last context_length "
                                        "tokens")
    return (t("{n} tokens · <b>{rate:.1f} tokens/s</b> · {path}", n=speed["n"],
              rate=speed["rate"], path=i18n.translate(speed["path"])) + note)


def _paced(steps):
    """Each of ``steps`` with whether to send an update now, and whether with the table:
    a page redraws at most every STREAM_INTERVAL_S (a faster model skips steps on screen); a
    slower one's late step is held back a few ms rather than skipped."""
    sent = table_sent = -math.inf     # when the last update, and the last table, went out
    arrived, gap = time.perf_counter(), None   # when the last step came, the smoothed gap
    for step in steps:
        now = time.perf_counter()
        gap = now - arrived if gap is None else 0.8 * gap + 0.2 * (now - arrived)
        arrived = now
        if now - sent < STREAM_INTERVAL_S:
            if gap < STREAM_INTERVAL_S:
                yield step, False, False   # the next update carries this step too
                continue
            # A model slower than that, one step late and the next one right behind it: show
            # it a moment later rather than not at all.
            time.sleep(sent + STREAM_INTERVAL_S - now)
            now = time.perf_counter()
        with_table = now - table_sent >= TABLE_INTERVAL_S
        sent = now
        table_sent = now if with_table else table_sent
        yield step, True, with_table


@friendly
@gpu.gpu_work(duration=gpu.generate_seconds)
def generate(prompt, max_new_tokens, mode, temperature, top_k, seed, stop_at_eot, state):
    if pinning.comparing(state):
        yield from _generate_pair(pinning.pair_of(state), prompt, max_new_tokens, mode,
                                  temperature, top_k, seed, stop_at_eot, state)
        return
    model = model_of(state)
    ids = prompt_ids(prompt, model)
    max_new, temperature, top_k, seed = _generation_args(max_new_tokens, mode, temperature,
                                                         top_k, seed)
    check_generation_args(max_new, temperature, top_k, seed, model.cfg.vocab_size)
    tokenizer = get_tokenizer()
    steps = generate_steps(model, ids, max_new, temperature=temperature, top_k=top_k, seed=seed,
                           stop_at_eot=as_flag(stop_at_eot, "stop at <|endoftext|>"),
                           show_top=SHOW_TOP, **FAST_DECODING)
    new_ids, rows = [], []
    started = time.perf_counter()

    def update(step, with_table, final=False):
        rate = len(new_ids) / max(time.perf_counter() - started, 1e-9)
        text = prompt + tokenizer.decode([i for i in new_ids if i < tokenizer.n_vocab])
        # The state follows every update, so a stopped generation can go on with "Next token"
        # from exactly what the page shows (the table may lag: the state has every row).
        # "streaming" until the last update: "Next token" meanwhile is refused with a message
        # (the stream's next update would overwrite its step).
        bars, speed = _bars_of(step), _speed_of(len(new_ids), rate, step)
        return (text, next_token_bars_html(bars),
                _table(rows, live=not final) if with_table else gr.skip(), _speed(speed),
                {**state, "gen_ids": ids + new_ids, "gen_text": text, "gen_rows": list(rows),
                 "gen_bars": bars, "gen_speed": speed, "streaming": not final})

    for step, send, with_table in _paced(steps):
        new_ids.append(step.token_id)
        rows.insert(0, _step_row(step))
        if send:
            yield update(step, with_table)
    if new_ids:
        yield update(step, True, final=True)   # the final state, always complete


@friendly
@gpu.gpu_work(duration=gpu.forward_seconds)
def next_token(prompt, output, mode, temperature, top_k, seed, state):
    """Advance exactly one token, continuing the current output (for lectures)."""
    if state and state.get("streaming"):
        # The stream's next update would overwrite this step: refuse it, visibly.
        gr.Warning(t("A generation is still streaming: wait for it to finish (or press Stop), "
                     "then press Next token."))
        return (gr.skip(),) * 5
    if pinning.comparing(state):
        return _next_token_pair(pinning.pair_of(state), prompt, output, mode, temperature,
                                top_k, seed, state)
    model = model_of(state)
    tokenizer = get_tokenizer()
    continuing = state.get("gen_ids") and output == state.get("gen_text")
    ids = list(state["gen_ids"]) if continuing else prompt_ids(prompt, model)
    rows = list(state.get("gen_rows", [])) if continuing else []
    _, temperature, top_k, seed = _generation_args(1, mode, temperature, top_k, seed)
    if seed is not None:
        seed += len(ids)  # a different draw at each step, yet repeatable
    step = next(iter(generate_steps(model, ids, 1, temperature=temperature, top_k=top_k,
                                    seed=seed, show_top=SHOW_TOP, **FAST_DECODING)))
    step.index = len(rows)
    ids.append(step.token_id)
    text = (output if continuing else prompt) + (
        tokenizer.decode([step.token_id]) if step.token_id < tokenizer.n_vocab else "")
    rows.insert(0, _step_row(step))
    bars, speed = _bars_of(step), _speed_of(len(rows), 1 / max(step.seconds, 1e-9), step)
    state = {**state, "gen_ids": ids, "gen_text": text, "gen_rows": rows, "gen_bars": bars,
             "gen_speed": speed}
    return text, next_token_bars_html(bars), _table(rows), _speed(speed), state


@friendly
@gpu.gpu_work(duration=gpu.forward_seconds)
def logit_lens(prompt, state):
    """Final norm + output head on every block's output, at the prompt's last 32 positions."""
    models = pinning.pair_of(state) if pinning.comparing(state) else (model_of(state),)
    ids = prompt_ids(prompt, models[0])
    for model in models:
        prompt_ids(prompt, model)            # (a pinned model's vocabulary too)
    shortest = min(model.cfg.context_length for model in models)
    if len(ids) > shortest:
        ids = ids[-shortest:]                # the lens reads the last positions anyway
    for model in models:
        check_trace_size(model.cfg, len(ids))
    positions = list(range(max(0, len(ids) - LENS_POSITIONS), len(ids)))
    lenses = [trace(model, ids, attention_layers=None, lens=positions, entropy=False)
              for model in models]
    state = {**state, "lens": lenses[0]}
    if len(lenses) == 1:
        return logit_lens_figure(lenses), state
    state["pinned_lens"] = lenses[1]
    return logit_lens_figure(lenses, pinning.names(state)), state


# ---------------------------------------------------------------------------------------------
# A pinned model beside the session's: both generate from the same prompt in lockstep (one
# token of A, then one of B, each with its own KV cache and random generator, so each text is
# exactly what that model generates alone), their bars side by side at every step.
PAIR_HEADERS = ["step", "A: token", "A: probability", "B: token", "B: probability", "part"]


def _pair_row(index, step_a, step_b):
    def cells(step):
        return ([visible_token(step.text, 16), f"{100 * step.prob:.3g} %"] if step is not None
                else ["", ""])
    differ = (step_a is None or step_b is None or step_a.token_id != step_b.token_id)
    return [index + 1, *cells(step_a), *cells(step_b), "≠" if differ else ""]


def _runs(ids, flags):
    """Generated ids as runs of (text, parted): consecutive tokens with the same flag are
    decoded together (so a character made of several byte tokens stays whole)."""
    tokenizer = get_tokenizer()
    runs, start = [], 0
    for i in range(1, len(ids) + 1):
        if i == len(ids) or flags[i] != flags[start]:
            text = tokenizer.decode([x for x in ids[start:i] if x < tokenizer.n_vocab])
            runs.append((text, flags[start]))
            start = i
    return runs


def _pair_table(state, live=False):
    """Both texts with the tokens where they part marked, over the lockstep step table."""
    start = state.get("gen_start", 0)
    new_a, new_b = state["gen_ids"][start:], state["pinned_gen_ids"][start:]
    flags = parted(new_a, new_b)
    names = pinning.names(state)
    texts = parted_texts_html(state.get("gen_prompt", ""),
                              [_runs(new, flags[:len(new)]) for new in (new_a, new_b)], names,
                              first_parting(new_a, new_b))
    return texts + steps_table_html([t(h) for h in PAIR_HEADERS], state.get("gen_rows", []),
                                    caption=t("Steps of A and B (newest first)"), live=live)


def _side(name, step, ids, flags, stopped):
    """One model's bars: its candidates at its latest step, its last tokens."""
    tokenizer = get_tokenizer()
    tail = [(tokenizer.token_text(i) if i < tokenizer.n_vocab else f"<id {i}>", flag)
            for i, flag in zip(ids[-4:], flags[len(ids) - len(ids[-4:]):len(ids)])]
    side, = _bars_of(step)
    return {**side, "name": name, "tail": tail,
            "note": t("stopped at <|endoftext|>") if stopped else ""}


def _pair_speed_of(n, rate, steps, models):
    cfg_a, cfg_b = (model.cfg for model in models)
    return dict(n=n, rate=rate, path=native.decoding_label(steps[0].fast_step),
                cached=[bool(s.cached) for s in steps], contexts=[cfg_a.context_length,
                                                                  cfg_b.context_length],
                vocabs=[cfg_a.vocab_size, cfg_b.vocab_size])


def _pair_speed(speed):
    text = t("{n} steps of A and B · <b>{rate:.1f} steps/s</b> (a step: one token of each) · "
             "{path}", n=speed["n"], rate=speed["rate"], path=i18n.translate(speed["path"]))
    for name, cached in zip("AB", speed["cached"]):
        if not cached:
            text += t(" · {name}'s window is full: it recomputes its last context_length tokens",
                      name=name)
    if speed["contexts"][0] != speed["contexts"][1]:
        text += t(" · context: A {a:,} tokens, B {b:,}", a=speed["contexts"][0],
                  b=speed["contexts"][1])
    if speed["vocabs"][0] != speed["vocabs"][1]:
        text += t(" · vocabularies of {a:,} and {b:,} entries: the bars compare token texts",
                  a=speed["vocabs"][0], b=speed["vocabs"][1])
    return text


def _pair_state(state, prompt, start, ids_a, ids_b, text, rows, sides, speed, streaming):
    return {**state, "gen_ids": ids_a, "gen_text": text, "gen_rows": list(rows),
            "gen_bars": sides, "gen_speed": speed, "streaming": streaming,
            "gen_prompt": prompt, "gen_start": start, "pinned_gen_ids": ids_b,
            "pinned_gen_text": prompt + get_tokenizer().decode(
                [i for i in ids_b[start:] if i < get_tokenizer().n_vocab])}


def _generate_pair(models, prompt, max_new_tokens, mode, temperature, top_k, seed, stop_at_eot,
                   state):
    ids = pair_prompt_ids(prompt, models)
    max_new, temperature, top_k, seed = _generation_args(max_new_tokens, mode, temperature,
                                                         top_k, seed)
    stop = as_flag(stop_at_eot, "stop at <|endoftext|>")
    for model in models:
        check_generation_args(max_new, temperature, top_k, seed, model.cfg.vocab_size)
    tokenizer = get_tokenizer()
    # Both checked and ready before the first token of either.
    steps_a, steps_b = (generate_steps(model, ids, max_new, temperature=temperature,
                                       top_k=top_k, seed=seed, stop_at_eot=stop,
                                       show_top=SHOW_TOP, **FAST_DECODING) for model in models)
    names = pinning.names(state)
    new = ([], [])
    last = [None, None]
    rows = []
    started = time.perf_counter()

    def update(with_table, final=False):
        n = max(len(new[0]), len(new[1]))
        rate = n / max(time.perf_counter() - started, 1e-9)
        text = prompt + tokenizer.decode([i for i in new[0] if i < tokenizer.n_vocab])
        flags = parted(*new)
        sides = [_side(name, step, ids_new, flags, done)
                 for name, step, ids_new, done in zip(
                     names, last, new, (len(new[0]) < n, len(new[1]) < n))]
        speed = _pair_speed_of(n, rate, last, models)
        state_now = _pair_state(state, prompt, len(ids), ids + new[0], ids + new[1], text, rows,
                                sides, speed, not final)
        return (text, next_token_bars_html(sides),
                _pair_table(state_now, live=not final) if with_table else gr.skip(),
                _pair_speed(speed), state_now)

    for pair, send, with_table in _paced(lockstep(steps_a, steps_b)):
        for side, step in enumerate(pair):
            if step is not None:
                new[side].append(step.token_id)
                last[side] = step
        rows.insert(0, _pair_row(len(rows), *pair))
        if send:
            yield update(with_table)
    if rows:
        yield update(True, final=True)


def _next_token_pair(models, prompt, output, mode, temperature, top_k, seed, state):
    """One more token of each model, continuing the lockstep generation on the page."""
    continuing = (state.get("pinned_gen_ids") and output == state.get("gen_text"))
    if continuing:
        start, prompt = state["gen_start"], state["gen_prompt"]
        all_ids = [list(state["gen_ids"]), list(state["pinned_gen_ids"])]
        rows = list(state.get("gen_rows", []))
    else:
        ids = pair_prompt_ids(prompt, models)
        start, all_ids, rows = len(ids), [list(ids), list(ids)], []
    _, temperature, top_k, seed = _generation_args(1, mode, temperature, top_k, seed)
    steps = []
    for model, ids in zip(models, all_ids):
        step = next(iter(generate_steps(
            model, ids, 1, temperature=temperature, top_k=top_k,
            seed=None if seed is None else seed + len(ids),   # as next_token: repeatable
            show_top=SHOW_TOP, **FAST_DECODING)))
        ids.append(step.token_id)
        steps.append(step)
    rows.insert(0, _pair_row(len(rows), *steps))
    tokenizer = get_tokenizer()
    text = prompt + tokenizer.decode([i for i in all_ids[0][start:] if i < tokenizer.n_vocab])
    new = [ids[start:] for ids in all_ids]
    flags = parted(*new)
    sides = [_side(name, step, ids_new, flags, False)
             for name, step, ids_new in zip(pinning.names(state), steps, new)]
    speed = _pair_speed_of(len(rows), 1 / max(max(s.seconds for s in steps), 1e-9), steps,
                           models)
    state = _pair_state(state, prompt, start, *all_ids, text, rows, sides, speed, False)
    return text, next_token_bars_html(sides), _pair_table(state), _pair_speed(speed), state


def _lens_figure(state):
    if pinning.comparing(state) and state.get("pinned_lens") is not None:
        return logit_lens_figure([state["lens"], state["pinned_lens"]], pinning.names(state))
    return logit_lens_figure([state["lens"]])


@friendly
def redraw(state):
    """The tab again (language, lecture mode): the last generation's bars, steps and speed,
    and the logit lens, as they were."""
    state = state or {}
    bars = state.get("gen_bars")
    lens = state.get("lens")
    pair = pinning.comparing(state) and state.get("pinned_gen_ids")
    return (next_token_bars_html(bars) if bars else bars_hint(), full_table(state),
            (_pair_speed(state["gen_speed"]) if pair else _speed(state["gen_speed"]))
            if state.get("gen_speed") else "",
            _lens_figure(state) if lens is not None else gr.skip(),
            gr.update(choices=mode_choices()))


def mode_choices():
    """The decoding choices, named by the server in the page's language (a choice whose name
    and value are the same text must not be translated by the browser: it would translate the
    value too)."""
    return [(t(m), m) for m in DECODING]


def sampling_controls(mode):
    """Temperature, top-k and seed matter only when sampling: shown only then."""
    return gr.update(visible=mode == "sample")


@friendly
def stopped(state):
    """After Stop (or a failure): the whole step table (the last update showed the newest
    rows only), and the session no longer streaming."""
    return full_table(state), {**state, "streaming": False} if state else state


def bars_hint():
    return ('<section class="nt-bars"><h4>' + t("Next-token candidates") + '</h4><p class="hint">'
            + t("Press <b>Generate</b> or <b>Next token</b>: the model's top 10 candidates for "
                "the next token appear here, as bars on a 0–100 % scale.") + "</p></section>")


# ---------------------------------------------------------------------------------------------
def create_ui():
    with gr.Tab(label("5 · Generate"), id="generate"):
        # What a lecturer projects while tokens stream (the text and the bars) sits at the top,
        # side by side, so that it is on screen at 1280x720; the settings are above the buttons
        # in the same column, the step table and the logit lens below.
        with gr.Row(equal_height=False):
            with gr.Column(scale=1):
                prompt = gr.Textbox(DEFAULT_PROMPT, label=label("Prompt"), lines=2, max_lines=3,
                                    elem_id="gen_prompt")
                with gr.Row():
                    max_new = gr.Slider(1, MAX_NEW_TOKENS, value=20, step=1, scale=3,
                                        label=label("max new tokens"), elem_id="max_new")
                    mode = gr.Radio(mode_choices(), value="greedy",
                                    label=label("decoding"), scale=2, elem_id="mode")
                with gr.Row(visible=False, elem_id="sampling") as sampling:
                    temperature = gr.Number(1.0, label=label("temperature"), min_width=100,
                                            elem_id="temperature")
                    top_k = gr.Number(50, label=label("top-k (0: all)"), precision=0,
                                      min_width=100, elem_id="top_k")
                    seed = gr.Number(123, label=label("sampling seed"), precision=0,
                                     min_width=100, elem_id="sampling_seed")
                with gr.Row():
                    gen_btn = gr.Button(label("Generate"), variant="primary", elem_id="gen_btn",
                                        min_width=90)
                    step_btn = gr.Button(label("Next token"), elem_id="step_btn", min_width=90)
                    stop_btn = gr.Button(label("Stop"), variant="stop", elem_id="stop_btn",
                                         min_width=70)
                speed = gr.HTML(elem_id="speed")  # lighter to redraw than Markdown, every step
                output = gr.Textbox(label=label("Text"), lines=4, max_lines=4, autoscroll=True,
                                    elem_id="gen_output", interactive=False)
            with gr.Column(scale=1):
                bars = gr.HTML(bars_hint(), label=label("Next-token probabilities (top 10)"),
                               elem_id="bars")
                stop_eot = gr.Checkbox(False, label=label("stop at <|endoftext|>"),
                                       elem_id="stop_eot")
                # Under the bars (not above the text): the text and bars stay on a 720 px screen.
                weights_note = gr.Markdown(label(NO_MODEL_NOTE), elem_id="generate_weights")
        history = gr.HTML(_table([]), label=label("Steps"), elem_id="history")
        with gr.Accordion(label("Logit lens: what each layer would predict"), open=False):
            lens_btn = gr.Button(label("Read the logit lens for the prompt"), elem_id="lens_btn")
            lens_plot = gr.Plot(show_label=False, label=label("Logit lens"), elem_id="lens_plot")
    return SimpleNamespace(prompt=prompt, max_new=max_new, mode=mode, temperature=temperature,
                           top_k=top_k, seed=seed, sampling=sampling, stop_eot=stop_eot,
                           gen_btn=gen_btn, step_btn=step_btn, stop_btn=stop_btn, speed=speed,
                           output=output, bars=bars, history=history, lens_btn=lens_btn,
                           lens_plot=lens_plot, weights_note=weights_note)


def cleared():
    """The Generate tab's results of a model that is gone (after a rebuild)."""
    return "", bars_hint(), _table([]), ""


def create_event_handlers(tab, state, view, redrawn):
    for event in redrawn:
        event.then(redraw, [state, *view],
                   [tab.bars, tab.history, tab.speed, tab.lens_plot, tab.mode],
                   api_visibility="private", show_progress="hidden")
    tab.mode.change(sampling_controls, tab.mode, tab.sampling, api_visibility="private")
    sampling = [tab.mode, tab.temperature, tab.top_k, tab.seed]
    shown = [tab.output, tab.bars, tab.history, tab.speed, state]
    generating = tab.gen_btn.click(
        generate, [tab.prompt, tab.max_new, *sampling, tab.stop_eot, state, *view], shown,
        api_name="generate", concurrency_limit=4, concurrency_id="generate",
        show_progress="hidden")
    # No progress overlay: it would cover the speed line (and the result comes in a moment).
    tab.step_btn.click(next_token, [tab.prompt, tab.output, *sampling, state, *view], shown,
                       api_name="next_token", concurrency_limit=4, concurrency_id="generate",
                       show_progress="hidden")
    tab.stop_btn.click(None, None, None, cancels=[generating], api_visibility="private") \
        .then(stopped, [state, *view], [tab.history, state], api_visibility="private")
    generating.failure(stopped, [state, *view], [tab.history, state], api_visibility="private")
    tab.lens_btn.click(logit_lens, [tab.prompt, state, *view], [tab.lens_plot, state],
                       api_name="logit_lens",
                       concurrency_limit=2, concurrency_id="inspect")
