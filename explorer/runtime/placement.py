"""Where a job runs: CPU first, a GPU only where it pays. One policy, one table of rates.

The server's CPU does everything it finishes quickly (the teaching models, gpt2-small at
lecture lengths, the default training comparison). A job goes to a GPU only when the CPU's
estimate is long (over ``CPU_QUICK_SECONDS``) and the GPU's, with the cost of getting a GPU
for the call, is at most 1 / ``GPU_SPEEDUP`` of it. On a ZeroGPU Space a GPU call spends the
visitor's daily quota (a class behind one address shares one), so a quick job never asks.

On a plain CUDA (or MPS) machine this question does not arise: ``"auto"`` builds the model on
the GPU, which is then simply the device. On ZeroGPU, CUDA cannot start in the server process,
so ``"auto"`` is the CPU there and the GPU is lent per call (``offload``).
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass

from ..book.config import GPTConfig, count_parameters
from ..book.errors import Message

ZERO_GPU_ENV = "SPACES_ZERO_GPU"

CPU_QUICK_SECONDS = 2.0     # a job the CPU finishes within this stays on the CPU
TRAINING_QUICK_SECONDS = 60.0   # a training job too: a lecture's comparison runs here
GPU_SPEEDUP = 2.0           # ... and so does one the GPU would not do at least this much faster
# A GPU call that the CPU could do instead: on "quota used up", "no GPU", "aborted", the CPU
# does it if its estimate is within this; otherwise the page says when to try again.
CPU_FALLBACK_SECONDS = 20.0
MAX_ASK_SECONDS = 120       # ZeroGPU refuses longer requests; an anonymous day's quota is ~2 min


@dataclass(frozen=True)
class Rates:
    """How fast a place does the work of ``Work``."""
    flops_per_second: float     # fp32 matmul work of forward passes over many tokens
    bytes_per_second: float     # weights read per decoding step (one token: memory-bound)
    seconds_per_layer_step: float    # Python's (and kernel launches') share, per block per step
    call_seconds: float         # a call's fixed cost (ZeroGPU: schedule a GPU, reach a worker)
    weight_bytes_per_second: float   # the model's weights into the place, per call


# CPU: measured on the project's 2-core machine (bench/placement_rates.py), then halved: a
# Space's CPU serves the other sessions at the same time. GPU: no GPU was lent to
# measure one (bench/gpu_check.sh measures it where one is): an H200 slice's fp32 matmuls at a
# tenth of their peak, a fifth of its memory bandwidth, host-to-device copies of unpinned
# memory, and a few seconds to get a GPU and a worker.
RATES = {
    "cpu": Rates(flops_per_second=7e10, bytes_per_second=1.2e10, seconds_per_layer_step=2e-3,
                 call_seconds=0.0, weight_bytes_per_second=math.inf),
    "zerogpu": Rates(flops_per_second=5e12, bytes_per_second=1e12, seconds_per_layer_step=3e-4,
                     call_seconds=1.5, weight_bytes_per_second=5e9),
}
# A stream is watched as it comes: it goes to a GPU only if the CPU's steps are slower than
# this (under four tokens a second), whatever its length.
SLOW_STEP_SECONDS = 0.25


@dataclass(frozen=True)
class Work:
    """What a job costs, in the rates' units: ``flops`` of forward passes, then ``steps``
    decoding steps of a model of ``layers`` blocks and ``weight_bytes`` of weights."""
    flops: float = 0.0
    steps: int = 0
    weight_bytes: int = 0
    layers: int = 0
    stream: bool = False        # watched step by step as it comes (a generation)
    quick_seconds: float = CPU_QUICK_SECONDS   # the CPU keeps work it finishes within this

    @classmethod
    def forward(cls, cfg, tokens: int, passes: int = 1) -> "Work":
        """``passes`` forward passes over ``tokens`` tokens (a trace, a lens, a knock-out)."""
        cfg = GPTConfig.from_dict(cfg)
        parameters = count_parameters(cfg).total
        return cls(flops=2.0 * parameters * max(1, tokens) * max(1, passes),
                   weight_bytes=4 * parameters, layers=cfg.n_layers)

    @classmethod
    def decoding(cls, cfg, prompt_tokens: int, new_tokens: int) -> "Work":
        """The prompt, then ``new_tokens`` steps of one token each (a KV cache), each a whole
        window again once the window is full."""
        cfg = GPTConfig.from_dict(cfg)
        parameters = count_parameters(cfg).total
        full = max(0, prompt_tokens + new_tokens - cfg.context_length)
        tokens = min(prompt_tokens, cfg.context_length) + full * cfg.context_length
        return cls(flops=2.0 * parameters * max(1, tokens), steps=new_tokens,
                   weight_bytes=4 * parameters, layers=cfg.n_layers, stream=True)

    @classmethod
    def training(cls, configs, batch_size: int, window: int, steps: int, eval_every: int,
                 eval_batches: int) -> "Work":
        """Training ``configs`` side by side: a forward and a backward pass (3 times a
        forward's work) per step, an AdamW update, and the evaluations' forward passes. A job
        in the background that the CPU finishes within ``TRAINING_QUICK_SECONDS`` stays here.
        """
        configs = [GPTConfig.from_dict(c) for c in configs]
        parameters = sum(count_parameters(c).total for c in configs)
        tokens = batch_size * window
        evaluated = (steps // max(1, eval_every) + 1) * 2 * eval_batches * tokens
        return cls(flops=2.0 * parameters * (3 * tokens * steps + evaluated), steps=steps,
                   weight_bytes=16 * parameters,           # weights, gradients, AdamW's two
                   layers=3 * sum(c.n_layers for c in configs),
                   quick_seconds=TRAINING_QUICK_SECONDS)

    def step_seconds(self, place: str) -> float:
        rates = RATES[place]
        return (self.weight_bytes / rates.bytes_per_second
                + self.layers * rates.seconds_per_layer_step)

    def seconds(self, place: str) -> float:
        rates = RATES[place]
        return (rates.call_seconds + self.weight_bytes / rates.weight_bytes_per_second
                + self.flops / rates.flops_per_second + self.steps * self.step_seconds(place))


@dataclass(frozen=True)
class Placement:
    where: str              # "cpu" or "gpu"
    cpu_seconds: float      # the estimates the choice was made from
    gpu_seconds: float | None

    @property
    def ask_seconds(self) -> int:
        """The duration a GPU call asks for: its estimate twice over, plus a margin (too short
        gets the call aborted; ZeroGPU charges the time used, not the time asked)."""
        return ask_seconds(self.gpu_seconds or 0.0)


def ask_seconds(gpu_seconds: float) -> int:
    return int(min(MAX_ASK_SECONDS, math.ceil(2 * gpu_seconds + 3)))


def on_zero_gpu(environ=os.environ) -> bool:
    """ZeroGPU's own test (``spaces.config``): ``SPACES_ZERO_GPU`` is 1, t or true, any case."""
    value = environ.get(ZERO_GPU_ENV)
    return value is not None and value.lower() in ("1", "t", "true")


def gpu_kind(environ=os.environ) -> str | None:
    """The GPU a call can be sent to: "zerogpu", or None (a CUDA machine's GPU is the models'
    own device, not a place to send work)."""
    return "zerogpu" if on_zero_gpu(environ) else None


def place(work: Work, gpu: str | None) -> Placement:
    """The policy: the CPU unless a GPU exists, the CPU would take over ``CPU_QUICK_SECONDS``,
    and the GPU would take at most 1 / ``GPU_SPEEDUP`` of the CPU's time (its call's cost
    included), or the work's own ``quick_seconds``. A stream: the same for one step's time,
    over ``SLOW_STEP_SECONDS``."""
    cpu = work.seconds("cpu")
    if gpu is None:
        return Placement("cpu", cpu, None)
    on_gpu = work.seconds(gpu)
    if work.stream:
        slow, fast = work.step_seconds("cpu"), work.step_seconds(gpu)
        pays = slow > SLOW_STEP_SECONDS and fast * GPU_SPEEDUP <= slow
    else:
        pays = cpu > work.quick_seconds and on_gpu * GPU_SPEEDUP <= cpu
    return Placement("gpu" if pays else "cpu", cpu, on_gpu)


# On a ZeroGPU Space, ZeroGPU charges the visitor named by the X-IP-Token header, which
# Gradio's page sends only when huggingface.co frames it; at the Space's direct *.hf.space
# address there is none, and every call is paid from the Space's own shared pool, at the
# lowest priority.
TOKEN_HEADER = "x-ip-token"      # spaces/zero/client.py's TOKEN_HEADER, as Starlette reads it


def space_link(environ=os.environ) -> str:
    """The Space's page on huggingface.co (``SPACE_ID`` is "owner/name" on every Space)."""
    space = environ.get("SPACE_ID", "")
    return f"https://huggingface.co/spaces/{space}" if space else "https://huggingface.co/spaces"


def pool_note(request, environ=os.environ) -> Message | None:
    """The note for a page whose request came without an X-IP-Token on ZeroGPU; else None."""
    if not on_zero_gpu(environ) or request is None:
        return None
    headers = getattr(request, "headers", None) or {}
    if headers.get(TOKEN_HEADER):
        return None
    return Message("zerogpu.pool_note", "**This page is open at the Space's own address, "
                   "outside huggingface.co.** ZeroGPU cannot tell its visitors apart here: "
                   "everyone's GPU calls are paid from the Space's shared pool, at the lowest "
                   "priority. For a GPU quota of your own, open it on Hugging Face instead: "
                   "{link}", link=space_link(environ))
