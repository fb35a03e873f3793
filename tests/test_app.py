"""The app's API through gradio_client, against the app launched in-process."""
import json
import os
import re
import types
import urllib.error
import urllib.request

import pytest
import torch
from local_client import launched, local_client

from explorer.book.config import PRESETS
from explorer.book.generate import generate_text_simple
from explorer.runtime.build import build_model
from explorer.book.tokenizer import get_tokenizer
from explorer.app.plots.generation import LIVE_TABLE_ROWS
from explorer.app.inputs import MAX_NEW_TOKENS
from explorer.app.session import DEFAULT_PROMPT
from explorer.app.session import Generation, Session
from explorer.app.tabs import generate as generate_tab
from explorer.app.tabs import generate_views


@pytest.fixture(scope="module")
def app_url():
    with launched(max_file_size="1mb") as url:
        yield url


def client(url):
    return local_client(url)


def build_args(preset="teach-tiny", seed=123, **changes):
    cfg = {**PRESETS[preset].to_dict(), **changes}
    return dict(preset=preset, vocab_size=cfg["vocab_size"],
                context_length=cfg["context_length"], emb_dim=cfg["emb_dim"],
                n_heads=cfg["n_heads"], n_layers=cfg["n_layers"], drop_rate=cfg["drop_rate"],
                qkv_bias=cfg["qkv_bias"], norm_placement=cfg["norm_placement"],
                shortcut=cfg["shortcut"], activation=cfg["activation"],
                ff_expansion=cfg["ff_expansion"], tie_weights=cfg["tie_weights"],
                pos_encoding=cfg["pos_encoding"], seed=seed, device="cpu", dtype="float32",
                api_name="/build")


def plotly_json(value):
    assert value["type"] == "plotly"
    return json.loads(value["plot"])


def test_build_reports_the_books_parameter_figures(app_url):
    c = client(app_url)
    status, arch, table, plot, memory = c.predict(**build_args("teach-tiny"))[:5]
    total = f"{sum(p.numel() for p in build_model(PRESETS['teach-tiny'], device='cpu').parameters()):,}"
    assert total in status and "cpu" in status
    assert "TransformerBlock" in arch or "block" in arch.lower()
    assert table["data"][-1][:2] == ["total", total]
    assert plotly_json(plot)["data"]
    assert "float32" in memory and "bfloat16" in memory


def test_rebuilding_a_built_config_comes_from_the_cache(app_url):
    c = client(app_url)
    c.predict(**build_args("teach-small", seed=5))
    status = c.predict(**build_args("teach-small", seed=5))[0]
    assert "from the shared cache" in status


def test_bad_config_gets_a_readable_message(app_url):
    c = client(app_url)
    with pytest.raises(Exception, match="divisible by n_heads"):
        c.predict(**build_args("teach-tiny", emb_dim=70))
    with pytest.raises(Exception, match="drop_rate"):
        c.predict(**build_args("teach-tiny", drop_rate=1.0))
    # the session still works after an error
    assert "Model ready" in c.predict(**build_args("teach-tiny"))[0]


def test_endpoints_before_a_build_ask_for_one(app_url):
    c = client(app_url)
    with pytest.raises(Exception, match="No model yet"):
        c.predict(DEFAULT_PROMPT, 0, "norm1: before vs after LayerNorm", "resid_pre", "std",
                  api_name="/trace")


