"""Tab 6, Train: chapter 5's training of two to four variants side by side, watched live,
stopped and continued; a trained variant then becomes model A ("Use this model") or a file.
The jobs run in the server's ``TrainingLab``; the page streams a job's view (``train_live``)."""
from __future__ import annotations

import os
import tempfile

import gradio as gr

from ...book.config import PRESETS
from ...book.errors import ExplorerError, Message, Text
from ...runtime.export import export_model
from ...runtime.sources import WeightsSource
from ...runtime.training.copying_task import (COPYING_MODEL, CopyingTask, comparison_for,
                                              repeated_text)
from ...runtime.training.replay import replay_views
from ...runtime.training.setup import (DEFAULT_CONTEXT, DEFAULT_EVAL_FREQ, DEFAULT_EVAL_ITER,
                                       DEFAULT_LR, DEFAULT_PRESET, DEFAULT_STEPS,
                                       DEFAULT_VARIANTS, MAX_VARIANTS, VARIANT_CHOICES,
                                       VARIANT_LABELS,
                                       TrainingSettings, corpus_from_file, corpus_from_text,
                                       book_settings, default_corpus, default_settings,
                                       make_variants)
from ...runtime.training.views import trained_caption
from .. import comparison, refresh, shared
from ..handlers import Pause, handler
from ..i18n import label, t
from ..textbox import Textbox
from ..inputs import as_choice, as_choices, as_int, as_number
from ..live_figure import live_figure
from ..plots.training import (grad_norm_figure, loss_figure, progress_markdown, table_rows,
                              variant_name)
from ..prompts import BOXES, set_by_task
from ..session import Made, Model
from ..shared import CACHE
from .train_live import LIVE, choice_of, drawing_of, job_view, live, live_of, watch

TITLE = ("tab.train", "6 · Train")
ID = "train"
COPYING = "copying task (induction heads)"     # its own model, variants and settings
DATA_CHOICES = {"the default story": ("train.data_default", "the default story"),
                "pasted text": ("train.data_pasted", "pasted text"),
                "an uploaded .txt": ("train.data_upload", "an uploaded .txt"),
                COPYING: ("train.data_copying", "copying task (induction heads)")}
PRESET_CHOICES = [name for name in PRESETS if name.startswith("teach-")]
# Replay: the whole replay's length (seconds, by the speed chosen), one frame every
# REPLAY_FRAME_SECONDS (each frame redraws the figures).
REPLAY_SPEEDS = {"10 s": 10, "30 s": 30, "60 s": 60}
REPLAY_FRAME_SECONDS = 2.0
_BOOK = TrainingSettings()
# A number box wide enough for five digits (10000 steps) in lecture mode's 20 px type: at 90 px
# "1000" read "100" (issue 47, item 5).
NUMBER_WIDTH = 100


def _owner(request, session=None) -> str:
    """The session's hash: the lab's name for its job (kept in the session for render)."""
    if request is None or not getattr(request, "session_hash", None):
        raise ExplorerError("train.no_session", "This request has no session; open the page "
                                                "(or a gradio_client Client) to train.")
    if session is not None:      # (a Session: the handler gives one to those that take it)
        session.session_hash = request.session_hash
    return request.session_hash


def corpus_of(data, text, upload):
    data = as_choice(data, Message("field.data", "data"), DATA_CHOICES)
    if data == "the default story":
        return default_corpus()
    if data == "pasted text":
        return corpus_from_text(text)
    if data == COPYING:
        return CopyingTask()
    if text is not None and not isinstance(text, str):
        raise ExplorerError("train.text_not_text", "The pasted text must be text.")
    if upload is None or upload == "":
        raise ExplorerError("train.no_upload", "No file uploaded: upload a .txt file, or choose "
                                               "the default story or pasted text.")
    path = upload if isinstance(upload, str) else getattr(upload, "path", None) or (
        upload.get("path") if isinstance(upload, dict) else None)
    if not isinstance(path, str) or not os.path.isfile(path):
        raise ExplorerError("train.upload_gone", "The uploaded file could not be found; upload "
                                                 "it again.")
    return corpus_from_file(path)


