"""The session's traces and generations from the server's shared results (``shared.RESULTS``):
the same model (its cache key) and the same request give the same result, so it is computed
once for every session, and the page says when a result came from the shared cache."""
from __future__ import annotations

import time
from dataclasses import replace

from ..book.errors import Message
from ..book.generate import generate_steps
from ..probes import trace
from ..runtime.results import SharedSteps
from .shared import RESULTS

FROM_SHARED_CACHE = Message("results.shared", "from the shared cache (computed once for every "
                                              "session that asks)")
STEP_BYTES = 4096     # a kept step: its token, bars and texts (plain Python objects)


def shared_trace(key, model, ids, **options):
    """``trace(model, ids, **options)``, shared: a result from the cache carries the note
    FROM_SHARED_CACHE and, as its time, the time it took to get it."""
    started = time.perf_counter()
    request = ("trace", key, tuple(ids), _hashable(options))
    result, shared = RESULTS.get(request, lambda: trace(model, list(ids), **options),
                                 lambda tr: tr.nbytes())
    if not shared:
        return result
    return replace(result, seconds=time.perf_counter() - started,
                   notes=[*result.notes, FROM_SHARED_CACHE])


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
    steps = generate_steps(model, ids, max_new, **options)      # checks, decodes nothing yet
    # the fast step and summary compute the same numbers: not part of what is asked
    request = ("generate", key, tuple(ids), max_new,
               _hashable({k: v for k, v in options.items() if k not in ("step", "summarize")}))
    shared, cached = RESULTS.get(request, lambda: SharedSteps(steps,
                                                              _steps_bytes(model, ids, max_new)),
                                 lambda s: s.nbytes)
    return shared.replay(), cached
