"""The Gradio app: layout and event wiring. Every number comes from the core
(``explorer.config``, ``cache``, ``probes``, ``generate``, ``curves``, ``gradients``) and every
figure from ``explorer.plots``; this module only maps widgets to calls."""
from __future__ import annotations

import functools
import html
import inspect
import json
import logging
import math
import os
import tempfile
import time
from pathlib import Path

import gradio as gr
import numpy as np

from .. import native
from ..book.config import (ACTIVATIONS, NORM_PLACEMENTS, POS_ENCODINGS, PRESETS, GPTConfig,
                           count_parameters, get_preset)
from ..book.curves import activation_curves
from ..book.generate import check_generation_args, generate_steps
from ..book.gradients import gpt_gradients, shortcut_demo
from ..book.probe_points import POINT_LABELS
from ..book.tokenizer import get_tokenizer
from ..probes import (STAT_NAMES, longest_trace, trace, trace_peak_bytes,
                      with_attention_of_layer)
from ..runtime import heap
from ..runtime.build import resolve_device
from ..runtime.cache import ModelCache, model_bytes
from .plots.attention import attention_figure, attention_grid_figure, entropy_figure
from .plots.curves import activation_figure, gpt_gradient_figure, gradient_figure
from .plots.generation import NEXT_TOKEN_CSS, next_token_bars_html, table_html
from .plots.labels import percent, visible_token
from .plots.lens import logit_lens_figure
from .plots.model import architecture_html, parameter_figure
from .plots.statistics import histogram_figure, layer_stats_figure, token_heatmap_figure

log = logging.getLogger("gpt_explorer")

# Limits of the app (one source of truth; the README quotes them).
MAX_PROMPT_CHARS = 20_000
MAX_NEW_TOKENS = 500
# One trace's attention weights and logits may use this share of the memory budget (two traces
# run at once: concurrency_limit=2 on "inspect"). GPT-2 small over its full 1,024 tokens needs
# about 360 MB: within this share of the default budget on a machine with 8 GB.
TRACE_MEMORY_SHARE = 0.2
SHOW_TOP = 10
MAX_CHIPS = 256
LENS_POSITIONS = 32
DEFAULT_PRESET = "teach-small"
DEFAULT_PROMPT = "Every effort moves you"

CACHE = ModelCache()

KNOBS = ("vocab_size", "context_length", "emb_dim", "n_heads", "n_layers", "drop_rate",
         "qkv_bias", "norm_placement", "shortcut", "activation", "ff_expansion", "tie_weights",
         "pos_encoding")
HIST_PAIRS = {
    "norm1: before vs after LayerNorm": ("ln1_in", "ln1_out"),
    "norm2: before vs after LayerNorm": ("ln2_in", "ln2_out"),
    "final_norm: before vs after": ("final_norm_in", "final_norm_out"),
    "feed-forward hidden: before vs after activation": ("ff_pre", "ff_post"),
    "residual stream: entering vs leaving the block": ("resid_pre", "resid_post"),
}
CSS = """
.gradio-container {font-size: 17px;}
#title h1 {margin-bottom: 0;}
.chips {display: flex; flex-wrap: wrap; gap: 6px; font-family: ui-monospace, monospace;}
.chip {border: 1px solid #9ca3af; border-radius: 6px; padding: 2px 6px; background: #f3f4f6;
       color: #111827; text-align: center; line-height: 1.2;}
.chip small {display: block; color: #4b5563; font-size: 12px;}
/* The live parts of the Generate tab change up to 40 times a second: keep their layout and
   paint from spreading to the rest of the page. */
#bars, #history, #speed {contain: layout paint;}
""" + NEXT_TOKEN_CSS
# Run by the page when it loads: hands Gradio's streamed updates on one per painted frame, so
# that no generation step is applied and overwritten between two paints.
JS = (Path(__file__).parent / "static" / "paced_stream.js").read_text()


# ---------------------------------------------------------------------------------------------
# Errors: a ValueError from the core is a message for the student; anything else is our bug.
def friendly(fn):
    """Every handler's wrapper: show ``ValueError`` messages in the page (gr.Error), never a
    traceback; and when the handler is done, hand the memory its temporaries took back to the
    system (``heap.trim``), so that the app's resident memory stays near what it holds."""
    def translate(exc):
        if isinstance(exc, gr.Error):
            return exc
        if isinstance(exc, ValueError):
            return gr.Error(str(exc))
        if isinstance(exc, MemoryError) or type(exc).__name__ == "OutOfMemoryError":
            return gr.Error("Out of memory: choose a smaller model or a shorter prompt.")
        log.exception("unexpected error in %s", fn.__name__)
        return gr.Error(f"Something went wrong ({type(exc).__name__}); the model and your "
                        f"session are unchanged. Details are in the server log.")

    if inspect.isgeneratorfunction(fn):
        @functools.wraps(fn)
        def gen_wrapper(*args, **kwargs):
            try:
                yield from fn(*args, **kwargs)
            except Exception as exc:  # noqa: BLE001 - translated for the user
                raise translate(exc) from None
            finally:
                heap.trim()
        return gen_wrapper

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - translated for the user
            raise translate(exc) from None
        finally:
            heap.trim()
    return wrapper


