"""The Train tab through its API (gradio_client against the app in-process): start, stop and
continue; refusals (the server's limits, bad data) as messages; sessions that see nothing of
each other's training; a closed session's job cancelled; a trained model used by the other
tabs and exported. teach-tiny, a 16-token window and a few steps: seconds per test."""
import json
import time
import urllib.request

import pytest
from gradio_client import handle_file
from local_client import launched, local_client

from explorer.app.shared import CACHE
from explorer.app import shared
from explorer.app.tabs import train as train_tab
from explorer.runtime.training.lab import TrainingLab
from explorer.runtime.training.setup import DEFAULT_CORPUS_NAME

STEPS = 10


@pytest.fixture(scope="module")
def app_url():
    with launched(max_file_size="1mb") as url:
        yield url


@pytest.fixture
def lab(monkeypatch):
    """A fresh lab for each test (one job at a time unless a test says otherwise)."""
    fresh = TrainingLab(max_jobs=1)
    monkeypatch.setattr(shared, "LAB", fresh)
    yield fresh
    for session in list(fresh._members):
        fresh.cancel(session)


def start_args(variants=("pre-LN (book)", "no shortcut"), data="the default story", text="",
               upload=None, steps=STEPS, batch_size=2, context=16, lr=0.0004, warmup=0):
    return dict(data=data, text=text, upload=upload, variants=list(variants),
                preset="teach-tiny", steps=steps, batch_size=batch_size, context_length=context,
                lr=lr, warmup_steps=warmup, api_name="/train_start")


def until(condition, seconds=120):
    """Poll ``condition`` until it holds (True) or ``seconds`` pass (False); not a timing."""
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def plot(value):
    """A Train figure as the API sends it: the figure's JSON (explorer/app/live_figure.py)."""
    return json.loads(value)


def loss_traces(figure_value):
    return [t for t in plot(figure_value)["data"] if t.get("type", "scatter") == "scatter"]


def test_two_variants_train_and_their_curves_and_table_fill(app_url, lab):
    c = local_client(app_url)
    job = c.submit(**start_args())
    updates = list(job)
    progress, loss, table, grads, samples, choice = job.result()
    assert len(updates) >= 2                         # the view was streamed, not only returned
    assert "Finished" in progress and f"step {STEPS} of {STEPS}" in progress
    assert DEFAULT_CORPUS_NAME in progress
    # one legend entry per variant (its validation curve dashed, in the same colour)
    names = [(t["name"], t.get("line", {}).get("dash")) for t in loss_traces(loss)]
    assert names == [("pre-LN (book)", "solid"), ("pre-LN (book)", "dash"),
                     ("no shortcut", "solid"), ("no shortcut", "dash")]
    assert [row[0] for row in table["data"]] == ["pre-LN (book)", "no shortcut"]
    assert all(row[-1] == "no" for row in table["data"])
    assert [t["type"] for t in plot(grads)["data"]] == ["heatmap", "heatmap"]
    assert "Every effort moves you" in samples
    assert choice["value"] == "pre-LN (book)" and len(choice["choices"]) == 2


def test_stop_then_continue_finishes_the_same_job(app_url, lab):
    c = local_client(app_url)
    job = c.submit(**start_args(steps=400))
    for update in job:                    # stop as soon as the first steps are shown
        if "Training" in update[0] and "step 0 of" not in update[0]:
            break
    progress = c.predict(api_name="/train_stop")[0]
    assert "Stopped" in progress
    stopped_at = lab.job(c.session_hash).view().step
    assert 0 < stopped_at < 400
    job.result()
    assert lab.job(c.session_hash).view().status == "stopped"
    lab.job(c.session_hash).settings.__class__   # the same job continues
    before = lab.job(c.session_hash)
    resumed = c.submit(api_name="/train_continue")
    for update in resumed:
        if "Training" in update[0]:
            break
    c.predict(api_name="/train_stop")
    resumed.result()
    assert lab.job(c.session_hash) is before and before.view().step > stopped_at


