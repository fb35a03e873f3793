"""The bad-input catalogue, as data: every way a student (or a script) can get an input wrong,
and what must happen. ``tests/test_bad_inputs.py`` runs each case through the Python API and,
where the app exposes it, through the app's API (``gradio_client``).

A case expects either a message (``*_expect``: a regular expression the message must match)
or a correct result (``*_expect`` is None and ``*_check`` says what is correct).

Python side: ``python(env)`` runs the call; ``env`` holds the teach-tiny model (context 64,
2 layers, 4 heads), the tokenizer and a memory-guarded ``ModelCache``.
App side: the session is set up first (``build``: changes to teach-tiny, or None for a
session that has built nothing; ``traced``: the default prompt traced), then ``api`` is called
with ``args`` (a tuple, or ``args(env)``). ``raw`` sends the call as plain JSON, for values
(NaN, inf) that gradio_client refuses to send.
"""
from __future__ import annotations

import atexit
import copy
import json
import os
import re
import shutil
import struct
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import torch
from safetensors.torch import save_file

from explorer.book.config import PRESETS, GPTConfig, get_preset
from explorer.book.generate import generate_steps, generate_text_simple
from explorer.runtime.build import build_model
from explorer.probes import trace
from explorer.runtime import checkpoints, export, loading
from explorer.runtime import hub as runtime_hub
from explorer.runtime.server_paths import SERVER_PATH_REFUSED as _REFUSED

SERVER_PATH_REFUSED = "^" + re.escape(_REFUSED.text) + "$"   # the same words for every server path

PROMPT = "Every effort moves you"
TRACE_VIEW = ("norm1: before vs after LayerNorm", "resid_pre", "std")
KNOBS = ("vocab_size", "context_length", "emb_dim", "n_heads", "n_layers", "drop_rate",
         "qkv_bias", "norm_placement", "shortcut", "activation", "ff_expansion", "tie_weights",
         "pos_encoding")
LONG_PROMPT = "word " * 200            # 201 tokens: more than teach-tiny's context of 64
MEGABYTE = "a" * 2 ** 20
EOT_TEXT = "<|endoftext|>"
CONTROL = "tab\there\x00nul\x07bell\x1b[31mansi\x7fdel\r\n"
MIXED = "Привет 你好 🙂👍🏽 مرحبا नमस्ते ẞ Ω ﬁ"
# A model whose context is long enough for a prompt whose attention weights cannot fit in
# memory: 16 heads x 16,000 tokens² x 4 bytes x 3 is about 49 GB in a single layer.
WIDE_CONTEXT = dict(context_length=16384, n_heads=16, n_layers=1)
WIDE_PROMPT = "🙂" * 8000              # 16,000 tokens


def build_args(preset="teach-tiny", seed=123, device="cpu", dtype="float32", **changes):
    """The positional arguments of /build: preset, the 13 knobs, seed, device, dtype, and the
    weights' four inputs (random weights: the seed's)."""
    cfg = {**PRESETS[preset].to_dict(), **changes} if preset in PRESETS else dict(changes)
    return (preset, *[cfg.get(k) for k in KNOBS], seed, device, dtype, "random", "small", None,
            None)


def weights_args(weights="file", size="small", path=None, upload=None):
    """/build for a checkpoint: teach-tiny's knobs (ignored), then the weights' four inputs."""
    return (*build_args()[:-4], weights, size, path, upload)


def upload_of(*files):
    """Files to send as the /build upload (gradio_client's handle_file)."""
    from gradio_client import handle_file
    return [handle_file(str(f)) for f in files]


def gen_args(prompt=PROMPT, n=5, mode="greedy", temperature=1.0, top_k=50, seed=123,
             stop=False):
    return (prompt, n, mode, temperature, top_k, seed, stop)


def train_args(data="the default story", text="", upload=None,
               variants=("pre-LN (book)", "no shortcut"), preset="teach-tiny", steps=2,
               batch_size=2, context=16, lr=0.0004, warmup=0, eval_freq=5, eval_iter=5):
    """The positional arguments of /train_start (a tiny job by default)."""
    return (data, text, upload, list(variants), preset, steps, batch_size, context, lr, warmup,
            eval_freq, eval_iter)


def tiny(**changes) -> dict:
    return {**PRESETS["teach-tiny"].to_dict(), **changes}


@dataclass(frozen=True)
class Case:
    id: str
    area: str                                      # config, prompt, generation, index, order
    python: Callable[[Any], Any] | None = None
    py_expect: str | None = None
    py_check: Callable[[Any, Any], bool] | None = None
    api: str | None = None
    args: tuple | Callable[[Any], tuple] = ()
    build: dict | None = None                      # None: nothing built in the session
    traced: bool = False
    app_expect: str | None = None
    app_check: Callable[[Any, Any], bool] | None = None
    raw: bool = False
    max_seconds: float = 20.0                      # "never a hang": each side must answer sooner


# ---------------------------------------------------------------------------------------------
# Result checks
def n_tokens_info(prompt):
    """/trace answered, and its summary counts the tokenizer's tokens for ``prompt``."""
    def check(result, env):
        return f"{len(env.tok.encode(prompt))} tokens" in result[1]
    return check


def greedy_text(prompt, n, context=64):
    """/generate's final text is the book's generate_text_simple on the same model."""
    def check(result, env):
        ids = torch.tensor([env.tok.encode(prompt)])
        out = generate_text_simple(env.model, ids, n, context)
        return result[0] == env.tok.decode(out[0].tolist())
    return check


def sampled_text(prompt, n, temperature, top_k, seed):
    def check(result, env):
        steps = generate_steps(env.model, env.tok.encode(prompt), n, temperature=temperature,
                               top_k=top_k, seed=seed)
        return result[0] == prompt + env.tok.decode([s.token_id for s in steps])
    return check


def model_ready(result, env):
    return "Model ready" in result[0]


def traced_ok(prompt):
    def check(tr, env):
        ids = env.tok.encode(prompt)
        return tr.token_ids == ids and tr.n_layers == env.model.cfg.n_layers
    return check


def round_trip(text):
    def check(tr, env):
        return env.tok.decode(tr.token_ids) == text
    return check


BUDGET = r"needs [\d,]+ MB .* memory budget is [\d,]+ MB"


def cfg(**changes):
    return lambda env: GPTConfig.from_dict(tiny(**changes))


def guarded(**changes):
    """The memory guard: ModelCache.key checks the size before anything is allocated."""
    return lambda env: env.cache.key(tiny(**changes))


def tr(ids_fn, **kwargs):
    return lambda env: trace(env.model, ids_fn(env), **kwargs)


def enc(text):
    return lambda env: env.tok.encode(text)


def gen(ids_fn, n, **kwargs):
    return lambda env: list(generate_steps(env.model, ids_fn(env), n, **kwargs))


_FILES = tempfile.mkdtemp(prefix="gpt-explorer-bad-")   # removed when the tests end
atexit.register(shutil.rmtree, _FILES, ignore_errors=True)


def a_file(content: bytes, name="model.safetensors"):
    """The path of a new file holding ``content`` (a bad checkpoint a student might pick)."""
    folder = Path(tempfile.mkdtemp(dir=_FILES))
    (folder / name).write_bytes(content)
    return folder / name


def exported(env, hf_layout=False):
    """The teach-tiny model exported to a new folder: the path of its model.safetensors."""
    folder = Path(tempfile.mkdtemp(dir=_FILES))
    return export.export_model(env.model, folder, hf_layout=hf_layout)[0]


def load(path_fn, **kwargs):
    return lambda env: loading.load_file(path_fn(env), cache=env.cache, **kwargs)


