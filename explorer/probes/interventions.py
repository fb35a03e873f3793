"""Interventions as plain data: what to knock out of a model, named the way the book names the
part, with a short string form for links and the API, checked against a model's config.

One row per kind (``KINDS``). The string form is ``<verb> <part>[ head(s) <list>]``, several
joined by ``;``::

    zero trf_blocks[3].att head 5          one head's context vector set to 0 (before out_proj)
    mean trf_blocks[3].att heads 1,5       heads replaced by their running mean over positions
    zero trf_blocks[3].att                 the attention sub-layer skipped (its output 0)
    zero trf_blocks[3].ff                  the feed-forward sub-layer skipped
    identity trf_blocks[2].norm1           norm1 (or norm2) replaced by the identity
    freeze trf_blocks[2].norm2             LayerNorm frozen to mean statistics
    remove trf_blocks[3].shortcut          both shortcut connections of the block removed
    remove trf_blocks[3].att.shortcut      the shortcut around att only (ff.shortcut: around ff)
    relu trf_blocks[3].ff                  the feed-forward's GELU replaced by ReLU
    zero pos_emb                           the positional embedding dropped
    identity final_norm                    the final LayerNorm removed (freeze final_norm too)
    patch trf_blocks[3].att head 5 from 464,3290   that head's context vector from a run of
                                           the clean ids (also .att, .ff, .resid_pre; at 7)

``trf_blocks[*]`` means every block. Exactly what each does, at which probe point, and the two
running means (``mean``, ``freeze``): ``explorer.probes.intervening``.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from ..book.config import GPTConfig
from ..book.errors import ExplorerError, Text


@dataclass(frozen=True)
class Kind:
    kind: str
    verb: str          # the first word of the string form
    part: str          # the part of a block (trf_blocks[i].<part>), or "final_norm", "pos_emb"
    heads: bool        # names heads of the attention (a list of them is required)
    text: tuple        # (message id, English) of ``describe``; fields part, block, heads
    many: tuple = ()   # (id, English) for several heads
    patch: bool = False  # takes its values from a run of other ids (``from``; ``at`` a position)


KINDS = (
    Kind("zero_pos_emb", "zero", "pos_emb", False,
         ("intervention.zero_pos_emb", "pos_emb dropped (the positional embedding set to 0)")),
    Kind("zero_heads", "zero", "att", True, ("intervention.zero_head", "{part} head {heads} "
         "zeroed"), ("intervention.zero_heads", "{part} heads {heads} zeroed")),
    Kind("mean_heads", "mean", "att", True, ("intervention.mean_head", "{part} head {heads} "
         "replaced by its mean"), ("intervention.mean_heads", "{part} heads {heads} replaced "
         "by their means")),
    Kind("zero_att", "zero", "att", False,
         ("intervention.zero_att", "{part} skipped (its output set to 0)")),
    Kind("identity_norm1", "identity", "norm1", False,
         ("intervention.identity_norm1", "{part} replaced by the identity")),
    Kind("freeze_norm1", "freeze", "norm1", False,
         ("intervention.freeze_norm1", "{part} frozen to mean statistics")),
    Kind("remove_att_shortcut", "remove", "att.shortcut", False,
         ("intervention.remove_att_shortcut", "the shortcut around {block}.att removed")),
    Kind("zero_ff", "zero", "ff", False,
         ("intervention.zero_ff", "{part} skipped (its output set to 0)")),
    Kind("relu_ff", "relu", "ff", False,
         ("intervention.relu_ff", "{part}: activation replaced by ReLU")),
    Kind("identity_norm2", "identity", "norm2", False,
         ("intervention.identity_norm2", "{part} replaced by the identity")),
    Kind("freeze_norm2", "freeze", "norm2", False,
         ("intervention.freeze_norm2", "{part} frozen to mean statistics")),
    Kind("remove_ff_shortcut", "remove", "ff.shortcut", False,
         ("intervention.remove_ff_shortcut", "the shortcut around {block}.ff removed")),
    Kind("remove_shortcut", "remove", "shortcut", False,
         ("intervention.remove_shortcut", "both shortcut connections of {block} removed")),
    Kind("patch_heads", "patch", "att", True, ("intervention.patch_head", "{part} head {heads} "
         "patched from the clean prompt ({where})"), ("intervention.patch_heads", "{part} "
         "heads {heads} patched from the clean prompt ({where})"), patch=True),
    Kind("patch_att", "patch", "att", False, ("intervention.patch_att", "{part} output "
         "patched from the clean prompt ({where})"), patch=True),
    Kind("patch_ff", "patch", "ff", False, ("intervention.patch_ff", "{part} output "
         "patched from the clean prompt ({where})"), patch=True),
    Kind("patch_resid", "patch", "resid_pre", False,
         ("intervention.patch_resid", "the stream entering {block} patched from the clean "
          "prompt ({where})"), patch=True),
    Kind("identity_final_norm", "identity", "final_norm", False,
         ("intervention.identity_final_norm", "final_norm replaced by the identity")),
    Kind("freeze_final_norm", "freeze", "final_norm", False,
         ("intervention.freeze_final_norm", "final_norm frozen to mean statistics")),
)
KINDS_BY_NAME = {k.kind: k for k in KINDS}
TAKE_HEADS_OUTPUT = ("zero_heads", "mean_heads", "zero_att")   # the head's pattern stays
MODEL_PARTS = ("pos_emb", "final_norm")          # parts of GPTModel itself, not of a block
_ORDER = {k.kind: i for i, k in enumerate(KINDS)}
# Two of these on one part cannot both apply.
_EXCLUSIVE = [{"identity_norm1", "freeze_norm1"}, {"identity_norm2", "freeze_norm2"},
              {"identity_final_norm", "freeze_final_norm"}, {"zero_heads", "mean_heads"}]
_PARTNERS = {kind: (pair - {kind}).pop() for pair in _EXCLUSIVE for kind in pair}

# The limits of the string form, checked before any of it is read (the interventions box
# and the API take any text). GPT-2 XL written one head a part is 1,200 parts of ~32
# characters; the longest tidy form of any model here is far shorter.
MAX_INTERVENTIONS = 2_000        # parts joined by ";"
MAX_INTERVENTION_CHARS = 100_000
MAX_NUMBER_DIGITS = 30           # a block or head number (int() itself refuses 4,300 digits)
# Each clean prompt a model's patches come from costs a forward pass of its own whenever the
# model runs: a few, not one per intervention.
MAX_PATCH_SOURCES = 4


def _whole(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(frozen=True)
class Intervention:
    """One knock-out: ``kind`` (a row of ``KINDS``), the block ``layer`` (None: every block;
    always None for pos_emb and final_norm) and, for the head kinds, the ``heads``."""

    kind: str
    layer: int | None = None
    heads: tuple[int, ...] = ()
    position: int | None = None      # patch: the one position patched (None: every position)
    source: tuple[int, ...] = ()     # patch: the token ids of the run the values come from

    def __post_init__(self):
        if self.kind not in KINDS_BY_NAME:
            raise ExplorerError("intervention.unknown_kind", "Unknown intervention {kind!r}; the "
                                "kinds are {kinds}.", kind=self.kind, kinds=", ".join(_ORDER))
        info = KINDS_BY_NAME[self.kind]
        heads = (self.heads,) if _whole(self.heads) else tuple(self.heads)
        if not all(_whole(h) and h >= 0 for h in heads) or (self.layer is not None and not (
                _whole(self.layer) and self.layer >= 0)):
            raise ExplorerError("intervention.not_whole", "Blocks and heads are counted by whole "
                                "numbers from 0 (got layer {layer!r}, heads {heads}).",
                                layer=self.layer, heads=", ".join(str(h) for h in heads)
                                or "none")
        if info.heads and not heads:
            raise ExplorerError("intervention.needs_heads", "{verb} {part} needs the heads to "
                                "change, e.g. “{verb} trf_blocks[0].att head 0”.", verb=info.verb,
                                part=self.part)
        if heads and not info.heads:
            raise ExplorerError("intervention.no_heads_here", "{kind} takes no heads.",
                                kind=f"{info.verb} {info.part}")
        if info.part in MODEL_PARTS and self.layer is not None:
            raise ExplorerError("intervention.not_in_a_block", "{part} belongs to the model, not "
                                "to a block: give no layer.", part=info.part)
        object.__setattr__(self, "heads", tuple(sorted(set(heads))))
        self._check_patch(info)

    def _check_patch(self, info) -> None:
        source = tuple(self.source) if not isinstance(self.source, str) else None
        position = 0 if self.position is None else self.position
        if source is None or not all(_whole(i) and i >= 0 for i in (*source, position)):
            raise ExplorerError("intervention.patch_not_whole", "A patch's position and the "
                                "token ids it comes from are whole numbers from 0.")
        if info.patch and not source:
            raise ExplorerError("intervention.patch_needs_source", "{verb} {part} needs the "
                                "token ids of the clean prompt it takes its values from, e.g. "
                                "“patch trf_blocks[0].att head 1 from 464,3290,318”.",
                                verb=info.verb, part=self.part)
        if not info.patch and (source or self.position is not None):
            raise ExplorerError("intervention.no_source_here", "{kind} takes no position and "
                                "no “from”: only patches do.", kind=f"{info.verb} {info.part}")
        object.__setattr__(self, "source", source)

    @property
    def info(self) -> Kind:
        return KINDS_BY_NAME[self.kind]

    @property
    def block(self) -> str:
        return "trf_blocks[{}]".format("*" if self.layer is None else self.layer)

    @property
    def part(self) -> str:
        """The part by the book's name, e.g. ``trf_blocks[3].att``, ``final_norm``."""
        part = self.info.part
        return part if part in MODEL_PARTS else f"{self.block}.{part}"

    def layers(self, n_layers: int) -> range:
        """The blocks it changes."""
        if self.layer is None:
            return range(n_layers) if self.info.part not in MODEL_PARTS else range(0)
        return range(self.layer, self.layer + 1)

    def __str__(self) -> str:
        heads = ""
        if self.heads:
            heads = (" head " if len(self.heads) == 1 else " heads ") + ",".join(
                map(str, self.heads))
        patch = ""
        if self.info.patch:
            at = "" if self.position is None else f" at {self.position}"
            patch = f"{at} from {','.join(map(str, self.source))}"
        return f"{self.info.verb} {self.part}{heads}{patch}"

    def describe(self) -> Text:
        """What it does, as a message the page can say in its language."""
        info = self.info
        message_id, text = info.many if len(self.heads) > 1 else info.text
        where = (Text("intervention.every_position", "every position") if self.position is None
                 else Text("intervention.at_position", "position {position}",
                           position=self.position))
        return Text(message_id, text, part=self.part, block=self.block,
                    heads=", ".join(map(str, self.heads)), where=where)

    def check(self, cfg) -> None:
        """Raise a message a student can act on where this does not apply to ``cfg``."""
        cfg = GPTConfig.from_dict(cfg)
        part = self.info.part
        if self.layer is not None and self.layer >= cfg.n_layers:
            raise ExplorerError("intervention.no_layer", "{block} does not exist: this model has "
                                "blocks 0 to {last}.", block=self.block, last=cfg.n_layers - 1)
        bad = [h for h in self.heads if h >= cfg.n_heads]
        if bad:
            raise ExplorerError("intervention.no_head", "Head {head} does not exist: each "
                                "attention of this model has heads 0 to {last}.", head=bad[0],
                                last=cfg.n_heads - 1)
        if "norm" in part and cfg.norm_placement == "none":
            raise ExplorerError("intervention.no_norm", "This model has no LayerNorm "
                                "(norm_placement “none”): {part} is the identity already.",
                                part=self.part)
        if "shortcut" in part and not cfg.shortcut:
            raise ExplorerError("intervention.no_shortcut", "This model has no shortcut "
                                "connections (shortcut off): there is none to remove.")
        if part == "pos_emb" and cfg.pos_encoding != "learned":
            raise ExplorerError("intervention.no_pos_emb", "This model has no pos_emb: with "
                                "RoPE the positions are rotated into the queries and keys "
                                "inside attention, so there is no positional embedding to "
                                "drop.")
        if self.source and (len(self.source) > cfg.context_length
                            or max(self.source) >= cfg.vocab_size):
            raise ExplorerError("intervention.patch_source", "The clean prompt of a patch must "
                                "be at most {context_length} token ids below {vocab_size} (this "
                                "model's context and vocabulary).",
                                context_length=cfg.context_length, vocab_size=cfg.vocab_size)
        if self.position is not None and self.position >= cfg.context_length:
            raise ExplorerError("intervention.patch_position", "Position {position} is beyond this"
                                " model's context ({context_length} positions).",
                                position=self.position, context_length=cfg.context_length)
        if self.kind == "relu_ff" and cfg.activation == "relu":
            raise ExplorerError("intervention.already_relu", "The feed-forward activation of "
                                "this model is ReLU already.")


