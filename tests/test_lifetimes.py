"""Work that a session starts ends, and its memory is given back, when nobody waits for it any
more (issue 32): a dropped training job, a knock-out map of a session that left, a closed tab.
Held with ``weakref``: once the work is dropped, its models are gone. Also: the limits are
checked before a job's models are built, and the shared results count what they really hold.
The app runs in-process (gradio_client), with teach-tiny models: seconds per test."""
import gc
import threading
import time
import urllib.request
import weakref

import pytest
from local_client import local_client

from explorer.app import shared
from explorer.book.errors import ExplorerError
from explorer.runtime.training import lab as training_lab
from explorer.runtime.training.job import TrainingJob
from explorer.runtime.training.lab import TrainingLab
from explorer.runtime.training.setup import (TrainingSettings, default_corpus, job_bytes,
                                             make_variants)


@pytest.fixture
def lab(monkeypatch):
    fresh = TrainingLab(max_jobs=2)
    monkeypatch.setattr(shared, "LAB", fresh)
    yield fresh
    for session in list(fresh._members):
        fresh.cancel(session)


def start_args(steps):
    return dict(data="the default story", text="", upload=None,
                variants=["pre-LN (book)", "no shortcut"], preset="teach-tiny", steps=steps,
                batch_size=2, context_length=16, lr=0.0004, warmup_steps=0,
                api_name="/train_start")


def until(condition, seconds=60):
    """Poll ``condition`` until it holds or ``seconds`` pass; not a timing."""
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def close_tab(url, client):
    """What the page's closing does: its heartbeat stream ends, and Gradio unloads it."""
    heartbeat = urllib.request.urlopen(f"{url}gradio_api/heartbeat/{client.session_hash}")
    heartbeat.read(1)
    heartbeat.close()


def gone(ref) -> bool:
    gc.collect()
    return ref() is None


def test_a_dropped_job_and_its_models_are_gone(app_url, lab):
    client = local_client(app_url)
    stream = client.submit(**start_args(steps=1000))
    assert until(lambda: len(stream.outputs()) >= 2)
    job = lab.job(client.session_hash)
    refs = [weakref.ref(job)] + [weakref.ref(run.model) for run in job.runs]
    stream.cancel()                      # the page lets go of the stream ...
    close_tab(app_url, client)           # ... and closes
    assert until(lambda: lab.job(client.session_hash) is None and not job.running)
    del job
    assert until(lambda: all(gone(r) for r in refs), 20)


def test_the_shared_figures_of_a_job_are_keyed_by_value_not_by_the_job(app_url, lab):
    client = local_client(app_url)
    client.predict(**start_args(steps=3))
    job = lab.job(client.session_hash)
    keys = [k for k in shared.RESULTS._results if k[0] == "train"]
    assert any(k[1] == job.key for k in keys)
    assert not any(isinstance(part, TrainingJob) for k in keys for part in k)


def test_a_job_stops_when_its_last_watcher_leaves_though_a_stopped_member_stays(app_url, lab):
    a, b = local_client(app_url), local_client(app_url)
    streams = [c.submit(**start_args(steps=1000)) for c in (a, b)]
    assert until(lambda: all(len(s.outputs()) >= 1 for s in streams))
    job = lab.job(a.session_hash)
    assert lab.job(b.session_hash) is job
    progress = a.predict(api_name="/train_stop")[0]
    assert "1 other session" in progress and job.running      # B still watches
    close_tab(app_url, b)
    assert until(lambda: not job.running), "the job trains on with nobody watching"
    assert job.view().status == "stopped" and lab.job(a.session_hash) is job   # A may Continue
    assert "0 other" not in a.predict(api_name="/train_view")[0]


