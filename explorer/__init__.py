"""GPT Explorer: build the GPT of chapter 4 of "Build a Large Language Model (From Scratch)" and
look inside it. The core (config, model, tokenizer, generate, probes) needs torch, numpy and
tiktoken only; the app (explorer.app) adds plotly and Gradio."""
import os

# OpenMP threads that spin while waiting steal the CPU from every other thread: with two
# sessions (or any other busy process) on a 2-core machine, decoding ran 5x slower. Sleeping
# waiters cost nothing measurable alone. Effective only if set before torch is first imported.
# (CPU decoding does not use OpenMP: explorer/native/decode.c has its own helper thread.)
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