def settings_of(steps, batch_size, context_length, lr, warmup_steps, eval_freq=None,
                eval_iter=None):
    if lr is None:
        raise ExplorerError("train.lr_empty", "lr is empty: enter a number; the book uses "
                                              "{lr}.", lr=_BOOK.lr)
    evaluation = {name: as_int(value, field) for name, value, field in (
        ("eval_freq", eval_freq, Message("field.eval_freq", "evaluate every")),
        ("eval_iter", eval_iter, Message("field.eval_iter", "evaluation batches")))
        if value is not None}
    return default_settings(**evaluation, steps=as_int(steps, Message("field.steps", "steps")),
                            batch_size=as_int(batch_size, Message("field.batch", "batch size")),
                            context_length=as_int(context_length,
                                                  Message("field.context", "context")),
                            lr=as_number(lr, Message("field.lr", "lr")),
                            warmup_steps=as_int(warmup_steps,
                                                Message("field.warmup", "warm-up steps")))


def variants_of(variants, preset, data=None):
    """The chosen variants, on the chosen preset (the copying task: on the task's model)."""
    variants = as_choices(variants, Message("field.variants", "variants"), VARIANT_CHOICES)
    if not 2 <= len(variants) <= MAX_VARIANTS:
        raise ExplorerError("train.variant_count", "Choose two to {most} variants to compare "
                            "(got {n}).", most=MAX_VARIANTS, n=len(variants))
    if data == COPYING:
        return make_variants(variants, COPYING_MODEL)
    return make_variants(variants, as_choice(preset, Message("field.model", "model"),
                                             PRESET_CHOICES))


@handler(outputs=("train_variants", "train_preset", "train_steps", "train_batch",
                  "train_context", "train_lr", "train_warmup", "train_eval_freq",
                  "train_eval_iter"))
def data_chosen(data, variants):
    """The form for the data chosen (``comparison_for``): the copying task's own comparison
    and settings, and no model picker; leaving it, the default comparison's."""
    preset = {"train_preset": gr.update(visible=data != COPYING)}
    comparison = comparison_for(data == COPYING, variants)
    if comparison is None:
        return preset
    chosen, settings = comparison
    return {**preset, "train_variants": chosen, "train_steps": settings.steps,
            "train_batch": settings.batch_size, "train_context": settings.context_length,
            "train_lr": settings.lr, "train_warmup": settings.warmup_steps,
            "train_eval_freq": settings.eval_freq, "train_eval_iter": settings.eval_iter}


@handler(outputs=LIVE, pauses=True)
def train_start(data, text, upload, variants, preset, steps, batch_size, context_length, lr,
                warmup_steps, eval_freq=None, eval_iter=None, session=None,
                request: gr.Request = None):
    """/train_start (streams): start this session's job (the same as another session's when
    it asks for the same) and stream its view."""
    owner = _owner(request, session)
    chosen = variants_of(variants, preset, data)
    settings = settings_of(steps, batch_size, context_length, lr, warmup_steps, eval_freq,
                           eval_iter)
    shared.LAB.check(owner, chosen, settings)     # the limits, before the text is read
    job = shared.LAB.start(owner, chosen, corpus_of(data, text, upload), settings)
    note = (" " + t("train.from_cache", "This job had finished already (the shared cache): "
                                        "its curves are shown whole. **Replay** draws them "
                                        "again, step by step.") if job.done else "")
    yield from watch(job, owner, note=note, pausing=True)


@handler(outputs=("train_batch", "train_lr", "train_warmup", "train_eval_freq",
                  "train_eval_iter"))