def test_trace_attention_and_views_answer(app_url):
    c = client(app_url)
    c.predict(**build_args("teach-tiny"))
    chips, info, stats, hist, heat = c.predict(
        DEFAULT_PROMPT, 1, "norm1: before vs after LayerNorm", "resid_pre", "std",
        api_name="/trace")
    for piece in ("Every", "effort", "moves", "you"):
        assert piece in chips
    assert "4 tokens" in info
    for fig in (stats, hist, heat):
        assert plotly_json(fig)["data"]
    hist2, heat2 = c.predict(0, "feed-forward hidden: before vs after activation", "ff_post",
                             "zero_frac", api_name="/inside_views")
    assert plotly_json(hist2)["data"] and plotly_json(heat2)["data"]
    att, grid, entropy, named, scores = c.predict(1, "mean", api_name="/attention")
    assert all(plotly_json(f)["data"] for f in (att, grid, entropy))
    # every head's scores, one row each (teach-tiny: 2 layers x 4 heads), then what uniform
    # attention scores (the chance level: on the 4-token prompt 0.361 for the first two)
    assert scores["headers"] == ["layer", "head", "previous token", "first token", "induction"]
    *head_rows, uniform = scores["data"]
    assert [row[:2] for row in head_rows] == [[l, h] for l in range(2) for h in range(4)]
    assert all(0 <= v <= 1 for row in head_rows for v in row[2:])
    assert uniform[0] == "uniform" and uniform[2] == uniform[3] == 0.361
    path = c.predict(1, "0", api_name="/export_attention")
    rows = open(path, encoding="utf-8").read().splitlines()
    assert len(rows) == 5  # header + one row per query token
    stats_csv = c.predict("CSV", api_name="/export_stats")
    assert "ln1_out" in open(stats_csv, encoding="utf-8").read()
    stats_json = json.load(open(c.predict("JSON", api_name="/export_stats"), encoding="utf-8"))
    assert stats_json["token_ids"] == get_tokenizer().encode(DEFAULT_PROMPT)
    exported = stats_json["head_scores"]["A"]
    assert [[round(v, 3) for v in exported[s][l]] for l in range(2) for s in
            ("previous", "first", "induction")] == [
        [row[2 + i] for row in head_rows if row[0] == l] for l in range(2)
        for i in range(3)]


def test_layer_out_of_range_is_refused(app_url):
    c = client(app_url)
    c.predict(**build_args("teach-tiny"))
    c.predict(DEFAULT_PROMPT, 0, "norm1: before vs after LayerNorm", "resid_pre", "std",
              api_name="/trace")
    with pytest.raises(Exception, match="does not exist|greater than maximum"):
        c.predict(7, "mean", api_name="/attention")


def test_layer_choice_follows_the_built_model(app_url):
    """The default preset has 4 layers; a 12-layer model must offer layer 11."""
    c = client(app_url)
    c.predict(**build_args("teach-deep"))
    c.predict(DEFAULT_PROMPT, 11, "norm1: before vs after LayerNorm", "resid_pre", "std",
              api_name="/trace")
    att, grid, entropy, named, scores = c.predict(11, "3", api_name="/attention")
    assert "layer 11" in json.dumps(plotly_json(att)["layout"]["title"])


def test_activation_curves_and_gradients_answer(app_url):
    c = client(app_url)
    fig = plotly_json(c.predict(-3, 3, ["gelu", "relu", "silu"], True, 0,
                                api_name="/activation_curves"))
    assert len(fig["data"]) >= 3
    book, gpt = c.predict(api_name="/gradients")
    assert plotly_json(book)["data"]


def _greedy_reference(preset, prompt, n, seed=123):
    model = build_model(PRESETS[preset], seed=seed, device="cpu")
    ids = torch.tensor([get_tokenizer().encode(prompt)])
    out = generate_text_simple(model, ids, n, PRESETS[preset].context_length)
    return get_tokenizer().decode(out[0].tolist())


def test_generation_streams_the_engines_greedy_tokens(app_url, monkeypatch):
    monkeypatch.setattr(generate_tab, "STREAM_INTERVAL_S", 0.0)   # every step goes out
    c = client(app_url)
    c.predict(**build_args("teach-tiny"))
    job = c.submit(DEFAULT_PROMPT, 12, "greedy", 1.0, 50, 123, False, api_name="/generate")
    outputs = list(job)
    texts = [o[0] for o in outputs if isinstance(o[0], str) and o[0]]
    assert len(texts) >= 12, "generation must stream every step when the page can keep up"
    assert all(b.startswith(a) for a, b in zip(texts, texts[1:]))
    assert len(set(texts)) == 12   # (the table follows in a last update of the same text)
    final = job.result()
    assert final[0] == _greedy_reference("teach-tiny", DEFAULT_PROMPT, 12)
    assert step_rows(final[2]) == list(range(12, 0, -1))
    assert "12 tokens" in final[3] and "tokens/s" in final[3]


