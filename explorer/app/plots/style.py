"""How every figure looks: fonts, colours, colour scales, and two plotly templates, the normal
one and lecture mode's (``prefs``: larger type, thicker lines, darker ink). ``finish`` gives a
figure its template, title and height. plotly.js 3.3.1 draws them: colours are ``#rrggbb``."""
from __future__ import annotations

import math
import re
import unicodedata

import numpy as np
import plotly.graph_objects as go
import plotly.io as pio
from plotly.subplots import make_subplots

from ..i18n import t
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
SCREEN_HEIGHT = 700     # a figure the page scrolls into view whole (720 px less its frame)


def _template(lecture: bool) -> go.layout.Template:
    def size(px):
        return round(px * LECTURE_TYPE) if lecture else px
    ink = LECTURE_INK if lecture else TEXT_COLOR
    axis = dict(showgrid=True, gridcolor=LECTURE_GRID if lecture else GRID_COLOR, zeroline=False,
                showline=True, linecolor=ink if lecture else AXIS_COLOR, ticks="outside",
                tickcolor=ink if lecture else AXIS_COLOR, automargin=True,
                tickfont=dict(size=size(TICK_SIZE), color=LECTURE_INK if lecture else None),
                # with automargin: the title never over the tick labels
                title=dict(font=dict(size=size(FONT_SIZE)), standoff=12),
                **(dict(linewidth=2) if lecture else {}))
    colorbar = dict(tickfont=dict(size=size(TICK_SIZE)), title=dict(font=dict(size=size(FONT_SIZE))))
    return go.layout.Template(
        layout=dict(
            font=dict(family=FONT_FAMILY, size=size(FONT_SIZE), color=ink),
            title=dict(x=0, xref="container", xanchor="left", y=1, yref="container",
                       yanchor="top", pad=dict(l=14, t=12), font=dict(size=size(TITLE_SIZE)),
                       subtitle=dict(font=dict(size=size(NOTE_SIZE)))),
            margin=dict(l=80, r=30, b=40), paper_bgcolor="#ffffff", plot_bgcolor="#ffffff",
            hoverlabel=dict(font=dict(size=size(FONT_SIZE))), legend=dict(font=dict(size=size(FONT_SIZE))),
            # plotly shrinks bar labels that do not fit (to ~9 px): keep them readable instead
            uniformtext=dict(minsize=size(TICK_SIZE), mode="show"),
            xaxis=axis, yaxis=axis, coloraxis=dict(colorbar=colorbar),
            annotationdefaults=dict(font=dict(size=size(16), color=ink))),
        data=dict(heatmap=[go.Heatmap(colorbar=colorbar, textfont=dict(size=size(TICK_SIZE)))]))


TEMPLATES = {False: "explorer", True: "explorer_lecture"}
for _lecture, _name in TEMPLATES.items():
    pio.templates[_name] = _template(_lecture)


