"""The Chinese catalogues are complete and well formed.

- ``zh.json``: every message of the core (``book``, ``probes``, ``runtime``, ``native``), by
  its id: each ``ExplorerError``, ``Message`` and ``Text`` made there (found in the source with
  ``ast``) has an entry with the same fields, no entry is stale, and one id says one text.
- ``ZH_UI``: every text of ``explorer/app`` that goes through ``t()`` or ``label()`` (found in
  the source with ``ast``: the constant arguments, and the tables of names that reach them
  through a variable, ``indirect()`` below), and every message the app raises as a ValueError.
- ``ZH_SHARE``, ``ZH_COMPARE``: the share, walk and compare views' texts of the app (their own
  files, so that branches merge cleanly); each counts as a ZH_UI entry above.
- Each Chinese text has exactly its English's ``{fields}``, is not empty and is not the English.
- ``translate()`` turns real core errors into Chinese with their numbers, and every message of
  the bad-input catalogue (``tests/bad_inputs.py``) comes out in Chinese.
"""
from __future__ import annotations

import ast
import importlib
import inspect
import json
import re
import string
import time
from pathlib import Path

import pytest
import torch

from explorer.app import i18n, prefs
from explorer.app.i18n.zh_compare import SAME_IN_CHINESE_COMPARE, ZH_COMPARE
from explorer.app.i18n.zh_share import ZH_SHARE
from explorer.app.i18n.zh_ui import SAME_IN_CHINESE, ZH_UI
from explorer.book.errors import ExplorerError

# The share and compare views' texts have their own catalogues: an app text is in ZH_UI,
# ZH_SHARE or ZH_COMPARE; a core message is in zh.json, by its id.
APP_ZH = {**ZH_UI, **ZH_SHARE, **ZH_COMPARE}
SAME = (*SAME_IN_CHINESE, *SAME_IN_CHINESE_COMPARE)

from test_bad_inputs import PY_CASES, Env, run_bounded

ROOT = Path(__file__).resolve().parents[1]
APP = ROOT / "explorer" / "app"
CORE_WINGS = ("book", "probes", "runtime", "native")
CJK = re.compile(r"[\u3400-\u9fff]")
FIELD = re.compile(r"\{([^{}]+)\}")        # as explorer.app.i18n reads a key's fields
ZH = "zh"
ZH_JSON = json.loads((APP / "i18n" / "zh.json").read_text(encoding="utf-8"))
ZH_MESSAGES: dict[str, str] = ZH_JSON["messages"]
MESSAGE_MAKERS = ("ExplorerError", "Message", "Text")   # explorer/book/errors.py


# ---------------------------------------------------------------------------------------------
# Keys from the source
_CONVERSION = {-1: "", ord("r"): "!r", ord("s"): "!s", ord("a"): "!a"}


def template(node) -> list[str] | None:
    """The catalogue keys an expression makes (None: it makes no text).

    A string is itself; an f-string is its text with each field as ``ast.unparse`` spells its
    expression (plus ``!r`` and ``:spec``); implicitly concatenated f-strings are one f-string.
    A conditional whose branches are texts (around a text, or as one of an f-string's fields)
    gives one key per branch; ``a + b`` joins the keys of both sides (a side that is no text
    becomes a field)."""
    if isinstance(node, ast.Constant):
        return [node.value] if isinstance(node.value, str) else None
    if isinstance(node, ast.JoinedStr):
        keys = [""]
        for part in node.values:
            if isinstance(part, ast.Constant):
                pieces = [part.value]
            else:
                pieces = (template(part.value) if isinstance(part.value, ast.IfExp)
                          and part.conversion == -1 and part.format_spec is None else None)
                if pieces is None:
                    spec = "" if part.format_spec is None else ":" + template(part.format_spec)[0]
                    pieces = ["{" + ast.unparse(part.value) + _CONVERSION[part.conversion]
                              + spec + "}"]
            keys = [key + piece for key in keys for piece in pieces]
        return keys
    if isinstance(node, ast.IfExp):
        body, orelse = template(node.body), template(node.orelse)
        return None if body is None or orelse is None else body + orelse
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = template(node.left), template(node.right)
        if left is None and right is None:
            return None
        left = left if left is not None else ["{" + ast.unparse(node.left) + "}"]
        right = right if right is not None else ["{" + ast.unparse(node.right) + "}"]
        return [a + b for a in left for b in right]
    return None


