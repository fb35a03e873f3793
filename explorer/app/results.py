"""``runtime.results`` bound to the server's shared results (``shared.RESULTS``), and the figures
drawn of them, shared per language and mode: the same model (its cache key) and the same
request give the same result, computed once for every session."""
from __future__ import annotations

from functools import partial

from ..runtime import results
from ..runtime.sizes import deep_nbytes
from . import prefs
from .shared import RESULTS

shared_trace = partial(results.shared_trace, RESULTS)
shared_head_scores = partial(results.shared_head_scores, RESULTS)
generation_steps = partial(results.generation_steps, RESULTS)
next_step = results.next_step


def shared_views(view: str, session, choices: tuple, draw):
    """``draw()``'s figures of the session's traces (a dict of outputs): a pure function of the
    models, prompt and choices, in one language and mode, so drawn once for every session."""
    return shared_figures(("views", view, session.keys, tuple(session.traces[0].token_ids),
                           choices), draw)


def shared_figures(request: tuple, draw):
    """``draw()``'s figures for ``request``, a hashable description of all they show."""
    key = (*request, prefs.current())
    return RESULTS.get(key, draw, lambda views: deep_nbytes((key, views)))[0]
