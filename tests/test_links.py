"""Shareable links (explorer/runtime/links.py): a page written as a query string and read back
is the same page, the link names only what differs from the defaults, and every hostile link
gets the defaults and a message, quickly. Fast: no Gradio app, no model."""
import re
import string
import time

import pytest

from explorer.app.i18n import say
from explorer.app.languages import messages
from explorer.book.config import PRESETS
from explorer.runtime.links import (MAX_FIELDS, MAX_LINK_CHARS, MAX_LINK_PROMPT_CHARS, Page,
                                    Rules, link_query, normalised, read_query, shown)
from explorer.runtime.build import SEED_LIMIT

TABS = ("build", "inside", "attention", "activations", "generate", "train")
SIZES = ("small", "medium", "large", "xl")
LANGS = ("en", "zh")
DEFAULT = Page(preset="teach-small", config=PRESETS["teach-small"], weights="random",
               size="small", seed=123, prompt="Every effort moves you", tab="build", lang="en")


def over_budget(cfg):
    """A stand-in for the server's memory budget: GPT-2 XL's layers x width at most."""
    if cfg.n_layers * cfg.emb_dim > 48 * 1600:
        raise ValueError("This model needs 9,999 MB for its weights (float32), but the memory "
                         "budget is 100 MB (set GPT_EXPLORER_MEMORY_MB to change it). Choose "
                         "fewer layers, a smaller emb_dim or a smaller vocabulary.")


RULES = Rules(default=DEFAULT, tabs=TABS, sizes=SIZES, langs=LANGS,
              check_config=over_budget)


def page(**changes):
    """The default page with ``changes``; a preset brings its config."""
    if "preset" in changes and "config" not in changes:
        changes["config"] = PRESETS[changes["preset"]]
    return Page(**{**DEFAULT.__dict__, **changes})


# ---------------------------------------------------------------------------------------------
# Round trip
TRICKY_PROMPTS = [
    "Every effort moves you",
    "a&b=c?d#e%20f+g;h/i\\j",                      # the query string's own characters
    "你好，世界 🙂👍🏽 Привет مرحبا",               # scripts and emoji (multi-byte UTF-8)
    "<script>alert('x')</script>\"'`",            # markup stays text
    "line one\nline two\ttab\r\n",                  # whitespace kept exactly
    "\u202eevil\u200b\u2066zero-width and bidi\u2069",   # unicode tricks stay the user's text
    "nul\x00bell\x07",
    "x" * MAX_LINK_PROMPT_CHARS,                    # the longest a link carries
    " leading and trailing spaces ",
]
PAGES = [
    DEFAULT,
    page(preset="teach-tiny"),
    page(preset="gpt2-small", config=PRESETS["gpt2-small"].replace(n_layers=2, tie_weights=True),
         seed=0, tab="inside", lang="zh"),
    page(config=PRESETS["teach-small"].replace(norm_placement="post", shortcut=False,
                                               activation="relu", drop_rate=0.0,
                                               pos_encoding="rope", qkv_bias=True,
                                               ff_expansion=2, vocab_size=1000,
                                               context_length=32),
         seed=SEED_LIMIT - 1, tab="train"),
    page(weights="pretrained", size="xl", tab="generate"),
    page(weights="pretrained", size="small", tab="attention", lang="zh"),
    *[page(prompt=p, tab="inside") for p in TRICKY_PROMPTS],
]


@pytest.mark.parametrize("original", PAGES, ids=range(len(PAGES)))
def test_a_page_written_as_a_link_reads_back_as_the_same_page(original):
    query = link_query(original, RULES)
    reading = read_query(query, RULES)
    assert reading.problems == ()
    assert reading.page == normalised(original, RULES)
    assert reading.builds                     # a copied link always opens with its model
    # the query string is plain ASCII: it survives being pasted anywhere
    assert query.startswith("?") and set(query) <= set(string.ascii_letters + string.digits
                                                       + "?&=%-._~")


def test_a_link_names_only_what_differs_from_the_defaults():
    assert link_query(DEFAULT, RULES) == "?tab=build&lang=en"
    assert link_query(page(preset="teach-tiny", tab="inside", lang="zh"), RULES) == \
        "?preset=teach-tiny&tab=inside&lang=zh"
    # a preset plus the one knob changed from it
    tweaked = page(preset="gpt2-small", config=PRESETS["gpt2-small"].replace(n_layers=6))
    assert link_query(tweaked, RULES) == "?preset=gpt2-small&n_layers=6&tab=build&lang=en"
    # pretrained weights bring their own config: no preset, knobs or seed
    assert link_query(page(weights="pretrained", size="medium", seed=5,
                           config=PRESETS["teach-small"].replace(n_layers=1)), RULES) == \
        "?weights=pretrained&size=medium&tab=build&lang=en"
    assert link_query(page(prompt="hi there"), RULES) == "?prompt=hi%20there&tab=build&lang=en"


