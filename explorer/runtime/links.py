"""Shareable links: the page's state as a query string, and a query string read back.

``link_query(page, rules)`` writes what differs from the page's defaults (a preset and the
knobs that differ from it, the seed, pretrained GPT-2 and its size, model B's intervention,
the prompt, the tab's layer and head, the Patching tab's pair, lecture mode), then always the
tab and the language:
``?preset=teach-tiny&n_layers=3&b=zero%20trf_blocks%5B0%5D.att%20head%201&tab=inside&lang=zh``.
``read_query(query, rules)`` reads one back into a checked ``Page``, the problems it met
(``Message``s, for the page to say in its language), and whether the link asks for a model.
Anything wrong gets the default and a problem; the config is checked by ``GPTConfig`` itself
and by the server's budget (``Rules``). A link never names a file: weights come from a config
and a seed, or from OpenAI's GPT-2 (never a server path or an upload).
"""
from __future__ import annotations

import unicodedata
from dataclasses import dataclass, fields, replace
from typing import Callable
from urllib.parse import parse_qs, quote

from ..book.config import PRESETS, GPTConfig
from ..book.errors import ExplorerError, Message
from ..probes.interventions import Interventions
from .build import check_seed

# Limits of what a link carries, and of the work reading one may take. Chrome takes URLs up to
# 2 MB; reading 1 M characters costs milliseconds. A prompt of a few paragraphs fits.
MAX_LINK_CHARS = 1_000_000
MAX_FIELDS = 40
MAX_LINK_PROMPT_CHARS = 2_000
MAX_LINK_B_CHARS = 1_000      # model B's interventions: a few dozen parts
SHOWN_CHARS = 40              # a hostile name or value is shown cut to this many characters
# No knob's value is longer (a float's repr has at most 24 characters): a longer one is refused
# before GPTConfig reads it and says it whole.
MAX_KNOB_CHARS = 24

KNOBS = tuple(f.name for f in fields(GPTConfig))
# The Patching tab's pair: clean and corrupted prompts, right and wrong answers (its boxes).
PAIR = ("clean", "corrupted", "right", "wrong")
LINK_WEIGHTS = ("random", "pretrained")   # a file never travels in a link
# The order of a link's parameters (after them, silently ignored: Gradio's own ``view``, ``ui``
# and ``deep_link``, and names starting with "__", which Gradio and Hugging Face Spaces add,
# such as ``__theme`` and a private Space's ``__sign``).
NAMES = ("preset", *KNOBS, "seed", "weights", "size", "b", "prompt", "tab", "layer", "head",
         *PAIR, "lecture", "lang")
FOREIGN = ("view", "ui", "deep_link")
# The tabs whose views a link's layer (and head) choose: their pickers, by name.
VIEW_TABS = {"inside": ("inside_layer", None), "attention": ("att_layer", "att_head"),
             "activations": ("act_layer", None), "knockout": ("knock_layer", None)}
_FLAGS = {"true": True, "false": False, "1": True, "0": False}
_KINDS = {name: type(getattr(GPTConfig(), name)) for name in KNOBS}


@dataclass(frozen=True)
class Page:
    """What a link restores."""

    preset: str
    config: GPTConfig          # the knobs (random weights)
    weights: str               # "random" or "pretrained"
    size: str                  # pretrained GPT-2's size
    seed: int
    prompt: str
    tab: str
    lang: str
    layer: int = 0             # the tab's layer (and the Attention tab's head): VIEW_TABS
    head: str = "mean"
    lecture: bool = False      # lecture mode
    b: str = ""                # model B: model A with these interventions (their string form)
    pair: tuple[str, ...] = ()  # the Patching tab's (clean, corrupted, right, wrong), or none


@dataclass(frozen=True)
class Rules:
    default: Page              # the page as it opens
    tabs: tuple[str, ...]      # the tabs' ids
    sizes: tuple[str, ...]     # pretrained GPT-2's sizes
    langs: tuple[str, ...]     # the page's languages
    # Refuses (ValueError) a config the server cannot build, such as one over the memory
    # budget, or a pretrained GPT-2 size it cannot hold.
    check_config: Callable[[GPTConfig], None] = lambda config: None
    check_size: Callable[[str], None] = lambda size: None


