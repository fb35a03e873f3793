"""How every figure looks: fonts, colours, colour scales and the one lean layout (``finish``).

Every figure goes through ``finish``: no plotly template, our own fonts, margins, grid and an
explicit height, so that figures stay small on the wire and readable on a projector. In lecture
mode (``prefs``: the page's toggle) ``finish`` also makes the type larger, the lines thicker and
the text, axes and grid darker, for every figure alike. ``gr.Plot``
draws them with plotly.js 3.3.1, so colours are ``#rrggbb`` only and the traces are Heatmap, Bar
and Scatter. Arrays go in as float32 numpy (sent base64-encoded).
"""
from __future__ import annotations

import math
import re
import unicodedata

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..prefs import current

FONT_FAMILY = "Arial, Helvetica, sans-serif"
# Read from the back of a lecture room (a projector at 1280x720): nothing under 16 px.
FONT_SIZE = 18          # axis titles, legend, hover
TICK_SIZE = 16          # tick labels: the smallest text on any figure
TITLE_SIZE = 22
NOTE_SIZE = 17          # the smaller lines under a title
TEXT_COLOR = "#222222"
GRID_COLOR = "#e2e2e2"
AXIS_COLOR = "#555555"
MASK_COLOR = "#dcdcdc"  # attention cells a query may not look at (future tokens)

# Okabe-Ito colours: distinguishable with colour-blindness and on a washed-out projector.
BLUE, ORANGE, GREEN, VERMILLION, PURPLE, SKY = (
    "#0072b2", "#e69f00", "#009e73", "#d55e00", "#cc79a7", "#56b4e9")
PALETTE = (BLUE, VERMILLION, GREEN, ORANGE, PURPLE, SKY)
GREY = "#8c8c8c"
LIGHT_BAR = "#c6d4e1"
MODEL_COLORS = (BLUE, VERMILLION)   # model A, model B: in every figure of two models

VIRIDIS = ["#440154", "#482878", "#3e4989", "#31688e", "#26828e", "#1f9e89", "#35b779",
           "#6ece58", "#b5de2b", "#fde725"]
BLUES = ["#f7fbff", "#deebf7", "#c6dbef", "#9ecae1", "#6baed6", "#4292c6", "#2171b5",
         "#08519c", "#08306b"]
DIVERGING = ["#2166ac", "#67a9cf", "#d1e5f0", "#f7f7f7", "#fddbc7", "#ef8a62", "#b2182b"]


def _scale(colors: list[str]) -> list[list]:
    """A plotly colorscale [[0, c0], ..., [1, cN]] from evenly spaced '#rrggbb' colours."""
    n = len(colors) - 1
    return [[round(i / n, 4), c] for i, c in enumerate(colors)]


SEQUENTIAL_SCALE = _scale(VIRIDIS)
LIGHT_SCALE = _scale(BLUES)
DIVERGING_SCALE = _scale(DIVERGING)


# Lecture mode (read from the back of a lecture hall): type this much larger, lines thicker,
# and darker ink; a figure no taller than this, so that it fits under a tab's controls at 720 px.
LECTURE_TYPE = 1.25
LECTURE_LINES = 1.6
LECTURE_INK = "#000000"
LECTURE_GRID = "#b8b8b8"
LECTURE_MAX_HEIGHT = 400
PLOT_MIN = 120          # lecture mode: the plotting area never gets less than this (px) ...
HEATMAP_MIN = 250       # ... and a heatmap of tokens not less than this


def _size(px: float) -> int:
    return round(px * LECTURE_TYPE) if current().lecture else round(px)


scaled = _size   # a type size as drawn: larger in lecture mode


# The pieces a line may break between: spaces, a Chinese character (or full-width sign) each,
# and runs of other letters. Punctuation that opens stays with what follows it and
# punctuation that closes with what precedes it: a line never starts with "）" or "，" nor
# ends with "（" (issue 47, item 7: a wrapped axis title left a lone "）").
_OPENS = "（「『【《“‘"
_CLOSES = "）」』】》”’，。、：；！？)"
_PIECES = re.compile(rf"\s+|[{_OPENS}]*(?:[\u2e80-\u9fff\uf900-\ufaff\uff00-\uffef]|"
                     rf"[^\s\u2e80-\u9fff\uf900-\ufaff\uff00-\uffef{_OPENS}{_CLOSES}]+)"
                     rf"[{_CLOSES}]*|[{_OPENS}{_CLOSES}]")