def test_a_link_with_only_the_language_builds_nothing():
    for query in ("", "?", "?lang=zh", "lang=en"):
        reading = read_query(query, RULES)
        assert not reading.builds and reading.problems == ()
    assert read_query("?lang=zh", RULES).page == page(lang="zh")


def test_gradio_and_spaces_parameters_are_left_alone():
    reading = read_query("?__theme=dark&__sign=abc.def&view=api&deep_link=x&tab=inside", RULES)
    assert reading.problems == () and reading.page == page(tab="inside")


def test_plus_and_percent_twenty_both_read_as_a_space():
    assert read_query("?prompt=a+b%20c", RULES).page.prompt == "a b c"


# ---------------------------------------------------------------------------------------------
# Hostile links: (query, a phrase of the message, what the page must hold)
HOSTILE = [
    ("unknown-names", "?colour=red&n_embd=64&tab=inside",
     "does not know: 'colour', 'n_embd'", dict(tab="inside")),
    ("unknown-many-names", "?" + "&".join(f"k{i}=1" for i in range(8)),
     r"'k4' \(\+3\)", {}),
    ("repeated-key", "?preset=teach-tiny&preset=gpt2-xl", "preset appears 2 times", {}),
    ("repeated-lang", "?lang=zh&lang=en", "lang appears 2 times", {}),
    ("preset-unknown", "?preset=teach-tini", r"preset must be one of .*got 'teach-tini'", {}),
    ("preset-homoglyph", "?preset=te%D0%B0ch-tiny",           # a Cyrillic "а"
     "preset must be one of", {}),
    ("name-zero-width", "?pre%E2%80%8Bset=teach-tiny", r"'pre\\u200bset'", {}),
    ("name-bidi-override", "?%E2%80%AEtesrep=x", r"'\\u202etesrep'", {}),
    ("int-full-width-digits", "?n_layers=%EF%BC%91%EF%BC%92", "n_layers must be a whole number",
     {}),
    ("int-underscore", "?n_layers=1_000", "memory budget", {}),       # Python's 1000
    ("int-fraction", "?n_layers=2.5", "must be a whole number", {}),
    ("int-huge", "?n_layers=" + "9" * 500, "n_layers in the link has 500 characters", {}),
    ("int-huge-but-short", "?n_layers=999999999999", "memory budget", {}),
    ("int-zero", "?n_layers=0", "n_layers must be at least 1", {}),
    ("int-negative", "?emb_dim=-64", "emb_dim must be at least 1", {}),
    ("config-refused-heads", "?emb_dim=70", "divisible by n_heads", {}),
    ("config-refused-rope", "?pos_encoding=rope&emb_dim=60&n_heads=4", "RoPE", {}),
    ("config-over-budget", "?preset=teach-tiny&n_layers=2000", "memory budget",
     dict(preset="teach-tiny")),
    ("float-nan", "?drop_rate=nan", r"drop_rate must be in \[0, 1\)", {}),
    ("float-inf", "?drop_rate=inf", r"drop_rate must be in \[0, 1\)", {}),
    ("float-one", "?drop_rate=1.0", r"drop_rate must be in \[0, 1\)", {}),
    ("float-overflow", "?drop_rate=1e999", r"drop_rate must be in", {}),
    ("bool-word", "?shortcut=yes", "shortcut must be True or False", {}),
    ("choice-unknown", "?norm_placement=middle", "norm_placement must be one of", {}),
    ("choice-upper-case", "?activation=GELU", "activation must be one of", {}),
    ("seed-negative", "?seed=-1", r"seed must be a whole number .*got '-1'", {}),
    ("seed-too-large", f"?seed={SEED_LIMIT}", "seed must be a whole number", {}),
    ("seed-text", "?seed=abc", "seed must be a whole number", {}),
    ("weights-file", "?weights=file&weights_path=%2Fetc%2Fpasswd",
     "cannot load weights from a file", {}),
    ("weights-upload", "?weights_upload=x.pth", "does not know: 'weights_upload'", {}),
    ("weights-unknown", "?weights=hub", "weights must be one of random, pretrained", {}),
    ("size-unknown", "?weights=pretrained&size=huge", "size must be one of",
     dict(weights="pretrained")),
    ("tab-unknown", "?tab=admin", "tab must be one of", {}),
    ("tab-script", "?tab=%3Cscript%3Ealert(1)%3C%2Fscript%3E", r"'<script>alert\(1\)</script>'",
     {}),
    ("lang-unknown", "?lang=fr", "lang must be one of en, zh", {}),
    ("prompt-100-kb", "?prompt=" + "a" * 100_000, "has 100,000 characters; a link carries at "
     "most 2,000", {}),
    ("prompt-100-kb-chinese", "?prompt=" + "%E4%BD%A0" * 40_000, "has 40,000 characters", {}),
    ("prompt-empty", "?prompt=", "prompt is empty", {}),
    ("prompt-blank", "?prompt=%20%0A%09", "prompt is empty", {}),
    ("bad-utf8", "?prompt=%FF%FE", "'prompt' in the link is not valid UTF-8", {}),
    ("lone-surrogate-bytes", "?prompt=%ED%A0%80", "not valid UTF-8", {}),
    ("too-many-fields", "?" + "&".join(["tab=inside"] * (MAX_FIELDS + 1)),
     f"has {MAX_FIELDS + 1} parameters", {}),
    ("too-long", "?prompt=" + "a" * MAX_LINK_CHARS, "characters long", {}),
]


