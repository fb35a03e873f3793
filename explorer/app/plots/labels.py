"""Text on figures and tables: counts, shares, token pieces made visible, token axes."""
from __future__ import annotations

import codecs
import html
import math
import re

from ...book.probe_points import POINT_LABELS
from ...book.tokenizer import get_tokenizer
from ..i18n import say, t

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


_BYTE = re.compile(r"(?:<0x[0-9A-F]{2}>)+")


def readable_tokens(token_ids, texts) -> list[str]:
    """Each token's text for an axis. GPT-2 splits a Chinese character (or an emoji) into
    byte tokens, whose text shows each byte as <0xE6>: here a token's bytes are shown shorter
    ("E6 88"), and the token that completes the character shows it too ("91=我")."""
    raw = get_tokenizer().encoding.decode_single_token_bytes
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    out = []
    for tid, text in zip(token_ids, texts):
        piece = raw(tid) if 0 <= tid < get_tokenizer().n_vocab else b""
        waiting = bool(decoder.getstate()[0])       # bytes of a character begun before
        done = decoder.decode(piece)                # the characters this token completes
        shown = _BYTE.sub(_hex, text) if "<0x" in text else text
        if waiting and done.strip():
            shown = f"{shown}={done.strip()[0]}"
        out.append(shown)
    return out


def _hex(match) -> str:
    """<0xE6><0x88> as "E6 88", apart from the text before it."""
    text = " ".join(match.group(0)[3:-1].split("><0x"))
    before = match.string[match.start() - 1] if match.start() else " "
    return text if before == " " else " " + text


def point_label(point: str) -> str:
    """A probe point's description ("norm1 input (before LayerNorm)"), in the page's language."""
    return say(POINT_LABELS[point])


def token_axis(tokens: list[str], start: int, max_chars: int = TOKEN_CHARS, ids=None,
               most: int | None = None, tick_chars: int | None = None):
    """Category values '#pos token' (unique per position, shown in hovers) and the tick
    values/texts: every token up to MAX_TICK_LABELS tokens; beyond that every n-th, at most
    half as many, so that the labels stay apart on a laptop screen too (``most``: at most
    this many, ``tick_chars``: tick texts this short). With the token ``ids``, byte tokens
    read as ``readable_tokens`` shows them."""
    if ids is not None:
        tokens = readable_tokens(ids, tokens)
    labels = [token_label(t, max_chars) for t in tokens]
    cats = [f"#{start + i} {lab}" for i, lab in enumerate(labels)]
    if most is None:
        most = MAX_TICK_LABELS if len(cats) <= MAX_TICK_LABELS else MAX_TICK_LABELS // 2
    step = max(1, math.ceil(len(cats) / most))
    # label the last token (the one being predicted from) and every step-th before it
    idx = list(range(len(cats) - 1, -1, -step))[::-1]
    ticks = labels if tick_chars is None else [token_label(t, tick_chars) for t in tokens]
    return cats, [cats[i] for i in idx], [ticks[i] for i in idx]


def percent(share: float) -> str:
    return "< 0.1 %" if 0 < share < 0.001 else f"{100 * share:.1f} %"


def layers_text(layers) -> str:
    layers = [int(i) for i in layers]
    if len(layers) > 6:
        return t("labels.layers_from", "{n} layers from {first} to {last}", n=len(layers),
                 first=layers[0], last=layers[-1])
    if len(layers) == 1:
        return t("labels.layer", "layer {layers}", layers=layers[0])
    return t("labels.layers", "layers {layers}", layers=", ".join(map(str, layers)))
