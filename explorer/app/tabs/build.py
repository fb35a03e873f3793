"""Tab 1, Build: choose a preset or set every config knob, build the model (from the shared
cache when another session built it already), and see its architecture and parameters. The
weights are random (a seed), OpenAI's pretrained GPT-2, or a checkpoint file (a path on the
server or an upload); the current model can be exported as model.safetensors + config.json.

The knobs come from one table, ``KNOB_TABLE``: a new GPTConfig field is one row there (plus
the model code), and its widget, its check and its ``/build`` parameter follow from that row.
"""
from __future__ import annotations

import contextvars
import html
import inspect
import os
import threading
import time
from dataclasses import dataclass, fields
from types import SimpleNamespace

import gradio as gr

from ...book.config import (ACTIVATIONS, NORM_PLACEMENTS, POS_ENCODINGS, PRESETS, GPTConfig,
                            count_parameters, get_preset)
from ...runtime.build import resolve_device
from ...runtime.cache import model_bytes
from ...book.load_weights import gpt2_config
from ...runtime.weights import PRETRAINED, export_model, file_source, pretrained_source
from .. import gpu, i18n, pinning
from ..exports import fresh_folder
from ..i18n import label, t
from ..plots.labels import percent
from ..plots.model import architecture_html, parameter_figure
from ..shared import (CACHE, DEFAULT_CONFIG, DEFAULT_PRESET, NO_MODEL_NOTE, as_choice, as_int,
                      caption, friendly, layer_picker_update, model_of, server_paths_allowed,
                      session_weights_note, status_line)
from .attention import head_choices
from . import walk
from .inside import probe_choices


@dataclass(frozen=True)
class Knob:
    """One GPTConfig field on the Build tab."""

    field: str               # the GPTConfig field; also its /build parameter and elem_id
    kind: str                # "int", "float", "choice" or "flag"
    label: str
    row: int                 # knobs with the same row number sit side by side
    choices: tuple = ()      # "choice" only: the allowed values, from explorer.book.config
    info: str | None = None  # a hint under the widget
    accepts: str = ""        # what the box takes, for the "is empty" message (float only)

    def widget(self, value):
        common = dict(label=label(self.label), elem_id=self.field,
                      info=label(self.info) if self.info else None)
        if self.kind == "int":
            return gr.Number(value, precision=0, **common)
        if self.kind == "float":
            return gr.Number(value, **common)
        if self.kind == "choice":
            return gr.Radio(list(self.choices), value=value, **common)
        if self.kind == "flag":
            return gr.Checkbox(value, **common)
        raise ValueError(f"Knob {self.field}: unknown kind {self.kind!r}.")

    def parse(self, value):
        """The widget's value, checked as far as the UI knows it (GPTConfig checks the rest,
        with its own messages)."""
        if self.kind == "int":
            return as_int(value, self.field)
        if value is None:
            raise gr.Error(t("{field} is empty: enter {what}.", field=self.field,
                             what=t(self.accepts or "a value")))
        return value


# The page's knobs, in page order. The first values shown are DEFAULT_PRESET's.
KNOB_TABLE = (
    Knob("vocab_size", "int", "vocab_size", row=1),
    Knob("context_length", "int", "context_length", row=1),
    Knob("emb_dim", "int", "emb_dim", row=2),
    Knob("n_heads", "int", "n_heads", row=2),
    Knob("n_layers", "int", "n_layers", row=2),
    Knob("drop_rate", "float", "drop_rate", row=3, accepts="a number in [0, 1)"),
    Knob("ff_expansion", "int", "ff_expansion", row=3),
    Knob("norm_placement", "choice", "LayerNorm placement", row=4, choices=NORM_PLACEMENTS),
    Knob("activation", "choice", "activation", row=4, choices=ACTIVATIONS),
    Knob("pos_encoding", "choice", "position encoding", row=5, choices=POS_ENCODINGS),
    Knob("shortcut", "flag", "shortcut connections", row=6),
    Knob("qkv_bias", "flag", "qkv_bias", row=6),
    Knob("tie_weights", "flag", "tie out_head to tok_emb", row=6),
)
# /build takes the knobs in GPTConfig's order (the book's keys first).
KNOBS = tuple(f.name for f in fields(GPTConfig))
_BY_FIELD = {knob.field: knob for knob in KNOB_TABLE}

