"""Tab 1, Build: a preset or every config knob (their widgets, checks and ``/build`` parameters
follow from ``book.knobs``), random weights from a seed, OpenAI's GPT-2 or a checkpoint file;
the model built (or taken from the shared cache), its architecture and parameters, and its
export as model.safetensors + config.json."""
from __future__ import annotations

import contextvars
import html
import inspect
import os
import threading
import time
from dataclasses import dataclass

import gradio as gr

from ...book.config import GPT2_SIZES, PRESETS, GPTConfig, count_parameters, get_preset
from ...book.errors import ExplorerError, Message
from ...book.knobs import KNOBS
from ...book.load_weights import gpt2_config
from ...runtime.build import check_seed, resolve_device
from ...runtime.checkpoints import CONFIG_SUFFIX, WEIGHTS_SUFFIXES, file_source, uploaded
from ...runtime.export import export_model
from ...runtime.hub import pretrained_source
from ...runtime.memory import model_bytes
from ...runtime.server_paths import server_checkpoint, server_paths_allowed
from .. import comparison, refresh
from . import pin, walk
from ..exports import fresh_folder
from ..handlers import handler
from ..page import on_load_js
from ..i18n import label, say, t
from ..textbox import Textbox
from ..inputs import as_choice, as_flag, as_int
from ..plots.labels import percent
from ..plots.model import COMPONENTS, architecture_html, parameter_figure
from ..session import Made, Model, View
from ..shared import CACHE, DEFAULT_CONFIG, DEFAULT_PRESET, BuildRefused, model_a, status_line
from ...probes.compare import NAMES

TITLE = ("tab.build", "1 · Build")
ID = "build"

FIELDS = tuple(knob.field for knob in KNOBS)     # /build takes them in GPTConfig's order
# Where the weights come from (the "weights" choice of the page and of /build).
WEIGHTS_CHOICES = {"random": ("weights.random", "random (seed)"),
                   "pretrained": ("weights.pretrained", "pretrained GPT-2 (OpenAI)"),
                   "file": ("weights.file", "from a file")}
GPT2_SIZE_CHOICES = tuple(size.short for size in GPT2_SIZES.values())   # "small" ... "xl"
DEVICES = ("auto", "cpu", "cuda")   # offered: cuda (last) where there is one (CACHE.key checks)
DTYPES = ("float32", "bfloat16")
BUILD_BUTTON = {"random": ("build.button", "Build the model"),
                "pretrained": ("build.button_pretrained", "Load GPT-2 (downloaded once)"),
                "file": ("build.button_file", "Load the checkpoint")}

# /build's parameters by name (Gradio names an endpoint's parameters after its function's). The
# weights' have defaults: a client that sends only the knobs gets random weights.
WEIGHTS_DEFAULTS = {"weights": "random", "size": "small", "weights_path": None,
                    "weights_upload": None, "session": None}
BUILD_SIGNATURE = inspect.Signature(
    [inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD)
     for name in ("preset", *FIELDS, "seed", "device", "dtype")]
    + [inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=value)
       for name, value in WEIGHTS_DEFAULTS.items()]
    + [inspect.Parameter("progress", inspect.Parameter.POSITIONAL_OR_KEYWORD,
                         default=gr.Progress())])

PRESET = Message("field.preset", "preset")
SEED = Message("field.seed", "seed")


def knob_value(knob, value):
    """A knob's widget value, checked as far as the page knows it (GPTConfig checks the rest)."""
    if knob.kind == "count":
        return as_int(value, knob.label)
    if value is None:
        raise ExplorerError("input.knob_empty", "{name} is empty: enter a value.",
                            name=knob.label)
    return value


def knob_widget(knob, value):
    common = dict(label=label(knob.label.id, knob.label.text), elem_id=knob.field)
    if knob.kind == "count":
        return gr.Number(value, precision=0, **common)
    if knob.kind == "rate":
        return gr.Number(value, **common)
    if knob.kind == "choice":
        return gr.Radio(list(knob.choices), value=value, **common)
    return gr.Checkbox(value, **common)