def _width(piece: str) -> int:
    """Columns a text takes: a Chinese character (or full-width sign) two, others one."""
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in piece)


def _wrap(text: str, width: int = 68) -> str:
    """Break a long note into lines of at most ``width`` columns (a Chinese character takes
    two), at spaces or between Chinese characters, so it is not clipped on a narrow screen."""
    lines, line = [], ""
    for piece in _PIECES.findall(text):
        if piece.isspace():
            line += " " if line else ""
            continue
        if line and _width(line + piece) > width:
            lines.append(line.rstrip())
            line = ""
        line += piece
    if line.strip():
        lines.append(line.rstrip())
    return "<br>".join(lines) or text


def title_layout(title: str, notes=(), wrap: int = 68, lecture=None) -> tuple[dict, int]:
    """Title dict (left-aligned, anchored to the top of the figure) with the notes as a
    smaller subtitle (lines of at most ``wrap`` characters), and the top margin it needs.
    ``lecture``: in lecture mode's type or not (None: as the page is). Lecture mode's title
    is broken into lines too where it would be wider than the figure (its larger bold
    letters: ~0.64 of as many as the notes')."""
    lecture = current().lecture if lecture is None else lecture
    scale = LECTURE_TYPE if lecture else 1

    def size(px):
        return round(px * scale)

    wrap = int(wrap / scale)
    lines = [line for n in notes if n for line in _wrap(n, wrap).split("<br>")]
    title_lines = _wrap(title, int(wrap * 0.64)).split("<br>") if lecture else [title]
    # measured in plotly.js 3.3.1: a title of more lines starts ~0.7 of its type size higher
    # than one line does (above the figure, cut off): it is padded down that much
    lower = round(0.75 * size(TITLE_SIZE)) if len(title_lines) > 1 else 0
    title_dict = dict(text="<br>".join(f"<b>{line}</b>" for line in title_lines), x=0,
                      xref="container", xanchor="left", y=1, yref="container", yanchor="top",
                      pad=dict(l=14, t=12 + lower), font=dict(size=size(TITLE_SIZE)))
    if lines:
        title_dict["subtitle"] = dict(text="<br>".join(lines), font=dict(size=size(NOTE_SIZE)))
    # measured too: the title ends at ~34 px (each more line of it ~30 px further), each
    # note line adds ~22 px. Lecture mode packs them tighter (what is below the notes is the
    # plot's: a projector has 720 px), just clear of them.
    more = size(30) * (len(title_lines) - 1)
    if lecture:
        return title_dict, size(44) + more + (size(18) + size(19.5) * len(lines) if lines else 0)
    return title_dict, size(52) + more + (size(32) + size(22) * len(lines) if lines else 0)


# Axis look; a figure's own axis settings win over these.
AXIS_DEFAULTS = dict(showgrid=True, gridcolor=GRID_COLOR, zeroline=False, showline=True,
                     linecolor=AXIS_COLOR, ticks="outside", tickcolor=AXIS_COLOR,
                     automargin=True)
_NUMBERED_AXIS = re.compile(r"[xy]axis\d+$")


def _merge(into: dict, changes: dict) -> dict:
    """``changes`` merged into ``into``, dicts key by key (as plotly's ``update`` does)."""
    for key, value in changes.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        else:
            into[key] = value
    return into


def _axis_defaults(axis: dict) -> None:
    for key, value in AXIS_DEFAULTS.items():
        axis.setdefault(key, value)
    axis.setdefault("tickfont", {}).setdefault("size", _size(TICK_SIZE))
    axis.setdefault("title", {}).setdefault("font", {}).setdefault("size", _size(FONT_SIZE))
    if current().lecture:
        _merge(axis, dict(linecolor=LECTURE_INK, tickcolor=LECTURE_INK, linewidth=2,
                          gridcolor=LECTURE_GRID, tickfont=dict(color=LECTURE_INK)))
    axis["title"].setdefault("standoff", 12)   # with automargin: never over the tick labels


