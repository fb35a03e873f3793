"""The map of which parts matter (``explorer.probes.attribution.Attribution``) as plain HTML: a
layers x heads grid and a table of each block's parts, every cell coloured by how much knocking
that part out hurts (vermillion: the loss rises, or the probability of the actual next tokens
falls; blue: the opposite). Estimated cells read "≈"; exact ones plain. One colour scale for
the whole map (both tables), shown in its key with numbers; a change below the noise floor
(float rounding relative to the loss) is left uncoloured. A cell carries its intervention
(``data-knock``): a click applies it (``tabs/knockout.py``)."""
from __future__ import annotations

import html
import math

import numpy as np

from ...probes.misses import BLIND_CHANGE, MISS
from ..i18n import t

HURT, HELP, NEUTRAL = (213, 94, 0), (0, 114, 178), (255, 255, 255)   # Okabe-Ito, white
BLANK = "#f0f0f0"          # no such part, or no value yet
GAMMA = 0.5                # colour share = (|change| / scale) ** GAMMA: small changes still show
METRICS = {"loss": ("knock.metric_loss", "change in loss (nats)"),
           "probability": ("knock.metric_prob", "change in the probability of the next token")}
PART_NAMES = {"att": "att", "ff": "ff", "norm1": "norm1", "norm2": "norm2",
              "shortcut": "shortcut"}


def colour(change: float, scale: float, floor: float) -> str:
    """The background of a cell whose change hurts by ``change`` (positive: the model gets
    worse without the part), on the map's scale; white below the noise floor."""
    if not math.isfinite(change):
        return BLANK
    if scale <= 0 or abs(change) <= floor:
        return hex_of(NEUTRAL)
    share = min(1.0, abs(change) / scale) ** GAMMA
    end = HURT if change > 0 else HELP
    return hex_of(tuple(round(n + (e - n) * share) for n, e in zip(NEUTRAL, end)))


def _number(value: float) -> str:
    """Three decimals; a smaller change (a random model's probabilities: 1 in 50,257) in
    scientific notation, so that a coloured cell never reads 0."""
    if not math.isfinite(value):           # an overflowed loss (inf), never a number
        return "∞" if value > 0 else "−∞" if value < 0 else "NaN"
    if value == 0:
        return "0"
    if abs(value) >= 5e-4:
        return f"{value:+.3f}"
    mantissa, exponent = f"{value:+.1e}".split("e")
    return f"{mantissa}e{int(exponent)}"                  # +4.2e-4: narrow columns


def map_values(result, metric: str):
    """(heads, parts, head estimated?, part estimated?, floor, scale) of ``metric``: a cell is
    exact where known, else the estimate (the probability has none: NaN until exact); the
    scale is the largest change above the floor in either table."""
    if metric == "loss":
        heads, parts = result.head_shown, result.part_shown
        floor = result.floor
    else:
        heads, parts = result.head_prob, result.part_prob
        floor = result.prob_floor
    head_est, part_est = ~result.head_exact, ~result.part_exact
    finite = [abs(v) for grid in (heads, parts) for v in np.ravel(grid) if math.isfinite(v)]
    scale = max(finite, default=0.0)
    return heads, parts, head_est, part_est, floor, (scale if scale > floor else 0.0)


def _cell(value, estimated, sign, scale, floor, spec, title, current, missing=""):
    if not spec:
        return f'<td style="background:{BLANK}">–</td>'
    marked = ' class="walk-current"' if spec == current else ""
    classes = "estimated" if estimated else ""
    if not math.isfinite(value) and not estimated:      # exact: the knock-out overflowed
        shown, background = _number(value), BLANK
        title = f"{title} · " + t("knock.overflow", "the knocked-out model's loss is not a "
                                  "finite number: its activations overflow")
    elif not math.isfinite(value):
        shown, background = "…", BLANK
        title = f"{title} · {missing}"
    else:
        shown = ("≈" if estimated else "") + _number(value)
        background = colour(sign * value, scale, floor)
        title = f"{title} · {'≈ ' if estimated else ''}{value:+.6g}"
    if marked and classes:
        marked = f' class="walk-current {classes}"'
    elif classes:
        marked = f' class="{classes}"'
    return (f'<td data-knock="{html.escape(spec)}"{marked} tabindex="0" '
            f'title="{html.escape(title)}" '
            f'style="background:{background};color:{ink(value, scale, floor)}">{shown}</td>')


