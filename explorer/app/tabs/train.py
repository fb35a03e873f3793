"""Tab 6, Train: chapter 5's training of two to four of the chapter's variants side by side,
watched live (loss curves, a table, per-block gradient norms, samples), stopped and continued;
a trained variant then becomes the session's model ("Use this model") or a file.

The training itself runs in the server's one ``TrainingLab`` (a worker thread per job, one job
per session, at most N at once); the page only streams ``job.view()`` while the job runs."""
from __future__ import annotations

import os
import tempfile
import time
from types import SimpleNamespace

import gradio as gr

from ...book.config import PRESETS, count_parameters
from ...runtime.export import export_model
from ...runtime.sources import WeightsSource
from ...runtime.training_lab import TrainingLab
from ...runtime.training_setup import (DEFAULT_CONTEXT, DEFAULT_PRESET, DEFAULT_STEPS,
                                       DEFAULT_VARIANTS, MAX_CORPUS_BYTES, MAX_VARIANTS,
                                       VARIANT_CHOICES, TrainingSettings, corpus_from_file,
                                       corpus_from_text, default_corpus, default_settings,
                                       make_variants)
from .. import gpu, i18n, pinning
from ..i18n import label, t
from ..plots.training import (grad_norm_figure, loss_figure, progress_markdown,
                              samples_markdown, table_rows)
from ..shared import (CACHE, as_choice, as_choices, as_int, as_number, friendly,
                      layer_picker_update, status_line)
from .attention import head_choices
from .inside import probe_choices

# The server's training jobs (limits: GPT_EXPLORER_TRAIN_JOBS, GPT_EXPLORER_TRAIN_MAX_PARAM_STEPS,
# GPT_EXPLORER_MEMORY_MB).
LAB = TrainingLab()
DATA_CHOICES = ["the default story", "pasted text", "an uploaded .txt"]
PRESET_CHOICES = [name for name in PRESETS if name.startswith("teach-")]
POLL_SECONDS = 1.0      # how often the live view is sent while a job trains
_BOOK = TrainingSettings()


def _session(request) -> str:
    if request is None or not getattr(request, "session_hash", None):
        raise gr.Error(t("This request has no session; open the page (or a gradio_client "
                         "Client) to train."))
    return request.session_hash


def corpus_of(data, text, upload):
    data = as_choice(data, "data", DATA_CHOICES)
    if data == DATA_CHOICES[0]:
        return default_corpus()
    if data == DATA_CHOICES[1]:
        return corpus_from_text(text)
    if text is not None and not isinstance(text, str):
        raise gr.Error(t("The pasted text must be text."))
    if upload is None or upload == "":
        raise gr.Error(t("No file uploaded: upload a .txt file, or choose the default story or "
                         "pasted text."))
    path = upload if isinstance(upload, str) else getattr(upload, "path", None) or (
        upload.get("path") if isinstance(upload, dict) else None)
    if not isinstance(path, str) or not os.path.isfile(path):
        raise gr.Error(t("The uploaded file could not be found; upload it again."))
    return corpus_from_file(path)


def settings_of(steps, batch_size, context_length, lr, warmup_steps):
    if lr is None:
        raise gr.Error(t("lr is empty: enter a number; the book uses {lr}.", lr=_BOOK.lr))
    return default_settings(steps=as_int(steps, "steps"),
                            batch_size=as_int(batch_size, "batch size"),
                            context_length=as_int(context_length, "context"),
                            lr=as_number(lr, "lr"),
                            warmup_steps=as_int(warmup_steps, "warm-up steps"))


def variants_of(variants, preset):
    variants = as_choices(variants, "variants", VARIANT_CHOICES)
    if not 2 <= len(variants) <= MAX_VARIANTS:
        raise gr.Error(t("Choose two to {most} variants to compare (got {n}).",
                         most=MAX_VARIANTS, n=len(variants)))
    return make_variants(variants, as_choice(preset, "model", PRESET_CHOICES))


def _outputs(view):
    """The live view: progress, loss curves, table, gradient norms, samples, the variant
    choice for Use / Export."""
    labels = [r.label for r in view.runs] if view is not None else []
    return (progress_markdown(view), loss_figure(view), table_rows(view),
            grad_norm_figure(view), samples_markdown(view),
            gr.update(choices=[(t(name), name) for name in labels],
                      value=labels[0] if labels else None))


def _watch(job):
    """Yield the live view while ``job`` trains: once when anything changed, at most every
    POLL_SECONDS; the last yield is the view after the worker ended (stopped, finished...)."""
    last = None
    while True:
        running = job.running
        view = job.view()
        seen = (view.status, view.step, tuple(len(r.eval_steps) for r in view.runs),
                tuple(r.sample_step for r in view.runs))
        if seen != last:
            last = seen
            yield _outputs(view)
        if not running:
            return
        time.sleep(POLL_SECONDS)


