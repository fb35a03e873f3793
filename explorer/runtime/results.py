"""Results shared by every session: a trace, a logit lens or a generation is a pure function of
its model's key and the request (the prompt's ids, the options), so the server computes each
once for everyone who asks for it (a class on one Space all trace the same prompt).

``SharedResults.get`` returns a result and whether it came from the cache. Two sessions asking
for the same new result at once compute it once: the second waits for the first. Results are
kept least recently used first out, within a byte limit that sits inside the memory budget:
they never take room that the models need (``ModelCache`` asks them to shrink first).

A generation is shared as a ``SharedSteps``: a sequence of steps that is decoded on demand by
whichever session needs the next step first, and replayed to the others, step by step, as
their streams reach it. One session stopping its stream stops nothing for the others.
"""
from __future__ import annotations

import threading
import time
from collections import OrderedDict
from dataclasses import replace

from ..book.errors import Message, Text
from ..book.generate import generate_steps
from ..probes import intervened_steps, intervening, trace
from ..probes.head_scores import head_scores, model_induction_scores
from . import offload
from .memory import env_megabytes
from .placement import Work, gpu_kind
from .sizes import deep_nbytes

RESULTS_ENV = "GPT_EXPLORER_RESULTS_MB"
RESULTS_SHARE_OF_BUDGET = 0.1     # at most this share of the memory budget, unless set


class SharedResults:
    """Results by key ``(model key, request)``, within ``limit_bytes``; ``room()`` says how
    many bytes the memory budget has free beside the models (None: no such bound)."""

    def __init__(self, limit_bytes: int, room=None):
        self.limit_bytes = limit_bytes
        self._room = room
        self._results: OrderedDict = OrderedDict()     # key -> (result, nbytes)
        self._pending: dict = {}                        # key -> Event, while it is computed
        self._lock = threading.Lock()
        self.hits = self.misses = 0

    def get(self, key, compute, nbytes):
        """``(result, shared)``: the cached result for ``key``, or ``compute()``'s (kept if
        ``nbytes(result)`` fits). An error is not kept: the next request computes again."""
        while True:
            with self._lock:
                if key in self._results:
                    self._results.move_to_end(key)
                    self.hits += 1
                    return self._results[key][0], True
                pending = self._pending.get(key)
                if pending is None:
                    self._pending[key] = threading.Event()
                    self.misses += 1
                    break
            pending.wait()        # another session computes it; then look again
        try:
            result = compute()
            self.put(key, result, nbytes(result))
            return result, False
        finally:
            with self._lock:
                self._pending.pop(key).set()

    def put(self, key, result, size: int) -> bool:
        """Keep ``result`` if it fits (evicting the least recently used); False if it does not
        fit at all (it is then simply not shared)."""
        room = self._room() if self._room is not None else None   # outside our lock
        with self._lock:
            self._results.pop(key, None)
            limit = self.limit_bytes if room is None else min(self.limit_bytes,
                                                              self._used() + room)
            if size > limit:
                return False
            self._free(self._used() + size - limit)
            self._results[key] = (result, size)
            return True

    def free(self, nbytes: int) -> None:
        """Give up at least ``nbytes`` (or everything), least recently used first: a model
        needs the room."""
        with self._lock:
            self._free(nbytes)

    def _free(self, nbytes):
        while nbytes > 0 and self._results:
            _, (_, size) = self._results.popitem(last=False)
            nbytes -= size

    def _used(self) -> int:
        return sum(size for _, size in self._results.values())

    def used_bytes(self) -> int:
        with self._lock:
            return self._used()

    def __contains__(self, key) -> bool:
        return key in self._results

    def __len__(self) -> int:
        return len(self._results)

    def clear(self) -> None:
        with self._lock:
            self._results.clear()


def results_limit_bytes(budget_bytes: int) -> int:
    """``GPT_EXPLORER_RESULTS_MB`` if set, else a tenth of the memory budget."""
    limit = env_megabytes(RESULTS_ENV)
    return limit if limit is not None else int(budget_bytes * RESULTS_SHARE_OF_BUDGET)


class SharedSteps:
    """A generation's steps, decoded once for every session that streams it. ``steps`` is the
    step generator (``generate_steps``); ``replay()`` yields its steps from the first, decoding
    the next one only when no session has yet. The generator's KV cache lives here until the
    last step, then goes."""

    def __init__(self, steps, nbytes: int):
        self._source = steps
        self._steps: list = []
        self._lock = threading.Lock()
        self.nbytes = nbytes          # what it may hold: the steps and, until done, a KV cache
        self.done = False
        self._error = None            # what ended it early, raised to every session that gets there

    def replay(self):
        """Every step, in order: a generator each session may stop at any point."""
        index = 0
        while True:
            if index < len(self._steps):        # appended under the lock, never changed
                yield self._steps[index]
                index += 1
                continue
            with self._lock:
                if index < len(self._steps):
                    continue
                if self.done:
                    if self._error is not None:
                        raise self._error
                    return
                try:
                    self._steps.append(next(self._source))
                except StopIteration:
                    self.done, self._source = True, None     # the KV cache goes with it
                    return
                except Exception as e:
                    self.done, self._source, self._error = True, None, e
                    raise

    @property
    def steps_decoded(self) -> int:
        return len(self._steps)


# ---------------------------------------------------------------------------------------------
# What is shared: traces, head scores and generations, each computed once in ``results`` (the
# server's ``SharedResults``) for every session that asks for the same one.
FROM_SHARED_CACHE = Message("results.shared", "from the shared cache (computed once for every "
                                              "session that asks)")
STEP_BYTES = 4096     # a kept step: its token, bars and texts (plain Python objects)


def shared_trace(results: SharedResults, key, model, ids, **options):
    """``trace(model, ids, **options)``, shared in ``results``: a result from the cache carries
    the note FROM_SHARED_CACHE and, as its time, the time it took to get it."""
    started = time.perf_counter()
    request = ("trace", key, tuple(ids), _hashable(options))

    def compute():
        traced, ran = run_placed(key, model, Work.forward(key.config, len(ids)), trace,
                                 list(ids), **options)
        return replace(traced, notes=[*traced.notes, *where_noted(ran)])
    result, shared = results.get(request, compute, lambda tr: deep_nbytes((request, tr)))
    if not shared:
        return result
    return replace(result, seconds=time.perf_counter() - started,
                   notes=[*result.notes, FROM_SHARED_CACHE])


def shared_head_scores(results: SharedResults, key, model, traced):
    """``head_scores`` of ``traced`` (the model's trace), shared in ``results``: the induction
    scores once per model (its key: the test prompt is the same for every session), the others
    once per model and prompt."""
    def kept(request, compute):
        return results.get(request, compute, lambda result: deep_nbytes((request, result)))[0]
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


def generation_steps(results: SharedResults, key, model, ids, max_new, **options):
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
    shared, cached = results.get(request, decoded_once, lambda s: s.nbytes)
    return shared.replay(), cached, lambda: where_noted(shared.stream.ran)


def next_step(key, model, ids, **options):
    """The one next step of ``generate_steps(model, ids, 1, **options)`` (Next token), and
    where it ran (a note, or none)."""
    step, ran = offload.compute(key, model, _first_step, (key.interventions, list(ids)), options,
                                Work.forward(key.config, len(ids)))   # no cache: the prompt
    return step, where_noted(ran)


def _first_step(model, interventions, ids, **options):
    return next(iter(_generation(model, interventions, ids, 1, **options)))
