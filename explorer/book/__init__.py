"""What a reader of chapter 4 recognises: the config and presets, the model, the KV cache, the
probe points, the tokenizer, generation, the 4.4 gradient demo, the activation curves, and
chapter 5's training code. This wing imports torch, numpy and tiktoken only, and no other part
of the explorer."""