def _texts(node) -> list[str]:
    """``template`` of an expression, of each operand of ``a or b`` and of each item of a
    list; no empty texts."""
    if isinstance(node, ast.BoolOp):
        return [k for value in node.values for k in _texts(value)]
    if isinstance(node, (ast.List, ast.Tuple)):
        return [k for item in node.elts for k in _texts(item)]
    return [k for k in template(node) or [] if k]


def _files(folder: Path):
    return sorted(p for p in folder.rglob("*.py") if "i18n" not in p.parts)


def _module(path: Path):
    return importlib.import_module(".".join(path.relative_to(ROOT).with_suffix("").parts))


def _call_name(node) -> str | None:
    func = node.func
    return func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)


def _functions(tree, names) -> list[ast.FunctionDef]:
    return [f for f in ast.walk(tree) if isinstance(f, ast.FunctionDef) and f.name in names]


def _raised_values(tree):
    """(node, message expression) of every ``raise ValueError(message, ...)``."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) \
                and _call_name(node.exc) == "ValueError" and node.exc.args:
            yield node, node.exc.args[0]


# --- the core --------------------------------------------------------------------------------
def format_fields(text: str) -> list[str]:
    """The names of the fields of a ``str.format`` template (``{n:,}`` is ``n``)."""
    return sorted({name for _, name, _, _ in string.Formatter().parse(text) if name})


def core_messages() -> tuple[dict[str, dict[str, str]], list[str]]:
    """(id -> {English text -> where}, the calls the test cannot read): every
    ``ExplorerError(id, text, ...)``, ``Message(...)`` and ``Text(...)`` of the core; and every
    ``raise ValueError`` left there (a refusal must be an ExplorerError, a bug another error)."""
    found, unreadable = {}, []
    for wing in CORE_WINGS:
        for path in _files(ROOT / "explorer" / wing):
            rel = path.relative_to(ROOT / "explorer").as_posix()
            if rel == "book/errors.py":
                continue
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name) \
                        or node.func.id not in MESSAGE_MAKERS:
                    continue
                where = f"{rel}:{node.lineno}"
                if len(node.args) >= 2 and all(isinstance(a, ast.Constant) and
                                               isinstance(a.value, str) for a in node.args[:2]):
                    id_, text = node.args[0].value, node.args[1].value
                    found.setdefault(id_, {}).setdefault(text, where)
                    given = {k.arg for k in node.keywords}
                    if None in given or given != set(format_fields(text)):
                        unreadable.append(f"{where}: {id_}: the fields given, {sorted(given)}, "
                                          f"are not the text's, {format_fields(text)}")
                else:
                    unreadable.append(f"{where}: {ast.unparse(node)[:80]}")
            for node, message in _raised_values(tree):
                unreadable.append(f"{rel}:{node.lineno}: raise ValueError(...): an input error "
                                  f"is an ExplorerError, a bug another exception")
    return found, unreadable


# --- the app ---------------------------------------------------------------------------------
AS_NAMED = ("as_int", "as_number", "as_choice", "as_choices", "as_flag")   # they pass t(name)


def _leaves(node) -> list[str] | None:
    """The texts an argument can be, where the source spells them out: a constant, a
    concatenation, ``a or "b"``, ``x if c else y``, ``{...}[key]`` (None: it cannot tell)."""
    if isinstance(node, ast.BoolOp):
        parts = [_leaves(v) for v in node.values]
        return None if None in parts else [k for p in parts for k in p]
    if isinstance(node, ast.IfExp):
        a, b = _leaves(node.body), _leaves(node.orelse)
        return None if a is None or b is None else a + b
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Dict):
        return [k for v in node.value.values for k in (_leaves(v) or [])] or None
    if isinstance(node, ast.JoinedStr):
        return None
    return template(node)


def _evaluated(node, module) -> str | None:
    """The argument's value from the module's own names (``NO_MODEL_NOTE``,
    ``f"Variants (two to {MAX_VARIANTS})"``, ``BUILD_BUTTON["random"]``), or None. Only
    names, subscripts and f-strings are evaluated: never a call."""
    if any(isinstance(n, (ast.Call, ast.Lambda, ast.NamedExpr)) for n in ast.walk(node)):
        return None
    try:
        value = eval(compile(ast.Expression(node), "<arg>", "eval"), vars(module))  # noqa: S307
    except Exception:  # noqa: BLE001 - a name that only a call has
        return None
    return value if isinstance(value, str) else None


def _string_constants(path: str, function: str) -> list[str]:
    """The string constants in the ``for`` headers of one app function (the names and
    wanted values that ``_generation_args`` loops over)."""
    tree = ast.parse((APP / path).read_text(encoding="utf-8"))
    return [c.value for f in _functions(tree, {function}) for node in ast.walk(f)
            if isinstance(node, ast.For) for c in ast.walk(node.iter)
            if isinstance(c, ast.Constant) and isinstance(c.value, str)]


def _outcomes(node) -> list[str]:
    """The texts that ``a if c else b`` (nested) can give, where its branches are texts."""
    if isinstance(node, ast.IfExp):
        return _outcomes(node.body) + _outcomes(node.orelse)
    return [node.value] if isinstance(node, ast.Constant) and isinstance(node.value, str) else []


def _keyword_texts(path: str, keyword: str) -> list[str]:
    """The texts given as ``keyword=`` in one app file."""
    tree = ast.parse((APP / path).read_text(encoding="utf-8"))
    return [k for node in ast.walk(tree) if isinstance(node, ast.keyword)
            and node.arg == keyword for k in _outcomes(node.value)]


def _assigned_texts(path: str, function: str) -> list[str]:
    tree = ast.parse((APP / path).read_text(encoding="utf-8"))
    return [k for f in _functions(tree, {function}) for node in ast.walk(f)
            if isinstance(node, ast.Assign) for k in _texts(node.value)]


def _first_args(function: str) -> list[str]:
    """The constant first arguments of every call of ``function`` in the app."""
    return [k for node in _all_calls(function) if node.args
            for k in (template(node.args[0]) or [])]


def indirect() -> dict[tuple[str, str], list[str]]:
    """Every ``t(x)`` / ``label(x)`` whose ``x`` is a variable: (file, expression) -> the texts
    it can be, from the tables the app imports. A new such call must be added here."""
    from explorer.app import pinning, share, shared
    from explorer.app.plots import statistics, training as training_plots
    from explorer.app.tabs import attention, build, generate, inside, train
    from explorer.book import probe_points, stages
    from explorer.probes.stages import WALK_STATS
    from explorer.book.config import PRESETS, count_parameters
    from explorer.book.curves import ACTIVATION_LABELS
    from explorer.book.probe_points import POINT_LABELS
    from explorer.runtime import training_setup as training

    breakdown = list(count_parameters(PRESETS["teach-tiny"]).breakdown())
    variants = list(training.VARIANT_CHOICES)
    corpora = [training.DEFAULT_CORPUS_NAME,
               inspect.signature(training.corpus_from_text).parameters["name"].default]
    as_named = [k for name in AS_NAMED for node in _all_calls(name) if len(node.args) > 1
                for k in (template(node.args[1]) or [])]
    knob_fields = [k.field for k in build.KNOB_TABLE if k.kind == "int"]   # as_int(v, field)
    with prefs.using(prefs.Prefs("en")):
        kinds = [shared._kind(v) for v in ([], {}, "", True, None)]
    return {
        ("plots/labels.py", "POINT_LABELS[point]"): list(POINT_LABELS.values()),
        ("plots/model.py", "name"): breakdown,
        ("plots/model.py", "ACTIVATION_LABELS[cfg.activation]"): list(ACTIVATION_LABELS.values()),
        ("plots/curves.py", "f['label']"): list(ACTIVATION_LABELS.values()),
        ("plots/statistics.py", "STAT_TITLES[stat]"): list(statistics.STAT_TITLES.values()),
        ("plots/training.py", "run.label"): variants,
        ("plots/training.py", "r.label"): variants,
        ("plots/training.py", "h"): list(training_plots.TABLE_HEADERS),
        ("plots/training.py", "STATUS_WORDS.get(view.status, view.status)"):
            list(training_plots.STATUS_WORDS.values()),
        ("plots/training.py", "view.corpus"): corpora,
        ("shared.py", "info['what']"): _keyword_texts("tabs/build.py", "what"),
        ("shared.py", "info['variant']"): variants,
        ("shared.py", "kind"): kinds,
        ("shared.py", "name"): as_named + knob_fields,
        ("shared.py", "text"): _first_args("layer_slider"),
        ("tabs/attention.py", "title"): list(attention.HINTS),
        ("tabs/build.py", "name"): breakdown + list(build.WEIGHTS_CHOICES.values()),
        ("tabs/build.py", "h"): list(build.PARAMETER_HEADERS),
        ("tabs/build.py", "self.label"): [k.label for k in build.KNOB_TABLE],
        ("tabs/build.py", "self.info"): [k.info for k in build.KNOB_TABLE if k.info],
        ("tabs/build.py", "self.accepts or 'a value'"):
            ["a value"] + [k.accepts for k in build.KNOB_TABLE if k.accepts],
        ("tabs/build.py", "BUILD_BUTTON[choice]"): list(build.BUILD_BUTTON.values()),
        ("tabs/generate.py", "m"): list(generate.DECODING),
        ("tabs/generate.py", "name"): _string_constants("tabs/generate.py", "_generation_args"),
        ("tabs/generate.py", "wanted"): _string_constants("tabs/generate.py", "_generation_args"),
        ("tabs/inside.py", "title"): list(inside.HINTS),
        ("tabs/inside.py", "name"): list(inside.HIST_PAIRS),
        ("tabs/train.py", "v"): variants,
        ("tabs/train.py", "name"): variants,
        ("tabs/train.py", "d"): list(train.DATA_CHOICES),
        # the share and walk views
        ("share_view.py", "problem.text"): _problem_texts(),
        ("share_view.py", "value"): [what for _, what in share._SYNTAX.values()],
        ("plots/walk.py", "title_of(stage, cfg)"):
            [s.title for s in stages.STAGES] + list(stages._POST_LN_TITLES.values()),
        ("plots/walk.py", "s"): ["probe point", "shape", *WALK_STATS],
        ("plots/walk.py", "POINTS_BY_NAME[p.point].where"):
            [p.where for p in probe_points.PROBE_POINTS if p.scope != "attention"],
        # the compare views
        ("pinning.py", "SHORT[field][value]"):
            [x for names in pinning.SHORT.values() for x in names.values()],
        ("pinning.py", "SHORT_NUMBERS[field]"): list(pinning.SHORT_NUMBERS.values()),
        ("plots/model.py", "c"): breakdown,
        ("plots/statistics.py", "NORM_ROLE[p]"): list(statistics.NORM_ROLE.values()),
        ("shared.py", "what"): _keyword_texts("tabs/build.py", "what") + variants,
        ("tabs/generate.py", "h"): list(generate.HISTORY_HEADERS) + list(generate.PAIR_HEADERS),
    }


def _problem_texts() -> list[str]:
    """What a link opened could not use (explorer/app/share.py: ``Problem(text, ...)``)."""
    return [k for node in ast.walk(ast.parse((APP / "share.py").read_text(encoding="utf-8")))
            if isinstance(node, ast.Call) and _call_name(node) == "Problem" and node.args
            for k in template(node.args[0]) or []]


def _all_calls(name):
    for path in _files(APP):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and _call_name(node) == name:
                yield node


# Texts the app makes without t() and hands to translate() (a trained model's weights caption).
def _other_app_texts() -> list[str]:
    return _assigned_texts("tabs/train.py", "trained_caption")


def ui_keys() -> tuple[dict[str, str], list[str]]:
    """(key -> where, the t()/label() calls whose argument neither the source nor
    ``indirect()`` says)."""
    tables = indirect()
    keys, unknown = {}, []
    for path in _files(APP):
        rel = path.relative_to(APP).as_posix()
        tree = ast.parse(path.read_text(encoding="utf-8"))
        module = _module(path)
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and _call_name(node) in ("t", "label")
                    and node.args):
                continue
            arg = node.args[0]
            value = _evaluated(arg, module) if not isinstance(arg, ast.Constant) else None
            found = [value] if value is not None else _leaves(arg)
            if found is None:
                found = tables.get((rel, ast.unparse(arg)))
                if found is None:
                    unknown.append(f"{rel}:{node.lineno}: {_call_name(node)}"
                                   f"({ast.unparse(arg)})")
                    continue
            for key in found:
                keys.setdefault(key, f"{rel}:{node.lineno}")
        for node, message in _raised_values(tree):
            for key in template(message) or []:
                keys.setdefault(key, f"{rel}:{node.lineno} (raised)")
    for key in _other_app_texts():
        keys.setdefault(key, "tabs/train.py (trained_caption)")
    return keys, unknown


@pytest.fixture(scope="module")
def ui():
    return ui_keys()


@pytest.fixture(scope="module")
def core():
    return core_messages()


# ---------------------------------------------------------------------------------------------
# Completeness
def test_every_app_text_passed_to_t_or_label_is_found(ui):
    _, unknown = ui
    assert not unknown, ("t()/label() of a variable that INDIRECT does not list; add the table "
                         "its values come from:\n" + "\n".join(unknown))


def test_every_app_text_has_a_chinese_entry(ui):
    keys, _ = ui
    missing = [f"{where}: {key!r}" for key, where in keys.items()
               if key not in APP_ZH and key not in SAME]
    assert not missing, "not in ZH_UI (or ZH_SHARE, ZH_COMPARE):\n" + "\n".join(missing)


def test_every_indirect_table_entry_has_a_chinese_entry():
    missing = [f"{where}: {key!r}" for where, table in indirect().items() for key in table
               if key not in APP_ZH and key not in SAME]
    assert not missing, "not in ZH_UI:\n" + "\n".join(map(str, missing))


def test_no_stale_app_entries(ui):
    """Every entry of ZH_UI (and SAME_IN_CHINESE) is a text the app has now: an English text
    that changed leaves no orphan behind."""
    keys, _ = ui
    stale = [key for key in [*ZH_UI, *SAME] if key not in keys]
    assert not stale, "not in explorer/app any more:\n" + "\n".join(map(repr, stale))
    assert not set(SAME) & set(APP_ZH)


def test_no_stale_compare_entries(ui):
    """Every entry of ZH_COMPARE is a text of the app, and a new one: a text that ZH_UI or
    ZH_SHARE has already is translated there, once."""
    stale = [key for key in ZH_COMPARE if key not in ui[0]]
    assert not stale, "not in explorer/app any more:\n" + "\n".join(map(repr, stale))
    assert not set(ZH_COMPARE) & (set(ZH_UI) | set(ZH_SHARE) | set(SAME_IN_CHINESE))


def test_no_stale_share_entries_and_none_said_twice(ui):
    """ZH_SHARE holds texts the app has now, and none that ZH_UI already translates (one
    translation of each text)."""
    stale = [key for key in ZH_SHARE if key not in ui[0]]
    assert not stale, "not in explorer/app any more:\n" + "\n".join(map(repr, stale))
    assert not set(ZH_SHARE) & (set(ZH_UI) | set(SAME_IN_CHINESE))


def test_every_core_message_is_read_from_the_source(core):
    """Each message of the core has its id and English as constants and is given exactly its
    text's fields; the core raises no bare ValueError."""
    _, unreadable = core
    assert not unreadable, "\n".join(unreadable)
    assert len(core[0]) > 150