# ---------------------------------------------------------------------------------------------
CASES: list[Case] = [
    # ----- configs -------------------------------------------------------------------------
    *[Case(f"config-{key}-zero", "config", cfg(**{key: 0}), rf"{key} must be at least 1",
           api="/build", args=build_args(**{key: 0}), app_expect=rf"{key} must be at least 1")
      for key in ("vocab_size", "context_length", "emb_dim", "n_heads", "n_layers",
                  "ff_expansion")],
    Case("config-n_layers-negative", "config", cfg(n_layers=-3), r"n_layers must be at least 1",
         api="/build", args=build_args(n_layers=-3), app_expect=r"n_layers must be at least 1"),
    Case("config-emb_dim-negative", "config", cfg(emb_dim=-64), r"emb_dim must be at least 1",
         api="/build", args=build_args(emb_dim=-64), app_expect=r"emb_dim must be at least 1"),
    Case("config-n_layers-million", "config", guarded(n_layers=10 ** 6), BUDGET,
         api="/build", args=build_args(n_layers=10 ** 6), app_expect=BUDGET, max_seconds=5),
    Case("config-emb_dim-million", "config", guarded(emb_dim=10 ** 6), BUDGET,
         api="/build", args=build_args(emb_dim=10 ** 6), app_expect=BUDGET, max_seconds=5),
    Case("config-vocab-billion", "config", guarded(vocab_size=10 ** 9), BUDGET,
         api="/build", args=build_args(vocab_size=10 ** 9), app_expect=BUDGET, max_seconds=5),
    Case("config-context-billion-learned", "config", guarded(context_length=10 ** 9), BUDGET,
         api="/build", args=build_args(context_length=10 ** 9), app_expect=BUDGET,
         max_seconds=5),
    Case("config-context-billion-rope", "config",
         guarded(context_length=10 ** 9, pos_encoding="rope"), BUDGET, api="/build",
         args=build_args(context_length=10 ** 9, pos_encoding="rope"), app_expect=BUDGET,
         max_seconds=5),
    Case("config-n_layers-astronomical", "config", guarded(n_layers=10 ** 400), BUDGET,
         max_seconds=5),
    Case("config-emb_dim-not-divisible", "config", cfg(emb_dim=70), r"divisible by n_heads",
         api="/build", args=build_args(emb_dim=70), app_expect=r"divisible by n_heads"),
    Case("config-more-heads-than-dims", "config", cfg(n_heads=128), r"divisible by n_heads",
         api="/build", args=build_args(n_heads=128), app_expect=r"divisible by n_heads"),
    Case("config-dropout-one", "config", cfg(drop_rate=1.0), r"drop_rate must be in \[0, 1\)",
         api="/build", args=build_args(drop_rate=1.0), app_expect=r"drop_rate must be in"),
    Case("config-dropout-negative", "config", cfg(drop_rate=-0.1), r"drop_rate must be in",
         api="/build", args=build_args(drop_rate=-0.1), app_expect=r"drop_rate must be in"),
    Case("config-dropout-nan", "config", cfg(drop_rate=float("nan")), r"drop_rate must be in",
         api="/build", args=build_args(drop_rate=float("nan")), raw=True,
         app_expect=r"drop_rate must be in"),
    Case("config-dropout-string", "config", cfg(drop_rate="0.1"), r"drop_rate must be a number",
         api="/build", args=build_args(drop_rate="lots"), app_expect=r"drop_rate must be a number"),
    Case("config-emb_dim-string", "config", cfg(emb_dim="abc"), r"emb_dim must be a whole number",
         api="/build", args=build_args(emb_dim="abc"), app_expect=r"`number` component.*abc"),
    Case("config-emb_dim-empty", "config", cfg(emb_dim=None), r"emb_dim must be a whole number",
         api="/build", args=build_args(emb_dim=None), app_expect=r"emb_dim is empty"),
    Case("config-emb_dim-infinite", "config", cfg(emb_dim=float("inf")),
         r"emb_dim must be a whole number", api="/build",
         args=build_args(emb_dim=float("inf")), raw=True, app_expect=r"`number` component.*inf"),
    Case("config-n_layers-fraction", "config", cfg(n_layers=2.5), r"n_layers must be a whole",
         # the page's number box rounds to a whole number (precision=0), as the browser does
         api="/build", args=build_args(n_layers=2.5), app_check=model_ready),
    Case("config-n_layers-bool", "config", cfg(n_layers=True), r"n_layers must be a whole",
         # True arrives as 1 through the number box: a one-block model (a slider edge case)
         api="/build", args=build_args(n_layers=True), app_check=model_ready),
    Case("config-one-block", "config", lambda env: build_model(tiny(n_layers=1), device="cpu"),
         py_check=lambda m, env: len(m.trf_blocks) == 1,
         api="/build", args=build_args(n_layers=1), app_check=model_ready),
    Case("config-qkv_bias-string", "config", cfg(qkv_bias="yes"), r"qkv_bias must be True or",
         api="/build", args=build_args(qkv_bias="yes"), app_expect=r"qkv_bias must be True or"),
    Case("config-norm-unknown", "config", cfg(norm_placement="middle"),
         r"norm_placement must be one of", api="/build",
         args=build_args(norm_placement="middle"), app_expect=r"not in the list of choices"),
    Case("config-activation-unknown", "config", cfg(activation="tanh"),
         r"activation must be one of", api="/build", args=build_args(activation="tanh"),
         app_expect=r"not in the list of choices"),
    Case("config-pos-encoding-unknown", "config", cfg(pos_encoding="alibi"),
         r"pos_encoding must be one of", api="/build", args=build_args(pos_encoding="alibi"),
         app_expect=r"not in the list of choices"),
    Case("config-unknown-key-alias", "config",
         lambda env: GPTConfig.from_dict({**tiny(), "n_embd": 64}),
         r"Unknown config key 'n_embd'. Did you mean 'emb_dim'"),
    Case("config-unknown-key", "config", lambda env: GPTConfig.from_dict({"colour": "red"}),
         r"Unknown config key 'colour'"),
    Case("config-not-a-dict", "config", lambda env: GPTConfig.from_dict([64, 4]),
         r"must be a dict or GPTConfig"),
    Case("config-rope-odd-head", "config", cfg(pos_encoding="rope", emb_dim=60),
         r"RoPE rotates pairs", api="/build", args=build_args(pos_encoding="rope", emb_dim=60),
         app_expect=r"RoPE rotates pairs"),
    Case("config-preset-unknown", "config", lambda env: get_preset("teach-tini"),
         r"Did you mean 'teach-tiny'", api="/build", args=("teach-tini", *build_args()[1:]),
         app_expect=r"not in the list of choices"),
    Case("config-seed-negative", "config", lambda env: build_model(tiny(), seed=-1),
         r"seed must be a whole number", api="/build", args=build_args(seed=-1),
         app_expect=r"seed must be a whole number"),
    Case("config-seed-huge", "config", lambda env: build_model(tiny(), seed=2 ** 70),
         r"seed must be a whole number", api="/build", args=build_args(seed=2 ** 70),
         app_expect=r"seed must be a whole number"),
    Case("config-device-unknown", "config", lambda env: build_model(tiny(), device="tpu"),
         r"device must be", api="/build", args=build_args(device="tpu"),
         app_expect=r"not in the list of choices"),
    Case("config-dtype-unknown", "config", lambda env: build_model(tiny(), dtype="int8"),
         r"dtype must be one of", api="/build", args=build_args(dtype="int8"),
         app_expect=r"not in the list of choices"),
    Case("config-bfloat16-on-cpu", "config",
         lambda env: build_model(tiny(), device="cpu", dtype="bfloat16"),
         r"bfloat16 is offered on a GPU only", api="/build",
         args=build_args(device="cpu", dtype="bfloat16"),
         app_expect=r"bfloat16 is offered on a GPU only"),
    # The position table holds context_length positions: a longer input is refused, with
    # the way out (generation crops for you).
    Case("config-input-beyond-position-table", "config",
         lambda env: env.model(torch.tensor([list(range(65))])),
         r"has 65 tokens but this model's context_length is 64.*crops the context"),
    Case("config-vocab-smaller-than-tokenizer", "config",
         lambda env: trace(build_model(tiny(vocab_size=100), device="cpu"),
                           env.tok.encode(PROMPT)),
         r"Token id \d+ is outside this model's vocabulary \(0 \.\.\. 99\)",
         api="/trace", args=(PROMPT, 0, *TRACE_VIEW), build={"vocab_size": 100},
         app_expect=r"token ids up to 6,109.*vocab_size is 100.*Rebuild with vocab_size 50,257"),
    Case("config-vocab-smaller-generate", "config",
         lambda env: list(generate_steps(build_model(tiny(vocab_size=100), device="cpu"),
                                         env.tok.encode(PROMPT), 3)),
         r"outside this model's vocabulary", api="/generate", args=gen_args(),
         build={"vocab_size": 100}, app_expect=r"vocab_size is 100.*Rebuild"),

    # ----- prompts -------------------------------------------------------------------------
    Case("prompt-empty", "prompt", tr(enc("")), r"The prompt has no tokens",
         api="/trace", args=("", 0, *TRACE_VIEW), build={}, app_expect=r"The prompt is empty"),
    Case("prompt-whitespace", "prompt", tr(enc(" \n\t ")), py_check=traced_ok(" \n\t "),
         api="/trace", args=(" \n\t ", 0, *TRACE_VIEW), build={},
         app_expect=r"The prompt is empty"),
    Case("prompt-longer-than-context", "prompt", tr(enc(LONG_PROMPT)),
         r"The prompt has 201 tokens but this model's context_length is 64\. Shorten it",
         api="/trace", args=(LONG_PROMPT, 0, *TRACE_VIEW), build={},
         app_expect=r"The prompt has 201 tokens but this model's context_length is 64"),
    Case("prompt-megabyte", "prompt", tr(enc(MEGABYTE)), r"context_length is 64",
         api="/trace", args=(MEGABYTE, 0, *TRACE_VIEW), build={},
         app_expect=r"1,048,576 characters; the explorer takes at most 20,000", max_seconds=5),
    Case("prompt-endoftext-is-plain-text", "prompt", tr(enc(EOT_TEXT)),
         py_check=lambda t, env: 50256 not in t.token_ids and round_trip(EOT_TEXT)(t, env),
         api="/trace", args=(EOT_TEXT, 0, *TRACE_VIEW), build={},
         app_check=lambda r, env: n_tokens_info(EOT_TEXT)(r, env) and "50256" not in r[0]),
    Case("prompt-control-characters", "prompt", tr(enc(CONTROL)), py_check=round_trip(CONTROL),
         api="/trace", args=(CONTROL, 0, *TRACE_VIEW), build={},
         app_check=n_tokens_info(CONTROL)),
    Case("prompt-mixed-scripts-emoji", "prompt", tr(enc(MIXED)), py_check=round_trip(MIXED),
         api="/trace", args=(MIXED, 0, *TRACE_VIEW), build={}, app_check=n_tokens_info(MIXED)),
    Case("prompt-lone-surrogate", "prompt", tr(enc("a\ud800b")),
         py_check=lambda t, env: len(t.token_ids) == 3,
         api="/trace", args=("a\ud800b", 0, *TRACE_VIEW), build={}, raw=True,
         app_check=n_tokens_info("a\ud800b")),
    Case("prompt-not-text", "prompt", tr(lambda env: "hello"),
         r"Expected a sequence of token ids", api="/trace", args=(None, 0, *TRACE_VIEW),
         build={}, app_expect=r"The prompt must be text"),
    Case("prompt-token-id-out-of-vocab", "prompt", tr(lambda env: [50257]),
         r"Token id 50257 is outside this model's vocabulary"),
    Case("prompt-token-id-negative", "prompt", tr(lambda env: [5, -1]),
         r"Token id -1 is outside this model's vocabulary"),
    Case("prompt-token-id-float", "prompt", tr(lambda env: [1.5]),
         r"Token ids must be integers"),
    Case("prompt-attention-too-large", "prompt", None, api="/trace",
         args=(WIDE_PROMPT, 0, *TRACE_VIEW), build=WIDE_CONTEXT,
         app_expect=r"Tracing 16,000 tokens needs about [\d,]+ MB.*at most [\d,]+ tokens",
         max_seconds=10),
    Case("prompt-logit-lens-long", "prompt", None, api="/logit_lens", args=(LONG_PROMPT,),
         build={}, app_check=lambda r, env: r["type"] == "plotly"),
    Case("prompt-logit-lens-empty", "prompt", None, api="/logit_lens", args=("   ",),
         build={}, app_expect=r"The prompt is empty"),

    # ----- generation ----------------------------------------------------------------------
    Case("gen-zero-new-tokens", "generation", gen(enc(PROMPT), 0),
         py_check=lambda steps, env: steps == [],
         api="/generate", args=gen_args(n=0), build={}, app_expect=r"less than minimum value 1"),
    Case("gen-ten-thousand-new-tokens", "generation",
         lambda env: generate_steps(env.model, env.tok.encode(PROMPT), 10_000),
         # lazy in Python: one step at a time, so a caller can stop whenever it likes
         py_check=lambda steps, env: next(iter(steps)).index == 0,
         api="/generate", args=gen_args(n=10_000), build={},
         app_expect=r"greater than maximum value 500"),
    Case("gen-negative-new-tokens", "generation", gen(enc(PROMPT), -1),
         r"max_new_tokens must be a whole number", api="/generate", args=gen_args(n=-1),
         build={}, app_expect=r"less than minimum value 1"),
    Case("gen-fractional-new-tokens", "generation", gen(enc(PROMPT), 2.5),
         r"max_new_tokens must be a whole number", api="/generate", args=gen_args(n=2.5),
         build={}, app_expect=r"max new tokens must be a whole number"),
    Case("gen-negative-temperature", "generation", gen(enc(PROMPT), 3, temperature=-1.0),
         r"temperature must be a finite number ≥ 0", api="/generate",
         args=gen_args(mode="sample", temperature=-1.0), build={},
         app_expect=r"temperature above 0"),
    Case("gen-nan-temperature", "generation", gen(enc(PROMPT), 3, temperature=float("nan")),
         r"temperature must be a finite number ≥ 0", api="/generate",
         args=gen_args(mode="sample", temperature=float("nan")), raw=True, build={},
         app_expect=r"temperature must be a finite number \(got nan\)"),
    Case("gen-infinite-temperature", "generation",
         gen(enc(PROMPT), 3, temperature=float("inf")), r"temperature must be a finite number ≥ 0",
         api="/generate", args=gen_args(mode="sample", temperature=float("inf")), raw=True,
         build={}, app_expect=r"temperature must be a finite number \(got inf\)"),
    Case("gen-text-temperature", "generation", gen(enc(PROMPT), 3, temperature="hot"),
         r"temperature must be a finite number", api="/generate",
         args=gen_args(mode="sample", temperature="hot"), build={},
         app_expect=r"temperature must be a number \(got text\)"),
    Case("gen-greedy-ignores-temperature", "generation", gen(enc(PROMPT), 4),
         py_check=lambda steps, env: len(steps) == 4, api="/generate",
         args=gen_args(n=4, mode="greedy", temperature=-1.0), build={},
         app_check=greedy_text(PROMPT, 4)),
    Case("gen-top-k-beyond-vocab", "generation",
         gen(enc(PROMPT), 3, temperature=1.0, top_k=10 ** 6), r"larger than the vocabulary",
         api="/generate", args=gen_args(mode="sample", top_k=10 ** 6), build={},
         app_expect=r"top_k \(1000000\) is larger than the vocabulary \(50257 tokens\)"),
    Case("gen-top-k-zero-means-all", "generation",
         gen(enc(PROMPT), 3, temperature=1.0, top_k=0), r"top_k must be a whole number ≥ 1, "
         r"or empty for no limit", api="/generate",
         args=gen_args(n=4, mode="sample", top_k=0), build={},
         app_check=sampled_text(PROMPT, 4, 1.0, None, 123)),
    Case("gen-top-k-whole-vocab", "generation",
         gen(enc(PROMPT), 3, temperature=1.0, top_k=50257, seed=1),
         py_check=lambda steps, env: len(steps) == 3, api="/generate",
         args=gen_args(n=4, mode="sample", top_k=50257), build={},
         app_check=sampled_text(PROMPT, 4, 1.0, 50257, 123)),
    Case("gen-top-k-negative", "generation", gen(enc(PROMPT), 3, temperature=1.0, top_k=-3),
         r"top_k must be a whole number ≥ 1", api="/generate",
         args=gen_args(mode="sample", top_k=-3), build={},
         app_expect=r"top_k must be a whole number ≥ 1"),
    Case("gen-mode-unknown", "generation", None, api="/generate", args=gen_args(mode="beam"),
         build={}, app_expect=r"not in the list of choices"),
    Case("gen-seed-negative", "generation",
         gen(enc(PROMPT), 3, temperature=1.0, seed=-5), r"seed must be a whole number ≥ 0",
         api="/generate", args=gen_args(mode="sample", seed=-5), build={},
         app_expect=r"seed must be a whole number ≥ 0"),
    Case("gen-prompt-longer-than-context-crops", "generation", gen(enc(LONG_PROMPT), 3),
         # the book's generate_text_simple crops to the last context_length tokens; so do we
         py_check=lambda steps, env: [s.token_id for s in steps] == generate_text_simple(
             env.model, torch.tensor([env.tok.encode(LONG_PROMPT)]), 3,
             64)[0, -3:].tolist(),
         api="/generate", args=gen_args(prompt=LONG_PROMPT, n=3), build={},
         app_check=greedy_text(LONG_PROMPT, 3)),
    Case("gen-prompt-empty", "generation", gen(enc(""), 3), r"The prompt has no tokens",
         api="/generate", args=gen_args(prompt=""), build={},
         app_expect=r"The prompt is empty"),
    Case("gen-prompt-megabyte", "generation", gen(lambda env: [464] * 2 ** 20, 2),
         py_check=lambda steps, env: len(steps) == 2, api="/generate",
         args=gen_args(prompt=MEGABYTE), build={},
         app_expect=r"the explorer takes at most 20,000", max_seconds=5),
    Case("gen-next-token-bad-temperature", "generation", None, api="/next_token",
         args=(PROMPT, "", "sample", -2.0, 50, 123), build={},
         app_expect=r"temperature above 0"),
    Case("gen-next-token-no-text", "generation", None, api="/next_token",
         args=(PROMPT, None, "greedy", 1.0, 50, 123), build={},
         app_check=lambda out, env: out[0].startswith(PROMPT) and "1 tokens" in out[3]),

    # ----- layer / head / probe indices ----------------------------------------------------
    Case("index-attention-layer-too-high", "index",
         tr(enc(PROMPT), attention_layers=[2]), r"Layer 2 does not exist: this model has "
         r"layers 0 to 1", api="/attention", args=(2, "mean"), build={}, traced=True,
         app_expect=r"greater than maximum value 1"),
    Case("index-attention-layer-negative", "index",
         tr(enc(PROMPT), attention_layers=[-1]), r"Layer -1 does not exist",
         api="/attention", args=(-1, "mean"), build={}, traced=True,
         app_expect=r"less than minimum value 0"),
    Case("index-attention-layer-one-block-model", "index", None, api="/attention",
         args=(1, "mean"), build={"n_layers": 1}, traced=True,
         app_expect=r"Layer 1 does not exist: this model has layers 0 to 0"),
    Case("index-head-too-high", "index", None, api="/attention", args=(0, "4"), build={},
         traced=True, app_expect=r"not in the list of choices"),
    Case("index-head-negative", "index", None, api="/attention", args=(0, "-1"), build={},
         traced=True, app_expect=r"not in the list of choices"),
    Case("index-export-attention-head-too-high", "index", None, api="/export_attention",
         args=(0, "9"), build={}, traced=True, app_expect=r"not in the list of choices"),
    Case("index-export-attention-layer-too-high", "index", None, api="/export_attention",
         args=(5, "0"), build={}, traced=True, app_expect=r"greater than maximum value 1"),
    Case("index-inside-views-layer-too-high", "index", None, api="/inside_views",
         args=(5, *TRACE_VIEW), build={}, traced=True,
         app_expect=r"greater than maximum value 1"),
    Case("index-inside-views-unknown-point", "index", None, api="/inside_views",
         args=(0, TRACE_VIEW[0], "attn_pattern", "std"), build={}, traced=True,
         app_expect=r"not in the list of choices"),
    Case("index-trace-layer-too-high", "index", None, api="/trace",
         args=(PROMPT, 99, *TRACE_VIEW), build={}, app_expect=r"greater than maximum value 1"),
    Case("index-lens-position", "index", tr(enc(PROMPT), lens=[99]),
         r"Position 99 does not exist: the input has positions 0 to 3"),
    Case("index-trace-top-k", "index", tr(enc(PROMPT), top_k=0), r"top_k must be between 1"),
    Case("index-curves-layer-too-high", "index", None, api="/activation_curves",
         args=(-3, 3, ["gelu"], False, 9), build={}, traced=True,
         app_expect=r"greater than maximum value 1"),
    Case("index-curves-no-function", "index", None, api="/activation_curves",
         args=(-3, 3, [], False, 0), app_expect=r"Tick at least one activation function"),
    Case("index-curves-range-reversed", "index", None, api="/activation_curves",
         args=(3, -3, ["gelu"], False, 0), app_expect=r"greater than maximum value 0"),
    Case("index-curves-nan", "index", None, api="/activation_curves",
         args=(float("nan"), 3, ["gelu"], False, 0), raw=True,
         app_expect=r"x_min must be a finite number"),
    Case("index-export-format-unknown", "index", None, api="/export_stats", args=("XML",),
         build={}, traced=True, app_expect=r"not in the list of choices"),

    # ----- weights: pretrained sizes, checkpoint files, export -----------------------------
    Case("weights-size-unknown", "weights", lambda env: runtime_hub.pretrained_source("huge"),
         r"small, medium, large and xl"),
    Case("weights-size-number", "weights", lambda env: runtime_hub.pretrained_source(124),
         r"small, medium, large and xl"),
    Case("weights-xl-over-budget", "weights",
         lambda env: runtime_hub.pretrained_source("xl", budget_bytes=100 * 2 ** 20,
                                               download=lambda *a, **k: 1 / 0),
         BUDGET, max_seconds=5),
    Case("weights-file-none", "weights", load(lambda env: None), r"Give the path"),
    Case("weights-file-missing", "weights", load(lambda env: "/no/such/model.safetensors"),
         r"There is no file at .*upload it"),
    Case("weights-file-is-folder", "weights", load(lambda env: tempfile.gettempdir()),
         r"There is no file at"),
    Case("weights-file-empty", "weights", load(lambda env: a_file(b"")), r"empty or cut short"),
    Case("weights-file-text", "weights", load(lambda env: a_file(b"hello, I am not a model")),
         r"not a safetensors file"),
    Case("weights-file-huge-header", "weights",
         load(lambda env: a_file(b"\xff" * 8 + b"{}")), r"not a safetensors file"),
    Case("weights-file-pth-garbage", "weights",
         load(lambda env: a_file(b"PK\x03\x04 not really a zip", "model.pth")),
         r"could not be read as a PyTorch checkpoint"),
    Case("weights-config-not-a-dict", "weights", load(exported, config=42),
         r"config must be a dict"),
    Case("weights-config-typo", "weights", load(exported, config={"emb_dimm": 64}),
         r"Unknown config key 'emb_dimm'. Did you mean 'emb_dim'\?"),
    Case("weights-config-wrong-heads", "weights", load(exported, config={"n_heads": 5}),
         r"emb_dim \(64\) must be divisible by n_heads \(5\)"),
    Case("weights-export-not-a-model", "weights",
         lambda env: export.export_model("model", tempfile.mkdtemp(dir=_FILES)),
         r"saves a GPTModel"),
    Case("weights-export-into-a-file", "weights",
         lambda env: export.export_model(env.model, a_file(b"x", "notes.txt")),
         r"is a file; choose a folder"),
    Case("weights-export-round-trip", "weights",
         lambda env: loading.load_file(exported(env), cache=env.cache)[0],
         py_check=lambda model, env: torch.equal(model.tok_emb.weight,
                                                 env.model.tok_emb.weight)),

    # ----- training: data, variants and settings of the Train tab -------------------------
    Case("train-text-empty", "training", None, api="/train_start",
         args=train_args(data="pasted text", text=" \n\t "),
         app_expect=r"The training text is empty"),
    Case("train-text-too-short", "training", None, api="/train_start",
         args=train_args(data="pasted text", text="Every effort moves you"),
         app_expect=r"too short|window"),
    Case("train-text-nul", "training", None, api="/train_start",
         args=train_args(data="pasted text", text="word " * 500 + "\x00"),
         app_expect=r"NUL characters"),
    Case("train-text-over-a-megabyte", "training", None, api="/train_start",
         args=train_args(data="pasted text", text=MEGABYTE),
         app_expect=r"1,048,576 bytes; the lab trains on at most 1,000,000 bytes",
         max_seconds=10),
    Case("train-text-not-text", "training", None, api="/train_start",
         args=train_args(data="pasted text", text=12345), raw=True,
         app_expect=r"pasted text .*must be text"),
    Case("train-upload-missing", "training", None, api="/train_start",
         args=train_args(data="an uploaded .txt"), app_expect=r"No file uploaded"),
    Case("train-data-unknown", "training", None, api="/train_start",
         args=train_args(data="the internet"), app_expect=r"not in the list of choices"),
    Case("train-one-variant", "training", None, api="/train_start",
         args=train_args(variants=["RoPE"]), app_expect=r"Choose two to 4 variants"),
    Case("train-five-variants", "training", None, api="/train_start",
         args=train_args(variants=["RoPE", "ReLU", "SiLU", "post-LN", "no shortcut"]),
         app_expect=r"Choose two to 4 variants"),
    Case("train-variant-unknown", "training", None, api="/train_start",
         args=train_args(variants=["RoPE", "MoE"]), app_expect=r"not in the list of choices"),
    Case("train-preset-gpt2", "training", None, api="/train_start",
         args=train_args(preset="gpt2-xl"), app_expect=r"not in the list of choices"),
    Case("train-steps-zero", "training", None, api="/train_start", args=train_args(steps=0),
         app_expect=r"steps must be at least 1"),
    # the steps box has precision 0: Gradio rounds 2.4 to 2 before the handler sees it
    Case("train-steps-fraction-rounded", "training", None, api="/train_start",
         args=train_args(steps=2.4), app_check=lambda out, env: "step 2 of 2" in out[0],
         max_seconds=90),    # it trains: two models, evaluations and samples
    Case("train-steps-beyond-the-limit", "training", None, api="/train_start",
         args=train_args(steps=10 ** 9), app_expect=r"too large for this server"),
    Case("train-batch-empty", "training", None, api="/train_start",
         args=train_args(batch_size=None), app_expect=r"batch size is empty"),
    Case("train-context-one", "training", None, api="/train_start",
         args=train_args(context=1), app_expect=r"context_length must be at least 2"),
    Case("train-context-over-the-text", "training", None, api="/train_start",
         args=train_args(data="pasted text", text="word " * 300, context=256),
         app_expect=r"The text is too short to train on"),
    Case("train-context-beyond-memory", "training", None, api="/train_start",
         args=train_args(context=4096), app_expect=r"This training needs about [\d,]+ MB"),
    Case("train-lr-negative", "training", None, api="/train_start", args=train_args(lr=-0.1),
         app_expect=r"lr must be a positive number"),
    Case("train-lr-nan", "training", None, api="/train_start",
         args=train_args(lr=float("nan")), raw=True, app_expect=r"lr must be a finite number"),
    Case("train-warmup-negative", "training", None, api="/train_start",
         args=train_args(warmup=-3), app_expect=r"warmup_steps must be at least 0"),
    Case("train-use-unknown-variant", "training", None, api="/train_use",
         args=("MoE",), app_expect=r"not in the list of choices"),
    Case("train-export-unknown-variant", "training", None, api="/train_export",
         args=("MoE",), app_expect=r"not in the list of choices"),
    Case("train-stop-before-start", "order", None, api="/train_stop", args=(),
         app_expect=r"no training job: press Train first"),
    Case("train-continue-before-start", "order", None, api="/train_continue", args=(),
         app_expect=r"no training job: press Train first"),
    # ----- weights through the app: /build's weights choice, /export_model -----------------
    Case("weights-app-choice-unknown", "weights", None, api="/build",
         args=weights_args("trained"), app_expect=r"'trained' .*not in the list of choices"),
    Case("weights-app-size-unknown", "weights", None, api="/build",
         args=weights_args("pretrained", "huge"), app_expect=r"huge is not in the list"),
    Case("weights-app-path-empty", "weights", None, api="/build", args=weights_args(path=""),
         app_expect=r"give the path of a model.safetensors .*or upload the file"),
    Case("weights-app-path-missing", "weights", None, api="/build",
         args=weights_args(path="/no/such/model.safetensors"), app_expect=SERVER_PATH_REFUSED),
    Case("weights-app-path-a-folder", "weights", None, api="/build",
         args=weights_args(path=tempfile.gettempdir()), app_expect=SERVER_PATH_REFUSED),
    Case("weights-app-path-text-file", "weights", None, api="/build",
         args=lambda env: weights_args(path=str(a_file(b"hello, I am not a model"))),
         app_expect=SERVER_PATH_REFUSED),
    Case("weights-app-path-pth-garbage", "weights", None, api="/build",
         args=lambda env: weights_args(path=str(a_file(b"PK\x03\x04 no zip", "model.pth"))),
         app_expect=SERVER_PATH_REFUSED),
    Case("weights-app-upload-wrong-type", "weights", None, api="/build",
         args=lambda env: weights_args(upload=upload_of(a_file(b"x", "notes.txt"))),
         app_expect=r"Invalid file type"),
    Case("weights-app-upload-two-weights", "weights", None, api="/build",
         args=lambda env: weights_args(upload=upload_of(exported(env), exported(env))),
         app_expect=r"Upload one weights file"),
    Case("weights-app-upload-cut-short", "weights", None, api="/build",
         args=lambda env: weights_args(upload=upload_of(a_file(
             exported(env).read_bytes()[:5000]))),
         app_expect=r"cut short"),
    Case("weights-app-upload-round-trip", "weights", None, api="/build",
         args=lambda env: weights_args(upload=upload_of(exported(env))),
         app_check=lambda r, env: "from file model.safetensors" in r[0]),
    Case("weights-app-upload-a-server-path", "weights", None, api="/build", raw=True,
         args=weights_args(upload=[{"path": "/etc/passwd", "orig_name": "model.safetensors",
                                    "meta": {"_type": "gradio.FileData"}}]),
         app_expect=r"/etc/passwd .*not uploaded by a user"),
    Case("weights-app-export-before-build", "weights", None, api="/export_model",
         args=(False,), app_expect=r"No model yet: build one"),
    Case("weights-app-export-hf-layout-post-norm", "weights", None, api="/export_model",
         args=(True,), build={"norm_placement": "post"},
         app_expect=r"export this model in the book's layout"),

    # ----- order: a model not yet built, nothing traced yet --------------------------------
    Case("order-trace-before-build", "order", None, api="/trace",
         args=(PROMPT, 0, *TRACE_VIEW), app_expect=r"No model yet: build one"),
    Case("order-attention-before-build", "order", None, api="/attention", args=(0, "mean"),
         app_expect=r"No model yet: build one"),
    Case("order-generate-before-build", "order", None, api="/generate", args=gen_args(),
         app_expect=r"No model yet: build one"),
    Case("order-next-token-before-build", "order", None, api="/next_token",
         args=(PROMPT, "", "greedy", 1.0, 50, 123),
         app_expect=r"No model yet: build one"),
    Case("order-logit-lens-before-build", "order", None, api="/logit_lens", args=(PROMPT,),
         app_expect=r"No model yet: build one"),
    Case("order-inside-views-before-trace", "order", None, api="/inside_views",
         args=(0, *TRACE_VIEW), build={}, app_expect=r"Trace a prompt first"),
    Case("order-attention-before-trace", "order", None, api="/attention", args=(0, "mean"),
         build={}, app_expect=r"Trace a prompt first"),
    Case("order-export-stats-before-trace", "order", None, api="/export_stats", args=("CSV",),
         app_expect=r"Trace a prompt first"),
    Case("order-export-attention-before-trace", "order", None, api="/export_attention",
         args=(0, "mean"), build={}, app_expect=r"Trace a prompt first"),
    Case("order-curves-before-build", "order", None, api="/activation_curves",
         args=(-3, 3, ["gelu", "relu"], False, 0),
         app_check=lambda r, env: r["type"] == "plotly"),
]


