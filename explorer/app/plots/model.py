"""The model a config builds, for one model or two side by side: parameters per component
(bars) and the architecture diagram (plain HTML with inline styles, no scripts); two diagrams
outline the parts that differ, under a list of the config fields that differ."""
from __future__ import annotations

import html
from functools import partial

import plotly.graph_objects as go

from ...book.config import GPTConfig, ParameterCount
from ...book.curves import ACTIVATION_LABELS
from ...book.knobs import BY_FIELD
from ...probes.compare import compare_configs
from ..i18n import say, t
from .labels import human_count, percent
from .style import FONT_SIZE, MODEL_COLORS, PLOT_MIN, finish, models, scaled
from .walk import stage_attrs

# The parameter breakdown's components (``ParameterCount.breakdown``) and the LayerNorm
# placements, as the page names them.
COMPONENTS = {"token embedding": ("params.tok_emb", "token embedding"),
              "position embedding": ("params.pos_emb", "position embedding"),
              "attention": ("params.attention", "attention"),
              "feed-forward": ("params.ff", "feed-forward"),
              "layer norms": ("params.norms", "layer norms"),
              "output head": ("params.out_head", "output head")}
PLACEMENTS = {"pre": ("model.pre_ln", "pre-LayerNorm (the book, GPT-2)"),
              "post": ("model.post_ln", "post-LayerNorm (the original Transformer)"),
              "none": ("model.no_ln", "no normalisation")}


def parameter_figure(counts_seq, names=None) -> go.Figure:
    """Horizontal bars: parameters per component (zero ones skipped), largest on top; two
    models as grouped bars (a component only one model has shows one bar), A above B."""
    counts_seq, names = models(counts_seq, names)
    alone = len(counts_seq) == 1
    parts = [c.breakdown() for c in counts_seq]
    components = [c for c in dict.fromkeys(k for p in parts for k in p)
                  if any(p.get(c, 0) for p in parts)]
    components.sort(key=lambda c: max(p.get(c, 0) for p in parts))
    labels = [t(*COMPONENTS[c]) for c in components]
    fig = go.Figure()
    # plotly draws the first trace of a horizontal group at the bottom: B first, so A is on top
    for counts, part, name, color in reversed(list(zip(counts_seq, parts, names,
                                                       MODEL_COLORS))):
        values = [part.get(c, 0) for c in components]
        # one model: its share of the total too (two: the bars are half as thick)
        text = [f"{human_count(n)}  ({percent(n / counts.total)})" if alone else human_count(n)
                for n in values]
        fig.add_trace(go.Bar(
            x=values, y=labels, orientation="h", name=None if alone else name,
            marker_color=color, text=text, textposition="outside", cliponaxis=False,
            textfont=dict(size=scaled(FONT_SIZE)),
            hovertemplate=("" if alone else name + ": ")
                          + t("model.parameters_2", "%{y}: %{x:,} parameters")
                          + "<extra></extra>"))
    # Room right of each bar for its label ("6.43 M  (47.0 %)"): the figure is half the page
    # wide, ~315 px of bars at 1280 px, and a label (~0.52 of the type size a letter) may
    # reach 40 px into the margin. Lecture type is larger, so its range is longer.
    letter = 0.52 * scaled(FONT_SIZE)
    most = max(max(p.values()) for p in parts)
    end = max(value / (1 - min(max(letter * len(text) + 6 - 40, 0) / 315, 0.6))
              for bar in fig.data for value, text in zip(bar.x, bar.text))
    fig.update_xaxes(range=[0, max(most * (1.6 if alone else 1.35), end)], tickformat="~s")
    if alone:
        counts = counts_seq[0]
        notes = [t("model.without_output_head_book", "{n} without the output head (the book's "
                   "count with weight tying)", n=human_count(counts.total_without_output_head))
                 if counts.output_head
                 else t("model.output_head_shares_token",
                        "the output head shares the token embedding (tied weights)")]
        title = t("model.parameters_in_total", "Parameters: {n} in total ({total:,})",
                  n=human_count(counts.total), total=counts.total)
    else:
        fig.update_layout(barmode="group", bargap=0.25, bargroupgap=0.05,
                          legend=dict(traceorder="reversed"))
        diff = counts_seq[0].total - counts_seq[1].total
        notes = [t("model.text", "A: {a} · B: {b} · A − B: {diff}",
                   a=human_count(counts_seq[0].total),
                   b=human_count(counts_seq[1].total),
                   diff=t("model.none", "none") if diff == 0 else ("+" if diff > 0 else "−")
                   + human_count(abs(diff)))]
        title = t("model.parameters_and", "Parameters of A and B")
    # every bar at least as thick as its label is high (two models: two bars a component)
    bars = len(components) * len(counts_seq)
    return finish(fig, title, 170 + 30 * (not alone) + (52 + 18 * (not alone)) * len(components),
                  notes=notes, x_title=t("model.parameters", "parameters"),
                  y_title=t("model.component", "component"),
                  legend=not alone, margin=dict(r=40),
                  plot_min=max(PLOT_MIN, round(1.2 * scaled(FONT_SIZE) * bars)))


