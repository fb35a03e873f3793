"""The page: the title, the status line and the five tabs (``explorer.app.tabs``), composed and
wired; the style sheet and the script the page runs. Every number comes from the core and every
figure from ``explorer.app.plots``; the tabs only map widgets to calls."""
from __future__ import annotations

from pathlib import Path

import gradio as gr

from .plots.generation import NEXT_TOKEN_CSS
from .tabs import activations, attention, build, generate, inside

CSS = """
.gradio-container {font-size: 17px;}
#title h1 {margin-bottom: 0;}
.chips {display: flex; flex-wrap: wrap; gap: 6px; font-family: ui-monospace, monospace;}
.chip {border: 1px solid #9ca3af; border-radius: 6px; padding: 2px 6px; background: #f3f4f6;
       color: #111827; text-align: center; line-height: 1.2;}
.chip small {display: block; color: #4b5563; font-size: 12px;}
/* The live parts of the Generate tab change up to 40 times a second: keep their layout and
   paint from spreading to the rest of the page. */
#bars, #history, #speed {contain: layout paint;}
""" + NEXT_TOKEN_CSS
# Run by the page when it loads: hands Gradio's streamed updates on one per painted frame, so
# that no generation step is applied and overwritten between two paints.
JS = (Path(__file__).parent / "static" / "paced_stream.js").read_text()


def build_app() -> gr.Blocks:
    with gr.Blocks(title="GPT Explorer") as demo:
        state = gr.State(None)
        gr.Markdown("# GPT Explorer\nBuild the GPT of *Build a Large Language Model (From "
                    "Scratch)*, chapter 4, and watch it work.", elem_id="title")
        status = gr.Markdown("No model yet — build one below.", elem_id="status")
        build_tab = build.create_ui()
        inside_tab = inside.create_ui()
        attention_tab = attention.create_ui()
        activations_tab = activations.create_ui()
        generate_tab = generate.create_ui()

        build.create_event_handlers(
            build_tab, state, status,
            layer_pickers=[inside_tab.layer, attention_tab.layer, activations_tab.layer],
            head_picker=attention_tab.head)
        traced = inside.create_event_handlers(inside_tab, state)
        attention.create_event_handlers(attention_tab, state)
        activations.create_event_handlers(activations_tab, state, demo, traced)
        generate.create_event_handlers(generate_tab, state)

        def release_session(request: gr.Request):
            """The browser tab (or API client) went away: drop this session's state (its
            model key and last trace) now, not after Gradio's one-hour grace period. The
            model stays in the shared cache; a returning tab is asked to build again."""
            holder = getattr(demo, "state_holder", None)  # set by Gradio when the app starts
            if holder is not None and request is not None and request.session_hash:
                holder.delete_state(request.session_hash)

        demo.unload(release_session)
    return demo
