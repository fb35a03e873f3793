"""Results shared between sessions (``runtime.results``, ``app.results``): a trace, a logit
lens or a generation asked for twice is computed once, is identical to a fresh computation,
and the cache stays within its byte limit and gives the models their room first."""
import threading

import numpy as np
import pytest

from explorer.book.config import PRESETS
from explorer.book.errors import ExplorerError
from explorer.book.generate import generate_steps
from explorer.probes import trace
from explorer.runtime.cache import ModelCache
from explorer.runtime.memory import model_bytes
from explorer.runtime.results import SharedResults, SharedSteps
from explorer.runtime.sources import ModelKey

PROMPT_IDS = [6109, 3626, 6100, 345]      # "Every effort moves you"


class Sized:
    def __init__(self, n):
        self.n = n


def sized(result):
    return result.n


# ---------------------------------------------------------------------------------------------
# The cache itself
def test_the_cache_stays_within_its_byte_limit_least_recently_used_out():
    results = SharedResults(limit_bytes=100)
    for name in "abc":
        results.get(name, lambda: Sized(40), sized)
    assert results.used_bytes() <= 100 and "a" not in results and {"b", "c"} <= set("bc")
    results.get("b", lambda: Sized(40), sized)           # b used again: c goes next
    results.get("d", lambda: Sized(40), sized)
    assert "b" in results and "c" not in results and results.used_bytes() == 80
    big, shared = results.get("big", lambda: Sized(500), sized)
    assert big.n == 500 and not shared and "big" not in results      # too large: not kept
    assert results.used_bytes() <= 100


def test_sessions_asking_at_once_compute_a_result_once():
    results = SharedResults(limit_bytes=10 ** 6)
    computed, gate = [], threading.Event()

    def compute():
        computed.append(1)
        gate.wait(5)
        return Sized(10)

    got = []
    threads = [threading.Thread(target=lambda: got.append(results.get("k", compute, sized)))
               for _ in range(8)]
    for thread in threads:
        thread.start()
    threading.Event().wait(0.2)
    gate.set()
    for thread in threads:
        thread.join(10)
    assert len(computed) == 1 and len(got) == 8
    assert len({id(r) for r, _ in got}) == 1 and sorted(s for _, s in got) == [False] + [True] * 7


def test_an_error_is_not_kept():
    results = SharedResults(limit_bytes=1000)

    def fails():
        raise ExplorerError("x.y", "no")

    with pytest.raises(ExplorerError):
        results.get("k", fails, sized)
    assert results.get("k", lambda: Sized(1), sized)[0].n == 1