def train_seconds(arguments) -> float:
    """A training stream: as long as ZeroGPU allows (the job goes on between calls)."""
    return gpu.MAX_SECONDS


@friendly
@gpu.gpu_work(duration=train_seconds)
def train_start(data, text, upload, variants, preset, steps, batch_size, context_length, lr,
                warmup_steps, request: gr.Request):
    """Start this session's job (replacing a stopped or finished one) and stream its view."""
    session = _session(request)
    chosen = variants_of(variants, preset)
    settings = settings_of(steps, batch_size, context_length, lr, warmup_steps)
    LAB.check(session, chosen, settings)     # the limits, before the text is tokenised
    corpus = corpus_of(data, text, upload)
    job = LAB.start(session, chosen, corpus, settings)
    yield from _watch(job)


@friendly
def train_stop(request: gr.Request):
    """Stop after the current step (Continue resumes exactly there)."""
    return _outputs(LAB.stop(_session(request)).view())


@friendly
@gpu.gpu_work(duration=train_seconds)
def train_continue(request: gr.Request):
    session = _session(request)
    job = LAB.job(session)
    if job is None:
        raise gr.Error(t("This session has no training job: press Train first."))
    if not job.running:
        job = LAB.resume(session)
    yield from _watch(job)


@friendly
def train_view(request: gr.Request):
    """This session's job as it is now (nothing of any other session's)."""
    job = LAB.job(_session(request))
    return _outputs(None if job is None else job.view())


def _trained(choice, session):
    job = LAB.job(session)
    if job is None:
        raise gr.Error(t("This session has no training job: press Train first."))
    labels = [v.label for v in job.variants]
    choice = as_choice(choice, "trained variant", labels)
    if job.view().step == 0:
        raise gr.Error(t("Nothing trained yet: wait for the first steps, then use the model."))
    return job.trained_model(labels.index(choice))


def _use_seconds(arguments) -> float:
    return gpu.MIN_SECONDS


@friendly
@gpu.gpu_work(duration=_use_seconds)
def train_use(choice, state, request: gr.Request):
    """Make the chosen trained variant the session's model: Inside, Attention, Activations
    and Generate then show it."""
    session = _session(request)
    trained = _trained(choice, session)
    cfg = trained.model.cfg
    source = WeightsSource.trained(trained_caption(trained, LAB.job(session).corpus.name))
    key = CACHE.key(cfg, device="cpu", dtype="float32", source=source)
    pinning.check_pair(state, key)        # beside a pinned model: both must fit
    CACHE.hold(session, key, trained.model)
    state = {**pinning.carried(state), "key": key,
             "status": dict(kind="trained", variant=trained.label,
                            source=trained.weights_source)}
    layers = layer_picker_update(cfg)
    heads = gr.update(choices=head_choices(cfg.n_heads), value="mean")
    return (status_line(state), state, layers, layers, layers, heads, *probe_choices(cfg))


@friendly
@gpu.gpu_work(duration=_use_seconds)
def train_export(choice, request: gr.Request):
    """The chosen trained variant as model.safetensors + config.json (the weights export;
    ``load_file`` reads them back)."""
    session = _session(request)
    trained = _trained(choice, session)
    folder = tempfile.mkdtemp(prefix="gpt_explorer_")   # ours; never a path from user text
    files = export_model(trained.model, folder,
                         source=WeightsSource.trained(
                             trained_caption(trained, LAB.job(session).corpus.name)))
    return [str(f) for f in files]


def trained_caption(trained, corpus: str) -> str:
    """Where a trained variant's weights come from, in English (the page translates it)."""
    template = ("trained {steps} step on {corpus} ({variant})" if trained.steps == 1 else
                "trained {steps} steps on {corpus} ({variant})")
    return template.format(steps=trained.steps, corpus=corpus, variant=trained.label)


def variant_choices():
    """The variants and the data to train on, named by the server in the page's language
    (their values are English names that the browser must not translate)."""
    return [(t(v), v) for v in VARIANT_CHOICES]


def data_choices():
    return [(t(d), d) for d in DATA_CHOICES]


@friendly
def redraw_choices():
    return gr.update(choices=variant_choices()), gr.update(choices=data_choices())


def release(session_hash):
    """The page closed: cancel the session's job and let go of its trained model."""
    LAB.cancel(session_hash)
    CACHE.release(session_hash)