# ---------------------------------------------------------------------------------------------
# The guided walk (/stage_details: stage, block, prompt) and the shareable link (/share_link:
# preset, the 13 knobs, seed, weights, size, prompt, tab). Reading a link back (the page's
# own, never an endpoint) has its hostile catalogue in tests/test_links.py.
def share_args(preset="teach-tiny", seed=7, weights="random", size="small", prompt=PROMPT,
               tab="inside", **changes):
    cfg = {**PRESETS[preset].to_dict(), **changes} if preset in PRESETS else dict(changes)
    return (preset, *[cfg.get(k) for k in KNOBS], seed, weights, size, prompt, tab)


def stage_card(*shapes):
    """/stage_details answered with the card of a stage, showing these shapes."""
    return lambda card, env: "walk-card" in card and all(s in card for s in shapes)


def link_is(query):
    return lambda result, env: result[0] == query


CASES += [
    Case("order-stage-before-build", "order", None, api="/stage_details",
         args=("attention", 0, PROMPT), app_expect=r"No model yet: build one"),
    Case("index-stage-unknown", "index", None, api="/stage_details",
         args=("norm3", 0, PROMPT), build={}, app_expect=r"stage must be one of embeddings, "),
    Case("index-stage-empty", "index", None, api="/stage_details", args=("", 0, PROMPT),
         build={}, app_expect=r"stage must be one of"),
    Case("index-stage-block-too-high", "index", None, api="/stage_details",
         args=("attention", 2, PROMPT), build={},
         app_expect=r"Block 2 does not exist: this model has blocks 0 to 1"),
    Case("index-stage-block-negative", "index", None, api="/stage_details",
         args=("feed_forward", -1, PROMPT), build={}, app_expect=r"Block -1 does not exist"),
    Case("index-stage-not-in-this-variant", "index", None, api="/stage_details",
         args=("norm2", 0, PROMPT), build={"norm_placement": "none"},
         app_expect=r"no LayerNorm \(norm_placement='none'\): it has no norm2 stage"),
    Case("index-stage-no-shortcut", "index", None, api="/stage_details",
         args=("shortcut2", 0, PROMPT), build={"shortcut": False},
         app_expect=r"no shortcut connections \(shortcut=False\)"),
    Case("index-stage-model-stage-ignores-block", "index", None, api="/stage_details",
         args=("final_norm", 999, PROMPT), build={}, app_check=stage_card("(1, 4, 64)")),
    Case("prompt-stage-empty", "prompt", None, api="/stage_details",
         args=("attention", 0, "  "), build={}, app_expect=r"The prompt is empty"),
    Case("prompt-stage-not-text", "prompt", None, api="/stage_details",
         args=("attention", 0, None), build={}, app_expect=r"The prompt must be text"),
    Case("prompt-stage-megabyte", "prompt", None, api="/stage_details",
         args=("attention", 0, MEGABYTE), build={},
         app_expect=r"1,048,576 characters; the explorer takes at most 20,000", max_seconds=5),
    Case("prompt-stage-longer-than-context", "prompt", None, api="/stage_details",
         args=("attention", 0, LONG_PROMPT), build={},
         app_expect=r"The prompt has 201 tokens but this model's context_length is 64"),
    Case("prompt-stage-vocab-smaller-than-tokenizer", "prompt", None, api="/stage_details",
         args=("embeddings", 0, PROMPT), build={"vocab_size": 100},
         app_expect=r"vocab_size is 100.*Rebuild"),
    Case("prompt-stage-mixed-scripts", "prompt", None, api="/stage_details",
         args=("feed_forward", 1, MIXED), build={},
         app_check=lambda card, env: stage_card(f"(1, {len(env.tok.encode(MIXED))}, 256)")(
             card, env)),
    Case("prompt-stage-markup-stays-text", "prompt", None, api="/stage_details",
         args=("out_head", 0, "<img src=x onerror=alert(1)>"), build={},
         app_check=lambda card, env: "<img" not in card and "&lt;img" in card),

    Case("config-share-emb_dim-not-divisible", "config", None, api="/share_link",
         args=share_args(emb_dim=70), app_expect=r"divisible by n_heads"),
    Case("config-share-n_layers-million", "config", None, api="/share_link",
         args=share_args(n_layers=10 ** 6), app_expect=BUDGET, max_seconds=5),
    Case("config-share-preset-unknown", "config", None, api="/share_link",
         args=share_args(preset="teach-tini"), app_expect=r"not in the list of choices"),
    Case("config-share-seed-negative", "config", None, api="/share_link",
         args=share_args(seed=-1), app_expect=r"seed must be a whole number from 0 to 2\*\*63"),
    Case("config-share-seed-huge", "config", None, api="/share_link",
         args=share_args(seed=2 ** 70), app_expect=r"seed must be a whole number from 0"),
    Case("index-share-tab-unknown", "index", None, api="/share_link",
         args=share_args(tab="admin"), app_expect=r"tab must be one of build, inside"),
    Case("prompt-share-megabyte", "prompt", None, api="/share_link",
         args=share_args(prompt=MEGABYTE), max_seconds=5,
         app_check=lambda r, env: r[0] == "?preset=teach-tiny&seed=7&tab=inside&lang=en"
         and "a link carries at most 2,000" in r[1]),
    Case("prompt-share-not-text", "prompt", None, api="/share_link",
         args=share_args(prompt=None), app_expect=r"The prompt must be text"),
    Case("prompt-share-markup-is-encoded", "prompt", None, api="/share_link",
         args=share_args(prompt="<script>alert(1)</script>&tab=train"),
         app_check=link_is("?preset=teach-tiny&seed=7&prompt=%3Cscript%3Ealert%281%29%3C%2F"
                           "script%3E%26tab%3Dtrain&tab=inside&lang=en")),
    Case("weights-share-file", "weights", None, api="/share_link",
         args=share_args(weights="file"),
         app_check=lambda r, env: r[0] == "?preset=teach-tiny&seed=7&tab=inside&lang=en"
         and "cannot carry a checkpoint file" in r[1]),
    Case("weights-share-pretrained", "weights", None, api="/share_link",
         args=share_args(weights="pretrained", size="xl", n_layers=10 ** 6),
         app_check=link_is("?weights=pretrained&size=xl&tab=inside&lang=en")),
]


