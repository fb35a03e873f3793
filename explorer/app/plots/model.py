"""The model a config builds: parameters per component (bars) and the architecture diagram
(plain HTML with inline styles, no scripts)."""
from __future__ import annotations

import html
from contextvars import ContextVar

import plotly.graph_objects as go

from ...book.config import GPTConfig, ParameterCount
from ...book.curves import ACTIVATION_LABELS
from ..i18n import t
from .labels import human_count, percent
from .style import BLUE, FONT_SIZE, finish
from .walk import stage_attrs

def parameter_figure(counts: ParameterCount) -> go.Figure:
    """Horizontal bars: parameters per component (zero ones skipped), largest on top."""
    parts = [(name, n) for name, n in counts.breakdown().items() if n > 0]
    parts.sort(key=lambda item: item[1])
    names = [t(name) for name, _ in parts]
    values = [n for _, n in parts]
    total = counts.total
    text = [f"{human_count(n)}  ({percent(n / total)})" for n in values]
    fig = go.Figure(go.Bar(
        x=values, y=names, orientation="h", marker_color=BLUE, text=text,
        textposition="outside", cliponaxis=False, textfont=dict(size=FONT_SIZE),
        hovertemplate=t("%{y}: %{x:,} parameters") + "<extra></extra>"))
    # room on the right for the longest label ("6.43 M  (47.0 %)"), beyond the longest bar
    fig.update_xaxes(range=[0, max(values) * 1.6], tickformat="~s")
    notes = []
    if counts.output_head:
        notes.append(t("{n} without the output head (the book's count with weight tying)",
                       n=human_count(counts.total_without_output_head)))
    else:
        notes.append(t("the output head shares the token embedding (tied weights)"))
    return finish(fig, t("Parameters: {n} in total ({total:,})", n=human_count(total),
                         total=total),
                  170 + 52 * len(parts), notes=notes, x_title=t("parameters"),
                  y_title=t("component"), margin=dict(r=40))


# ---------------------------------------------------------------------------------------------
# Architecture diagram (HTML)
_BOX_COLORS = {
    "embed": ("#ede7f6", "#7e57c2"),
    "drop": ("#f3f3f3", "#a0a0a0"),
    "norm": ("#fff4d6", "#c9971a"),
    "att": ("#e0ecfb", "#3b78c4"),
    "ff": ("#def5e6", "#2e9d5b"),
    "add": ("#fde3e3", "#c94a4a"),
    "out": ("#e6f4f4", "#2a8c8c"),
}
_SMALL = "font-size:15px;color:#444444"
# The parts of the diagram being drawn that differ from a model compared with (by attribute
# name, or "add" for the shortcut's ⊕): outlined in orange (``architecture_html(highlight=)``).
_MARKED: ContextVar[frozenset] = ContextVar("architecture_marked", default=frozenset())
MARK_STYLE = "outline:4px solid #e69f00;outline-offset:1px"


def _mark(part) -> str:
    return f";{MARK_STYLE}" if part in _MARKED.get() else ""


def _box(kind, name, detail="", params=None, code=None, attrs="") -> str:
    """One step of the diagram: bold name, the attribute name as code, details, and the
    parameter count on the right. Every text is escaped. ``attrs``: the outer element's extra
    attributes (a stage of the walk, ``_stage_attrs``)."""
    bg, border = _BOX_COLORS[kind]
    code_html = (f" <code style=\"font-size:15px;background:#ffffff;padding:0 4px;"
                 f"border-radius:4px\">{html.escape(code)}</code>" if code else "")
    params_html = (f"<span style=\"float:right;{_SMALL};margin-left:12px\">"
                   f"{html.escape(params)}</span>" if params else "")
    detail_html = (f"<span style=\"color:#333333\"> · {html.escape(detail)}</span>"
                   if detail else "")
    return (f"<div{attrs} style=\"background:{bg};border:2px solid {border};border-radius:8px;"
            f"padding:5px 12px{_mark(code or kind)}\">{params_html}<b>{html.escape(name)}</b>"
            f"{code_html}"
            f"{detail_html}</div>")