def differing_parts(cfg_a, cfg_b) -> frozenset:
    parts = set()
    for field, _, _ in compare_configs(cfg_a, cfg_b).differences:
        parts |= BY_FIELD[field].parts if field in BY_FIELD else set()   # the knob's outline
    return frozenset(parts)


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
# name, or "add" for the shortcut's ⊕): outlined in orange (two models' ``architecture_html``).
MARK_STYLE = "outline:4px solid #e69f00;outline-offset:1px"


def _mark(part, marked) -> str:
    return f";{MARK_STYLE}" if part in marked else ""


def _box(kind, name, detail="", params=None, code=None, attrs="", marked=()) -> str:
    """One step of the diagram: bold name, attribute name, details, parameter count (escaped);
    ``attrs``: the outer element's extra attributes (a stage of the walk)."""
    bg, border = _BOX_COLORS[kind]
    code_html = (f" <code style=\"font-size:15px;background:#ffffff;padding:0 4px;"
                 f"border-radius:4px\">{html.escape(code)}</code>" if code else "")
    params_html = (f"<span style=\"float:right;{_SMALL};margin-left:12px\">"
                   f"{html.escape(params)}</span>" if params else "")
    detail_html = (f"<span style=\"color:#333333\"> · {html.escape(detail)}</span>"
                   if detail else "")
    return (f"<div{attrs} style=\"background:{bg};border:2px solid {border};border-radius:8px;"
            f"padding:5px 12px{_mark(code or kind, marked)}\">{params_html}"
            f"<b>{html.escape(name)}</b>{code_html}{detail_html}</div>")


def _arrow(label: str = "") -> str:
    text = f" <span style=\"{_SMALL}\">{html.escape(label)}</span>" if label else ""
    return (f"<div style=\"text-align:center;font-size:18px;line-height:1.5;"
            f"color:#666666\">↓{text}</div>")


def _params(counts, attr: str, per: int = 1) -> str | None:
    """A box's parameter count, or None: no counts, or none in the part (a tied head)."""
    n = getattr(counts, attr, 0) // per
    return t("model.params", "{n} params", n=human_count(n)) if n else None