# ---------------------------------------------------------------------------------------------
# Session state: the key of the session's model (the model itself lives in CACHE) and the
# last trace, so that switching layers or heads needs no new forward pass.
def _model(state):
    if not state or "key" not in state:
        raise gr.Error("No model yet: build one in the Build tab first.")
    model, _ = CACHE.get(state["key"])
    return model


def _prompt_ids(prompt, model=None):
    if not isinstance(prompt, str):
        raise gr.Error("The prompt must be text.")
    if len(prompt) > MAX_PROMPT_CHARS:
        raise gr.Error(f"The prompt has {len(prompt):,} characters; the explorer takes at most "
                       f"{MAX_PROMPT_CHARS:,}. Shorten it.")
    if not prompt.strip():
        raise gr.Error("The prompt is empty: type some text first.")
    ids = get_tokenizer().encode(prompt)
    if model is not None and max(ids) >= model.cfg.vocab_size:
        vocab = model.cfg.vocab_size
        raise gr.Error(f"The GPT-2 tokenizer gives this prompt token ids up to {max(ids):,}, but "
                       f"this model's vocab_size is {vocab:,} (ids 0 to {vocab - 1:,}). Rebuild "
                       f"with vocab_size {get_tokenizer().n_vocab:,}, the tokenizer's.")
    return ids


def _check_trace_size(cfg, n_tokens):
    """Refuse, before running it, a trace too large for memory."""
    need = trace_peak_bytes(cfg, n_tokens)
    allowed = CACHE.budget_bytes * TRACE_MEMORY_SHARE
    if need > allowed:
        raise gr.Error(f"Tracing {n_tokens:,} tokens needs about {need / 1024 ** 2:,.0f} MB (the "
                       f"attention weights grow with the square of the length: {cfg.n_heads} "
                       f"heads × {n_tokens:,}²), but one trace may use {allowed / 1024 ** 2:,.0f} "
                       f"MB of memory. Use a prompt of at most "
                       f"{longest_trace(cfg, allowed):,} tokens.")


def _int(value, name):
    if value is None or (isinstance(value, float) and not np.isfinite(value)):
        raise gr.Error(f"{name} is empty: enter a whole number.")
    if isinstance(value, float) and value != int(value):
        raise gr.Error(f"{name} must be a whole number (got {value}).")
    try:
        return int(value)
    except (TypeError, ValueError):
        raise gr.Error(f"{name} must be a whole number (got {value!r}).") from None


# ---------------------------------------------------------------------------------------------
# Build
def preset_values(preset):
    cfg = get_preset(preset).to_dict()
    return [cfg[k] for k in KNOBS]


@friendly
def build(preset, vocab_size, context_length, emb_dim, n_heads, n_layers, drop_rate, qkv_bias,
          norm_placement, shortcut, activation, ff_expansion, tie_weights, pos_encoding,
          seed, device, dtype, state, progress=gr.Progress()):
    values = dict(zip(KNOBS, (vocab_size, context_length, emb_dim, n_heads, n_layers, drop_rate,
                              qkv_bias, norm_placement, shortcut, activation, ff_expansion,
                              tie_weights, pos_encoding)))
    for name in ("vocab_size", "context_length", "emb_dim", "n_heads", "n_layers",
                 "ff_expansion"):
        values[name] = _int(values[name], name)
    if values["drop_rate"] is None:
        raise gr.Error("drop_rate is empty: enter a number in [0, 1).")
    progress(0.05, desc="Checking the config")
    cfg = GPTConfig.from_dict(values)
    key = CACHE.key(cfg, seed=_int(seed, "seed"), device=device, dtype=dtype)
    progress(0.2, desc="Initialising the weights (torch.manual_seed, then GPTModel(cfg))")
    started = time.perf_counter()
    model, cached = CACHE.get(key)
    seconds = time.perf_counter() - started
    progress(1.0, desc="Done")
    counts = count_parameters(cfg)
    how = (f"from the shared cache in {seconds * 1000:.0f} ms" if cached
           else f"built in {seconds:.2f} s")
    status = (f"**Model ready** — {preset if cfg == PRESETS.get(preset) else 'custom config'}, "
              f"{counts.total:,} parameters, on **{key.device}** ({key.dtype}), seed {key.seed}, "
              f"{how}.")
    new_state = {"key": key}
    # Layer and head pickers follow the built model (returned here, not in a follow-up
    # event, so API calls get the same per-session limits as the page).
    # A Gradio slider needs minimum < maximum: a one-block model gets a fixed 0..1 slider
    # (layer 1 is then refused with a message naming the layers that exist).
    layers = gr.update(maximum=max(cfg.n_layers - 1, 1), value=0,
                       interactive=cfg.n_layers > 1)
    heads = gr.update(choices=["mean"] + [str(h) for h in range(cfg.n_heads)], value="mean")
    return (status, architecture_html(cfg, counts), _parameter_table(counts),
            parameter_figure(counts), _memory_markdown(cfg, counts, key), new_state,
            layers, layers, layers, heads)