def finish(fig: go.Figure, title: str, height: int, *, notes=(), x_title=None, y_title=None,
           legend=False, margin=None, axes=True, wrap: int = 68,
           plot_min: int = PLOT_MIN, max_height: int = LECTURE_MAX_HEIGHT) -> go.Figure:
    """Apply the shared lean layout: no template, our font, white background, light grid,
    explicit height, title (with notes) that fits, axis titles and readable ticks. ``wrap``:
    the longest note line; a figure as wide as the page takes longer lines. ``legend``: True
    (below the x axis) or "right" (outside the plot, on its right). ``plot_min``: in lecture
    mode the height is capped (a projector's 720 px: ``max_height``), but never below what
    leaves the plotting area this many px under the title, the notes and the x axis.

    The layout is put together as a plain dict and set once: plotly validates each property
    it is given, and setting them one by one costs tens of milliseconds a figure."""
    title_dict, top = title_layout(title, notes, wrap)
    lecture = current().lecture
    if lecture:
        _lecture_traces(fig)
    layout = fig.layout.to_plotly_json()
    _merge(layout, dict(
        height=int(height), title=title_dict,
        margin={**dict(l=80, r=30, t=top, b=40), **(margin or {})},
        font=dict(family=FONT_FAMILY, size=_size(FONT_SIZE),
                  color=LECTURE_INK if lecture else TEXT_COLOR),
        paper_bgcolor="#ffffff", plot_bgcolor=layout.get("plot_bgcolor") or "#ffffff",
        hoverlabel=dict(font=dict(size=_size(FONT_SIZE))),
        # plotly shrinks bar labels that do not fit (to ~9 px): keep them readable instead
        uniformtext=dict(minsize=_size(TICK_SIZE), mode="show"),
        showlegend=bool(legend)))
    layout["template"] = "none"
    if legend == "right":
        # outside the plotting area (paper coordinates): plotly widens the right margin for it
        _merge(layout, dict(legend=dict(x=1.02, xanchor="left", y=1, yanchor="top",
                                        font=dict(size=_size(FONT_SIZE)))))
    elif legend:
        # below the x axis title; plotly pushes the bottom margin to fit it
        _merge(layout, dict(legend=dict(orientation="h", x=0, xanchor="left", y=0,
                                        yref="container", yanchor="bottom",
                                        font=dict(size=_size(FONT_SIZE)))))
    if axes:
        names = [name for prefix in "xy" for name in
                 [f"{prefix}axis"] + [k for k in layout if k[0] == prefix and
                                      _NUMBERED_AXIS.match(k)]]
        for name in names:
            _axis_defaults(layout.setdefault(name, {}))
        if x_title:
            layout["xaxis"]["title"]["text"] = x_title
        if y_title:
            layout["yaxis"]["title"]["text"] = y_title
    if lecture:
        # The larger type's title and notes take room of their own, not the plot's; and
        # the cap leaves the plot ``plot_min`` under them and the x axis (and a legend
        # below): plotly.js throws ("Something went wrong with axis scaling") when nothing
        # is left.
        height += top - title_layout(title, notes, wrap, lecture=False)[1]
        if any(a.yref == "paper" and a.yanchor == "bottom" and (a.y or 0) >= 0.99
               for a in fig.layout.annotations):
            # the top row's panel titles sit just above the plot, under the notes
            layout["margin"]["t"] += _size(FONT_SIZE) + 8
        bottom = _bottom_room(layout, fig.data)
        room = layout["margin"]["t"] + bottom + plot_min
        layout["height"] = int(min(height, max(max_height, room)))
        _fit_y_titles(layout, layout["height"] - layout["margin"]["t"] - bottom)
    fig.layout = layout
    return fig


