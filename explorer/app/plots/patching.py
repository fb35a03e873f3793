"""The patching maps (``explorer.probes.patching.Patching``) and the direct logit attribution
as plain HTML: a layers x heads grid and a layers x positions grid, every cell coloured by the
share of the clean result it recovers when patched (vermillion: towards the clean answer;
blue: away from it), one colour scale for both, shown in its key with numbers; a change below
the noise floor is left white. Estimated cells read "≈", exact ones plain. A cell carries its
patch (``data-patch``): a click makes it model B (``tabs/patching.py``). Their style is
static/page.css's."""
from __future__ import annotations

import html
import math

import numpy as np

from ...book.tokenizer import get_tokenizer
from ..i18n import t
from .knockout import BLANK, HELP, HURT, colour, hex_of, ink


def _share_text(value: float) -> str:
    return "0" if value == 0 else f"{value:+.2f}"


def _swatches(scale: float, floor: float) -> str:
    stops = [-scale, -scale / 4, 0.0, scale / 4, scale]
    return "".join(
        f'<span style="background:{colour(v, scale, floor)};color:{ink(v, scale, floor)}">'
        f"{_share_text(v)}</span>" for v in stops)


def _pieces(ids) -> list[str]:
    tok = get_tokenizer()
    return [tok.token_text(i) if i < tok.n_vocab else f"<id {i}>" for i in ids]


def patching_html(result, current: str | None = None, note: str = "") -> str:
    """Both maps of ``result`` in shares of the clean result recovered, B's patch ``current``
    outlined, under ``note``."""
    if result is None:
        return '<p class="hint">' + t(
            "patch.hint", "Choose a pair (or write your own), then press <b>Patch</b>: every "
            "head and every position of the residual stream is patched from the clean run into "
            "the corrupted one, estimated at once and made exact where it counts. Click a cell "
            "to make that patch model B.") + "</p>"
    heads, resid = result.shares(result.shown("head")), result.shares(result.shown("resid"))
    head_exact = ~np.isnan(result.head_exact)
    resid_exact = ~np.isnan(result.resid_exact)
    floor = result.floor / abs(result.total)
    finite = [abs(v) for v in np.concatenate([heads.ravel(), resid.ravel()]) if math.isfinite(v)]
    scale = max(finite, default=0.0)
    scale = scale if scale > floor else 0.0
    out = []
    if note:
        out.append(f'<p class="patch-note">{note}</p>')
    out.append('<p class="patch-summary">' + t(
        "patch.summary", "Logit difference (right − wrong answer) at the last position: clean "
        "<b>{clean:+.3f}</b>, corrupted <b>{corrupted:+.3f}</b>. Each cell: the <b>share of the "
        "clean result recovered</b> when that part is taken from the clean run into the "
        "corrupted one (0: the corrupted run, 1: the clean run). ≈ estimated (attribution "
        "patching, one backward pass, {seconds:.2f} s), plain: exact ({exact} of {cells} "
        "cells).", clean=result.clean_diff, corrupted=result.corrupted_diff,
        seconds=result.seconds, exact=result.n_exact, cells=len(result.cells())) + "</p>")
    if result.nonlinear:
        out.append('<p class="patch-nonlinear"><b>' + t(
            "patch.nonlinear", "The first-order estimate of patching the whole input misses "
            "the real change by {miss:.0%} (a saturated attention or a large change): every "
            "cell is computed exactly.", miss=result.miss) + "</b></p>")
    key = t("patch.key", "{towards} towards the clean answer · {away} away from it · one "
            "colour scale for both maps: {swatches} · white: below the noise floor "
            "{floor} (float rounding) · <b>click a cell</b> to make that patch model B",
            towards=f'<span class="patch-swatch" style="background:{hex_of(HURT)}"></span>',
            away=f'<span class="patch-swatch" style="background:{hex_of(HELP)}"></span>',
            floor=f"{floor:.1e}",
            swatches=_swatches(scale, floor)) if scale > 0 else t(
        "patch.flat", "Every change is below the noise floor: nothing is coloured.")
    out.append(f'<p class="patch-scale">{key}</p>')
    click = t("patch.click", "click: this patch as model B")

    def cell(value, exact, spec, title):
        if not math.isfinite(value):
            return f'<td style="background:{BLANK}">…</td>'
        marked = ["estimated"] if not exact else []
        if spec == current:
            marked.append("patch-current")
        classes = f' class="{" ".join(marked)}"' if marked else ""
        shown = ("" if exact else "≈") + _share_text(value)
        return (f'<td data-patch="{html.escape(spec)}"{classes} tabindex="0" '
                f'title="{html.escape(title)} · {shown} · {click}" style="background:'
                f'{colour(value, scale, floor)};color:{ink(value, scale, floor)}">{shown}</td>')

    rows = [f"<tr><th>{t('knock.block', 'block')}</th>" + "".join(
        f"<th>{t('knock.head', 'head {h}', h=h)}</th>" for h in range(heads.shape[1])) + "</tr>"]
    for layer, label in enumerate(result.layer_labels):
        rows.append(f"<tr><th>{label}</th>" + "".join(
            cell(heads[layer, h], head_exact[layer, h],
                 str(result.intervention(("head", layer, h))), f"{label}.att head {h}")
            for h in range(heads.shape[1])) + "</tr>")
    caption = t("patch.heads_caption", "Each head's output (at every position) taken from the "
                                       "clean run")
    out.append(f'<table class="patch-heads"><caption>{caption}</caption>{"".join(rows)}</table>')
    clean, corrupted = _pieces(result.pair.clean), _pieces(result.pair.corrupted)
    head = []
    for p, (a, b) in enumerate(zip(clean, corrupted)):
        text = html.escape(a if a == b else f"{a}→{b}")
        head.append(f'<th{" class=changed" if a != b else ""} title="{p}">{text}</th>')
    rows = [f"<tr><th>{t('patch.entering', 'stream entering')}</th>{''.join(head)}</tr>"]
    for layer, label in enumerate(result.layer_labels):
        rows.append(f"<tr><th>{label}</th>" + "".join(
            cell(resid[layer, p], resid_exact[layer, p],
                 str(result.intervention(("resid", layer, p))), f"{label} · {p}")
            for p in range(resid.shape[1])) + "</tr>")
    caption = t("patch.resid_caption", "The residual stream entering each block, one position "
                                       "at a time, taken from the clean run (orange headings: "
                                       "the tokens that differ, clean→corrupted)")
    out.append(f'<table class="patch-resid"><caption>{caption}</caption>{"".join(rows)}</table>')
    agreement = result.agreement()
    if agreement is not None and result.n_exact == len(result.cells()):
        out.append('<p class="patch-agreement">' + t(
            "patch.agreement", "Every cell exact. The estimate against it over the {n} cells "
            "that differ between the runs: rank correlation (Spearman) {rho:+.3f}.",
            n=agreement.cells, rho=agreement.spearman) + "</p>")
    return "".join(out)


