"""What every tab needs: the app's limits, the shared model cache, the error wrapper of every
handler, and the helpers that read a session's state and the user's input."""
from __future__ import annotations

import functools
import inspect
import logging
import os

import gradio as gr
import numpy as np

from ..book.config import PRESETS
from ..book.tokenizer import get_tokenizer
from ..probes import longest_trace, trace_peak_bytes
from ..runtime import heap
from ..runtime.cache import ModelCache

log = logging.getLogger("gpt_explorer")

# Limits of the app (one source of truth; the README quotes them).
MAX_PROMPT_CHARS = 20_000
MAX_NEW_TOKENS = 500
# One trace's attention weights and logits may use this share of the memory budget (two traces
# run at once: concurrency_limit=2 on "inspect"). GPT-2 small over its full 1,024 tokens needs
# about 360 MB: within this share of the default budget on a machine with 8 GB.
TRACE_MEMORY_SHARE = 0.2
DEFAULT_PRESET = "teach-small"
DEFAULT_CONFIG = PRESETS[DEFAULT_PRESET]   # what the page shows before the first build
DEFAULT_PROMPT = "Every effort moves you"

# Every session's model lives here (the session keeps only its key); sessions share it.
CACHE = ModelCache()


# ---------------------------------------------------------------------------------------------
# Errors: a ValueError from the core is a message for the student; anything else is our bug.
def friendly(fn):
    """Every handler's wrapper: show ``ValueError`` messages in the page (gr.Error), never a
    traceback; and when the handler is done, hand the memory its temporaries took back to the
    system (``heap.trim``), so that the app's resident memory stays near what it holds.

    The server log: an expected refusal (gr.Error, ValueError, out of memory) is one line; an
    unexpected error is its traceback, once (Gradio is told not to print it again)."""
    def translate(exc):
        # An expected refusal (bad input, too big): the message for the page and one log
        # line, not Gradio's printed traceback.
        if isinstance(exc, gr.Error):
            exc.print_exception = False
            log.info("%s refused: %s", fn.__name__, exc.message)
            return exc
        if isinstance(exc, ValueError):
            log.info("%s refused: %s", fn.__name__, exc)
            return gr.Error(str(exc), print_exception=False)
        if isinstance(exc, MemoryError) or type(exc).__name__ == "OutOfMemoryError":
            log.warning("%s: out of memory", fn.__name__)
            return gr.Error("Out of memory: choose a smaller model or a shorter prompt.",
                            print_exception=False)
        log.exception("unexpected error in %s", fn.__name__)
        return gr.Error(f"Something went wrong ({type(exc).__name__}); the model and your "
                        f"session are unchanged. Details are in the server log.",
                        print_exception=False)

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
# Session state: the key of the session's model (the model itself lives in CACHE), the last
# trace (so that switching layers or heads needs no new forward pass) and the generation.
def model_of(state):
    if not state or "key" not in state:
        raise gr.Error("No model yet: build one in the Build tab first.")
    model, _ = CACHE.get(state["key"])
    return model


def has_trace(state):
    return bool(state) and state.get("trace") is not None


def trace_of(state):
    if not state or state.get("trace") is None:
        raise gr.Error("Trace a prompt first (Inside the forward pass → Trace).")
    return state["trace"]


def weights_note(key) -> str:
    """Which weights the session's model has, for every tab's note (``key.source.caption``)."""
    return f"Weights: **{key.source.caption}** ({key.config.n_layers} layers, " \
           f"{key.config.n_heads} heads, emb_dim {key.config.emb_dim})"


NO_MODEL_NOTE = "Weights: none yet — build or load a model in tab 1."

# Loading a checkpoint by its path on the server: on by default, except on a Hugging Face
# Space, where visitors upload instead (a path would let them probe the server's files).
SERVER_PATHS_ENV = "GPT_EXPLORER_SERVER_PATHS"