# Where the weights come from (the "weights" choice of the page and of /build).
WEIGHTS_CHOICES = {"random": "random (seed)", "pretrained": "pretrained GPT-2 (OpenAI)",
                   "file": "from a file"}   # value: what the page shows (translated)
GPT2_SIZES = tuple(name.removeprefix("gpt2-") for name in PRETRAINED)
WEIGHTS_SUFFIXES = (".safetensors", ".pth", ".pt")   # what load_file reads
CONFIG_SUFFIX = ".json"

# /build's parameters by name (the app is also an API, and Gradio names an endpoint's
# parameters after its function's): the preset, every knob, the seed, where to run it, and
# where the weights come from (the knobs and seed count for random weights only).
# The weights' parameters have defaults, so a client that sends only the knobs (as before
# weights could be loaded) still gets random weights.
WEIGHTS_DEFAULTS = {"weights": "random", "size": "small", "weights_path": None,
                    "weights_upload": None, "state": None}
BUILD_SIGNATURE = inspect.Signature(
    [inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD)
     for name in ("preset", *KNOBS, "seed", "device", "dtype")]
    + [inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=value)
       for name, value in WEIGHTS_DEFAULTS.items()]
    + [inspect.Parameter("progress", inspect.Parameter.POSITIONAL_OR_KEYWORD,
                         default=gr.Progress())])


DEVICES = ("auto", "cpu", "cuda")   # offered: cuda where there is one (CACHE.key checks)
DTYPES = ("float32", "bfloat16")


@friendly
def preset_values(preset):
    cfg = get_preset(as_choice(preset, "preset", PRESETS)).to_dict()
    return [cfg[k] for k in KNOBS]


def _checkpoint_of(path, upload):
    """The weights file (and its config.json, if uploaded beside it) that the user chose: an
    upload wins over a path. Refused with a message that says what to give."""
    if upload:
        files = upload if isinstance(upload, (list, tuple)) else [upload]
        files = [getattr(f, "path", None) or (f.get("path") if isinstance(f, dict) else f)
                 for f in files]
        if not all(isinstance(f, str) and f for f in files):
            raise gr.Error(t("The upload could not be read; upload the file again."))
        weights = [f for f in files if f.lower().endswith(WEIGHTS_SUFFIXES)]
        configs = [f for f in files if f.lower().endswith(CONFIG_SUFFIX)]
        others = [os.path.basename(f) for f in files if f not in weights + configs]
        if others or len(weights) != 1 or len(configs) > 1:
            raise gr.Error(t(
                "Upload one weights file ({suffixes}), and if you have it its config.json "
                "(got {names}).", suffixes=", ".join(WEIGHTS_SUFFIXES),
                names=", ".join(os.path.basename(f) for f in files)))
        return weights[0], configs[0] if configs else None
    if path is None or (isinstance(path, str) and not path.strip()):
        raise gr.Error(t("From a file: give the path of a model.safetensors (or the book's "
                         "model.pth) on the server, or upload the file."))
    if not isinstance(path, str):
        raise gr.Error(t("The weights path must be text (got {kind}).",
                         kind=type(path).__name__))
    if not server_paths_allowed():
        raise gr.Error(t("Loading a path on the server is switched off here; upload the file "
                         "instead."))
    return path.strip(), None


@friendly
def preset_preview(preset):
    """A preset picked (not built yet; ``preset_values`` fills the form): its diagram and
    parameters as a preview, so the page never shows one model's form beside another's
    diagram."""
    cfg = get_preset(preset)
    counts = count_parameters(cfg)
    return (_preview_html(cfg, counts, preset), _parameter_table(counts),
            parameter_figure([counts]))


def _preview_html(cfg, counts, name):
    note = ('<div class="preview-note">' + t(
        "Preview of <b>{name}</b>: not built yet. Press <b>Build the model</b>.",
        name=html.escape(name)) + "</div>")
    return note + architecture_html([cfg], [counts], stages=True)


def _reporter(progress):
    """``progress(fraction, text)`` callable from any thread. gr.Progress finds its event
    through context variables, which the threads of the hub's download do not have (their
    reports were silently dropped): each report runs in a copy of the handler's context."""
    context, lock = contextvars.copy_context(), threading.Lock()

    def report(fraction, desc=None):   # gr.Progress's own form: progress(0.3, "text") too
        with lock:   # a context can be entered by one thread at a time
            # the core reports in English; the page's language is the context's
            context.run(lambda: progress(fraction, desc=desc and i18n.translate(desc)))
    return report


