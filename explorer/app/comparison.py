"""Two models side by side: the names every view gives them ("A · post-LN", "B · pre-LN"), the
rule that both must fit the memory budget together, and B as A with an intervention."""
from __future__ import annotations

import unicodedata
from dataclasses import replace

from ..book.errors import ExplorerError, Message
from ..book.knobs import BY_FIELD, short_name
from ..probes.compare import compare_configs
from ..book.config import GPT2_SIZES
from ..probes.interventions import Interventions
from ..runtime.sources import ModelKey, WeightsSource
from .i18n import say, t
from .session import Made, Model
from .shared import CACHE, check_model
from ..probes.compare import NAMES

MAX_NAMED_FIELDS = 2
MAX_CAPTION_CHARS = 34     # in the width of a Latin letter (a Chinese character takes two)


def _width(text: str) -> int:
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def _clipped(text: str, most: int) -> str:
    if _width(text) <= most:
        return text
    while _width(text) > most - 1:
        text = text[:-1]
    return text + "…"


def _what(keys, side: int) -> str:
    differences = sorted(compare_configs(keys[0].config, keys[1].config).differences,
                         key=lambda d: BY_FIELD[d[0]].naming)
    if differences:
        shown = [say(short_name(field, values[side])) for field, *values in differences]
        return (t("names.joiner", ", ").join(shown[:MAX_NAMED_FIELDS])
                + ("…" if len(shown) > MAX_NAMED_FIELDS else ""))
    if keys[0] == keys[1]:
        return t("names.same", "the same model")
    if keys[0].weights_key == keys[1].weights_key:      # an intervention: A and A knocked out
        if not keys[side].interventions:
            return t("names.as_is", "as it is")
        interventions = keys[side].interventions
        text = say(interventions.describe())
        if _width(text) > 2 * MAX_CAPTION_CHARS and all(i.info.patch for i in interventions):
            # (a patch is no knock-out: name its parts, without the clean prompt's ids)
            return _clipped(t("names.patched", "patched from the clean prompt: {parts}",
                              parts="; ".join(str(i).split(" from ")[0].split(" ", 1)[1]
                                              for i in interventions)), 2 * MAX_CAPTION_CHARS)
        return text if _width(text) <= 2 * MAX_CAPTION_CHARS else (
            t("names.knocked_out", "knocked out: {n} parts", n=len(interventions)))
    text = say(keys[side].source.caption)
    return _clipped(text, MAX_CAPTION_CHARS)


def names(session) -> tuple[str, ...] | None:
    """The models' names for legends and panel titles; None for one model (it needs none)."""
    keys = session.keys
    if len(keys) < 2:
        return None
    return tuple(t("names.model", "{name} · {what}", name=name, what=_what(keys, side))
                 for side, name in enumerate(NAMES[:len(keys)]))


def check_beside(session, key: ModelKey) -> None:
    """Before ``key`` becomes model A: refuse it if it cannot be in memory beside model B."""
    b = session.b_beside(key)
    if b is not None:
        CACHE.check_together([key, b.key])


def check_pretrained_beside(session, cfg, device, dtype, size_name: str) -> None:
    """As ``check_beside``, before a pretrained GPT-2 is downloaded (its key is not known yet):
    the same GPT-2 as B counts once, and a knock-out B not at all (it goes with the old A, or
    is this same model)."""
    if not session.comparing or session.models[1].key.interventions:
        return
    b = session.models[1].key
    repo = GPT2_SIZES[size_name].repo_id
    if b.source.kind == "pretrained" and b.source.repo_id == repo and b.dtype == dtype:
        return
    CACHE.check_together([ModelKey(cfg, None, str(device), dtype,
                                   WeightsSource("pretrained", repo_id=repo)), b])


def intervened(session, interventions: Interventions) -> None:
    """Model B becomes model A run with ``interventions`` (A's weights, not a copy): a
    knock-out, or a patch from a clean prompt."""
    check_model(session)
    a = session.models[0]
    interventions = interventions.check(a.key.config)
    if not interventions:
        raise ExplorerError("knock.nothing", "Nothing to knock out: add a part (or write one, "
                                             "such as 'zero trf_blocks[0].att head 1').")
    key = replace(a.key, interventions=interventions)
    session.with_models((a, Model(key, Made("intervened", Message(
        "knock.b_what", "A with {what}", what=interventions.describe())))))
