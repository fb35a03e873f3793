"""A training job: two to four of the chapter's variants trained side by side, as chapter 5
trains one, with live plain data for the page (loss curves, a table, per-block gradient norms,
samples), Stop and Continue, and limits so that many sessions can share one server.

How the lab keeps the book's numbers: every variant is built right after
``torch.manual_seed(seed)`` and draws from its own copy of the generator that seed left behind
(``RandomStream``) everything the book's loop draws from the global one: its dropout masks and
the shuffles of ``iter(train_loader)`` and of ``evaluate_model``. So each variant's stream runs
exactly as the book's loop would run for it alone, and with the book's settings the lab's losses
are the book's. All variants train and evaluate on the batches the first variant's stream drew:
the same batches, in the same order. A stream is put in place (under the lock of ``seeded``)
only around the code that draws from it, so concurrent jobs never mix their numbers, and a
job's result does not depend on what else runs on the server. (The cost: two jobs' training
steps take turns rather than overlap; on a 2-core machine they would compete anyway.)

Where the lab is faster than the book's loop (same numbers within float rounding): fused
LayerNorm, GELU and attention (``explorer.book.fast``; attention falls back to the book's
explicit steps while dropout is active), PyTorch's fused AdamW, and an evaluation that runs the
blocks once over all its batches and the output head a slice of positions at a time
(``run.mean_loss``). The lab that runs many sessions' jobs: ``lab``.
"""
from __future__ import annotations

import contextvars
import copy
import hashlib
import math
import threading
import time

import torch

from ...book.errors import ExplorerError, Message, Text
from ...book.tokenizer import get_tokenizer
from ...book.training import (TRAIN_RATIO, calc_loss_batch, check_training_text,
                              create_dataloader_v1, split_text)
from ..build import resolve_device
from .copying_task import CopyingTask, greedy_copy, measure
from .gpu_chunks import placed, train_on_gpu
from .run import (VariantRun, block_grad_norms, first_batches, greedy_sample,
                  mean_loss, one_thread)
from .setup import (Corpus, TrainingSettings, as_count, check_variants,
                    default_settings, job_bytes, job_configs, window_of)
from .views import JobView, TrainedModel

GRAD_NORM_POINTS = 200            # at most this many steps of gradient norms per variant
# A job's state, in the messages that say why it cannot train ("This job is finished; ...").
_STATUS_WORDS = {"finished": Message("job.status.finished", "finished"),
                 "cancelled": Message("job.status.cancelled", "cancelled"),
                 "failed": Message("job.status.failed", "failed")}


def job_key(variants, corpus: Corpus, settings: TrainingSettings) -> tuple:
    """What makes two jobs the same job: the variants (names and configs), the text and the
    settings (the seed among them)."""
    data = corpus if isinstance(corpus, CopyingTask) else hashlib.sha256(
        corpus.text.encode("utf-8", errors="surrogatepass")).hexdigest()
    return (tuple((v.label, v.config) for v in variants), str(corpus.name), data, settings)