def build(*args, **kwargs):
    given = BUILD_SIGNATURE.bind(*args, **kwargs)
    given.apply_defaults()
    inputs = given.arguments
    progress = _reporter(inputs["progress"])
    preset = as_choice(inputs["preset"], "preset", PRESETS)
    choice = as_choice(inputs["weights"] or "random", "weights", WEIGHTS_CHOICES)
    device = as_choice(inputs["device"], "device", DEVICES)
    dtype = as_choice(inputs["dtype"], "dtype", DTYPES)
    size = as_choice(inputs["size"], "size", GPT2_SIZES)
    notes = []
    started = time.perf_counter()
    if choice == "random":
        values = {name: _BY_FIELD[name].parse(inputs[name]) for name in KNOBS}
        progress(0.05, desc=t("Checking the config"))
        cfg = GPTConfig.from_dict(values)
        key = CACHE.key(cfg, seed=as_int(inputs["seed"], "seed"), device=device, dtype=dtype)
        progress(0.2, desc=t("Initialising the weights (torch.manual_seed, then GPTModel(cfg))"))
        started = time.perf_counter()
    elif choice == "pretrained":
        # Budget first (before any download; beside a pinned model too), then the hub's cache
        # or a download.
        pinning.check_pretrained_pair(inputs["state"], gpt2_config(f"gpt2-{size}"),
                                      resolve_device(device), dtype, f"gpt2-{size}")
        cfg, source = pretrained_source(size, progress, budget_bytes=CACHE.budget_bytes,
                                        dtype=dtype)
        key = CACHE.key(cfg, device=device, dtype=dtype, source=source)
    else:
        path, config = _checkpoint_of(inputs["weights_path"], inputs["weights_upload"])
        progress(0.0, desc=t("Checking {name} (shapes, sha256)", name=os.path.basename(path)))
        cfg, source, info = file_source(path, config, budget_bytes=CACHE.budget_bytes,
                                        dtype=dtype)
        key = CACHE.key(cfg, device=device, dtype=dtype, source=source)
        notes += list(info.assumptions)
    # A pinned model stays beside the new one: both must fit, and building this one never
    # evicts it.
    pinning.check_pair(inputs["state"], key)
    model, cached = CACHE.get(key, progress, keep=[pinning.pinned_key(inputs["state"])])
    seconds = time.perf_counter() - started
    progress(1.0, desc=t("Done"))
    counts = count_parameters(cfg)
    # What the status line says, kept as facts (it is redrawn in the page's language)
    built = dict(kind="built", what=(preset if choice == "random" and cfg == PRESETS.get(preset)
                                     else "custom config" if choice == "random"
                                     else "config from the checkpoint"),
                 how="cache" if cached else "built" if choice == "random" else "loaded",
                 seconds=seconds, notes=notes)
    state = {**pinning.carried(inputs["state"]), "key": key, "status": built}
    # Layer and head pickers follow the built model (returned here, not in a follow-up
    # event, so API calls get the same per-session limits as the page).
    layers = layer_picker_update(cfg)
    heads = gr.update(choices=head_choices(cfg.n_heads), value="mean")
    knobs = [cfg.to_dict()[k] for k in KNOBS]
    note = session_weights_note(state)
    return (status_line(state), *model_views(state), state,
            layers, layers, layers, heads,   # three layer sliders (tabs 2, 3, 4), one head picker
            *knobs,                          # the knobs show the model's config (a checkpoint's)
            note, note, note, note,          # the weights note of tabs 2, 3, 4 and 5
            *probe_choices(cfg))             # the Inside tab's choices of probe points


build.__signature__ = BUILD_SIGNATURE   # /build's parameters, by name (see above)
build = friendly(gpu.gpu_work(duration=gpu.build_seconds, signature=BUILD_SIGNATURE)(build))


PARAMETER_HEADERS = ("component", "parameters", "share")


def _parameter_table(counts):
    """The Build tab's table, headers included (a Dataframe value), in the page's language."""
    tied = counts.output_head_tied
    rows = [[t(name), t("0 (tied: counted in the token embedding)") if tied and
             name == "output head" else f"{n:,}", percent(n / counts.total)]
            for name, n in counts.breakdown().items()]
    rows.append([t("total"), f"{counts.total:,}", "100 %"])
    return {"headers": [t(h) for h in PARAMETER_HEADERS], "data": rows}


PAIR_HEADERS = ("component", "A", "B", "A − B")


