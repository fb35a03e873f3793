"""The session's traces and generations from the server's shared results (``shared.RESULTS``,
through ``runtime.results``), and the figures drawn of them, shared per language and mode: the
same model (its cache key) and the same request give the same result, so it is computed once
for every session, and the page says when a result came from the shared cache."""
from __future__ import annotations

from functools import partial

from ..runtime import results
from ..runtime.sizes import deep_nbytes
from ..runtime.results import run_placed, where_noted  # noqa: F401 (the tabs use them)
from . import prefs
from .shared import RESULTS

shared_trace = partial(results.shared_trace, RESULTS)
shared_head_scores = partial(results.shared_head_scores, RESULTS)
generation_steps = partial(results.generation_steps, RESULTS)
next_step = results.next_step


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
