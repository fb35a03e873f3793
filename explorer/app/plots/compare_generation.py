"""Two models generating in lockstep, as plain HTML that is cheap to stream: both next-token
bar sets side by side (each with the model's last tokens, those where the two part marked),
the lockstep step table, and both texts with the tokens where they part marked."""
from __future__ import annotations

import html

from ..i18n import t
from .compare_model import COLORS
from .labels import token_label
from .style import AXIS_COLOR, GRID_COLOR, ORANGE, TEXT_COLOR

TAIL_TOKENS = 4        # the last tokens shown above each model's bars
TAIL_CHARS = 9


def _side(side, color) -> str:
    """One model's panel: its name, its last tokens, its top-k bars (about 1.2 KB)."""
    tail = "".join(f'<mark>{token_label(text, TAIL_CHARS)}</mark>' if parted
                   else f"<span>{token_label(text, TAIL_CHARS)}</span>"
                   for text, parted in side["tail"][-TAIL_TOKENS:])
    rows = "".join(
        f'<div class="{"r c" if i == side["chosen"] else "r"}"><span>{token_label(text, 10)}'
        f'</span><b><i style="width:{min(max(100 * p, 0), 100):.1f}%"></i></b>'
        f'<span>{100 * p:.3g} %</span></div>'
        for i, (text, p) in enumerate(zip(side["texts"], side["probs"])))
    note = f'<p class="n">{html.escape(side["note"])}</p>' if side.get("note") else ""
    return (f'<div class="s"><h5 style="color:{color}">{html.escape(side["name"])}</h5>'
            f'<p class="tl">…{tail}</p>{note}{rows}</div>')


def pair_bars_html(side_a: dict, side_b: dict) -> str:
    """Both models' next-token candidates side by side. A side: ``name``, ``texts``, ``probs``
    (most likely first), ``chosen`` (index of the token taken, or None), ``tail`` ([(text,
    parted)] of its last tokens) and an optional ``note``."""
    for side in (side_a, side_b):
        texts, probs = side["texts"], side["probs"]
        if len(texts) != len(probs):
            raise ValueError(f"texts and probs must have the same length "
                             f"({len(texts)} vs {len(probs)}).")
    return ('<section class="cmp-bars"><h4>' + html.escape(t("Next-token candidates of A and B"))
            + " <small>" + html.escape(t("(a full bar is 100 %; orange: the token chosen; "
                                         "marked: where the two part)"))
            + '</small></h4><div class="ss">' + _side(side_a, COLORS[0])
            + _side(side_b, COLORS[1]) + "</div></section>")


def lockstep_table_html(headers: list[str], rows: list[list], caption: str = "") -> str:
    """The lockstep step table (newest first); a row whose last cell is "≠" (the two chose
    different tokens) is marked."""
    title = f"<h4>{html.escape(caption)}</h4>" if caption else ""
    head = "".join(f"<th>{html.escape(str(h))}</th>" for h in headers)
    body = "".join(
        ('<tr class="p">' if row and row[-1] == "≠" else "<tr>")
        + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>" for row in rows)
    return (f'{title}<div class="steps cmp-steps"><table><thead><tr>{head}</tr></thead>'
            f"<tbody>{body}</tbody></table></div>")


def pair_texts_html(prompt: str, runs_a, runs_b, names, parted_at) -> str:
    """Both texts after the prompt, each as runs of (text, parted): the runs where the two
    models chose different tokens are marked."""
    def line(runs, name, color):
        body = "".join(f"<mark>{html.escape(text)}</mark>" if parted else html.escape(text)
                       for text, parted in runs)
        return (f'<p><b style="color:{color}">{html.escape(name)}</b> '
                f'<span class="pr">{html.escape(prompt[-60:])}</span>{body}</p>')
    where = (t("A and B agree on every token so far") if parted_at is None else
             t("A and B part at step {step} (marked: the tokens where they differ)",
               step=parted_at + 1))
    return (f'<div class="cmp-texts"><h4>{html.escape(where)}</h4>'
            + line(runs_a, names[0], COLORS[0]) + line(runs_b, names[1], COLORS[1]) + "</div>")


COMPARE_GENERATION_CSS = f"""
.cmp-bars {{font-size: 16px; color: {TEXT_COLOR};}}
.cmp-bars h4 {{font-weight: 700; margin: 0 0 4px 0; font-size: 18px;}}
.cmp-bars h4 small {{font-weight: 400; color: {AXIS_COLOR}; font-size: 15px;}}
.cmp-bars .ss {{display: grid; grid-template-columns: 1fr 1fr; gap: 14px;}}
.cmp-bars .s {{min-width: 0;}}
.cmp-bars h5 {{margin: 0; font-size: 17px; white-space: nowrap; overflow: hidden;
              text-overflow: ellipsis;}}
.cmp-bars p {{margin: 1px 0 3px 0;}}
.cmp-bars .tl {{font-family: ui-monospace, monospace; white-space: pre; overflow: hidden;}}
.cmp-bars .n {{color: {AXIS_COLOR}; font-size: 15px;}}
.cmp-bars mark, .cmp-texts mark {{background: #fde0b0; color: inherit; border-radius: 3px;}}
.cmp-bars .r {{display: grid; grid-template-columns: 6.6em 1fr 5.4em; gap: 5px;
              align-items: center; margin: 2px 0;}}
.cmp-bars .r > span:first-child {{font-family: ui-monospace, monospace; text-align: right;
                                 white-space: pre; overflow: hidden;}}
.cmp-bars .r > span:last-child {{font-variant-numeric: tabular-nums; white-space: nowrap;
                                font-size: 15px;}}
.cmp-bars b {{display: block; height: 19px; border-radius: 3px; background: #eef1f5;}}
.cmp-bars i {{display: block; height: 100%; min-width: 2px; border-radius: 3px;
             background: {COLORS[0]};}}
.cmp-bars .s + .s i {{background: {COLORS[1]};}}
.cmp-bars .r.c i, .cmp-bars .s + .s .r.c i {{background: {ORANGE};}}
.cmp-bars .r.c > span:first-child {{font-weight: 700; box-shadow: inset -4px 0 {ORANGE};
                                   padding-right: 6px;}}
.cmp-texts {{font-size: 16px; margin-bottom: 6px;}}
.cmp-texts h4 {{margin: 0 0 2px 0;}}
.cmp-texts p {{margin: 2px 0; white-space: pre-wrap;}}
.cmp-texts .pr {{color: {AXIS_COLOR};}}
.cmp-steps tr.p td {{background: #fff1d6;}}
.cmp-steps td:nth-child(4) {{font-family: ui-monospace, monospace; white-space: pre;}}
.cmp-steps td {{border-bottom: 1px solid {GRID_COLOR};}}
body.lecture .cmp-bars {{font-size: 19px;}}
body.lecture .cmp-bars b {{height: 23px;}}
body.lecture .cmp-texts {{font-size: 19px;}}
"""