def test_a_job_beyond_the_servers_limits_is_refused_with_a_message(app_url, lab, monkeypatch):
    c = local_client(app_url)
    monkeypatch.setattr(lab, "max_param_steps", 1000)
    with pytest.raises(Exception, match="too large for this server"):
        c.predict(**start_args())
    monkeypatch.setattr(lab, "max_param_steps", 1e12)
    first = c.submit(**start_args(steps=400))
    next(iter(first))
    other = local_client(app_url)
    with pytest.raises(Exception, match="the most it runs at once"):
        other.predict(**start_args())
    c.predict(api_name="/train_stop")
    first.result()


@pytest.mark.parametrize("args, message", [
    (dict(data="pasted text", text="   "), "empty"),
    (dict(data="pasted text", text="a few words"), "too short|window"),
    (dict(data="pasted text", text="x" * 1_000_001), "at most"),
    (dict(data="an uploaded .txt"), "No file uploaded"),
    (dict(variants=["pre-LN (book)"]), "two to 4"),
    (dict(variants=["pre-LN (book)", "bigger"]), "not in the list of choices"),
    (dict(lr=-1), "lr must be a positive number"),
    (dict(steps=0), "steps must be at least 1"),
    (dict(context=1), "context_length"),
])
def test_bad_data_and_settings_get_clear_messages(app_url, lab, args, message):
    c = local_client(app_url)
    with pytest.raises(Exception, match=message):
        c.predict(**start_args(**args))
    assert lab.job(c.session_hash) is None


def test_a_binary_upload_is_refused_with_a_message(app_url, lab, tmp_path):
    binary = tmp_path / "notes.txt"
    binary.write_bytes(b"PK\x03\x04\x00\x00binary")
    c = local_client(app_url)
    with pytest.raises(Exception, match="binary"):
        c.predict(**start_args(data="an uploaded .txt", upload=handle_file(str(binary))))


def test_an_uploaded_text_is_trained_on_and_named(app_url, lab, tmp_path):
    story = tmp_path / "my_story.txt"
    story.write_text(train_tab.default_corpus().text[:6000], encoding="utf-8")
    c = local_client(app_url)
    progress = c.predict(**start_args(data="an uploaded .txt", upload=handle_file(str(story)),
                                      steps=2))[0]
    assert "Finished" in progress and "my_story.txt" in progress


def test_sessions_pressing_train_alike_share_one_job_and_one_stop_stops_only_its_own(
        app_url, lab):
    clients = [local_client(app_url) for _ in range(3)]
    streams = [c.submit(**start_args(steps=300)) for c in clients]   # one job at most (lab)
    for stream in streams:
        next(iter(stream))
    job = lab.job(clients[0].session_hash)
    assert all(lab.job(c.session_hash) is job for c in clients) and len(lab) == 1
    assert until(lambda: "Shared" in clients[1].predict(api_name="/train_view")[0])
    progress = clients[0].predict(api_name="/train_stop")[0]
    assert "You stopped watching" in progress and "2 other session" in progress
    streams[0].result()                                   # its stream ended ...
    assert job.running                                    # ... the others' job trains on
    step = job.view().step
    assert until(lambda: job.view().step > step)
    for c, stream in zip(clients[1:], streams[1:]):
        c.predict(api_name="/train_stop")
        stream.result()
    assert until(lambda: not job.running)


def test_a_second_session_sees_nothing_of_the_firsts_training(app_url, lab):
    first, second = local_client(app_url), local_client(app_url)
    first.predict(**start_args(steps=2))
    progress, loss, table, grads, samples, choice = second.predict(api_name="/train_view")
    assert "No training yet" in progress and table["data"] in ([], [[""] * 7]) and not samples
    assert not loss_traces(loss) or all(not t.get("x") for t in loss_traces(loss))
    with pytest.raises(Exception, match="no training job"):
        second.predict(api_name="/train_stop")
    # the first session's variants are no choice in the second's page
    with pytest.raises(Exception, match="not in the list of choices"):
        second.predict("pre-LN (book)", api_name="/train_use")
    assert "Finished" in first.predict(api_name="/train_view")[0]


