"""The page: the title, the status line and the tabs (``explorer.app.tabs``), composed and
wired; the style sheet and the script the page runs. Every number comes from the core and every
figure from ``explorer.app.plots``; the tabs only map widgets to calls."""
from __future__ import annotations

from pathlib import Path

import gradio as gr

from .i18n import label
from .plots.generation import NEXT_TOKEN_CSS
from .plots.model import ARCHITECTURE_CSS
from .plots.walk import STAGE_CSS
from .prefs import LANGS
from .sessions import forget_closed_sessions
from . import share_view
from .shared import NO_MODEL_STATUS, friendly
from .tabs import activations, attention, build, generate, gradients, inside, pin, train, walk

# Lecture mode (body.lecture, set by page.js): larger type and a tighter page, so that each
# tab's main view fits under its controls on a 1280x720 projector; what the status line
# already says (the weights notes) and the subtitle step aside. Figures follow on the server.
LECTURE_CSS = """
body.lecture .gradio-container {--text-xs: 15px; --text-sm: 17px; --text-md: 20px;
                                --text-lg: 23px; --text-xl: 27px; font-size: 20px;}
body.lecture #title p, body.lecture #inside_weights, body.lecture #attention_weights,
body.lecture #activations_weights, body.lecture #attention_intro {display: none;}
body.lecture #status {min-height: 0;}
body.lecture #trace_prompt textarea, body.lecture #gen_prompt textarea {max-height: 2.4em;}
body.lecture .chips {max-height: 2.9em;}
body.lecture .nt-bars {font-size: 21px;}
body.lecture .nt-bars b {height: 26px;}
body.lecture .chip {font-size: 19px;}
body.lecture .gradio-container {--layout-gap: 10px;}
/* Inside: the statistics right under the prompt, the chips and the rest below it */
body.lecture #trace_row {order: -2;}
body.lecture #stats_plot {order: -1;}
body.lecture #trace_prompt [data-testid="block-info"] {display: none;}
/* Train: the settings and buttons and the curves first, then the progress line; the choice of
   variants and data (made before training) below them */
body.lecture #train_settings {order: -3;}
body.lecture #train_plots {order: -2;}
body.lecture #train_progress {order: -1;}
/* Build: the parameters (the book's 163 M and 124 M) first, the form and the diagram below */
body.lecture #params_row {order: -1;}
"""
CSS = """
.gradio-container {font-size: 17px;}
/* Title and subtitle on one line, the language and lecture-mode toggles at its end: the
   room below is for the tabs (a projector: 720 px). */
#header {align-items: center; flex-wrap: nowrap; gap: 12px;}
#header > #title {flex: 1 1 auto; min-width: 0;}
#header > #lang, #header > #lecture {flex: 0 0 auto !important; width: auto !important;
                                     min-width: 0 !important;}
#lang .wrap {flex-wrap: nowrap;}
#title .md {display: flex; flex-wrap: wrap; align-items: baseline; column-gap: 1em;}
#title h1 {margin: 0; font-size: 30px;}
#title p {margin: 0;}
/* The status line: room for a build's progress text, drawn opaque over the old line. */
#status {min-height: 2.6em;}
#status .wrap {background: var(--background-fill-primary);}
.preview-note {background: #fff8e1; border: 1px solid #e6c35c; border-radius: 6px;
               padding: 4px 10px; margin-bottom: 8px;}
/* A long prompt: a few rows of chips, the rest a scroll away. */
.chips {display: flex; flex-wrap: wrap; gap: 6px; font-family: ui-monospace, monospace;
        max-height: 10.5em; overflow-y: auto;}
/* Bytes of one character (Chinese, emoji): the character heads its byte tokens' chips. */
.chip-group {display: inline-flex; flex-wrap: wrap; gap: 3px; align-items: flex-end;
             border: 2px solid #0072b2; border-radius: 8px; padding: 2px 4px;
             position: relative; padding-top: 1.5em;}
.chip-group > b {position: absolute; top: 1px; left: 0; right: 0; text-align: center;
                 font-size: 18px; color: #0072b2;}
.chip {border: 1px solid #9ca3af; border-radius: 6px; padding: 2px 6px; background: #f3f4f6;
       color: #111827; text-align: center; line-height: 1.2;}
.chip small {display: block; color: #4b5563; font-size: 12px;}
/* The live parts of the Generate tab change up to 40 times a second: keep their layout and
   paint from spreading to the rest of the page. */
#bars, #history, #speed {contain: layout paint;}
""" + NEXT_TOKEN_CSS + ARCHITECTURE_CSS + LECTURE_CSS + STAGE_CSS \
    + share_view.SHARE_CSS
# Run by the page when it loads: the page's language and lecture mode (page.js).
_STATIC = Path(__file__).parent / "static"
JS = "() => { (" + (_STATIC / "page.js").read_text() + ")(); }"


def header(extras=()):
    """The title, and the page's two view settings (``prefs``): every event takes them as its
    last two inputs. ``extras``: components made with ``render=False`` that sit at the end of
    the header's row (the share button)."""
    with gr.Row(elem_id="header", equal_height=False):
        gr.Markdown(label("# GPT Explorer\nBuild the GPT of *Build a Large Language Model (From "
                          "Scratch)*, chapter 4, and watch it work."), elem_id="title")
        lang = gr.Radio([(name, code) for code, name in LANGS.items()], value="en",
                        label=label("language"),
                        show_label=False, container=False, elem_id="lang", scale=0)
        lecture = gr.Checkbox(False, label=label("lecture mode"), container=False,
                              elem_id="lecture", scale=0)
        for extra in extras:
            extra.render()
    return [lang, lecture]