def _parameter_table(counts):
    rows = [[name, f"{n:,}", percent(n / counts.total)]
            for name, n in counts.breakdown().items()]
    rows.append(["total", f"{counts.total:,}", "100 %"])
    return rows


def _memory_markdown(cfg, counts, key):
    tied = cfg.tie_weights
    head = (f"The output head shares `tok_emb`'s weights (weight tying), so the total already "
            f"counts that matrix once: **{counts.total:,}**." if tied else
            f"Total **{counts.total:,}**; without the output head "
            f"**{counts.total_without_output_head:,}** — the book's two figures (section "
            f"4.6). GPT-2 reuses the token embedding as its output head (weight tying), which "
            f"is why the book's 163 M-parameter `GPT_CONFIG_124M` is called 124M. Tick "
            f"*tie out_head to tok_emb* to build it that way.")
    return (f"{head}\n\nMemory for the weights: **{counts.memory_mb('float32'):,.2f} MB** at "
            f"float32, **{counts.memory_mb('bfloat16'):,.2f} MB** at bfloat16 (bytes / 1024²). "
            f"Runs on **{key.device}**. Shared cache: {len(CACHE)} model(s), "
            f"{CACHE.used_bytes() / 1024 ** 2:,.0f} of {CACHE.budget_bytes / 1024 ** 2:,.0f} MB.")


# ---------------------------------------------------------------------------------------------
# Inside the forward pass
def _chips(trace_):
    pieces = []
    for tid, text in list(zip(trace_.token_ids, trace_.tokens))[:MAX_CHIPS]:
        shown = html.escape(text.replace(" ", "␣").replace("\n", "↵"))
        pieces.append(f'<span class="chip">{shown}<small>{tid}</small></span>')
    more = len(trace_.token_ids) - MAX_CHIPS
    tail = f"<span>… and {more} more tokens</span>" if more > 0 else ""
    return f'<div class="chips">{"".join(pieces)}{tail}</div>'


@friendly
def run_trace(prompt, state, layer, pair, heat_point, heat_stat):
    model = _model(state)
    ids = _prompt_ids(prompt, model)
    if len(ids) <= model.cfg.context_length:  # longer: trace() says to shorten it
        _check_trace_size(model.cfg, len(ids))
    tr = trace(model, ids)
    state = {**state, "trace": tr, "prompt": prompt}
    summary = (f"{len(ids)} tokens · traced in {tr.seconds * 1000:.0f} ms" +
               "".join(f" · {n}" for n in tr.notes))
    return (_chips(tr), summary, layer_stats_figure(tr), *_inside_views(
        tr, layer, pair, heat_point, heat_stat), state)


def _trace_of(state):
    if not state or state.get("trace") is None:
        raise gr.Error("Trace a prompt first (Inside the forward pass → Trace).")
    return state["trace"]


def _layer(tr, layer):
    layer = _int(layer, "layer")
    if not 0 <= layer < tr.n_layers:
        raise gr.Error(f"Layer {layer} does not exist: this model has layers 0 to "
                       f"{tr.n_layers - 1}.")
    return layer


def _inside_views(tr, layer, pair, heat_point, heat_stat):
    layer = _layer(tr, layer)
    if pair not in HIST_PAIRS:
        raise gr.Error(f"Unknown comparison {pair!r}; choose one of: {', '.join(HIST_PAIRS)}.")
    points = HIST_PAIRS[pair]
    available = set(tr.points) | set(tr.final)
    if not set(points) <= available:
        raise gr.Error("This model has no LayerNorm (norm_placement='none'): choose the "
                       "feed-forward or residual-stream comparison.")
    if heat_point not in tr.points:
        raise gr.Error(f"Probe point {heat_point!r} is not in this trace; choose one of "
                       f"{', '.join(tr.points)}.")
    if heat_stat not in STAT_NAMES:
        raise gr.Error(f"Unknown statistic {heat_stat!r}; choose one of {', '.join(STAT_NAMES)}.")
    return (histogram_figure(tr, layer, points),
            token_heatmap_figure(tr, heat_point, heat_stat))


@friendly
def inside_views(state, layer, pair, heat_point, heat_stat):
    return _inside_views(_trace_of(state), layer, pair, heat_point, heat_stat)