def test_an_id_says_one_text(core):
    twice = {id_: list(texts) for id_, texts in core[0].items() if len(texts) > 1}
    assert not twice, "\n".join(f"{i}: {t}" for i, t in twice.items())


def test_ids_are_short_and_stable_names():
    for id_ in core_messages()[0]:
        assert re.fullmatch(r"[a-z0-9_]+(\.[a-z0-9_]+)+", id_) and len(id_) <= 40, id_


def test_every_core_message_has_a_chinese_entry_with_its_fields(core):
    messages, _ = core
    missing = [f"{where}: {id_}" for id_, texts in messages.items()
               for where in texts.values() if id_ not in ZH_MESSAGES]
    assert not missing, "not in zh.json:\n" + "\n".join(missing)
    wrong = [f"{id_}: {format_fields(ZH_MESSAGES[id_])} instead of {format_fields(text)}"
             for id_, texts in messages.items() for text in texts
             if format_fields(ZH_MESSAGES[id_]) != format_fields(text)]
    assert not wrong, "\n".join(wrong)


def test_no_stale_core_entries(core):
    """Every entry of zh.json is a message the core has now."""
    stale = sorted(set(ZH_MESSAGES) - set(core[0]))
    assert not stale, "not in the core any more:\n" + "\n".join(stale)
    assert ZH_JSON["language"] == {"name": "中文", "locale": "zh-CN"}


