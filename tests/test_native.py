"""The C kernels as a switchable plug-in (``explorer.native``): the switch, every kind of failure
falling back to PyTorch with one log line and the same results, a model the C step does not
take refused for that model only, and the app's API saying which path decoded."""
import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from explorer import native
from explorer.book.generate import generate_steps
from explorer.book.kv_cache import KVCache
from explorer.native import decode, stats
from explorer.native.library import SWITCH_ENV, NativeLibrary
from explorer.probes import trace
from explorer.runtime.build import build_model

from engine_variants import SMALL

# The C path, handed to the generator as the app hands it.
C = dict(step=native.model_step, summarize=native.next_token_summary)
PROMPT = [5, 6, 7, 8, 9, 10, 11]
NEW = 8
ROOT = Path(__file__).resolve().parent.parent

needs_kernels = pytest.mark.skipif(not (native.available() and native.stats_available()),
                                   reason="no C compiler (or GPT_EXPLORER_NATIVE=0)")


def figures(model=None):
    """What a user sees of one generation and one trace, as plain data."""
    model = model or build_model(SMALL, seed=3, device="cpu")
    steps = list(generate_steps(model, PROMPT, NEW, **C))
    traced = trace(model, PROMPT, top_k=5, attention_layers="all")
    return {"available": [native.available(), native.stats_available()],
            "tokens": [s.token_id for s in steps], "fast": [s.fast_step for s in steps],
            "probs": [s.top_probs for s in steps],
            "next_ids": traced.next_ids.tolist(), "next_probs": traced.next_probs.tolist(),
            "std": {p: s.per_token["std"].tolist() for p, s in traced.points.items()},
            "attention": [traced.attention[layer].tolist() for layer in sorted(traced.attention)],
            "entropy": traced.attention_entropy.tolist()}


def assert_same_figures(got, expected):
    assert got["tokens"] == expected["tokens"]
    assert got["next_ids"] == expected["next_ids"]
    for key in ("probs", "next_probs", "attention", "entropy"):
        np.testing.assert_allclose(got[key], expected[key], rtol=1e-5, atol=1e-6, err_msg=key)
    assert got["std"].keys() == expected["std"].keys()
    for point in got["std"]:
        np.testing.assert_allclose(got["std"][point], expected["std"][point], rtol=1e-5,
                                   atol=1e-6, err_msg=point)


def native_lines(caplog):
    return [r.getMessage() for r in caplog.records if r.name == "explorer.native"]


def pytorch_tokens(model):
    """The same generation with nothing handed in: the model's own forward pass."""
    return [s.token_id for s in generate_steps(model, PROMPT, NEW)]


@pytest.fixture
def fresh(monkeypatch):
    """``fresh(module, declare=None)`` gives that kernel module a new, unloaded library over the
    same source (built into the usual cache, so normally just loaded again), optionally with
    another ``declare``; the session's own libraries are loaded first, and come back after."""
    native.warm_up()

    def apply(module, declare=None):
        old = module._native
        library = NativeLibrary(old.source, declare or module._declare, old.without,
                                old.libraries)
        monkeypatch.setattr(module, "_native", library)
        return library
    return apply


