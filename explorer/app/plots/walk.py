"""The guided walk of the chapter's diagram: each stage of ``architecture_html`` as a button
(``stage_attrs``), and the card that shows one stage for the traced prompt (``stage_html``):
its tensor's shape, its statistics at the probe points that measure it, and the book's
section. Plain HTML; the page's script (``static/page.js``, ``gptExplorer.walk``) turns a
click or Enter/Space on a stage into the server call."""
from __future__ import annotations

import html
import math

from ...book.probe_points import POINTS_BY_NAME
from ...book.stages import BLOCK_SECTION, STAGES_BY_NAME, title_of
from ...probes.stages import WALK_STATS, StageDetails
from ..i18n import say, t
from .labels import point_label, token_label

# The card's statistics, as its table heads them.
HEADERS = {"mean": ("walk.mean", "mean"), "std": ("walk.std", "std"), "min": ("walk.min", "min"),
           "max": ("walk.max", "max")}

# The diagram's stages look pressable, and the chosen one stays outlined (page.js sets
# .walk-current). Orange (Okabe-Ito #e69f00) is none of the diagram's box colours.
STAGE_CSS = """
/* A stage scrolled into view (by Tab, a click, or a script) stops above the sticky card, not
   under it */
#arch [data-stage] {cursor: pointer; scroll-margin-bottom: 45vh;}
#arch [data-stage]:hover {box-shadow: 0 0 0 2px #e69f00;}
#arch [data-stage]:focus-visible {outline: 3px solid #e69f00; outline-offset: 2px;}
#arch [data-stage].walk-current {box-shadow: 0 0 0 4px #e69f00;}
#arch div[data-stage="embeddings"] {border-radius: 8px;}
/* The walk's card stays in view while the diagram above it scrolls by: at the bottom of the
   screen, so that it never hides the diagram's top (at the top of the screen it did, whenever
   the diagram's top was scrolled there). Sticky needs every ancestor to leave overflow alone:
   Gradio's container hides it, which "clip" does too without making a scroll box. */
.gradio-container:has(#walk) {overflow: clip !important;}
#walk {position: sticky; bottom: 0; z-index: 5; background: var(--background-fill-primary);
       padding-top: 4px;}
.walk-card {border: 2px solid #e69f00; border-radius: 8px; padding: 4px 10px;
            background: #fffaf0; color: #222222; font-size: 15px; line-height: 1.35;}
.walk-card table {border-collapse: collapse; margin: 2px 0; width: 100%;}
.walk-card th, .walk-card td {padding: 0 6px; text-align: right; border: none;
                              white-space: nowrap; font-variant-numeric: tabular-nums;}
.walk-card th {font-weight: normal; color: #444444; font-size: 14px;}
.walk-card th:first-child, .walk-card td:first-child {text-align: left; white-space: normal;}
.walk-card td small {color: #444444; font-size: 14px;}   /* (small's own 83 % is 12 px) */
.walk-card .walk-section {float: right; color: #8a5a00; margin-left: 10px;}
.walk-card > small {color: #444444;}
.walk-hint {color: #444444; padding: 2px;}
/* Lecture mode: larger type (Gradio prefixes each rule with its container's classes, which
   outweigh "body.lecture": hence !important). */
body.lecture .walk-card {font-size: 19px !important;}
body.lecture .walk-card th, body.lecture .walk-card small {font-size: 16px !important;}
/* ... and one line per probe point: its description stays in the row's tooltip */
body.lecture .walk-card td small {display: none !important;}
/* ... and no hint above the diagram until a stage is chosen: the diagram comes first */
body.lecture #walk:has(.walk-hint) {display: none !important;}
"""


def stage_attrs(name: str, cfg) -> str:
    """The attributes that make a diagram element the walk's stage ``name``: a focusable
    button, named for screen readers, with the book's section in its tooltip."""
    stage = STAGES_BY_NAME[name]
    text = html.escape(t("walk.section_click_for_its", "{title} (section {section}): click for "
                         "its shape and statistics", title=say(title_of(stage, cfg)),
                         section=stage.section), quote=True)
    return (f' data-stage="{name}" role="button" tabindex="0" aria-label="{text}"'
            f' title="{text}"')


def _number(value: float) -> str:
    if not math.isfinite(value):
        return str(value)
    return f"{value:.4g}" if value == 0 or 1e-3 <= abs(value) < 1e5 else f"{value:.3e}"


def _shape(shape) -> str:
    return "(" + ", ".join(f"{n:,}" for n in shape) + ")"


def stage_html(details: StageDetails, cfg) -> str:
    """The card for one stage: its title, block and the book's sections; a row per probe point
    (shape and statistics), or the logits' shape for the output head; the prompt."""
    stage = details.stage
    block = (" · " + html.escape(t("walk.block_trf_blocks",
                                   "block {block} of {n} (trf_blocks[{block}])",
                                   block=details.block, n=details.n_blocks))
             if details.block is not None else "")
    section = (t("walk.book_in_transformer_block",
                 "book §{section}, in the transformer block of §{block}", section=stage.section,
                 block=BLOCK_SECTION) if stage.scope == "block"
               else t("walk.book", "book §{section}", section=stage.section))
    head = (f"<div><span class=\"walk-section\">{html.escape(section)}</span>"
            f"<b>{html.escape(say(title_of(stage, cfg)))}</b>{block}</div>")
    body = ""
    if details.points:
        header = "".join(f"<th>{html.escape(t(*s))}</th>"
                         for s in (("walk.probe_point", "probe point"), ("walk.shape", "shape"),
                                   *(HEADERS[s] for s in WALK_STATS)))
        rows = "".join(
            f"<tr title=\"{html.escape(say(POINTS_BY_NAME[p.point].where), quote=True)}\">"
            f"<td><code>{p.point}</code> <small>{html.escape(point_label(p.point))}</small></td>"
            f"<td>{_shape(p.shape)}</td>"
            + "".join(f"<td>{_number(p.stats[s])}</td>" for s in WALK_STATS) + "</tr>"
            for p in details.points)
        shape = t("walk.shape_batch_tokens_channels", "shape: (batch, tokens, channels)")
        body = f"<div>{html.escape(shape)}</div><table><tr>{header}</tr>{rows}</table>"
        if any(p.nonfinite for p in details.points):
            body += "<div>" + html.escape(t("walk.some_values_are_inf",
                                            "Some values are inf or NaN: they overflowed.")) \
                + "</div>"
    if details.next_token is not None:
        text, prob = details.next_token
        body = ("<div>" + t("walk.logits_shape_batch_tokens",
                            "logits, shape (batch, tokens, vocabulary): <b>{shape}</b>",
                            shape=_shape(details.shape)) + "</div><div>"
                + t("walk.one_score_per_vocabulary", "One score per vocabulary entry at every "
                    "position. The most likely next token after the last one: <b>{token}</b> "
                    "({p:.2%}).", token=token_label(text), p=prob) + "</div>")
    prompt = "".join(details.tokens)
    shown = prompt if len(prompt) <= 80 else prompt[:77] + "…"
    foot = t("walk.for_prompt_tokens", "for the prompt “{prompt}” ({n} tokens)",
             prompt=html.escape(shown), n=len(details.tokens))
    return f"<div class=\"walk-card\">{head}{body}<small>{foot}</small></div>"


def walk_hint(text: str) -> str:
    return f"<div class=\"walk-hint\">{html.escape(text)}</div>"
