"""Generation as plain HTML, cheap to stream, for one model or two in lockstep: the next-token
candidates as bars (one set per model, side by side), the step table, and two models' texts
with the tokens where they part marked."""
from __future__ import annotations

import html

from ..i18n import t
from .labels import token_label
from .style import AXIS_COLOR, BLUE, GRID_COLOR, MODEL_COLORS, ORANGE, TEXT_COLOR, VERMILLION

TAIL_TOKENS = 4        # two models: the last tokens shown above each model's bars
TAIL_CHARS = 9
LIVE_TABLE_ROWS = 40   # while streaming, the step table shows the newest rows only


def _side_html(side, alone) -> str:
    """One model's bars, the chosen one highlighted; beside another model's, under its name,
    last tokens and note."""
    texts, probs, chosen = side["texts"], side["probs"], side.get("chosen")
    # two models' bars are half as wide: shorter tokens, no "◀ chosen" (the colour says it)
    chosen_mark, chars = (" " + t("generation.chosen", "◀ chosen"), 12) if alone else ("", 10)
    rows = []
    for i, (text, p) in enumerate(zip(texts, probs)):
        # True scale: a full track is 100 %, so an untrained model's 0.02 % candidates show
        # as slivers (it has no preference), never as a strong-looking bar. Labels keep 3
        # digits, as small as they get (0.0171 %).
        width = min(max(100 * float(p), 0.0), 100.0)
        chosen_one = i == chosen
        rows.append(f'<div><span>{token_label(text, chars)}</span><b><i'
                    f'{" class=c" if chosen_one else ""} style="width:{width:.1f}%"></i></b>'
                    f'<span>{100 * float(p):.3g} %{chosen_mark if chosen_one else ""}</span></div>')
    head = ""
    if "name" in side:
        tail = "".join(f"<mark>{token_label(text, TAIL_CHARS)}</mark>" if parted
                       else f"<span>{token_label(text, TAIL_CHARS)}</span>"
                       for text, parted in side.get("tail", [])[-TAIL_TOKENS:])
        note = f'<p class="n">{html.escape(side["note"])}</p>' if side.get("note") else ""
        head = f'<h5>{html.escape(side["name"])}</h5><p class="tl">…{tail}</p>{note}'
    return head + "".join(rows)


_SCALE = ('<div class="scale"><span></span><em>' + "".join(
    f'<span style="left:{x}%">{x}{" %" if x else ""}</span>' for x in (0, 25, 50, 75, 100))
    + '</em><span></span></div>')


def next_token_bars_html(sides) -> str:
    """Top-k candidates for the next token as plain HTML bars (cheap to stream), one set per
    model side by side. A side: ``texts``, ``probs`` (most likely first), ``chosen`` (index of
    the token taken, or None); beside another model's also ``name``, ``tail`` ([(text,
    parted)] of its last tokens) and an optional ``note``."""
    if len(sides) == 1:
        return ('<section class="nt-bars"><h4>'
                + t("generation.next_token_candidates", "Next-token candidates") + " <small>"
                + t("generation.bar_probability_full_bar",
                    "(bar = probability; a full bar is 100 %)") + "</small></h4>"
                + _side_html(sides[0], True) + _SCALE + "</section>")
    return ('<section class="nt-bars two"><h4>'
            + html.escape(t("generation.next_token_candidates_and",
                            "Next-token candidates of A and B"))
            + " <small>" + html.escape(t("generation.full_bar_is_100",
                                         "(a full bar is 100 %; orange: the token chosen; "
                                         "marked: where the two part)"))
            + '</small></h4><div class="ss">'
            + "".join(f'<div class="s">{_side_html(side, False)}</div>' for side in sides)
            + "</div></section>")


def live_rows(rows, width: int) -> list:
    """The newest LIVE_TABLE_ROWS rows and a line saying how many more there are."""
    if len(rows) <= LIVE_TABLE_ROWS:
        return list(rows)
    more = len(rows) - LIVE_TABLE_ROWS
    return rows[:LIVE_TABLE_ROWS] + [["…", t("generation.earlier_steps", "{n} earlier steps",
                                             n=more)]
                                     + [""] * (width - 2)]


