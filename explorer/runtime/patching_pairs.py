"""The Patching tab's ready-made pairs (clean, corrupted, right, wrong), and what its maps of
a model are worth: nothing, for random weights."""
from __future__ import annotations

from ..book.config import GPT2_SIZES
from ..book.errors import ExplorerError, Message
from ..book.tokenizer import get_tokenizer
from .training.copying_task import CopyingTask, copying_pair

IOI = ("When Mary and John went to the store, John gave a drink to",
       "When Alice and Bob went to the store, Bob gave a drink to", " Mary", " John")


def pair_texts(choice: str, cfg) -> tuple[str, str, str, str]:
    """(clean, corrupted, right, wrong) of the pair "ioi" or "copying", refused where a model
    of ``cfg`` cannot read it."""
    if choice == "ioi":
        if cfg.vocab_size < get_tokenizer().n_vocab:
            raise ExplorerError("patch.ioi_needs_gpt2", "The indirect-object pair is GPT-2 "
                                "text, but model A reads only the first {vocab} token ids. "
                                "Build GPT-2 small (pretrained) in the Build tab first.",
                                vocab=cfg.vocab_size)
        return IOI
    task = CopyingTask()
    if cfg.vocab_size < task.n_words:
        raise ExplorerError("patch.copying_needs_words", "The copying pair uses the task's "
                            "{n} words (token ids 0 to {last}); model A reads only {vocab}.",
                            n=task.n_words, last=task.n_words - 1, vocab=cfg.vocab_size)
    return copying_pair(task)


def gpt2_cached() -> bool:
    """GPT-2 small's weights are in this server's Hugging Face cache (no word to the hub)."""
    try:
        from huggingface_hub import try_to_load_from_cache
        return isinstance(try_to_load_from_cache(GPT2_SIZES["gpt2-small"].repo_id,
                                                 "model.safetensors"), str)
    except Exception:  # noqa: BLE001 - no cache at all: not cached
        return False


def honesty(source) -> Message | None:
    """What the maps of a model with weights ``source`` are worth: nothing, said plainly, for
    random weights."""
    if source.kind != "random":
        return None
    cached = (Message("patch.gpt2_cached", "GPT-2 small's pretrained weights are cached on "
                      "this server: build it in the Build tab (pretrained) to see the real "
                      "circuit.") if gpt2_cached() else
              Message("patch.gpt2_not_cached", "GPT-2 small's pretrained weights are not "
                      "cached on this server: the Build tab downloads them once, where the hub "
                      "can be reached; offline, train the copying task in the Train tab."))
    return Message("patch.random", "Model A has random weights: these maps show how its random "
                   "parts happen to move this logit difference, which says nothing about how a "
                   "trained model finds the answer. {cached}", cached=cached)
