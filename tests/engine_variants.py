"""Small configs covering every architecture variant of the engine, shared by the engine tests.

The choice values come from ``explorer.book.config`` (one source of truth), so a new choice there is
covered here without editing this file.
"""

from explorer.book.config import ACTIVATIONS, NORM_PLACEMENTS, POS_ENCODINGS, GPTConfig

# Small enough that building and running a model takes milliseconds; head size 8 (even, for RoPE).
SMALL = GPTConfig(vocab_size=101, context_length=16, emb_dim=32, n_heads=4, n_layers=2,
                  drop_rate=0.0)


def _variants() -> dict[str, GPTConfig]:
    out = {"book": SMALL}
    for name in NORM_PLACEMENTS[1:]:
        out[f"norm_placement={name}"] = SMALL.replace(norm_placement=name)
    for name in ACTIVATIONS[1:]:
        out[f"activation={name}"] = SMALL.replace(activation=name)
    for name in POS_ENCODINGS[1:]:
        out[f"pos_encoding={name}"] = SMALL.replace(pos_encoding=name)
    out["shortcut=False"] = SMALL.replace(shortcut=False)
    out["ff_expansion=2"] = SMALL.replace(ff_expansion=2)
    out["tie_weights=True"] = SMALL.replace(tie_weights=True)
    out["qkv_bias=True"] = SMALL.replace(qkv_bias=True)
    # Everything away from the book at once.
    out["all-changed"] = SMALL.replace(norm_placement="post", shortcut=False, activation="silu",
                                       ff_expansion=3, tie_weights=True, pos_encoding="rope",
                                       qkv_bias=True)
    return out


VARIANTS = _variants()
VARIANT_IDS = list(VARIANTS)