def test_closing_the_session_cancels_its_job(app_url, lab):
    c = local_client(app_url)
    job = c.submit(**start_args(steps=1000))
    next(iter(job))
    training = lab.job(c.session_hash)
    assert training.running
    # The page's heartbeat: when it closes, Gradio runs demo.unload for that session.
    heartbeat = urllib.request.urlopen(f"{app_url}gradio_api/heartbeat/{c.session_hash}")
    heartbeat.read(1)
    heartbeat.close()
    assert until(lambda: training.view().status == "cancelled"), training.view().status
    assert not training.running and lab.job(c.session_hash) is None
    job.result()


def test_a_trained_model_is_traced_and_generates_and_exports(app_url, lab):
    c = local_client(app_url)
    c.predict(**start_args(steps=4))
    status = c.predict("no shortcut", api_name="/train_use")[0]
    assert "trained 4 steps on " + DEFAULT_CORPUS_NAME in status
    chips, summary = c.predict("Every effort moves you", 0, "norm1: before vs after LayerNorm", "resid_pre",
                               "std", api_name="/trace")[:2]
    assert "tokens" in summary
    text = c.predict("Every effort moves you", 5, "greedy", 1.0, 50, 123, False,
                     api_name="/generate")[0]
    assert text.startswith("Every effort moves you")
    # Other tests' API sessions (no page, so never unloaded) may hold trained models too.
    held = [k for k, _ in CACHE._held.values() if k.source.kind == "trained"
            and "trained 4 steps" in k.source.caption]
    assert held and all(k.config.shortcut is False for k in held)
    files = c.predict("no shortcut", api_name="/train_export")
    assert sorted(f.rsplit("/", 1)[-1] for f in files) == ["config.json", "model.safetensors"]


def test_a_held_model_counts_in_the_budget_is_never_evicted_and_goes_with_its_session():
    from explorer.book.config import PRESETS
    from explorer.runtime.build import build_model
    from explorer.runtime.cache import ModelCache
    from explorer.runtime.memory import model_bytes
    from explorer.runtime.sources import WeightsSource

    tiny = PRESETS["teach-tiny"]
    size = model_bytes(tiny)
    cache = ModelCache(budget_bytes=int(2.5 * size))
    trained = cache.key(tiny, device="cpu", source=WeightsSource.trained("trained 4 steps on x"))
    model = build_model(tiny, device="cpu")
    cache.hold("session a", trained, model)
    assert cache.get(trained) == (model, True) and cache.used_bytes() == size
    for seed in (1, 2, 3):          # shared models come and go; the held one stays
        cache.get(cache.key(tiny, seed=seed, device="cpu"))
        assert trained in cache and cache.used_bytes() <= cache.budget_bytes
    def another():
        return cache.key(tiny, device="cpu", source=WeightsSource.trained("trained"))

    cache.hold("session b", another(), model)       # two held: 2 of the 2.5 models' budget
    with pytest.raises(ValueError, match="sessions' own models already hold"):
        cache.hold("session c", another(), model)
    cache.hold("session b", another(), model)       # a session's new model replaces its old
    assert cache.release("session a") and trained not in cache
    with pytest.raises(ValueError, match="no longer held"):
        cache.get(trained)
    assert trained.source.caption == "trained 4 steps on x"


def test_a_diverged_variant_is_refused_by_use_and_export(app_url, lab):
    """A student trains with lr 1e3 ("Diverged" is shown) and presses Use this model: a
    message, not a model whose sampling then fails."""
    client = local_client(app_url)
    try:
        view = client.predict(**start_args(steps=3, lr=1e3))
        assert "Diverged" in view[0], view[0]
        diverged = [row[0] for row in view[2]["data"] if row[-1].startswith("yes")]
        assert diverged, view[2]
        for api in ("/train_use", "/train_export"):
            with pytest.raises(Exception, match=r"diverged at step \d+"):
                client.predict(diverged[0], api_name=api)
    finally:
        client.close()
