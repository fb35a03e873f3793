"""The session's traces and generations from the server's shared results (``shared.RESULTS``):
the same model (its cache key) and the same request give the same result, so it is computed
once for every session, and the page says when a result came from the shared cache."""
from __future__ import annotations

import time
from dataclasses import replace

from ..book.errors import Message, Text
from ..book.generate import generate_steps
from ..probes import intervened_steps, intervening, trace
from ..probes.head_scores import head_scores, model_induction_scores
from ..runtime import offload
from ..runtime.placement import Work, gpu_kind
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

    def compute():
        traced, ran = run_placed(key, model, Work.forward(key.config, len(ids)), trace,
                                 list(ids), **options)
        return replace(traced, notes=[*traced.notes, *where_noted(ran)])
    result, shared = RESULTS.get(request, compute, lambda tr: deep_nbytes((request, tr)))
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
    an intervention: A's model, run so), here."""
    return with_interventions(model, key.interventions, fn, *args, **kwargs)


def run_placed(key, model, work: Work, fn, *args, **kwargs):
    """``(run(key, model, fn, *args, **kwargs), Ran)``, run where the policy places ``work``
    (a GPU call for long work where there is a GPU to call: ``fn`` then returns plain data)."""
    return offload.compute(key, model, with_interventions, (key.interventions, fn, *args),
                           kwargs, work)


def with_interventions(model, interventions, fn, *args, **kwargs):
    with intervening(model, interventions):
        return fn(model, *args, **kwargs)


def where_noted(ran) -> list:
    """The note that says where a result ran: where a GPU could have run it (or was asked
    and could not), else none (every result runs on the CPU)."""
    return [Text.of(ran.note())] if gpu_kind() is not None or ran.failure else []


def _generation(model, interventions, ids, max_new, **options):
    return intervened_steps(model, interventions, generate_steps(model, ids, max_new, **options))


def _hashable(options: dict) -> tuple:
    return tuple(sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in options.items()))


def _steps_bytes(model, ids, max_new):
    """What a shared generation may hold: its steps, and a KV cache until its last step."""
    cfg = model.cfg
    length = min(len(ids) + max_new, cfg.context_length)
    itemsize = model.tok_emb.weight.element_size()
    return max_new * STEP_BYTES + 2 * cfg.n_layers * length * cfg.emb_dim * itemsize


def generation_steps(key, model, ids, max_new, **options):
    """``generate_steps(model, ids, max_new, **options)`` for a stream, whether its steps
    come from the shared cache, and a function that says where they are decoded (a note, or
    none): greedy and seeded sampling are exact functions of their
    arguments, so every session asking for the same one replays the same steps, decoded once.
    The arguments are checked here, before the first step, as ``generate_steps`` checks them.
    """
    # checked here; nothing decoded yet (a GPU call decodes its own)
    _generation(model, key.interventions, ids, max_new, **options)
    steps = offload.Stream(key, model, _generation, (key.interventions, list(ids), max_new),
                           options, Work.decoding(key.config, len(ids), max_new))
    # the fast step and summary compute the same numbers: not part of what is asked
    request = ("generate", key, tuple(ids), max_new,
               _hashable({k: v for k, v in options.items() if k not in ("step", "summarize")}))
    def decoded_once():
        shared = SharedSteps(iter(steps), _steps_bytes(model, ids, max_new))
        shared.stream = steps            # where it is decoded, for every session's page
        return shared
    shared, cached = RESULTS.get(request, decoded_once, lambda s: s.nbytes)
    return shared.replay(), cached, lambda: where_noted(shared.stream.ran)


def next_step(key, model, ids, **options):
    """The one next step of ``generate_steps(model, ids, 1, **options)`` (Next token), and
    where it ran (a note, or none)."""
    step, ran = offload.compute(key, model, _first_step, (key.interventions, list(ids)), options,
                                Work.forward(key.config, len(ids)))   # no cache: the prompt
    return step, where_noted(ran)


def _first_step(model, interventions, ids, **options):
    return next(iter(_generation(model, interventions, ids, 1, **options)))


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