# ---------------------------------------------------------------------------------------------
# The switch
def test_switched_off_everything_is_pytorch_with_the_same_tokens_and_figures():
    env = {**os.environ, SWITCH_ENV: "0",
           "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tests")])}
    script = ("import json, logging, sys\n"
              "logging.basicConfig(level=logging.INFO, stream=sys.stderr,\n"
              "                    format='LOG %(name)s %(message)s')\n"
              "import test_native\n"
              "print(json.dumps(test_native.figures()))\n")
    done = subprocess.run([sys.executable, "-c", script], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    off = json.loads(done.stdout.strip().splitlines()[-1])
    assert off["available"] == [False, False]
    assert off["fast"] == [False] * NEW
    lines = [line for line in done.stderr.splitlines() if line.startswith("LOG explorer.native")]
    assert sorted(lines) == [f"LOG explorer.native {name} is off ({SWITCH_ENV}=0); {without}."
                             for name, without in sorted([
                                 ("decode.c", decode._native.without),
                                 ("stats.c", stats._native.without)])]
    on = figures()
    if on["available"] == [True, True]:          # the same figures through the C kernels
        assert on["fast"] == [False] + [True] * (NEW - 1)
    assert_same_figures(off, on)


def test_a_switch_that_is_neither_0_nor_1_keeps_the_kernels_off_and_says_so(fresh, monkeypatch,
                                                                           caplog):
    monkeypatch.setenv(SWITCH_ENV, "yes please")
    fresh(decode), fresh(stats)
    with caplog.at_level("INFO", logger="explorer.native"):
        assert not native.available() and not native.stats_available()
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1 and "neither 0 nor 1" in warnings[0].getMessage()


# ---------------------------------------------------------------------------------------------
# Each failure: one log line, then PyTorch, with the same tokens
def _not_a_library(tmp_path):
    """A 'compiler' that succeeds but writes a file no loader takes."""
    script = tmp_path / "fake-cc"
    script.write_text('#!/bin/sh\nwhile [ $# -gt 0 ]; do\n'
                      '  if [ "$1" = "-o" ]; then echo "not a library" > "$2"; fi; shift\n'
                      'done\n')
    script.chmod(0o755)
    return str(script)


@pytest.mark.parametrize("failure, says", [
    ("no compiler", "no C compiler"),
    ("a compiler that fails", "false failed"),
    ("a load failure", "could not be built or loaded"),
])
def test_a_library_that_cannot_be_built_or_loaded_logs_once_and_decodes_with_pytorch(
        without_compiler, tmp_path, caplog, failure, says):
    compiler = {"no compiler": "no-such-compiler-here", "a compiler that fails": "false",
                "a load failure": _not_a_library(tmp_path)}[failure]
    without_compiler(decode, compiler)
    model = build_model(SMALL, seed=4, device="cpu")
    with caplog.at_level("INFO", logger="explorer.native"):
        for _ in range(2):                     # one line in all, not one per call or run
            steps = list(generate_steps(model, PROMPT, NEW, **C))
            assert [s.token_id for s in steps] == pytorch_tokens(model)
            assert not any(s.fast_step for s in steps)
    lines = native_lines(caplog)
    assert len(lines) == 1 and says in lines[0] and "PyTorch" in lines[0], lines
    assert not native.available()


def _raising(name):
    """A ``declare`` after which the library's ``name`` raises, as a broken call would."""
    def boom(*args):
        raise OSError(f"{name} broke")

    def declare(library):
        (decode if name in ("model_step", "attention_rows") else stats)._declare(library)
        setattr(library, name, boom)
    return declare


@pytest.mark.native
@needs_kernels
def test_an_exception_in_the_step_logs_once_and_the_generation_completes_with_pytorch(
        fresh, caplog):
    model = build_model(SMALL, seed=4, device="cpu")
    expected = pytorch_tokens(model)
    fresh(decode, _raising("model_step"))
    with caplog.at_level("INFO", logger="explorer.native"):
        steps = list(generate_steps(model, PROMPT, NEW, **C))
        again = list(generate_steps(model, PROMPT, NEW, **C))
    assert [s.token_id for s in steps] == [s.token_id for s in again] == expected
    assert not any(s.fast_step for s in steps + again)
    lines = native_lines(caplog)
    assert len(lines) == 1 and "model_step broke" in lines[0] and "PyTorch" in lines[0], lines
    assert not native.available()              # PyTorch from then on, for that library


@pytest.mark.native
@needs_kernels
@pytest.mark.parametrize("broken", ["attention_rows", "many_point_stats"])
def test_an_exception_in_a_traces_kernel_logs_once_and_gives_the_same_figures(
        fresh, caplog, broken):
    model = build_model(SMALL, seed=3, device="cpu")
    expected = figures(model)
    fresh(decode, _raising("attention_rows") if broken == "attention_rows" else None)
    fresh(stats, _raising("many_point_stats") if broken == "many_point_stats" else None)
    with caplog.at_level("INFO", logger="explorer.native"):
        for _ in range(2):
            assert_same_figures(figures(model), expected)
    lines = native_lines(caplog)
    assert len(lines) == 1 and f"{broken} broke" in lines[0], lines


# ---------------------------------------------------------------------------------------------
# A model the C step does not take: refused for that model only
def _extra_weight(model):
    model.trf_blocks[0].att.register_buffer("q_gain", torch.ones(SMALL.head_dim))
    return model


UNSUITABLE = {
    # a variant missing from the C step's tables
    "activation": (dict(activation="silu"), None, "activation='silu'"),
    # a config knob the C step was never taught
    "knob": (dict(qkv_bias=True), None, "knob qkv_bias=True"),
    # a tensor it does not know
    "weight": ({}, _extra_weight, "trf_blocks.0.att.q_gain"),
    # dtypes it does not take
    "bfloat16": ({}, lambda m: m.to(torch.bfloat16), "not torch.bfloat16 on cpu"),
    "float64": ({}, lambda m: m.to(torch.float64), "not torch.float64 on cpu"),
}


@pytest.mark.native
@needs_kernels
@pytest.mark.parametrize("case", list(UNSUITABLE))
def test_a_model_the_c_step_does_not_take_decodes_with_pytorch_and_others_keep_c(
        fresh, monkeypatch, caplog, case):
    changes, edit, says = UNSUITABLE[case]
    fresh(decode)
    monkeypatch.delitem(decode._ACTIVATIONS, "silu")      # as if decode.c lacked it
    monkeypatch.setattr(decode, "_KNOBS", decode._KNOBS - {"qkv_bias"})
    models = [build_model(SMALL.replace(**changes), seed=seed, device="cpu")
              for seed in (1, 2)]
    models = [edit(m) if edit else m for m in models]
    book = build_model(SMALL, seed=1, device="cpu")
    with caplog.at_level("INFO", logger="explorer.native"):
        for model in models:                   # two models, the same reason: said once
            steps = list(generate_steps(model, PROMPT, NEW, **C))
            assert [s.token_id for s in steps] == pytorch_tokens(model)
            assert not any(s.fast_step for s in steps)
        steps = list(generate_steps(book, PROMPT, NEW, **C))
    assert [s.fast_step for s in steps] == [False] + [True] * (NEW - 1)   # still on for it
    assert [s.token_id for s in steps] == pytorch_tokens(book)
    lines = native_lines(caplog)
    assert len(lines) == 1 and says in lines[0] and "PyTorch" in lines[0], lines


@pytest.mark.native
@needs_kernels
def test_the_c_step_reads_the_model_by_its_state_dict_names(fresh, caplog):
    """What the step reads is what ``state_dict()`` (and RoPE's buffers) name: every described
    tensor is used, and a model whose description differs is refused, never misread."""
    for cfg in (SMALL, SMALL.replace(pos_encoding="rope", norm_placement="none",
                                     tie_weights=True, qkv_bias=True)):
        model = build_model(cfg, seed=1, device="cpu")
        described = decode._described(model)
        assert set(described) == set(decode._expected_shapes(cfg))
        assert all(not name.startswith("_") and "._" not in name for name in described)
        steps = list(generate_steps(model, PROMPT, NEW, **C))
        assert all(s.fast_step for s in steps[1:])
    model = build_model(SMALL, seed=1, device="cpu")
    with torch.no_grad():                      # the same name, another shape: refused
        model.trf_blocks[1].ff.layers[2].bias = torch.nn.Parameter(torch.zeros(3))
    fresh(decode)
    with caplog.at_level("INFO", logger="explorer.native"), torch.inference_mode():
        assert native.model_step(model, 1, KVCache(model, capacity=4)) is None
    lines = native_lines(caplog)
    assert len(lines) == 1 and "trf_blocks.1.ff.layers.2.bias" in lines[0], lines


# ---------------------------------------------------------------------------------------------
# The app's API says which path decoded
def speed_line(url):
    from local_client import local_client
    from test_app import build_args
    from explorer.app.shared import RESULTS
    from explorer.app.session import DEFAULT_PROMPT
    RESULTS.clear()          # decoded now, not replayed from another test's generation
    c = local_client(url)
    c.predict(**build_args("teach-tiny"))
    return c.predict(DEFAULT_PROMPT, 6, "greedy", 1.0, 50, 123, False, api_name="/generate")[3]


@needs_kernels
def test_the_api_says_c_decoded_when_the_kernels_are_on(app_url):
    line = speed_line(app_url)
    assert "6 tokens" in line and "decoding: C, 2 threads" in line, line


def test_the_api_says_pytorch_decoded_when_the_kernels_are_switched_off(app_url, fresh,
                                                                        monkeypatch):
    monkeypatch.setenv(SWITCH_ENV, "0")
    fresh(decode)
    line = speed_line(app_url)
    assert "6 tokens" in line and "decoding: PyTorch" in line and "C," not in line, line