def test_a_model_faster_than_the_screen_waits_for_it_and_every_step_reaches_the_page(
        app_url, monkeypatch):
    """A model faster than 30 steps a second (on a fake clock, decoding takes no time) waits
    for the screen: a step at most every STEP_INTERVAL_S. The page gets an update at most every
    STREAM_INTERVAL_S, each with the steps made since the one before, and none is skipped.
    Nothing depends on real timing."""
    clock = types.SimpleNamespace(now=0.0, sent=[])
    fake_time = types.SimpleNamespace(
        perf_counter=lambda: clock.now,
        sleep=lambda s: setattr(clock, "now", clock.now + s))
    monkeypatch.setattr(generate_tab, "time", fake_time)
    real_shown = generate_views.shown

    def shown(*args, **kwargs):
        if kwargs.get("live"):
            clock.sent.append(clock.now)
        return real_shown(*args, **kwargs)
    monkeypatch.setattr(generate_views, "shown", shown)
    c = client(app_url)
    c.predict(**build_args("teach-tiny"))
    n = 20
    outputs = list(c.submit(DEFAULT_PROMPT, n, "greedy", 1.0, 50, 123, False,
                            api_name="/generate"))
    assert clock.now >= (n - 1) * generate_tab.STEP_INTERVAL_S - 1e-9   # the model waited
    gaps = [b - a for a, b in zip(clock.sent, clock.sent[1:])]
    assert 2 <= len(clock.sent) < n
    assert all(g >= generate_tab.STREAM_INTERVAL_S - 1e-9 for g in gaps), gaps
    held = [[int(x) for x in re.findall(r'data-step="(\d+)"', o[1])] for o in outputs]
    assert [s for h in held[:-1] for s in h] + [s for s in held[-1] if s > held[-2][-1]] == (
        list(range(1, n + 1)))                      # every step, each once, in order
    assert outputs[-1][0] == _greedy_reference("teach-tiny", DEFAULT_PROMPT, n)
    assert step_rows(outputs[-1][2]) == list(range(n, 0, -1))       # newest first


def test_the_bars_and_speed_hold_the_last_steps_for_the_page_to_paint_each(app_url,
                                                                          monkeypatch):
    """Every update of a stream holds the steps made since the one before (the page paints
    each in turn)."""
    monkeypatch.setattr(generate_tab, "STREAM_INTERVAL_S", 0.0)
    c = client(app_url)
    c.predict(**build_args("teach-tiny"))
    n = 21
    outputs = list(c.submit(DEFAULT_PROMPT, n, "greedy", 1.0, 50, 123, False,
                            api_name="/generate"))
    live = [[int(x) for x in re.findall(r'data-step="(\d+)"', o[1])] for o in outputs[:-1]
            if o[1]]
    for before, after in zip(live, live[1:]):
        assert after[0] == before[-1] + 1   # no step between updates lost
    assert live[-1][-1] == n
    speeds = [re.findall(r'data-step="(\d+)"', o[3]) for o in outputs[:-1] if o[3]]
    assert speeds[-1][-1] == str(n)
    # the final update still holds the last steps (a busy page may not have painted them all
    # yet), and ends with the last one; the views after it show the last step alone
    final = outputs[-1]
    assert [int(x) for x in re.findall(r'data-step="(\d+)"', final[1])] == live[-1]
    assert re.findall(r'data-step="(\d+)"', final[3]) == speeds[-1]
    assert "chosen" in final[1] and f">{n} tokens" in final[3]


def test_after_a_stream_a_redraw_shows_the_last_steps_bars_alone():
    """The final update holds the last steps for the page to paint; a redraw after it (another
    language, lecture mode) renders the last step afresh, alone."""
    from explorer.app.tabs import build as build_tab
    tiny = PRESETS["teach-tiny"]
    state = build_tab.build("teach-tiny", *tiny.to_dict().values(), 123, "cpu", "float32",
                            session=Session(), progress=lambda *a, **k: None)["session"]
    updates = list(generate_tab.generate(DEFAULT_PROMPT, 5, "greedy", 1.0, 50, 123, False,
                                         state))
    assert re.findall(r'data-step="(\d+)"', updates[-1]["bars"])[-1] == "5"
    again = generate_tab.render(updates[-1]["session"])
    assert "data-step" not in again["bars"] and "chosen" in again["bars"]
    assert again["speed"].startswith("5 tokens")


def step_rows(table_html):
    """The step numbers in the step table, top (newest) first."""
    return [int(n) for n in re.findall(r"<tr><td>(\d+)</td>", table_html)]


def test_next_token_advances_exactly_one_step(app_url):
    c = client(app_url)
    c.predict(**build_args("teach-tiny"))
    text = DEFAULT_PROMPT
    for n in range(1, 4):
        text, bars, history, speed = c.predict(DEFAULT_PROMPT, text, "greedy", 1.0, 50, 123,
                                               api_name="/next_token")
        assert step_rows(history) == list(range(n, 0, -1))
        assert f"{n} tokens" in speed and "chosen" in bars
    assert text == _greedy_reference("teach-tiny", DEFAULT_PROMPT, 3)


