"""The training lab's live views, from its plain data (``explorer.runtime.training.views.JobView``):
loss curves (train solid, validation dashed, one colour per variant), per-block gradient norms
as a heatmap per variant, the table of runs, the samples and the progress line."""
from __future__ import annotations

import html
import math

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ...runtime.placement import gpu_kind
from ...runtime.training.setup import VARIANT_LABELS
from ..i18n import say, t
from .labels import human_count
from ..prefs import current
from .style import FONT_SIZE, GREY, PALETTE, SEQUENTIAL_SCALE, clean, empty_figure, finish, scaled

MARKER_POINTS = 40     # evaluation points up to which the loss curves show markers
HALF_WIDTH_WRAP = 50   # the two figures sit side by side: shorter note lines
# Lecture mode: the curves' figure no taller than this, so that it fits under the settings and
# the progress line at 720 px (issue 47, item 8)
LECTURE_HEIGHT = 330
TABLE_HEADERS = (("training.h_variant", "variant"), ("training.h_parameters", "parameters"),
                 ("training.h_tokens", "tokens seen"), ("training.h_train", "train loss"),
                 ("training.h_val", "val loss"), ("training.h_step", "s / step"),
                 ("training.h_diverged", "diverged"))


def variant_name(label: str) -> str:
    """A variant's name on the page (its label is the API's value)."""
    return say(VARIANT_LABELS.get(label, label))


def _text(value) -> str:
    """User text (a file's name, a sample) shown as text: markup escaped, quotes kept."""
    return html.escape(str(value), quote=False)


def _number(value, digits=3) -> str:
    """A loss or a time for the table: NaN and infinities shown as such, never a crash."""
    if value is None:
        return "–"
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    return f"{value:.{digits}f}"


def is_copying(view) -> bool:
    """Whether the job is the copying task (its runs measure each half and the head scores)."""
    return view is not None and any(r.repeated_half_loss for r in view.runs)


def _planned_steps(fig: go.Figure, view) -> None:
    """Every x axis fixed to the job's planned steps from its first update: axes that rescaled
    with each update moved every curve under the lecturer's pointer (issue 47, item 12)."""
    pad = max(0.5, 0.02 * view.total_steps)       # room each side for the end markers
    fig.update_xaxes(range=[-pad, view.total_steps + pad], autorange=False)


def _series(copying: bool) -> dict:
    """What the curves show: the loss (train, validation), or the copying task's loss on each
    half; ``lines`` are (attribute of a run, dash, what the line is)."""
    loss = t("training.cross_entropy_loss", "cross-entropy loss")
    if copying:
        return dict(lines=(("repeated_half_loss", "solid",
                            t("training.repeated_half", "repeated half")),
                           ("first_half_loss", "dot", t("training.first_half", "first half"))),
                    title=t("training.halves_title", "Loss on each half of the sequences"),
                    note=t("training.halves_note", "solid: the repeated half (it drops when an "
                           "induction head forms) · dotted: the first half (new random words)"),
                    y_title=loss)
    return dict(lines=(("train_losses", "solid", t("training.train", "train")),
                       ("val_losses", "dash", t("training.val", "val"))),
                title=t("training.loss", "Loss"),
                note=t("training.solid_training_loss_dashed", "solid: training loss · dashed: "
                       "validation loss (the book's evaluate_model)"),
                y_title=loss, value=t("training.loss_2", "loss") + " ")


def _scores_series() -> dict:
    return dict(lines=(("best_induction", "solid", t("training.induction", "induction")),
                       ("best_prev_token", "dash", t("training.prev_token", "previous token"))),
                title=t("training.scores_title", "Best head scores"),
                note=t("training.scores_note", "solid: the best induction score · dashed: the "
                       "best previous-token score (a head above 0.5 has that job)"),
                y_title=t("training.score", "score (0 to 1)"), y_range=[0, 1.02], hline=0.5)


def loss_figure(view) -> go.Figure:
    """Train (solid) and validation (dashed) loss per variant against steps; the copying task:
    the loss on the first half (new random words) and on the repeated half (it drops when a
    head copies)."""
    copying = is_copying(view)
    if not copying and (view is None or not any(r.eval_steps for r in view.runs)):
        return empty_figure(t("training.loss", "Loss"),
                            t("training.curves_grow_here_while",
                              "The curves grow here while the variants train."), 340)
    diverged = [t("training.diverged_at_step", "{variant} diverged at step {step}",
                  variant=variant_name(r.label), step=r.diverged_at)
                for r in view.runs if r.diverged and not copying]
    return _series_figure(view, **_series(copying), more=["; ".join(diverged)] if diverged else [])