# ---------------------------------------------------------------------------------------------
# Form
CATALOGUES = {"ZH_UI": ZH_UI, "ZH_SHARE": ZH_SHARE, "ZH_COMPARE": ZH_COMPARE}
ENTRIES = [(name, key) for name, catalogue in CATALOGUES.items() for key in catalogue]


def _english(id_: str) -> str:
    return next(iter(core_messages()[0][id_]))


def _fields(text: str) -> list[str]:
    return sorted(set(FIELD.findall(text)))


def test_each_chinese_text_has_its_keys_fields_and_is_translated():
    bad = []
    for name, catalogue in CATALOGUES.items():
        for key, chinese in catalogue.items():
            if not isinstance(chinese, str) or not chinese.strip():
                bad.append(f"{name}: empty: {key!r}")
            elif chinese == key:
                bad.append(f"{name}: not translated: {key!r}")
            elif _fields(chinese) != _fields(key):
                bad.append(f"{name}: fields {_fields(chinese)} instead of {_fields(key)}: "
                           f"{key!r}")
            elif not CJK.search(chinese) and any(c.isalnum() for c in key):
                # (punctuation alone, such as ", ", becomes full-width punctuation)
                bad.append(f"{name}: no Chinese in {chinese!r} ({key!r})")
    assert not bad, "\n".join(bad)


