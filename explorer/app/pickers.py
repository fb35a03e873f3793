"""The pickers of a model's layers, heads and probe points, fitted to the session's model A: a
new model keeps each picker's choice where it still exists, and the nearest one where it does
not (layer 9 of GPT-2 small is layer 1 of a two-layer model). What each picker shows is kept in
the session (its view ``Pickers``), so fitting needs nothing from the page."""
from __future__ import annotations

from dataclasses import dataclass

import gradio as gr

from ..book.errors import Message
from ..book.probe_points import POINT_LABELS
from .i18n import label, t
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


# The tab of each picker, and what it picks, for the status line's note of a choice a new
# model changed (the tabs' own titles).
_WHERE = {"inside_layer": (("tab.inside", "2 · Inside the forward pass"), "field.layer", "layer"),
          "att_layer": (("tab.attention", "3 · Attention"), "field.layer", "layer"),
          "att_head": (("tab.attention", "3 · Attention"), "field.head", "head"),
          "act_layer": (("tab.activations", "4 · Activation functions"), "field.layer",
                        "layer"),
          "knock_layer": (("tab.knockout", "7 · Knock out"), "field.block", "block"),
          "walk_block": (("tab.build", "1 · Build"), "field.block", "block"),
          "pair": (("tab.inside", "2 · Inside the forward pass"), "field.pair", "distribution"),
          "heat_point": (("tab.inside", "2 · Inside the forward pass"), "field.heat_point",
                         "heatmap: probe point")}


def _changed(session, name: str, was, now, why: Message) -> None:
    """Say (in the status line) that a new model moved picker ``name`` from ``was`` to
    ``now``: a silent move would show another layer than the one asked for."""
    if str(was) == str(now):
        return
    tab, what_id, what = _WHERE[name]
    note = Message("changed.choice", "{tab}: {what} {was} → {now} ({why})", tab=Message(*tab),
                   what=Message(what_id, what), was=was, now=now, why=why)
    session.views[Changed] = session.view(Changed).said(note)


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
    value = min(was, n - 1)
    choose(session, **{name: value})
    _changed(session, name, was, value, Message("changed.layers", "this model has layers 0 "
                                                                  "to {last}", last=n - 1))
    return gr.update(maximum=max(n - 1, 1), value=value, interactive=n > 1, **changes)


def head_choices(n_heads: int):
    """The mean of the layer's heads, or one head. The names are the server's, in the page's
    language (a name Gradio translates would come back as the value)."""
    return [(t("picker.mean", "mean"), "mean")] + [(str(h), str(h)) for h in range(n_heads)]


def fitted_head(session, name: str = "att_head"):
    n = config_of(session).n_heads
    was = value = str(chosen(session, name))
    if value != "mean" and not (value.isdigit() and int(value) < n):
        value = "mean"
    choose(session, **{name: value})
    mean = Message("picker.mean", "mean")
    _changed(session, name, was, mean if value == "mean" else value,
             Message("changed.heads", "this model has heads 0 to {last}", last=n - 1))
    return gr.update(choices=head_choices(n), value=value)


# The distributions the Inside tab compares, and the probe points of its heatmap.
HIST_PAIRS = {
    "norm1: before vs after LayerNorm": ("ln1_in", "ln1_out"),
    "norm2: before vs after LayerNorm": ("ln2_in", "ln2_out"),
    "final_norm: before vs after": ("final_norm_in", "final_norm_out"),
    "feed-forward hidden: before vs after activation": ("ff_pre", "ff_post"),
    "residual stream: entering vs leaving the block": ("resid_pre", "resid_post"),
}
HIST_NAMES = {"norm1: before vs after LayerNorm":
                  ("pair.norm1", "norm1: before vs after LayerNorm"),
              "norm2: before vs after LayerNorm":
                  ("pair.norm2", "norm2: before vs after LayerNorm"),
              "final_norm: before vs after": ("pair.final_norm", "final_norm: before vs after"),
              "feed-forward hidden: before vs after activation":
                  ("pair.ff", "feed-forward hidden: before vs after activation"),
              "residual stream: entering vs leaving the block":
                  ("pair.resid", "residual stream: entering vs leaving the block")}
HEAT_POINTS = tuple(POINT_LABELS)[:11]   # the per-block probe points
NORM_POINTS = ("ln", "final_norm")       # recorded only in a model with LayerNorm


def recorded(cfg, point) -> bool:
    return cfg.norm_placement != "none" or not point.startswith(NORM_POINTS)


def pair_choices(cfg):
    return [(t(*HIST_NAMES[name]), name) for name, points in HIST_PAIRS.items()
            if all(recorded(cfg, p) for p in points)]


def fitted_probes(session) -> dict:
    """The Inside tab's distribution and heatmap point: what the model records (a model
    without LayerNorm has no norm1, norm2 or final_norm to compare)."""
    cfg = config_of(session)
    pairs = pair_choices(cfg)
    values = [value for _, value in pairs]
    was_pair = chosen(session, "pair")
    pair = was_pair if was_pair in values else values[0]
    points = [p for p in HEAT_POINTS if recorded(cfg, p)]
    was_point = chosen(session, "heat_point")
    point = was_point if was_point in points else "resid_pre"
    choose(session, pair=pair, heat_point=point)
    no_norm = Message("changed.no_norm", "this model has no LayerNorm")
    if was_pair is not None:
        _changed(session, "pair", was_pair, pair, no_norm)
    if was_point is not None:
        _changed(session, "heat_point", was_point, point, no_norm)
    return {"pair": gr.update(choices=pairs, value=pair),
            "heat_point": gr.update(choices=points, value=point)}
