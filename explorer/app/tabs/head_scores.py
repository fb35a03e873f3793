"""The Attention tab's head scores (``explorer.probes.head_scores``): the heads with a clear job,
named (a click shows that head), and every head's scores as a table; A's, then B's."""
from __future__ import annotations

import math

import gradio as gr
import pandas as pd

from ...probes.interventions import Interventions
from ..i18n import label, t
from ..results import shared_head_scores
from ..shared import models_of

OUTPUTS = ("att_named", "att_scores")
JOBS = {"previous": ("heads.previous", "previous token"),
        "first": ("heads.first", "first token"),
        "induction": ("heads.induction", "induction")}
DEFINITIONS = ("heads.definitions", "**Head scores**, from 0 to 1. *Previous token*: the "
               "attention on the token just before (mean over the prompt's tokens). *First "
               "token*: the attention on position 0. *Induction*: on a standard prompt of up to "
               "50 random tokens repeated twice, the attention from each repeated token to the "
               "token after its earlier occurrence (once per model). Uniform attention already "
               "scores something (on a 4-token prompt 0.36 for the previous token): a head is "
               "named when one score is at least half the way from that chance level to 1, and "
               "the chance level is shown beside it.")


def scores_of(session) -> list:
    """Each model's ``HeadScores`` for its trace (shared)."""
    return [shared_head_scores(key, model, traced)
            for key, model, traced in zip(session.keys, models_of(session), session.traces)]


def _picked(side: int, layer: int, head: int) -> str:
    return f"{side}:{layer}:{head}"


def removed_of(session) -> list:
    """Each model's heads whose output its interventions take away (their pattern scores as
    before)."""
    return [Interventions.of(key.interventions).removed_heads(key.config.n_layers,
                                                              key.config.n_heads)
            for key in session.keys]


def named_choices(scores: list, names, n_layers: int, n_heads: int, layer, head,
                  removed=None) -> dict:
    """The radio of each model's named heads (``HeadScores.named``) that A's pickers can show,
    with the head shown selected."""
    choices, beyond, knocked = [], 0, 0
    for side, found in enumerate(scores):
        prefix = f"{names[side]} — " if names else ""
        for l, h, job, score, chance in found.named():
            if removed and (l, h) in removed[side]:
                knocked += 1     # its output is gone: it does no job in this model
            elif l < n_layers and h < n_heads:
                text = t("heads.named", "layer {layer}, head {head}: {job}, {score:.2f} "
                         "(uniform attention: {chance:.2f})", layer=l, head=h,
                         job=t(*JOBS[job]), score=score, chance=chance)
                choices.append((prefix + text, _picked(side, l, h)))
            else:
                beyond += 1          # B's, in a layer or head that A's pickers lack
    values = [v for _, v in choices]
    shown = next((v for v in values if head != "mean"
                  and v.split(":")[1:] == [str(layer), str(head)]), None)
    chance = scores[0].chance if scores else {}
    info = (t("heads.click", "Click a head to show it.") if choices else
            t("heads.none", "No head has a clear job here: no score is half the way from what "
              "uniform attention scores on this prompt ({chance}) to 1.",
              chance=_chance_text(chance)))
    if beyond:
        info += " " + t("heads.beyond", "{n} more of B's, in layers or heads A lacks: see the "
                                        "table.", n=beyond)
    if knocked:
        info += " " + t("heads.knocked_out", "{n} knocked-out heads are not named: knocking "
                        "out a head removes its output, not its pattern, which still scores "
                        "as before (see the table).", n=knocked)
    return gr.update(choices=choices, value=shown, info=info)


def _chance_text(chance: dict) -> str:
    """"previous token 0.36, first token 0.36, induction 0.01" (the scores that apply)."""
    return ", ".join(f"{t(*JOBS[job])} {value:.2f}" for job, value in chance.items()
                     if job in JOBS and not math.isnan(value))


def _score(value):
    return None if math.isnan(value) else round(float(value), 3)


def table(scores: list, names) -> pd.DataFrame:
    """Every head's scores, a row per head (with two models, a column names the model)."""
    columns = [t("heads.layer", "layer"), t("heads.head", "head"),
               *(t(*JOBS[job]) for job in JOBS)]
    rows = []
    for side, found in enumerate(scores):
        model = [names[side]] if names else []
        for l in range(found.previous.shape[0]):
            for h in range(found.previous.shape[1]):
                rows.append(model + [l, h, *(_score(getattr(found, job)[l, h]) for job in JOBS)])
        # what uniform attention scores on the same prompts: the level a score is read against
        rows.append(model + [t("heads.uniform", "uniform"), "",
                             *(_score(found.chance.get(job, math.nan)) for job in JOBS)])
    return pd.DataFrame(rows, columns=([t("heads.model", "model")] if names else []) + columns)


def views(session, layer, head, names) -> dict:
    scores = scores_of(session)
    cfg = session.traces[0].config
    return {"att_named": named_choices(scores, names, cfg["n_layers"], cfg["n_heads"], layer,
                                       head, removed_of(session)),
            "att_scores": table(scores, names)}


def hints() -> dict:
    return {"att_named": gr.update(choices=[], value=None, info=None),
            "att_scores": None}


def create(page):
    with gr.Row():
        page.add(gr.Radio([], label=label("heads.title", "Heads with a clear job"),
                          elem_id="att_named"))
        with gr.Column():
            page.add(gr.Markdown(label(*DEFINITIONS), elem_id="att_definitions"))
            with gr.Accordion(label("heads.all", "Every head's scores"), open=False):
                page.add(gr.Dataframe(None, interactive=False, max_height=300,
                                      elem_id="att_scores"))


def picked(value) -> tuple[int, str] | None:
    """The layer and head of a named head's choice ("side:layer:head"), None for none."""
    parts = str(value or "").split(":")
    if len(parts) != 3 or not parts[1].isdigit() or not parts[2].isdigit():
        return None
    return int(parts[1]), parts[2]