def the_books_settings():
    """The book's loop settings (section 5.2) in the form; model, steps and window as chosen."""
    book = book_settings()
    return {"train_batch": book.batch_size, "train_lr": book.lr, "train_warmup": 0,
            "train_eval_freq": book.eval_freq, "train_eval_iter": book.eval_iter}


@handler(outputs=LIVE)
def train_stop(session=None, request: gr.Request = None):
    """/train_stop: this session stops watching; the job stops after its step unless other
    sessions watch it."""
    owner = _owner(request, session)
    return live(*job_view(shared.LAB.stop(owner), owner))


@handler(outputs=LIVE, pauses=True)
def train_continue(session=None, request: gr.Request = None):
    """/train_continue (streams)."""
    owner = _owner(request, session)
    yield from watch(shared.LAB.resume(owner), owner, pausing=True)


@handler(outputs=LIVE)
def train_view(session=None, request: gr.Request = None):
    """/train_view: this session's job as it is now."""
    owner = _owner(request, session)
    job = shared.LAB.job(owner)
    return live(None) if job is None else live(*job_view(job, owner))


@handler(outputs=(*LIVE, "train_replay_note"), pauses=True)
def train_replay(speed, session=None, request: gr.Request = None):
    """/train_replay (streams): this session's finished job drawn again from step 0 over the
    time chosen. With no finished job, a note beside the button says so (a toast would cover
    Stop and Continue, and each live output would show a red "Error")."""
    owner = _owner(request, session)
    seconds = REPLAY_SPEEDS[as_choice(speed, Message("field.replay_speed", "replay speed"),
                                      REPLAY_SPEEDS)]
    job = shared.LAB.job(owner)
    if job is None or not job.done:
        yield {"train_replay_note": t("train.replay_unfinished", "Replay draws a finished job "
                                      "again: press Train and let it finish first (a job "
                                      "another session finished counts too).")}
        return
    yield {"train_replay_note": ""}
    whole = job.view()
    for view in replay_views(whole, max(1, round(seconds / REPLAY_FRAME_SECONDS))):
        yield live_of(job, ("replay", *drawing_of(view, "")), view, "")
        if view is not whole:
            yield Pause(REPLAY_FRAME_SECONDS)   # served, the wait holds no thread


def _trained(choice, owner):
    job = shared.LAB.own_job(owner)
    labels = [v.label for v in job.variants]
    choice = as_choice(choice, Message("field.trained", "trained variant"), labels)
    if job.view().step == 0:
        raise ExplorerError("train.nothing_yet", "Nothing trained yet: wait for the first "
                                                 "steps, then use the model.")
    return job.trained_model(labels.index(choice)), job


PROMPTS = BOXES      # (drawn by prompts.render; declared here too: the API's outputs)


def _views_but_prompts() -> tuple[str, ...]:
    return tuple(n for n in refresh.all_outputs() if n not in PROMPTS)


@handler(outputs=("session", *refresh.FIRST, _views_but_prompts, *PROMPTS))
def train_use(choice, session, request: gr.Request):
    """/train_use: the chosen trained variant becomes model A. A model of the copying task
    reads only the task's words: the session's prompt becomes a repeated sequence of them."""
    owner = _owner(request, session)
    trained, job = _trained(choice, owner)
    caption = trained_caption(trained, job.corpus.name)
    key = CACHE.key(trained.model.cfg, device="cpu", dtype="float32",
                    source=WeightsSource.trained(Text.of(caption)))
    comparison.check_beside(session, key)        # beside model B: both must fit
    CACHE.hold(owner, key, trained.model)
    session.with_model_a(Model(key, Made("trained",
                                         VARIANT_LABELS.get(trained.label, trained.label),
                                         caption=caption)))
    if isinstance(job.corpus, CopyingTask):
        # the session's prompt: the task's (another model A brings back the one of now)
        set_by_task(session, repeated_text(job.corpus))
    return {"session": session, **refresh.render_all(session)}