def _series_figure(view, lines, title, note, y_title, y_range=None, hline=None, value="",
                   more=()):
    """Lines per variant over the evaluation points, one colour per variant, named once in a
    legend right of the plot: below it, its rows took what lecture mode's height left the
    plot, and plotly.js 3 stopped the page ("Something went wrong with axis scaling").
    ``value``: what the hover calls a value; ``more``: notes lecture mode keeps."""
    fig = go.Figure()
    for i, run in enumerate(view.runs):
        name = _text(variant_name(run.label))
        for attribute, dash, kind in lines:
            y, _ = clean(getattr(run, attribute))
            x = run.eval_steps[:len(y)]
            fig.add_trace(go.Scatter(
                x=np.asarray(x, dtype=np.float32), y=y,
                # markers while there are few points; a long run's would hide the lines
                mode="lines+markers" if len(x) <= MARKER_POINTS else "lines",
                name=name, showlegend=dash == lines[0][1], legendgroup=name,
                line=dict(color=PALETTE[i % len(PALETTE)], width=3, dash=dash),
                marker=dict(size=6),
                hovertemplate=f"{name} {kind}<br>" + t("training.step", "step")
                + f" %{{x}}: {value}%{{y:.3f}}<extra></extra>"))
    notes = [note]
    if current().lecture:
        # legend entries in grey say what each line style is: the note that said it left the
        # plot ~150 px at 720 px (issue 47, item 7)
        notes = []
        for _, dash, kind in lines:
            fig.add_trace(go.Scatter(x=[None], y=[None], mode="lines", name=kind,
                                     legendgroup="styles", hoverinfo="skip",
                                     line=dict(color=GREY, width=3, dash=dash)))
    _planned_steps(fig, view)
    if hline is not None:
        fig.add_hline(y=hline, line=dict(color="#777777", width=1.5, dash="dot"))
    if y_range is not None:
        fig.update_yaxes(range=y_range)
    return finish(fig, title, 440, notes=[*notes, *more], x_title=t("training.step", "step"),
                  y_title=y_title, legend="right", wrap=HALF_WIDTH_WRAP,
                  max_height=LECTURE_HEIGHT)


