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
from collections import OrderedDict

from .memory import env_megabytes

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