def test_the_models_get_their_room_before_the_shared_results():
    tiny = PRESETS["teach-tiny"]
    need = model_bytes(tiny)
    cache = ModelCache(budget_bytes=int(need * 1.5))
    results = SharedResults(limit_bytes=need, room=cache.room_bytes)
    cache.results = results
    results.get("half", lambda: Sized(need // 2 + 4096), sized)
    assert "half" in results                        # the budget had room beside no model
    cache.get(ModelKey(tiny, 1, "cpu", "float32"))
    assert "half" not in results, "the model needed the room: the result gave it up"
    assert not results.put("more", Sized(need), need)     # no room left beside the model
    assert cache.used_bytes() + results.used_bytes() <= cache.budget_bytes


# ---------------------------------------------------------------------------------------------
# Shared steps
def tiny_model():
    from explorer.runtime.build import build_model
    return build_model(PRESETS["teach-tiny"], seed=123, device="cpu")


def steps_of(model, **options):
    return [(s.token_id, s.top_ids, s.top_probs, s.prob, s.entropy_bits)
            for s in generate_steps(model, PROMPT_IDS, 12, show_top=5, **options)]


@pytest.mark.parametrize("options", [{}, {"temperature": 1.3, "top_k": 20, "seed": 7}])
def test_shared_steps_are_the_generation_and_are_decoded_once(options):
    model = tiny_model()
    fresh = steps_of(model, **options)
    decoded = []

    def counted():
        for step in generate_steps(model, PROMPT_IDS, 12, show_top=5, **options):
            decoded.append(step.index)
            yield step

    shared = SharedSteps(counted(), nbytes=1)
    first, second = shared.replay(), shared.replay()
    a = [next(first) for _ in range(5)]
    b = list(second)                      # catches up, then decodes the rest itself
    a += list(first)
    as_tuples = [[(s.token_id, s.top_ids, s.top_probs, s.prob, s.entropy_bits) for s in x]
                 for x in (a, b)]
    assert as_tuples == [fresh, fresh]
    assert decoded == list(range(12)) and shared.done


def test_a_session_stopping_its_stream_stops_nobody_else():
    model = tiny_model()
    shared = SharedSteps(generate_steps(model, PROMPT_IDS, 10), nbytes=1)
    stopped = shared.replay()
    next(stopped)
    stopped.close()                       # Stop: that session's stream ends
    assert [s.token_id for s in shared.replay()] == [t for t, *_ in steps_of(model)][:10]


# ---------------------------------------------------------------------------------------------
# Through the app: two sessions, the same requests
def _arrays(tr):
    out = {"next_ids": tr.next_ids, "next_probs": tr.next_probs, "lens_ids": tr.lens_ids,
           "lens_probs": tr.lens_probs, "entropy": tr.attention_entropy}
    out.update({f"attention {k}": v for k, v in tr.attention.items()})
    for group in (tr.points, tr.final):
        for point, s in group.items():
            out.update({f"{point} {k}": v for k, v in {**s.overall, **s.per_token}.items()})
            out[f"{point} hist"] = s.hist_counts
    return out


def two_sessions(preset="teach-tiny"):
    from explorer.app.session import Made, Model, Session
    key = ModelKey(PRESETS[preset], 123, "cpu", "float32")
    return [Session(models=(Model(key, Made("built", preset)),)) for _ in range(2)]


def test_a_trace_from_the_shared_cache_is_the_fresh_trace():
    from explorer.app import shared
    from explorer.app.pickers import HIST_PAIRS
    from explorer.app.tabs import inside
    shared.RESULTS.clear()
    first, second = two_sessions()
    prompt, pair = "Every effort moves you", next(iter(HIST_PAIRS))
    inside.run_trace(prompt, first, 0, pair, "ln1_out", "std")
    out = inside.run_trace(prompt, second, 0, pair, "ln1_out", "std")
    assert "shared cache" in out["trace_info"] and "shared cache" not in inside.summary(first)
    fresh = trace(shared.CACHE.get(first.keys[0])[0], PROMPT_IDS)
    got = _arrays(second.traces[0])
    assert got.keys() == _arrays(fresh).keys()
    for name, array in _arrays(fresh).items():
        assert np.array_equal(got[name], array, equal_nan=True), name
    assert second.traces[0].tokens == fresh.tokens


def test_a_generation_from_the_shared_cache_is_the_fresh_generation():
    from explorer.app import shared
    from explorer.app.tabs import generate
    shared.RESULTS.clear()
    first, second = two_sessions()
    prompt = "Every effort moves you"
    for mode in ("greedy", "sample"):
        runs = [list(generate.generate(prompt, 8, mode, 0.9, 40, 5, False, s))
                for s in (first, second)]
        texts = [r[-1]["gen_output"] for r in runs]
        assert texts[0] == texts[1]
        assert "shared cache" in runs[1][-1]["speed"] and "shared cache" not in runs[0][-1]["speed"]
        assert first.generation.ids == second.generation.ids
        model = shared.CACHE.get(first.keys[0])[0]
        options = {} if mode == "greedy" else dict(temperature=0.9, top_k=40, seed=5)
        fresh = [s.token_id for s in generate_steps(model, PROMPT_IDS, 8, **options)]
        assert second.generation.ids[0][len(PROMPT_IDS):] == fresh


def test_figures_drawn_once_for_two_sessions_are_the_figures_drawn_fresh():
    from explorer.app import shared
    from explorer.app.pickers import HIST_PAIRS
    from explorer.app.tabs import attention, inside
    shared.RESULTS.clear()
    first, second = two_sessions()
    prompt, pair = "Every effort moves you", next(iter(HIST_PAIRS))
    for session in (first, second):
        inside.run_trace(prompt, session, 1, pair, "ln1_out", "std")
    shown = [attention.attention_views(s, 1, "2") for s in (first, second)]
    assert shown[0]["grid_plot"] is shown[1]["grid_plot"]          # drawn once
    shared.RESULTS.clear()
    fresh = attention.attention_views(second, 1, "2")
    for name in attention.VIEWS:
        assert shown[1][name] is not fresh[name]
        assert shown[1][name].to_json() == fresh[name].to_json(), name


@pytest.mark.parametrize("kept", ["trace", "figures"])
def test_a_kept_result_is_counted_at_no_less_than_the_memory_keeping_it_holds(kept):
    """Issue 32, item 4: the cache counted a trace by its arrays alone, and a figure at 16 bytes
    a value, so a cache "of 16 MB" held several times that. What keeping an entry holds (every
    Python allocation, arrays' data included, as tracemalloc sees it; a tensor's data, which it
    does not see, only adds to the count) must be counted: all of it but numpy's few bytes of
    shape and strides per array."""
    import gc
    import tracemalloc

    from explorer.app import results, shared
    from explorer.app.pickers import HIST_PAIRS
    from explorer.app.plots.statistics import layer_stats_figure
    from explorer.app.tabs import inside
    session = two_sessions()[0]
    inside.run_trace("Every effort moves you", session, 0, next(iter(HIST_PAIRS)), "ln1_out",
                     "std")          # what is made once: the model, the tokens' texts, the plots
    key, model = session.keys[0], shared.CACHE.get(session.keys[0])[0]
    warm = trace(model, PROMPT_IDS)
    layer_stats_figure([warm])
    shared.RESULTS.clear()
    gc.collect()
    tracemalloc.start(64)        # (deep enough to reach this test's frame from any allocation)
    try:
        if kept == "trace":
            result = results.shared_trace(key, model, PROMPT_IDS)
        else:
            result = results.shared_figures(("test", "stats"), lambda: {
                "plot": layer_stats_figure([warm])})
        gc.collect()
        # what this call made and still holds: not what another test's thread made meanwhile
        made_here = tracemalloc.take_snapshot().filter_traces(
            [tracemalloc.Filter(True, __file__, all_frames=True)])
        held = sum(stat.size for stat in made_here.statistics("filename"))
    finally:
        tracemalloc.stop()
    assert result is not None and len(shared.RESULTS) == 1
    assert shared.RESULTS.used_bytes() >= 0.9 * held > 0, (shared.RESULTS.used_bytes(), held)


def test_an_array_view_is_counted_with_the_whole_array_it_keeps_alive():
    from explorer.runtime.sizes import deep_nbytes
    whole = np.zeros((256, 1024), dtype=np.float32)       # 1 MiB
    row = whole[3]                                         # 4 KiB of it, holding all of it
    assert deep_nbytes({"row": row}) >= whole.nbytes
    assert deep_nbytes([row, whole[4], whole]) < 1.1 * whole.nbytes   # the base once
