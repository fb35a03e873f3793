"""The page in every language of its catalogues (``explorer/app/i18n``): each text is written
once, in English, with a stable id, where it is made; each catalogue (``zh.json``) says every
id with the same fields; nothing translates rendered English back; the languages are the
files present. The texts are read from the source (``tests/source_texts.py``), so a new one
without a translation, a stale entry or a renamed field fails here."""
import ast
import re
import string
import time

import pytest
import torch
from markdown_it import MarkdownIt

from bad_inputs import CASES
from explorer.app import i18n, prefs
from source_texts import PACKAGE, fields_of, source_texts
from explorer.app.languages import CATALOGUES, FOLDER, LANGUAGES, messages
from explorer.book.errors import ExplorerError, Message
from test_bad_inputs import Env, run_bounded

CJK = re.compile(r"[\u3400-\u9fff]")
ZH = prefs.Prefs("zh")
TEXTS = source_texts()
ZH_MESSAGES = messages("zh")
# Texts the same in Chinese: the book's config keys and code names, numbers and names.
SAME = re.compile(r"^[\s\W\d]*$|^[A-Za-z_][\w]*$|^[A-Za-z_\-·{}:,.!%() ×0-9]*$")


def _zh(message) -> str:
    with prefs.using(ZH):
        return i18n.say(message)


# ---------------------------------------------------------------------------------------------
# The catalogues against the source
def test_the_languages_are_the_catalogue_files_present():
    files = sorted(p.stem for p in FOLDER.glob("*.json"))
    assert list(LANGUAGES) == ["en", *files] and "zh" in files
    for code in files:
        language = CATALOGUES[code]["language"]
        assert language["name"] and language["locale"]


def test_there_are_many_texts_and_every_id_is_a_short_stable_name():
    assert len(TEXTS) > 700
    for id_ in TEXTS:
        assert re.fullmatch(r"[a-z][a-z0-9_]*(\.[a-z0-9_]+)+", id_) and len(id_) <= 48, id_


def test_every_text_of_the_source_has_a_chinese_entry_with_its_fields():
    missing = [f"{where}: {id_}: {text!r}" for id_, (text, where) in TEXTS.items()
               if id_ not in ZH_MESSAGES]
    assert not missing, "\n".join(missing)
    wrong = [f"{id_}: {sorted(fields_of(ZH_MESSAGES[id_]))} instead of "
             f"{sorted(fields_of(text))}" for id_, (text, _) in TEXTS.items()
             if fields_of(ZH_MESSAGES[id_]) != fields_of(text)]
    assert not wrong, "\n".join(wrong)


def test_no_stale_entries():
    stale = [id_ for id_ in ZH_MESSAGES if id_ not in TEXTS]
    assert not stale, stale


def test_one_id_says_one_text():
    """``source_texts`` refuses an id with two English texts; it finds them all."""
    probe = PACKAGE / "app" / "_one_text_probe.py"
    probe.write_text('t("probe.x", "one")\nt("probe.x", "two")\n')
    try:
        with pytest.raises(ValueError, match="probe.x has two texts"):
            source_texts()
    finally:
        probe.unlink()


def test_every_label_of_the_page_is_a_text_of_the_source():
    """What the browser translates (every widget's label) is found in the source, so that the
    catalogue check above covers it."""
    from explorer.app.layout import build_app
    build_app()
    unknown = [id_ for id_ in i18n._BROWSER["en"] if id_ not in TEXTS]
    assert not unknown, unknown
    assert len(i18n._BROWSER["en"]) > 100


def test_no_raise_of_a_bare_value_error_for_input_in_the_core():
    bare = []
    for wing in ("book", "probes", "runtime", "native"):
        for path in sorted((PACKAGE / wing).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if (isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call)
                        and getattr(node.exc.func, "id", None) == "ValueError"):
                    bare.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
    assert not bare, bare


# ---------------------------------------------------------------------------------------------
# The Chinese texts
def test_each_chinese_text_is_a_template_and_chinese_where_the_english_has_words():
    bad = []
    for id_, (english, _) in TEXTS.items():
        chinese = ZH_MESSAGES[id_]
        try:
            list(string.Formatter().parse(chinese))
        except ValueError as error:
            bad.append(f"{id_}: not a template ({error}): {chinese!r}")
            continue
        words = "".join(text for text, *_ in string.Formatter().parse(english))
        if not chinese.strip():
            bad.append(f"{id_}: empty")
        elif not CJK.search(chinese) and re.search(r"[a-z]{3,} [a-z]{3,}", words):
            bad.append(f"{id_}: no Chinese in {chinese!r} ({english!r})")
    assert not bad, "\n".join(bad)