def steps_table_html(headers: list[str], rows: list[list], caption: str = "",
                     live: bool = False) -> str:
    """The step table (newest first) as plain HTML, every cell escaped; ``live``: the newest
    rows only. A row whose last cell is "≠" (two models chose different tokens) is marked."""
    if live:
        rows = live_rows(rows, len(headers))
    title = f"<h4>{html.escape(caption)}</h4>" if caption else ""
    head = "".join(f"<th>{html.escape(str(h))}</th>" for h in headers)
    body = "".join(
        ('<tr class="p">' if row and row[-1] == "≠" else "<tr>")
        + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>" for row in rows)
    return (f'{title}<div class="steps"><table><thead><tr>{head}</tr>'
            f"</thead><tbody>{body}</tbody></table></div>")


def parted_texts_html(prompt: str, runs, names, parted_at) -> str:
    """Each model's text after the prompt, the runs where the models parted marked."""
    def line(model_runs, name, color):
        body = "".join(f"<mark>{html.escape(text)}</mark>" if parted else html.escape(text)
                       for text, parted in model_runs)
        return (f'<p><b style="color:{color}">{html.escape(name)}</b> '
                f'<span class="pr">{html.escape(prompt[-60:])}</span>{body}</p>')
    where = (t("generation.and_agree_on_every", "A and B agree on every token so far")
             if parted_at is None else
             t("generation.and_part_at_step",
               "A and B part at step {step} (marked: the tokens where they differ)",
               step=parted_at + 1))
    return (f'<div class="cmp-texts"><h4>{html.escape(where)}</h4>'
            + "".join(line(r, n, c) for r, n, c in zip(runs, names, MODEL_COLORS))
            + "</div>")


# The bars' and tables' layout (lean markup above, the looks here); the app adds it to its
# style sheet.
NEXT_TOKEN_CSS = f"""
.nt-bars {{font-size: 18px; color: {TEXT_COLOR};}}
.nt-bars h4 {{font-weight: 700; margin: 0 0 6px 0;}}
.nt-bars h4 small {{font-weight: 400; color: {AXIS_COLOR};}}
.nt-bars div {{display: grid; grid-template-columns: 9.5em 1fr 8.5em; gap: 8px;
              align-items: center; margin: 3px 0;}}
.nt-bars div > span:first-child {{font-family: ui-monospace, monospace; text-align: right;
                                 white-space: pre; overflow: hidden;}}
/* (a bar's track is a b in a row's div: the hint's own bold words stay words) */
.nt-bars div > b {{display: block; height: 22px; border-radius: 3px; background-color: #eef1f5;
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
/* two models: their bars side by side, each under its name and last tokens */
.nt-bars.two {{font-size: 16px;}}
.nt-bars.two h4 {{margin: 0 0 4px 0; font-size: 18px;}}
.nt-bars.two h4 small {{font-size: 15px;}}
.nt-bars .ss {{display: grid; grid-template-columns: 1fr 1fr; gap: 14px; margin: 0;}}
.nt-bars .s {{display: block; min-width: 0; margin: 0;}}
.nt-bars .s > div {{grid-template-columns: 6.6em 1fr 5.4em; gap: 5px; margin: 2px 0;}}
.nt-bars .s > div > span:last-child {{font-size: 15px;}}
.nt-bars .s b {{height: 19px; background-image: none;}}
.nt-bars .s h5 {{margin: 0; font-size: 17px; white-space: nowrap; overflow: hidden;
                text-overflow: ellipsis; color: {BLUE};}}
.nt-bars .s + .s h5 {{color: {VERMILLION};}}
.nt-bars .s p {{margin: 1px 0 3px 0;}}
.nt-bars .s .tl {{font-family: ui-monospace, monospace; white-space: pre; overflow: hidden;}}
.nt-bars .s .n {{color: {AXIS_COLOR}; font-size: 15px;}}
.nt-bars .s + .s i {{background: {VERMILLION};}}
.nt-bars .s i.c, .nt-bars .s + .s i.c {{background: {ORANGE};}}
.nt-bars .s > div:has(i.c) > span:first-child {{font-weight: 700;
                                               box-shadow: inset -4px 0 {ORANGE};
                                               padding-right: 6px;}}
.nt-bars mark, .cmp-texts mark {{background: #fde0b0; color: inherit; border-radius: 3px;}}
.cmp-texts {{font-size: 16px; margin-bottom: 6px;}}
.cmp-texts h4 {{margin: 0 0 2px 0;}}
.cmp-texts p {{margin: 2px 0; white-space: pre-wrap;}}
.cmp-texts .pr {{color: {AXIS_COLOR};}}
body.lecture .nt-bars.two {{font-size: 19px;}}
body.lecture .nt-bars.two .s b {{height: 23px;}}
body.lecture .cmp-texts {{font-size: 19px;}}
.steps {{max-height: 460px; overflow-y: auto; font-size: 16px;}}
.steps table {{border-collapse: collapse; width: 100%;}}
.steps th {{position: sticky; top: 0; background: #f3f4f6; text-align: left;}}
.steps th, .steps td {{padding: 3px 8px; border: none; border-bottom: 1px solid {GRID_COLOR};
                      font-variant-numeric: tabular-nums;}}
/* the token columns: one model's (2nd), or A's and B's (2nd, 4th) */
.steps td:nth-child(2), .steps td:nth-child(4) {{font-family: ui-monospace, monospace;
                                                white-space: pre;}}
.steps tr.p td {{background: #fff1d6;}}
"""