def test_chinese_texts_keep_braces_for_fields_only_and_no_apostrophes_for_the_browser():
    """A brace outside a field would break str.format (t) and ICU MessageFormat (the browser);
    an apostrophe in a label quotes text in ICU MessageFormat."""
    bad = []
    for name, catalogue in CATALOGUES.items():
        for key, chinese in catalogue.items():
            if FIELD.sub("", chinese).count("{") or FIELD.sub("", chinese).count("}"):
                bad.append(f"{name}: a stray brace: {chinese!r}")
            if "{" not in key and "'" in chinese:
                bad.append(f"{name}: an apostrophe in a browser label: {chinese!r}")
    assert not bad, "\n".join(bad)


def test_each_core_message_is_said_in_chinese(core):
    """Each entry of zh.json is a str.format template (braces doubled outside its fields),
    not empty, not the English, and Chinese where the English has words."""
    bad = []
    for id_, chinese in ZH_MESSAGES.items():
        english = _english(id_) if id_ in core[0] else None
        try:
            fields = format_fields(chinese)
        except ValueError as error:
            bad.append(f"{id_}: not a template ({error}): {chinese!r}")
            continue
        if not isinstance(chinese, str) or not chinese.strip():
            bad.append(f"{id_}: empty")
        elif chinese == english:
            bad.append(f"{id_}: not translated: {chinese!r}")
        elif english is not None and not CJK.search(chinese) and re.search(
                r"[A-Za-z]{2}", "".join(text for text, *_ in string.Formatter().parse(english))):
            bad.append(f"{id_}: no Chinese in {chinese!r} ({english!r})")
        elif english is not None and fields != format_fields(english):
            bad.append(f"{id_}: fields {fields} instead of {format_fields(english)}")
    assert not bad, "\n".join(bad)