def _fit_y_titles(layout: dict, plot_px: float) -> None:
    """Lecture mode: a y axis title longer than its axis (~0.55 of the type size a letter)
    is broken into lines, so that it stays beside the axis and out of the title."""
    for name, axis in layout.items():
        title = axis.get("title", {}) if name[0] == "y" and _NUMBERED_AXIS.match(name) \
            or name == "yaxis" else {}
        if not title.get("text"):
            continue
        low, high = axis.get("domain", (0, 1))
        size = title.get("font", {}).get("size", _size(FONT_SIZE))
        letters = max(8, int(plot_px * (high - low) / (0.55 * size)))
        title["text"] = _wrap(title["text"], letters)


def _bottom_room(layout: dict, data=()) -> int:
    """About how many px plotly.js (automargin) puts under the plotting area: the lowest x
    axis's tick labels and title, and a legend below (its entries in rows of a figure half
    the page wide, ~560 px). Token labels on a turned axis take their length; the widths are
    Arial's, ~0.6 of the font size a letter."""
    room = int(layout.get("margin", {}).get("b", 40)) if not layout.get("xaxis") else 0
    for name, axis in layout.items():
        if not (name[0] == "x" and _NUMBERED_AXIS.match(name) or name == "xaxis"):
            continue
        if axis.get("visible") is False or axis.get("showticklabels") is False:
            ticks = 0
        else:
            size = axis.get("tickfont", {}).get("size", _size(TICK_SIZE))
            texts = [str(x) for x in axis.get("ticktext") or []]
            longest = max((_width(re.sub(r"&\w+;", "x", x)) for x in texts), default=3)
            angle = axis.get("tickangle")
            turned = isinstance(angle, (int, float)) and abs(angle) >= 60
            lines = 1 + max((x.count("<br>") for x in texts), default=0)
            ticks = (0.6 * size * longest if turned else 1.3 * size * lines) + 8
        title = axis.get("title", {})
        title_px = (title.get("font", {}).get("size", _size(FONT_SIZE)) * 1.3
                    + title.get("standoff", 12)) if title.get("text") else 0
        room = max(room, math.ceil(ticks + title_px))
    legend = layout.get("legend", {})
    if layout.get("showlegend") and legend.get("orientation") == "h":
        size = legend.get("font", {}).get("size", _size(FONT_SIZE))
        widths = [40 + 0.6 * size * _width(str(trace.name)) for trace in data
                  if trace.name and trace.showlegend is not False]
        rows, line = (1, 0) if widths else (0, 0)
        for width in widths:
            if line and line + width > 560:
                rows, line = rows + 1, 0
            line += width
        room += math.ceil(rows * 1.6 * size) + 10
    return max(room, 40)


def _lecture_traces(fig: go.Figure) -> None:
    """Lecture mode: thicker lines, larger markers and larger text in the traces, the
    annotations (subplot titles, messages) and the colour bars."""
    for trace in fig.data:
        line = getattr(trace, "line", None)
        if line is not None and getattr(line, "width", None) is not None and line.width > 0:
            line.width = line.width * LECTURE_LINES
        elif line is not None and trace.type == "scatter":
            line.width = 2 * LECTURE_LINES
        marker = getattr(trace, "marker", None)
        if marker is not None and isinstance(getattr(marker, "size", None), (int, float)):
            marker.size = marker.size * LECTURE_TYPE
        textfont = getattr(trace, "textfont", None)
        if textfont is not None and isinstance(textfont.size, (int, float)):
            textfont.size = _size(textfont.size)
        colorbar = getattr(trace, "colorbar", None)
        if colorbar is not None:
            colorbar.tickfont.size = _size(colorbar.tickfont.size or TICK_SIZE)
            colorbar.title.font.size = _size(colorbar.title.font.size or FONT_SIZE)
    for annotation in fig.layout.annotations:
        annotation.font.size = _size(annotation.font.size or FONT_SIZE)
        if annotation.font.color in (None, TEXT_COLOR):
            annotation.font.color = LECTURE_INK
    for name in ("coloraxis", "coloraxis2"):
        axis = fig.layout[name] if name in fig.layout else None
        if axis is not None and axis.colorbar is not None:
            axis.colorbar.tickfont.size = _size(axis.colorbar.tickfont.size or TICK_SIZE)
            axis.colorbar.title.font.size = _size(axis.colorbar.title.font.size or FONT_SIZE)