def test_a_burst_of_distinct_jobs_builds_only_those_that_may_train(monkeypatch):
    lab = TrainingLab(max_jobs=2, budget_bytes=2 ** 34)
    built = []
    real_job = training_lab.TrainingJob
    go = threading.Barrier(12)

    def counted(*args, **kwargs):
        built.append(1)
        return real_job(*args, **kwargs)

    monkeypatch.setattr(training_lab, "TrainingJob", counted)
    variants = make_variants(["pre-LN (book)", "no shortcut"], "teach-tiny")
    outcomes = []

    def start(i):
        settings = TrainingSettings(steps=1000 + i, batch_size=2, context_length=16)
        go.wait()
        try:
            lab.start(f"s{i}", variants, default_corpus(), settings)
            outcomes.append("trains")
        except ExplorerError as e:
            outcomes.append(e.message.id)

    threads = [threading.Thread(target=start, args=(i,)) for i in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    try:
        assert outcomes.count("trains") == 2 and len(built) == 2, (outcomes, len(built))
        assert set(outcomes) == {"trains", "lab.too_many_jobs"}
    finally:
        for i in range(12):
            lab.cancel(f"s{i}")


def test_the_memory_check_counts_a_job_being_built():
    variants = make_variants(["pre-LN (book)", "no shortcut"], "teach-tiny")
    settings = TrainingSettings(steps=10, batch_size=2, context_length=16)
    need = job_bytes(variants, settings)
    lab = TrainingLab(max_jobs=5, budget_bytes=int(need * 1.5))
    lab._building[("another",)] = training_lab._Building(need)   # another session builds
    with pytest.raises(ExplorerError) as refused:
        lab.start("s", variants, default_corpus(), settings)
    assert refused.value.message.id == "lab.no_memory" and len(lab) == 0


def test_the_map_of_a_session_that_left_stops_at_the_next_batch():
    from types import SimpleNamespace

    from explorer.app.session import Made, Model, Session
    from explorer.app.tabs import knockout, knockout_map
    from explorer.book.config import PRESETS
    from explorer.runtime.sources import ModelKey
    session = Session(models=(Model(ModelKey(PRESETS["teach-tiny"], 123, "cpu", "float32"),
                                    Made("built", "teach-tiny")),))
    stream = knockout_map.parts_map("Every effort moves you", "loss", True, session,
                                request=SimpleNamespace(session_hash="the leaver"))
    first = next(stream)                          # the estimate, drawn
    assert first["knock_numbers"]["exact_cells"] == 0
    knockout_map.release("the leaver")                # the page closes while the map is made
    assert list(stream) == [], "no more exact cells for nobody"
    result = session.view(knockout_map.MapView).result
    assert result.n_exact <= 1 < len(result.cells())
    assert "the leaver" not in knockout_map._LEFT


def test_a_training_stream_follows_the_pages_language_switched_mid_stream(app_url, lab):
    client = local_client(app_url)
    stream = client.submit(**start_args(steps=1000))
    assert until(lambda: len(stream.outputs()) >= 1)
    assert "step" in stream.outputs()[-1][0]
    client.predict("zh", False, api_name="/view_settings")   # the session's 中文, as a toggle
    assert until(lambda: "步" in stream.outputs()[-1][0]), stream.outputs()[-1][0]
    client.predict(api_name="/train_stop")


def test_a_closed_tab_leaves_no_trained_model_behind(app_url, lab):
    """(Its finished job may stay, models and all, among the lab's few finished jobs kept for
    a session that asks for the same again, within the training budget: test_training.py.)"""
    from explorer.app.shared import CACHE
    client = local_client(app_url)
    client.predict(**start_args(steps=3))
    client.predict("no shortcut", api_name="/train_use")
    client.predict("Every effort moves you", 0, "norm1: before vs after LayerNorm", "resid_pre",
                   "std", api_name="/trace")
    held = weakref.ref(CACHE._held[client.session_hash][1])
    close_tab(app_url, client)
    assert until(lambda: client.session_hash not in CACHE._held)
    assert until(lambda: gone(held), 20)
