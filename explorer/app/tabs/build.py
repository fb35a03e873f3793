"""Tab 1, Build: choose a preset or set every config knob, build the model (from the shared
cache when another session built it already), and see its architecture and parameters.

The knobs come from one table, ``KNOB_TABLE``: a new GPTConfig field is one row there (plus
the model code), and its widget, its check and its ``/build`` parameter follow from that row.
"""
from __future__ import annotations

import inspect
import time
from dataclasses import dataclass, fields
from types import SimpleNamespace

import gradio as gr

from ...book.config import (ACTIVATIONS, NORM_PLACEMENTS, POS_ENCODINGS, PRESETS, GPTConfig,
                            count_parameters, get_preset)
from ...runtime.build import resolve_device
from .. import gpu
from ..plots.labels import percent
from ..plots.model import architecture_html, parameter_figure
from ..shared import (CACHE, DEFAULT_CONFIG, DEFAULT_PRESET, as_choice, as_int, friendly,
                      layer_picker_update)
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
        common = dict(label=self.label, elem_id=self.field, info=self.info)
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
            raise gr.Error(f"{self.field} is empty: enter {self.accepts or 'a value'}.")
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

# /build's parameters by name (the app is also an API, and Gradio names an endpoint's
# parameters after its function's): the preset, every knob, the seed, where to run it.
BUILD_SIGNATURE = inspect.Signature(
    [inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD)
     for name in ("preset", *KNOBS, "seed", "device", "dtype", "state")]
    + [inspect.Parameter("progress", inspect.Parameter.POSITIONAL_OR_KEYWORD,
                         default=gr.Progress())])


DEVICES = ("auto", "cpu", "cuda")   # offered: cuda where there is one (CACHE.key checks)
DTYPES = ("float32", "bfloat16")


@friendly
def preset_values(preset):
    cfg = get_preset(as_choice(preset, "preset", PRESETS)).to_dict()
    return [cfg[k] for k in KNOBS]


@friendly
def preset_preview(preset):
    """A preset picked (not built yet; ``preset_values`` fills the form): its diagram and
    parameters as a preview, so the page never shows one model's form beside another's
    diagram."""
    cfg = get_preset(preset)
    counts = count_parameters(cfg)
    return (_preview_html(cfg, counts, preset), _parameter_table(counts),
            parameter_figure(counts))


def _preview_html(cfg, counts, name):
    note = (f'<div class="preview-note">Preview of <b>{name}</b>: not built yet. Press '
            f'<b>Build the model</b>.</div>')
    return note + architecture_html(cfg, counts)


@friendly
@gpu.gpu_work(duration=gpu.build_seconds, signature=BUILD_SIGNATURE)
def build(*args, **kwargs):
    given = BUILD_SIGNATURE.bind(*args, **kwargs)
    given.apply_defaults()
    inputs = given.arguments
    progress = inputs["progress"]
    preset = as_choice(inputs["preset"], "preset", PRESETS)
    values = {name: _BY_FIELD[name].parse(inputs[name]) for name in KNOBS}
    progress(0.05, desc="Checking the config")
    cfg = GPTConfig.from_dict(values)
    key = CACHE.key(cfg, seed=as_int(inputs["seed"], "seed"),
                    device=as_choice(inputs["device"], "device", DEVICES),
                    dtype=as_choice(inputs["dtype"], "dtype", DTYPES))
    progress(0.2, desc="Initialising the weights (torch.manual_seed, then GPTModel(cfg))")
    started = time.perf_counter()
    model, cached = CACHE.get(key)
    seconds = time.perf_counter() - started
    progress(1.0, desc="Done")
    counts = count_parameters(cfg)
    how = (f"from the shared cache in {seconds * 1000:.0f} ms" if cached
           else f"built in {seconds:.2f} s")
    status = (f"**Model ready** — {preset if cfg == PRESETS.get(preset) else 'custom config'}, "
              f"{counts.total:,} parameters, on **{key.device}** ({key.dtype}), seed {key.seed}, "
              f"{how}.")
    # Layer and head pickers follow the built model (returned here, not in a follow-up
    # event, so API calls get the same per-session limits as the page).
    layers = layer_picker_update(cfg)
    heads = gr.update(choices=["mean"] + [str(h) for h in range(cfg.n_heads)], value="mean")
    return (status, architecture_html(cfg, counts), _parameter_table(counts),
            parameter_figure(counts), _memory_markdown(cfg, counts, key), {"key": key},
            layers, layers, layers, heads,   # three layer sliders (tabs 2, 3, 4), one head picker
            *probe_choices(cfg))             # the Inside tab's choices of probe points


