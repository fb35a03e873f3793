"""A second model pinned beside the session's own, for comparing the two in every view.

The session's state keeps the pinned model as it keeps its own: by key. ``pinned_key`` and
``pinned_status`` (what the status line says of it) stay when the session builds, loads or
trains a new model; the results of the pinned model (``pinned_trace``, ``pinned_lens``,
``pinned_gen_ids``, ``pinned_gen_text``) sit beside the session model's (``trace``, ``lens``,
``gen_ids``, ``gen_text``) and go when those go. Model A is the session's model (what every
single-model view shows), model B the pinned one; differences are A − B.

Both models come from the one shared cache, within its memory budget: a pair that does not fit
is refused before anything is built (``check_pair``). A trained model, which no key can
rebuild, is held for the session under a second owner while it is pinned (``pinned_owner``).
"""
from __future__ import annotations

import gradio as gr

from ..book.config import GPT2_SIZES
from ..probes.compare import compare_configs
from ..runtime.sources import ModelKey, WeightsSource
from . import i18n
from .i18n import t
from .shared import CACHE

PINNED = ("pinned_key", "pinned_status")   # what a new model A keeps of the pin
PINNED_RESULTS = ("pinned_trace", "pinned_lens", "pinned_gen_ids", "pinned_gen_text")


def comparing(state) -> bool:
    return bool(state) and state.get("pinned_key") is not None and "key" in state


def pinned_key(state):
    return (state or {}).get("pinned_key")


def carried(state) -> dict:
    """The pin, for the state of a new model A: its key and status, none of its results."""
    return {name: state[name] for name in PINNED if state and state.get(name) is not None}


def without_pin(state) -> dict:
    """The session's state with nothing pinned (and none of the pinned model's results)."""
    return {k: v for k, v in (state or {}).items() if k not in PINNED + PINNED_RESULTS}


def pinned_owner(session_hash: str) -> str:
    """The cache's holder name for a session's pinned trained model (the session's own
    trained model is held under the session's name)."""
    return f"{session_hash}#pinned"


def pair_of(state):
    """(model A, model B) of a comparing session, both in memory within the budget."""
    if not comparing(state):
        raise gr.Error(t("No model is pinned: pin one in the Build tab first."))
    model_a, model_b = CACHE.get_together([state["key"], state["pinned_key"]])
    return model_a, model_b


def check_pair(state, key: ModelKey):
    """Before building or loading ``key`` as the new model A: refuse it if it cannot be in
    memory beside the pinned model (ValueError with the MB needed and allowed)."""
    if pinned_key(state) is not None:
        CACHE.check_together([key, state["pinned_key"]])


def check_pretrained_pair(state, cfg, device, dtype, size_name: str):
    """As ``check_pair``, before a pretrained GPT-2 is downloaded (its key is not known yet):
    the same GPT-2 as the pinned one counts once."""
    pinned = pinned_key(state)
    repo = GPT2_SIZES[size_name].repo_id
    if pinned is None or (pinned.source.kind == "pretrained" and pinned.source.repo_id == repo
                          and pinned.dtype == dtype):
        return
    CACHE.check_together([ModelKey(cfg, None, str(device), dtype,
                                   WeightsSource("pretrained", repo_id=repo)), pinned])


# ---------------------------------------------------------------------------------------------
# Names on the page. "A" and "B" with what tells them apart: the config fields that differ
# ("A · post-LN", "B · pre-LN"), else their weights.
SHORT = {
    "norm_placement": {"pre": "pre-LN", "post": "post-LN", "none": "no LayerNorm"},
    "shortcut": {True: "shortcut", False: "no shortcut"},
    "tie_weights": {True: "tied head", False: "untied head"},
    "pos_encoding": {"learned": "learned positions", "rope": "RoPE"},
    "qkv_bias": {True: "qkv bias", False: "no qkv bias"},
}
SHORT_NUMBERS = {"n_layers": "{n} layers", "n_heads": "{n} heads", "emb_dim": "emb_dim {n}",
                 "ff_expansion": "feed-forward ×{n}", "vocab_size": "vocab {n:,}",
                 "context_length": "context {n:,}", "drop_rate": "dropout {n:g}"}
# The fields that name a model first: the chapter's variants, then its sizes.
NAMING_ORDER = ("norm_placement", "shortcut", "activation", "pos_encoding", "tie_weights",
                "ff_expansion", "n_layers", "n_heads", "emb_dim", "context_length", "vocab_size",
                "qkv_bias", "drop_rate")
MAX_NAMED_FIELDS = 2
MAX_CAPTION_CHARS = 34


def _short(field, value) -> str:
    if field in SHORT:
        return t(SHORT[field][value])
    if field in SHORT_NUMBERS:
        return t(SHORT_NUMBERS[field], n=value)
    return str(value)      # activation: gelu, relu, silu (names, as the Build tab shows them)


def _what(key_a, key_b, side) -> str:
    differences = sorted(compare_configs(key_a.config, key_b.config).differences,
                         key=lambda d: NAMING_ORDER.index(d[0]))
    if differences:
        shown = [_short(field, values[side]) for field, *values in differences]
        return ", ".join(shown[:MAX_NAMED_FIELDS]) + ("…" if len(shown) > MAX_NAMED_FIELDS
                                                      else "")
    if key_a == key_b:
        return t("the same model")
    text = i18n.translate((key_a, key_b)[side].source.caption)
    return text if len(text) <= MAX_CAPTION_CHARS else text[:MAX_CAPTION_CHARS - 1] + "…"


def names(state) -> tuple[str, str]:
    """The two models' names for legends and panel titles: ("A · post-LN", "B · pre-LN")."""
    key_a, key_b = state["key"], state["pinned_key"]
    return (t("A · {what}", what=_what(key_a, key_b, 0)),
            t("B · {what}", what=_what(key_a, key_b, 1)))


def comparison(state):
    return compare_configs(state["key"].config, state["pinned_key"].config)