@pytest.mark.parametrize("query, expect, holds", [h[1:] for h in HOSTILE],
                         ids=[h[0] for h in HOSTILE])
def test_a_hostile_link_gets_the_defaults_and_a_message(query, expect, holds):
    started = time.perf_counter()
    reading = read_query(query, RULES)
    assert time.perf_counter() - started < 0.5            # never a hang
    texts = [str(p) for p in reading.problems]
    assert any(re.search(expect, text) for text in texts), texts
    assert reading.page == page(**holds)                  # the defaults, but for what was good
    for problem in reading.problems:
        assert problem.id in messages("zh"), problem.id   # each one has its Chinese
        assert len(str(problem)) < 1_000                  # short enough to read


def test_a_query_that_is_not_text_gets_the_defaults():
    for query in (None, 42, ["?tab=inside"], {"tab": "inside"}):
        reading = read_query(query, RULES)
        assert reading.page == DEFAULT and not reading.builds
        assert "could not be read" in str(reading.problems[0])


def test_good_parts_of_a_bad_link_are_kept():
    reading = read_query("?preset=teach-tiny&n_layers=abc&seed=7&colour=red&tab=inside", RULES)
    assert reading.page == page(preset="teach-tiny", seed=7, tab="inside")
    assert len(reading.problems) == 2 and reading.builds


def test_shown_makes_invisible_characters_visible_and_cuts_long_values():
    assert shown("a\u202eb\u200bc\x00d\ud800") == "'a\\u202eb\\u200bc\\u0000d\\ud800'"
    assert shown("x" * 100) == "'" + "x" * 40 + "'… (100)"
    assert shown("中文 ok") == "'中文 ok'"


# ---------------------------------------------------------------------------------------------
# A link whose model the server cannot hold: the default, and a warning
def test_a_link_to_a_preset_over_the_budget_opens_the_default_with_a_warning():
    def no_xl(cfg):
        if cfg == PRESETS["gpt2-xl"]:
            over_budget(cfg.replace(n_layers=49))
    rules = Rules(default=DEFAULT, tabs=TABS, sizes=SIZES, langs=LANGS, check_config=no_xl)
    reading = read_query("?preset=gpt2-xl&tab=inside", rules)
    assert reading.page.preset == DEFAULT.preset and reading.page.config == DEFAULT.config
    assert reading.page.tab == "inside"
    [problem] = reading.problems
    assert "gpt2-xl" in say(problem)
    assert "memory budget is 100 MB" in say(problem)


def test_a_link_to_a_pretrained_size_over_the_budget_opens_random_weights_with_a_warning():
    def no_xl(size):
        if size == "xl":
            raise ValueError("This pretrained GPT-2 xl needs 6,248 MB for its weights "
                             "(float32), but the memory budget is 1,500 MB.")
    rules = Rules(default=DEFAULT, tabs=TABS, sizes=SIZES, langs=LANGS,
                  check_config=over_budget, check_size=no_xl)
    reading = read_query("?weights=pretrained&size=xl", rules)
    assert reading.page.weights == "random"
    [problem] = reading.problems
    assert "6,248 MB" in say(problem)
    assert read_query("?weights=pretrained&size=medium", rules).problems == ()