# ---------------------------------------------------------------------------------------------
# The model's views: diagram, parameters, memory (one model, or two side by side)
def parameter_table(counts_seq) -> dict:
    """Parameters per component (a Dataframe value): one column per model, and with two the
    difference A − B; one model also gets each component's share."""
    parts = [c.breakdown() for c in counts_seq]
    rows = []
    for part in [*dict.fromkeys(p for ps in parts for p in ps), "total"]:
        values = [c.total if part == "total" else p.get(part, 0)
                  for c, p in zip(counts_seq, parts)]
        cells = [(t("params.tied", "0 (tied †)") if part == "output head"
                  and c.output_head_tied else f"{v:,}") for c, v in zip(counts_seq, values)]
        name = t("params.total", "total") if part == "total" else t(*COMPONENTS[part])
        if len(values) == 1:
            share = "100 %" if part == "total" else percent(values[0] / counts_seq[0].total)
            rows.append([name, *cells, share])
        else:
            rows.append([name, *cells, t("params.same", "same") if values[0] == values[1]
                         else f"{values[0] - values[1]:+,}"])
    headers = [t("params.component", "component")]
    headers += ([t("params.parameters", "parameters"), t("params.share", "share")]
                if len(counts_seq) == 1 else [*NAMES, "A − B"])
    return {"headers": headers, "data": rows}


def memory_markdown(session) -> str:
    keys = session.keys
    mb = [model_bytes(k.config, k.dtype) / 1024 ** 2 for k in keys]
    cache = t("build.cache", "Shared cache: {models} model(s), {used:,.0f} of {budget:,.0f} MB.",
              models=len(CACHE), used=CACHE.used_bytes() / 1024 ** 2,
              budget=CACHE.budget_bytes / 1024 ** 2)
    if len(keys) == 2:
        both = mb[0] if keys[0].weights_key == keys[1].weights_key else sum(mb)
        return t("build.memory_pair", "Memory for the weights: A **{a:,.2f} MB** ({dtype_a}), B "
                                      "**{b:,.2f} MB** ({dtype_b}); the two together "
                                      "**{both:,.2f} MB**.", a=mb[0], b=mb[1],
                 dtype_a=keys[0].dtype, dtype_b=keys[1].dtype, both=both) + " " + cache
    key = keys[0]
    counts = count_parameters(key.config)
    if key.config.tie_weights:
        head = t("build.tied", "† Weight tying — {notes}. Total **{n:,}**.",
                 notes="; ".join(say(n) for n in counts.notes()), n=counts.total)
    else:
        head = t("build.totals", "Total **{n:,}**; without the output head **{without:,}** — "
                                 "the book's two figures (section 4.6). GPT-2 reuses the token "
                                 "embedding as its output head (weight tying), which is why "
                                 "the book's 163 M-parameter `GPT_CONFIG_124M` is called 124M. "
                                 "Tick *tie out_head to tok_emb* to build it that way.",
                 n=counts.total, without=counts.total_without_output_head)
    return head + "\n\n" + t(
        "build.memory", "Memory for the weights: **{fp32:,.2f} MB** at float32, **{bf16:,.2f} "
                        "MB** at bfloat16 (bytes / 1024²). Runs on **{device}**. Weights: "
                        "{weights}.", fp32=counts.memory_mb("float32"),
        bf16=counts.memory_mb("bfloat16"), device=key.device,
        weights=say(key.source.caption)) + " " + cache


def preview(preset: str) -> dict:
    """A preset picked, not built yet: its diagram and parameters, said to be a preview (the
    page never shows one model's form beside another's diagram)."""
    cfg = get_preset(preset)
    counts = count_parameters(cfg)
    note = ('<div class="preview-note">' + t(
        "build.preview", "Preview of <b>{name}</b>: not built yet. Press <b>Build the "
                         "model</b>.", name=html.escape(preset)) + "</div>")
    return {"arch": note + architecture_html([cfg], [counts], stages=True),
            "params_table": parameter_table([counts]), "params_plot": parameter_figure([counts]),
            "memory": ""}


@dataclass(frozen=True)
class Preview(View):
    """The preset picked since the last build, previewed (not built yet)."""

    preset: str | None = None

    KEPT_BY_NEW_MODELS = KEPT_WITHOUT_B = False


def model_views(session) -> dict:
    """The session's models; or the preset picked since (a preview), or before any build."""
    chosen = session.view(Preview).preset
    if chosen is not None or not session.models:
        return preview(chosen or DEFAULT_PRESET)
    keys = session.keys
    counts = [count_parameters(k.config) for k in keys]
    names = comparison.names(session)
    # B knocked out (tab 7) runs on A's own weights: said so, not as a second set of weights
    knocked = (keys[1].interventions.describe() if len(keys) == 2 and keys[1].interventions
               and keys[1].weights_key == keys[0].weights_key else None)
    weights = ([say(k.source.caption) for k in keys]
               if len(keys) == 2 and keys[0] != keys[1] and knocked is None else None)
    return {"arch": architecture_html([k.config for k in keys], counts, names, stages=True,
                                      weights=weights, knocked_out=knocked),
            "params_table": parameter_table(counts),
            "params_plot": parameter_figure(counts, names), "memory": memory_markdown(session)}