def _sort_key(item: Intervention):
    part = item.info.part
    place = 0 if part == "pos_emb" else 2 if part == "final_norm" else 1
    return (place, -1 if item.layer is None else item.layer, _ORDER[item.kind], item.heads,
            -1 if item.position is None else item.position, item.source)


class Interventions(tuple):
    """Several interventions, applied together: a tuple in a fixed order (the model's, from
    pos_emb to final_norm), so equal sets are equal and say the same string. Head kinds on one
    block merge (``zero`` head 1 and head 5 = heads 1,5); one that the same kind on every
    block already does goes (``freeze trf_blocks[0].norm1`` beside ``freeze
    trf_blocks[*].norm1``); two that cannot both apply to one part (identity and freeze of one
    norm, zero and mean of one head) are refused. Linear in the number of items."""

    def __new__(cls, items=()):
        items = [items] if isinstance(items, Intervention) else list(items)
        for item in items:
            if not isinstance(item, Intervention):
                raise ExplorerError("intervention.not_one", "Expected an Intervention, got "
                                    "{kind}.", kind=type(item).__name__)
        found = sorted(_merged(items), key=_sort_key)
        sources = {item.source for item in found if item.source}
        if len(sources) > MAX_PATCH_SOURCES:
            raise ExplorerError("intervention.patch_sources", "These patches come from {n} "
                                "different clean prompts; patch from at most {most} (each costs "
                                "a forward pass).", n=len(sources), most=MAX_PATCH_SOURCES)
        _refuse_clashes(found)
        return super().__new__(cls, found)

    @classmethod
    def of(cls, value) -> "Interventions":
        """Interventions from themselves, one, a list of them, or the string form (None: none)."""
        if value is None:
            return cls()
        if isinstance(value, str):
            return cls.parse(value)
        return value if isinstance(value, cls) else cls(value)

    @classmethod
    def parse(cls, text: str) -> "Interventions":
        """``"zero trf_blocks[3].att head 5; identity trf_blocks[2].norm1"`` -> Interventions."""
        if not isinstance(text, str):
            raise ExplorerError("intervention.not_text", "Interventions are written as text, "
                                "e.g. “zero trf_blocks[3].att head 5” (got {kind}).",
                                kind=type(text).__name__)
        return cls(_parse_one(item) for item in split_checked(text))

    def __str__(self) -> str:
        return "; ".join(map(str, self))

    def __repr__(self) -> str:
        return f"Interventions({str(self)!r})"

    def describe(self) -> Text:
        """All of them as one message (the page says it in its language)."""
        if not self:
            return Text("intervention.none", "no intervention")
        return _described(self)

    def name(self) -> str:
        """In English, e.g. "trf_blocks[3].att head 5 zeroed"."""
        return str(self.describe())

    def check(self, cfg) -> "Interventions":
        """Raise where one of them does not apply to ``cfg``; returns them."""
        for item in self:
            item.check(cfg)
        return self

    def removed_heads(self, n_layers: int, n_heads: int) -> frozenset[tuple[int, int]]:
        """(layer, head) of every head whose output these take away (zeroed, replaced by its
        mean, or its block's att skipped). Its attention pattern is still computed, the same
        as without them: only what the head writes is gone."""
        return frozenset((layer, head) for item in self if item.kind in TAKE_HEADS_OUTPUT
                         for layer in item.layers(n_layers) if layer < n_layers
                         for head in (item.heads or range(n_heads)) if head < n_heads)