def test_live_step_table_shows_the_newest_rows_and_the_final_one_every_row(app_url,
                                                                          monkeypatch):
    monkeypatch.setattr(generate_tab, "STREAM_INTERVAL_S", 0.0)
    monkeypatch.setattr(generate_tab, "TABLE_INTERVAL_S", 0.0)    # a table with every update
    n = LIVE_TABLE_ROWS + 10
    c = client(app_url)
    c.predict(**build_args("teach-tiny"))
    job = c.submit(DEFAULT_PROMPT, n, "greedy", 1.0, 50, 123, False, api_name="/generate")
    tables = [o[2] for o in job if isinstance(o[2], str) and "<table>" in o[2]]
    last_live = [t for t in tables if "earlier steps" in t][-1]
    assert step_rows(last_live) == list(range(n, 10, -1)) and "10 earlier steps" in last_live
    assert step_rows(job.result()[2]) == list(range(n, 0, -1))
    # After Stop, the page asks for the whole table from the session's rows.
    session = Session(generation=Generation("x", 1, [[1]], [[2, "b"], [1, "a"]], [], {}, "x"))
    assert step_rows(generate_views.history_html(session)) == [2, 1]
    assert "<tbody></tbody>" in generate_views.history_html(Session())


def test_next_token_continues_a_generation_and_its_step_table(app_url):
    c = client(app_url)
    c.predict(**build_args("teach-tiny"))
    text, _, history, _ = c.predict(DEFAULT_PROMPT, 5, "greedy", 1.0, 50, 123, False,
                                    api_name="/generate")
    assert step_rows(history) == [5, 4, 3, 2, 1]
    text, _, history, speed = c.predict(DEFAULT_PROMPT, text, "greedy", 1.0, 50, 123,
                                        api_name="/next_token")
    assert step_rows(history) == [6, 5, 4, 3, 2, 1] and "6 tokens" in speed
    assert text == _greedy_reference("teach-tiny", DEFAULT_PROMPT, 6)


def test_generation_arguments_out_of_range_are_refused(app_url):
    c = client(app_url)
    c.predict(**build_args("teach-tiny"))
    with pytest.raises(Exception, match=f"greater than maximum value {MAX_NEW_TOKENS}"):
        c.predict(DEFAULT_PROMPT, MAX_NEW_TOKENS + 1, "greedy", 1.0, 50, 123, False,
                  api_name="/generate")
    with pytest.raises(Exception, match="temperature"):
        c.predict(DEFAULT_PROMPT, 5, "sample", -1.0, 50, 123, False, api_name="/generate")
    with pytest.raises(Exception, match="vocabulary"):
        c.predict(DEFAULT_PROMPT, 5, "sample", 1.0, 60000, 123, False, api_name="/generate")
    with pytest.raises(Exception, match="empty"):
        c.predict("   ", 5, "greedy", 1.0, 50, 123, False, api_name="/generate")


def test_two_clients_hold_different_models(app_url):
    a, b = client(app_url), client(app_url)
    a.predict(**build_args("teach-tiny"))
    b.predict(**build_args("teach-small"))
    ref_a = _greedy_reference("teach-tiny", DEFAULT_PROMPT, 6)
    ref_b = _greedy_reference("teach-small", DEFAULT_PROMPT, 6)
    assert ref_a != ref_b
    assert a.predict(DEFAULT_PROMPT, 6, "greedy", 1.0, 50, 123, False,
                     api_name="/generate")[0] == ref_a
    assert b.predict(DEFAULT_PROMPT, 6, "greedy", 1.0, 50, 123, False,
                     api_name="/generate")[0] == ref_b


def test_server_serves_no_file_outside_the_app(app_url):
    for target in ("/etc/passwd", os.path.abspath(__file__)):
        url = f"{app_url.rstrip('/')}/gradio_api/file={target}"
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(url, timeout=10)
        assert err.value.code in (403, 404)


CJK = re.compile(r"[\u4e00-\u9fff]")


