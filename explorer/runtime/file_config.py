"""What config a checkpoint has: a ``config.json`` beside it (or uploaded, or typed in), the
config inside our exports' safetensors header, and whatever cannot be read from them inferred
from the tensors' names and shapes (with the guesses listed, ``FileInfo.assumptions``).

Also the explorer's file format: ``model.safetensors`` + ``config.json``, the book's keys in
the header's metadata."""
from __future__ import annotations

import difflib
import json
from pathlib import Path

from ..book.config import GPTConfig, did_you_mean
from ..book.errors import ExplorerError, Text
from ..book.load_weights import check_hf_config, config_from_hf, strip_prefix

WEIGHTS_FILE = "model.safetensors"
CONFIG_FILE = "config.json"
METADATA_KEY = "gpt_explorer_config"   # the config, inside our exports' safetensors header
FORMAT = "gpt-explorer"

# A model's config.json is a few hundred bytes (GPT-2's: about 1 KB): more is not a config, and
# every config (beside a file, or uploaded with it) is read into memory whole.
MAX_CONFIG_BYTES = 64 * 1024


def read_config(path) -> dict:
    """A config.json: at most ``MAX_CONFIG_BYTES``, JSON, and a table (an object)."""
    path = Path(path)
    name = path.name
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_CONFIG_BYTES + 1)
    except OSError:
        raise ExplorerError("config_file.unreadable", "The config {name} could not be read; "
                            "upload it again.", name=name) from None
    if len(raw) > MAX_CONFIG_BYTES:
        raise ExplorerError("config_file.too_large", "The config {name} is over {limit_kb} KB: "
                            "not a model config (GPT-2's config.json is about 1 KB).", name=name,
                            limit_kb=MAX_CONFIG_BYTES // 1024)
    try:
        config = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise ExplorerError("config_file.not_json", "The config {name} is not valid JSON.",
                            name=name) from None
    if not isinstance(config, dict):
        raise ExplorerError("config_file.not_a_table", "The config {name} is not a table of "
                            "settings (a JSON object such as {{\"n_layer\": 12, ...}}), so it "
                            "cannot describe a model.", name=name)
    return config


def config_beside(path: Path) -> dict | None:
    """The config.json beside a checkpoint, if there is one."""
    beside = path.with_name(CONFIG_FILE)
    try:
        there = beside.is_file()
    except OSError:
        there = False
    return read_config(beside) if there else None


BOOK_KEYS = [f.name for f in GPTConfig.__dataclass_fields__.values()]


def book_part(config: dict) -> dict:
    return {k: v for k, v in config.items() if k in BOOK_KEYS}


def layout_of(shapes: dict) -> str:
    names = strip_prefix(shapes)
    if "wte.weight" in names:
        return "gpt2"
    if "tok_emb.weight" in shapes:
        return "book"
    raise ExplorerError("checkpoint.unknown_layout", "These weights are neither a GPT-2 "
                        "checkpoint (wte.weight, h.0.attn...) nor the book's GPTModel "
                        "(tok_emb.weight, trf_blocks.0.att...): found {found}.",
                        found=", ".join(list(shapes)[:5]))


def infer_gpt2_config(names: dict, given: dict, assumptions: list) -> GPTConfig:
    """The config of a file in Hugging Face's GPT-2 names: from the book's keys if the config
    has them (our exports, or a config passed in), else from Hugging Face's config.json, else
    from the shapes (with GPT-2's head size)."""
    check_hf_config(given)
    from_shapes = {"vocab_size": names["wte.weight"][0], "n_embd": names["wte.weight"][1],
                   "n_positions": names["wpe.weight"][0] if "wpe.weight" in names else 1024,
                   "n_layer": len({n.split(".")[1] for n in names if n.startswith("h.")}),
                   "tie_word_embeddings": "lm_head.weight" not in names}
    if "h.0.mlp.c_fc.weight" in names:
        from_shapes["n_inner"] = names["h.0.mlp.c_fc.weight"][1]
    book = book_part(given)
    if given.get("format") == FORMAT or ("n_heads" in book and "emb_dim" in book):
        return GPTConfig.from_dict({**book_part(config_from_hf(
            {**from_shapes, "n_head": book.get("n_heads", 1)}).to_dict()), **book})
    hf = {**from_shapes, **{k: v for k, v in given.items() if v is not None}}
    if "n_head" not in hf:
        hf["n_head"] = _guess_heads(hf["n_embd"], assumptions)
    return config_from_hf(hf)


def _guess_heads(emb_dim: int, assumptions: list) -> int:
    if emb_dim % 64:
        raise ExplorerError("checkpoint.heads_unknown", "The file does not say how many "
                            "attention heads the model has, and emb_dim={emb_dim} is not a "
                            "multiple of GPT-2's head size 64. Put a config.json with n_heads "
                            "beside it, or pass the config.", emb_dim=emb_dim)
    assumptions.append(Text("checkpoint.assumed_heads", "n_heads = {n_heads} (GPT-2's head size "
                            "of 64; no config given)", n_heads=emb_dim // 64))
    return emb_dim // 64


def infer_book_config(shapes: dict, given: dict, assumptions: list) -> GPTConfig:
    """The book's config from a state_dict's shapes, plus whatever a config gave."""
    vocab, emb = shapes["tok_emb.weight"]
    layers = len({n.split(".")[1] for n in shapes if n.startswith("trf_blocks.")})
    values = {"vocab_size": vocab, "emb_dim": emb, "n_layers": layers}
    if "pos_emb.weight" in shapes:
        values["context_length"] = shapes["pos_emb.weight"][0]
    else:
        values["pos_encoding"] = "rope"
        mask = shapes.get("trf_blocks.0.att.mask")
        if mask:
            values["context_length"] = mask[0]
    if layers:
        values["qkv_bias"] = "trf_blocks.0.att.W_query.bias" in shapes
        hidden = shapes.get("trf_blocks.0.ff.layers.0.weight", (4 * emb,))[0]
        values["ff_expansion"] = max(hidden // emb, 1)
        if "trf_blocks.0.norm1.scale" not in shapes:
            values["norm_placement"] = "none"
    values["tie_weights"] = "out_head.weight" not in shapes
    values.update(given)
    if "n_heads" not in values:
        values["n_heads"] = _guess_heads(emb, assumptions)
    if not given:
        assumptions.append(Text("checkpoint.assumed_book_choices", "the book's choices where "
                                "weights cannot tell (norm before attention, shortcuts, GELU)"))
    return GPTConfig.from_dict(values)


def given_config(config):
    if config is None:
        return None
    if isinstance(config, (str, Path)):
        return read_config(config)
    if isinstance(config, GPTConfig):
        return config.to_dict()
    if isinstance(config, dict):
        if "model_type" not in config:   # typed in, not a whole Hugging Face config.json
            known = [*BOOK_KEYS, *HF_KEYS, "format", "layout", "weights_source"]
            for key in config:
                if key not in known:
                    hint = difflib.get_close_matches(str(key), known, n=1, cutoff=0.6)
                    raise ExplorerError("checkpoint.unknown_config_key", "Unknown config key "
                                        "'{key}'.{did_you_mean} Known keys: the book's "
                                        "({book_keys}) or Hugging Face's ({hf_keys}).", key=key,
                                        did_you_mean=did_you_mean(hint),
                                        book_keys=", ".join(BOOK_KEYS), hf_keys=", ".join(HF_KEYS))
        return dict(config)
    raise ExplorerError("checkpoint.config_wrong_type", "config must be a dict, a GPTConfig or "
                        "the path of a config.json (got {kind}).", kind=type(config).__name__)


# The GPT2Config keys the explorer reads.
HF_KEYS = ("vocab_size", "n_positions", "n_embd", "n_layer", "n_head", "n_inner",
           "activation_function", "resid_pdrop", "embd_pdrop", "attn_pdrop",
           "layer_norm_epsilon", "tie_word_embeddings")