def _described(items) -> Text:
    """Several as one message, joined by halves: a chain (first; rest) nests as deep as there
    are items, too deep to say for a thousand of them."""
    if len(items) == 1:
        return items[0].describe()
    half = len(items) // 2
    return Text("intervention.and", "{first}; {rest}", first=_described(items[:half]),
                rest=_described(items[half:]))


def split_checked(text: str) -> list[str]:
    """The parts of the string form (joined by “;”), refused before any is read where there
    are too many characters or parts (``MAX_INTERVENTION_CHARS``, ``MAX_INTERVENTIONS``)."""
    if len(text) > MAX_INTERVENTION_CHARS:
        raise ExplorerError("intervention.too_long", "The interventions are {n:,} characters "
                            "long; write at most {most:,} characters (and at most {items:,} "
                            "interventions).", n=len(text), most=MAX_INTERVENTION_CHARS,
                            items=MAX_INTERVENTIONS)
    items = [item for item in text.split(";") if item.strip()]
    if len(items) > MAX_INTERVENTIONS:
        raise ExplorerError("intervention.too_many", "{n:,} interventions are too many: "
                            "write at most {most:,}, joined by “;” (heads of one block go "
                            "in one, e.g. “zero trf_blocks[3].att heads 1,5”).",
                            n=len(items), most=MAX_INTERVENTIONS)
    return items


