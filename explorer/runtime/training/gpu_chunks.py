"""A training job on a GPU that is lent per call (ZeroGPU): chunks of steps, one call each.

A copy of the job goes to the call (pickled: ``TrainingJob.__getstate__`` leaves out its locks
and thread), trains there, and comes back whole: models, AdamW's state, the random streams and
the records. The lab keeps the job, so its watchers, Stop and Use work as on the CPU. Each
chunk asks for about ``CHUNK_GPU_SECONDS``; Stop takes effect between chunks. If a call cannot
run (quota used up, no GPU), the job trains on here, on the CPU, and says so.

With the same seed and settings the chunks give the CPU's numbers exactly where the "GPU" is
the CPU (the tests' ZeroGPU stand-in); on a real GPU, float rounding and dropout's generator
are the GPU's.
"""
from __future__ import annotations

import functools

import torch

from .. import offload
from ..placement import Placement, Work, gpu_kind, place

CHUNK_GPU_SECONDS = 20            # a GPU call trains about this long; its state comes back


def placed(configs, settings, window: int, device: torch.device) -> Placement:
    """Where a job of ``configs`` trains: the policy's answer for the job's work, on a job
    whose models live on the CPU (on a CUDA machine the GPU is the job's own device)."""
    work = Work.training(configs, settings.batch_size, window, settings.steps,
                         settings.eval_freq, settings.eval_iter)
    if device.type != "cpu":
        return Placement("cpu", work.seconds("cpu"), None)
    return place(work, gpu_kind())


def train_on_gpu(job) -> None:
    """The job's next chunk of steps, in one GPU call (in the job's worker thread)."""
    per_step = job.placement.gpu_seconds / max(1, job.settings.steps)
    n = max(1, min(job.settings.steps - job.steps_done,
                   int(CHUNK_GPU_SECONDS / max(per_step, 1e-9))))
    chunk = Placement("gpu", job.placement.cpu_seconds * n / job.settings.steps, per_step * n)
    call = functools.partial(offload.call, train_chunk, (job, n), placement=chunk,
                             fallback_always=True)
    # () -> the context that pays (TrainingLab.payer); a job outside the lab has none
    paying = getattr(job, "payer", None)
    payer = paying() if paying is not None else None
    if paying is not None and payer is None:
        job._stop.set()                   # nobody watches: nobody pays; the job stops here
        return
    with job._step_lock:
        portable(job)
        # made in the context of a watcher's request: ZeroGPU charges the visitor it names
        trained, ran = payer.run(call) if payer is not None else call()
        if trained is not job:
            with job._view_lock:
                for name in ("runs", "global_step", "epoch", "seconds"):
                    setattr(job, name, getattr(trained, name))
    job.ran = ran
    if ran.failure:
        job.placement = Placement("cpu", job.placement.cpu_seconds, None)


def train_chunk(job, steps: int):
    """``steps`` more steps of ``job`` where this runs: in a GPU call's worker, on its GPU (the
    job's copy goes back); here, when the CPU takes over, on the job itself."""
    where = offload.device()
    if where.type != "cpu":
        to_device(job, where)
    job._train_steps(steps)
    if where.type != "cpu":
        to_device(job, torch.device("cpu"))
    portable(job)
    return job


def to_device(job, device: torch.device) -> None:
    """Models, AdamW's state and the random streams on ``device``."""
    for run in job.runs:
        run.to(device, job.settings.seed)
    job.device = device


def portable(job) -> None:
    """The epoch's batches still to come as a list: a list's iterator pickles (and goes on
    where it was), a DataLoader's does not. Reading them on draws nothing at random."""
    for run in job.runs:
        if run.batches is not None:
            run.batches = iter(list(run.batches))
