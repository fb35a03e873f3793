"""The training lab: the server's training jobs, within limits so that many sessions can share
one server (jobs at once, parameter-steps, memory).

A job is a pure function of what it trains (variants, text, settings and their seed), so
sessions that ask for the same job share one: it costs one job's memory and CPU, and every
session that asked sees its curves. A session *watches* its job; Stop stops its watching, and
the job itself only when nobody watches it any more. Continue watches again (and resumes the
job if it had stopped). Every watcher's Use gets the weights of the one job."""
from __future__ import annotations

import contextvars
import functools
import threading
from dataclasses import dataclass, field, replace

from ...book.errors import ExplorerError, Message
from ..memory import default_budget_bytes
from .job import TrainingJob, job_key
from .setup import (DEFAULT_MAX_JOBS, DEFAULT_MAX_PARAM_STEPS, MAX_JOBS_ENV,
                    MAX_WORK_ENV, Corpus, TrainingSettings, as_count, check_variants,
                    default_settings, env_number, job_bytes, param_steps)
from .views import JobView


MAX_KEPT_ENDED = 4     # finished jobs kept for a session that asks for the same again


@dataclass
class _Member:
    key: tuple
    watching: bool = True
    # The context of the session's last request to this job (Train, Continue): a GPU call is
    # made in it, so that the visitor it names pays (ZeroGPU charges the X-IP-Token there).
    context: contextvars.Context | None = None


@dataclass
class _Building:
    """A new job whose models are being built: its room is taken already."""
    nbytes: int
    done: threading.Event = field(default_factory=threading.Event)