def architecture_html(cfgs, counts=None, names=None, *, stages: bool = False,
                      weights=None, knocked_out=None) -> str:
    """The block diagram of one model, or two side by side under the config fields that
    differ, the parts they shape outlined in both. ``stages``: the stages are the walk's
    buttons; ``weights``: what each model's weights are (one architecture), None when they are
    the same model; ``knocked_out``: B is A with these parts knocked out."""
    cfgs, names = models(cfgs, names)
    counts = list(counts) if counts is not None else [None] * len(cfgs)
    if len(cfgs) == 1:
        return _architecture_html(cfgs[0], counts[0], stages)
    marked = differing_parts(*cfgs)
    columns = "".join(
        f"<div class=\"cmp-arch\"><h4 style=\"color:{color}\">{html.escape(name)}</h4>"
        f"{_architecture_html(cfg, count, stages, marked)}</div>"
        for cfg, count, name, color in zip(cfgs, counts, names, MODEL_COLORS))
    differences = compare_configs(*cfgs).differences
    if differences:
        rows = "".join(f"<li><code>{html.escape(field)}</code>: A <b>{html.escape(str(a))}</b>"
                       f" · B <b>{html.escape(str(b))}</b></li>" for field, a, b in differences)
        head = (f"<b>{html.escape(t('model.what_differs', 'What differs'))}</b> "
                + html.escape(t("model.outlined_in_both_diagrams", "(outlined in both diagrams)"))
                + f"<ul>{rows}</ul>")
    elif knocked_out is not None:
        head = html.escape(t("model.b_is_a_knocked_out", "B is A with {what}: A's own weights, "
                             "that part taken out while B runs.", what=say(knocked_out)))
    elif weights is None:
        head = html.escape(t("model.and_are_same_model",
                             "A and B are the same model: nothing differs."))
    else:
        head = html.escape(t("model.same_architecture_different_weights",
                             "Same architecture, different weights: A {a}; B {b}.",
                             a=say(weights[0]), b=say(weights[1])))
    return f"<div class=\"cmp-diff\">{head}</div><div class=\"cmp-pair\">{columns}</div>"


