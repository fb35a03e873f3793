"""The pickers of a model's layers, heads and probe points, fitted to the session's model A: a
new model keeps each picker's choice where it still exists, and the nearest one where it does
not (layer 9 of GPT-2 small is layer 1 of a two-layer model). What each picker shows is kept in
the session (its view ``Pickers``), so fitting needs nothing from the page."""
from __future__ import annotations

from dataclasses import dataclass

import gradio as gr

from ..book.errors import Message
from ..book.probe_points import POINT_LABELS
from .i18n import english, label, t
from .session import Changed, View
from .shared import DEFAULT_CONFIG


@dataclass(frozen=True)
class Pickers(View):
    """Each picker's choice, by the picker's name (a new model keeps them, fitted)."""

    inside_layer: int = 0
    att_layer: int = 0
    act_layer: int = 0
    knock_layer: int = 0
    walk_block: int = 0
    att_head: str = "mean"
    pair: str | None = None
    heat_point: str | None = None
    heat_stat: str = "std"
    knock_text: str = "the prompt"      # what the knock-out map measures: the prompt or the story


# The tab (id) of each picker, and what it picks, for the status line's note of a choice a new
# model changed.
LAYER, BLOCK = Message("field.layer", "layer"), Message("field.block", "block")
_WHERE = {"inside_layer": ("inside", LAYER), "att_layer": ("attention", LAYER),
          "att_head": ("attention", Message("field.head", "head")),
          "act_layer": ("activations", LAYER), "knock_layer": ("knockout", BLOCK),
          "walk_block": ("build", BLOCK),
          "pair": ("inside", Message("field.pair", "distribution")),
          "heat_point": ("inside", Message("field.heat_point", "heatmap: probe point"))}
MEAN = Message("picker.mean", "mean")


def _fit(session, name: str, was, value, why: Message):
    """Picker ``name`` moved from ``was`` to ``value`` for a new model; where that changed a
    choice made before, the status line says so (a silent move would show another layer than
    the one asked for)."""
    choose(session, **{name: value})
    if was is not None and str(was) != str(value):
        tab_id, what = _WHERE[name]
        tab = Message(f"tab.{tab_id}", english(f"tab.{tab_id}"))   # the tab's title, as labelled
        note = Message("changed.choice", "{tab}: {what} {was} → {now} ({why})", tab=tab,
                       what=what, was=was, now=MEAN if value == "mean" else value, why=why)
        session.views[Changed] = session.view(Changed).said(note)
    return value


def chosen(session, name: str):
    """Picker ``name``'s choice."""
    return getattr(session.view(Pickers), name)


def choose(session, **choices) -> None:
    """The pickers' choices (by name), kept in the session."""
    session.show(Pickers, **choices)


def layer_slider(name: str, text_id: str, text: str, **options):
    return gr.Slider(0, DEFAULT_CONFIG.n_layers - 1, value=0, step=1,
                     label=label(text_id, text), elem_id=name, **options)


def config_of(session):
    return session.models[0].key.config if session.models else DEFAULT_CONFIG


def fitted_layer(session, name: str, **changes):
    """Layer picker ``name`` for the session's model. A Gradio slider needs minimum <
    maximum: a one-block model gets a fixed 0..1 slider (layer 1 is then refused with a
    message naming the layers that exist)."""
    n = config_of(session).n_layers
    was = int(chosen(session, name))
    value = _fit(session, name, was, min(was, n - 1),
                 Message("changed.layers", "this model has layers 0 to {last}", last=n - 1))
    return gr.update(maximum=max(n - 1, 1), value=value, interactive=n > 1, **changes)


def head_choices(n_heads: int):
    """The mean of the layer's heads, or one head. The names are the server's, in the page's
    language (a name Gradio translates would come back as the value)."""
    return [(t(MEAN.id, MEAN.text), "mean")] + [(str(h), str(h)) for h in range(n_heads)]


def fitted_head(session, name: str = "att_head"):
    n = config_of(session).n_heads
    was = value = str(chosen(session, name))
    if value != "mean" and not (value.isdigit() and int(value) < n):
        value = "mean"
    _fit(session, name, was, value, Message("changed.heads", "this model has heads 0 to {last}",
                                       last=n - 1))
    return gr.update(choices=head_choices(n), value=value)


# The distributions the Inside tab compares (text id, name: its English text, probe points),
# and the probe points of its heatmap.
_PAIRS = (("pair.norm1", "norm1: before vs after LayerNorm", ("ln1_in", "ln1_out")),
          ("pair.norm2", "norm2: before vs after LayerNorm", ("ln2_in", "ln2_out")),
          ("pair.final_norm", "final_norm: before vs after", ("final_norm_in", "final_norm_out")),
          ("pair.ff", "feed-forward hidden: before vs after activation", ("ff_pre", "ff_post")),
          ("pair.resid", "residual stream: entering vs leaving the block",
           ("resid_pre", "resid_post")))
HIST_PAIRS = {name: points for _, name, points in _PAIRS}
HEAT_POINTS = tuple(POINT_LABELS)[:11]   # the per-block probe points
NORM_POINTS = ("ln", "final_norm")       # recorded only in a model with LayerNorm


def recorded(cfg, point) -> bool:
    return cfg.norm_placement != "none" or not point.startswith(NORM_POINTS)


DEFAULT_HEAT_POINT = "resid_pre"


def defaults(session) -> Pickers:
    """The pickers as a new page shows them for the session's model A."""
    return Pickers(pair=pair_choices(config_of(session))[0][1], heat_point=DEFAULT_HEAT_POINT)


def pair_choices(cfg):
    return [(t(id, name), name) for id, name, points in _PAIRS
            if all(recorded(cfg, p) for p in points)]


def fitted_probes(session) -> dict:
    """The Inside tab's distribution and heatmap point: what the model records (a model
    without LayerNorm has no norm1, norm2 or final_norm to compare)."""
    cfg = config_of(session)
    pairs = pair_choices(cfg)
    points = [p for p in HEAT_POINTS if recorded(cfg, p)]
    pair, point = chosen(session, "pair"), chosen(session, "heat_point")
    no_norm = Message("changed.no_norm", "this model has no LayerNorm")
    pair = _fit(session, "pair", pair, pair if pair in [v for _, v in pairs] else pairs[0][1],
                no_norm)
    point = _fit(session, "heat_point", point, point if point in points else DEFAULT_HEAT_POINT,
                 no_norm)
    return {"pair": gr.update(choices=pairs, value=pair),
            "heat_point": gr.update(choices=points, value=point)}