# ---------------------------------------------------------------------------------------------
# Hostile requests beyond the catalogue above (the issue "Hostile requests that still get
# through"). Item 1: a tiny positive temperature. Sampling's limit as the temperature goes to 0
# is greedy decoding: 1e-40 is subnormal in float32; 1e-300 and 5e-324 round to 0 there.
TINY_TEMPERATURES = (1e-40, 1e-300, 5e-324)


def greedy_step_ids(n):
    def check(steps, env):
        ids = torch.tensor([env.tok.encode(PROMPT)])
        return [s.token_id for s in steps] == generate_text_simple(env.model, ids, n,
                                                                   64)[0, -n:].tolist()
    return check


def next_token_greedy(result, env):
    ids = torch.tensor([env.tok.encode(PROMPT)])
    token = generate_text_simple(env.model, ids, 1, 64)[0, -1].item()
    return result[0] == PROMPT + env.tok.decode([token])


CASES += [
    Case(f"gen-tiny-temperature-{t!r}-top-k-{k or 'off'}", "generation",
         gen(enc(PROMPT), 3, temperature=t, top_k=k or None, seed=123),
         py_check=greedy_step_ids(3), api="/generate",
         args=gen_args(n=3, mode="sample", temperature=t, top_k=k), build={},
         app_check=greedy_text(PROMPT, 3))
    for t in TINY_TEMPERATURES for k in (50, 0)
] + [
    Case(f"gen-next-token-tiny-temperature-{t!r}-top-k-{k or 'off'}", "generation", None,
         api="/next_token", args=(PROMPT, "", "sample", t, k, 123), build={},
         app_check=next_token_greedy)
    for t in TINY_TEMPERATURES for k in (50, 0)
]