MODEL_VIEWS = ("arch", "params_table", "params_plot", "memory")


@refresh.renders(*MODEL_VIEWS, *FIELDS, "export_note", "export_files")
def render(session) -> dict:
    """The session's models' views; new models also fill the form (a checkpoint's or a trained
    model's config) and drop the export of the model that went."""
    if not session.new_models or not session.models:
        return model_views(session)
    cfg = session.models[0].key.config
    return {**model_views(session), **{f: getattr(cfg, f) for f in FIELDS},
            "export_note": "", "export_files": None}


# ---------------------------------------------------------------------------------------------
# Handlers
@handler(outputs=FIELDS)
def preset_values(preset):
    """/preset_config: the preset's knobs, for the form."""
    cfg = get_preset(as_choice(preset, PRESET, PRESETS))
    return {f: getattr(cfg, f) for f in FIELDS}


@handler(outputs=MODEL_VIEWS)
def preset_picked(preset, session):
    """A preset picked (``preset_values`` fills the form): its preview."""
    session.show(Preview, preset=as_choice(preset, PRESET, PRESETS))
    return preview(preset)


@handler(outputs=("config_column", "seed", "pretrained_row", "file_row", "build_btn"))
def weights_controls(choice):
    return {"config_column": gr.update(visible=choice == "random"),
            "seed": gr.update(interactive=choice == "random"),
            "pretrained_row": gr.update(visible=choice == "pretrained"),
            "file_row": gr.update(visible=choice == "file"),
            # (the server's text: the browser translates a label only when the page loads)
            "build_btn": gr.update(value=t(*BUILD_BUTTON.get(choice, BUILD_BUTTON["random"])))}


@handler(outputs=("weights_path",))
def path_box():
    """The path box where a path on the server may be given (known once the server launched)."""
    return {"weights_path": gr.update(visible=server_paths_allowed())}


def reporter(progress):
    """``progress(fraction, text)`` callable from any thread. gr.Progress finds its event
    through context variables, which the threads of the hub's download do not have (their
    reports were silently dropped): each report runs in a copy of the handler's context."""
    context, lock = contextvars.copy_context(), threading.Lock()

    def report(fraction, desc=None):   # gr.Progress's own form: progress(0.3, "text") too
        with lock:   # a context can be entered by one thread at a time
            context.run(lambda: progress(fraction, desc=desc and say(desc)))
    return report


def build(*args, **kwargs):
    given = BUILD_SIGNATURE.bind(*args, **kwargs)
    given.apply_defaults()
    session = given.arguments["session"]
    try:
        return _build(given.arguments, session)
    except ExplorerError as refused:
        # said on the status line too (``build_refused``): a message box can be closed or
        # missed, and advice such as where to put an offline GPT-2 must stay on the page
        session.show(BuildRefused, message=refused.message)
        raise


def form_choices(given) -> tuple[str, str, str]:
    """The form's preset, weights and GPT-2 size (/build and /share_link take them)."""
    return (as_choice(given["preset"], PRESET, PRESETS),
            as_choice(given["weights"] or "random", Message("field.weights", "weights"),
                      WEIGHTS_CHOICES),
            as_choice(given["size"], Message("field.size", "size"), GPT2_SIZE_CHOICES))


def form_config(given) -> tuple[GPTConfig, int]:
    """The form's config and seed, for random weights: GPTConfig and ``check_seed`` check
    them, with their own messages."""
    config = GPTConfig.from_dict({k.field: knob_value(k, given[k.field]) for k in KNOBS})
    return config, check_seed(as_int(given["seed"], SEED))


