"""Hugging Face ZeroGPU, decided in one place.

``@gpu_work(duration=...)`` marks a handler that does GPU work (building a model, a forward pass,
decoding, training). On a ZeroGPU Space (``SPACES_ZERO_GPU=true`` and the ``spaces`` package, which
the Space's runtime provides) it is ``spaces.GPU(handler, duration=...)``: ZeroGPU attaches a GPU
for the call and runs it in a worker process, every ``yield`` of a generator included. Everywhere
else the handler is returned unchanged: ``spaces`` is not imported and a call costs nothing.

Put it under ``@handler``, so that the user sees ZeroGPU's messages (quota, queue) as any other::

    @handler(outputs=...)
    @gpu_work(duration=gpu.forward_seconds)
    def run_trace(prompt, session, ...):

A ZeroGPU worker is a fork of the server: the models it builds stay in its own ``CACHE``, and a
new worker rebuilds a session's model from the keys in the session (config and seed give
the same weights). The durations below therefore count a build as well as the work.

``duration`` is a function of the handler's arguments, by name (a dict), that returns seconds; it
is called before each call, and its answer is held within ``MIN_SECONDS`` .. ``MAX_SECONDS``.
"""
from __future__ import annotations

import functools
import inspect
import logging
import math
import os

from ..book.config import PRESETS, GPTConfig, count_parameters
from . import prefs

log = logging.getLogger("gpt_explorer")

ZERO_GPU_ENV = "SPACES_ZERO_GPU"
# A new worker forks, starts CUDA and takes its weights over before any work: some seconds.
STARTUP_SECONDS = 10
MIN_SECONDS = 15
# ZeroGPU refuses a request above its maximum ("illegal duration"), and an anonymous visitor's
# whole daily quota is 2 minutes: no estimate asks for more.
MAX_SECONDS = 120
DEFAULT_SECONDS = 60   # ZeroGPU's own default, when the arguments give no estimate
# Deliberately low rates (an estimate too short gets the call aborted; too long only queues it
# behind shorter ones): weights initialised on the CPU, as the book does; fp32 matmuls plus the
# probes' statistics; Python's share of one decoding step (sampling, top-10 bars, the stream).
BUILD_PARAMETERS_PER_SECOND = 50e6
FLOPS_PER_SECOND = 2e11
SECONDS_PER_DECODING_STEP = 0.05


def on_zero_gpu(environ=os.environ) -> bool:
    """ZeroGPU's own test (``spaces.config``): ``SPACES_ZERO_GPU`` is 1, t or true, any case."""
    value = environ.get(ZERO_GPU_ENV)
    return value is not None and value.lower() in ("1", "t", "true")


def gpu_work(duration, signature: inspect.Signature | None = None):
    """A decorator: ``spaces.GPU(fn, duration=...)`` on ZeroGPU, else ``fn`` itself.
    ``signature`` names the arguments of a handler that takes ``*args, **kwargs``."""
    def decorate(fn):
        named = signature or inspect.signature(fn)
        if any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in named.parameters.values()):
            raise TypeError(f"gpu_work: {fn.__name__} takes *args or **kwargs, so its duration "
                            f"cannot find its arguments by name; pass signature=.")
        if not on_zero_gpu():
            return fn
        try:
            import spaces
        except ImportError:
            log.warning("%s is set but the `spaces` package is not installed: %s runs without "
                        "ZeroGPU (pip install spaces).", ZERO_GPU_ENV, fn.__name__)
            return fn

        def seconds(settings, *args, **kwargs):
            try:
                estimate = duration(named.bind(*args, **kwargs).arguments)
            except Exception:  # noqa: BLE001 - a bad request: the handler itself will say why
                estimate = DEFAULT_SECONDS
            return clamp_seconds(estimate)

        # The worker process has none of this process's context: the page's view settings
        # (language, lecture mode) travel with the call's arguments.
        if inspect.isgeneratorfunction(fn):
            @functools.wraps(fn)
            def task(settings, *args, **kwargs):
                yield from prefs.each_step_using(settings, fn(*args, **kwargs))

            on_gpu = spaces.GPU(task, duration=seconds)

            @functools.wraps(fn)
            def call(*args, **kwargs):
                yield from on_gpu(prefs.current(), *args, **kwargs)
            return call

        @functools.wraps(fn)
        def task(settings, *args, **kwargs):
            with prefs.using(settings):
                return fn(*args, **kwargs)

        on_gpu = spaces.GPU(task, duration=seconds)

        @functools.wraps(fn)
        def call(*args, **kwargs):
            return on_gpu(prefs.current(), *args, **kwargs)
        return call
    return decorate