def attribution_html(found) -> str:
    """The direct logit attribution (``DirectAttribution``): a layers x (heads, ff) table,
    the embeddings and biases, and the check that they add up to the model's own logit
    difference."""
    if found is None:
        return ""
    values = np.concatenate([found.heads, found.ff[:, None]], axis=1)
    scale = float(np.abs(values).max()) or 1.0
    floor = 0.0
    rows = [f"<tr><th>{t('knock.block', 'block')}</th>" + "".join(
        f"<th>{t('knock.head', 'head {h}', h=h)}</th>" for h in range(found.heads.shape[1]))
        + "<th>ff</th></tr>"]
    for layer in range(values.shape[0]):
        rows.append(f"<tr><th>trf_blocks[{layer}]</th>" + "".join(
            f'<td style="background:{colour(v, scale, floor)};color:{ink(v, scale, floor)}">'
            f"{v:+.2f}</td>" for v in values[layer]) + "</tr>")
    title = t("patch.dla_title", "Direct logit attribution on the clean prompt: what each part "
              "writes into the residual stream, read by the final LayerNorm and the output "
              "head as (right − wrong answer) logits")
    sums = t("patch.dla_sum", "Token embedding {tok:+.3f} · position embedding {pos:+.3f} · "
             "biases (out_proj, final norm shift) {biases:+.3f} · all parts together "
             "<b>{total:+.4f}</b> = the model's own logit difference <b>{model:+.4f}</b>. "
             "The final LayerNorm's scale is the run's: its division by the stream's own "
             "standard deviation at the last position, σ = {scale:.3f}, is kept fixed, so that "
             "the norm is a linear map and the parts add up.", tok=found.tok_emb,
             pos=found.pos_emb, biases=found.biases, total=found.total, model=found.model_diff,
             scale=found.final_scale)
    return (f'<p class="patch-dla-title"><b>{title}</b></p>'
            f'<table class="patch-dla">{"".join(rows)}</table><p class="patch-dla-sum">{sums}</p>')