def _parameter_pair_table(counts_a, counts_b):
    """Both models' parameters per component, and the difference (the table of a comparison)."""
    parts_a, parts_b = counts_a.breakdown(), counts_b.breakdown()
    rows = []
    for name in dict.fromkeys([*parts_a, *parts_b, "total"]):
        a = counts_a.total if name == "total" else parts_a.get(name, 0)
        b = counts_b.total if name == "total" else parts_b.get(name, 0)
        diff = t("same") if a == b else f"{a - b:+,}"
        rows.append([t(name), f"{a:,}", f"{b:,}", diff])
    return {"headers": [t(h) for h in PAIR_HEADERS], "data": rows}


def _memory_pair_markdown(keys):
    sizes = [model_bytes(k.config, k.dtype) / 1024 ** 2 for k in keys]
    both = sizes[0] if keys[0] == keys[1] else sum(sizes)
    return t("Memory for the weights: A **{a:,.2f} MB** ({dtype_a}), B **{b:,.2f} MB** "
             "({dtype_b}); the two together **{both:,.2f} MB** of the {budget:,.0f} MB budget. "
             "Shared cache: {models} model(s), {used:,.0f} MB.", a=sizes[0], b=sizes[1],
             dtype_a=keys[0].dtype, dtype_b=keys[1].dtype, both=both,
             budget=CACHE.budget_bytes / 1024 ** 2, models=len(CACHE),
             used=CACHE.used_bytes() / 1024 ** 2)


def _memory_markdown(cfg, counts, key):
    tied = cfg.tie_weights
    head = (t("Weight tying — {notes}. Total **{n:,}**.",
              notes="; ".join(i18n.translate(n) for n in counts.notes()), n=counts.total)
            if tied else
            t("Total **{n:,}**; without the output head **{without:,}** — the book's two "
              "figures (section 4.6). GPT-2 reuses the token embedding as its output head "
              "(weight tying), which is why the book's 163 M-parameter `GPT_CONFIG_124M` is "
              "called 124M. Tick *tie out_head to tok_emb* to build it that way.",
              n=counts.total, without=counts.total_without_output_head))
    return head + "\n\n" + t(
        "Memory for the weights: **{fp32:,.2f} MB** at float32, **{bf16:,.2f} MB** at bfloat16 "
        "(bytes / 1024²). Runs on **{device}**. Weights: {weights}. Shared cache: {models} "
        "model(s), {used:,.0f} of {budget:,.0f} MB.", fp32=counts.memory_mb("float32"),
        bf16=counts.memory_mb("bfloat16"), device=key.device, weights=caption(key.source),
        models=len(CACHE), used=CACHE.used_bytes() / 1024 ** 2,
        budget=CACHE.budget_bytes / 1024 ** 2)


@friendly
@gpu.gpu_work(duration=gpu.export_seconds)
def export_weights(state, hf_layout):
    """The session's model (random, trained or loaded) as model.safetensors + config.json,
    in the book's names or (GPT-2-shaped models) Hugging Face's GPT-2 layout."""
    model = model_of(state)
    if not isinstance(hf_layout, bool):
        raise gr.Error(t("hf_layout must be true or false (got {value!r}).", value=hf_layout))
    key = state["key"]
    paths = export_model(model, fresh_folder(), hf_layout=hf_layout, source=key.source)
    layout = t("Hugging Face's GPT-2 layout") if hf_layout else t("the book's names")
    mb = paths[0].stat().st_size / 1024 ** 2
    note = t("Exported **{weights}** in {layout}: `model.safetensors` ({mb:,.1f} MB) and "
             "`config.json`. Load them again with *weights: from a file*.",
             weights=caption(key.source), layout=layout, mb=mb)
    return [str(p) for p in paths], note


def model_views(state):
    """The tab's views of the session's model: architecture, parameter table and chart, memory;
    with a pinned model, both models in each (the differences highlighted)."""
    key = state["key"]
    cfg, counts = key.config, count_parameters(key.config)
    if not pinning.comparing(state):
        return (architecture_html([cfg], [counts], stages=True), _parameter_table(counts),
                parameter_figure([counts]), _memory_markdown(cfg, counts, key))
    keys = (key, state["pinned_key"])
    pair = tuple(count_parameters(k.config) for k in keys)
    names = pinning.names(state)
    weights = None if keys[0] == keys[1] else [k.source.caption for k in keys]
    return (architecture_html([k.config for k in keys], pair, names, weights=weights),
            _parameter_pair_table(*pair), parameter_figure(pair, names),
            _memory_pair_markdown(keys))