@dataclass(frozen=True)
class Reading:
    page: Page
    problems: tuple[Message, ...]   # what could not be used, each for the page to say
    builds: bool               # the link names more than the language: open it with a model


def normalised(page: Page, rules: Rules) -> Page:
    """``page`` as a link carries it: pretrained weights bring their own config (no preset,
    knobs or seed)."""
    if page.weights == "random":
        return page
    d = rules.default
    return replace(page, preset=d.preset, config=d.config, seed=d.seed)


def _text(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value) if isinstance(value, float) else str(value)


def link_query(page: Page, rules: Rules) -> str:
    """The query string ("?...") that opens ``page``: only what differs from the defaults (the
    knobs: from the page's preset), and always the tab and the language."""
    d, items = rules.default, []
    if page.weights == "random":
        if page.preset != d.preset:
            items.append(("preset", page.preset))
        base = PRESETS[page.preset]
        items += [(k, _text(getattr(page.config, k))) for k in KNOBS
                  if getattr(page.config, k) != getattr(base, k)]
        if page.seed != d.seed:
            items.append(("seed", str(page.seed)))
    else:
        items.append(("weights", page.weights))
        if page.size != d.size:
            items.append(("size", page.size))
    if page.b:
        items.append(("b", page.b))
    if page.prompt != d.prompt:
        items.append(("prompt", page.prompt))
    items.append(("tab", page.tab))
    if page.tab in VIEW_TABS:
        if page.layer != d.layer:
            items.append(("layer", str(page.layer)))
        if page.head != d.head and VIEW_TABS[page.tab][1]:
            items.append(("head", page.head))
    if page.tab == "patching" and page.pair and all(page.pair):    # all four, or none
        items += list(zip(PAIR, page.pair))
    if page.lecture:
        items.append(("lecture", "true"))
    items.append(("lang", page.lang))
    return "?" + "&".join(f"{k}={quote(v, safe='')}" for k, v in items)


def shown(text: str, most: int = SHOWN_CHARS) -> str:
    """A name or value from a link, quoted, as a message can show it: control and format
    characters (bidi overrides, zero-width spaces, NUL) and lone surrogates as \\u escapes, cut
    to ``most`` characters. (The page escapes HTML when it shows the message.)"""
    out = "".join(ch if ch == " " or unicodedata.category(ch)[0] not in "CZ"
                  else f"\\u{ord(ch):04x}" for ch in text[:most])
    more = f"… ({len(text):,})" if len(text) > most else ""
    return f"'{out}'{more}"