# ---------------------------------------------------------------------------------------------
def create_ui():
    with gr.Tab(label("6 · Train"), id="train") as tab:
        with gr.Row(elem_id="train_choose"):
            variants = gr.CheckboxGroup(variant_choices(),
                                        value=list(DEFAULT_VARIANTS),
                                        label=label(f"Variants (two to {MAX_VARIANTS})"), scale=3,
                                        elem_id="train_variants")
            preset = gr.Dropdown(PRESET_CHOICES, value=DEFAULT_PRESET, label=label("model"),
                                 scale=1, min_width=150, elem_id="train_preset")
            data = gr.Radio(data_choices(), value=DATA_CHOICES[0],
                            label=label("data"), scale=1, min_width=180, elem_id="train_data")
        with gr.Row(equal_height=True, elem_id="train_settings"):
            steps = gr.Number(DEFAULT_STEPS, precision=0, label=label("steps"), min_width=90,
                              elem_id="train_steps")
            batch_size = gr.Number(_BOOK.batch_size, precision=0, label=label("batch size"),
                                   min_width=90, elem_id="train_batch")
            context = gr.Number(DEFAULT_CONTEXT, precision=0, label=label("context"),
                                min_width=90, elem_id="train_context")
            lr = gr.Number(_BOOK.lr, label="lr", min_width=90, elem_id="train_lr")
            warmup = gr.Number(_BOOK.warmup_steps, precision=0, label=label("warm-up"),
                               min_width=90, elem_id="train_warmup")
            start = gr.Button(label("Train"), variant="primary", min_width=90,
                              elem_id="train_btn")
            stop = gr.Button(label("Stop"), min_width=90, elem_id="train_stop_btn")
            resume = gr.Button(label("Continue"), min_width=90, elem_id="train_continue_btn")
        with gr.Accordion(label("Your own text (paste it, or upload a .txt) — then choose it "
                                "under data"), open=False, elem_id="train_own_text"):
            with gr.Row():
                text = gr.Textbox(label=label(f"pasted text (up to {MAX_CORPUS_BYTES / 1e6:.0f} MB)"), lines=4, scale=2,
                                  elem_id="train_text")
                upload = gr.File(label=label("a .txt file"), file_types=[".txt"],
                                 type="filepath", height=120, scale=1, elem_id="train_upload")
        progress = gr.Markdown(progress_markdown(None), elem_id="train_progress")
        with gr.Row(elem_id="train_plots"):
            loss_plot = gr.Plot(loss_figure(None), show_label=False, label=label("Loss"),
                                elem_id="train_loss_plot")
            grad_plot = gr.Plot(grad_norm_figure(None), show_label=False,
                                label=label("Gradient norm per block"), elem_id="train_grad_plot")
        table = gr.Dataframe(table_rows(None), interactive=False, label=label("Variants"),
                             elem_id="train_table")
        samples = gr.Markdown(elem_id="train_samples")
        with gr.Row(equal_height=True):
            choice = gr.Dropdown([], label=label("trained variant"), elem_id="train_choice")
            use = gr.Button(label("Use this model (tabs 2–5)"), variant="primary",
                            elem_id="train_use_btn")
            export = gr.Button(label("Export it (model.safetensors + config.json)"),
                               elem_id="train_export_btn")
        export_file = gr.File(label=label("exported files"), file_count="multiple",
                              visible=False, elem_id="train_export_file")
    return SimpleNamespace(tab=tab, variants=variants, preset=preset, data=data, steps=steps,
                           batch_size=batch_size, context=context, lr=lr, warmup=warmup,
                           text=text, upload=upload, start=start, stop=stop, resume=resume,
                           progress=progress, table=table, samples=samples, choice=choice,
                           use=use, export=export, export_file=export_file, loss_plot=loss_plot,
                           grad_plot=grad_plot)


def create_event_handlers(tab, state, status, view, redrawn, layer_pickers, head_picker,
                          probe_pickers):
    """``view``: the page's language and lecture mode; ``redrawn``: the events after which
    the tab is drawn again. Returns the Use event (the other tabs clear their results after
    it, as after a build)."""
    shown = [tab.progress, tab.loss_plot, tab.table, tab.grad_plot, tab.samples, tab.choice]
    # The streams only watch (the lab limits how many jobs train): no queue limit of their own.
    tab.start.click(train_start, [tab.data, tab.text, tab.upload, tab.variants, tab.preset,
                                  tab.steps, tab.batch_size, tab.context, tab.lr, tab.warmup,
                                  *view],
                    shown, api_name="train_start", concurrency_limit=None,
                    show_progress="minimal")
    tab.stop.click(train_stop, view, shown, api_name="train_stop", concurrency_limit=None,
                   show_progress="hidden")
    tab.resume.click(train_continue, view, shown, api_name="train_continue",
                     concurrency_limit=None, show_progress="minimal")
    tab.tab.select(train_view, view, shown, api_name="train_view", show_progress="hidden")
    for event in redrawn:   # after /train_view: that name is the public event's
        event.then(train_view, view, shown, api_visibility="private", show_progress="hidden")
        event.then(redraw_choices, view, [tab.variants, tab.data], api_visibility="private",
                   show_progress="hidden")
    tab.export.click(train_export, [tab.choice, *view], tab.export_file,
                     api_name="train_export") \
        .success(lambda: gr.update(visible=True), None, tab.export_file,
                 api_visibility="private", show_progress="hidden")
    return tab.use.click(train_use, [tab.choice, state, *view],
                         [status, state, *layer_pickers, head_picker, *probe_pickers],
                         api_name="train_use", show_progress_on=[status])