def test_labels_have_no_stray_braces_or_apostrophes_for_the_browser():
    """The browser formats a label with ICU MessageFormat: a brace outside a field, or an
    apostrophe, would change it."""
    from explorer.app.layout import build_app
    build_app()
    bad = [f"{locale}: {id_}: {text!r}" for locale, texts in i18n._BROWSER.items()
           for id_, text in texts.items()
           if ("'" in text and locale != "en") or re.sub(r"\{\w+\}", "", text).count("{")]
    assert not bad, "\n".join(bad)


def test_markdown_in_chinese_renders_its_emphasis():
    """CommonMark closes ``**`` only when it is "right-flanking": ``**比较两个模型：**把`` (a
    full-width colon, then a letter) stays two literal asterisks on the page."""
    md = MarkdownIt()
    raw = []
    for id_, chinese in ZH_MESSAGES.items():
        if "**" not in chinese or "2**63" in chinese:
            continue
        for filler in ("字", "a", "1"):
            if "**" in md.renderInline(re.sub(r"\{[^}]*\}", filler, chinese)):
                raw.append(f"{id_}: {chinese!r}")
                break
    assert not raw, "\n".join(raw)


def test_terms_follow_the_chinese_edition():
    """A few of the book's terms, spelled one way throughout (the edition's: 词元, 提示词,
    快捷连接, 随机种子 ...)."""
    text = "\n".join(ZH_MESSAGES.values())
    for avoided in ("令牌", "标记", "残差连接", "捷径", "批量大小", "提示语", "贪婪", "种子值"):
        assert avoided not in text, avoided
    assert ZH_MESSAGES["inside.prompt"] == "提示词" and ZH_MESSAGES["gen.token"] == "词元"
    assert ZH_MESSAGES["gen.temperature"] == "温度" and ZH_MESSAGES["build.seed"] == "随机种子"


# ---------------------------------------------------------------------------------------------
# Saying messages
def test_a_message_is_said_by_its_id_with_its_fields_and_the_messages_inside_it():
    inner = Message("short.post_ln", "post-LN")
    outer = Message("names.model", "{name} · {what}", name="A", what=inner)
    assert i18n.say(outer) == "A · post-LN"
    assert _zh(Message("gen.clear", "Clear")) == ZH_MESSAGES["gen.clear"]
    assert _zh(Message("test.unknown", "Not in any catalogue")) == "Not in any catalogue"
    assert _zh("plain text, as it came") == "plain text, as it came"


def _error_of(fn) -> ExplorerError:
    with pytest.raises(ExplorerError) as caught:
        fn()
    return caught.value


def _numbers(text: str) -> list[str]:
    return re.findall(r"\d[\d,.]*\d|\d", text)


def _real_errors():
    from explorer.book.config import GPTConfig, get_preset
    from explorer.book.load_weights import describe_differences
    from explorer.book.tokenizer import get_tokenizer
    from explorer.runtime.cache import ModelCache
    from explorer.runtime.training.setup import TrainingSettings, corpus_from_text, make_variants

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
        "variant twice": lambda: make_variants(["post-LN", "post-LN"]),
        "budget": lambda: ModelCache(1024 ** 2).check_budget(get_preset("gpt2-small")),
        "shapes": lambda: (_ for _ in ()).throw(ExplorerError.of(describe_differences(
            {"tok_emb.weight": (100, 64), "pos_emb.weight": (64, 64)},
            {"tok_emb.weight": (100, 32), "extra.bias": (3,)}, "model.safetensors"))),
    }


@pytest.mark.parametrize("case", list(_real_errors()))
def test_real_core_errors_are_said_in_chinese_with_their_numbers(case):
    error = _error_of(_real_errors()[case])
    message, chinese = str(error), _zh(error)
    assert CJK.search(chinese), f"{message!r} -> {chinese!r}"
    assert sorted(_numbers(chinese)) == sorted(_numbers(message)), (message, chinese)
    assert _zh(error.message) == chinese           # the error or its message: the same
    with prefs.using(prefs.Prefs("en")):
        assert i18n.say(error) == message