@handler(outputs=("train_export_file",))
def train_export(choice, session=None, request: gr.Request = None):
    """/train_export: the chosen trained variant as model.safetensors + config.json."""
    trained, job = _trained(choice, _owner(request))
    folder = tempfile.mkdtemp(prefix="gpt_explorer_")   # ours; never a path from user text
    files = export_model(trained.model, folder, source=WeightsSource.trained(
        Text.of(trained_caption(trained, job.corpus.name))))
    return {"train_export_file": [str(f) for f in files]}


@handler(outputs=("train_export_file",))
def files_shown():
    return {"train_export_file": gr.update(visible=True)}


def variant_choices():
    """The variants named in the page's language (values: English names)."""
    return [(variant_name(v), v) for v in VARIANT_CHOICES]


def data_choices():
    return [(t(*name), value) for value, name in DATA_CHOICES.items()]


@refresh.renders("train_variants", "train_data", *LIVE)
def render(session) -> dict:
    """The choices named in the page's language; the session's job, once an event has told the
    session its hash."""
    out = {"train_variants": gr.update(choices=variant_choices()),
           "train_data": gr.update(choices=data_choices())}
    if session.session_hash is None:
        return out
    job = shared.LAB.job(session.session_hash)
    if job is None:
        return {**out, **live(None)}
    view, sharing = job_view(job, session.session_hash)
    return {**out, **live_of(job, drawing_of(view, sharing), view, sharing),
            "train_choice": choice_of(view, keep=True)}


def release(session_hash):
    """The page closed: the session's job cancelled, its trained model let go."""
    shared.LAB.cancel(session_hash)
    CACHE.release(session_hash)


