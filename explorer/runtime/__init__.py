"""Serving concerns without Gradio: building a model on a device, the model cache within a
memory budget, and the process's heap."""
