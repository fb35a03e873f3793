"""What every tab needs: the shared model cache and training lab, the page's defaults, the
session's models, and what the page says of them (the status line, the tabs' weights notes)."""
from __future__ import annotations

from dataclasses import dataclass

from ..book.config import PRESETS, count_parameters
from ..book.errors import ExplorerError, Message
from ..runtime import offload
from ..runtime.cache import ModelCache
from ..runtime.results import SharedResults, results_limit_bytes
from ..runtime.training.lab import TrainingLab
from .i18n import say, t
from .session import Changed, Session, View

DEFAULT_PRESET = "teach-small"
DEFAULT_CONFIG = PRESETS[DEFAULT_PRESET]   # what the page shows before the first build

CACHE = ModelCache()      # every session's models (a session keeps their keys)
# Traces, lenses and generations, computed once for every session that asks for the same one
# (GPT_EXPLORER_RESULTS_MB), in the budget's room beside the models.
RESULTS = SharedResults(results_limit_bytes(CACHE.budget_bytes), room=CACHE.room_bytes)
CACHE.results = RESULTS
# A GPU call's worker finds its model here (forked with the cache), or is sent it.
offload.use_models(CACHE.peek)
offload.prepare()      # ZeroGPU's start-up check looks for a spaces.GPU function
LAB = TrainingLab()       # the server's training jobs


def check_model(session: Session) -> None:
    if not session.models:
        raise ExplorerError("session.no_model", "No model yet: build one in the Build tab "
                                                "first.")


def models_of(session: Session) -> list:
    """The session's models, all in memory at once within the budget."""
    check_model(session)
    return CACHE.get_together(session.keys)


def model_a(session: Session):
    return models_of(session)[0]


def no_trace() -> ExplorerError:
    return ExplorerError("session.no_trace", "Trace a prompt first (Inside the forward pass → "
                                             "Trace).")


def traces_of(session: Session) -> tuple:
    if not session.models or len(session.traces) != len(session.models):
        raise no_trace()
    return session.traces


# ---------------------------------------------------------------------------------------------
NO_MODEL_STATUS = Message("status.no_model", "No model yet — build one below.")
NO_MODEL_NOTE = Message("note.no_model", "Weights: none yet — build or load a model in tab 1.")


def weights_note(session: Session) -> str:
    if not session.models:
        return say(NO_MODEL_NOTE)
    notes = [t("note.weights", "Weights: **{weights}** ({layers} layers, {heads} heads, "
                               "emb_dim {emb_dim})", weights=say(m.key.source.caption),
               layers=m.key.config.n_layers, heads=m.key.config.n_heads,
               emb_dim=m.key.config.emb_dim) for m in session.models]
    if len(notes) == 1:
        return notes[0]
    return t("note.weights_pair", "**A** — {a} · **B** — {b}", a=notes[0], b=notes[1])


@dataclass(frozen=True)
class BuildRefused(View):
    """Why the last build was refused: the status line says it until the next model."""

    message: Message | None = None

    KEPT_BY_NEW_MODELS = False


def status_line(session: Session) -> str:
    """The line under the title: the models, what they changed on the page, and why the last
    build was refused."""
    refused = session.view(BuildRefused).message
    refusal = ("\n\n" + t("status.refused", "**Not built:** {message}", message=say(refused))
               if refused is not None else "")
    notes = session.view(Changed).notes
    changed = ("\n\n" + t("status.changed", "**Changed to fit this model:** {changes}.",
                            changes="; ".join(say(n) for n in notes)) if notes else "")
    return _models_line(session) + changed + refusal


def _models_line(session: Session) -> str:
    if not session.models:
        return say(NO_MODEL_STATUS)
    first, *others = session.models
    key, made = first.key, first.made
    n = count_parameters(key.config).total
    if made.how == "trained":
        line = t("status.trained", "**Model ready** — {variant}, **{weights}**, {n:,} "
                                   "parameters, on **{device}** ({dtype}).",
                 variant=say(made.what), weights=say(made.caption), n=n, device=key.device,
                 dtype=key.dtype)
    else:
        how = {"cache": Message("status.from_cache", "from the shared cache in {ms:.0f} ms",
                                ms=made.seconds * 1000),
               "built": Message("status.built", "built in {s:.2f} s", s=made.seconds),
               "loaded": Message("status.loaded", "loaded in {s:.2f} s", s=made.seconds)}
        line = t("status.ready", "**Model ready** — {what}, {n:,} parameters, on **{device}** "
                                 "({dtype}), weights: **{weights}**, {how}.",
                 what=say(made.what), n=n, device=key.device, dtype=key.dtype,
                 weights=say(key.source.caption), how=how[made.how])
        line += "".join(t("status.assumed", " Note: assumed {what}.", what=say(note))
                        for note in made.notes)
    for other in others:
        line += t("status.beside", " Compared with **B**: {what}, {n:,} parameters, weights: "
                                   "**{weights}**.", what=say(other.made.what),
                  n=count_parameters(other.key.config).total,
                  weights=say(other.key.source.caption))
    return line