@friendly
def redraw(state, preset):
    """The tab (and the status line, and every tab's weights note) again, in the page's
    language and lecture mode: the session's model (and the pinned one), or the chosen
    preset's preview."""
    if state and "key" in state:
        views, note = model_views(state), session_weights_note(state)
    else:
        cfg = get_preset(preset if preset in PRESETS else DEFAULT_PRESET)
        counts = count_parameters(cfg)
        views = (_preview_html(cfg, counts, preset), _parameter_table(counts),
                 parameter_figure([counts]), "")
        note = t(NO_MODEL_NOTE)
    return (status_line(state), *views, note, note, note, note)


def weights_controls(choice):
    """Show the controls of the chosen weights: the config and seed, the GPT-2 size, or the
    file."""
    return (gr.update(visible=choice == "random"), gr.update(interactive=choice == "random"),
            gr.update(visible=choice == "pretrained"), gr.update(visible=choice == "file"),
            gr.update(value=label(BUILD_BUTTON[choice])))


BUILD_BUTTON = {"random": "Build the model", "pretrained": "Load GPT-2 (downloaded once)",
                "file": "Load the checkpoint"}


# ---------------------------------------------------------------------------------------------
def create_ui():
    default = DEFAULT_CONFIG.to_dict()
    rows = {}
    for knob in KNOB_TABLE:
        rows.setdefault(knob.row, []).append(knob)
    knobs = {}
    with gr.Tab(label("1 · Build"), id="build"):
        with gr.Row():
            with gr.Column(scale=2):
                weights = gr.Radio([(label(name), value) for value, name in WEIGHTS_CHOICES.items()],
                                   value="random", label=label("weights"), elem_id="weights",
                                   info=label("random: a config (preset, knobs) and a seed; "
                                              "pretrained and file: the checkpoint's own config"))
                with gr.Row(visible=False) as pretrained_row:
                    size = gr.Dropdown(list(GPT2_SIZES), value="small",
                                       label=label("GPT-2 size (downloaded once from the Hugging "
                                                   "Face hub)"), elem_id="gpt2_size")
                with gr.Column(visible=False) as file_row:
                    weights_path = gr.Textbox(label=label("path on the server"),
                                              elem_id="weights_path",
                                              placeholder=label("/path/to/model.safetensors "
                                                                "(or the book's model.pth)"))
                    weights_upload = gr.File(label=label("or upload model.safetensors / .pth (and "
                                                         "its config.json)"), file_count="multiple",
                                             file_types=[*WEIGHTS_SUFFIXES, CONFIG_SUFFIX],
                                             elem_id="weights_upload", height=90)
                # The config's knobs matter for random weights only (a checkpoint brings its
                # own config; after a load they show it, for a random model of its shape).
                with gr.Column(visible=True) as config_column:
                    preset = gr.Dropdown(list(PRESETS), value=DEFAULT_PRESET,
                                         label=label("Preset"), elem_id="preset")
                    for row in rows.values():
                        if len(row) == 1:   # a knob alone takes the column's width
                            knobs[row[0].field] = row[0].widget(default[row[0].field])
                            continue
                        with gr.Row():
                            for knob in row:
                                knobs[knob.field] = knob.widget(default[knob.field])
                with gr.Row():
                    seed = gr.Number(123, label=label("seed"), precision=0, elem_id="seed")
                    devices = ["auto", "cpu"] + (["cuda"] if resolve_device("auto").type
                                                 == "cuda" else [])
                    device = gr.Dropdown(devices, value="auto", label=label("device"))
                    dtype = gr.Dropdown(list(DTYPES), value="float32",
                                        label=label("dtype (bfloat16: GPU only)"))
                button = gr.Button(label(BUILD_BUTTON["random"]), variant="primary",
                                   elem_id="build_btn")
                pin = pin_controls()
            with gr.Column(scale=3):
                counts = count_parameters(DEFAULT_CONFIG)
                walk_ui = walk.create_ui()   # the guided walk's card, above the diagram
                arch = gr.HTML(_preview_html(DEFAULT_CONFIG, counts, DEFAULT_PRESET),
                               elem_id="arch", js_on_load=walk.WALK_JS)
                memory = gr.Markdown()
                with gr.Accordion(label("Export this model (model.safetensors + config.json)"),
                                  open=False):
                    with gr.Row():
                        hf_layout = gr.Checkbox(False, label=label("Hugging Face's GPT-2 layout"),
                                                elem_id="hf_layout")
                        export_btn = gr.Button(label("Export"), elem_id="export_btn")
                    export_note = gr.Markdown(elem_id="export_note")
                    export_files = gr.File(label=label("model files"), file_count="multiple",
                                           height=90, elem_id="export_files")
        with gr.Row(elem_id="params_row"):
            params_table = gr.Dataframe(_parameter_table(counts), label=label("Parameters"),
                                        interactive=False, elem_id="params_table")
            params_plot = gr.Plot(parameter_figure([counts]), show_label=False,
                                  label=label("Parameters per component"), elem_id="params_plot")
    return SimpleNamespace(preset=preset, knobs=[knobs[name] for name in KNOBS], seed=seed,
                           device=device, dtype=dtype, weights=weights, size=size,
                           weights_path=weights_path, weights_upload=weights_upload,
                           pretrained_row=pretrained_row, file_row=file_row,
                           config_column=config_column, button=button,
                           arch=arch, memory=memory, params_table=params_table,
                           params_plot=params_plot, hf_layout=hf_layout, export_btn=export_btn,
                           export_note=export_note, export_files=export_files, walk=walk_ui,
                           pin=pin)