def scaled(px: float) -> int:
    """A type size as drawn: larger in lecture mode."""
    return round(px * LECTURE_TYPE) if current().lecture else round(px)


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
    two), at spaces or between Chinese characters: plotly.js never breaks a text itself."""
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
    """The title (bold, wrapped in lecture mode's larger type) with the notes as its subtitle
    (lines of at most ``wrap`` columns), and the top margin they take. plotly.js's own
    ``title.automargin`` would push the margin too, but inside a height chosen beforehand;
    lecture mode chooses the height from this margin."""
    lecture = current().lecture if lecture is None else lecture
    scale = LECTURE_TYPE if lecture else 1
    wrap = int(wrap / scale)
    lines = [line for n in notes if n for line in _wrap(n, wrap).split("<br>")]
    title_lines = _wrap(title, int(wrap * 0.64)).split("<br>") if lecture else [title]
    title_dict = dict(text="<br>".join(f"<b>{line}</b>" for line in title_lines))
    if len(title_lines) > 1:
        # measured in plotly.js 3.3.1: a title of more lines starts ~0.7 of its type size
        # higher than one line does (above the figure, cut off): it is padded down that much
        title_dict["pad"] = dict(t=12 + round(0.75 * round(TITLE_SIZE * scale)))
    if lines:
        title_dict["subtitle"] = dict(text="<br>".join(lines))
    # measured too: the title ends at ~34 px (each more line of it ~30 px further), each
    # note line adds ~22 px. Lecture mode packs them tighter (what is below the notes is the
    # plot's: a projector has 720 px), just clear of them.
    def size(px):
        return round(px * scale)
    more = size(30) * (len(title_lines) - 1)
    if lecture:
        return title_dict, size(44) + more + (size(18) + size(19.5) * len(lines) if lines else 0)
    return title_dict, size(52) + more + (size(32) + size(22) * len(lines) if lines else 0)


def _axes_of(layout: dict, xy: str):
    return [axis for name, axis in layout.items() if re.fullmatch(rf"{xy}axis\d*", name)]


def finish(fig: go.Figure, title: str, height: int, *, notes=(), x_title=None, y_title=None,
           legend=False, margin=None, wrap: int = 68, plot_min: int = PLOT_MIN,
           max_height: int = LECTURE_MAX_HEIGHT) -> go.Figure:
    """The template of the page's mode, the title with its notes (lines of at most ``wrap``
    columns), the axis titles and the height. ``legend``: True (below the x axis) or "right".
    In lecture mode the height is capped at ``max_height`` (a projector's 720 px), but leaves
    the plotting area at least ``plot_min`` px. The layout is set once, as a dict: plotly
    validates each property set, and one by one costs tens of milliseconds a figure."""
    title_dict, top = title_layout(title, notes, wrap)
    lecture = current().lecture
    if lecture:
        for trace in fig.data:        # a template gives defaults: it cannot scale a trace's own
            if trace.type == "scatter":
                trace.line.width = (trace.line.width or 2) * LECTURE_LINES
            if isinstance(getattr(getattr(trace, "marker", None), "size", None), (int, float)):
                trace.marker.size *= LECTURE_TYPE
    layout = fig.layout.to_plotly_json()
    layout.update(template=pio.templates[TEMPLATES[lecture]], height=int(height),
                  title=title_dict, margin={"t": top, **(margin or {})},
                  showlegend=bool(legend))
    if legend:
        # "right": outside the plotting area (paper coordinates), plotly widens the right
        # margin for it; else below the x axis title, plotly pushes the bottom margin
        layout["legend"] = {**layout.get("legend", {}), **(
            dict(x=1.02, xanchor="left", y=1, yanchor="top") if legend == "right" else
            dict(orientation="h", x=0, xanchor="left", y=0, yref="container", yanchor="bottom"))}
    for key, text in (("xaxis", x_title), ("yaxis", y_title)):
        if text:
            layout.setdefault(key, {}).setdefault("title", {})["text"] = text
    if lecture:
        # The larger type's title and notes take room of their own, not the plot's; and
        # the cap leaves the plot ``plot_min`` under them and the x axis (and a legend
        # below): plotly.js throws ("Something went wrong with axis scaling") when nothing
        # is left.
        height += top - title_layout(title, notes, wrap, lecture=False)[1]
        layout["margin"]["t"] += _panel_titles_px(fig)
        bottom = _bottom_room(layout, fig.data)
        room = layout["margin"]["t"] + bottom + plot_min
        layout["height"] = int(min(height, max(max_height, room)))
        plot_px = layout["height"] - layout["margin"]["t"] - bottom
        for axis in _axes_of(layout, "y"):
            # a y axis title longer than its axis (~0.55 of the type size a letter) is
            # broken into lines: beside the axis, out of the title
            title = axis.get("title", {})
            if title.get("text"):
                low, high = axis.get("domain", (0, 1))
                title["text"] = _wrap(title["text"],
                                      max(8, int(plot_px * (high - low) / (0.55 * scaled(FONT_SIZE)))))
    fig.layout = layout
    return fig


def _panel_titles_px(fig: go.Figure) -> int:
    """Lecture mode: the top row's panel titles sit just above the plot, under the notes."""
    on_top = any(a.yref == "paper" and a.yanchor == "bottom" and (a.y or 0) >= 0.99
                 for a in fig.layout.annotations)
    return scaled(FONT_SIZE) + 8 if on_top else 0


def lecture_chrome(fig: go.Figure, title: str, notes=(), wrap: int = 68) -> int:
    """Lecture mode: the px that ``finish`` gives a figure's title, notes and panel titles
    and what is under its plot; what a screen leaves the plot is SCREEN_HEIGHT less this."""
    top = title_layout(title, notes, wrap)[1] + _panel_titles_px(fig)
    return top + _bottom_room(fig.layout.to_plotly_json(), fig.data)


def _bottom_room(layout: dict, data=()) -> int:
    """About how many px plotly.js (automargin) puts under the plotting area: the lowest x
    axis's tick labels and title, and a legend below (its entries in rows of a figure half
    the page wide, ~560 px). Token labels on a turned axis take their length; the widths are
    Arial's, ~0.6 of the font size a letter."""
    room = 0 if layout.get("xaxis") else 40
    size = scaled(FONT_SIZE)
    for axis in _axes_of(layout, "x"):
        ticks = 0
        if axis.get("visible") is not False and axis.get("showticklabels") is not False:
            texts = [re.sub(r"&\w+;", "x", str(x)) for x in axis.get("ticktext") or []]
            longest = max(map(_width, texts), default=3)
            lines = 1 + max((x.count("<br>") for x in texts), default=0)
            turned = abs(axis.get("tickangle") or 0) >= 60
            ticks = scaled(TICK_SIZE) * (0.6 * longest if turned else 1.3 * lines) + 8
        title = 1.3 * size + 12 if axis.get("title", {}).get("text") else 0
        room = max(room, math.ceil(ticks + title))
    if layout.get("showlegend") and layout.get("legend", {}).get("orientation") == "h":
        rows, line = 0, 0
        for width in [40 + 0.6 * size * _width(str(trace.name)) for trace in data
                      if trace.name and trace.showlegend is not False]:
            if not rows or line + width > 560:
                rows, line = rows + 1, 0
            line += width
        room += math.ceil(rows * 1.6 * size) + 10
    return max(room, 40)


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
    """A figure with a message instead of data, in short lines (half the page wide)."""
    fig = go.Figure()
    width = 34 if current().lecture else 44
    message = "<br>".join(_wrap(line, width) for line in message.split("<br>"))
    fig.add_annotation(text=message, x=0.5, y=0.5, xref="paper", yref="paper",
                       showarrow=False, font=dict(size=scaled(FONT_SIZE + 2), color=GREY))
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    return finish(fig, title, height, notes=notes)


def lighter(color: str, amount: float = 0.78) -> str:
    """'#rrggbb' mixed with white (amount 0..1): an opaque light version of a colour."""
    rgb = [int(color[i:i + 2], 16) for i in (1, 3, 5)]
    return "#" + "".join(f"{round(c + (255 - c) * amount):02x}" for c in rgb)


def translucent(color: str, alpha: float = 0.16) -> str:
    """'#rrggbb' as 'rgba(r,g,b,a)' (plotly.js 3 reads the comma form): for bands of two
    models that must show through each other."""
    r, g, b = (int(color[i:i + 2], 16) for i in (1, 3, 5))
    return f"rgba({r},{g},{b},{alpha})"


def models(items, names=None) -> tuple[list, tuple[str, ...]]:
    """The one or two things a figure shows, model A first, and their names ("A", "B")."""
    items = list(items)
    return items, tuple(names) if names is not None else ("A", "B")[:len(items)]


def named(notes, name, alone) -> list[str]:
    """One model's notes; beside another model's, each says whose it is."""
    return list(notes) if alone else [t("plots.named", "{name}: {why}", name=name, why=n)
                                      for n in notes]


GAPS = ("plots.gaps", "inf/NaN values shown as gaps (grey)")   # a note, (id, text)
LAYER = ("plots.layer", "layer")                                 # an axis title


def both(title: str, alone: bool) -> str:
    """A figure's title: beside another model's, it says it shows both."""
    return title if alone else t("plots.a_and_b", "{title}: A and B", title=title)


def panels(cols: int = 1, rows: int = 1, **subplots) -> go.Figure:
    """A grid of panels (one panel has no panel title) whose titles take the template's type."""
    if rows * cols == 1:
        subplots.pop("subplot_titles", None)
    return make_subplots(rows=rows, cols=cols, **subplots).update_annotations(font_size=None)