@friendly
def export_stats(state, fmt):
    tr = _trace_of(state)
    rows = []
    for group in (tr.points, tr.final):
        for point, s in group.items():
            for layer in range(s.overall["mean"].shape[0]):
                row = {"point": point, "where": POINT_LABELS[point],
                       "layer": layer if group is tr.points else "final"}
                row.update({k: float(v[layer]) for k, v in s.overall.items()})
                rows.append(row)
    if fmt == "JSON":
        return _write_export("activation_stats.json", json.dumps(
            {"tokens": tr.tokens, "token_ids": tr.token_ids, "config": tr.config,
             "stats": rows,
             "per_token": {p: {k: v.tolist() for k, v in s.per_token.items()}
                           for p, s in tr.points.items()}}, indent=1, default=_json_default))
    header = list(rows[0])
    lines = [",".join(header)] + [",".join(_csv(r[h]) for h in header) for r in rows]
    return _write_export("activation_stats.csv", "\n".join(lines) + "\n")


def _csv(value):
    text = str(value)
    return f'"{text}"' if "," in text else text


def _json_default(value):
    if isinstance(value, (np.floating, np.integer)):
        return value.item()
    return str(value)


def _write_export(name, text):
    folder = tempfile.mkdtemp(prefix="gpt_explorer_")
    path = os.path.join(folder, name)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    return path


# ---------------------------------------------------------------------------------------------
# Attention
@friendly
def attention_views(state, layer, head):
    model = _model(state)
    tr = _trace_of(state)
    layer = _layer(tr, layer)
    if layer not in tr.attention:  # long inputs keep attention only on demand
        tr = with_attention_of_layer(model, tr, layer)
        state = {**state, "trace": tr}
    if head != "mean":
        head = _int(head, "head")
    return (attention_figure(tr, layer, head), attention_grid_figure(tr, layer),
            entropy_figure(tr), state)


@friendly
def export_attention(state, layer, head):
    tr = _trace_of(state)
    layer = _layer(tr, layer)
    if layer not in tr.attention:
        raise gr.Error("Show this layer's attention first, then export it.")
    weights = tr.attention[layer]
    matrix = weights.mean(0) if head == "mean" else weights[_int(head, "head")]
    header = "query\\key," + ",".join(_csv(t) for t in tr.tokens)
    lines = [header] + [_csv(tr.tokens[i]) + "," + ",".join(f"{v:.6g}" for v in row)
                        for i, row in enumerate(matrix)]
    return _write_export(f"attention_layer{layer}_head{head}.csv", "\n".join(lines) + "\n")


# ---------------------------------------------------------------------------------------------
# Activation functions
@friendly
def activation_view(x_min, x_max, functions, derivatives, layer, state):
    if not functions:
        raise gr.Error("Tick at least one activation function.")
    curves = activation_curves(float(x_min), float(x_max))
    hist = None
    tr = state.get("trace") if state else None
    if tr is not None and "ff_pre" in tr.points:
        layer = _layer(tr, layer)
        s = tr.points["ff_pre"]
        hist = (s.hist_counts[layer], s.hist_edges[layer])
    return activation_figure(curves, show=tuple(functions), derivatives=bool(derivatives),
                                   ff_pre_hist=hist)


# ---------------------------------------------------------------------------------------------
# Generate
def _generation_args(max_new_tokens, mode, temperature, top_k, seed):
    max_new = _int(max_new_tokens, "max new tokens")
    if not 1 <= max_new <= MAX_NEW_TOKENS:
        raise gr.Error(f"max new tokens must be between 1 and {MAX_NEW_TOKENS} in the explorer "
                       f"(got {max_new}).")
    if mode == "greedy":
        return max_new, 0.0, None, None
    if mode != "sample":
        raise gr.Error(f"Decoding must be 'greedy' or 'sample' (got {mode!r}).")
    try:
        temperature = 0.0 if temperature is None else float(temperature)
    except (TypeError, ValueError):
        raise gr.Error(f"temperature must be a number above 0 (got {temperature!r}).") from None
    if not math.isfinite(temperature):
        raise gr.Error(f"temperature must be a finite number above 0 (got {temperature}).")
    if not temperature > 0:
        raise gr.Error("Sampling needs a temperature above 0 (0 would be greedy decoding).")
    top_k = None if top_k in (None, 0, "") else _int(top_k, "top-k")
    seed = _int(seed, "seed")
    return max_new, temperature, top_k, seed


def _step_row(step):
    return [step.index + 1, visible_token(step.text, 24), f"{100 * step.prob:.3g} %",
            step.rank, f"{step.entropy_bits:.2f}", f"{step.seconds * 1000:.1f}"]


