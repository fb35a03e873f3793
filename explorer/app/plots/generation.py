"""Generation as plain HTML, cheap to stream: the next-token candidates as bars, and tables
(the step history)."""
from __future__ import annotations

import html

import numpy as np

from ..i18n import t
from .labels import token_label
from .style import AXIS_COLOR, BLUE, GRID_COLOR, ORANGE, TEXT_COLOR

def next_token_bars_html(texts: list[str], probs: list[float], chosen: int | None = None
                         ) -> str:
    """Top-k candidates for the next token as plain HTML bars, most likely on top, the chosen
    one highlighted. Sent for every generated token: about 1 KB, and a browser redraws it in
    well under a millisecond, where a plotly chart took ~100 ms (6 steps/s at most)."""
    if len(texts) != len(probs):
        raise ValueError(f"texts and probs must have the same length "
                         f"({len(texts)} vs {len(probs)}).")
    if chosen is not None and not (isinstance(chosen, (int, np.integer))
                                   and 0 <= chosen < len(texts)):
        raise ValueError(f"chosen must be the index of one of the {len(texts)} candidates "
                         f"(got {chosen!r}).")
    rows, chosen_mark = [], " " + t("◀ chosen")
    for i, (text, p) in enumerate(zip(texts, probs)):
        # True scale: a full track is 100 %, so an untrained model's 0.02 % candidates show
        # as slivers (it has no preference), never as a strong-looking bar. Labels keep 3
        # digits, as small as they get (0.0171 %).
        width = min(max(100 * float(p), 0.0), 100.0)
        chosen_one = i == chosen
        rows.append(f'<div><span>{token_label(text, 12)}</span><b><i'
                    f'{" class=c" if chosen_one else ""} style="width:{width:.1f}%"></i></b>'
                    f'<span>{100 * float(p):.3g} %{chosen_mark if chosen_one else ""}</span></div>')
    return ('<section class="nt-bars"><h4>' + t("Next-token candidates") + " <small>"
            + t("(bar = probability; a full bar is 100 %)") + "</small></h4>" + "".join(rows)
            + '<div class="scale"><span></span><em>' + "".join(
                f'<span style="left:{x}%">{x}{" %" if x else ""}</span>'
                for x in (0, 25, 50, 75, 100)) + '</em><span></span></div>'
            + "</section>")


def table_html(headers: list[str], rows: list[list], caption: str = "",
               elem_class: str = "steps") -> str:
    """A plain HTML table; every cell is text, escaped. The browser lays out hundreds of rows
    in about a millisecond, where Gradio's Dataframe took ~100 ms per update."""
    title = f"<h4>{html.escape(caption)}</h4>" if caption else ""
    head = "".join(f"<th>{html.escape(str(h))}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>"
                   for row in rows)
    return (f'{title}<div class="{html.escape(elem_class)}"><table><thead><tr>{head}</tr>'
            f"</thead><tbody>{body}</tbody></table></div>")


# The bars' layout (lean markup above, the looks here); the app adds it to its style sheet.
NEXT_TOKEN_CSS = f"""
.nt-bars {{font-size: 18px; color: {TEXT_COLOR};}}
.nt-bars h4 {{font-weight: 700; margin: 0 0 6px 0;}}
.nt-bars h4 small {{font-weight: 400; color: {AXIS_COLOR};}}
.nt-bars div {{display: grid; grid-template-columns: 9.5em 1fr 8.5em; gap: 8px;
              align-items: center; margin: 3px 0;}}
.nt-bars div > span:first-child {{font-family: ui-monospace, monospace; text-align: right;
                                 white-space: pre; overflow: hidden;}}
.nt-bars b {{display: block; height: 22px; border-radius: 3px; background-color: #eef1f5;
            background-image: linear-gradient(90deg, transparent calc(25% - 1px), #c8ced6 0,
              #c8ced6 25%, transparent 0, transparent calc(50% - 1px), #c8ced6 0, #c8ced6 50%,
              transparent 0, transparent calc(75% - 1px), #c8ced6 0, #c8ced6 75%,
              transparent 0);}}
.nt-bars i {{display: block; height: 100%; min-width: 3px; border-radius: 3px;
            background: {BLUE};}}
.nt-bars div.scale {{margin-top: 0; color: {AXIS_COLOR}; font-size: 16px;}}
.nt-bars div.scale em {{position: relative; height: 1.3em; font-style: normal;}}
.nt-bars div.scale em span {{position: absolute; transform: translateX(-50%);
                            white-space: nowrap;}}
.nt-bars p.hint {{color: {AXIS_COLOR}; font-size: 17px;}}
.nt-bars i.c {{background: {ORANGE};}}
.nt-bars div > span:last-child {{font-variant-numeric: tabular-nums; white-space: nowrap;}}
.steps {{max-height: 460px; overflow-y: auto; font-size: 16px;}}
.steps table {{border-collapse: collapse; width: 100%;}}
.steps th {{position: sticky; top: 0; background: #f3f4f6; text-align: left;}}
.steps th, .steps td {{padding: 3px 8px; border: none; border-bottom: 1px solid {GRID_COLOR};
                      font-variant-numeric: tabular-nums;}}
.steps td:nth-child(2) {{font-family: ui-monospace, monospace; white-space: pre;}}
"""
