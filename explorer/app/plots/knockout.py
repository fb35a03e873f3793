"""The map of which parts matter (``explorer.probes.Importance``) as plain HTML: a layers x heads
grid and a table of each block's parts, every cell coloured by how much knocking that part out
hurts (vermillion: the loss rises, or the probability of the actual next tokens falls; blue:
the opposite). A cell carries its intervention (``data-knock``): a click applies it
(``tabs/knockout.py``)."""
from __future__ import annotations

import html
import math

from ..i18n import t

HURT, HELP, NEUTRAL = (213, 94, 0), (0, 114, 178), (255, 255, 255)   # Okabe-Ito, white
METRICS = {"loss": ("knock.metric_loss", "change in loss (nats)"),
           "probability": ("knock.metric_prob", "change in the probability of the next token")}
PART_NAMES = {"att": "att", "ff": "ff", "norm1": "norm1", "norm2": "norm2",
              "shortcut": "shortcut"}
# (its look: static/page.css, #knock_map)


def _colour(harm: float, scale: float) -> str:
    if not math.isfinite(harm) or scale <= 0:
        return "#f0f0f0"
    share = min(1.0, abs(harm) / scale) ** 0.7
    end = HURT if harm > 0 else HELP
    return _hex(tuple(round(n + (e - n) * share) for n, e in zip(NEUTRAL, end)))


def _cell(value: float, harm: float, scale: float, spec: str, title: str, current) -> str:
    if not math.isfinite(value):
        return '<td style="background:#f0f0f0">–</td>'
    ink = "#ffffff" if scale > 0 and abs(harm) / scale > 0.6 else "#222222"
    shown = _number(value)
    title = f"{title} · {value:+.6g}"
    marked = ' class="walk-current"' if spec == current else ""
    return (f'<td data-knock="{html.escape(spec)}"{marked} tabindex="0" '
            f'title="{html.escape(title)}" '
            f'style="background:{_colour(harm, scale)};color:{ink}">{shown}</td>')


def _number(value: float) -> str:
    """Three decimals; a smaller change (a random model's probabilities: 1 in 50,257) in
    scientific notation, so that a coloured cell never reads 0."""
    if value == 0:
        return "0"
    return f"{value:+.3f}" if abs(value) >= 5e-4 else f"{value:+.1e}"


def _scale(grid) -> float:
    """Each table its own colour scale: a shortcut's cost would pale every head."""
    if grid is None:
        return 0.0
    finite = [abs(v) for v in grid.ravel() if math.isfinite(v)]
    return max(finite, default=0.0)


def knockout_map_html(importance, metric: str = "loss", current: str | None = None) -> str:
    """Both tables of ``importance`` in ``metric`` ("loss" or "probability"); the cell of the
    knock-out ``current`` (model B's, in the string form) outlined."""
    if importance is None:
        return ('<p class="hint">' + t("knock.map_hint", "Press <b>Which parts matter</b>: "
                                       "every head and every part of every block is knocked "
                                       "out in turn, and the map shows what that costs. Click "
                                       "a cell to knock that part out as model B.") + "</p>")
    heads = importance.head_loss if metric == "loss" else importance.head_prob
    parts = importance.part_loss if metric == "loss" else importance.part_prob
    sign = 1.0 if metric == "loss" else -1.0          # what hurts: more loss, less probability
    clean = (t("knock.clean_loss", "the model's own loss {loss:.3f} nats",
               loss=importance.clean_loss) if metric == "loss" else
             t("knock.clean_prob", "the model's own probability of the next token {p}",
               p=f"{importance.clean_prob:.3g}"))
    summary = t("knock.summary", "{n} tokens · {clean} · each cell: {what} when that part is "
                                 "knocked out · {seconds:.1f} s", n=len(importance.token_ids),
                clean=clean, what=t(*METRICS[metric]), seconds=importance.seconds)
    key = t("knock.key", "{hurt} the part matters (knocked out, the model gets worse) · {help} "
                         "the model gets better without it · <b>click a cell</b> to knock that "
                         "part out as model B", hurt=f'<span style="background:{_hex(HURT)}">'
                         "</span>", help=f'<span style="background:{_hex(HELP)}"></span>')
    out = [f"<p>{summary}</p>", f'<p class="key">{key}</p>', '<div class="knock-tables">']
    click = t("knock.click", "click: knock it out as B")
    if heads is not None:
        rows = [f"<tr><th>{html.escape(t('knock.block', 'block'))}</th>"
                + "".join(f"<th>{t('knock.head', 'head {h}', h=h)}</th>"
                          for h in range(heads.shape[1])) + "</tr>"]
        for layer, label in enumerate(importance.layer_labels):
            cells = "".join(_cell(v, sign * v, _scale(heads),
                                  str(importance.head_intervention(layer, h)),
                                  f"{label}.att head {h} · {click}", current)
                            for h, v in enumerate(heads[layer]))
            rows.append(f"<tr><th>{html.escape(label)}</th>{cells}</tr>")
        caption = t("knock.heads_caption", "Each head zeroed on its own")
        out.append(f"<table><caption>{caption}</caption>{''.join(rows)}</table>")
    if parts is not None:
        rows = [f"<tr><th>{html.escape(t('knock.block', 'block'))}</th>"
                + "".join(f"<th>{PART_NAMES[p]}</th>" for p in importance.parts) + "</tr>"]
        for layer, label in enumerate(importance.layer_labels):
            cells = "".join(
                _cell(v, sign * v, _scale(parts), str(importance.part_intervention(layer, p))
                      if math.isfinite(v) else "", f"{label}.{p} · {click}", current)
                for p, v in zip(importance.parts, parts[layer]))
            rows.append(f"<tr><th>{html.escape(label)}</th>{cells}</tr>")
        caption = t("knock.parts_caption", "Each part of a block knocked out on its own (att, "
                                           "ff skipped; norm1, norm2 the identity; both "
                                           "shortcuts removed)")
        out.append(f"<table><caption>{caption}</caption>{''.join(rows)}</table>")
    return "".join(out) + "</div>"


def _hex(rgb) -> str:
    return "#%02x%02x%02x" % rgb