def server_paths_allowed(environ=os.environ) -> bool:
    value = environ.get(SERVER_PATHS_ENV, "").strip().lower()
    if value:
        return value in ("1", "true", "yes", "on")
    return not (environ.get("SYSTEM") == "spaces" or environ.get("SPACE_ID"))


# ---------------------------------------------------------------------------------------------
# Input. Every handler checks the type of every input it takes: an API call can send any JSON
# value for any of them, and Gradio lets some through as they came (a list where one dropdown
# choice belongs passes its check of the choices).
def _kind(value):
    return {list: "a list", dict: "a JSON object", str: "text", bool: "true/false",
            type(None): "nothing"}.get(type(value), f"a {type(value).__name__}")


def as_int(value, name):
    if value is None or (isinstance(value, float) and not np.isfinite(value)):
        raise gr.Error(f"{name} is empty: enter a whole number.")
    if isinstance(value, float) and value != int(value):
        raise gr.Error(f"{name} must be a whole number (got {value}).")
    if not isinstance(value, (int, float, str, np.integer, np.floating)):
        raise gr.Error(f"{name} must be a whole number (got {_kind(value)}).")
    try:
        return int(value)
    except (TypeError, ValueError):
        raise gr.Error(f"{name} must be a whole number (got {value!r}).") from None


def as_number(value, name):
    """A finite number (a slider's value)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise gr.Error(f"{name} must be a number (got {_kind(value)}).")
    if not np.isfinite(value):
        raise gr.Error(f"{name} must be a finite number (got {value}).")
    return float(value)


def as_choice(value, name, options):
    """One of ``options`` (a dropdown's or radio's value)."""
    options = list(options)
    if not isinstance(value, str) or value not in options:
        got = repr(value) if isinstance(value, str) else _kind(value)
        raise gr.Error(f"{name} must be one of {', '.join(map(str, options))} (got {got}).")
    return value


def as_choices(value, name, options):
    """A list of some of ``options`` (a checkbox group's value)."""
    options = list(options)
    if not isinstance(value, list) or not all(isinstance(v, str) and v in options
                                              for v in value):
        raise gr.Error(f"{name} must be a list of some of {', '.join(options)} (got "
                       f"{value!r:.80}).")
    return value


def as_flag(value, name):
    """A checkbox's value: true or false."""
    if not isinstance(value, bool):
        raise gr.Error(f"{name} must be true or false (got {_kind(value)}).")
    return value


def prompt_ids(prompt, model=None):
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


def layer_of(trace, layer):
    layer = as_int(layer, "layer")
    if not 0 <= layer < trace.n_layers:
        raise gr.Error(f"Layer {layer} does not exist: this model has layers 0 to "
                       f"{trace.n_layers - 1}.")
    return layer


def check_trace_size(cfg, n_tokens):
    """Refuse, before running it, a trace too large for memory."""
    need = trace_peak_bytes(cfg, n_tokens)
    allowed = CACHE.budget_bytes * TRACE_MEMORY_SHARE
    if need > allowed:
        raise gr.Error(f"Tracing {n_tokens:,} tokens needs about {need / 1024 ** 2:,.0f} MB (the "
                       f"attention weights grow with the square of the length: {cfg.n_heads} "
                       f"heads × {n_tokens:,}²), but one trace may use {allowed / 1024 ** 2:,.0f} "
                       f"MB of memory. Use a prompt of at most "
                       f"{longest_trace(cfg, allowed):,} tokens.")


# ---------------------------------------------------------------------------------------------
# Layer pickers: three tabs choose a layer of the session's model.
def layer_slider(label, elem_id=None):
    return gr.Slider(0, DEFAULT_CONFIG.n_layers - 1, value=0, step=1, label=label,
                     elem_id=elem_id)


def layer_picker_update(cfg):
    """A layer slider that follows a built model. A Gradio slider needs minimum < maximum: a
    one-block model gets a fixed 0..1 slider (layer 1 is then refused with a message naming
    the layers that exist)."""
    return gr.update(maximum=max(cfg.n_layers - 1, 1), value=0, interactive=cfg.n_layers > 1)
