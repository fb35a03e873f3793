"""A figure that a stream redraws in place (the Train tab's curves): a ``gr.HTML`` whose script
hands each new figure (plotly's JSON) to ``Plotly.react``. ``gr.Plot`` draws each value in a
new plot and lays out both at every update (what that cost: bench/README.md)."""
from __future__ import annotations

import os

import gradio as gr
import plotly
import plotly.graph_objects as go

PLOTLY_JS = os.path.join(os.path.dirname(plotly.__file__), "package_data", "plotly.min.js")
gr.set_static_paths([PLOTLY_JS])    # the page may load that one file from this server

# Each figure is drawn in a task of its own (setTimeout): a page that gets two at once stays
# free between the draws. A figure for a hidden tab is drawn when it shows (in a box of no
# size, plotly.js lays titles over each other). Gradio's own plot, loaded later, sets another
# window.Plotly: the one of the moment is kept.
DRAW_JS = """
const Plotly = window.Plotly;
const box = element.querySelector(".live-figure");
let waiting = false;
const draw = () => {
  waiting = !box.offsetWidth;
  if (waiting) return;
  let figure;
  try { figure = JSON.parse(props.value || "null"); } catch (e) { figure = null; }
  if (!figure || !figure.layout) { Plotly.purge(box); return; }
  Plotly.react(box, figure.data || [], {...figure.layout, autosize: true},
               {responsive: true, displaylogo: false});
};
new ResizeObserver(() => { if (waiting) draw(); }).observe(box);
watch("value", () => setTimeout(draw));
draw();
"""


def live_figure(figure: go.Figure, **options) -> gr.HTML:
    """A component showing ``figure``; a handler updates it with ``value_of(figure)``."""
    return gr.HTML(value_of(figure), html_template='<div class="live-figure"></div>',
                   js_on_load=DRAW_JS, apply_default_css=False, container=True,
                   elem_classes=["live-figure-block"],   # page.css: no padding, as gr.Plot
                   # relative: the app may be served under a path (a proxy, a Space's)
                   head=f'<script src="gradio_api/file={PLOTLY_JS}"></script>', **options)


def value_of(figure: go.Figure) -> str:
    return figure.to_json()