def _table(rows, live=False):
    """The step table, newest first; while streaming only the newest rows (a page lays out
    40 rows faster than 500), with a line saying how many more there are."""
    if live and len(rows) > LIVE_TABLE_ROWS:
        more = len(rows) - LIVE_TABLE_ROWS
        rows = rows[:LIVE_TABLE_ROWS] + [["…", f"{more} earlier steps", "", "", "", ""]]
    return table_html(HISTORY_HEADERS, rows, caption="Steps (newest first)")


def full_table(state):
    """The whole step table from the session (after Stop: the last update showed the newest
    rows only)."""
    return _table((state or {}).get("gen_rows", []))


HISTORY_HEADERS = ["step", "token", "probability", "rank", "entropy (bits)", "ms"]
# The history lists the newest step first, so the live row is always in sight.
# A page redraws the text and bars up to 40 times a second (a browser keeps up: see
# bench/browser_rate.py); a faster model skips steps on screen, never the last one, and a
# slower one's late step is held back a few ms rather than skipped. The step
# table re-renders all its rows, so it follows twice a second, and completely at the end.
STREAM_INTERVAL_S = 0.025
# The C one-token step and greedy summary, where they apply (else the model's own forward).
FAST_DECODING = dict(step=native.model_step, summarize=native.next_token_summary)
TABLE_INTERVAL_S = 0.5
LIVE_TABLE_ROWS = 40


@friendly
def generate(prompt, max_new_tokens, mode, temperature, top_k, seed, stop_at_eot, state):
    model = _model(state)
    ids = _prompt_ids(prompt, model)
    max_new, temperature, top_k, seed = _generation_args(max_new_tokens, mode, temperature,
                                                         top_k, seed)
    check_generation_args(max_new, temperature, top_k, seed, model.cfg.vocab_size)
    tokenizer = get_tokenizer()
    steps = generate_steps(model, ids, max_new, temperature=temperature, top_k=top_k, seed=seed,
                           stop_at_eot=bool(stop_at_eot), show_top=SHOW_TOP, **FAST_DECODING)
    new_ids, rows = [], []
    started = time.perf_counter()

    def update(step, with_table, final=False):
        rate = len(new_ids) / max(time.perf_counter() - started, 1e-9)
        text = prompt + tokenizer.decode([t for t in new_ids if t < tokenizer.n_vocab])
        # The state follows every update, so a stopped generation can go on with "Next token"
        # from exactly what the page shows (the table may lag: the state has every row).
        return (text, _bars(step), _table(rows, live=not final) if with_table else gr.skip(),
                _speed(len(new_ids), rate, step), {**state, "gen_ids": ids + new_ids,
                                                   "gen_text": text, "gen_rows": list(rows)})

    sent = table_sent = -math.inf     # when the last update, and the last table, went out
    shown = None                      # (steps, whole table shown) of the last update
    arrived, gap = started, None      # when the last step came, and the smoothed gap between
    for step in steps:
        new_ids.append(step.token_id)
        rows.insert(0, _step_row(step))
        now = time.perf_counter()
        gap = now - arrived if gap is None else 0.8 * gap + 0.2 * (now - arrived)
        arrived = now
        if now - sent < STREAM_INTERVAL_S:
            if gap < STREAM_INTERVAL_S:
                continue   # faster than a page can draw: the next update carries this step too
            # A model slower than that, one step late and the next one right behind it: show
            # it a moment later rather than not at all.
            time.sleep(sent + STREAM_INTERVAL_S - now)
            now = time.perf_counter()
        with_table = now - table_sent >= TABLE_INTERVAL_S
        yield update(step, with_table)
        sent, shown = now, (len(new_ids), with_table and len(rows) <= LIVE_TABLE_ROWS)
        table_sent = now if with_table else table_sent
    if new_ids and shown != (len(new_ids), True):
        yield update(step, True, final=True)   # the final state, always complete


def _bars(step):
    chosen = step.top_ids.index(step.token_id) if step.token_id in step.top_ids else None
    return next_token_bars_html(step.top_texts, step.top_probs, chosen)


def _speed(n, rate, step):
    note = "" if step.cached else " · window full: recomputing the last context_length tokens"
    return (f"{n} tokens · <b>{rate:.1f} tokens/s</b> · {native.decoding_label(step.fast_step)}"
            f"{note}")


@friendly
def next_token(prompt, output, mode, temperature, top_k, seed, state):
    """Advance exactly one token, continuing the current output (for lectures)."""
    model = _model(state)
    tokenizer = get_tokenizer()
    continuing = state.get("gen_ids") and output == state.get("gen_text")
    ids = list(state["gen_ids"]) if continuing else _prompt_ids(prompt, model)
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
    state = {**state, "gen_ids": ids, "gen_text": text, "gen_rows": rows}
    return (text, _bars(step), _table(rows),
            _speed(len(rows), 1 / max(step.seconds, 1e-9), step), state)