def _architecture_html(cfg, counts: ParameterCount | None = None, stages: bool = False,
                       marked=frozenset()) -> str:
    """One model's diagram: embeddings, the N blocks with their steps in the order the variant
    computes them, final norm and output head, with shapes and parameter counts (``counts``).
    ``stages``: each stage of the walk is a focusable button (``data-stage``) for the page's
    script; ``marked``: the parts outlined."""
    cfg = GPTConfig.from_dict(cfg)
    box = partial(_box, marked=marked)
    walk = (lambda name: stage_attrs(name, cfg)) if stages else (lambda name: "")
    d, v, h = cfg.emb_dim, cfg.vocab_size, cfg.ff_hidden_dim
    c = counts
    drop = f"p = {cfg.drop_rate:g}"
    parts = [f"<div style=\"{_SMALL};text-align:center\">"
             + html.escape(t("model.input_token_ids_shape",
                             "input: token ids, shape (batch, T), T ≤ {n:,}",
                             n=cfg.context_length)) + "</div>", _arrow()]
    first_embedding = len(parts)
    parts.append(box("embed", t("model.token_embedding", "Token embedding"),
                      t("model.ids", "{v:,} ids → {d}", v=v, d=d),
                      _params(c, "token_embedding"), "tok_emb"))
    if cfg.pos_encoding == "learned":
        parts.append("<div style=\"text-align:center;font-size:18px;color:#666666\">+</div>")
        parts.append(box("embed", t("model.positional_embedding", "Positional embedding"),
                          t("model.positions", "{n:,} positions → {d}",
                            n=cfg.context_length, d=d),
                          _params(c, "position_embedding"), "pos_emb"))
    else:
        parts.append(f"<div style=\"{_SMALL};text-align:center\">"
                     + html.escape(t("model.no_positional_embedding_rope",
                                     "(no positional embedding: RoPE rotates queries and keys "
                                     "inside attention)")) + "</div>")
    parts += [_arrow(), box("drop", t("model.dropout", "Dropout"), drop, None, "drop_emb")]
    if stages:   # the embeddings (and their dropout) are one stage: one button
        parts[first_embedding:] = [f"<div{walk('embeddings')}>" + "".join(
            parts[first_embedding:]) + "</div>"]
    parts.append(_arrow(f"(batch, T, {d})"))

    norms = {n: box("norm", "LayerNorm", t("model.features_scale_and_shift",
                                            "{d} features, scale and shift", d=d),
                     _params(c, "norms_per_block", 2), n, walk(n))
             for n in ("norm1", "norm2")}
    rope = ", RoPE" if cfg.pos_encoding == "rope" else ""
    att = box("att", t("model.masked_multi_head_attention", "Masked multi-head attention"),
               t("model.heads", "{d} → {heads} heads × {head_dim} → {d}", d=d,
                 heads=cfg.n_heads, head_dim=cfg.head_dim) + rope,
               _params(c, "attention_per_block"), "att", walk("attention"))
    ff = box("ff", t("model.feed_forward", "Feed-forward"),
              f"{d} → {h} → {d}, {say(ACTIVATION_LABELS[cfg.activation])}",
              _params(c, "feed_forward_per_block"), "ff", walk("feed_forward"))
    dropout = box("drop", t("model.dropout", "Dropout"), drop, None, "drop_shortcut")

    def add(stage):   # one per sub-block: each is its own stage of the walk
        return box("add", t("model.add_shortcut", "⊕ Add the shortcut"), "x = x + shortcut",
                    attrs=walk(stage))

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
                     + html.escape(t("model.shortcut_x_input_this",
                                     "shortcut = x (input of this part)")) + "</div>"
                     f"{inner}</div>")
        if cfg.norm_placement == "post":
            inner += _arrow() + norms[norm_name]
        return inner

    placement = t(*PLACEMENTS[cfg.norm_placement])
    shortcut = t("model.with_shortcut_connections", "with shortcut connections") if cfg.shortcut \
        else t("model.no_shortcut_connections", "no shortcut connections")
    block_params = (f"<span style=\"float:right;{_SMALL}\">"
                    + html.escape(t("model.params_each_in_all", "{each} params each, {all} in all",
                                    each=human_count(c.per_block),
                                    all=human_count(c.per_block * c.n_layers))) + "</span>"
                    if c else "")
    parts.append(
        f"<div style=\"border:2px dashed #777777;border-radius:10px;padding:8px 12px 12px;"
        f"background:#fafafa{_mark('trf_blocks', marked)}\">{block_params}"
        f"<div><b>{cfg.n_layers} × TransformerBlock</b> <code style=\"font-size:15px\">"
        f"trf_blocks</code></div>"
        f"<div style=\"{_SMALL};margin-bottom:8px\">"
        f"{html.escape(placement)}{t('model.text_2', ', ')}{shortcut}"
        f"</div>{sub_block('norm1', att, 'shortcut1')}{_arrow()}"
        f"{sub_block('norm2', ff, 'shortcut2')}</div>")
    parts.append(_arrow(f"(batch, T, {d})"))
    if cfg.norm_placement == "none":
        parts.append(box("drop", t("model.no_final_norm", "No final norm"),
                          t("model.identity_norm_placement_none", "Identity (norm_placement none)"),
                          None, "final_norm", walk("final_norm")))
    else:
        parts.append(box("norm", t("model.final_layernorm", "Final LayerNorm"),
                          t("model.features", "{d} features", d=d),
                          _params(c, "final_norm"), "final_norm", walk("final_norm")))
    parts.append(_arrow())
    tied = t("model.tied_tok_emb_shares", ", tied to tok_emb (shares its weights)") \
        if cfg.tie_weights else ""
    parts.append(box("out", t("model.output_head", "Output head"), f"Linear {d} → {v:,}{tied}",
                      _params(c, "output_head"), "out_head", walk("out_head")))
    parts += [_arrow(), f"<div style=\"{_SMALL};text-align:center\">"
                        + html.escape(t("model.logits_shape_batch_t",
                                        "logits, shape (batch, T, {v:,})", v=v)) + "</div>"]
    if c:
        parts.append("<div style=\"margin-top:8px\">" + t(
            "model.total_parameters", "<b>Total:</b> {n} parameters ({total:,})",
            n=human_count(c.total), total=c.total) + "</div>")
    return ("<div style=\"font-family:Arial,Helvetica,sans-serif;font-size:16px;"
            "line-height:1.4;color:#222222;max-width:760px\">" + "".join(parts) + "</div>")


# The two diagrams' page layout (the app adds it to its style sheet).
ARCHITECTURE_CSS = """
.cmp-diff {background: #fff8e1; border: 2px solid #e69f00; border-radius: 8px;
           padding: 4px 12px; margin-bottom: 8px; font-size: 16px;}
.cmp-diff ul {margin: 2px 0 0 0; padding-left: 1.2em;}
.cmp-pair {display: grid; grid-template-columns: 1fr 1fr; gap: 10px;}
.cmp-arch {min-width: 0; font-size: 14px;}
.cmp-arch > h4 {margin: 0 0 4px 0; font-size: 18px;}
.cmp-arch > div {font-size: 14px !important;}
"""
