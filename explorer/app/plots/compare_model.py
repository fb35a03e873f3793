"""Two models' parameters side by side (grouped bars), and their two architecture diagrams with
the parts that differ outlined, under a list of the config fields that differ."""
from __future__ import annotations

import html

import plotly.graph_objects as go

from ...book.config import ParameterCount
from ...probes.compare import compare_configs
from ..i18n import t, translate
from .labels import human_count
from .model import architecture_html
from .style import BLUE, FONT_SIZE, VERMILLION, finish

COLORS = (BLUE, VERMILLION)   # model A, model B: in every comparison figure
# The parts of the diagram each config field shapes (architecture_html's ``highlight``).
PARTS_OF_FIELD = {
    "vocab_size": {"tok_emb", "out_head"},
    "context_length": {"pos_emb"},
    "emb_dim": set(),   # every part's width: outlining them all would point at nothing
    "n_heads": {"att"},
    "n_layers": {"trf_blocks"},
    "drop_rate": {"drop_emb", "drop_shortcut"},
    "qkv_bias": {"att"},
    "norm_placement": {"norm1", "norm2", "final_norm", "trf_blocks"},
    "shortcut": {"add", "trf_blocks"},
    "activation": {"ff"},
    "ff_expansion": {"ff"},
    "tie_weights": {"out_head"},
    "pos_encoding": {"pos_emb", "att"},
}


def parameter_pair_figure(counts_a: ParameterCount, counts_b: ParameterCount,
                          names: tuple[str, str]) -> go.Figure:
    """Parameters per component of both models as grouped horizontal bars (a component only
    one model has shows one bar), the largest component on top."""
    parts_a, parts_b = counts_a.breakdown(), counts_b.breakdown()
    components = [c for c in dict.fromkeys([*parts_a, *parts_b])
                  if parts_a.get(c, 0) or parts_b.get(c, 0)]
    components.sort(key=lambda c: max(parts_a.get(c, 0), parts_b.get(c, 0)))
    labels = [t(c) for c in components]
    fig = go.Figure()
    # plotly draws the first trace of a horizontal group at the bottom: B first, so A is on top
    for name, parts, color in ((names[1], parts_b, COLORS[1]), (names[0], parts_a, COLORS[0])):
        values = [parts.get(c, 0) for c in components]
        fig.add_trace(go.Bar(
            x=values, y=labels, orientation="h", name=name, marker_color=color,
            text=[human_count(v) for v in values], textposition="outside", cliponaxis=False,
            textfont=dict(size=FONT_SIZE),
            hovertemplate=name + ": %{y}, " + t("%{x:,} parameters") + "<extra></extra>"))
    most = max(max(parts_a.values()), max(parts_b.values()), 1)
    fig.update_xaxes(range=[0, most * 1.35], tickformat="~s")
    fig.update_layout(barmode="group", bargap=0.25, bargroupgap=0.05,
                      legend=dict(traceorder="reversed"))
    diff = counts_a.total - counts_b.total
    notes = [t("A: {a} · B: {b} · A − B: {diff}", a=human_count(counts_a.total),
               b=human_count(counts_b.total),
               diff=t("none") if diff == 0 else ("+" if diff > 0 else "−")
               + human_count(abs(diff)))]
    return finish(fig, t("Parameters of A and B"), 200 + 70 * len(components), notes=notes,
                  x_title=t("parameters"), y_title=t("component"), legend=True,
                  margin=dict(r=40))


def differing_parts(cfg_a, cfg_b) -> frozenset:
    """The parts of the diagram that differ between the two configs."""
    parts = set()
    for field, _, _ in compare_configs(cfg_a, cfg_b).differences:
        parts |= PARTS_OF_FIELD.get(field, set())
    return frozenset(parts)


def architecture_pair_html(keys, counts, names, same_weights: bool) -> str:
    """The two diagrams side by side under the list of config fields that differ; each part
    shaped by such a field is outlined in both diagrams."""
    key_a, key_b = keys
    differences = compare_configs(key_a.config, key_b.config).differences
    marked = differing_parts(key_a.config, key_b.config)
    if differences:
        rows = "".join(f"<li><code>{html.escape(field)}</code>: A <b>{html.escape(str(a))}</b>"
                       f" · B <b>{html.escape(str(b))}</b></li>" for field, a, b in differences)
        head = (f"<b>{html.escape(t('What differs'))}</b> "
                + html.escape(t("(outlined in both diagrams)")) + f"<ul>{rows}</ul>")
    elif same_weights:
        head = html.escape(t("A and B are the same model: nothing differs."))
    else:
        head = html.escape(t("Same architecture, different weights: A {a}; B {b}.",
                             a=translate(key_a.source.caption),
                             b=translate(key_b.source.caption)))
    columns = "".join(
        f"<div class=\"cmp-arch\"><h4 style=\"color:{color}\">{html.escape(name)}</h4>"
        f"{architecture_html(key.config, count, highlight=marked)}</div>"
        for key, count, name, color in zip(keys, counts, names, COLORS))
    return (f"<div class=\"cmp-diff\">{head}</div>"
            f"<div class=\"cmp-pair\">{columns}</div>")


# The comparison's page layout (the app adds it to its style sheet).
COMPARE_MODEL_CSS = """
.cmp-diff {background: #fff8e1; border: 2px solid #e69f00; border-radius: 8px;
           padding: 4px 12px; margin-bottom: 8px; font-size: 16px;}
.cmp-diff ul {margin: 2px 0 0 0; padding-left: 1.2em;}
.cmp-pair {display: grid; grid-template-columns: 1fr 1fr; gap: 10px;}
.cmp-arch {min-width: 0; font-size: 14px;}
.cmp-arch > h4 {margin: 0 0 4px 0; font-size: 18px;}
.cmp-arch > div {font-size: 14px !important;}
"""
