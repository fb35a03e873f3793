"""How every figure looks: fonts, colours, colour scales and the one lean layout (``finish``).

Every figure goes through ``finish``: no plotly template, our own fonts, margins, grid and an
explicit height, so that figures stay small on the wire and readable on a projector. In lecture
mode (``prefs``: the page's toggle) ``finish`` also makes the type larger, the lines thicker and
the text, axes and grid darker, for every figure alike. ``gr.Plot``
draws them with plotly.js 3.3.1, so colours are ``#rrggbb`` only and the traces are Heatmap, Bar
and Scatter. Arrays go in as float32 numpy (sent base64-encoded).
"""
from __future__ import annotations

import re
import unicodedata

import numpy as np
import plotly.graph_objects as go

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


def _size(px: float) -> int:
    return round(px * LECTURE_TYPE) if current().lecture else round(px)


_PIECES = re.compile(r"\s+|[\u2e80-\u9fff\uf900-\ufaff\uff00-\uffef]|"
                     r"[^\s\u2e80-\u9fff\uf900-\ufaff\uff00-\uffef]+")


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


def title_layout(title: str, notes=(), wrap: int = 68) -> tuple[dict, int]:
    """Title dict (left-aligned, anchored to the top of the figure) with the notes as a
    smaller subtitle (lines of at most ``wrap`` characters), and the top margin it needs."""
    if current().lecture:
        wrap = int(wrap / LECTURE_TYPE)
    lines = [line for n in notes if n for line in _wrap(n, wrap).split("<br>")]
    title_dict = dict(text=f"<b>{title}</b>", x=0, xref="container", xanchor="left", y=1,
                      yref="container", yanchor="top", pad=dict(l=14, t=12),
                      font=dict(size=_size(TITLE_SIZE)))
    if lines:
        title_dict["subtitle"] = dict(text="<br>".join(lines), font=dict(size=_size(NOTE_SIZE)))
    # measured in plotly.js 3.3.1: the title ends at ~34 px, each note line adds ~22 px
    return title_dict, _size(52) + (_size(32) + _size(22) * len(lines) if lines else 0)


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
           legend: bool = False, margin=None, axes=True, wrap: int = 68) -> go.Figure:
    """Apply the shared lean layout: no template, our font, white background, light grid,
    explicit height, title (with notes) that fits, axis titles and readable ticks. ``wrap``:
    the longest note line; a figure as wide as the page takes longer lines.

    The layout is put together as a plain dict and set once: plotly validates each property
    it is given, and setting them one by one costs tens of milliseconds a figure."""
    title_dict, top = title_layout(title, notes, wrap)
    lecture = current().lecture
    if lecture:
        _lecture_traces(fig)
        height = min(height, max(LECTURE_MAX_HEIGHT, top + 220))
    layout = fig.layout.to_plotly_json()
    _merge(layout, dict(
        height=int(height), title=title_dict, margin={**dict(l=80, r=30, t=top, b=40), **(margin or {})},
        font=dict(family=FONT_FAMILY, size=_size(FONT_SIZE),
                  color=LECTURE_INK if lecture else TEXT_COLOR),
        paper_bgcolor="#ffffff", plot_bgcolor=layout.get("plot_bgcolor") or "#ffffff",
        hoverlabel=dict(font=dict(size=_size(FONT_SIZE))),
        # plotly shrinks bar labels that do not fit (to ~9 px): keep them readable instead
        uniformtext=dict(minsize=_size(TICK_SIZE), mode="show"),
        showlegend=legend))
    layout["template"] = "none"
    if legend:
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
    fig.layout = layout
    return fig


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