def _merged(items) -> list[Intervention]:
    """One intervention per kind and block, in one pass: the heads of a head kind on one
    block joined; one on a block that the same kind on every block (``trf_blocks[*]``)
    already does, dropped (its heads: those the ``[*]`` one lacks). Applied twice, a running
    mean would average its own output."""
    heads: dict[tuple, set] = {}
    for item in items:      # (a patch: one per place and clean prompt)
        heads.setdefault((item.kind, item.layer, item.position, item.source),
                         set()).update(item.heads)
    merged = []
    for (kind, layer, position, source), chosen in heads.items():
        every = heads.get((kind, None, position, source)) if layer is not None else None
        if every is not None:
            if not KINDS_BY_NAME[kind].heads:
                continue                  # the [*] one does it already
            chosen = chosen - every
            if not chosen:
                continue
        merged.append(Intervention(kind, layer, tuple(chosen), position, source))
    return merged


def _refuse_clashes(found: list[Intervention]) -> None:
    """Raise for the first two of ``found`` (in order, one per kind and block) that cannot
    both apply: linear, by looking up each one's exclusive partner kind."""
    by_kind: dict[str, dict] = {}
    for item in found:
        by_kind.setdefault(item.kind, {})[item.layer] = item
    for first in found:
        others = by_kind.get(_PARTNERS.get(first.kind), {})
        if first.layer is None:
            candidates = others.values()     # every block: each block's partner
        else:
            candidates = [o for o in (others.get(first.layer), others.get(None)) if o]
        heads = set(first.heads)
        for second in candidates:
            if _sort_key(second) > _sort_key(first) and (
                    not heads or not heads.isdisjoint(second.heads)):
                raise ExplorerError("intervention.conflict", "“{first}” and “{second}” "
                                    "change the same part: choose one.",
                                    first=_quoted(str(first)), second=_quoted(str(second)))


