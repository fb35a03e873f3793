"""What every tab needs: the app's limits, the shared model cache, the error wrapper of every
handler, and the helpers that read a session's state and the user's input."""
from __future__ import annotations

import functools
import inspect
import logging
import os

import gradio as gr
import numpy as np

from ..book.config import PRESETS, count_parameters
from ..book.errors import ExplorerError
from ..book.tokenizer import get_tokenizer
from ..probes import longest_trace, trace_peak_bytes
from ..runtime import heap
from ..runtime.cache import ModelCache
from . import guard, i18n, prefs
from .i18n import label, t

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
# Errors: an ExplorerError from the core is a message for the student; anything else is our
# bug (a ValueError is still shown as a message, for now: see ``friendly``).
# Every handler also takes the page's view settings (language, lecture mode) as its last two
# inputs: ``friendly`` puts them in place for the call (``prefs.using``).
PREF_PARAMETERS = [inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=None)
                   for name in ("lang", "lecture")]


def _raised_by_the_app(exc: BaseException) -> bool:
    """Whether ``exc`` was raised by the app's own code (its innermost frame is in
    ``explorer.app``)."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return tb is not None and tb.tb_frame.f_globals.get("__name__", "").startswith(__package__)


def friendly(fn):
    """Every handler's wrapper.

    - Its last two inputs are the page's ``lang`` and ``lecture`` (``prefs``): the wrapper's
      signature (what Gradio and its API see) is ``fn``'s with those two appended, and ``fn``
      runs with them in place. A call without them (one handler calling another, a test) keeps
      the settings of the moment.
    - ``ValueError`` messages are shown in the page (gr.Error) in the page's language (an
      ``ExplorerError``'s message by its id), never a traceback; when the handler is done, the
      memory its temporaries took goes back to the system (``heap.trim``), so that the app's
      resident memory stays near what it holds.
    - The server log: an expected refusal (gr.Error, ExplorerError, the app's own ValueError,
      out of memory) is one line; an unexpected error is its traceback, once (Gradio is told
      not to print it again), and so is a ValueError from anywhere else (a bug, though shown
      as a message for now)."""
    signature = inspect.signature(fn)
    positional = [p for p in signature.parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]

    def split(args, kwargs):
        """(fn's own arguments, the prefs of this call)."""
        kwargs = dict(kwargs)
        given = [kwargs.pop("lang", None), kwargs.pop("lecture", None)]
        if len(args) > len(positional):
            given = list(args[len(positional):]) + [None, None]
            args = args[:len(positional)]
        lang, lecture = given[:2]
        if lang is None and lecture is None:
            return args, kwargs, prefs.current()
        now = prefs.current()
        return args, kwargs, prefs.parse(now.lang if lang is None else lang,
                                         now.lecture if lecture is None else lecture)

    def translate(exc):
        # An expected refusal (bad input, too big): the message for the page and one log
        # line, not Gradio's printed traceback.
        if isinstance(exc, gr.Error):
            exc.print_exception = False
            exc.message = i18n.translate(exc.message)
            # (a reason kept from the page, such as why a server path was refused, is logged)
            detail = getattr(exc, "log_detail", None)
            log.info("%s refused: %s%s", fn.__name__, exc.message,
                     f" ({detail})" if detail else "")
            return exc
        if isinstance(exc, ValueError):
            # The core's refusals are ExplorerErrors; the app's own checks still raise plain
            # ValueErrors. Any other ValueError (from the core, torch, numpy ...) is a bug
            # shown as a message for now: its traceback goes to the log.
            if isinstance(exc, ExplorerError) or _raised_by_the_app(exc):
                log.info("%s refused: %s", fn.__name__, exc)
            else:
                log.error("%s: a ValueError that is not an ExplorerError (a bug?)", fn.__name__,
                          exc_info=exc)
            return gr.Error(i18n.translate(i18n.message_of(exc)), print_exception=False)
        if isinstance(exc, MemoryError) or type(exc).__name__ == "OutOfMemoryError":
            log.warning("%s: out of memory", fn.__name__)
            return gr.Error(t("Out of memory: choose a smaller model or a shorter prompt."),
                            print_exception=False)
        log.exception("unexpected error in %s", fn.__name__)
        return gr.Error(t("Something went wrong ({kind}); the model and your session are "
                          "unchanged. Details are in the server log.",
                          kind=type(exc).__name__), print_exception=False)

    def settings_of(args, kwargs):
        try:
            return split(args, kwargs)
        except ValueError as exc:   # lang or lecture malformed: said in English
            raise translate(exc) from None

    if inspect.isgeneratorfunction(fn):
        @functools.wraps(fn)
        def gen_wrapper(*args, **kwargs):
            args, kwargs, settings = settings_of(args, kwargs)
            # Gradio runs each step of a generator in a copy of its own context: the settings
            # are put in place again for every step.
            steps = fn(*args, **kwargs)   # a generator: nothing runs yet
            try:
                yield from prefs.each_step_using(settings, steps)
            except Exception as exc:  # noqa: BLE001 - translated for the user
                with prefs.using(settings):
                    raise translate(exc) from None
            finally:
                steps.close()   # stopped by the page (Stop, a closed tab): end the work now
                heap.trim()
        wrapper = gen_wrapper
    else:
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            args, kwargs, settings = settings_of(args, kwargs)
            with prefs.using(settings):
                try:
                    return fn(*args, **kwargs)
                except Exception as exc:  # noqa: BLE001 - translated for the user
                    raise translate(exc) from None
                finally:
                    heap.trim()
    wrapper.__signature__ = signature.replace(
        parameters=[*signature.parameters.values(), *PREF_PARAMETERS])
    return wrapper


# ---------------------------------------------------------------------------------------------
# Session state: the key of the session's model (the model itself lives in CACHE), the last
# trace (so that switching layers or heads needs no new forward pass) and the generation.
def model_of(state):
    if not state or "key" not in state:
        raise gr.Error(t("No model yet: build one in the Build tab first."))
    model, _ = CACHE.get(state["key"])
    return model


def has_trace(state):
    return bool(state) and state.get("trace") is not None


def trace_of(state):
    if not state or state.get("trace") is None:
        raise gr.Error(t("Trace a prompt first (Inside the forward pass → Trace)."))
    return state["trace"]


def caption(source) -> str:
    """Where a model's weights come from, for the page ("random, seed 123", "pretrained GPT-2
    small (OpenAI)"...), in the page's language."""
    return i18n.translate(source.caption)


def weights_note(key) -> str:
    """Which weights the session's model has, for every tab's note."""
    return t("Weights: **{weights}** ({layers} layers, {heads} heads, emb_dim {emb_dim})",
             weights=caption(key.source), layers=key.config.n_layers,
             heads=key.config.n_heads, emb_dim=key.config.emb_dim)


def session_weights_note(state) -> str:
    """``weights_note`` of the session's model (A) and, when one is pinned, of that one (B)."""
    note = weights_note(state["key"])
    pinned = state.get("pinned_key")
    if pinned is None:
        return note
    return t("**A** — {a} · **B (pinned)** — {b}", a=note, b=weights_note(pinned))


NO_MODEL_NOTE = "Weights: none yet — build or load a model in tab 1."
NO_MODEL_STATUS = "No model yet — build one below."


def status_line(state) -> str:
    """The line under the title: the session's model, from the facts its build (or "Use this
    model") kept in the state, so that it can be said again in the other language; and the
    model pinned beside it, if any."""
    line = _model_status(state)
    pinned = (state or {}).get("pinned_key")
    if pinned is None or "key" not in state:
        return line
    info = state.get("pinned_status") or {}
    what = info.get("variant") if info.get("kind") == "trained" else info.get("what", "")
    what = what if what in PRESETS else t(what)
    return line + t(" Compared with **B (pinned)**: {what}, {n:,} parameters, weights: "
                    "**{weights}**.", what=what, n=count_parameters(pinned.config).total,
                    weights=caption(pinned.source))


def _model_status(state) -> str:
    info = (state or {}).get("status")
    if not state or "key" not in state or not info:
        return t(NO_MODEL_STATUS)
    key = state["key"]
    n = count_parameters(key.config).total
    if info["kind"] == "trained":
        return t("**Model ready** — {variant}, **{weights}**, {n:,} parameters, on **{device}** "
                 "({dtype}).", variant=t(info["variant"]), weights=i18n.translate(info["source"]),
                 n=n, device=key.device, dtype=key.dtype)
    what = info["what"] if info["what"] in PRESETS else t(info["what"])
    how = {"cache": t("from the shared cache in {ms:.0f} ms", ms=info["seconds"] * 1000),
           "built": t("built in {s:.2f} s", s=info["seconds"]),
           "loaded": t("loaded in {s:.2f} s", s=info["seconds"])}[info["how"]]
    return (t("**Model ready** — {what}, {n:,} parameters, on **{device}** ({dtype}), "
              "weights: **{weights}**, {how}.", what=what, n=n, device=key.device,
              dtype=key.dtype, weights=caption(key.source), how=how)
            + "".join(t(" Note: assumed {what}.", what=i18n.translate(a)) for a in info["notes"]))

# Loading a checkpoint by its path on the server: only where the server listens on the loopback
# alone (its visitors are on this machine), unless the operator says otherwise. Reachable from
# outside (--host 0.0.0.0, the Docker image, --share, a Space), a path would let any visitor
# probe the server's files.
SERVER_PATHS_ENV = "GPT_EXPLORER_SERVER_PATHS"
MAX_PATH_CHARS = 1024
SERVER_PATH_REFUSED = ("No checkpoint could be loaded from that path on the server: there is "
                       "no file there that the explorer can read as a model.safetensors or "
                       "the book's model.pth. Check the path, or upload the file (an upload "
                       "says what is wrong with it).")


def server_paths_allowed(environ=os.environ) -> bool:
    value = environ.get(SERVER_PATHS_ENV, "").strip().lower()
    if value:
        return value in ("1", "true", "yes", "on")
    on_a_space = environ.get("SYSTEM") == "spaces" or bool(environ.get("SPACE_ID"))
    return not on_a_space and not guard.reachable_from_outside()


# ---------------------------------------------------------------------------------------------
# Input. Every handler checks the type of every input it takes: an API call can send any JSON
# value for any of them, and Gradio lets some through as they came (a list where one dropdown
# choice belongs passes its check of the choices).
def _kind(value):
    kind = {list: "a list", dict: "a JSON object", str: "text", bool: "true/false",
            type(None): "nothing"}.get(type(value))
    return t(kind) if kind else t("a {type}", type=type(value).__name__)


def as_int(value, name):
    if value is None or (isinstance(value, float) and not np.isfinite(value)):
        raise gr.Error(t("{name} is empty: enter a whole number.", name=t(name)))
    if isinstance(value, float) and value != int(value):
        raise gr.Error(t("{name} must be a whole number (got {value}).", name=t(name),
                         value=value))
    if not isinstance(value, (int, float, str, np.integer, np.floating)):
        raise gr.Error(t("{name} must be a whole number (got {value}).", name=t(name),
                         value=_kind(value)))
    try:
        return int(value)
    except (TypeError, ValueError):
        raise gr.Error(t("{name} must be a whole number (got {value}).", name=t(name),
                         value=repr(value))) from None


def as_number(value, name):
    """A finite number (a slider's value)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise gr.Error(t("{name} must be a number (got {value}).", name=t(name),
                         value=_kind(value)))
    if not np.isfinite(value):
        raise gr.Error(t("{name} must be a finite number (got {value}).", name=t(name),
                         value=value))
    return float(value)


def as_choice(value, name, options):
    """One of ``options`` (a dropdown's or radio's value)."""
    options = list(options)
    if not isinstance(value, str) or value not in options:
        got = repr(value) if isinstance(value, str) else _kind(value)
        raise gr.Error(t("{name} must be one of {options} (got {value}).", name=t(name),
                         options=", ".join(map(str, options)), value=got))
    return value


def as_choices(value, name, options):
    """A list of some of ``options`` (a checkbox group's value)."""
    options = list(options)
    if not isinstance(value, list) or not all(isinstance(v, str) and v in options
                                              for v in value):
        raise gr.Error(t("{name} must be a list of some of {options} (got {value}).",
                         name=t(name), options=", ".join(options), value=f"{value!r:.80}"))
    return value


def as_flag(value, name):
    """A checkbox's value: true or false."""
    if not isinstance(value, bool):
        raise gr.Error(t("{name} must be true or false (got {value}).", name=t(name),
                         value=_kind(value)))
    return value


def prompt_ids(prompt, model=None, name=None):
    """The prompt's token ids, within ``model``'s vocabulary (``name``: which model of a
    comparison, "A" or "B", for the message)."""
    if not isinstance(prompt, str):
        raise gr.Error(t("The prompt must be text."))
    if len(prompt) > MAX_PROMPT_CHARS:
        raise gr.Error(t("The prompt has {n:,} characters; the explorer takes at most {most:,}. "
                         "Shorten it.", n=len(prompt), most=MAX_PROMPT_CHARS))
    if not prompt.strip():
        raise gr.Error(t("The prompt is empty: type some text first."))
    ids = get_tokenizer().encode(prompt)
    if model is not None and max(ids) >= model.cfg.vocab_size:
        vocab = model.cfg.vocab_size
        if name is not None:
            raise gr.Error(t("The GPT-2 tokenizer gives this prompt token ids up to {top:,}, "
                             "but model {name}'s vocab_size is {vocab:,} (ids 0 to {last:,}). "
                             "Rebuild it with vocab_size {n_vocab:,}, the tokenizer's.",
                             top=max(ids), name=name, vocab=vocab, last=vocab - 1,
                             n_vocab=get_tokenizer().n_vocab))
        raise gr.Error(t("The GPT-2 tokenizer gives this prompt token ids up to {top:,}, but "
                         "this model's vocab_size is {vocab:,} (ids 0 to {last:,}). Rebuild "
                         "with vocab_size {n_vocab:,}, the tokenizer's.", top=max(ids),
                         vocab=vocab, last=vocab - 1, n_vocab=get_tokenizer().n_vocab))
    return ids


def layer_of(trace, layer):
    layer = as_int(layer, "layer")
    if not 0 <= layer < trace.n_layers:
        raise gr.Error(t("Layer {layer} does not exist: this model has layers 0 to {last}.",
                         layer=layer, last=trace.n_layers - 1))
    return layer


def check_trace_size(cfg, n_tokens):
    """Refuse, before running it, a trace too large for memory."""
    need = trace_peak_bytes(cfg, n_tokens)
    allowed = CACHE.budget_bytes * TRACE_MEMORY_SHARE
    if need > allowed:
        raise gr.Error(t("Tracing {n:,} tokens needs about {need:,.0f} MB (the attention weights "
                         "grow with the square of the length: {heads} heads × {n:,}²), but one "
                         "trace may use {allowed:,.0f} MB of memory. Use a prompt of at most "
                         "{most:,} tokens.", n=n_tokens, need=need / 1024 ** 2,
                         heads=cfg.n_heads, allowed=allowed / 1024 ** 2,
                         most=longest_trace(cfg, allowed)))


# ---------------------------------------------------------------------------------------------
# Layer pickers: three tabs choose a layer of the session's model.
def layer_slider(text, elem_id=None):
    return gr.Slider(0, DEFAULT_CONFIG.n_layers - 1, value=0, step=1, label=label(text),
                     elem_id=elem_id)


def layer_picker_update(cfg):
    """A layer slider that follows a built model. A Gradio slider needs minimum < maximum: a
    one-block model gets a fixed 0..1 slider (layer 1 is then refused with a message naming
    the layers that exist)."""
    return gr.update(maximum=max(cfg.n_layers - 1, 1), value=0, interactive=cfg.n_layers > 1)
