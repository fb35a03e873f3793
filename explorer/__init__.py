"""GPT Explorer: build and inspect the GPT model of chapter 4 of Raschka's
"Build a Large Language Model (From Scratch)".

The core modules (config, model, tokenizer, generate, probes) need only torch,
numpy and tiktoken; the UI (ui, plots) adds gradio and plotly.
"""
