"""A pretrained GPT-2 or a checkpoint file in the book's ``GPTModel``, through the model cache:
``load_pretrained(size)`` and ``load_file(path)`` -> (model, key); ``key.source.caption`` says
where the weights came from."""
from __future__ import annotations

from pathlib import Path

from ..book.errors import Text
from .cache import ModelCache
from .checkpoints import file_source
from .hub import pretrained_source


def load_pretrained(size: str = "gpt2-small", progress=None, *, cache: ModelCache | None = None,
                    device: str = "cpu", dtype: str = "float32", **hub):
    """OpenAI's GPT-2 in the book's ``GPTModel``: (model, key). Shared through ``cache`` when
    given (two sessions asking for the same size hold one copy)."""
    cache = ModelCache() if cache is None else cache
    cfg, source = pretrained_source(size, progress, budget_bytes=cache.budget_bytes,
                                    dtype=dtype, **hub)
    key = cache.key(cfg, device=device, dtype=dtype, source=source)
    if progress is not None:
        progress(1.0, Text("loading.into_the_model", "Loading {caption} into the book's "
                           "GPTModel", caption=source.caption))
    model, _ = cache.get(key, progress)
    return model, key


def load_file(path, config=None, *, cache: ModelCache | None = None, device: str = "cpu",
              dtype: str = "float32", progress=None):
    """A checkpoint file in the book's ``GPTModel``: (model, key). ``key.source.caption``
    names it; checkpoints with the same sha256 share one copy in ``cache``. ``progress(fraction,
    text)`` hears about the hash and the first load's conversion."""
    cache = ModelCache() if cache is None else cache
    if progress is not None:
        progress(0.0, Text("loading.checking", "Checking {name}", name=Path(path).name))
    cfg, source, _ = file_source(path, config, budget_bytes=cache.budget_bytes, dtype=dtype)
    key = cache.key(cfg, device=device, dtype=dtype, source=source)
    model, _ = cache.get(key, progress)
    return model, key