def clean(a) -> tuple[np.ndarray, bool]:
    """float32 copy with inf/NaN replaced by NaN (plotly draws NaN as a gap); and whether any
    value was not finite."""
    a = np.asarray(a, dtype=np.float64)
    bad = ~np.isfinite(a)
    out = a.astype(np.float32)   # values beyond float32's range become inf
    bad |= ~np.isfinite(out)
    out[bad] = np.nan
    return out, bool(bad.any())


def empty_figure(title: str, message: str, height: int = 320, notes=()) -> go.Figure:
    """A figure with a message instead of data (a hint, or why there is nothing to show).
    The message is broken into short lines: it must fit a figure half the page wide."""
    fig = go.Figure()
    width = 34 if current().lecture else 44
    message = "<br>".join(_wrap(line, width) for line in message.split("<br>"))
    fig.add_annotation(text=message, x=0.5, y=0.5, xref="paper", yref="paper",
                       showarrow=False, font=dict(size=FONT_SIZE + 2, color=GREY))
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    return finish(fig, title, height, notes=notes, axes=False)


def lighter(color: str, amount: float = 0.78) -> str:
    """'#rrggbb' mixed with white (amount 0..1): an opaque light version of a colour."""
    rgb = [int(color[i:i + 2], 16) for i in (1, 3, 5)]
    return "#" + "".join(f"{round(c + (255 - c) * amount):02x}" for c in rgb)


def translucent(color: str, alpha: float = 0.16) -> str:
    """'#rrggbb' as 'rgba(r,g,b,a)' (plotly.js 3 reads the comma form): for bands of two
    models that must show through each other."""
    r, g, b = (int(color[i:i + 2], 16) for i in (1, 3, 5))
    return f"rgba({r},{g},{b},{alpha})"


# ---------------------------------------------------------------------------------------------
# One or two models: every figure takes a sequence (model A first) and loops over it.
def models(items, names=None, what: str = "traces") -> tuple[list, tuple[str, ...]]:
    """The one or two things a figure shows (traces, parameter counts, lenses, gradients),
    model A first, and their names for legends and panel titles ("A", "B" unless given)."""
    if not isinstance(items, (list, tuple)):
        raise TypeError(f"Pass a list of one or two {what} (model A first), e.g. [trace] or "
                        f"[trace_a, trace_b]; got {type(items).__name__}.")
    items = list(items)
    if not 1 <= len(items) <= len(MODEL_COLORS):
        raise ValueError(f"A figure shows one or two models; got {len(items)} {what}.")
    names = tuple(names) if names is not None else ("A", "B")[:len(items)]
    if len(names) != len(items):
        raise ValueError(f"{len(items)} {what} but {len(names)} names.")
    return items, names


def panels(cols: int = 1, rows: int = 1, **subplots) -> go.Figure:
    """A plain figure for one panel, or a grid of panels (plotly subplots) for more."""
    if rows * cols == 1:
        return go.Figure()
    return make_subplots(rows=rows, cols=cols, **subplots)


def add(fig: go.Figure, trace, row: int = 1, col: int = 1) -> None:
    """Add ``trace`` to the panel at (row, col); a figure of one panel has no grid."""
    if fig._has_subplots():
        fig.add_trace(trace, row=row, col=col)
    else:
        fig.add_trace(trace)


def axes(fig: go.Figure, xy: str, col: int | None = None, row: int | None = None,
         **props) -> None:
    """``fig.update_xaxes`` (xy "x") or ``update_yaxes`` ("y"), of one panel's axis where the
    figure has panels (a figure of one panel has just the one)."""
    where = {k: v for k, v in (("row", row), ("col", col)) if v is not None}
    update = fig.update_xaxes if xy == "x" else fig.update_yaxes
    update(**props, **(where if fig._has_subplots() else {}))
