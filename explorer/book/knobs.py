"""One row per config knob: every fact the explorer needs about a ``GPTConfig`` field, in one
table. A new knob is its field in ``GPTConfig`` (with the model code that uses it), its row
here, and its texts in the catalogues; the Build tab's widget, the checks, a link's syntax, the
names of compared models, the diagram's outline and the C step's support all follow from the
row (``tests/test_knobs.py`` holds the table complete).

The texts are English with stable ids (``errors.Message``), said in the page's language by the
app.
"""
from __future__ import annotations

from dataclasses import dataclass

from .config import ACTIVATIONS, NORM_PLACEMENTS, POS_ENCODINGS
from .errors import Message as M


@dataclass(frozen=True)
class Knob:
    field: str              # the GPTConfig field: its /build parameter and the widget's elem_id
    kind: str               # "count" (a whole number ≥ 1), "rate" (in [0, 1)), "choice", "flag"
    label: M                # the widget's label
    form_row: int           # the Build tab's row (knobs with the same row sit side by side)
    naming: int             # which knob names a model first (the chapter's variants first)
    parts: frozenset        # what the chapter's diagram outlines when the knob differs
    short: object           # a model's short name by this knob: {value: Message} or a Message
                            # with {n} (comparisons: "A · post-LN", "B · 6 layers")
    fast_step: bool = True  # the C decode step computes every value of it
    choices: tuple = ()     # "choice": the allowed values, the book's first


KNOBS: tuple[Knob, ...] = (
    Knob("vocab_size", "count", M("knob.vocab_size", "vocab_size"), form_row=1, naming=10,
         parts=frozenset({"tok_emb", "out_head"}), short=M("short.vocab", "vocab {n:,}")),
    Knob("context_length", "count", M("knob.context_length", "context_length"), form_row=1,
         naming=9, parts=frozenset({"pos_emb"}), short=M("short.context", "context {n:,}")),
    # every part's width: outlining them all would point at nothing
    Knob("emb_dim", "count", M("knob.emb_dim", "emb_dim"), form_row=2, naming=8,
         parts=frozenset(), short=M("short.emb_dim", "emb_dim {n}")),
    Knob("n_heads", "count", M("knob.n_heads", "n_heads"), form_row=2, naming=7,
         parts=frozenset({"att"}), short=M("short.heads", "{n} heads")),
    Knob("n_layers", "count", M("knob.n_layers", "n_layers"), form_row=2, naming=6,
         parts=frozenset({"trf_blocks"}), short=M("short.layers", "{n} layers")),
    Knob("drop_rate", "rate", M("knob.drop_rate", "drop_rate"), form_row=3, naming=12,
         parts=frozenset({"drop_emb", "drop_shortcut"}), short=M("short.dropout",
                                                                 "dropout {n:g}")),
    Knob("qkv_bias", "flag", M("knob.qkv_bias", "qkv_bias"), form_row=6, naming=11,
         parts=frozenset({"att"}),
         short={True: M("short.qkv_bias", "qkv bias"), False: M("short.no_qkv_bias",
                                                               "no qkv bias")}),
    Knob("norm_placement", "choice", M("knob.norm_placement", "LayerNorm placement"),
         form_row=4, naming=0, parts=frozenset({"norm1", "norm2", "final_norm", "trf_blocks"}),
         choices=NORM_PLACEMENTS,
         short={"pre": M("short.pre_ln", "pre-LN"), "post": M("short.post_ln", "post-LN"),
                "none": M("short.no_ln", "no LayerNorm")}),
    Knob("shortcut", "flag", M("knob.shortcut", "shortcut connections"), form_row=6, naming=1,
         parts=frozenset({"add", "trf_blocks"}),
         short={True: M("short.shortcut", "shortcut"), False: M("short.no_shortcut",
                                                               "no shortcut")}),
    Knob("activation", "choice", M("knob.activation", "activation"), form_row=4, naming=2,
         parts=frozenset({"ff"}), choices=ACTIVATIONS,
         short={name: M(f"short.{name}", name) for name in ACTIVATIONS}),
    Knob("ff_expansion", "count", M("knob.ff_expansion", "ff_expansion"), form_row=3, naming=5,
         parts=frozenset({"ff"}), short=M("short.ff", "feed-forward ×{n}")),
    Knob("tie_weights", "flag", M("knob.tie_weights", "tie out_head to tok_emb"), form_row=6,
         naming=4, parts=frozenset({"out_head"}),
         short={True: M("short.tied", "tied head"), False: M("short.untied", "untied head")}),
    Knob("pos_encoding", "choice", M("knob.pos_encoding", "position encoding"), form_row=5,
         naming=3, parts=frozenset({"pos_emb", "att"}), choices=POS_ENCODINGS,
         short={"learned": M("short.learned", "learned positions"),
                "rope": M("short.rope", "RoPE")}),
)
BY_FIELD = {knob.field: knob for knob in KNOBS}


def short_name(field: str, value) -> M:
    """How ``value`` of knob ``field`` names a model ("post-LN", "6 layers")."""
    short = BY_FIELD[field].short
    if isinstance(short, dict):
        return short[value]
    return M(short.id, short.text, n=value)
