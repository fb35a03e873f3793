"""Serving concerns without Gradio, one job per module:

- ``build``: a model from (config, seed) on a device; ``memory``: the memory budget;
- ``sources``: what a model is (``WeightsSource``, ``ModelKey``); ``cache``: the models built,
  shared between sessions within the budget;
- weights in: ``hub`` (OpenAI's GPT-2 from the Hugging Face hub), ``checkpoints`` (files on
  disk, read from their headers) with ``file_config`` (their configs), ``store`` (checkpoints
  converted once into the book's layout, then mapped), ``loading`` (either, through the cache);
  weights out: ``export``;
- ``training``: the training lab, a package (its ``__init__`` lists its modules);
- ``heap``: the process's heap."""
