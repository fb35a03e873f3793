"""Serving concerns without Gradio: building a model on a device, the model cache within a
memory budget (keyed on the weights' source), weights in and out (``weights``: OpenAI's GPT-2
from the hub, checkpoint files, export), training jobs (``training``: the training lab), and
the process's heap."""