def test_page_texts_of_the_core_in_chinese():
    from explorer import native
    from explorer.book.config import count_parameters, get_preset
    from explorer.book.curves import ACTIVATION_LABELS
    from explorer.book.probe_points import PROBE_POINTS
    from explorer.book.stages import STAGES
    from explorer.runtime.sources import WeightsSource
    from explorer.runtime.training.setup import DEFAULT_CORPUS_NAME, VARIANT_CHOICES, \
        VARIANT_LABELS
    assert set(VARIANT_LABELS) == set(VARIANT_CHOICES)        # every variant has its name
    texts = [WeightsSource.random(123).caption,
             WeightsSource("pretrained", repo_id="openai-community/gpt2").caption,
             WeightsSource("file", filename="model.safetensors", digest="ab" * 32).caption,
             WeightsSource.trained(None).caption, native.decoding_label(True),
             native.decoding_label(False), DEFAULT_CORPUS_NAME,
             *count_parameters(get_preset("teach-tiny").replace(tie_weights=True)).notes(),
             *(p.label for p in PROBE_POINTS), *(s.title for s in STAGES),
             ACTIVATION_LABELS["gelu"], VARIANT_LABELS["no shortcut"]]
    for text in texts:
        assert CJK.search(_zh(text)), text


def test_a_trained_models_texts_in_chinese():
    """The weights caption of a trained variant and the job's messages, with the default
    story's and the variant's names in Chinese too."""
    from types import SimpleNamespace
    from explorer.runtime.training.views import trained_caption
    from explorer.runtime.training.setup import DEFAULT_CORPUS_NAME
    story = DEFAULT_CORPUS_NAME
    for steps in (1, 2):
        caption = _zh(trained_caption(SimpleNamespace(steps=steps, label="no shortcut"), story))
        assert caption.startswith(f"训练了 {steps} 步") and _zh(story) in caption
        assert _zh(Message("variant.no_shortcut", "no shortcut")) in caption
    for message in _job_messages(story):
        chinese = _zh(message)
        assert CJK.search(chinese) and not re.search(r"\b(steps|Stopped|finished)\b", chinese)
        assert "The Clockmaker" not in chinese


def _job_messages(story) -> list:
    """What real jobs on the default story say: finished, finished with a diverged variant,
    stopped, cancelled, and the refusal to start a finished job again."""
    from explorer.book.config import GPTConfig
    from explorer.runtime.training.job import TrainingJob
    from explorer.runtime.training.setup import Corpus, TrainingSettings, Variant, default_corpus
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
    messages_ = [finished.view().message, diverged.view().message, stopped.view().message,
                 cancelled.view().message, again.value]
    stopped.cancel()
    return messages_


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
    for case in CASES:
        if case.python is None or case.py_expect is None:
            continue
        _, error, _ = run_bounded(lambda: case.python(env), case.max_seconds)
        if isinstance(error, ValueError):
            # every refusal of the core is an ExplorerError, said by its id
            assert isinstance(error, ExplorerError), f"{case.id}: {error!r}"
            chinese = _zh(error)
            if not CJK.search(chinese) or ENGLISH_RUN.search(chinese):
                untranslated.append(f"{case.id}: {error} -> {chinese}")
    assert not untranslated, "\n".join(untranslated)


def test_the_browsers_catalogues_are_given_whole_once_the_page_is_made():
    """Gradio's i18n is built from the page's labels (public ``gr.I18n``), not filled in after
    it was given to ``launch``: every label in every language, the Chinese ones translated."""
    from explorer.app.server import create_demo, launch_options
    create_demo()
    catalogues = launch_options()["i18n"].translations_dict
    assert set(catalogues["en"]) == set(i18n._BROWSER["en"]) and len(catalogues["en"]) > 100
    assert set(catalogues["zh-CN"]) == set(catalogues["en"])
    assert catalogues["en"]["build.device"] != catalogues["zh-CN"]["build.device"]
    i18n.label("test.later", "made after")        # a later label changes no catalogue given
    assert "test.later" not in catalogues["en"]