# Item 2: every input of every endpoint is checked for its type. A valid call per endpoint
# (in a session that has built teach-tiny and traced PROMPT); each of its inputs in turn is
# sent as a list holding the valid value (which passes Gradio's own check of a dropdown) and
# as a JSON object. The answer must be a message, never "This is a bug ...".
TYPED_CALLS = {
    "/preset_config": ("teach-tiny",),
    "/build": build_args(),
    "/trace": (PROMPT, 0, *TRACE_VIEW),
    "/inside_views": (0, *TRACE_VIEW),
    "/attention": (0, "mean"),
    "/export_attention": (0, "mean"),
    "/export_stats": ("CSV",),
    "/activation_curves": (-3, 3, ["gelu", "silu"], True, 0),
    "/generate": gen_args(n=3, mode="sample"),
    "/next_token": (PROMPT, "", "sample", 1.0, 50, 123),
    "/logit_lens": (PROMPT,),
    "/train_start": train_args(steps=1, lr=0.0),   # valid types (lr 0 is then refused)
    "/train_use": ("no shortcut",),
    "/train_export": ("no shortcut",),
    "/export_model": (False,),
    "/stage_details": ("attention", 0, PROMPT),
    "/share_link": share_args(),
}
# A message that names what was wrong (ours: "... must be ..."; Gradio's own checks: "not in
# the list of choices", "`number` component", a file input's "validation error for ListFiles"),
# and not the unexpected-error path.
TYPE_MESSAGE = (r"^(?!.*This is a bug)(?=.*(must be|must all be|not in the list of "
                r"choices|component|is empty|validation error for))")