_SUBPARTS = sorted({k.part for k in KINDS if k.part not in MODEL_PARTS}, key=len, reverse=True)
# ASCII: case is ignored for the ASCII letters only, so a look-alike (“ſ”, U+017F, which
# Unicode case-folds to “s”) is not read as the letter it resembles.
_ITEM = re.compile(
    r"^(?P<verb>[a-z]+)\s+(?:(?P<model>pos_emb|final_norm)|trf_blocks\s*\[\s*(?P<layer>\d+|\*)"
    r"\s*\]\s*\.\s*(?P<part>" + "|".join(re.escape(p) for p in _SUBPARTS) + r"))"
    r"(?:\s+heads?\s+(?P<heads>\d+(?:\s*,\s*\d+)*))?"
    r"(?:\s+at\s+(?P<position>\d+))?(?:\s+from\s+(?P<source>\d+(?:\s*,\s*\d+)*))?$",
    re.IGNORECASE | re.ASCII)
# Any name after a block, to say that it is not a part
_A_BLOCKS_PART = re.compile(r"^\S+\s+trf_blocks\s*\[[^\]]*\]\s*\.\s*(?P<part>[^\s,]+)")


def _quoted(text: str, most: int = 80) -> str:
    return text if len(text) <= most else text[:most - 1] + "…"