def test_a_text_of_both_the_core_and_the_app_reads_the_same(core):
    """A core message whose English is also one of the app's texts ("true or false") is said
    the same way in both catalogues."""
    app = {**ZH_UI, **ZH_SHARE, **ZH_COMPARE}
    differ = [f"{id_}: {ZH_MESSAGES[id_]!r} / {app[text]!r}" for id_, texts in core[0].items()
              for text in texts if text in app and "{" not in text
              and ZH_MESSAGES.get(id_) != app[text]]
    assert not differ, "\n".join(differ)


def test_terms_follow_the_chinese_edition():
    """A few of the book's terms, spelled one way throughout."""
    text = "\n".join([*ZH_UI.values(), *ZH_MESSAGES.values(), *ZH_SHARE.values(),
                      *ZH_COMPARE.values()])
    for avoided in ("令牌", "标记", "残差连接", "捷径", "批量大小", "提示语", "贪婪", "种子值"):
        assert avoided not in text, avoided
    assert ZH_UI["Prompt"] == "提示词" and ZH_UI["token"] == "词元"
    assert ZH_UI["temperature"] == "温度" and ZH_UI["seed"] == "随机种子"


# ---------------------------------------------------------------------------------------------
# translate() at work
def _zh(message) -> str:
    with prefs.using(prefs.Prefs(ZH)):
        return i18n.translate(message)