def _arrow(label: str = "") -> str:
    text = f" <span style=\"{_SMALL}\">{html.escape(label)}</span>" if label else ""
    return (f"<div style=\"text-align:center;font-size:18px;line-height:1.5;"
            f"color:#666666\">↓{text}</div>")


def _params(counts, n) -> str | None:
    return None if counts is None else t("{n} params", n=human_count(n))


def architecture_html(cfg, counts: ParameterCount | None = None, stages: bool = False,
                      highlight: frozenset = frozenset()) -> str:
    """``_architecture_html``, with the parts in ``highlight`` (attribute names such as
    ``att``, ``norm1``, ``trf_blocks``; "add" for the shortcut) outlined: they differ from the
    model it is compared with."""
    marked = _MARKED.set(frozenset(highlight))
    try:
        return _architecture_html(cfg, counts, stages)
    finally:
        _MARKED.reset(marked)


def _architecture_html(cfg, counts: ParameterCount | None = None, stages: bool = False) -> str:
    """A block diagram of the model a config builds (pure HTML with inline styles, no
    scripts): embeddings, the N transformer blocks with their steps in the order the chosen
    variant computes them, final norm and output head, with shapes and (if ``counts`` is
    given) parameter counts. ``stages``: each stage of the guided walk (``book.stages``) is
    a focusable button (``data-stage``), for the page's script to turn a click into a call
    (``plots.walk``)."""
    cfg = GPTConfig.from_dict(cfg)
    walk = (lambda name: stage_attrs(name, cfg)) if stages else (lambda name: "")
    d, v, h = cfg.emb_dim, cfg.vocab_size, cfg.ff_hidden_dim
    c = counts
    drop = f"p = {cfg.drop_rate:g}"
    parts = [f"<div style=\"{_SMALL};text-align:center\">"
             + html.escape(t("input: token ids, shape (batch, T), T ≤ {n:,}",
                             n=cfg.context_length)) + "</div>", _arrow()]
    first_embedding = len(parts)
    parts.append(_box("embed", t("Token embedding"), t("{v:,} ids → {d}", v=v, d=d),
                      _params(c, c.token_embedding) if c else None, "tok_emb"))
    if cfg.pos_encoding == "learned":
        parts.append("<div style=\"text-align:center;font-size:18px;color:#666666\">+</div>")
        parts.append(_box("embed", t("Positional embedding"),
                          t("{n:,} positions → {d}", n=cfg.context_length, d=d),
                          _params(c, c.position_embedding) if c else None, "pos_emb"))
    else:
        parts.append(f"<div style=\"{_SMALL};text-align:center\">"
                     + html.escape(t("(no positional embedding: RoPE rotates queries and keys "
                                     "inside attention)")) + "</div>")
    parts += [_arrow(), _box("drop", t("Dropout"), drop, None, "drop_emb")]
    if stages:   # the embeddings (and their dropout) are one stage: one button
        parts[first_embedding:] = [f"<div{walk('embeddings')}>" + "".join(
            parts[first_embedding:]) + "</div>"]
    parts.append(_arrow(f"(batch, T, {d})"))

    norms = {n: _box("norm", "LayerNorm", t("{d} features, scale and shift", d=d),
                     _params(c, c.norms_per_block // 2) if c else None, n, walk(n))
             for n in ("norm1", "norm2")}
    rope = ", RoPE" if cfg.pos_encoding == "rope" else ""
    att = _box("att", t("Masked multi-head attention"),
               t("{d} → {heads} heads × {head_dim} → {d}", d=d, heads=cfg.n_heads,
                 head_dim=cfg.head_dim) + rope,
               _params(c, c.attention_per_block) if c else None, "att", walk("attention"))
    ff = _box("ff", t("Feed-forward"),
              f"{d} → {h} → {d}, {t(ACTIVATION_LABELS[cfg.activation])}",
              _params(c, c.feed_forward_per_block) if c else None, "ff",
              walk("feed_forward"))
    dropout = _box("drop", t("Dropout"), drop, None, "drop_shortcut")

    def add(stage):   # one per sub-block: each is its own stage of the walk
        return _box("add", t("⊕ Add the shortcut"), "x = x + shortcut", attrs=walk(stage))

    def sub_block(norm_name, core, shortcut_stage):
        steps = []
        if cfg.norm_placement == "pre":
            steps.append(norms[norm_name])
        steps += [core, dropout]
        if cfg.shortcut:
            steps.append(add(shortcut_stage))
        inner = _arrow().join(steps)
        if cfg.shortcut:
            # the shortcut path: a red line from the sub-block's input down to the ⊕
            inner = (f"<div style=\"border-left:4px solid {_BOX_COLORS['add'][1]};"
                     f"padding-left:10px;margin-left:2px\"><div style=\"{_SMALL};"
                     f"color:{_BOX_COLORS['add'][1]}\">"
                     + html.escape(t("shortcut = x (input of this part)")) + "</div>"
                     f"{inner}</div>")
        if cfg.norm_placement == "post":
            inner += _arrow() + norms[norm_name]
        return inner

    placement = t({"pre": "pre-LayerNorm (the book, GPT-2)",
                   "post": "post-LayerNorm (the original Transformer)",
                   "none": "no normalisation"}[cfg.norm_placement])
    shortcut = t("with shortcut connections") if cfg.shortcut else t("no shortcut connections")
    block_params = (f"<span style=\"float:right;{_SMALL}\">"
                    + html.escape(t("{each} params each, {all} in all",
                                    each=human_count(c.per_block),
                                    all=human_count(c.per_block * c.n_layers))) + "</span>"
                    if c else "")
    parts.append(
        f"<div style=\"border:2px dashed #777777;border-radius:10px;padding:8px 12px 12px;"
        f"background:#fafafa{_mark('trf_blocks')}\">{block_params}"
        f"<div><b>{cfg.n_layers} × TransformerBlock</b> <code style=\"font-size:15px\">"
        f"trf_blocks</code></div>"
        f"<div style=\"{_SMALL};margin-bottom:8px\">{html.escape(placement)}{t(', ')}{shortcut}"
        f"</div>{sub_block('norm1', att, 'shortcut1')}{_arrow()}"
        f"{sub_block('norm2', ff, 'shortcut2')}</div>")
    parts.append(_arrow(f"(batch, T, {d})"))
    if cfg.norm_placement == "none":
        parts.append(_box("drop", t("No final norm"), t("Identity (norm_placement none)"),
                          None, "final_norm", walk("final_norm")))
    else:
        parts.append(_box("norm", t("Final LayerNorm"), t("{d} features", d=d),
                          _params(c, c.final_norm) if c else None, "final_norm",
                          walk("final_norm")))
    parts.append(_arrow())
    tied = t(", tied to tok_emb (shares its weights)") if cfg.tie_weights else ""
    parts.append(_box("out", t("Output head"), f"Linear {d} → {v:,}{tied}",
                      _params(c, c.output_head) if c and c.output_head else None, "out_head",
                      walk("out_head")))
    parts += [_arrow(), f"<div style=\"{_SMALL};text-align:center\">"
                        + html.escape(t("logits, shape (batch, T, {v:,})", v=v)) + "</div>"]
    if c:
        parts.append("<div style=\"margin-top:8px\">" + t(
            "<b>Total:</b> {n} parameters ({total:,})", n=human_count(c.total),
            total=c.total) + "</div>")
    return ("<div style=\"font-family:Arial,Helvetica,sans-serif;font-size:16px;"
            "line-height:1.4;color:#222222;max-width:760px\">" + "".join(parts) + "</div>")