@friendly
def logit_lens(prompt, state):
    """Final norm + output head on every block's output, at the prompt's last 32 positions."""
    model = _model(state)
    ids = _prompt_ids(prompt, model)
    if len(ids) > model.cfg.context_length:
        ids = ids[-model.cfg.context_length:]
    _check_trace_size(model.cfg, len(ids))
    positions = list(range(max(0, len(ids) - LENS_POSITIONS), len(ids)))
    return logit_lens_figure(trace(model, ids, attention_layers=None, lens=positions,
                                         entropy=False))


def sampling_controls(mode):
    """Temperature, top-k and seed matter only when sampling."""
    return [gr.update(interactive=mode == "sample")] * 3


# ---------------------------------------------------------------------------------------------
# Shortcut lesson (book 4.4)
@friendly
def gradient_views(state):
    book = gradient_figure(shortcut_demo(False), shortcut_demo(True))
    if not state or "key" not in state:
        return book, None
    cfg = state["key"].config
    if model_bytes(cfg) > 200 * 1024 ** 2:
        raise gr.Error("The GPT gradient comparison builds two trainable copies; use a model "
                       "under 200 MB (a teaching preset) for it.")
    ids = get_tokenizer().encode(DEFAULT_PROMPT + " forward, one step at a time.")
    ids = ids[: cfg.context_length]
    with_sc = gpt_gradients(cfg.replace(shortcut=True), ids, seed=state["key"].seed)
    without = gpt_gradients(cfg.replace(shortcut=False), ids, seed=state["key"].seed)
    return book, gpt_gradient_figure(without, with_sc, ("without shortcut",
                                                              "with shortcut"))


