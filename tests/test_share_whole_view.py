"""Issue 47, item 4 and item 21: a share link carries the whole view (the language, lecture
mode, the model, B's intervention, the tab and its layer and head), opens the same view, and
says what it left out or changed (a layer 9999 of a two-layer model was put right silently)."""
from urllib.parse import quote

import pytest

from explorer.app import prefs, share_view
from explorer.app.layout import build_app
from explorer.app.pickers import choose
from explorer.app.plots.knockout import METRICS
from explorer.app.session import Session
from explorer.app.tabs import attention, build, inside, knockout
from explorer.app.tabs.knockout_map import MapView
from explorer.book.config import PRESETS
from explorer.runtime.links import Page, Rules, link_query, read_query

TABS = ("build", "inside", "attention", "activations", "generate", "train", "knockout")
RULES = Rules(default=Page(preset="teach-small", config=PRESETS["teach-small"],
                           weights="random", size="small", seed=123,
                           prompt="Every effort moves you", tab="build", lang="en"),
              tabs=TABS, sizes=("small",), langs=("en", "zh"))
B = "zero trf_blocks[1].att head 2"
VIEW = (0, "norm1: before vs after LayerNorm", "resid_pre", "std")


@pytest.fixture(scope="module", autouse=True)
def page():
    return build_app()      # (every tab registered its render)


def opened(query, lang="en", rules=RULES):
    session = Session()
    out = share_view.open_link_handler(rules)(query, session, lang, "cpu", "float32")
    return session, out


def link_of(session, tab):
    """/share_link of the session, as the page's button asks for it."""
    cfg = session.models[0].key.config
    with prefs.using(session.prefs):
        return share_view.share_link(RULES, "teach-tiny", *(getattr(cfg, k) for k in
                                                            build.FIELDS),
                                     123, "random", "small", "Every effort moves you", tab,
                                     session)


def test_a_link_carries_lecture_mode_and_bs_intervention_and_reads_them_back():
    whole = Page(preset="teach-tiny", config=PRESETS["teach-tiny"], weights="random",
                 size="small", seed=123, prompt="Every effort moves you", tab="attention",
                 lang="zh", layer=1, head="3", lecture=True, b=B)
    query = link_query(whole, RULES)
    assert "lecture=true" in query and "b=" + quote(B, safe="") in query
    reading = read_query(query, RULES)
    assert reading.page == whole and reading.problems == () and reading.builds
    assert not read_query("?lecture=true&lang=zh", RULES).builds, "view settings alone"
    for bad in ("?b=explode%20everything", "?b=" + "x" * 5000, "?lecture=maybe"):
        reading = read_query(bad, RULES)
        assert len(reading.problems) == 1 and not reading.page.b and not reading.page.lecture


def test_a_link_from_zh_lecture_mode_and_a_knocked_out_b_reopens_all_of_them():
    """Item 4: the link reopened without B and without lecture mode, and said only "same
    model, prompt and tab"."""
    session, _ = opened("?preset=teach-tiny&tab=attention&lang=zh")
    session.prefs = prefs.parse("zh", True)
    inside.run_trace.__wrapped__("Every effort moves you", session, *VIEW)
    knockout.intervene(B, session)
    attention.attention_views.__wrapped__(session, 1, "3")
    made = link_of(session, "attention")
    link = made["share_link"]
    assert "lecture=true" in link and "lang=zh" in link and "b=zero" in link
    assert "layer=1" in link and "head=3" in link
    assert "授课模式" in made["share_note"]          # it says what it carries, in zh
    again, out = opened(link, "zh")
    assert again.prefs == prefs.parse("zh", True) and out["lecture"] is True
    assert len(again.models) == 2 and str(again.models[1].key.interventions) == B
    assert len(again.traces) == 2, "A and B both traced for the Attention tab"
    assert out["att_layer"]["value"] == 1 and out["att_head"]["value"] == "3"
    assert "B" in out["status"] and "share_row" not in out or not out["share_note"]


def test_a_pinned_b_is_said_to_be_left_out_of_the_link():
    session, _ = opened("?preset=teach-tiny&tab=inside")
    session.with_models(session.models * 2)          # B pinned: not an intervention
    made = link_of(session, "inside")
    assert "&b=" not in made["share_link"] and "pinned" in made["share_note"]


def test_a_link_asking_for_layer_and_head_9999_says_what_it_changed():
    """Item 21: the page put them right (the last layer, "mean") and said nothing."""
    session, out = opened("?preset=teach-tiny&tab=attention&layer=9999&head=9999")
    last = PRESETS["teach-tiny"].n_layers - 1
    assert out["att_layer"]["value"] == last and out["att_head"]["value"] == "mean"
    assert "layer 9999 → 1" in out["share_note"] and "head 9999 → mean" in out["share_note"]
    assert "9999" not in out["status"], "said once, in the link's note"
    assert out["share_row"]["visible"] is True


def test_a_links_b_that_does_not_fit_the_model_is_said():
    session, out = opened("?preset=teach-tiny&tab=inside&b=" + quote("zero trf_blocks[7].att "
                                                                     "head 1"))
    assert len(session.models) == 1 and "does not fit" in out["share_note"]


