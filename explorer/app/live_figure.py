"""A figure that a stream redraws in place: the Train tab's loss curves and gradient norms,
sent every few seconds while a job trains.

``gr.Plot`` draws each new value in a new plot (its component is keyed on the figure), and
lays both the old and the new one out, at every update (what that cost: bench/README.md). This
is Gradio's ``gr.HTML`` with a script of its own that hands
each new figure to ``Plotly.react``, which changes the drawn plot. The value is the figure's
JSON (plotly's own ``to_json``), and the page's plotly.js is the plotly package's."""
from __future__ import annotations

import os

import gradio as gr
import plotly
import plotly.graph_objects as go

PLOTLY_JS = os.path.join(os.path.dirname(plotly.__file__), "package_data", "plotly.min.js")
gr.set_static_paths([PLOTLY_JS])    # the page may load that one file from this server

# Each new figure is drawn in a task of its own (setTimeout), not in the one that handles the
# stream's message: a page that gets both figures at once stays free between the two draws.
# A figure that comes while its tab is hidden is drawn when the tab shows (plotly.js lays out
# text it cannot measure in a box of no size: titles over each other). ``responsive``: the
# figure follows its box. The plotly.js of the moment is kept: Gradio's own plot, loaded later,
# sets one too.
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