def clamp_seconds(estimate) -> int:
    if not isinstance(estimate, (int, float)) or not math.isfinite(estimate):
        return DEFAULT_SECONDS
    return int(min(MAX_SECONDS, max(MIN_SECONDS, math.ceil(estimate))))


# ---------------------------------------------------------------------------------------------
# Estimates, from a handler's arguments by name. A session's model is known by ``session.keys``.
def _parameters(cfg) -> int:
    return count_parameters(GPTConfig.from_dict(cfg)).total


def _session_parameters(arguments) -> tuple[int, GPTConfig]:
    """The parameters the call works with (every model of the session: a comparison does the
    work twice) and model A's config."""
    keys = arguments["session"].keys
    return sum(_parameters(k.config) for k in keys), keys[0].config


def _build(parameters: int) -> float:
    return STARTUP_SECONDS + parameters / BUILD_PARAMETERS_PER_SECOND


def _forward(parameters: int, tokens: int) -> float:
    return 2 * parameters * tokens / FLOPS_PER_SECOND


def _prompt_tokens(arguments, cfg) -> int:
    # Byte-level BPE: a text has at most one token per UTF-8 byte; a forward pass sees at most
    # context_length of them. Next token continues the text shown (``output``) if it is longer.
    texts = [arguments.get(name) for name in ("prompt", "output")]
    texts = [t for t in texts if isinstance(t, str)]
    n = max(len(t.encode("utf-8")) for t in texts) if texts else cfg.context_length
    return max(1, min(n, cfg.context_length))


def build_seconds(arguments) -> float:
    """Building the model that the Build tab's knobs describe, or loading OpenAI's GPT-2 of the
    size asked for (a checkpoint file's size is unknown here: ZeroGPU's default)."""
    weights = arguments.get("weights") or "random"
    if weights == "pretrained":
        return _build(_parameters(PRESETS[f"gpt2-{arguments['size']}"]))
    if weights != "random":
        return DEFAULT_SECONDS
    knobs = {f: arguments[f] for f in GPTConfig.__dataclass_fields__ if f in arguments}
    return _build(_parameters(knobs))


def export_seconds(arguments) -> float:
    """Writing the session's model to a file (its rebuild, if evicted, counts too)."""
    parameters, _ = _session_parameters(arguments)
    return 2 * _build(parameters)


def forward_seconds(arguments) -> float:
    """One forward pass over the prompt (trace, logit lens, next token), or over the whole
    context when the handler has no prompt (attention of a traced layer)."""
    parameters, cfg = _session_parameters(arguments)
    return _build(parameters) + _forward(parameters, _prompt_tokens(arguments, cfg))


def generate_seconds(arguments) -> float:
    """The prompt, then ``max_new_tokens`` decoding steps: one new token each while the window
    has room, the whole window again for each step after it is full."""
    parameters, cfg = _session_parameters(arguments)
    steps = float(arguments["max_new_tokens"])
    prompt = _prompt_tokens(arguments, cfg)
    full_window = max(0.0, prompt + steps - cfg.context_length)
    return (_build(parameters) + _forward(parameters, prompt)
            + steps * (SECONDS_PER_DECODING_STEP + _forward(parameters, 1))
            + full_window * _forward(parameters, cfg.context_length))