def _typed_cases():
    cases = []
    for api, args in TYPED_CALLS.items():
        for i, value in enumerate(args):
            for kind, wrong in (("list", [value]), ("object", {"value": value})):
                bad = tuple(wrong if j == i else a for j, a in enumerate(args))
                cases.append(Case(f"type-{api.strip('/')}-input{i}-{kind}", "type", None,
                                  api=api, args=bad, build={}, traced=True, raw=True,
                                  app_expect=TYPE_MESSAGE, max_seconds=10))
    return cases


CASES += _typed_cases()


# ---------------------------------------------------------------------------------------------
# Raw HTTP requests (items 6 to 9): what reaches Gradio's routes directly. Each must get a
# 4xx answer whose body matches ``expect`` (``stream``: a call taken, whose event stream says
# ``expect`` as its error). ``{port}`` in a header is the server's port; an ``fn_index`` given
# as "/name" is that endpoint's index in the running app. An unknown fn_index is refused from
# the page's own public config (the event ids every browser reads at /config): Gradio answered
# it with a bare 500 (issue 47, item 22). What only Gradio's internal protocol would tell (a
# component id, the number of a call's inputs, a file input's form) is Gradio's own to answer
# (issue 36: public Gradio only).
@dataclass(frozen=True)
class HttpCase:
    id: str
    method: str
    path: str
    body: Any = None                       # a dict is sent as JSON
    headers: tuple = ()
    status: tuple = (400, 403, 404, 422)
    expect: str = ""
    stream: bool = False