def build_app() -> gr.Blocks:
    # delete_cache: the files Gradio serves (the exports) are removed an hour after they were
    # made, checked hourly; Gradio's default keeps them until the server stops.
    with gr.Blocks(title="GPT Explorer", delete_cache=(3600, 3600)) as demo:
        state = gr.State(None)
        share_button = share_view.copy_button()
        view = header(extras=[share_button])
        link = share_view.create_ui(share_button)
        # The language or lecture mode changed: the page's own part first (Gradio's locale,
        # the style sheet's lecture class), then every tab draws its views again.
        redrawn = [view[0].change(None, view[0], None, js="(lang) => gptExplorer.setLang(lang)"),
                   view[1].change(None, view[1], None,
                                  js="(on) => gptExplorer.setLecture(on)")]
        status = gr.Markdown(label(NO_MODEL_STATUS), elem_id="status")
        # One gr.Tabs with an id: the tab a link names is chosen in it by the page's script
        # (share_view: an update of the gr.Tabs would mount every tab again).
        with gr.Tabs(elem_id="tabs") as tabs:
            build_tab = build.create_ui()
            inside_tab = inside.create_ui()
            attention_tab = attention.create_ui()
            activations_tab = activations.create_ui()
            generate_tab = generate.create_ui()
            train_tab = train.create_ui()

        # Each tab's note of the weights it shows
        weights_notes = [tab.weights_note for tab in (inside_tab, attention_tab,
                                                      activations_tab, generate_tab)]
        built = build.create_event_handlers(
            build_tab, state, status, view, redrawn,
            layer_pickers=[inside_tab.layer, attention_tab.layer, activations_tab.layer],
            head_picker=attention_tab.head,
            probe_pickers=[inside_tab.pair, inside_tab.heat_point],
            weights_notes=weights_notes)
        # A new model: the old one's results (trace views, gradient charts, export files,
        # generation) go, each view back to its hint.
        # A trained variant put into the session ("Use this model") is a new model too.
        used = train.create_event_handlers(
            train_tab, state, status, view, redrawn,
            layer_pickers=[inside_tab.layer, attention_tab.layer, activations_tab.layer],
            head_picker=attention_tab.head,
            probe_pickers=[inside_tab.pair, inside_tab.heat_point])
        # The Build tab and every tab's weights note follow a trained model put into the
        # session, as they follow a build (with the pinned model beside it, if any).
        used.success(build.redraw, [state, build_tab.preset, *view],
                     [status, build_tab.arch, build_tab.params_table, build_tab.params_plot,
                      build_tab.memory, *weights_notes], api_visibility="private",
                     show_progress="hidden")
        # Pinning a model (or unpinning it) for a comparison: every view is drawn anew too.
        pinned = pin.create_event_handlers(
            build_tab, state, status, view, redrawn,
            weights_notes=weights_notes)
        lesson = inside_tab.shortcut_lesson
        for new_model in (built, used, *pinned):
            new_model.success(
                cleared, view,
                [inside_tab.chips, inside_tab.info, inside_tab.stats_plot, inside_tab.hist_plot,
                 inside_tab.heat_plot, inside_tab.export_file, attention_tab.plot,
                 attention_tab.grid_plot, attention_tab.entropy_plot, attention_tab.export_file,
                 lesson.book_plot, lesson.gpt_plot, generate_tab.output, generate_tab.bars,
                 generate_tab.history, generate_tab.speed],
                api_visibility="private", show_progress="hidden")
        # The guided walk of the diagram: a new model puts its card back to the hint.
        walk.create_event_handlers(build_tab.walk, build_tab.arch, inside_tab.prompt, state,
                                   view, redrawn)
        for new_model in (built, used):
            new_model.success(walk.cleared, [state, *view],
                              [build_tab.walk.card, build_tab.walk.stage, build_tab.walk.block],
                              api_visibility="private", show_progress="hidden")
        traced = inside.create_event_handlers(inside_tab, state, view, redrawn)
        attention.create_event_handlers(attention_tab, state, view, redrawn)
        activations.create_event_handlers(activations_tab, state, view, redrawn, demo,
                                          [*traced, built])
        generate.create_event_handlers(generate_tab, state, view, redrawn)
        # The page's first language: the link's ?lang=, else the browser's.
        demo.load(None, None, view[0], js="() => gptExplorer.initialLang()")
        # A shared link (?preset=...&tab=...): its widgets, tab and model; the copy button.
        share_view.create_event_handlers(link, demo, tabs, build_tab,
                                         [inside_tab.prompt, generate_tab.prompt], state, view)

        # The browser tab (or API client) went away: forget the session (its model key, last
        # trace and Gradio's own entry) now, not after Gradio's one-hour grace period.
        # Its training job and trained model go with it.
        forget_closed_sessions(demo, on_close=[train.release, pin.release])
    return demo


@friendly
def cleared():
    """Every view of a model that is gone (after a build or "Use this model"): its hint."""
    return (*inside.cleared(), *attention.cleared(), *gradients.cleared(), *generate.cleared())