build.__signature__ = BUILD_SIGNATURE


def _parameter_table(counts):
    rows = [[name, f"{n:,}", percent(n / counts.total)]
            for name, n in counts.breakdown().items()]
    rows.append(["total", f"{counts.total:,}", "100 %"])
    return rows


def _memory_markdown(cfg, counts, key):
    tied = cfg.tie_weights
    head = (f"The output head shares `tok_emb`'s weights (weight tying), so the total already "
            f"counts that matrix once: **{counts.total:,}**." if tied else
            f"Total **{counts.total:,}**; without the output head "
            f"**{counts.total_without_output_head:,}** — the book's two figures (section "
            f"4.6). GPT-2 reuses the token embedding as its output head (weight tying), which "
            f"is why the book's 163 M-parameter `GPT_CONFIG_124M` is called 124M. Tick "
            f"*tie out_head to tok_emb* to build it that way.")
    return (f"{head}\n\nMemory for the weights: **{counts.memory_mb('float32'):,.2f} MB** at "
            f"float32, **{counts.memory_mb('bfloat16'):,.2f} MB** at bfloat16 (bytes / 1024²). "
            f"Runs on **{key.device}**. Shared cache: {len(CACHE)} model(s), "
            f"{CACHE.used_bytes() / 1024 ** 2:,.0f} of {CACHE.budget_bytes / 1024 ** 2:,.0f} MB.")


# ---------------------------------------------------------------------------------------------
def create_ui():
    default = DEFAULT_CONFIG.to_dict()
    rows = {}
    for knob in KNOB_TABLE:
        rows.setdefault(knob.row, []).append(knob)
    knobs = {}
    with gr.Tab("1 · Build", id="build"):
        with gr.Row():
            with gr.Column(scale=2):
                preset = gr.Dropdown(list(PRESETS), value=DEFAULT_PRESET, label="Preset",
                                     elem_id="preset")
                for row in rows.values():
                    if len(row) == 1:   # a knob alone takes the column's width
                        knobs[row[0].field] = row[0].widget(default[row[0].field])
                        continue
                    with gr.Row():
                        for knob in row:
                            knobs[knob.field] = knob.widget(default[knob.field])
                with gr.Row():
                    seed = gr.Number(123, label="seed", precision=0, elem_id="seed")
                    devices = ["auto", "cpu"] + (["cuda"] if resolve_device("auto").type
                                                 == "cuda" else [])
                    device = gr.Dropdown(devices, value="auto", label="device")
                    dtype = gr.Dropdown(list(DTYPES), value="float32",
                                        label="dtype (bfloat16: GPU only)")
                button = gr.Button("Build the model", variant="primary", elem_id="build_btn")
            with gr.Column(scale=3):
                counts = count_parameters(DEFAULT_CONFIG)
                arch = gr.HTML(_preview_html(DEFAULT_CONFIG, counts, DEFAULT_PRESET))
                memory = gr.Markdown()
        with gr.Row():
            params_table = gr.Dataframe(_parameter_table(counts),
                                        headers=["component", "parameters", "share"],
                                        label="Parameters", interactive=False)
            params_plot = gr.Plot(parameter_figure(counts), show_label=False,
                                  label="Parameters per component", elem_id="params_plot")
    return SimpleNamespace(preset=preset, knobs=[knobs[name] for name in KNOBS], seed=seed,
                           device=device, dtype=dtype, button=button, arch=arch, memory=memory,
                           params_table=params_table, params_plot=params_plot)


def create_event_handlers(tab, state, status, layer_pickers, head_picker, probe_pickers):
    """``layer_pickers`` (the three layer sliders of tabs 2, 3 and 4), ``head_picker`` and
    ``probe_pickers`` (the Inside tab's distribution and heatmap choices) follow the built
    model. Returns the build event (the other tabs clear their results after it)."""
    tab.preset.change(preset_values, tab.preset, tab.knobs, api_name="preset_config")
    tab.preset.input(preset_preview, tab.preset,
                     [tab.arch, tab.params_table, tab.params_plot],
                     api_visibility="private", show_progress="hidden")
    # show_progress_on: progress (and an error badge) on the status line only, so a refused
    # config leaves the previous model's views in place (the CSS makes that overlay opaque,
    # so that its text never overlaps the old status line).
    return tab.button.click(
        build, [tab.preset, *tab.knobs, tab.seed, tab.device, tab.dtype, state],
        [status, tab.arch, tab.params_table, tab.params_plot, tab.memory, state,
         *layer_pickers, head_picker, *probe_pickers],
        api_name="build", concurrency_limit=1, concurrency_id="build",
        show_progress_on=[status])