QUEUED = r"join the queue"
HEAVY = ("trace", "build", "generate", "next_token", "logit_lens", "attention", "inside_views",
         "gradients", "export_stats", "export_attention", "export_model", "stage_details")
EMPTY_SESSION = r"session_hash is empty"
UPLOAD_BOUNDARY = "gptexplorerboundary"
NESTED_JSON = "[" * 100_000 + "]" * 100_000

HTTP_CASES: list[HttpCase] = [
    # 6: the REST route skips the queue and its concurrency limits
    *[HttpCase(f"run-{name}-skips-the-queue", "POST", f"/gradio_api/run/{name}",
               {"data": []}, expect=QUEUED) for name in HEAVY],
    HttpCase("run-trace-with-data", "POST", "/gradio_api/run/trace",
             {"data": [PROMPT, 0, *TRACE_VIEW]}, expect=QUEUED),
    HttpCase("api-trace-skips-the-queue", "POST", "/gradio_api/api/trace",
             {"data": [PROMPT, 0, *TRACE_VIEW]}, expect=QUEUED),
    HttpCase("run-trace-slash-skips-the-queue", "POST", "/gradio_api/run/trace/",
             {"data": [PROMPT, 0, *TRACE_VIEW]}, expect=QUEUED),
    # 7: bare 500 answers
    HttpCase("call-unknown-endpoint", "POST", "/gradio_api/call/no_such_endpoint",
             {"data": []}, expect=r"no endpoint /no_such_endpoint"),
    HttpCase("run-unknown-endpoint", "POST", "/gradio_api/run/no_such_endpoint",
             {"data": []}, expect=r"no endpoint /no_such_endpoint"),
    HttpCase("call-empty-session-hash", "POST", "/gradio_api/call/generate",
             {"data": list(gen_args(n=2)), "session_hash": ""}, expect=EMPTY_SESSION),
    HttpCase("call-blank-session-hash", "POST", "/gradio_api/call/trace",
             {"data": [PROMPT, 0, *TRACE_VIEW], "session_hash": "  "}, expect=EMPTY_SESSION),
    HttpCase("join-empty-session-hash", "POST", "/gradio_api/queue/join",
             {"data": [*gen_args(n=2), None], "fn_index": 0, "session_hash": ""},
             expect=EMPTY_SESSION),
    *[HttpCase(f"join-fn-index-{index}", "POST", "/gradio_api/queue/join",
               {"data": [], "fn_index": index, "session_hash": "hostile2"},
               expect=rf"no function with fn_index {index}") for index in (99999, -1)],
    HttpCase("call-v2-unknown-endpoint", "POST", "/gradio_api/call/v2/no_such_endpoint", {},
             expect=r"no endpoint /no_such_endpoint"),
    HttpCase("call-too-few-inputs", "POST", "/gradio_api/call/trace", {"data": [PROMPT]},
             status=(200,), stream=True, expect=r"didn't receive enough input values"),
    HttpCase("call-upload-as-a-path", "POST", "/gradio_api/call/build",
             {"data": [*build_args()[:-2], None, ["/etc/passwd"]]}, status=(200,),
             stream=True, expect=r"The .meta. field must be explicitly provided"),
    HttpCase("call-prompt-as-a-list", "POST", "/gradio_api/call/trace",
             {"data": [[PROMPT], 0, *TRACE_VIEW]}, status=(200,), stream=True,
             expect=r"Prompt must be text \(got a list\)"),
    HttpCase("call-v2-prompt-as-a-list", "POST", "/gradio_api/call/v2/logit_lens",
             {"prompt": [PROMPT]}, status=(200,), stream=True,
             expect=r"Prompt must be text \(got a list\)"),
    HttpCase("call-view-settings", "POST", "/gradio_api/call/view_settings",
             {"data": ["zh", True]}, status=(200,), stream=True, expect=r"event: complete"),
    HttpCase("upload-part-without-filename", "POST", "/gradio_api/upload",
             (f"--{UPLOAD_BOUNDARY}\r\nContent-Disposition: form-data; name=\"files\"\r\n\r\n"
              f"hello\r\n--{UPLOAD_BOUNDARY}--\r\n").encode(),
             headers=(("Content-Type", f"multipart/form-data; boundary={UPLOAD_BOUNDARY}"),),
             expect=r"must be a file, with a filename"),
    # 8: a foreign Host header (DNS rebinding)
    *[HttpCase(f"foreign-host{n}-{method.lower()}-{path.strip('/').replace('/', '-') or 'page'}",
               method, path, body, headers=(("Host", host),), status=(400,),
               expect=r"does not answer to the host")
      for n, host in enumerate(("evil.example:{port}", "evil.example",
                                "127.0.0.1.evil.example:{port}"))
      for method, path, body in (("GET", "/config", None), ("GET", "/", None),
                                 ("POST", "/gradio_api/call/trace",
                                  {"data": [PROMPT, 0, *TRACE_VIEW]}))],
    # 12: JSON that Python's own parser cannot take, answered with a message
    HttpCase("join-nested-100000-arrays", "POST", "/gradio_api/queue/join",
             ('{"data": ' + NESTED_JSON + ', "fn_index": 0, "session_hash": "hostile1"}'
              ).encode(), headers=(("Content-Type", "application/json"),),
             expect=r"nested too deeply"),
    HttpCase("call-nested-100000-arrays", "POST", "/gradio_api/call/trace",
             ('{"data": ' + NESTED_JSON + '}').encode(),
             headers=(("Content-Type", "application/json"),), expect=r"nested too deeply"),
    HttpCase("cancel-nested-100000-arrays", "POST", "/gradio_api/cancel",
             ('{"event_id": ' + NESTED_JSON + '}').encode(),
             headers=(("Content-Type", "application/json"),), expect=r"nested too deeply"),
    HttpCase("call-5000-digit-seed", "POST", "/gradio_api/call/build",
             ('{"data": ["teach-tiny", 50257, 64, 64, 4, 2, 0.1, false, "pre", true, "gelu", 4,'
              ' false, "learned", ' + "7" * 5000 + ', "cpu", "float32"]}').encode(),
             headers=(("Content-Type", "application/json"),),
             expect=r"more than 4,300 digits"),
    # 9: monitoring, open to everyone
    HttpCase("monitoring-summary", "GET", "/monitoring/summary", status=(403, 404),
             expect=r"not enabled"),
    HttpCase("monitoring-page", "GET", "/monitoring", status=(403, 404), expect=r"not enabled"),
]


# ---------------------------------------------------------------------------------------------
# Hostile requests against loading weights, training and links (the issue "Hostile requests
# against the new surfaces"). Each case failed on the code before it.
def _header_and_data(path):
    raw = Path(path).read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    return json.loads(raw[8:8 + n]), raw[8 + n:]


def _write_safetensors(header, data, name="model.safetensors"):
    head = json.dumps(header).encode()
    return a_file(struct.pack("<Q", len(head)) + head + data, name)


def lying(how):
    """teach-tiny's export with a safetensors header that lies about its tensors' bytes."""
    def make(env):
        header, data = _header_and_data(exported(env))
        tensors = sorted((k for k in header if k != "__metadata__"),
                         key=lambda k: header[k]["data_offsets"][0])
        first, second = header[tensors[0]], header[tensors[1]]
        if how == "tok_emb-covers-16-bytes":
            start = header["tok_emb.weight"]["data_offsets"][0]
            header["tok_emb.weight"]["data_offsets"] = [start, start + 16]
        elif how == "overlap":
            second["data_offsets"] = list(first["data_offsets"])
        elif how == "f16-over-f32":
            header["tok_emb.weight"]["dtype"] = "F16"
        elif how == "trailing-4kb":
            data += b"\0" * 4096
        return _write_safetensors(header, data)
    return make