def grad_norm_figure(view) -> go.Figure:
    """Per-block L2 norm of the gradient over the steps, one heatmap per variant (log colour
    scale shared by all: the shortcut lesson of section 4.4 during real training). The copying
    task: its best head scores instead."""
    if is_copying(view):
        return _series_figure(view, **_scores_series())
    runs = [] if view is None else [r for r in view.runs if r.grad_steps]
    if not runs:
        return empty_figure(t("training.gradient_norm_per_block", "Gradient norm per block"),
                            t("training.each_variant_s_gradient",
                              "Each variant's gradient norms per block appear here."), 300)
    finite = [v for r in runs for row in r.grad_norms for v in row
              if v > 0 and math.isfinite(v)]
    low, high = (math.log10(min(finite)), math.log10(max(finite))) if finite else (-3.0, 0.0)
    if high - low < 1e-6:
        low, high = low - 0.5, high + 0.5
    cols = min(len(runs), 2)
    rows = math.ceil(len(runs) / cols)
    fig = make_subplots(rows=rows, cols=cols,
                        subplot_titles=[_text(variant_name(r.label)) for r in runs],
                        horizontal_spacing=0.1, vertical_spacing=0.22 if rows > 1 else 0.1)
    for i, run in enumerate(runs):
        norms = np.asarray(run.grad_norms, dtype=np.float64).T      # (blocks, recorded steps)
        with np.errstate(divide="ignore", invalid="ignore"):
            z, _ = clean(np.where(norms > 0, np.log10(norms), np.nan))
        fig.add_trace(go.Heatmap(
            z=z, x=np.asarray(run.grad_steps, dtype=np.float32),
            y=[str(b) for b in range(norms.shape[0])], coloraxis="coloraxis",
            customdata=norms.astype(np.float32),
            hovertemplate=(f"{_text(variant_name(run.label))}<br>" + t("training.step", "step")
                           + " %{x}, " + t("training.block", "block")
                           + " %{y}: %{customdata:.3g}<extra></extra>")),
            row=i // cols + 1, col=i % cols + 1)
    fig.update_layout(coloraxis=dict(colorscale=SEQUENTIAL_SCALE, cmin=low, cmax=high,
                                     colorbar=dict(title=dict(text="log10 ‖grad‖"))))
    fig.update_annotations(font=dict(size=scaled(FONT_SIZE)))
    fig.update_yaxes(type="category", autorange="reversed")   # whole blocks, block 0 on top
    # few level step numbers: a narrow panel in lecture mode turned five of them on end, into
    # the title of the panel below
    fig.update_xaxes(tickangle=0, nticks=3)
    _planned_steps(fig, view)
    fig.update_yaxes(showticklabels=False, col=2)     # the first column names the blocks
    for i in range(len(runs)):
        if i + cols >= len(runs):      # no panel below it: its axis title collides with none
            fig.update_xaxes(title_text=t("training.step", "step"), row=i // cols + 1,
                             col=i % cols + 1)
    return finish(fig, t("training.gradient_norm_per_block", "Gradient norm per block"),
                  150 + 260 * rows,
                  notes=[t("training.block_0_is_next", "block 0 is next to the input; dark: "
                           "gradients that barely reach the block")],
                  y_title=t("training.block_input_output", "block (input → output)"),
                  wrap=HALF_WIDTH_WRAP, plot_min=130 * rows, max_height=LECTURE_HEIGHT)


def table_rows(view) -> dict:
    """The table of variants, headers included (a Dataframe value). The copying task: its
    validation loss is over every position, both halves, and each half's follows (the last
    evaluation's, as the curves end)."""
    copying = is_copying(view)
    headers = [t(*h) for h in TABLE_HEADERS]
    at = TABLE_HEADERS.index(("training.h_val", "val loss"))
    if copying:
        headers[at:at + 1] = [t("training.h_val_both", "val loss, both halves"),
                              t("training.h_val_first", "val loss, first half"),
                              t("training.h_val_repeated", "val loss, repeated half")]
    rows = []
    for r in [] if view is None else view.runs:
        halves = ([_number(r.first_half_loss[-1] if r.first_half_loss else None),
                   _number(r.repeated_half_loss[-1] if r.repeated_half_loss else None)]
                  if copying else [])
        rows.append([variant_name(r.label), f"{r.parameters:,}", f"{r.tokens_seen:,}",
                     _number(r.train_loss_now), _number(r.val_loss_now), *halves,
                     _number(r.seconds_per_step, 3),
                     t("training.yes_at_step", "yes, at step {step}", step=r.diverged_at)
                     if r.diverged else t("training.no", "no")])
    return {"headers": headers, "data": rows}


def samples_markdown(view) -> str:
    if view is None or not view.runs:
        return ""
    lines = [t("training.latest_samples_greedy_from",
               "**Latest samples** (greedy, from the start context):")]
    for r in view.runs:
        text = _text(r.sample) if r.sample else "…"
        at = t("training.step_2", " (step {step})", step=r.sample_step) \
            if r.sample_step is not None else ""
        lines.append(f"- **{_text(variant_name(r.label))}**{at}: {text}")
    return "\n".join(lines)


STATUS_WORDS = {"ready": ("training.ready", "Ready"), "running": ("training.running", "Training"),
                "stopped": ("training.stopped", "Stopped"),
                "finished": ("training.finished", "Finished"),
                "replaying": ("training.replaying", "Replay of the recorded run"),
                "cancelled": ("training.cancelled", "Cancelled"),
                "failed": ("training.failed", "Failed")}


def progress_markdown(view) -> str:
    if view is None:
        return t("training.no_training_yet_choose", "No training yet: choose the data and two to "
                 "four variants, then press **Train**.")
    share = view.step / view.total_steps if view.total_steps else 0.0
    line = t("training.step_tokens_per_variant", "**{status}** — step {step:,} of {total:,} "
             "({share:.0%}), {seen} of {tokens} tokens per variant, on *{corpus}*, "
             "{seconds:.0f} s.",
             status=t(*STATUS_WORDS[view.status]), step=view.step,
             total=view.total_steps, share=share, seen=human_count(view.tokens_seen),
             tokens=human_count(view.total_tokens), corpus=_text(say(view.corpus)),
             seconds=view.seconds)
    if view.message:
        line += f" {_text(say(view.message))}"
    if view.where is not None and (gpu_kind() is not None or view.where.id != "ran.cpu"):
        line += f" ({_text(say(view.where))})"
    if view.caption:       # what the data is, when it is not a text (the copying task)
        line += f"\n\n{_text(say(view.caption))}"
    return line
