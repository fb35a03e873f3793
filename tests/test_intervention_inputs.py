"""Bad interventions through the app's API, as raw HTTP (issue 32, items 6 to 8): the
Knock out tab's public /intervene, and its private Add and map-cell click (and the Walk tab's
diagram click) joined by ``fn_index`` with any JSON as their data and event data, as a script
can send them. Each gets a message that names the limit or what is allowed; none reaches the
server's unexpected-error path ("This is a bug ...")."""
import json
import logging
import urllib.request
import uuid

import pytest
import torch

from explorer.app.server import create_demo, launch_options
from explorer.probes import Interventions
from explorer.probes.interventions import MAX_INTERVENTION_CHARS, MAX_NUMBER_DIGITS

from bad_inputs import PROMPT, TRACE_VIEW, build_args
from test_bad_inputs import AppMessage, fn_index, is_plain_message, raw_call

TIMEOUT_S = 60


class _Collect(logging.Handler):
    def __init__(self):
        super().__init__(logging.ERROR)
        self.records = []

    def emit(self, record):
        self.records.append(record)


@pytest.fixture(scope="module")
def app():
    """The app in-process, and what its log said at ERROR (the unexpected-error path)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    unexpected = _Collect()
    logging.getLogger("gpt_explorer").addHandler(unexpected)
    demo = create_demo()
    _, url, _ = demo.launch(prevent_thread_lock=True, quiet=True,
                            **{**launch_options(host="127.0.0.1"), "server_port": None})
    yield url, unexpected.records
    demo.close()
    logging.getLogger("gpt_explorer").removeHandler(unexpected)
    torch.set_num_threads(before)


def joined(url, session, api, data, event_data=None):
    """An event joined by its index, as the page joins it (private events have no /call
    route): its output values, or AppMessage with the error it answered."""
    body = json.dumps({"data": data, "fn_index": fn_index(url, api), "session_hash": session,
                       "event_data": event_data, "trigger_id": None}).encode()
    request = urllib.request.Request(f"{url}gradio_api/queue/join", data=body,
                                     headers={"Content-Type": "application/json"})
    event_id = json.load(urllib.request.urlopen(request, timeout=TIMEOUT_S))["event_id"]
    stream = urllib.request.urlopen(f"{url}gradio_api/queue/data?session_hash={session}",
                                    timeout=TIMEOUT_S)
    for line in stream:
        if not line.startswith(b"data:"):
            continue
        message = json.loads(line[5:])
        if message.get("msg") == "process_completed" and message.get("event_id") == event_id:
            output = message.get("output") or {}
            if not message.get("success"):
                raise AppMessage(output.get("error") or json.dumps(output))
            return output["data"]
    raise AssertionError("the stream ended without the event's answer")


def refusal(call) -> str:
    with pytest.raises(AppMessage) as refused:
        call()
    message = str(refused.value)
    assert is_plain_message(message) and "This is a bug" not in message, message
    return message


@pytest.fixture
def built(app):
    """A new session with teach-tiny built. After the test: none of its refusals took the
    server's unexpected-error path (a bug's traceback, logged at ERROR)."""
    url, unexpected = app
    session = uuid.uuid4().hex[:11]
    raw_call(url, session, "/build", build_args())
    seen = len(unexpected)
    yield url, session
    assert [r.getMessage() for r in unexpected[seen:]] == []


def add(url, session, spec, heads="0", kind="zero_heads", layer=0):
    """The builder's Add: (interventions box, part, block, every block, heads box, session,
    language, lecture mode)."""
    return joined(url, session, "/add_part", [spec, kind, layer, False, heads, None, None,
                                              None])


def test_a_block_or_head_number_of_5000_digits_gets_a_message(built):
    url, session = built
    for spec in ("zero trf_blocks[" + "7" * 5000 + "].att", "zero trf_blocks[0].att head "
                 + "7" * 5000, "zero trf_blocks[1].att heads 1," + "9" * 5000):
        message = refusal(lambda: raw_call(url, session, "/intervene", (spec,)))
        assert f"at most {MAX_NUMBER_DIGITS} digits" in message and "5,000 digits" in message
        assert len(message) < 400, message
    assert "7" * 5000 not in refusal(lambda: add(url, session, "zero trf_blocks[0].att head "
                                                 + "7" * 5000))


def test_the_same_freeze_on_every_block_and_on_one_block_is_one_and_traces(built):
    url, session = built
    out = raw_call(url, session, "/intervene",
                   ("freeze trf_blocks[*].norm1; freeze trf_blocks[0].norm1",))
    assert "freeze" in json.dumps(out, ensure_ascii=False)
    traced = raw_call(url, session, "/trace", (PROMPT, 1, *TRACE_VIEW))
    assert "4 tokens" in traced[1]
    spec = add(url, session, "mean trf_blocks[*].att head 1", heads="1,2",
               kind="mean_heads")[0]
    assert spec == "mean trf_blocks[*].att head 1; mean trf_blocks[0].att head 2"


def test_a_look_alike_letter_in_a_part_gets_the_parts_that_exist(built):
    url, session = built
    message = refusal(lambda: raw_call(url, session, "/intervene",
                                       ("remove trf_blocks[0].ſhortcut",)))
    assert "“ſhortcut” is not a part of a block" in message, message
    for part in ("att", "ff", "norm1", "norm2", "shortcut", "att.shortcut", "ff.shortcut"):
        assert part in message.split(": the parts of trf_blocks[i] are ")[1], message


@pytest.mark.parametrize("event_data", [{}, None, {"value": 5}, {"index": 3}, [1, 2], "zero"],
                         ids=["empty", "null", "value-a-number", "no-value", "a-list", "text"])
def test_a_forged_click_on_the_knockout_map_gets_a_message(built, event_data):
    url, session = built
    message = refusal(lambda: joined(url, session, "/cell_clicked", [None, None, None],
                                     event_data))
    if isinstance(event_data, dict) and "value" in event_data:
        assert "written as text" in message, message
    else:
        assert "A click on “the knock-out map” came without what was clicked" in message


def test_a_click_on_the_knockout_map_with_only_a_value_makes_b(built):
    url, session = built
    out = joined(url, session, "/cell_clicked", [None, None, None],
                 {"value": "zero trf_blocks[1].att head 3"})
    assert "zero trf_blocks[1].att head 3" in json.dumps(out)


@pytest.mark.parametrize("event_data", [{}, None, {"value": ["att"]}],
                         ids=["empty", "null", "value-a-list"])
def test_a_forged_click_on_the_diagram_gets_a_message(built, event_data):
    url, session = built
    message = refusal(lambda: joined(url, session, "/stage_clicked",
                                     [0, PROMPT, None, None, None], event_data))
    assert "stage" in message, message


def test_add_with_20000_heads_in_the_box_is_refused_on_its_length(built):
    url, session = built
    spec = "; ".join(f"zero trf_blocks[0].att head {h}" for h in range(20_000))
    message = refusal(lambda: add(url, session, spec))
    assert f"at most {MAX_INTERVENTION_CHARS:,} characters" in message, message
    heads = ",".join(map(str, range(20_000)))
    message = refusal(lambda: add(url, session, "", heads=heads))
    assert f"at most {MAX_INTERVENTION_CHARS:,}" in message, message


def test_a_million_heads_are_refused_on_their_length(built):
    url, session = built
    heads = ",".join(map(str, range(10 ** 6)))
    message = refusal(lambda: raw_call(url, session, "/intervene",
                                       ("zero trf_blocks[0].att heads " + heads,)))
    assert "6,888,918 characters" in message and f"{MAX_INTERVENTION_CHARS:,}" in message


def test_within_the_limits_add_answers_with_what_applies(built):
    """The most parts the box takes, each a head of block 0: merged, then checked against the
    model (teach-tiny has heads 0 to 3)."""
    url, session = built
    spec = "; ".join(f"zero trf_blocks[0].att head {h % 4}" for h in range(2_000))
    assert add(url, session, spec, heads="3")[0] == "zero trf_blocks[0].att heads 0,1,2,3"
    spec = "; ".join(f"zero trf_blocks[0].att head {h}" for h in range(2_000))
    assert "Head 4 does not exist" in refusal(lambda: add(url, session, spec))


def test_the_most_interventions_a_model_can_take_are_said_in_both_languages():
    """About 2,000 parts (a model of 222 blocks, nine parts each): B's name and the tab's
    note say them all; a message nested one level per part was too deep (RecursionError)."""
    from explorer.app import prefs
    from explorer.app.i18n import say
    parts = ("zero trf_blocks[{}].att head 0", "zero trf_blocks[{}].att",
             "identity trf_blocks[{}].norm1", "remove trf_blocks[{}].att.shortcut",
             "zero trf_blocks[{}].ff", "relu trf_blocks[{}].ff", "identity trf_blocks[{}].norm2",
             "remove trf_blocks[{}].ff.shortcut", "remove trf_blocks[{}].shortcut")
    spec = "; ".join(p.format(b) for b in range(222) for p in parts)
    interventions = Interventions.parse(spec)
    assert len(interventions) == 1998
    english = say(interventions.describe())
    assert english.startswith("trf_blocks[0].att head 0 zeroed; ") and "trf_blocks[221]" in english
    with prefs.using(prefs.Prefs("zh")):
        assert "trf_blocks[221]" in say(interventions.describe())