PIN_HINT = ("**Compare two models:** pin this one as **B**, then build, load or train another "
            "(**A**): every tab shows both.")


def pin_controls():
    """Pin the session's model as B (for comparing it with the next one), or unpin it."""
    with gr.Row(equal_height=True):
        pin_btn = gr.Button(label("Pin this model as B"), elem_id="pin_btn", size="sm",
                            min_width=120)
        unpin_btn = gr.Button(label("Unpin B"), elem_id="unpin_btn", size="sm", min_width=80)
    note = gr.Markdown(label(PIN_HINT), elem_id="pin_note")
    return SimpleNamespace(pin_btn=pin_btn, unpin_btn=unpin_btn, note=note)


def create_event_handlers(tab, state, status, view, redrawn, layer_pickers, head_picker,
                          probe_pickers, weights_notes):
    """``view``: the page's language and lecture mode (every event's last two inputs);
    ``redrawn``: the events after which every view is drawn again (they changed).
    ``layer_pickers`` (the three layer sliders of tabs 2, 3 and 4), ``head_picker`` and
    ``probe_pickers`` (the Inside tab's distribution and heatmap choices) follow the built
    model; ``weights_notes`` (one per tab) say which weights it has. Returns the build
    event (the other tabs clear their results after it)."""
    # .input, not .change: only a preset the user picks fills the knobs; a link (share_view)
    # sets the preset and its changed knobs together, which a change event would overwrite.
    tab.preset.input(preset_values, [tab.preset, *view], tab.knobs, api_name="preset_config")
    tab.preset.input(preset_preview, [tab.preset, *view],
                     [tab.arch, tab.params_table, tab.params_plot],
                     api_visibility="private", show_progress="hidden")
    tab.weights.change(weights_controls, tab.weights,
                       [tab.config_column, tab.seed, tab.pretrained_row, tab.file_row,
                        tab.button],
                       api_visibility="private")
    # show_progress_on: progress (and an error badge) on the status line only, so a refused
    # config leaves the previous model's views in place (the CSS makes that overlay opaque,
    # so that its text never overlaps the old status line).
    built = tab.button.click(
        build, [tab.preset, *tab.knobs, tab.seed, tab.device, tab.dtype, tab.weights, tab.size,
                tab.weights_path, tab.weights_upload, state, *view],
        [status, tab.arch, tab.params_table, tab.params_plot, tab.memory, state,
         *layer_pickers, head_picker, *tab.knobs, *weights_notes, *probe_pickers],
        api_name="build", concurrency_limit=1, concurrency_id="build",
        show_progress_on=[status])
    for event in redrawn:
        event.then(redraw, [state, tab.preset, *view],
                   [status, tab.arch, tab.params_table, tab.params_plot, tab.memory,
                    *weights_notes], api_visibility="private", show_progress="hidden")
    tab.export_btn.click(export_weights, [state, tab.hf_layout, *view],
                         [tab.export_files, tab.export_note], api_name="export_model",
                         concurrency_limit=1, concurrency_id="build",
                         show_progress_on=[tab.export_note])
    return built