def _error_of(fn) -> ExplorerError:
    with pytest.raises(ExplorerError) as caught:
        fn()
    return caught.value


def _numbers(text: str) -> list[str]:
    return re.findall(r"\d[\d,.]*\d|\d", text)


def _raise(message):
    raise ExplorerError.of(message)


def _real_errors():
    from explorer.book.config import GPTConfig, get_preset
    from explorer.book.load_weights import describe_differences
    from explorer.book.tokenizer import get_tokenizer
    from explorer.runtime.cache import ModelCache
    from explorer.runtime.training_setup import TrainingSettings, corpus_from_text, make_variants

    tiny = get_preset("teach-tiny").to_dict()
    return {
        "n_layers zero": lambda: GPTConfig.from_dict({**tiny, "n_layers": 0}),
        "heads do not divide": lambda: GPTConfig.from_dict({**tiny, "emb_dim": 70}),
        "drop_rate": lambda: GPTConfig.from_dict({**tiny, "drop_rate": 1.5}),
        "a key with a hint": lambda: GPTConfig.from_dict({**tiny, "n_layer": 2}),
        "a key without one": lambda: GPTConfig.from_dict({**tiny, "colour": 2}),
        "a preset": lambda: get_preset("teach-tini"),
        "token ids": lambda: get_tokenizer().decode([50257, 99999]),
        "text to encode": lambda: get_tokenizer().encode(12),
        "steps": lambda: TrainingSettings(steps=0),
        "lr": lambda: TrainingSettings(lr=-1.0),
        "text too large": lambda: corpus_from_text("a" * 2_000_001),
        "variant": lambda: make_variants(["no such variant"]),
        "budget": lambda: ModelCache(1024 ** 2).check_budget(get_preset("gpt2-small")),
        "shapes": lambda: _raise(describe_differences(
            {"tok_emb.weight": (100, 64), "pos_emb.weight": (64, 64)},
            {"tok_emb.weight": (100, 32), "extra.bias": (3,)}, "model.safetensors")),
    }


@pytest.mark.parametrize("case", list(_real_errors()))
def test_translate_real_core_errors(case):
    error = _error_of(_real_errors()[case])
    message, chinese = str(error), _zh(error)
    assert CJK.search(chinese), f"{message!r} -> {chinese!r}"
    assert sorted(_numbers(chinese)) == sorted(_numbers(message)), (message, chinese)
    assert _zh(error.message) == chinese           # the error or its message: the same
    with prefs.using(prefs.Prefs("en")):
        assert i18n.translate(error) == message


def test_translate_fills_in_field_values_that_are_entries():
    """A field's value that is itself an entry (the budget's advice, the corpus's name) is
    said in Chinese too; the core's own names (a config key) stay as they are."""
    from explorer.book.config import get_preset
    from explorer.runtime.cache import ModelCache
    from explorer.book.config import GPTConfig
    message = _error_of(lambda: ModelCache(1024 ** 2).check_budget(get_preset("gpt2-small")))
    chinese = _zh(message)
    assert "Choose" not in chinese and "model" not in chinese, chinese
    zero_layers = _error_of(lambda: GPTConfig.from_dict({**get_preset("teach-tiny").to_dict(),
                                                         "n_layers": 0}))
    assert _zh(zero_layers).startswith("“n_layers”")


def test_page_texts_of_the_core_in_chinese():
    from explorer import native
    from explorer.book.config import count_parameters, get_preset
    from explorer.runtime.sources import WeightsSource
    captions = [WeightsSource.random(123).caption,
                WeightsSource("pretrained", repo_id="openai-community/gpt2").caption,
                WeightsSource("file", filename="model.safetensors", digest="ab" * 32).caption,
                WeightsSource.trained(None).caption,
                native.decoding_label(True), native.decoding_label(False),
                *count_parameters(get_preset("teach-tiny").replace(tie_weights=True)).notes()]
    for text in captions:
        assert CJK.search(_zh(text)), text