def _build(inputs, session):
    progress = reporter(inputs["progress"])
    preset, choice, size = form_choices(inputs)
    device = as_choice(inputs["device"], Message("field.device", "device"), DEVICES)
    dtype = as_choice(inputs["dtype"], Message("field.dtype", "dtype"), DTYPES)
    notes = ()
    started = time.perf_counter()
    if choice == "random":
        progress(0.05, desc=t("build.checking", "Checking the config"))
        cfg, seed = form_config(inputs)
        key = CACHE.key(cfg, seed=seed, device=device, dtype=dtype)
        progress(0.2, desc=t("build.initialising", "Initialising the weights "
                                                   "(torch.manual_seed, then GPTModel(cfg))"))
        started = time.perf_counter()
        what = preset if cfg == PRESETS[preset] else Message("build.custom", "custom config")
    else:
        if choice == "pretrained":
            # the budget (beside model B too) before any download
            comparison.check_pretrained_beside(session, gpt2_config(f"gpt2-{size}"),
                                               resolve_device(device), dtype, f"gpt2-{size}")
            cfg, source = pretrained_source(size, progress, budget_bytes=CACHE.budget_bytes,
                                            dtype=dtype)
        else:
            upload = inputs["weights_upload"]
            path, config = (uploaded(upload) if upload
                            else (inputs["weights_path"], None))
            if isinstance(path, str):
                progress(0.0, desc=t("build.checking_file", "Checking {name} (shapes, sha256)",
                                     name=os.path.basename(path.strip())))
            cfg, source, info = (file_source(path, config, budget_bytes=CACHE.budget_bytes,
                                             dtype=dtype) if upload
                                 else server_checkpoint(path, dtype, CACHE.budget_bytes))
            notes = tuple(info.assumptions)
        key = CACHE.key(cfg, device=device, dtype=dtype, source=source)
        what = Message("build.from_checkpoint", "config from the checkpoint")
    # Model B stays beside the new A: both must fit, and building this one never evicts it.
    comparison.check_beside(session, key)
    _, cached = CACHE.get(key, progress, keep=session.keys[1:])
    seconds = time.perf_counter() - started
    progress(1.0, desc=t("build.done", "Done"))
    how = "cache" if cached else "built" if choice == "random" else "loaded"
    session.with_model_a(Model(key, Made(how, what, seconds, notes)))
    return {"session": session, **refresh.render_all(session)}


# /build's outputs: the API's first (the status line, this tab's views, the pickers, the form,
# the weights notes), then all that follows a new model.
BUILD_OUTPUTS = ("session", *refresh.FIRST, "inside_layer", "att_layer", "act_layer",
                 "att_head", *FIELDS, refresh.weights_notes, "pair", "heat_point",
                 refresh.all_outputs)
build.__signature__ = BUILD_SIGNATURE
build = handler(outputs=BUILD_OUTPUTS, name="build")(build)


@handler(outputs=("status",))
def build_refused(session):
    return {"status": status_line(session)}


@handler(outputs=("export_files", "export_note"))
def export_weights(session, hf_layout):
    """/export_model: model A (random, trained or loaded) as model.safetensors + config.json,
    in the book's names or (GPT-2-shaped models) Hugging Face's GPT-2 layout."""
    model = model_a(session)
    hf_layout = as_flag(hf_layout, Message("field.hf_layout", "hf_layout"))
    key = session.models[0].key
    paths = export_model(model, fresh_folder(), hf_layout=hf_layout, source=key.source)
    layout = (t("export.hf", "Hugging Face's GPT-2 layout") if hf_layout
              else t("export.book", "the book's names"))
    note = t("export.note", "Exported **{weights}** in {layout}: `model.safetensors` "
                            "({mb:,.1f} MB) and `config.json`. Load them again with *weights: "
                            "from a file*.", weights=say(key.source.caption), layout=layout,
             mb=paths[0].stat().st_size / 1024 ** 2)
    return {"export_files": [str(p) for p in paths], "export_note": note}