class TrainingLab:
    """The server's training jobs: at most ``max_jobs`` training at once, within the memory
    budget, each no larger than ``max_param_steps``. Sessions asking for the same job share
    it; different jobs share nothing (their own models, optimizers, random streams and
    data)."""

    def __init__(self, max_jobs: int | None = None, max_param_steps: float | None = None,
                 budget_bytes: int | None = None, device: str = "cpu"):
        self.max_jobs = (env_number(MAX_JOBS_ENV, DEFAULT_MAX_JOBS, int)
                         if max_jobs is None else as_count("max_jobs", max_jobs))
        self.max_param_steps = (env_number(MAX_WORK_ENV, DEFAULT_MAX_PARAM_STEPS)
                                if max_param_steps is None else max_param_steps)
        self.budget_bytes = default_budget_bytes() if budget_bytes is None else budget_bytes
        self.device = device
        self._jobs: dict[tuple, TrainingJob] = {}        # job key -> the one job
        self._members: dict[str, _Member] = {}           # session -> its job and watching
        self._building: dict[tuple, _Building] = {}      # job key -> room taken, being built
        self._lock = threading.RLock()

    # -- limits ------------------------------------------------------------------------------
    def check(self, session_id, variants, settings, corpus: Corpus | None = None) -> None:
        """Raise the error that ``start`` would raise for these limits, allocating nothing
        (without the text, a job that another session already trains is not known: the
        limit of jobs at once is then left to ``start``)."""
        variants = check_variants(variants, None if corpus is None else corpus.vocab_size)
        with self._lock:
            if corpus is not None and self._shared(job_key(variants, corpus, settings)):
                return
            self._check(session_id, variants, settings, count_jobs=corpus is not None)

    def _check_busy(self, session_id, key=None):
        """A session trains one job at a time: another job while its own trains (watched by
        it alone) is refused."""
        own = self.job(session_id)
        member = self._members.get(session_id)
        if own is not None and own.running and member.watching and member.key != key \
                and self._watchers(own) == [session_id]:
            raise ExplorerError("lab.session_busy", "This session is already training: stop or "
                                "cancel that job before starting another.")

    def _check(self, session_id, variants, settings, release=False, count_jobs=True):
        self._check_busy(session_id)
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
        others = [j for j in self._jobs.values() if j is not self._leaving(session_id)]
        running = [j for j in others if j.running] + list(self._building.values())
        if count_jobs and len(running) >= self.max_jobs:
            raise ExplorerError("lab.too_many_jobs", "{n} training job(s) are running on this "
                                "server, the most it runs at once ({env}). Try again in a minute.",
                                n=len(running), env=MAX_JOBS_ENV)
        need = job_bytes(variants, settings)
        held = sum(j.held_bytes() for j in others) + sum(b.nbytes
                                                         for b in self._building.values())
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

    def _shared(self, key) -> TrainingJob | None:
        """The job for ``key`` if one can be shared: training, stopped or finished, with its
        models (not cancelled, failed or released)."""
        job = self._jobs.get(key)
        if job is None or job.released or job.status in ("cancelled", "failed"):
            return None
        return job

    def _leaving(self, session_id) -> TrainingJob | None:
        """The session's job, if the session is its only member (it goes with a new one)."""
        job = self.job(session_id)
        if job is not None and self._members_of(job) == [session_id]:
            return job
        return None

    # -- sessions and their jobs -------------------------------------------------------------
    def start(self, session_id: str, variants, corpus,
              settings: TrainingSettings | None = None, run: bool = True) -> TrainingJob:
        """This session's job: the same job as another session's if it asks for the same
        (joined, and resumed if it had stopped), else a new one (replacing the session's
        previous job), trained unless ``run=False``. The limits are checked, and the new job's
        room reserved, before its models are built: a burst of requests builds only what
        may train."""
        settings = settings or default_settings()
        if not isinstance(settings, TrainingSettings):
            raise TypeError("settings must be a TrainingSettings.")
        variants = check_variants(variants, getattr(corpus, "vocab_size", None))
        key = job_key(variants, corpus, settings)
        while True:
            with self._lock:
                job = self._shared(key)
                if job is not None:
                    self._check_busy(session_id, key)
                    if run and not job.running and not job.done:
                        self._resume(job)
                    left = self._join(session_id, key)
                    break
                building = self._building.get(key)
                if building is None:
                    self._check(session_id, variants, settings, release=True)
                    building = self._building[key] = _Building(job_bytes(variants, settings))
                    job = None
                    break
            building.done.wait()     # another session builds this same job: then join it
        if job is None:
            try:
                job = TrainingJob(variants, corpus, settings, self.device)  # not locked
                job.payer = functools.partial(self.payer, job)
                with self._lock:
                    self._jobs[key] = job
                    left = self._join(session_id, key)
                    if run:
                        job.start()
            finally:
                with self._lock:
                    self._building.pop(key)
                building.done.set()
        self._end(*left)
        return job

    def _join(self, session_id, key) -> tuple:
        """The session's job becomes ``key``'s; returns what ``_leave`` returns for the job it
        left (for ``_end``, outside the lock)."""
        member = self._members.get(session_id)
        left = self._leave(session_id) if member is not None and member.key != key \
            else (None, None)
        self._members.pop(session_id, None)       # the latest to join pays first (payer)
        self._members[session_id] = _Member(key, context=contextvars.copy_context())
        return left

    def _leave(self, session_id) -> tuple:
        """The session leaves its job. Returns ``(to_cancel, to_stop)``: a job nobody has any
        more is forgotten (to be cancelled) unless it has finished (another session may ask
        for it again; the lab takes its memory back when a new job needs it); a job that
        others still have but nobody watches any more stops after its current step."""
        member = self._members.pop(session_id, None)
        job = None if member is None else self._jobs.get(member.key)
        if job is None:
            return None, None
        if self._members_of(job):
            return None, (job if job.running and not self._watchers(job) else None)
        if job.status == "finished" and not job.released:
            self._forget_old_ended()
            return None, None
        self._jobs.pop(member.key)
        return job, None

    def _forget_old_ended(self):
        """Keep at most MAX_KEPT_ENDED finished jobs that no session has."""
        kept = sorted((k for k, j in self._jobs.items()
                       if j.status == "finished" and not self._members_of(j)),
                      key=lambda k: self._jobs[k].ended_at)
        for key in kept[:-MAX_KEPT_ENDED]:
            self._jobs.pop(key)

    @staticmethod
    def _end(to_cancel=None, to_stop=None):
        """Outside the lab's lock: both wait for the current step."""
        if to_cancel is not None:
            to_cancel.cancel()
        if to_stop is not None:
            to_stop.stop()

    def job(self, session_id: str) -> TrainingJob | None:
        member = self._members.get(session_id)
        return None if member is None else self._jobs.get(member.key)

    def watching(self, session_id: str, job: TrainingJob) -> bool:
        """Whether this session still watches ``job`` (its stream ends when not)."""
        member = self._members.get(session_id)
        return member is not None and member.watching and self._jobs.get(member.key) is job

    def members(self, job: TrainingJob) -> int:
        """How many sessions have ``job``."""
        with self._lock:
            return len(self._members_of(job))

    def watchers(self, job: TrainingJob) -> int:
        """How many sessions watch ``job`` (it trains only while one does)."""
        with self._lock:
            return len(self._watchers(job))

    def stop(self, session_id: str) -> TrainingJob:
        """This session stops watching; the job stops after its current step if nobody else
        watches it."""
        job = self.own_job(session_id)
        with self._lock:
            self._members[session_id].watching = False
            alone = not self._watchers(job)
        return job.stop() if alone else job

    def resume(self, session_id: str) -> TrainingJob:
        """Continue: watch again, and train again if the job had stopped."""
        job = self.own_job(session_id)
        with self._lock:
            if not job.running:
                self._resume(job)
            member = self._members.pop(session_id)
            member.watching, member.context = True, contextvars.copy_context()
            self._members[session_id] = member
        return job

    def payer(self, job: TrainingJob) -> contextvars.Context | None:
        """The request context in which ``job``'s next GPU call is made: that of the session
        that last began (or went back) to watching it. None when nobody watches: a visitor who
        stopped watching, or closed the tab, pays for nothing more (the job stops)."""
        with self._lock:
            watchers = self._watchers(job)
            return self._members[watchers[-1]].context if watchers else None

    def _resume(self, job):
        running = [j for j in self._jobs.values() if j.running and j is not job]
        if len(running) + len(self._building) >= self.max_jobs:
            raise ExplorerError("lab.too_many_jobs_to_continue", "{n} training job(s) are "
                                "running on this server, the most it runs at once ({env}). "
                                "Try Continue again in a minute.", n=len(running),
                                env=MAX_JOBS_ENV)
        job.start()

    def cancel(self, session_id: str) -> bool:
        """This session leaves its job (the page calls this when the tab closes): a job that
        nobody has any more is cancelled and its memory freed. False if the session had
        none."""
        with self._lock:
            if session_id not in self._members:
                return False
            left = self._leave(session_id)
        self._end(*left)
        return True

    def _members_of(self, job) -> list[str]:
        return [s for s, m in self._members.items() if self._jobs.get(m.key) is job]

    def _watchers(self, job) -> list[str]:
        return [s for s in self._members_of(job) if self._members[s].watching]

    def own_job(self, session_id) -> TrainingJob:
        """This session's job; an error to act on where it has none."""
        job = self.job(session_id)
        if job is None:
            raise ExplorerError("lab.no_job", "This session has no training job: press Train "
                                "first.")
        return job

    def __len__(self) -> int:
        return len(self._jobs)


def session_view(lab: TrainingLab, session_id: str,
                 job: TrainingJob) -> tuple[JobView, Message | None]:
    """``job``'s view as this session sees it, and what the session shares of it (None:
    nothing): a job that trains on for other sessions after this one's Stop is "stopped"
    for this one."""
    view, members = job.view(), lab.members(job)
    if job.running and not lab.watching(session_id, job):
        others = lab.watchers(job)      # this session is not one of them
        return replace(view, status="stopped", message=""), Message(
            "train.watching_stopped", "You stopped watching at step {step:,}; the same job "
            "trains on for {n} other session(s). **Continue** shows it again.",
            step=view.step, n=others)
    if members > 1:
        return view, Message("train.shared", "*Shared:* {n} sessions asked for this same job; "
                                             "it trains once for all of them.", n=members)
    return view, None