def read_query(query, rules: Rules) -> Reading:
    """``query`` (``window.location.search``, with or without its "?") read into a checked
    ``Page``; whatever is wrong is left at its default and named in a problem."""
    d = rules.default
    if not isinstance(query, str):
        return Reading(d, (Message("link.not_text", "The link could not be read (it is not "
                                   "text): the page opens with its defaults."),), False)
    query = query.removeprefix("?")
    if len(query) > MAX_LINK_CHARS:
        return Reading(d, (Message("link.too_long", "This link is {n:,} characters long; a "
                                   "GPT Explorer link has at most {most:,}. It was ignored: the "
                                   "page opens with its defaults.", n=len(query),
                                   most=MAX_LINK_CHARS),), False)
    try:
        # Not strict: an empty part ("a=1&&b=2", a trailing "&") is skipped, and a name
        # without "=" has the empty value, which its own check refuses by name. Bytes that are
        # not UTF-8 become lone surrogates, so that only their part is refused.
        given = parse_qs(query, keep_blank_values=True, errors="surrogateescape",
                         max_num_fields=MAX_FIELDS)
    except ValueError:                  # (its one refusal: more than MAX_FIELDS parts)
        return Reading(d, (Message("link.too_many", "This link has {n:,} parameters; a GPT "
                                   "Explorer link has at most {most}. It was ignored: the page "
                                   "opens with its defaults.", n=query.count("&") + 1,
                                   most=MAX_FIELDS),), False)

    problems: list[Message] = []
    for name, values in list(given.items()):
        if not all(map(_utf8, (name, *values))):
            problems.append(Message("link.not_utf8", "{name} in the link is not valid UTF-8 "
                                    "text; it was ignored.", name=shown(name)))
            del given[name]
    unknown = [name for name in given if name not in NAMES and not name.startswith("__")
               and name not in FOREIGN]
    if unknown:
        names = ", ".join(shown(n) for n in unknown[:5])
        if len(unknown) > 5:
            names += f" (+{len(unknown) - 5})"
        problems.append(Message("link.unknown_names", "The link has parameters this page does "
                                "not know: {names}. They were ignored.", names=names))
    given = {name: values for name, values in given.items() if name in NAMES}
    value = {}
    for name, values in given.items():
        if len(values) > 1:
            problems.append(Message("link.repeated", "{name} appears {n} times in the link, so "
                                    "the page cannot tell which one is meant: it uses its "
                                    "default.", name=name, n=len(values)))
        elif name in KNOBS and len(values[0]) > MAX_KNOB_CHARS:
            problems.append(Message("link.knob_long", "{name} in the link has {n:,} "
                                    "characters, more than any of its values: the page uses "
                                    "the preset's.", name=name, n=len(values[0])))
        else:
            value[name] = values[0]

    def choice(name, options, default):
        if name not in value:
            return default
        if value[name] in options:
            return value[name]
        problems.append(Message("link.choice", "{name} must be one of {options} (got {value}); "
                                "the page uses {default}.", name=name, options=", ".join(options),
                                value=shown(value[name]), default=default))
        return default

    lang = choice("lang", rules.langs, d.lang)
    tab = choice("tab", rules.tabs, d.tab)
    if value.get("weights") == "file":
        problems.append(Message("link.no_file", "A link cannot load weights from a file (a path "
                                "on the server or an upload): the page uses random weights."))
        value.pop("weights")
    weights = choice("weights", LINK_WEIGHTS, d.weights)
    size = choice("size", rules.sizes, d.size)
    preset = choice("preset", tuple(PRESETS), d.preset)

    seed = d.seed
    if "seed" in value:
        try:
            seed = check_seed(_number(int, value["seed"]))
        except ExplorerError:
            problems.append(Message("link.seed", "seed must be a whole number from 0 to "
                                    "2**63 - 1 (got {value}); the page uses {default}.",
                                    value=shown(value["seed"]), default=d.seed))

    prompt = d.prompt
    if "prompt" in value:
        text = value["prompt"]
        prompt = _free_text(text, problems, Message(
            "link.prompt_long", "The link's prompt has {n:,} characters; a link carries at most "
            "{most:,}. The page uses its default prompt.", n=len(text),
            most=MAX_LINK_PROMPT_CHARS), Message(
            "link.prompt_empty", "The link's prompt is empty: the page uses its default "
            "prompt.")) or d.prompt
    pair = tuple(_free_text(value[name], problems, Message(
        "link.pair_long", "The link's {name} has {n:,} characters; a link carries at most "
        "{most:,}. The Patching tab's boxes stay empty.", name=name, n=len(value[name]),
        most=MAX_LINK_PROMPT_CHARS), Message(
        "link.pair_empty", "The link's {name} is empty: the Patching tab's boxes stay "
        "empty.", name=name)) for name in PAIR if name in value)
    if 0 < len(pair) < len(PAIR):
        problems.append(Message("link.pair_part", "The link's patching pair is not whole (it "
                                "needs clean, corrupted, right and wrong): the Patching tab's "
                                "boxes stay empty."))
    # all four or none: the Patching tab patches nothing with a part of a pair
    pair = pair if len(pair) == len(PAIR) and all(pair) else ()
    if weights == "pretrained":
        try:
            rules.check_size(size)
        except ValueError as refused:
            problems.append(Message("link.size_refused", "The link's pretrained GPT-2 {size} is "
                                    "refused: {message} The page uses random weights.", size=size,
                                    message=refused))
            weights = d.weights
    layer, head = d.layer, d.head
    if "layer" in value:
        layer = _index(value["layer"])
        if layer is None:
            problems.append(Message("link.layer", "layer must be a whole number from 0 to 9999 "
                                    "(got {value}); the page uses {default}.",
                                    value=shown(value["layer"]), default=d.layer))
            layer = d.layer
    if "head" in value:
        head = "mean" if value["head"] == "mean" else _index(value["head"])
        if head is None:
            problems.append(Message("link.head", "head must be mean or a whole number (got "
                                    "{value}); the page uses {default}.",
                                    value=shown(value["head"]), default=d.head))
        head = d.head if head is None else str(head)
    lecture = d.lecture
    if "lecture" in value:
        lecture = _FLAGS.get(value["lecture"])
        if lecture is None:
            problems.append(Message("link.lecture", "lecture must be true or false (got "
                                    "{value}); the page opens without lecture mode.",
                                    value=shown(value["lecture"])))
            lecture = d.lecture
    b = _b(value.get("b", ""), problems)
    preset, config = _config(preset, value, rules, problems)
    page = Page(preset=preset, config=config, weights=weights, size=size, seed=seed,
                prompt=prompt, tab=tab, lang=lang, layer=layer, head=head, lecture=lecture, b=b,
                pair=pair)
    # (the view settings alone build nothing: a link to the page in Chinese, in lecture mode)
    return Reading(page, tuple(problems), any(name not in ("lang", "lecture") for name in given))