class TrainingJob:
    """Variants trained side by side on one corpus. ``advance(n)`` trains n steps in the
    caller's thread; ``start`` / ``stop`` / ``resume`` / ``cancel`` run it in a worker thread.
    ``view()`` is the plain data the page shows, safe to call at any time."""

    def __init__(self, variants, corpus: Corpus | CopyingTask,
                 settings: TrainingSettings | None = None, device: str = "cpu"):
        settings = settings or default_settings()
        if not isinstance(settings, TrainingSettings):
            raise TypeError("settings must be a TrainingSettings.")
        if not isinstance(corpus, (Corpus, CopyingTask)):
            raise TypeError("corpus must be a Corpus (default_corpus(), corpus_from_text() or "
                             "corpus_from_file()) or a CopyingTask.")
        copying = isinstance(corpus, CopyingTask)
        variants = check_variants(variants, corpus.vocab_size)
        self.device = resolve_device(device) if isinstance(device, str) else torch.device(device)
        self.settings, self.corpus, self.variants = settings, corpus, variants
        self.key = job_key(variants, corpus, settings)   # a value: caches key by it, not the job
        self.window = window_of(variants, settings)
        configs = job_configs(variants, settings)
        tokenizer = self.tokenizer = get_tokenizer()
        self.copying = corpus if copying else None
        self.caption = corpus.caption(self.window, configs[0], settings) if copying else ""
        if copying:
            self.train_loader, self.val_loader = corpus.loaders(self.window, settings.batch_size)
            self.batches_per_epoch = len(self.train_loader)
        else:
            self._text_loaders(corpus, settings, tokenizer)
        self.runs = [VariantRun(v, c, settings, self.device) for v, c in zip(variants, configs)]
        self.grad_every = max(1, math.ceil(settings.steps / GRAD_NORM_POINTS))

        self.global_step = -1        # the book's counter: the last step done
        self.epoch = 0
        self.seconds = 0.0
        self.status, self.message = "ready", ""
        self.released = False        # the models given up for another job (release_models)
        self.ended_at = None         # when it finished, for the lab's choice of what to free
        self._new_locks()
        # Where it trains: the CPU, or a GPU lent per call in chunks of steps (ZeroGPU).
        self.placement = placed(configs, settings, self.window, self.device)
        self.ran = None              # where the last steps ran (offload.Ran)

    def _new_locks(self):
        self._view_lock = threading.Lock()   # records <-> view()
        self._step_lock = threading.RLock()  # a step at a time (a GPU chunk's CPU fallback too)
        self._stop, self._thread = threading.Event(), None

    # A copy for a GPU call (gpu_chunks): the job's state, without its locks and thread.
    def __getstate__(self):
        return {k: v for k, v in self.__dict__.items()
                if k not in ("_view_lock", "_step_lock", "_stop", "_thread", "payer")}

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._new_locks()

    def _train_steps(self, n: int) -> None:
        while n > 0 and not (self.done or self._stop.is_set()):   # Stop: between two steps
            self._one_step()
            n -= 1

    def _text_loaders(self, corpus, settings, tokenizer):
        self.batches_per_epoch, _ = check_training_text(
            corpus.text, self.window, self.window, settings.batch_size, TRAIN_RATIO, tokenizer)
        train_data, val_data = split_text(corpus.text, TRAIN_RATIO)
        # The book's loaders (section 5.1.3): stride = max_length, shuffled training batches.
        self.train_loader = create_dataloader_v1(
            train_data, batch_size=settings.batch_size, max_length=self.window,
            stride=self.window, drop_last=True, shuffle=True, num_workers=0, tokenizer=tokenizer)
        self.val_loader = create_dataloader_v1(
            val_data, batch_size=settings.batch_size, max_length=self.window,
            stride=self.window, drop_last=False, shuffle=False, num_workers=0,
            tokenizer=tokenizer)

    # -- the loop ----------------------------------------------------------------------------
    @property
    def steps_done(self) -> int:
        return self.global_step + 1

    @property
    def done(self) -> bool:
        return self.steps_done >= self.settings.steps or all(
            r.diverged_at is not None for r in self.runs)

    def advance(self, n: int = 1) -> TrainingJob:
        """Train up to ``n`` more steps in this thread (fewer if the job ends)."""
        n = as_count("n", n, 0)
        if self._thread is not None and self._thread.is_alive():
            raise ExplorerError("job.busy_in_the_background", "This job is training in the "
                                "background; stop it first.")
        if self.status in ("cancelled", "failed"):
            raise ExplorerError("job.was_ended", "This job was {status}; start a new one.",
                                status=_STATUS_WORDS[self.status])
        self._stop.clear()
        self._train_steps(n)
        if self.done:
            self._finish()
        elif self.steps_done:
            with self._view_lock:
                self.status = "stopped"
        return self

    def _one_step(self):
        with self._step_lock, one_thread():
            started = time.perf_counter()
            batch = None
            while batch is None:
                batch = self._next_batch()
                if batch is None:     # end of an epoch: the book's sample, then a new shuffle
                    self.epoch += 1
                    self._samples()
            input_batch, target_batch = batch
            step = self.global_step + 1
            record_grads = step % self.grad_every == 0
            for run in self.runs:
                if run.diverged_at is None:
                    self._train_step(run, step, input_batch, target_batch, record_grads)
            self.global_step = step
            # Optional evaluation step (the book's): also at the last step, for the table.
            if step % self.settings.eval_freq == 0 or step + 1 == self.settings.steps:
                self._evaluate(step)
            self.seconds += time.perf_counter() - started

    def _next_batch(self):
        """The next training batch, or None at the end of an epoch. Every variant iterates the
        loader in its own stream, as the book's loop would for it alone (so that its dropout
        masks are the book's); all train on the first variant's batches."""
        batches = []
        for run in self._live_runs(lead=True):
            with run.rng.active(self.device):
                if run.batches is None:
                    run.batches = iter(self.train_loader)
                batches.append(next(run.batches, None))
                if batches[-1] is None:
                    run.batches = None
        return batches[0]

    def _live_runs(self, lead=False):
        """The variants still training (and the first one, which draws the data, if
        ``lead``)."""
        return [r for i, r in enumerate(self.runs)
                if r.diverged_at is None or (lead and i == 0)]

    def _train_step(self, run: VariantRun, step, input_batch, target_batch, record_grads):
        started = time.perf_counter()
        for group in run.optimizer.param_groups:
            group["lr"] = self.settings.lr_at(step)
        with run.rng.active(self.device):   # its dropout masks, drawn as the book's model does
            run.optimizer.zero_grad()
            loss = calc_loss_batch(input_batch, target_batch, run.model, self.device)
            loss.backward()
        loss_value = loss.item()
        norms = block_grad_norms(run.model) if record_grads else None
        bad = not math.isfinite(loss_value) or (norms is not None and not all(
            math.isfinite(x) for x in norms))
        if not bad:
            run.optimizer.step()
        run.seconds += time.perf_counter() - started
        with self._view_lock:
            run.steps += 1
            run.tokens_seen += input_batch.numel()
            run.train_loss_now = loss_value
            if norms is not None:
                run.grad_steps.append(step)
                run.grad_norms.append(norms)
            if bad:
                run.diverged_at = step
                run.note = Text("job.diverged_note", "diverged at step {step}: the loss became "
                                "{loss} (NaN or infinite); training of this variant stopped "
                                "there. A smaller learning rate or a warm-up may help.",
                                step=step, loss=loss_value)

    def _evaluate(self, step):
        """The book's ``evaluate_model``: the mean loss of the first eval_iter batches of a
        fresh shuffle of the training data, and of the validation data, for every variant on
        the same batches."""
        drawn = []
        for run in self._live_runs(lead=True):
            with run.rng.active(self.device):  # the book's calc_loss_loader iterates these
                drawn.append((first_batches(self.train_loader, self.settings.eval_iter),
                              first_batches(self.val_loader, self.settings.eval_iter)))
        train_batches, val_batches = drawn[0]
        for run in self._live_runs():
            run.model.eval()
            with torch.no_grad():
                train_loss = mean_loss(train_batches, run.model, self.device)
                val_loss = mean_loss(val_batches, run.model, self.device)
                measured = measure(run.model, val_batches, self.device) if self.copying \
                    else None
            run.model.train()
            with self._view_lock:
                if not (math.isfinite(train_loss) and math.isfinite(val_loss)):
                    run.diverged_at = step   # the curves keep finite values only
                    run.note = Text("job.diverged_after_update_note", "diverged at step "
                                    "{step}: after its update the loss became NaN or infinite; "
                                    "training of this variant stopped there. A smaller "
                                    "learning rate or a warm-up may help.", step=step)
                    continue
                run.eval_steps.append(step)
                run.eval_tokens.append(run.tokens_seen)
                run.train_losses.append(train_loss)
                run.val_losses.append(val_loss)
                if measured is not None:
                    run.record_copying(*measured)

    def _samples(self):
        for run in self._live_runs():
            text = greedy_copy(run.model, self.copying, self.tokenizer) if self.copying else \
                greedy_sample(run.model, self.tokenizer, self.settings.start_context,
                              self.settings.sample_tokens)
            with self._view_lock:
                run.sample, run.sample_step = text, self.global_step

    def _finish(self):
        with self._step_lock:
            if self.status == "finished":
                return
            if any(r.sample_step != self.global_step for r in self.runs
                   if r.diverged_at is None):
                self._samples()
            self._free_training_state(optimizers=True)   # no more steps: models only
            with self._view_lock:
                self.status, self.ended_at = "finished", time.monotonic()
                diverged = [r.label for r in self.runs if r.diverged_at is not None]
                self.message = (
                    Text("job.finished_with_diverged", "Trained {steps} steps on {corpus}. "
                         "Diverged: {variants}.", steps=self.steps_done, corpus=self.corpus.name,
                         variants=", ".join(diverged)) if diverged else
                    Text("job.finished", "Trained {steps} steps on {corpus}.",
                         steps=self.steps_done, corpus=self.corpus.name))

    # -- the worker thread -------------------------------------------------------------------
    def start(self) -> TrainingJob:
        """Train in a worker thread until the job is done or stopped (also: Continue)."""
        with self._view_lock:
            if self._thread is not None and self._thread.is_alive():
                raise ExplorerError("job.already_training", "This job is already training.")
            if self.status in ("finished", "cancelled", "failed"):
                raise ExplorerError("job.ended", "This job is {status}; start a new one.",
                                    status=_STATUS_WORDS[self.status])
            self._stop.clear()
            self.status, self.message = "running", ""
            # In the context of the request that started it: a GPU call is that visitor's.
            self._thread = threading.Thread(target=contextvars.copy_context().run,
                                            args=(self._work,), daemon=True,
                                            name="gpt-explorer-training")
            self._thread.start()
        return self

    resume = start

    def stop(self) -> TrainingJob:
        """Stop after the current step; ``resume`` continues exactly where it stopped."""
        self._stop.set()
        self.wait()
        return self

    def cancel(self) -> TrainingJob:
        """Stop for good and let go of the models (closing the tab calls this)."""
        self._stop.set()
        self.wait()
        with self._step_lock, self._view_lock:
            if self.status not in ("finished", "failed"):
                self.status = "cancelled"
                self.message = Text("job.cancelled", "Training was cancelled.")
                self.ended_at = time.monotonic()
            self._free_training_state(optimizers=True)
        return self

    def _free_training_state(self, optimizers: bool) -> None:
        """Between steps: the gradients (the next step makes new ones) and, when no step will
        follow, the optimizers' state too, so that a job that is not training holds only what
        it still needs (``held_bytes``)."""
        for run in self.runs:
            for p in run.model.parameters() if run.model is not None else ():
                p.grad = None
            if optimizers:
                run.optimizer = None

    def release_models(self) -> None:
        """Let go of the trained models of a finished job (to make room for another job): its
        curves, table and samples stay; Use and Export then say to train again."""
        with self._step_lock, self._view_lock:
            if self.status in ("running", "ready", "stopped"):
                raise RuntimeError("Only a job that has ended can give up its models.")
            for run in self.runs:
                run.model = None
            self.released = True

    def held_bytes(self) -> int:
        """The memory this job holds now: while it trains (or can continue) its whole
        ``job_bytes``; once ended, its models' weights only (for Use and Export); nothing once
        its models are released."""
        if self.released:
            return 0
        if self.status in ("ready", "running") or self.running:
            return job_bytes(self.variants, self.settings)
        held = 0
        for run in self.runs:
            weights = 4 * sum(p.numel() for p in run.model.parameters())
            grads = any(p.grad is not None for p in run.model.parameters())
            moments = run.optimizer is not None and bool(run.optimizer.state)   # AdamW's two
            held += weights * (1 + grads + 2 * moments)
        return held

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the worker thread to end; True if it has."""
        thread = self._thread
        if thread is not None:
            thread.join(timeout)
            return not thread.is_alive()
        return True

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def _work(self):
        try:
            while not self._stop.is_set() and not self.done:
                if self.placement.where == "gpu":
                    train_on_gpu(self)
                else:
                    self._one_step()
            if self.done:
                self._finish()
            else:
                self._free_training_state(optimizers=False)   # Continue needs AdamW's state
                with self._view_lock:
                    self.status = "stopped"
                    self.message = Text("job.stopped", "Stopped after {steps} steps; Continue "
                                        "resumes.", steps=self.steps_done)
        except Exception as e:   # noqa: BLE001 - a failed job reports, the server lives on
            with self._view_lock:
                self.status, self.ended_at = "failed", time.monotonic()
                self.message = Text("job.failed", "Training failed at step {step}: {kind}: "
                                    "{error}", step=self.steps_done + 1, kind=type(e).__name__,
                                    error=e.message if isinstance(e, ExplorerError) else str(e))

    # -- plain data and models ---------------------------------------------------------------
    def view(self) -> JobView:
        with self._view_lock:
            per_step = self.settings.batch_size * self.window
            return JobView(
                status=self.status, message=self.message, step=self.steps_done,
                total_steps=self.settings.steps, tokens_seen=self.steps_done * per_step,
                total_tokens=self.settings.steps * per_step, epoch=self.epoch,
                batches_per_epoch=self.batches_per_epoch, corpus=self.corpus.name,
                seconds=self.seconds, runs=[r.view() for r in self.runs],
                caption=self.caption, where=self.ran.note() if self.ran is not None else None)

    def weights_source(self, index: int = 0) -> Text:
        steps = self._run(index).steps
        if steps == 1:
            return Text("job.trained_one_step", "trained {steps} step on {corpus}", steps=steps,
                        corpus=self.corpus.name)
        return Text("job.trained_steps", "trained {steps} steps on {corpus}", steps=steps,
                    corpus=self.corpus.name)

    def trained_model(self, index: int = 0) -> TrainedModel:
        """A copy of variant ``index`` as it is now (between two steps), in eval mode with
        gradients off: trace it, generate from it, save its state_dict."""
        run = self._run(index)
        if self.released:
            raise ExplorerError("job.models_released", "This finished job's models were let go "
                                "to make room for another session's training; its curves stay. "
                                "Train again to use or export a variant.")
        if run.diverged_at is not None:
            raise ExplorerError("job.variant_diverged", "Variant '{variant}' diverged at step "
                                "{step}: its weights give NaN or infinite outputs, so there is "
                                "nothing to look at or generate from. Choose another variant, or "
                                "train again with a smaller learning rate or a warm-up.",
                                variant=run.label, step=run.diverged_at)
        with self._step_lock:
            model = copy.deepcopy(run.model)
            source = self.weights_source(index)
        model.eval()
        model.requires_grad_(False)
        for p in model.parameters():
            p.grad = None
        return TrainedModel(model, source, run.label, run.steps)

    def _run(self, index) -> VariantRun:
        if isinstance(index, bool) or not isinstance(index, int) \
                or not 0 <= index < len(self.runs):
            raise ExplorerError("job.no_such_variant", "There are {n} variants; choose one from "
                                "0 to {last} (got {index!r}).", n=len(self.runs),
                                last=len(self.runs) - 1, index=index)
        return self.runs[index]