def test_an_api_client_chooses_its_language_once_and_gets_its_text_and_messages_in_it(app_url):
    c = client(app_url)
    assert "Model ready" in c.predict(**build_args())[0]           # English by default
    c.predict("zh", False, api_name="/view_settings")               # this client's session
    status = c.predict(**build_args())[0]
    assert CJK.search(status) and "Model ready" not in status
    with pytest.raises(Exception, match=CJK.pattern):
        c.predict("   ", 0, "norm1: before vs after LayerNorm", "resid_pre", "std",
                  api_name="/trace")
    with pytest.raises(Exception, match="No model yet"):   # another client's: its own
        client(app_url).predict("   ", 0, "norm1: before vs after LayerNorm", "resid_pre",
                                "std", api_name="/trace")
    with pytest.raises(Exception, match=r"'fr' .* is not in the list of choices: \['en', 'zh'\]"):
        c.predict("fr", False, api_name="/view_settings")     # (Gradio's own check)


def test_a_raw_call_gets_plain_values(app_url):
    """A call with the endpoint's inputs, as curl sends it, runs in the session's defaults."""
    base = app_url.rstrip("/") + "/gradio_api/call/preset_config"
    request = urllib.request.Request(base, json.dumps({"data": ["teach-tiny"]}).encode(),
                                     {"Content-Type": "application/json"})
    event = json.loads(urllib.request.urlopen(request, timeout=30).read())["event_id"]
    stream = urllib.request.urlopen(f"{base}/{event}", timeout=30).read().decode()
    assert "event: complete" in stream, stream[-300:]
    values = json.loads(stream.split("event: complete\ndata:", 1)[1].strip().splitlines()[0])
    assert values[:5] == [PRESETS["teach-tiny"].to_dict()[k] for k in
                          ("vocab_size", "context_length", "emb_dim", "n_heads", "n_layers")]


# ---------------------------------------------------------------------------------------------
# The shareable link and the guided walk (explorer/app/share_view.py, tabs/walk.py)
def share_args(preset="teach-tiny", tab="inside", prompt=DEFAULT_PROMPT, weights="random",
               **changes):
    cfg = {**PRESETS[preset].to_dict(), **changes}
    knobs = {k: cfg[k] for k in ("vocab_size", "context_length", "emb_dim", "n_heads",
                                 "n_layers", "drop_rate", "qkv_bias", "norm_placement",
                                 "shortcut", "activation", "ff_expansion", "tie_weights",
                                 "pos_encoding")}
    return dict(preset=preset, **knobs, seed=7, weights=weights, size="small", prompt=prompt,
                tab=tab, api_name="/share_link")


def test_share_link_names_what_differs_and_the_language(app_url):
    c = client(app_url)
    query, note = c.predict(**share_args(n_layers=3, prompt="Hello, world"))
    assert query == "?preset=teach-tiny&n_layers=3&seed=7&prompt=Hello%2C%20world&tab=inside" \
                    "&lang=en"
    assert "This link opens the page" in note
    c.predict("zh", False, api_name="/view_settings")       # the link's language: the page's
    query, note = c.predict(**share_args(weights="file", tab="build"))
    assert query == "?preset=teach-tiny&seed=7&tab=build&lang=zh"
    assert "链接无法携带检查点文件" in note
    c.predict("en", False, api_name="/view_settings")
    with pytest.raises(Exception, match="divisible by n_heads"):
        c.predict(**share_args(emb_dim=70))


def test_stage_details_before_and_after_a_build(app_url):
    c = client(app_url)
    args = dict(block=1, prompt=DEFAULT_PROMPT, api_name="/stage_details")
    with pytest.raises(Exception, match="No model yet"):
        c.predict(stage="attention", **args)
    c.predict(**build_args("teach-tiny"))
    card = c.predict(stage="feed_forward", **args)
    n = len(get_tokenizer().encode(DEFAULT_PROMPT))
    assert "Feed-forward network" in card and "block 1 of 2" in card
    assert f"(1, {n}, 256)" in card and f"(1, {n}, 64)" in card
    assert "book §4.6" in c.predict(stage="out_head", **args)
    with pytest.raises(Exception, match="stage must be one of"):
        c.predict(stage="norm3", **args)
    with pytest.raises(Exception, match="Block 5 does not exist"):
        c.predict(stage="norm1", **{**args, "block": 5})
    c.predict(**build_args("teach-deep"))                     # 12 blocks: the last one
    assert "block 11 of 12" in c.predict(stage="norm1", **{**args, "block": 11})