def _utf8(text: str) -> bool:
    try:
        text.encode()
    except UnicodeEncodeError:          # a lone surrogate: bytes that were not UTF-8
        return False
    return True


def _number(kind, text: str):
    """``text`` as an int or float (``kind``) as Python reads it, or None. Only ASCII: a link
    is, and "１２" is not read as 12."""
    try:
        return kind(text) if text.isascii() else None
    except ValueError:
        return None


def _index(text: str) -> int | None:
    """A layer or head as a link writes it (a whole number from 0 to 9999), or None."""
    number = _number(int, text)
    return number if number is not None and 0 <= number <= 9999 else None


def _free_text(text: str, problems, too_long: Message, empty: Message) -> str | None:
    """A text a link carries (the prompt, a part of the patching pair), within a link's
    limit; ``None`` if it is too long or empty (said)."""
    if len(text) > MAX_LINK_PROMPT_CHARS:
        problems.append(too_long)
    elif not text.strip():
        problems.append(empty)
    else:
        return text
    return None


def _b(text: str, problems) -> str:
    """Model B's interventions as a link carries them, in their own string form; what the
    parser refuses is left out, and said. (Whether they fit the model is known once it is
    built: ``share_view``.)"""
    if not text:
        return ""
    if len(text) > MAX_LINK_B_CHARS:
        problems.append(Message("link.b_long", "The link's model B has {n:,} characters; a link "
                                "carries at most {most:,}. The page opens without B.",
                                n=len(text), most=MAX_LINK_B_CHARS))
        return ""
    try:
        return str(Interventions.parse(text))
    except ExplorerError as refused:
        problems.append(Message("link.b_refused", "The link's model B ({value}) is refused: "
                                "{message} The page opens without B.", value=shown(text),
                                message=refused.message))
        return ""


def _typed(name: str, text: str):
    """A knob's text as a value of its kind, for ``GPTConfig`` to check (its range, its
    choices). Text of another kind is handed on as it is: GPTConfig refuses it by name."""
    kind = _KINDS[name]
    if kind is bool:
        return _FLAGS.get(text, text)
    number = None if kind is str else _number(kind, text)
    return text if number is None else number


def _config(preset, value, rules, problems) -> tuple[str, GPTConfig]:
    """The preset and its config with the link's knobs; the preset alone if the model or the
    server refuses that; the page's default if the preset alone is refused too (a preset over
    the memory budget)."""
    base = PRESETS[preset]
    changes = {name: _typed(name, value[name]) for name in KNOBS if name in value}
    if changes:
        try:
            config = base.replace(**changes)
            rules.check_config(config)
            return preset, config
        except ValueError as refused:
            problems.append(Message("link.config_refused", "The link's config is refused: "
                                    "{message} The page uses the preset {preset} as it is.",
                                    message=refused, preset=preset))
    try:
        rules.check_config(base)
        return preset, base
    except ValueError as refused:
        d = rules.default
        problems.append(Message("link.preset_refused", "The link's preset {preset} is refused: "
                                "{message} The page uses {default}.", message=refused,
                                preset=preset, default=d.preset))
        return d.preset, d.config
