"""Text on figures and tables: counts, shares, token pieces made visible, token axes."""
from __future__ import annotations

import html
import math

MAX_TOKEN_COLUMNS = 128   # token heatmap, attention: the last 128 tokens
MAX_TICK_LABELS = 40      # beyond this many tokens an axis labels every n-th
TOKEN_CHARS = 12          # longest token text on an axis before it is shortened


def human_count(n: int) -> str:
    """38_597_376 -> '38.6 M' (three significant digits; K, M, B)."""
    n = int(n)
    for div, unit in ((1e9, "B"), (1e6, "M"), (1e3, "K")):
        value = float(f"{n / div:.3g}")          # 999_999 -> 1.00 M, not 1000 K
        if abs(value) >= 1:
            digits = 2 if abs(value) < 10 else 1 if abs(value) < 100 else 0
            return f"{value:.{digits}f} {unit}"
    return str(n)


def visible_token(piece: str, max_chars: int = TOKEN_CHARS) -> str:
    """A token's text made visible: spaces as '␣', newlines as '↵', tabs as '⇥', long pieces
    shortened with '…'."""
    shown = (piece.replace(" ", "␣").replace("\n", "↵").replace("\r", "␍")
             .replace("\t", "⇥"))
    if not shown:
        shown = "∅"
    if len(shown) > max_chars:
        shown = shown[:max_chars - 1] + "…"
    return shown


def token_label(piece: str, max_chars: int = TOKEN_CHARS) -> str:
    """``visible_token``, safe for plotly's HTML-like labels and for HTML: '<' '&' escaped."""
    return html.escape(visible_token(piece, max_chars), quote=False)


def token_axis(tokens: list[str], start: int, max_chars: int = TOKEN_CHARS):
    """Category values '#pos token' (unique per position, shown in hovers) and the tick
    values/texts: every token up to MAX_TICK_LABELS tokens; beyond that every n-th, at most
    half as many, so that the labels stay apart on a laptop screen too."""
    labels = [token_label(t, max_chars) for t in tokens]
    cats = [f"#{start + i} {lab}" for i, lab in enumerate(labels)]
    most = MAX_TICK_LABELS if len(cats) <= MAX_TICK_LABELS else MAX_TICK_LABELS // 2
    step = max(1, math.ceil(len(cats) / most))
    # label the last token (the one being predicted from) and every step-th before it
    idx = list(range(len(cats) - 1, -1, -step))[::-1]
    return cats, [cats[i] for i in idx], [labels[i] for i in idx]


def percent(share: float) -> str:
    return "< 0.1 %" if 0 < share < 0.001 else f"{100 * share:.1f} %"


def layers_text(layers) -> str:
    layers = [int(i) for i in layers]
    if len(layers) > 6:
        return f"{len(layers)} layers from {layers[0]} to {layers[-1]}"
    return ("layer " if len(layers) == 1 else "layers ") + ", ".join(map(str, layers))