def scale_key(scale: float, floor: float, sign: float) -> str:
    """The colour key with its numbers: the map's scale from the largest change that helps to
    the largest that hurts, and the floor below which a cell stays white."""
    if scale <= 0:
        return ('<p class="knock-scale">' + t("knock.scale_flat", "Every change is below the "
                                              "noise floor ({floor}): nothing is coloured.",
                                              floor=_number(floor).lstrip("+")) + "</p>")
    stops = [-scale, -scale / 4, -scale / 16, 0.0, scale / 16, scale / 4, scale]
    swatches = "".join(
        f'<span style="background:{colour(sign * v, scale, floor)};color:'
        f'{"#ffffff" if abs(v) / scale > 0.3 else "#222222"}">{_number(v)}</span>'
        for v in stops)
    return ('<p class="knock-scale">' + t("knock.scale", "One colour scale for both tables: "
                                          "{swatches} · white: below the noise floor {floor} "
                                          "(float rounding of the loss)", swatches=swatches,
                                          floor=_number(floor).lstrip("+")) + "</p>")


def knockout_map_html(result, metric: str = "loss", current: str | None = None,
                      status: str = "", applied: int = 0) -> str:
    """Both tables of ``result`` in ``metric`` ("loss" or "probability") under ``status`` (the
    refinement's progress), B's knock-out ``current`` outlined. ``applied``: the number of
    the page's last click the server has applied (the script lists later ones as queued)."""
    queued = html.escape(t("knock.queued", "Queued, each in turn as B: {specs}",
                           specs="{specs}"))
    queue = (f'<div data-applied="{int(applied)}"><p class="knock-queue" aria-live="polite" '
             f'data-queued="{queued}"></p></div>')
    if result is None:
        return ('<p class="hint">' + t(
            "knock.map_hint", "Press <b>Which parts matter</b>: every head and every part of "
            "every block is estimated at once, then the largest are knocked out exactly. Click "
            "a cell to knock that part out as model B.") + "</p>" + queue)
    heads, parts, head_est, part_est, floor, scale = map_values(result, metric)
    sign = 1.0 if metric == "loss" else -1.0          # what hurts: more loss, less probability
    missing = (t("knock.exact_only", "exact only: not computed yet") if metric == "loss" else
               t("knock.no_prob_estimate", "the probability is not estimated: known once "
                                           "the cell is exact"))
    clean = (t("knock.clean_loss", "the model's own loss {loss:.3f} nats",
               loss=result.clean_loss) if metric == "loss" else
             t("knock.clean_prob", "the model's own probability of the next token {p}",
               p=f"{result.clean_prob:.3g}"))
    from ...book.tokenizer import get_tokenizer
    text = get_tokenizer().decode(result.token_ids)
    text = text if len(text) <= 160 else text[:80] + " … " + text[-60:]
    measured = t("knock.measured", "Measured on: {words}",
                 words=f"<q>{html.escape(text)}</q>")
    summary = t("knock.summary", "{n} tokens · {clean} · each cell: {what} when that part is "
                                 "knocked out · ≈ estimated (one backward pass, {seconds:.1f} "
                                 "s), plain: exact", n=len(result.token_ids), clean=clean,
                what=t(*METRICS[metric]), seconds=result.seconds)
    key = t("knock.key", "{hurt} the part matters (knocked out, the model gets worse) · {help} "
                         "the model gets better without it · <b>click a cell</b> to knock that "
                         "part out as model B (its cell is outlined)",
            hurt=f'<span style="background:{hex_of(HURT)}"></span>',
            help=f'<span style="background:{hex_of(HELP)}"></span>')
    out = [f'<p class="knock-measured">{measured}</p>',
           f'<p class="knock-status">{status}</p>' if status else "",
           f"<p>{summary}</p>", f'<p class="key">{key}</p>', scale_key(scale, floor, sign)]
    if result.n_blind:
        out.append('<p class="knock-blind"><b>' + t(
            "knock.blind", "The model is sure of {share} of the next tokens (p > 0.9). There "
            "the loss's gradient is near 0, so a first-order estimate cannot see what a "
            "knock-out changes: the {n} cells that change the stream there by {change} or "
            "more have no estimate (…) and are computed exactly.",
            share=f"{result.sure_share:.0%}", n=result.n_blind,
            change=f"{BLIND_CHANGE:.0%}") + "</b></p>")
    if result.estimate_failed:
        out.append('<p class="knock-missed"><b>' + t(
            "knock.missed", "The estimate missed an exact value by {miss:.2f} nats (more than "
            "{most} nats): no estimate of this text is trusted, so every cell is computed "
            "exactly.", miss=result.missed, most=MISS) + "</b></p>")
    agreement = result.agreement() if result.n_exact == len(result.cells()) else None
    if agreement is not None:
        out.append('<p class="knock-agreement">' + t(
            "knock.agreement", "Exact everywhere. The estimate against it, over {n} cells: "
            "rank correlation (Spearman) {rho:+.3f}; {top} of the exact top 10 (by size) were "
            "in the estimate's top 10.", n=agreement.cells, rho=agreement.spearman,
            top=agreement.top_overlap) + "</p>")
    out.append(queue + '<div class="knock-tables">')
    click = t("knock.click", "click: knock it out as B")
    rows = [f"<tr><th>{html.escape(t('knock.block', 'block'))}</th>"
            + "".join(f"<th>{t('knock.head', 'head {h}', h=h)}</th>"
                      for h in range(heads.shape[1])) + "</tr>"]
    for layer, label in enumerate(result.layer_labels):
        cells = "".join(_cell(v, bool(head_est[layer, h]), sign, scale, floor,
                              str(result.head_intervention(layer, h)),
                              f"{label}.att head {h} · {click}", current, missing)
                        for h, v in enumerate(heads[layer]))
        rows.append(f"<tr><th>{html.escape(label)}</th>{cells}</tr>")
    caption = t("knock.heads_caption", "Each head zeroed on its own")
    out.append(f"<table><caption>{caption}</caption>{''.join(rows)}</table>")
    rows = [f"<tr><th>{html.escape(t('knock.block', 'block'))}</th>"
            + "".join(f"<th>{PART_NAMES[p]}</th>" for p in result.parts) + "</tr>"]
    for layer, label in enumerate(result.layer_labels):
        cells = "".join(
            _cell(v, bool(part_est[layer, i]), sign, scale, floor,
                  str(result.part_intervention(layer, p)) if result.has_part[layer, i] else "",
                  f"{label}.{p} · {click}", current, missing)
            for i, (p, v) in enumerate(zip(result.parts, parts[layer])))
        rows.append(f"<tr><th>{html.escape(label)}</th>{cells}</tr>")
    caption = t("knock.parts_caption", "Each part of a block knocked out on its own (att, "
                                       "ff skipped; norm1, norm2 the identity; both "
                                       "shortcuts removed)")
    out.append(f"<table><caption>{caption}</caption>{''.join(rows)}</table>")
    return "".join(out) + "</div>"


def hex_of(rgb) -> str:
    return "#%02x%02x%02x" % rgb


def ink(value: float, scale: float, floor: float) -> str:
    """White text on a cell coloured strongly, else dark."""
    strong = (math.isfinite(value) and scale > 0 and abs(value) > floor
              and (abs(value) / scale) ** GAMMA > 0.6)
    return "#ffffff" if strong else "#222222"
