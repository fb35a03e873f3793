"""The session's traces and generations from the server's shared results (``shared.RESULTS``):
the same model (its cache key) and the same request give the same result, so it is computed
once for every session, and the page says when a result came from the shared cache."""
from __future__ import annotations

import time
from dataclasses import replace

from ..book.errors import Message
from ..book.generate import generate_steps
from ..probes import intervened_steps, intervening, trace
from ..probes.head_scores import head_scores, model_induction_scores
from ..runtime.results import SharedSteps
from ..runtime.sizes import deep_nbytes
from . import prefs
from .shared import RESULTS

FROM_SHARED_CACHE = Message("results.shared", "from the shared cache (computed once for every "
                                              "session that asks)")
STEP_BYTES = 4096     # a kept step: its token, bars and texts (plain Python objects)


def shared_trace(key, model, ids, **options):
    """``trace(model, ids, **options)``, shared: a result from the cache carries the note
    FROM_SHARED_CACHE and, as its time, the time it took to get it."""
    started = time.perf_counter()
    request = ("trace", key, tuple(ids), _hashable(options))
    result, shared = RESULTS.get(request, lambda: run(key, model, trace, list(ids), **options),
                                 lambda tr: deep_nbytes((request, tr)))
    if not shared:
        return result
    return replace(result, seconds=time.perf_counter() - started,
                   notes=[*result.notes, FROM_SHARED_CACHE])


def shared_head_scores(key, model, traced):
    """``head_scores`` of ``traced`` (the model's trace), shared: the induction scores once per
    model (its key: the test prompt is the same for every session), the others once per
    model and prompt."""
    def kept(request, compute):
        return RESULTS.get(request, compute, lambda result: deep_nbytes((request, result)))[0]
    induction = kept(("induction", key), lambda: run(key, model, model_induction_scores))
    return kept(("head_scores", key, tuple(traced.token_ids)),
                lambda: run(key, model, head_scores, traced, induction))


def run(key, model, fn, *args, **kwargs):
    """``fn(model, *args, **kwargs)`` with the key's interventions acting (model B = A with
    an intervention: A's model, run so)."""
    with intervening(model, key.interventions):
        return fn(model, *args, **kwargs)


def _hashable(options: dict) -> tuple:
    return tuple(sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in options.items()))


def _steps_bytes(model, ids, max_new):
    """What a shared generation may hold: its steps, and a KV cache until its last step."""
    cfg = model.cfg
    length = min(len(ids) + max_new, cfg.context_length)
    itemsize = model.tok_emb.weight.element_size()
    return max_new * STEP_BYTES + 2 * cfg.n_layers * length * cfg.emb_dim * itemsize


def generation_steps(key, model, ids, max_new, **options):
    """``generate_steps(model, ids, max_new, **options)`` for a stream, and whether its steps
    come from the shared cache: greedy and seeded sampling are exact functions of their
    arguments, so every session asking for the same one replays the same steps, decoded once.
    The arguments are checked here, before the first step, as ``generate_steps`` checks them.
    """
    # checked here; nothing decoded yet
    steps = intervened_steps(model, key.interventions,
                             generate_steps(model, ids, max_new, **options))
    # the fast step and summary compute the same numbers: not part of what is asked
    request = ("generate", key, tuple(ids), max_new,
               _hashable({k: v for k, v in options.items() if k not in ("step", "summarize")}))
    shared, cached = RESULTS.get(request, lambda: SharedSteps(steps,
                                                              _steps_bytes(model, ids, max_new)),
                                 lambda s: s.nbytes)
    return shared.replay(), cached


def shared_views(view: str, session, choices: tuple, draw):
    """The figures ``draw()`` makes of the session's traces (a dict of outputs), drawn once for
    every session that shows the same: the same models, prompt and choices, in the same
    language and mode. The traces are a pure function of the first two, so the figures are
    too. (Drawing a figure costs more than taking a trace from the cache.)"""
    return shared_figures(("views", view, session.keys, tuple(session.traces[0].token_ids),
                           choices), draw)


def shared_figures(request: tuple, draw):
    """``draw()``'s figures (a dict of outputs) for ``request``, a hashable description of all
    they show, drawn once for every session in this language and mode."""
    key = (*request, prefs.current())
    return RESULTS.get(key, draw, lambda views: deep_nbytes((key, views)))[0]