# ---------------------------------------------------------------------------------------------
def create(page):
    with gr.Row(elem_id="train_choose"):
        page.add(gr.CheckboxGroup(variant_choices(), value=list(DEFAULT_VARIANTS),
                                  label=label("train.variants", "Variants (two to 4)"),
                                  scale=3, elem_id="train_variants"))
        page.add(gr.Dropdown(PRESET_CHOICES, value=DEFAULT_PRESET,
                             label=label("train.model", "model"), scale=1, min_width=150,
                             elem_id="train_preset"))
        page.add(gr.Radio(data_choices(), value="the default story",
                          label=label("train.data", "data"), scale=1, min_width=180,
                          elem_id="train_data"))
    with gr.Row(equal_height=True, elem_id="train_settings"):
        for name, text_id, text, value in (
                ("train_steps", "train.steps", "steps", DEFAULT_STEPS),
                ("train_batch", "train.batch", "batch size", _BOOK.batch_size),
                ("train_context", "train.context", "context", DEFAULT_CONTEXT),
                ("train_warmup", "train.warmup", "warm-up", _BOOK.warmup_steps)):
            page.add(gr.Number(value, precision=0, label=label(text_id, text),
                               min_width=NUMBER_WIDTH, elem_id=name))
        # (wide enough for the book's 0.0004 whole, at lecture mode's type too)
        page.add(gr.Number(DEFAULT_LR, label="lr", min_width=120, elem_id="train_lr"))
        page.add(gr.Number(DEFAULT_EVAL_FREQ, precision=0, min_width=NUMBER_WIDTH,
                           elem_id="train_eval_freq",
                           label=label("train.eval_freq", "evaluate every")))
        page.add(gr.Number(DEFAULT_EVAL_ITER, precision=0, min_width=NUMBER_WIDTH,
                           elem_id="train_eval_iter",
                           label=label("train.eval_iter", "evaluation batches")))
        # (the buttons no wider than their words: the rest of the row is the number boxes')
        for name, text_id, text in (("train_btn", "train.train", "Train"),
                                    ("train_stop_btn", "train.stop", "Stop"),
                                    ("train_continue_btn", "train.continue", "Continue"),
                                    ("train_book_btn", "train.book", "The book's settings")):
            page.add(gr.Button(label(text_id, text), min_width=90, scale=0, elem_id=name,
                               variant="primary" if name == "train_btn" else "secondary"))
    with gr.Accordion(label("train.own_text", "Your own text (paste it, or upload a .txt) — "
                            "then choose it under data"), open=False, elem_id="train_own_text"):
        with gr.Row():
            page.add(Textbox(label=label("train.text", "pasted text (up to 1 MB)"), lines=4,
                                scale=2, elem_id="train_text"))
            page.add(gr.File(label=label("train.upload", "a .txt file"), file_types=[".txt"],
                             type="filepath", height=120, scale=1, elem_id="train_upload"))
    page.add(gr.Markdown(progress_markdown(None), elem_id="train_progress"))
    with gr.Row(equal_height=True, elem_id="train_replay_row"):
        page.add(gr.Button(label("train.replay", "Replay a finished job"), min_width=260,
                           scale=0, elem_id="train_replay_btn"))
        page.add(gr.Radio(list(REPLAY_SPEEDS), value="30 s", scale=1, min_width=300,
                          label=label("train.replay_speed", "replay in"), container=False,
                          elem_id="train_replay_speed"))
        page.add(gr.Markdown(elem_id="train_replay_note"))
    with gr.Row(elem_id="train_plots"):
        page.add(live_figure(loss_figure(None), show_label=False,
                             label=label("train.loss", "Loss"), elem_id="train_loss_plot"))
        page.add(live_figure(grad_norm_figure(None), show_label=False,
                             label=label("train.grad", "Gradient norm per block"),
                             elem_id="train_grad_plot"))
    page.add(gr.Dataframe(table_rows(None), interactive=False,
                          label=label("train.table", "Variants"), elem_id="train_table"))
    page.add(gr.Markdown(elem_id="train_samples"))
    with gr.Row(equal_height=True):
        page.add(gr.Dropdown([], label=label("train.choice", "trained variant"),
                             elem_id="train_choice"))
        page.add(gr.Button(label("train.use", "Use this model (tabs 2–5)"), variant="primary",
                           elem_id="train_use_btn"))
        page.add(gr.Button(label("train.export", "Export it (model.safetensors + config.json)"),
                           elem_id="train_export_btn"))
    page.add(gr.File(label=label("train.exported", "exported files"), file_count="multiple",
                     visible=False, elem_id="train_export_file"))


def wire(page):
    settings = ["train_data", "train_text", "train_upload", "train_variants", "train_preset",
                "train_steps", "train_batch", "train_context", "train_lr", "train_warmup",
                "train_eval_freq", "train_eval_iter"]
    page.on("train_book_btn.click", the_books_settings, [], api_visibility="private",
            show_progress="hidden")
    page.on("train_data.input", data_chosen, ["train_data", "train_variants"],
            api_visibility="private", show_progress="hidden")
    # The streams only watch (the lab limits how many jobs train): no queue limit of their own.
    page.on("train_btn.click", train_start, [*settings, "session"], api_name="train_start",
            concurrency_limit=None, show_progress="minimal")
    page.on("train_stop_btn.click", train_stop, ["session"], api_name="train_stop",
            concurrency_limit=None, show_progress="hidden")
    page.on("train_continue_btn.click", train_continue, ["session"], api_name="train_continue",
            concurrency_limit=None, show_progress="minimal")
    page.on(page["train_tab"].select, train_view, ["session"], api_name="train_view",
            show_progress="hidden")
    page.on("train_replay_btn.click", train_replay, ["train_replay_speed", "session"],
            api_name="train_replay", concurrency_limit=None, show_progress="minimal")
    exported = page.on("train_export_btn.click", train_export, ["train_choice", "session"],
                       api_name="train_export")
    page.then(exported, files_shown, [], api_visibility="private", show_progress="hidden")
    page.on("train_use_btn.click", train_use, ["train_choice", "session"], api_name="train_use",
            show_progress_on=[page["status"]])