def _number(digits: str, item: str) -> int:
    if len(digits) > MAX_NUMBER_DIGITS:
        raise ExplorerError("intervention.long_number", "Block and head numbers have at most "
                            "{most} digits; “{item}” has one of {n:,} digits.",
                            most=MAX_NUMBER_DIGITS, item=_quoted(item), n=len(digits))
    return int(digits)


def _parse_one(item: str) -> Intervention:
    text = " ".join(item.split())
    found = _ITEM.match(text)
    if found is None:
        named = _A_BLOCKS_PART.match(text)
        if named and named["part"].lower() not in _SUBPARTS:
            raise ExplorerError("intervention.no_part", "“{part}” is not a part of a block "
                                "(in “{item}”): the parts of trf_blocks[i] are {parts}.",
                                part=_quoted(named["part"], 40), item=_quoted(text),
                                parts=", ".join(dict.fromkeys(
                                    k.part for k in KINDS if k.part not in MODEL_PARTS)))
        raise ExplorerError("intervention.unreadable", "Cannot read “{item}” as an intervention. "
                            "Write a verb and a part, e.g. “zero trf_blocks[3].att head 5” or "
                            "“identity trf_blocks[2].norm1”, and separate several with “;”.",
                            item=_quoted(text))
    verb = found["verb"].lower()
    part = (found["model"] or found["part"]).lower().replace(" ", "")
    heads = tuple(_number(h.strip(), text) for h in found["heads"].split(",")) \
        if found["heads"] else ()
    source = tuple(_number(i.strip(), text) for i in found["source"].split(",")) \
        if found["source"] else ()
    position = _number(found["position"], text) if found["position"] else None
    kinds = [k for k in KINDS if k.part == part and k.verb == verb and k.heads == bool(heads)]
    if not kinds:
        where = part if part in MODEL_PARTS else f"trf_blocks[i].{part}"
        forms = [f"{k.verb} {where}" + (" head N" if k.heads else "")
                 + (" [at P] from ID,ID,…" if k.patch else "")
                 for k in KINDS if k.part == part]
        raise ExplorerError("intervention.verb_for_part", "“{item}” is not one of the "
                            "interventions on {part}: {forms}.", item=_quoted(text), part=where,
                            forms=", ".join(forms))
    layer = found["layer"]
    return Intervention(kinds[0].kind, None if layer in (None, "*") else _number(layer, text),
                        heads, position, source)