# ---------------------------------------------------------------------------------------------
def create(page):
    default = DEFAULT_CONFIG.to_dict()
    rows: dict[int, list] = {}
    for knob in KNOBS:
        rows.setdefault(knob.form_row, []).append(knob)
    with gr.Row():
        with gr.Column(scale=2):
            page.add(gr.Radio([(label(*name), value) for value, name in WEIGHTS_CHOICES.items()],
                              value="random", label=label("build.weights", "weights"),
                              elem_id="weights",
                              info=label("build.weights_info", "random: a config (preset, "
                                         "knobs) and a seed; pretrained and file: the "
                                         "checkpoint's own config")))
            with page.add(gr.Row(visible=False, elem_id="pretrained_row")):
                page.add(gr.Dropdown(list(GPT2_SIZE_CHOICES), value="small",
                                     label=label("build.size", "GPT-2 size (downloaded once "
                                                 "from the Hugging Face hub)"),
                                     elem_id="gpt2_size"))
            with page.add(gr.Column(visible=False, elem_id="file_row")):
                page.add(Textbox(label=label("build.path", "path on the server"),
                                    elem_id="weights_path",
                                    placeholder=label("build.path_hint", "/path/to/"
                                                      "model.safetensors (or the book's "
                                                      "model.pth)")))
                page.add(gr.File(label=label("build.upload", "or upload model.safetensors / "
                                             ".pth (and its config.json)"),
                                 file_count="multiple",
                                 file_types=[*WEIGHTS_SUFFIXES, CONFIG_SUFFIX],
                                 elem_id="weights_upload", height=90))
            # The knobs matter for random weights only (a checkpoint brings its own config;
            # after a load they show it, for a random model of its shape).
            with page.add(gr.Column(visible=True, elem_id="config_column")):
                page.add(gr.Dropdown(list(PRESETS), value=DEFAULT_PRESET,
                                     label=label("build.preset", "Preset"), elem_id="preset"))
                for row in rows.values():
                    with gr.Row():
                        for knob in row:
                            page.add(knob_widget(knob, default[knob.field]))
            with gr.Row():
                page.add(gr.Number(123, label=label("build.seed", "seed"), precision=0,
                                   elem_id="seed"))
                devices = DEVICES if resolve_device("auto").type == "cuda" else DEVICES[:2]
                page.add(gr.Dropdown(list(devices), value="auto", label=label("build.device",
                                                                        "device"),
                                     elem_id="device"))
                page.add(gr.Dropdown(list(DTYPES), value="float32",
                                     label=label("build.dtype", "dtype (bfloat16: GPU only)"),
                                     elem_id="dtype"))
            page.add(gr.Button(label(*BUILD_BUTTON["random"]), variant="primary",
                               elem_id="build_btn"))
            pin.create(page)
        with gr.Column(scale=3):
            views = preview(DEFAULT_PRESET)
            page.add(gr.HTML(views["arch"], elem_id="arch", js_on_load=on_load_js("walk")))
            walk.create(page)   # the guided walk's card, under the diagram (its top stays free)
            page.add(gr.Markdown(elem_id="memory"))
            with gr.Accordion(label("export.title", "Export this model (model.safetensors + "
                                    "config.json)"), open=False):
                with gr.Row():
                    page.add(gr.Checkbox(False, label=label("export.hf_layout", "Hugging "
                                                            "Face's GPT-2 layout"),
                                         elem_id="hf_layout"))
                    page.add(gr.Button(label("export.button", "Export"), elem_id="export_btn"))
                page.add(gr.Markdown(elem_id="export_note"))
                page.add(gr.File(label=label("export.files", "model files"),
                                 file_count="multiple", height=90, elem_id="export_files"))
    with gr.Row(elem_id="params_row"):
        page.add(gr.Dataframe(views["params_table"], label=label("build.params", "Parameters"),
                              interactive=False, elem_id="params_table"))
        page.add(gr.Plot(views["params_plot"], show_label=False,
                         label=label("build.params_plot", "Parameters per component"),
                         elem_id="params_plot"))


def wire(page):
    # .input, not .change: only a preset the user picks fills the knobs; a link sets the
    # preset and its changed knobs together, which a change event would overwrite.
    page.on("preset.input", preset_values, ["preset"], api_name="preset_config")
    page.on("preset.input", preset_picked, ["preset", "session"], api_visibility="private",
            show_progress="hidden")
    page.on("weights.change", weights_controls, ["weights"], api_visibility="private")
    # show_progress_on: progress (and an error badge) on the status line only, so a refused
    # config leaves the previous model's views in place.
    built = page.on("build_btn.click", build,
                    ["preset", *FIELDS, "seed", "device", "dtype", "weights", "gpt2_size",
                     "weights_path", "weights_upload", "session"],
                    api_name="build", concurrency_limit=1, concurrency_id="build",
                    show_progress_on=[page["status"]])
    page.then(built, build_refused, ["session"], on="failure", api_visibility="private",
              show_progress="hidden")
    page.on("export_btn.click", export_weights, ["session", "hf_layout"],
            api_name="export_model", concurrency_limit=1, concurrency_id="build",
            show_progress_on=[page["export_note"]])
    pin.wire(page)
    walk.wire(page)
    return built