def padded(size=2 * 1024 ** 3):
    """A valid export followed by zeros to ``size`` bytes (a sparse file: cheap to make)."""
    def make(env):
        path = a_file(exported(env).read_bytes())
        os.truncate(path, size)
        return path
    return make


def hashing_forbidden(fn):
    """fn(env) with the file hash made to fail: a refusal must come before any hashing."""
    def run(env):
        before = checkpoints.sha256_file
        checkpoints.sha256_file = lambda *a, **k: (_ for _ in ()).throw(
            AssertionError("the file was hashed before it was checked"))
        try:
            return fn(env)
        finally:
            checkpoints.sha256_file = before
    return run


def broken_model(value):
    """A copy of teach-tiny whose weights are all ``value`` (NaN or infinite)."""
    def make(env):
        model = copy.deepcopy(env.model)
        with torch.no_grad():
            for p in model.parameters():
                p.fill_(value)
        return model
    return make


def broken_checkpoint(value):
    def make(env):
        folder = Path(tempfile.mkdtemp(dir=_FILES))
        return export.export_model(broken_model(value)(env), folder)[0]
    return make


def bare(env, config_text: str, hf_layout=False):
    """teach-tiny's weights without the explorer's metadata, and ``config_text`` as the
    config.json beside them (a checkpoint made by another tool)."""
    folder = Path(tempfile.mkdtemp(dir=_FILES))
    written = export.export_model(env.model, folder, hf_layout=hf_layout)[0]
    header, data = _header_and_data(written)
    header.pop("__metadata__", None)
    head = json.dumps(header).encode()
    written.write_bytes(struct.pack("<Q", len(head)) + head + data)
    (folder / "config.json").write_text(config_text)
    return written


def with_config(config_text, hf_layout=False):
    return lambda env: bare(env, config_text, hf_layout)


def config_file(config_text):
    return lambda env: bare(env, config_text).with_name("config.json")


def upload_with_config(config_text, hf_layout=False):
    def args(env):
        path = bare(env, config_text, hf_layout)
        return weights_args(upload=upload_of(path, path.with_name("config.json")))
    return args


HF_TINY = json.dumps({"model_type": "gpt2", "n_embd": 64, "n_head": 4, "n_layer": 2,
                      "n_positions": 64, "vocab_size": 50257})


def hf_config(**changes):
    return json.dumps({**json.loads(HF_TINY), **changes})


BIG_CONFIG = json.dumps({"n_heads": 4}) + " " * (2 * 1024 ** 2)   # valid JSON, 2 MB
LIES = ("tok_emb-covers-16-bytes", "overlap", "f16-over-f32", "trailing-4kb")
# (20,000 nested lists: within the size limit of a config, beyond Python's recursion limit)
NOT_A_TABLE = {"list": "[1, 2]", "text": '"x"', "number": "4",
               "nested": "[" * 20_000 + "]" * 20_000}
WRONG_HF_TYPES = {"n_embd-object": hf_config(n_embd={}), "n_embd-zero": hf_config(n_embd=0),
                  "n_inner-text": hf_config(n_inner="x"),
                  "activation-list": hf_config(activation_function=["gelu"])}
HOSTILE_PATHS = {"etc-passwd": "/etc/passwd", "proc-environ": "/proc/self/environ",
                 "proc-mem": "/proc/self/mem", "app-source": str(Path("app.py").resolve()),
                 "dot-dot": "/proc/self/cwd/../../../../../../etc/passwd",
                 "cwd-app": "/proc/self/cwd/app.py", "long": "/" + "a" * 10_011,
                 "folder": "/", "missing": "/no/such/model.safetensors"}


def symlink_to(target, name="model.safetensors"):
    def path(env):
        folder = Path(tempfile.mkdtemp(dir=_FILES))
        (folder / name).symlink_to(target)
        return str(folder / name)
    return path


CASES += [
    # 1, 2: a path on the server: the same words whatever is there, never the file's bytes
    *[Case(f"weights-hostile-path-{name}", "weights", None, api="/build", raw=True,
           args=weights_args(path=path), app_expect=SERVER_PATH_REFUSED)
      for name, path in HOSTILE_PATHS.items()],
    *[Case(f"weights-hostile-symlink-to-{name}", "weights", None, api="/build", raw=True,
           args=lambda env, target=target: weights_args(path=symlink_to(target)(env)),
           app_expect=SERVER_PATH_REFUSED)
      for name, target in (("passwd", "/etc/passwd"), ("environ", "/proc/self/environ"))],
    Case("weights-file-proc-mem", "weights", load(lambda env: "/proc/self/mem"),
         r"could not be read|not a safetensors file|There is no file"),
    Case("weights-file-path-too-long", "weights", load(lambda env: "/" + "a" * 10_011),
         r"There is no file at"),
    Case("weights-file-no-content-in-messages", "weights",
         load(symlink_to("/etc/passwd")), r"^(?!.*\d[\d,]{5,}\d).*not a safetensors file"),
    # 3: safetensors whose offsets lie, refused by the header check, before any hashing
    *[Case(f"weights-lying-offsets-{how}", "weights",
           hashing_forbidden(load(lying(how))), r"not a valid safetensors file",
           api="/build", args=lambda env, how=how: weights_args(
               upload=upload_of(lying(how)(env))),
           app_expect=r"not a valid safetensors file")
      for how in LIES],
    Case("weights-padded-2gb-refused-before-hashing", "weights",
         hashing_forbidden(load(padded())), r"not a valid safetensors file.*after its last",
         max_seconds=5),
    # 4: weights that are not numbers: refused at load; sampling a broken model: a message
    *[Case(f"weights-{name}-checkpoint", "weights", load(broken_checkpoint(value)),
           r"not numbers \(NaN or infinite\)", api="/build",
           args=lambda env, value=value: weights_args(
               upload=upload_of(broken_checkpoint(value)(env))),
           app_expect=r"not numbers \(NaN or infinite\)")
      for name, value in (("nan", float("nan")), ("inf", float("inf")))],
    *[Case(f"gen-{name}-model-{mode}", "generation",
           lambda env, value=value, mode=mode: list(generate_steps(
               broken_model(value)(env), env.tok.encode(PROMPT), 3, seed=1,
               temperature=1.0 if mode == "sample" else 0.0)),
           r"logits\) are not numbers")
      for name, value in (("nan", float("nan")), ("inf", float("inf")))
      for mode in ("sample", "greedy")],
    # 5: a config.json that is not a table
    *[Case(f"weights-config-{name}", "weights", load(with_config(text)),
           r"not a table of settings|not valid JSON", api="/build",
           args=upload_with_config(text), app_expect=r"not a table of settings|not valid JSON")
      for name, text in NOT_A_TABLE.items()],
    *[Case(f"weights-config-given-{name}", "weights",
           lambda env, text=text: loading.load_file(exported(env), config_file(text)(env),
                                                    cache=env.cache),
           r"not a table of settings|not valid JSON")
      for name, text in NOT_A_TABLE.items()],
    # 6: Hugging Face's config keys with values of the wrong kind
    *[Case(f"weights-hf-config-{name}", "weights", load(with_config(text, hf_layout=True)),
           r"config.json's \w+ must be", api="/build",
           args=upload_with_config(text, hf_layout=True), app_expect=r"config.json's \w+ must be")
      for name, text in WRONG_HF_TYPES.items()],
    # 7: every config is small, uploaded or not
    Case("weights-config-upload-2mb", "weights", None, api="/build",
         args=upload_with_config(BIG_CONFIG), app_expect=r"over 64 KB: not a model config"),
    Case("weights-config-given-2mb", "weights",
         lambda env: loading.load_file(exported(env), config_file(BIG_CONFIG)(env),
                                       cache=env.cache), r"over 64 KB: not a model config"),
    # smaller things
    Case("train-text-just-over-the-limit", "training", None, api="/train_start",
         args=train_args(data="pasted text", text="a" * 1_000_001),
         app_expect=r"1,000,001 bytes; the lab trains on at most 1,000,000 bytes"),
    Case("train-variant-twice", "training", None, api="/train_start",
         args=train_args(variants=["post-LN", "post-LN"]),
         app_expect=r"'post-LN' is chosen 2 times"),
]