def test_a_trained_models_texts_in_chinese():
    """The weights caption of a trained variant (made by the app, and by the lab) and the job's
    messages, with the default story's name in Chinese too."""
    from types import SimpleNamespace
    from explorer.app.tabs.train import trained_caption
    from explorer.runtime.training_job import TrainingJob
    from explorer.runtime.training_setup import DEFAULT_CORPUS_NAME
    story = DEFAULT_CORPUS_NAME
    for steps in (1, 2):
        caption = _zh(trained_caption(SimpleNamespace(steps=steps, label="no shortcut"), story))
        assert caption == f"训练了 {steps} 步，语料：{ZH_UI[story]}（{ZH_UI['no shortcut']}）"
        job = SimpleNamespace(_run=lambda i, steps=steps: SimpleNamespace(steps=steps),
                              corpus=SimpleNamespace(name="pasted text"))
        source = _zh(TrainingJob.weights_source(job, 0))
        assert source == f"训练了 {steps} 步，语料：{ZH_UI['pasted text']}", source
    for message in _job_messages(story):
        assert CJK.search(_zh(message)) and not re.search(r"\b(steps|Stopped|finished)\b",
                                                          _zh(message)), _zh(message)
        assert story not in _zh(message) and "The Clockmaker" not in _zh(message)


def _job_messages(story: str) -> list:
    """What real jobs on the default story say: finished, finished with a diverged variant,
    stopped, cancelled, and the refusal to start a finished job again."""
    from explorer.book.config import GPTConfig
    from explorer.runtime.training_job import TrainingJob
    from explorer.runtime.training_setup import Corpus, TrainingSettings, Variant, default_corpus
    tiny = GPTConfig(context_length=32, emb_dim=16, n_heads=2, n_layers=2)
    corpus = Corpus(story, default_corpus().text[:2000])
    quick = TrainingSettings(steps=2, eval_freq=1, eval_iter=1, sample_tokens=2)
    finished = TrainingJob([Variant("book", tiny)], corpus, quick).advance(2)
    diverged = TrainingJob([Variant("book", tiny), Variant("post-LN", tiny)], corpus,
                           TrainingSettings(steps=4, lr=1e20, eval_freq=2, eval_iter=1,
                                            sample_tokens=2)).advance(4)
    assert "Diverged" in diverged.view().message
    stopped = TrainingJob([Variant("book", tiny)], corpus,
                          TrainingSettings(steps=10_000, sample_tokens=2)).start()
    time.sleep(0.2)
    stopped.stop()
    cancelled = TrainingJob([Variant("book", tiny)], corpus, quick).cancel()
    with pytest.raises(ExplorerError) as again:
        finished.start()
    messages = [finished.view().message, diverged.view().message, stopped.view().message,
                cancelled.view().message, again.value]
    stopped.cancel()
    assert str(messages[2]).startswith("Stopped after") and str(messages[4]).startswith(
        "This job is finished")
    return messages


# ---------------------------------------------------------------------------------------------
# The bad-input catalogue, in Chinese
@pytest.fixture(scope="module")
def env():
    from explorer.book.config import PRESETS
    from explorer.book.tokenizer import get_tokenizer
    from explorer.runtime.build import build_model
    from explorer.runtime.cache import ModelCache
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield Env(build_model(PRESETS["teach-tiny"], seed=123, device="cpu"), get_tokenizer(),
              ModelCache())
    torch.set_num_threads(before)


# Three English words in a row (outside what the user typed): a sentence left in English.
ENGLISH_RUN = re.compile(r"\b[a-z]{2,}(?: [a-z]{2,}){2,}\b")


def test_every_bad_input_message_comes_out_in_chinese(env):
    untranslated = []
    for case in PY_CASES:
        if case.py_expect is None:
            continue
        _, error, _ = run_bounded(lambda: case.python(env), case.max_seconds)
        if isinstance(error, ValueError):
            # every refusal of the core is an ExplorerError, said by its id
            assert isinstance(error, ExplorerError), f"{case.id}: {error!r}"
            chinese = _zh(error)
            if not CJK.search(chinese) or ENGLISH_RUN.search(chinese):
                untranslated.append(f"{case.id}: {error} -> {chinese}")
    assert not untranslated, "\n".join(untranslated)
