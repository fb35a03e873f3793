"""The page's side of a shareable link (explorer/app/share_view.py): a link's problems are said
in the page's language, with the link's text inert. Fast: no Gradio app, no model."""
import html

import pytest

from explorer.app import prefs
from explorer.app.i18n import say, t
from explorer.app.share_view import _message, inert
from explorer.book.config import PRESETS
from explorer.book.errors import Message
from explorer.runtime.links import read_query
from test_links import RULES


# ---------------------------------------------------------------------------------------------
# The page's side: a message shows a link's text inert, in the page's language
def test_a_message_shows_the_links_text_as_text_not_html_or_markdown():
    problem = Message("link.unknown_names", "The link has parameters this page does not know: "
                      "{names}. They were ignored.",
                      names="'<img src=x onerror=alert(1)>', '[x](javascript:1)'")
    message = _message(problem)
    assert "<img" not in message and "](" not in message
    assert "&#60;img" in message and "&#91;x&#93;&#40;javascript:1&#41;" in message
    assert inert("a_b *c* `d`") == "a&#95;b &#42;c&#42; &#96;d&#96;"


def test_a_message_is_in_the_pages_language():
    reading = read_query("?n_layers=abc&seed=-1", RULES)
    with prefs.using(prefs.Prefs("zh")):
        messages = [html.unescape(_message(p)) for p in reading.problems]
    assert "seed 必须是 0 到 2**63 - 1 之间的整数" in messages[0]
    # the config's own refusal, in the page's language too
    assert messages[1].startswith("链接中的配置被拒绝：“n_layers”必须是整数")


# ---------------------------------------------------------------------------------------------
# (tests/test_i18n.py checks that every text of these views has its Chinese in zh.json)
def test_the_walks_refusals_and_card_in_chinese():
    """The walk's refusals, as ``i18n.translate`` says them (by their message's id)."""
    from types import SimpleNamespace
    from explorer.book.errors import ExplorerError
    from explorer.probes.stages import stage_details
    tiny = SimpleNamespace(config=PRESETS["teach-tiny"].to_dict(), token_ids=[1])
    with pytest.raises(ExplorerError) as refused:
        stage_details(tiny, "attention", 7)
    assert str(refused.value) == "Block 7 does not exist: this model has blocks 0 to 1."
    with prefs.using(prefs.Prefs("zh")):
        assert say(refused.value) == "块 7 不存在：此模型的块编号为 0 到 1。"
        assert t("walk.block_trf_blocks", "block {block} of {n} (trf_blocks[{block}])",
                 block=1, n=4) == "第 1 块，共 4 块（trf_blocks[1]）"
