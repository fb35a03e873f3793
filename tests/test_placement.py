"""Where a job runs (explorer/runtime/placement.py): CPU first, a GPU only where it pays."""
from dataclasses import replace

import pytest

from explorer.book.config import PRESETS
from explorer.runtime import placement
from explorer.runtime.placement import (CPU_QUICK_SECONDS, GPU_SPEEDUP, MAX_ASK_SECONDS,
                                        SLOW_STEP_SECONDS, Work, ask_seconds, place)


def trace(preset, tokens):
    return Work.forward(PRESETS[preset], tokens)


def generation(preset, prompt, new):
    return Work.decoding(PRESETS[preset], prompt, new)


# A lecture's walk: the teaching models and gpt2-small at lecture lengths, a knock-out map of
# a small model: all on the CPU, even where a GPU could be called.
@pytest.mark.parametrize("work", [
    trace("teach-tiny", 64), trace("teach-deep", 256), trace("gpt2-small", 6),
    trace("gpt2-small", 64), generation("gpt2-small", 6, 20), generation("gpt2-small", 6, 200),
    generation("teach-tiny", 6, 1000), Work.forward(PRESETS["teach-deep"], 64, passes=60),
    Work.forward(PRESETS["gpt2-small"], 6, passes=12)])
def test_a_lectures_work_stays_on_the_cpu_where_a_gpu_could_be_called(work):
    assert place(work, "zerogpu").where == "cpu"


@pytest.mark.parametrize("work", [
    trace("gpt2-large", 256), trace("gpt2-xl", 1024), trace("gpt2-small", 1024),
    generation("gpt2-large", 6, 20), generation("gpt2-xl", 6, 200),
    Work.forward(PRESETS["gpt2-large"], 64, passes=20)])
def test_long_work_that_a_gpu_does_much_faster_goes_to_the_gpu(work):
    chosen = place(work, "zerogpu")
    assert chosen.where == "gpu"
    if work.steps:        # a stream: its steps are slow on the CPU, much faster on the GPU
        assert work.step_seconds("cpu") > SLOW_STEP_SECONDS
        assert work.step_seconds("zerogpu") * GPU_SPEEDUP <= work.step_seconds("cpu")
    else:
        assert chosen.cpu_seconds > CPU_QUICK_SECONDS
        assert chosen.gpu_seconds * GPU_SPEEDUP <= chosen.cpu_seconds


def test_without_a_gpu_to_call_everything_runs_on_the_cpu():
    for work in (trace("gpt2-xl", 1024), generation("gpt2-xl", 6, 200)):
        chosen = place(work, None)
        assert (chosen.where, chosen.gpu_seconds) == ("cpu", None)
        assert chosen.cpu_seconds == pytest.approx(work.seconds("cpu"))


def test_a_gpu_call_that_costs_more_than_it_saves_stays_on_the_cpu(monkeypatch):
    # The same long trace, with a call that costs almost what the CPU takes: the CPU.
    work = trace("gpt2-large", 256)
    assert place(work, "zerogpu").where == "gpu"
    slow_call = replace(placement.RATES["zerogpu"],
                                  call_seconds=work.seconds("cpu") / GPU_SPEEDUP)
    monkeypatch.setitem(placement.RATES, "zerogpu", slow_call)
    assert place(work, "zerogpu").where == "cpu"


def test_estimates_grow_with_the_model_the_tokens_and_the_steps():
    sizes = ["teach-tiny", "gpt2-small", "gpt2-medium", "gpt2-large", "gpt2-xl"]
    for where in ("cpu", "zerogpu"):
        by_size = [trace(p, 64).seconds(where) for p in sizes]
        assert by_size == sorted(by_size) and len(set(by_size)) == len(by_size)
        assert trace("gpt2-small", 16).seconds(where) < trace("gpt2-small", 256).seconds(where)
        assert (generation("gpt2-small", 6, 10).seconds(where)
                < generation("gpt2-small", 6, 100).seconds(where))


def test_a_generation_past_the_window_pays_for_the_whole_window_each_step():
    cfg = PRESETS["teach-tiny"]
    within = Work.decoding(cfg, 4, cfg.context_length - 4)    # the prompt's 4 tokens, cached
    past = Work.decoding(cfg, 4, cfg.context_length + 4)      # 8 steps with a full window
    assert (within.steps, past.steps) == (cfg.context_length - 4, cfg.context_length + 4)
    assert past.flops == pytest.approx(within.flops / 4 * (4 + 8 * cfg.context_length))


def test_the_duration_asked_follows_the_estimate_within_zero_gpus_limit():
    assert ask_seconds(0.2) == 4                  # no floor of 15 s for a short call
    assert ask_seconds(10) == 23
    assert ask_seconds(1e6) == MAX_ASK_SECONDS
    chosen = place(trace("gpt2-large", 256), "zerogpu")
    assert chosen.ask_seconds == ask_seconds(chosen.gpu_seconds)
    assert chosen.ask_seconds >= 2 * chosen.gpu_seconds


@pytest.mark.parametrize("value, expected", [
    (None, False), ("", False), ("false", False), ("0", False),
    ("true", True), ("True", True), ("1", True), ("t", True)])
def test_zero_gpu_is_recognised_as_spaces_itself_recognises_it(value, expected):
    environ = {} if value is None else {"SPACES_ZERO_GPU": value}
    assert placement.on_zero_gpu(environ) is expected
    assert placement.gpu_kind(environ) == ("zerogpu" if expected else None)