# ---------------------------------------------------------------------------------------------
def build_app() -> gr.Blocks:
    default = PRESETS[DEFAULT_PRESET]
    with gr.Blocks(title="GPT Explorer") as demo:
        state = gr.State(None)
        gr.Markdown("# GPT Explorer\nBuild the GPT of *Build a Large Language Model (From "
                    "Scratch)*, chapter 4, and watch it work.", elem_id="title")
        status = gr.Markdown("No model yet — build one below.", elem_id="status")

        with gr.Tab("1 · Build", id="build"):
            with gr.Row():
                with gr.Column(scale=2):
                    preset = gr.Dropdown(list(PRESETS), value=DEFAULT_PRESET, label="Preset",
                                         elem_id="preset")
                    with gr.Row():
                        vocab_size = gr.Number(default.vocab_size, label="vocab_size",
                                               precision=0, elem_id="vocab_size")
                        context_length = gr.Number(default.context_length,
                                                   label="context_length", precision=0,
                                                   elem_id="context_length")
                    with gr.Row():
                        emb_dim = gr.Number(default.emb_dim, label="emb_dim", precision=0,
                                            elem_id="emb_dim")
                        n_heads = gr.Number(default.n_heads, label="n_heads", precision=0,
                                            elem_id="n_heads")
                        n_layers = gr.Number(default.n_layers, label="n_layers", precision=0,
                                             elem_id="n_layers")
                    with gr.Row():
                        drop_rate = gr.Number(default.drop_rate, label="drop_rate",
                                              elem_id="drop_rate")
                        ff_expansion = gr.Number(default.ff_expansion, label="ff_expansion",
                                                 precision=0, elem_id="ff_expansion")
                    with gr.Row():
                        norm_placement = gr.Radio(list(NORM_PLACEMENTS), value="pre",
                                                  label="LayerNorm placement")
                        activation = gr.Radio(list(ACTIVATIONS), value="gelu",
                                              label="activation")
                    pos_encoding = gr.Radio(list(POS_ENCODINGS), value="learned",
                                            label="position encoding")
                    with gr.Row():
                        shortcut = gr.Checkbox(True, label="shortcut connections")
                        qkv_bias = gr.Checkbox(False, label="qkv_bias")
                        tie_weights = gr.Checkbox(False, label="tie out_head to tok_emb")
                    with gr.Row():
                        seed = gr.Number(123, label="seed", precision=0, elem_id="seed")
                        devices = ["auto", "cpu"] + (["cuda"] if resolve_device("auto").type
                                                     == "cuda" else [])
                        device = gr.Dropdown(devices, value="auto", label="device")
                        dtype = gr.Dropdown(["float32", "bfloat16"], value="float32",
                                            label="dtype (bfloat16: GPU only)")
                    build_btn = gr.Button("Build the model", variant="primary",
                                          elem_id="build_btn")
                with gr.Column(scale=3):
                    arch = gr.HTML(architecture_html(default, count_parameters(default)))
                    memory = gr.Markdown()
            with gr.Row():
                params_table = gr.Dataframe(headers=["component", "parameters", "share"],
                                            label="Parameters", interactive=False)
                params_plot = gr.Plot(parameter_figure(count_parameters(default)), show_label=False,
                                      label="Parameters per component", elem_id="params_plot")
        knobs = [vocab_size, context_length, emb_dim, n_heads, n_layers, drop_rate, qkv_bias,
                 norm_placement, shortcut, activation, ff_expansion, tie_weights, pos_encoding]

        with gr.Tab("2 · Inside the forward pass", id="inside"):
            with gr.Row():
                prompt = gr.Textbox(DEFAULT_PROMPT, label="Prompt", lines=2, scale=4,
                                    elem_id="trace_prompt")
                trace_btn = gr.Button("Trace", variant="primary", scale=1, elem_id="trace_btn")
            chips = gr.HTML(elem_id="chips")
            trace_info = gr.Markdown()
            stats_plot = gr.Plot(show_label=False, label="Before and after LayerNorm, layer by layer",
                                 elem_id="stats_plot")
            with gr.Row():
                layer = gr.Slider(0, default.n_layers - 1, value=0, step=1, label="layer")
                pair = gr.Dropdown(list(HIST_PAIRS), value=list(HIST_PAIRS)[0],
                                   label="distribution")
                heat_point = gr.Dropdown(list(POINT_LABELS)[:11], value="resid_pre",
                                         label="heatmap: probe point")
                heat_stat = gr.Dropdown(list(STAT_NAMES), value="std", label="heatmap: statistic")
            hist_plot = gr.Plot(show_label=False, label="Distribution", elem_id="hist_plot")
            heat_plot = gr.Plot(show_label=False, label="Per token and layer",
                                elem_id="heat_plot")
            with gr.Row():
                export_fmt = gr.Radio(["CSV", "JSON"], value="CSV", label="export format")
                export_btn = gr.Button("Export statistics")
                export_file = gr.File(label="statistics file", height=80)
            with gr.Accordion("Why shortcut connections? (book 4.4)", open=False):
                grad_btn = gr.Button("Run one backward pass")
                with gr.Row():
                    grad_book = gr.Plot(show_label=False, label="The book's 5-layer network")
                    grad_gpt = gr.Plot(show_label=False, label="Your GPT config, per block")

        with gr.Tab("3 · Attention", id="attention"):
            gr.Markdown("Trace a prompt in tab 2 first. Rows are queries (the token that "
                        "looks), columns are keys (the token looked at); the grey upper "
                        "triangle is masked: a token never sees the future.")
            with gr.Row():
                att_layer = gr.Slider(0, default.n_layers - 1, value=0, step=1, label="layer")
                att_head = gr.Dropdown(["mean"] + [str(h) for h in range(default.n_heads)],
                                       value="mean", label="head")
                att_btn = gr.Button("Show attention", variant="primary", elem_id="att_btn")
            att_plot = gr.Plot(show_label=False, label="Attention weights", elem_id="att_plot")
            with gr.Row():
                grid_plot = gr.Plot(show_label=False, label="Every head of this layer", elem_id="grid_plot")
                entropy_plot = gr.Plot(show_label=False, label="Entropy per head", elem_id="entropy_plot")
            with gr.Row():
                att_export_btn = gr.Button("Export this attention matrix (CSV)")
                att_export_file = gr.File(label="attention file", height=80)

        with gr.Tab("4 · Activation functions", id="activations"):
            with gr.Row():
                x_min = gr.Slider(-20, 0, value=-4, step=0.5, label="x from")
                x_max = gr.Slider(0, 20, value=4, step=0.5, label="x to")
                functions = gr.CheckboxGroup(list(ACTIVATIONS), value=["gelu", "relu"],
                                             label="functions")
                derivatives = gr.Checkbox(False, label="show derivatives")
                act_layer = gr.Slider(0, default.n_layers - 1, value=0, step=1,
                                      label="layer (real inputs)")
            act_plot = gr.Plot(show_label=False, label="Activation functions", elem_id="act_plot")

        with gr.Tab("5 · Generate", id="generate"):
            with gr.Row():
                gen_prompt = gr.Textbox(DEFAULT_PROMPT, label="Prompt", lines=2, scale=3,
                                        elem_id="gen_prompt")
                with gr.Column(scale=2):
                    max_new = gr.Slider(1, MAX_NEW_TOKENS, value=20, step=1,
                                        label="max new tokens", elem_id="max_new")
                    mode = gr.Radio(["greedy", "sample"], value="greedy", label="decoding")
                    with gr.Row():
                        temperature = gr.Number(1.0, label="temperature", interactive=False)
                        top_k = gr.Number(50, label="top-k (0: all)", precision=0,
                                          interactive=False)
                        gen_seed = gr.Number(123, label="sampling seed", precision=0,
                                             interactive=False)
                    stop_eot = gr.Checkbox(False, label="stop at <|endoftext|>")
            with gr.Row():
                gen_btn = gr.Button("Generate", variant="primary", elem_id="gen_btn")
                step_btn = gr.Button("Next token", elem_id="step_btn")
                stop_btn = gr.Button("Stop", variant="stop", elem_id="stop_btn")
            speed = gr.HTML(elem_id="speed")  # lighter to redraw than Markdown, every step
            output = gr.Textbox(label="Text", lines=6, max_lines=6, autoscroll=True,
                                elem_id="gen_output", interactive=False)
            with gr.Row():
                bars = gr.HTML(label="Next-token probabilities (top 10)", elem_id="bars")
                history = gr.HTML(_table([]), label="Steps", elem_id="history")
            with gr.Accordion("Logit lens: what each layer would predict", open=False):
                lens_btn = gr.Button("Read the logit lens for the prompt", elem_id="lens_btn")
                lens_plot = gr.Plot(show_label=False, label="Logit lens", elem_id="lens_plot")

        # ----- events -------------------------------------------------------------------
        preset.change(preset_values, preset, knobs, api_name="preset_config")
        build_inputs = [preset, *knobs, seed, device, dtype, state]
        # show_progress_on: progress (and an error badge) on the status line only, so a
        # refused config leaves the previous model's views in place.
        build_btn.click(
            build, build_inputs, [status, arch, params_table, params_plot, memory, state,
                                  layer, att_layer, act_layer, att_head],
            api_name="build", concurrency_limit=1, concurrency_id="build",
            show_progress_on=[status])
        mode.change(sampling_controls, mode, [temperature, top_k, gen_seed],
                    api_visibility="private")

        trace_inputs = [prompt, state, layer, pair, heat_point, heat_stat]
        trace_outputs = [chips, trace_info, stats_plot, hist_plot, heat_plot, state]
        act_inputs = [x_min, x_max, functions, derivatives, act_layer, state]
        for trigger in (trace_btn.click, prompt.submit):
            trigger(run_trace, trace_inputs, trace_outputs, api_name="trace",
                    concurrency_limit=2, concurrency_id="inspect",
                    show_progress_on=[trace_info]) \
                .success(activation_view, act_inputs, act_plot, api_visibility="private")
        for control in (layer, pair, heat_point, heat_stat):
            control.change(inside_views, [state, layer, pair, heat_point, heat_stat],
                           [hist_plot, heat_plot], api_name="inside_views",
                           concurrency_limit=2, concurrency_id="inspect")
        export_btn.click(export_stats, [state, export_fmt], export_file, api_name="export_stats")
        grad_btn.click(gradient_views, state, [grad_book, grad_gpt], api_name="gradients",
                       concurrency_limit=1)

        att_inputs = [state, att_layer, att_head]
        att_outputs = [att_plot, grid_plot, entropy_plot, state]
        att_btn.click(attention_views, att_inputs, att_outputs, api_name="attention",
                      concurrency_limit=2, concurrency_id="inspect")
        for control in (att_layer, att_head):
            control.change(attention_views, att_inputs, att_outputs,
                           api_visibility="private", concurrency_limit=2,
                           concurrency_id="inspect")
        att_export_btn.click(export_attention, att_inputs[:3], att_export_file,
                             api_name="export_attention")

        for control in (x_min, x_max, functions, derivatives, act_layer):
            control.change(activation_view, act_inputs, act_plot, api_visibility="private")
        demo.load(activation_view, act_inputs, act_plot, api_name="activation_curves")

        gen_event = gen_btn.click(
            generate, [gen_prompt, max_new, mode, temperature, top_k, gen_seed, stop_eot, state],
            [output, bars, history, speed, state], api_name="generate",
            concurrency_limit=4, concurrency_id="generate", show_progress="hidden")
        step_btn.click(next_token, [gen_prompt, output, mode, temperature, top_k,
                                    gen_seed, state],
                       [output, bars, history, speed, state], api_name="next_token",
                       concurrency_limit=4, concurrency_id="generate", show_progress_on=[speed])
        stop_btn.click(None, None, None, cancels=[gen_event], api_visibility="private") \
            .then(full_table, state, history, api_visibility="private")
        lens_btn.click(logit_lens, [gen_prompt, state], lens_plot, api_name="logit_lens",
                       concurrency_limit=2, concurrency_id="inspect")

        def release_session(request: gr.Request):
            """The browser tab (or API client) went away: drop this session's state (its
            model key and last trace) now, not after Gradio's one-hour grace period. The
            model stays in the shared cache; a returning tab is asked to build again."""
            holder = getattr(demo, "state_holder", None)  # set by Gradio when the app starts
            if holder is not None and request is not None and request.session_hash:
                holder.delete_state(request.session_hash)

        demo.unload(release_session)
    return demo
