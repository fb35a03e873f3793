"""The training lab: the server's training jobs, one per session, within limits so that many
sessions can share one server (jobs at once, parameter-steps, memory)."""
from __future__ import annotations

import threading

from ..book.errors import ExplorerError
from .memory import default_budget_bytes
from .training_job import TrainingJob
from .training_setup import (DEFAULT_MAX_JOBS, DEFAULT_MAX_PARAM_STEPS, MAX_JOBS_ENV,
                             MAX_WORK_ENV, Corpus, TrainingSettings, as_count, check_variants,
                             default_settings, env_number, job_bytes, param_steps)


class TrainingLab:
    """The server's training jobs: one per session, at most ``max_jobs`` training at once,
    within the memory budget, each no larger than ``max_param_steps``. Sessions share nothing:
    each job has its own models, optimizers, random streams and data."""

    def __init__(self, max_jobs: int | None = None, max_param_steps: float | None = None,
                 budget_bytes: int | None = None, device: str = "cpu"):
        self.max_jobs = (env_number(MAX_JOBS_ENV, DEFAULT_MAX_JOBS, int)
                         if max_jobs is None else as_count("max_jobs", max_jobs))
        self.max_param_steps = (env_number(MAX_WORK_ENV, DEFAULT_MAX_PARAM_STEPS)
                                if max_param_steps is None else max_param_steps)
        self.budget_bytes = default_budget_bytes() if budget_bytes is None else budget_bytes
        self.device = device
        self._jobs: dict[str, TrainingJob] = {}
        self._lock = threading.Lock()

    def check(self, session_id, variants, settings) -> None:
        """Raise the ValueError that ``start`` would raise for these limits, allocating
        nothing."""
        with self._lock:
            self._check(session_id, check_variants(variants), settings)

    def _check(self, session_id, variants, settings, release=False):
        old = self._jobs.get(session_id)
        if old is not None and old.running:
            raise ExplorerError("lab.session_busy", "This session is already training: stop or "
                                "cancel that job before starting another.")
        work = param_steps(variants, settings)
        if work > self.max_param_steps:
            params = work // settings.steps
            raise ExplorerError("lab.too_large", "This training is too large for this server: "
                                "{n_variants} variant(s) with {params:,} parameters in all x "
                                "{steps:,} steps = {work:.2g} parameter-steps; the limit is "
                                "{limit:.2g} (setting {env}). Choose fewer steps, fewer variants "
                                "or a smaller preset.", n_variants=len(variants), params=params,
                                steps=settings.steps, work=work, limit=self.max_param_steps,
                                env=MAX_WORK_ENV)
        running = [j for s, j in self._jobs.items() if j.running and s != session_id]
        if len(running) >= self.max_jobs:
            raise ExplorerError("lab.too_many_jobs", "{n} training job(s) are running on this "
                                "server, the most it runs at once ({env}). Try again in a minute.",
                                n=len(running), env=MAX_JOBS_ENV)
        need = job_bytes(variants, settings)
        others = [j for s, j in self._jobs.items() if s != session_id]
        held = sum(j.held_bytes() for j in others)
        # Ended jobs keep their models only for Use and Export: when a new job needs the room,
        # the oldest give them up (their curves stay).
        ended = sorted((j for j in others if j.ended_at is not None and not j.released),
                       key=lambda j: j.ended_at)
        kept = held - sum(j.held_bytes() for j in ended)
        if kept + need > self.budget_bytes:
            raise ExplorerError("lab.no_memory", "This training needs about {need_mb:,.0f} MB; "
                                "the server has {free_mb:,.0f} MB of its training memory free "
                                "now. Choose a smaller preset, batch or context, or try again "
                                "later.", need_mb=need / 2 ** 20,
                                free_mb=max(0, self.budget_bytes - kept) / 2 ** 20)
        for job in ended if release else ():
            if held + need <= self.budget_bytes:
                break
            held -= job.held_bytes()
            job.release_models()

    def start(self, session_id: str, variants, corpus: Corpus,
              settings: TrainingSettings | None = None, run: bool = True) -> TrainingJob:
        """Make this session's job (replacing its previous, stopped or finished one) and
        start training unless ``run=False``."""
        settings = settings or default_settings()
        if not isinstance(settings, TrainingSettings):
            raise TypeError("settings must be a TrainingSettings.")
        variants = check_variants(variants)
        with self._lock:
            self._check(session_id, variants, settings)
            old = self._jobs.pop(session_id, None)
        if old is not None:
            old.cancel()
        job = TrainingJob(variants, corpus, settings, self.device)
        with self._lock:
            # others may have started meanwhile; ended jobs give up their models if need be
            self._check(session_id, variants, settings, release=True)
            self._jobs[session_id] = job
            if run:
                job.start()
        return job

    def job(self, session_id: str) -> TrainingJob | None:
        return self._jobs.get(session_id)

    def stop(self, session_id: str) -> TrainingJob:
        return self._job(session_id).stop()

    def resume(self, session_id: str) -> TrainingJob:
        job = self._job(session_id)
        with self._lock:
            running = [j for j in self._jobs.values() if j.running and j is not job]
            if len(running) >= self.max_jobs:
                raise ExplorerError("lab.too_many_jobs_to_continue", "{n} training job(s) are "
                                    "running on this server, the most it runs at once ({env}). "
                                    "Try Continue again in a minute.", n=len(running),
                                    env=MAX_JOBS_ENV)
            return job.start()

    def cancel(self, session_id: str) -> bool:
        """End this session's job and free its memory (the page calls this when the tab
        closes). False if the session had none."""
        with self._lock:
            job = self._jobs.pop(session_id, None)
        if job is None:
            return False
        job.cancel()
        return True

    def _job(self, session_id) -> TrainingJob:
        job = self._jobs.get(session_id)
        if job is None:
            raise ExplorerError("lab.no_job", "This session has no training job: press Train "
                                "first.")
        return job

    def __len__(self) -> int:
        return len(self._jobs)