def test_the_readme_says_what_a_link_carries_and_what_use_this_model_changes():
    """Item 20: the README never said what a share link carries, called Use this model
    "(tabs 2–5)" while it changes tab 7 too, and put "For teachers" about 240 lines down."""
    from pathlib import Path
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    heads = [line for line in readme.splitlines() if line.startswith("## ")]
    assert heads[0].startswith("## For teachers"), heads[:3]
    assert readme.index("## For teachers") < 100 * 80           # near the top
    link = readme[readme.index("**Share the set-up:**"):]
    link = link[:link.index("\n2. ")]
    for carried in ("B's intervention", "lecture mode", "the language", "layer", "head",
                    "pinned", "trained", "what was computed", "note says so"):
        assert carried in link, carried
    assert "tabs 2–5" not in readme and "Knock out (the status line" in readme.replace(
        "\n   ", " ")


# Issue 49: a link made on the Patching tab carries its pair, and opening it fills the boxes.
PATCHING_RULES = Rules(default=RULES.default, tabs=(*TABS, "patching"), sizes=("small",),
                       langs=("en", "zh"))
PAIR = ("When Mary and John went", "When Alice and Bob went", " Mary", " John")


def test_a_patching_pair_goes_into_a_link_and_comes_back_whole():
    """Before: the link carried ``tab=patching`` alone (and a Page had no pair)."""
    whole = Page(preset="teach-tiny", config=PRESETS["teach-tiny"], weights="random",
                 size="small", seed=123, prompt="Every effort moves you", tab="patching",
                 lang="en", pair=PAIR)
    query = link_query(whole, PATCHING_RULES)
    assert "clean=When%20Mary" in query and "wrong=%20John" in query
    reading = read_query(query, PATCHING_RULES)
    assert reading.page.pair == PAIR and reading.problems == ()
    # only on the Patching tab: another tab's link has no pair
    assert "clean=" not in link_query(Page(**{**whole.__dict__, "tab": "inside"}),
                                      PATCHING_RULES)


@pytest.mark.parametrize("bad, said", [
    ("clean=" + "x" * 5000, "5,000 characters"),        # the prompt's limit, said
    ("clean=%20%20", "is empty"),
    ("clean=%FF", "not valid UTF-8"),                  # not text: said, not a traceback
], ids=("too_long", "empty", "not_utf8"))
def test_a_links_pair_that_cannot_be_used_is_said_and_the_boxes_stay_empty(bad, said):
    query = f"?tab=patching&{bad}&corrupted=b&right=c&wrong=d"
    reading = read_query(query, PATCHING_RULES)
    assert reading.page.pair == () and reading.page.tab == "patching"
    assert any(said in p.text.format(**p.fields) for p in reading.problems), reading.problems
    part = read_query("?tab=patching&clean=a&right=c", PATCHING_RULES)
    assert part.page.pair == () and [p.id for p in part.problems] == ["link.pair_part"]


def test_a_link_made_on_the_patching_tab_fills_its_four_boxes_in_a_fresh_page():
    from explorer.app.tabs import patching
    session, _ = opened("?preset=teach-tiny&tab=patching", rules=PATCHING_RULES)
    pair = patching.pair_chosen("copying", session)           # "Use this pair"
    texts = tuple(pair[k] for k in ("patch_clean", "patch_corrupted", "patch_right",
                                    "patch_wrong"))
    made = share_view.share_link(PATCHING_RULES, "teach-tiny",
                                 *(getattr(PRESETS["teach-tiny"], k) for k in build.FIELDS),
                                 123, "random", "small", "Every effort moves you", "patching",
                                 session)
    assert "patching maps" in made["share_note"]          # computed: not in the link
    again, out = opened(made["share_link"], rules=PATCHING_RULES)
    assert (out["patch_clean"], out["patch_corrupted"], out["patch_right"],
            out["patch_wrong"]) == texts
    assert "press **Patch**" in out["share_note"] and "could not" not in out["share_note"]
    assert again.view(patching.PatchPair).texts == texts, "a link made again carries it"
    # a pair longer than a link carries is left out, and said
    session.show(patching.PatchPair, texts=("x" * 3000, *texts[1:]))
    made = share_view.share_link(PATCHING_RULES, "teach-tiny",
                                 *(getattr(PRESETS["teach-tiny"], k) for k in build.FIELDS),
                                 123, "random", "small", "Every effort moves you", "patching",
                                 session)
    assert "clean=" not in made["share_link"] and "leaves the pair out" in made["share_note"]


def test_a_link_says_which_of_its_tabs_choices_it_leaves_out():
    """A tab's choices a link has no field for (Inside's distribution and heatmap, the map's
    text and metric, the Generate tab's settings) open at their defaults: the note says so,
    naming those not at their defaults, and says nothing where all are."""
    session, _ = opened("?preset=teach-tiny&tab=inside")
    assert "does not carry" not in link_of(session, "inside")["share_note"]
    choose(session, heat_stat="mean")
    note = link_of(session, "inside")["share_note"]
    assert "does not carry" in note and "heatmap: statistic" in note
    assert "heatmap: probe point" not in note
    assert "does not carry" not in link_of(session, "knockout")["share_note"]
    choose(session, knock_text="the story")
    session.show(MapView, metric=next(m for m in METRICS if m != MapView().metric))
    note = link_of(session, "knockout")["share_note"]
    assert "text" in note and "the map shows" in note
    assert "decoding, temperature" in link_of(session, "generate")["share_note"]
    session.prefs = prefs.parse("zh", False)
    assert "默认值" in link_of(session, "generate")["share_note"]
