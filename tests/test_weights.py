"""Real weights in the book's GPTModel: GPT-2 checkpoints (made here with transformers, no
download) give transformers' logits and greedy tokens through the PyTorch and the C paths;
export and import round trips; the book's chapter-5 .pth files; refusals of bad files with a
message; the hub path against a local stand-in; the model cache keyed on the weights."""
import json
import shutil
from pathlib import Path

import pytest
import torch

transformers = pytest.importorskip("transformers")
from transformers import GPT2Config, GPT2LMHeadModel  # noqa: E402

from explorer import native  # noqa: E402
from explorer.book.config import GPTConfig, count_parameters  # noqa: E402
from explorer.book.generate import generate_steps  # noqa: E402
from explorer.book.kv_cache import KVCache  # noqa: E402
from explorer.book.load_weights import (book_shapes, gpt2_config,  # noqa: E402
                                        load_weights_into_gpt, empty_model)
from explorer.probes import trace  # noqa: E402
from explorer.runtime import checkpoints, export, loading, store  # noqa: E402
from explorer.runtime import hub as runtime_hub  # noqa: E402
from explorer.runtime.build import build_model  # noqa: E402
from explorer.runtime.cache import ModelCache  # noqa: E402
from explorer.runtime.memory import model_bytes  # noqa: E402
from explorer.runtime.sources import ModelKey, WeightsSource  # noqa: E402

from engine_variants import VARIANT_IDS, VARIANTS  # noqa: E402
from hub_stand_in import COMMIT, HubStandIn  # noqa: E402

MB = 1024 ** 2
C = dict(step=native.model_step, summarize=native.next_token_summary)

# Small GPT-2 shapes, each away from GPT-2 small in some way transformers allows.
HF_SHAPES = {
    "tied, 4 heads": dict(n_embd=64, n_layer=2, n_head=4, n_positions=48, vocab_size=211),
    "3 layers, 3 heads, n_inner=2x": dict(n_embd=48, n_layer=3, n_head=3, n_positions=40,
                                          vocab_size=97, n_inner=96),
    "untied head, exact GELU": dict(n_embd=32, n_layer=2, n_head=2, n_positions=32,
                                    vocab_size=150, tie_word_embeddings=False,
                                    activation_function="gelu"),
    "1 layer, 1 head, relu": dict(n_embd=16, n_layer=1, n_head=1, n_positions=32,
                                  vocab_size=64, activation_function="relu"),
}


def make_hf_checkpoint(folder: Path, seed=0, **shape) -> GPT2LMHeadModel:
    """A random GPT-2 saved with save_pretrained. Every weight (LayerNorms included) is drawn
    at random, so that a swapped, untransposed or dropped tensor changes the logits."""
    torch.manual_seed(seed)
    config = GPT2Config(bos_token_id=None, eos_token_id=None, attn_implementation="eager",
                        **shape)
    model = GPT2LMHeadModel(config).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.normal_(1.0 if ".ln_" in name and name.endswith("weight") else 0.0, 0.3)
    model.save_pretrained(folder)
    return model


def prompt(vocab, n=6, seed=1):
    return torch.randint(0, vocab, (1, n), generator=torch.Generator().manual_seed(seed))


def hf_greedy(hf, ids, steps):
    out = ids
    with torch.no_grad():
        for _ in range(steps):
            out = torch.cat([out, hf(out).logits[:, -1:].argmax(-1)], dim=1)
    return out[0, ids.shape[1]:].tolist()


@pytest.fixture(autouse=True)
def weights_store(tmp_path, monkeypatch):
    """Converted checkpoints go to this test's own folder."""
    monkeypatch.setenv(store.STORE_ENV, str(tmp_path / "store"))
    return tmp_path / "store"


@pytest.fixture
def cache():
    return ModelCache(budget_bytes=512 * MB)


# ---------------------------------------------------------------------------------------------
# GPT-2 checkpoints against transformers
@pytest.mark.parametrize("shape", list(HF_SHAPES), ids=list(HF_SHAPES))
def test_a_gpt2_checkpoint_gives_transformers_logits(tmp_path, cache, shape):
    hf = make_hf_checkpoint(tmp_path, **HF_SHAPES[shape])
    model, key = loading.load_file(tmp_path / "model.safetensors", cache=cache)
    ids = prompt(hf.config.vocab_size, n=hf.config.n_positions)
    with torch.no_grad():
        expected = hf(ids).logits
    got = model(ids)
    assert expected.abs().max() > 1.0        # logits large enough for a wrong map to show
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=0)
    cfg = key.config
    assert cfg.qkv_bias and cfg.n_heads == hf.config.n_head
    assert cfg.tie_weights == hf.config.tie_word_embeddings
    assert key.source.kind == "file" and key.source.layout == "gpt2"


def test_openai_files_on_the_hub_load_unprefixed_names_and_mask_buffers_skipped(tmp_path,
                                                                               cache):
    """OpenAI's model.safetensors on the hub names tensors without ``transformer.`` and keeps
    each block's causal mask (``h.0.attn.bias``, float32, 1x1xNxN) and ``attn.masked_bias``."""
    from safetensors.torch import load_file, save_file
    hf = make_hf_checkpoint(tmp_path, **HF_SHAPES["tied, 4 heads"])
    n = hf.config.n_positions
    tensors = {k.removeprefix("transformer."): v
               for k, v in load_file(tmp_path / "model.safetensors").items()}
    for i in range(hf.config.n_layer):
        tensors[f"h.{i}.attn.bias"] = torch.tril(torch.ones(n, n)).view(1, 1, n, n)
        tensors[f"h.{i}.attn.masked_bias"] = torch.tensor(-1e4)
    (tmp_path / "config.json").unlink()          # as from the hub: the file alone
    save_file(tensors, tmp_path / "model.safetensors")
    model, key = loading.load_file(tmp_path / "model.safetensors", cache=cache)
    assert key.config.n_heads == 1                # 64 / GPT-2's head size of 64, guessed
    model, key = loading.load_file(tmp_path / "model.safetensors", cache=cache,
                                   config={"n_head": 4})
    ids = prompt(hf.config.vocab_size)
    with torch.no_grad():
        torch.testing.assert_close(model(ids), hf(ids).logits, atol=1e-5, rtol=0)


def test_the_tied_head_is_the_embedding_and_counted_once(tmp_path, cache):
    make_hf_checkpoint(tmp_path, **HF_SHAPES["tied, 4 heads"])
    model, key = loading.load_file(tmp_path / "model.safetensors", cache=cache)
    assert model.out_head.weight is model.tok_emb.weight
    assert model.out_head.weight.data_ptr() == model.tok_emb.weight.data_ptr()
    held = sum(p.numel() for p in model.parameters())   # parameters() yields a shared one once
    counts = count_parameters(key.config)
    assert counts.output_head_tied and counts.output_head == 0 and held == counts.total
    assert "tied" in " ".join(counts.notes())
    assert cache.used_bytes() == model_bytes(key.config) == held * 4


@pytest.mark.parametrize("shape", ["tied, 4 heads", "untied head, exact GELU"])
def test_greedy_tokens_match_transformers_through_pytorch_and_c(tmp_path, cache, shape):
    hf = make_hf_checkpoint(tmp_path, **HF_SHAPES[shape])
    model, _ = loading.load_file(tmp_path / "model.safetensors", cache=cache)
    ids = prompt(hf.config.vocab_size, n=5)
    expected = hf_greedy(hf, ids, 20)
    book = [s.token_id for s in generate_steps(model, ids[0].tolist(), 20, use_cache=False)]
    cached = [s.token_id for s in generate_steps(model, ids[0].tolist(), 20)]
    fast_steps = list(generate_steps(model, ids[0].tolist(), 20, **C))
    assert book == cached == [s.token_id for s in fast_steps] == expected
    if native.available():
        assert all(s.fast_step for s in fast_steps[1:])   # the C step ran every token


@pytest.mark.skipif(not native.available(), reason="no C compiler")
def test_the_c_step_accepts_the_tied_biased_gpt2_shape_and_gives_its_logits(tmp_path, cache):
    hf = make_hf_checkpoint(tmp_path, **HF_SHAPES["tied, 4 heads"])
    model, _ = loading.load_file(tmp_path / "model.safetensors", cache=cache)
    ids = prompt(hf.config.vocab_size, n=12)
    book_cache, c_cache = KVCache(model), KVCache(model)
    with torch.inference_mode():
        model(ids[:, :4], cache=book_cache)
        model(ids[:, :4], cache=c_cache)
        for t in range(4, ids.shape[1]):
            expected = model(ids[:, t:t + 1], cache=book_cache, last_only=True)
            got = native.model_step(model, int(ids[0, t]), c_cache)
            assert got is not None
            torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)


def test_trace_attention_and_lens_run_on_loaded_weights(tmp_path, cache):
    hf = make_hf_checkpoint(tmp_path, **HF_SHAPES["3 layers, 3 heads, n_inner=2x"])
    model, _ = loading.load_file(tmp_path / "model.safetensors", cache=cache)
    ids = prompt(hf.config.vocab_size, n=10)
    with torch.no_grad():
        out = hf(ids, output_attentions=True)
    tr = trace(model, ids[0].tolist(), attention_layers="all", lens="all", keep_logits=True)
    torch.testing.assert_close(torch.from_numpy(tr.logits), out.logits[0], atol=1e-5, rtol=0)
    for layer in range(hf.config.n_layer):
        torch.testing.assert_close(torch.from_numpy(tr.attention[layer]),
                                   out.attentions[layer][0], atol=1e-5, rtol=0)
    # The lens at the last layer reads the model's own prediction.
    assert tr.lens_ids[-1].tolist() == out.logits[0].argmax(-1).tolist()


def test_the_books_load_weights_into_gpt_takes_hf_tensors(tmp_path):
    hf = make_hf_checkpoint(tmp_path, **HF_SHAPES["tied, 4 heads"])
    cfg = checkpoints.inspect_file(tmp_path / "model.safetensors").config
    gpt = load_weights_into_gpt(empty_model(cfg), hf.state_dict()).eval()   # no dropout
    ids = prompt(hf.config.vocab_size)
    with torch.no_grad():
        torch.testing.assert_close(gpt(ids), hf(ids).logits, atol=1e-5, rtol=0)


def test_gpt2_presets_are_the_released_models():
    small = gpt2_config("gpt2-small")
    assert small.qkv_bias and small.tie_weights
    assert count_parameters(small).total == 124_439_808            # GPT-2 small, as released
    assert count_parameters(gpt2_config("gpt2-xl")).total == 1_557_611_200


# ---------------------------------------------------------------------------------------------
# Export and import
@pytest.mark.parametrize("variant", VARIANT_IDS)
def test_export_then_import_gives_identical_logits(tmp_path, cache, variant):
    model = build_model(VARIANTS[variant], seed=11, device="cpu")
    export.export_model(model, tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    assert {k: config[k] for k in VARIANTS[variant].to_dict()} == VARIANTS[variant].to_dict()
    shutil.move(tmp_path / "config.json", tmp_path / "elsewhere.json")   # the header suffices
    back, key = loading.load_file(tmp_path / "model.safetensors", cache=cache)
    assert key.config == model.cfg
    ids = prompt(model.cfg.vocab_size, n=model.cfg.context_length)
    assert torch.equal(back(ids), model(ids))


@pytest.mark.parametrize("variant", [v for v in VARIANT_IDS
                                     if VARIANTS[v].norm_placement == "pre"
                                     and VARIANTS[v].shortcut
                                     and VARIANTS[v].pos_encoding == "learned"])
def test_export_in_hf_layout_loads_in_transformers_and_back(tmp_path, cache, variant):
    model = build_model(VARIANTS[variant], seed=12, device="cpu")
    export.export_model(model, tmp_path, hf_layout=True)
    hf = GPT2LMHeadModel.from_pretrained(tmp_path, attn_implementation="eager").eval()
    ids = prompt(model.cfg.vocab_size, n=model.cfg.context_length)
    with torch.no_grad():
        torch.testing.assert_close(hf(ids).logits, model(ids), atol=1e-5, rtol=0)
    back, key = loading.load_file(tmp_path / "model.safetensors", cache=cache)
    assert key.config == model.cfg and key.source.layout == "gpt2"
    assert torch.equal(back(ids), model(ids))


def test_exporting_a_model_twice_gives_the_same_file(tmp_path):
    model = build_model(VARIANTS["book"], seed=3, device="cpu")
    first = export.export_model(model, tmp_path / "a")[0]
    second = export.export_model(model, tmp_path / "b")[0]
    assert first.read_bytes() == second.read_bytes()


def test_a_model_that_is_not_gpt2_shaped_is_not_exported_in_hf_layout(tmp_path):
    model = build_model(VARIANTS["pos_encoding=rope"], seed=1, device="cpu")
    with pytest.raises(ValueError, match="book's layout"):
        export.export_model(model, tmp_path, hf_layout=True)
    assert not (tmp_path / "model.safetensors").exists()


def test_a_loaded_gpt2_exports_and_comes_back_identical(tmp_path, cache):
    make_hf_checkpoint(tmp_path / "in", **HF_SHAPES["tied, 4 heads"])
    model, key = loading.load_file(tmp_path / "in" / "model.safetensors", cache=cache)
    export.export_model(model, tmp_path / "out", source=key.source)
    assert "from file" in json.loads((tmp_path / "out" / "config.json").read_text())[
        "weights_source"]
    back, _ = loading.load_file(tmp_path / "out" / "model.safetensors", cache=cache)
    ids = prompt(key.config.vocab_size)
    assert torch.equal(back(ids), model(ids)) and back.out_head.weight is back.tok_emb.weight


# ---------------------------------------------------------------------------------------------
# The book's chapter-5 checkpoints
BOOK = GPTConfig(vocab_size=120, context_length=24, emb_dim=128, n_heads=2, n_layers=2,
                 drop_rate=0.1, qkv_bias=False)


def book_state_dict(model):
    """As the book's model saves it: its MultiHeadAttention registers the causal mask."""
    sd = dict(model.state_dict())
    n = model.cfg.context_length
    for i in range(model.cfg.n_layers):
        sd[f"trf_blocks.{i}.att.mask"] = torch.triu(torch.ones(n, n), diagonal=1)
    return sd


def test_the_books_model_pth_loads_with_its_mask_buffers(tmp_path, cache):
    model = build_model(BOOK, seed=5, device="cpu")
    torch.save(book_state_dict(model), tmp_path / "model.pth")
    back, key = loading.load_file(tmp_path / "model.pth", cache=cache)
    assert key.config == BOOK                  # n_heads from GPT-2's head size 64
    ids = prompt(BOOK.vocab_size)
    assert torch.equal(back(ids), model(ids))


def test_the_books_model_and_optimizer_pth_loads(tmp_path, cache):
    cfg = BOOK.replace(n_heads=4, qkv_bias=True)
    model = build_model(cfg, seed=6, device="cpu").train().requires_grad_(True)
    optimizer = torch.optim.AdamW(model.parameters(), lr=4e-4, weight_decay=0.1)
    ids = prompt(cfg.vocab_size)
    torch.nn.functional.cross_entropy(model(ids).flatten(0, 1), ids.flatten()).backward()
    optimizer.step()
    torch.save({"model_state_dict": book_state_dict(model),
                "optimizer_state_dict": optimizer.state_dict()},
               tmp_path / "model_and_optimizer.pth")
    (tmp_path / "config.json").write_text(json.dumps(cfg.to_dict()))  # says 4 heads
    back, key = loading.load_file(tmp_path / "model_and_optimizer.pth", cache=cache)
    assert key.config == cfg
    model.eval()
    with torch.no_grad():
        assert torch.equal(back(ids), model(ids))


class RunsCode:
    """A pickle that, when unpickled, creates a file: a stand-in for a malicious one."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (Path(self.marker),))


def test_a_pickle_that_would_run_code_is_refused_without_running_it(tmp_path, cache):
    marker = tmp_path / "code-ran"
    sd = book_state_dict(build_model(BOOK, seed=5, device="cpu"))
    torch.save({"model_state_dict": sd, "extra": RunsCode(marker)}, tmp_path / "model.pth")
    with pytest.raises(ValueError, match="could run code"):
        loading.load_file(tmp_path / "model.pth", cache=cache)
    assert not marker.exists() and len(cache) == 0
    # The file really runs code when unpickled without weights_only: the check above can fail.
    torch.load(tmp_path / "model.pth", weights_only=False)
    assert marker.exists()


# ---------------------------------------------------------------------------------------------
# Bad files
def test_a_truncated_safetensors_file_is_refused(tmp_path, cache):
    make_hf_checkpoint(tmp_path, **HF_SHAPES["tied, 4 heads"])
    path = tmp_path / "model.safetensors"
    data = path.read_bytes()
    path.write_bytes(data[:-1000])
    with pytest.raises(ValueError, match="cut short.*again"):
        loading.load_file(path, cache=cache)
    path.write_bytes(data[:5])
    with pytest.raises(ValueError, match="cut short"):
        loading.load_file(path, cache=cache)


def test_a_truncated_pth_is_refused(tmp_path, cache):
    torch.save(book_state_dict(build_model(BOOK, seed=5, device="cpu")), tmp_path / "model.pth")
    path = tmp_path / "model.pth"
    path.write_bytes(path.read_bytes()[:-5000])
    with pytest.raises(ValueError, match="could not be read"):
        loading.load_file(path, cache=cache)


def _hf_tensors(tmp_path):
    from safetensors.torch import load_file
    make_hf_checkpoint(tmp_path, **HF_SHAPES["tied, 4 heads"])
    return load_file(tmp_path / "model.safetensors")


def test_a_wrong_shape_is_refused_naming_the_tensor(tmp_path, cache):
    from safetensors.torch import save_file
    tensors = _hf_tensors(tmp_path)
    tensors["transformer.h.1.mlp.c_fc.weight"] = torch.zeros(64, 200)
    save_file(tensors, tmp_path / "model.safetensors")
    with pytest.raises(ValueError, match=r"wrong shape \(1\): h\.1\.mlp\.c_fc\.weight: "
                                         r"model\.safetensors has \(64, 200\), the model needs "
                                         r"\(64, 256\)"):
        loading.load_file(tmp_path / "model.safetensors", cache=cache)


def test_a_missing_key_is_refused_naming_it(tmp_path, cache):
    from safetensors.torch import save_file
    tensors = _hf_tensors(tmp_path)
    del tensors["transformer.h.1.attn.c_proj.bias"]
    tensors["transformer.h.1.attn.unknown"] = torch.zeros(3)
    save_file(tensors, tmp_path / "model.safetensors")
    with pytest.raises(ValueError) as err:
        loading.load_file(tmp_path / "model.safetensors", cache=cache)
    assert "missing from model.safetensors (1): h.1.attn.c_proj.bias" in str(err.value)
    assert "not in the model (1): h.1.attn.unknown" in str(err.value)


def test_a_book_checkpoint_missing_a_layer_tensor_is_refused(tmp_path, cache):
    sd = book_state_dict(build_model(BOOK, seed=5, device="cpu"))
    del sd["trf_blocks.1.ff.layers.2.bias"]
    torch.save(sd, tmp_path / "model.pth")
    with pytest.raises(ValueError, match=r"missing from model\.pth \(1\): "
                                         r"trf_blocks\.1\.ff\.layers\.2\.bias"):
        loading.load_file(tmp_path / "model.pth", cache=cache)


@pytest.mark.parametrize("content, message", [
    (b"", "empty or cut short"), (b"not a model at all, just text", "not a safetensors"),
    (b"\x10\x00\x00\x00\x00\x00\x00\x00{not json here!}", "not JSON")])
def test_files_that_are_not_checkpoints_are_refused(tmp_path, cache, content, message):
    (tmp_path / "model.safetensors").write_bytes(content)
    with pytest.raises(ValueError, match=message):
        loading.load_file(tmp_path / "model.safetensors", cache=cache)


def test_a_missing_file_is_refused(tmp_path, cache):
    with pytest.raises(ValueError, match="There is no file at .*upload"):
        loading.load_file(tmp_path / "nothing.safetensors", cache=cache)


def test_a_file_over_the_budget_is_refused_before_loading(tmp_path, monkeypatch):
    make_hf_checkpoint(tmp_path, **HF_SHAPES["tied, 4 heads"])
    monkeypatch.setattr(store, "load_into_model",
                        lambda *a, **k: pytest.fail("nothing may be loaded"))
    with pytest.raises(ValueError, match=r"needs 1 MB .* budget is 0 MB"):
        loading.load_file(tmp_path / "model.safetensors", cache=ModelCache(budget_bytes=1000))


def test_a_file_changed_after_it_was_chosen_is_refused(tmp_path, cache):
    make_hf_checkpoint(tmp_path, **HF_SHAPES["tied, 4 heads"])
    path = tmp_path / "model.safetensors"
    cfg, source, _ = checkpoints.file_source(path)
    make_hf_checkpoint(tmp_path, seed=3, **HF_SHAPES["tied, 4 heads"])
    with pytest.raises(ValueError, match="has changed"):
        cache.get(cache.key(cfg, device="cpu", source=source))


# ---------------------------------------------------------------------------------------------
# The cache keys on the weights
def test_random_keys_are_as_before_and_say_so(cache):
    cfg = VARIANTS["book"]
    key = cache.key(cfg, seed=3, device="cpu")
    assert key == ModelKey(cfg, 3, "cpu", "float32")
    assert key.source == WeightsSource.random(3) and key.source.caption == "random, seed 3"
    model, cached = cache.get(key)
    assert not cached and torch.equal(model.tok_emb.weight,
                                      build_model(cfg, seed=3, device="cpu").tok_emb.weight)
    assert cache.get(cache.key(cfg, seed=3, device="cpu")) == (model, True)


def test_two_sessions_on_the_same_checkpoint_share_one_copy(tmp_path, cache):
    make_hf_checkpoint(tmp_path / "a", **HF_SHAPES["tied, 4 heads"])
    (tmp_path / "b").mkdir()
    shutil.copy(tmp_path / "a" / "model.safetensors", tmp_path / "b" / "upload.safetensors")
    shutil.copy(tmp_path / "a" / "config.json", tmp_path / "b" / "config.json")
    first, key_a = loading.load_file(tmp_path / "a" / "model.safetensors", cache=cache)
    second, key_b = loading.load_file(tmp_path / "b" / "upload.safetensors", cache=cache)
    assert key_a == key_b and first is second and len(cache) == 1
    assert key_a.source.caption.startswith("from file model.safetensors (sha256 ")
    assert key_a.source.digest == checkpoints.sha256_file(tmp_path / "a" / "model.safetensors")


def test_a_different_checkpoint_is_a_different_model(tmp_path, cache):
    make_hf_checkpoint(tmp_path / "a", seed=0, **HF_SHAPES["tied, 4 heads"])
    make_hf_checkpoint(tmp_path / "b", seed=1, **HF_SHAPES["tied, 4 heads"])
    a, key_a = loading.load_file(tmp_path / "a" / "model.safetensors", cache=cache)
    b, key_b = loading.load_file(tmp_path / "b" / "model.safetensors", cache=cache)
    assert key_a != key_b and a is not b and len(cache) == 2


def test_an_evicted_checkpoint_is_reloaded_identically(tmp_path):
    make_hf_checkpoint(tmp_path, **HF_SHAPES["tied, 4 heads"])
    cfg, source, _ = checkpoints.file_source(tmp_path / "model.safetensors")
    cache = ModelCache(budget_bytes=int(1.5 * model_bytes(cfg)))
    key = cache.key(cfg, device="cpu", source=source)
    first, _ = cache.get(key)
    cache.get(cache.key(cfg, seed=1, device="cpu"))   # a random model of the same size evicts it
    assert key not in cache
    again, cached = cache.get(key)
    assert not cached and torch.equal(again.tok_emb.weight, first.tok_emb.weight)


def test_a_loaded_checkpoint_is_reloaded_from_the_store_after_its_file_is_gone(tmp_path, cache,
                                                                                weights_store):
    make_hf_checkpoint(tmp_path / "upload", **HF_SHAPES["tied, 4 heads"])
    first, key = loading.load_file(tmp_path / "upload" / "model.safetensors", cache=cache)
    ids = prompt(key.config.vocab_size)
    expected = first(ids)
    assert store.stored_path(key.source, key.config).parent == weights_store
    shutil.rmtree(tmp_path / "upload")        # Gradio deletes uploads; the store keeps them
    cache.clear()
    again, cached = cache.get(key)
    assert not cached and again is not first and torch.equal(again(ids), expected)


def test_changing_a_loaded_models_weights_never_changes_the_stored_file(tmp_path, cache):
    make_hf_checkpoint(tmp_path, **HF_SHAPES["tied, 4 heads"])
    model, key = loading.load_file(tmp_path / "model.safetensors", cache=cache)
    before = model.tok_emb.weight.clone()
    with torch.no_grad():
        model.tok_emb.weight.add_(1.0)        # as a training step would
    cache.clear()
    again, _ = cache.get(key)
    assert torch.equal(again.tok_emb.weight, before)


# ---------------------------------------------------------------------------------------------
# The hub, through huggingface_hub, against a local stand-in
@pytest.fixture
def tiny_gpt2(monkeypatch, tmp_path):
    """A tiny GPT-2 served as openai-community/gpt2 (the real one is 548 MB): the explorer's
    "gpt2-small" config is made this one's for the test."""
    hf = make_hf_checkpoint(tmp_path / "repo", **HF_SHAPES["tied, 4 heads"])
    cfg = checkpoints.inspect_file(tmp_path / "repo" / "model.safetensors").config
    real = runtime_hub.gpt2_config
    monkeypatch.setattr(runtime_hub, "gpt2_config",
                        lambda size: cfg if size == "gpt2-small" else real(size))
    return hf, tmp_path / "repo" / "model.safetensors"


def test_pretrained_download_reports_progress_and_reuses_the_hub_cache(tiny_gpt2, tmp_path,
                                                                      monkeypatch):
    from huggingface_hub import constants
    hf, file = tiny_gpt2
    monkeypatch.setattr(constants, "DOWNLOAD_CHUNK_SIZE", 64 * 1024)  # 10 MB: one piece here
    reports = []
    cache = ModelCache(budget_bytes=512 * MB)
    with HubStandIn({("openai-community/gpt2", "model.safetensors"): file}) as hub:
        model, key = loading.load_pretrained(
            "small", progress=lambda f, text: reports.append((f, text)), cache=cache,
            cache_dir=tmp_path / "hf-cache", endpoint=hub.url)
        assert len(hub.gets) == 1
        fractions = [f for f, text in reports if text.startswith("Downloading")]
        assert len(fractions) > 2 and fractions == sorted(fractions) and fractions[-1] == 1.0
        assert any(f"{file.stat().st_size / 1e6:,.0f} MB" in t for _, t in reports)
        assert any(t.startswith("Converting model.safetensors") for _, t in reports)
        # A second session: the hub cache serves the file, and the model cache the model.
        again, key_again = loading.load_pretrained("gpt2-small", cache=cache,
                                                   cache_dir=tmp_path / "hf-cache",
                                                   endpoint=hub.url)
        assert len(hub.gets) == 1 and again is model and key_again == key
        # A new process (an empty model cache), as on a Space whose build preloaded the file:
        # the hub's cache serves it without one request to the hub.
        requests = len(hub.heads) + len(hub.gets)
        loading.load_pretrained("small", cache=ModelCache(budget_bytes=512 * MB),
                                cache_dir=tmp_path / "hf-cache", endpoint=hub.url)
        assert len(hub.heads) + len(hub.gets) == requests
    assert key.source.caption == "pretrained GPT-2 small (OpenAI)"
    assert key.source.revision == COMMIT
    assert key.source.digest == checkpoints.sha256_file(file)
    ids = prompt(hf.config.vocab_size)
    with torch.no_grad():
        torch.testing.assert_close(model(ids), hf(ids).logits, atol=1e-5, rtol=0)


def test_offline_the_hub_cache_is_used_and_without_it_the_message_says_what_to_do(
        tiny_gpt2, tmp_path, monkeypatch):
    _, file = tiny_gpt2
    from huggingface_hub import constants
    with HubStandIn({("openai-community/gpt2", "model.safetensors"): file}) as hub:
        runtime_hub.pretrained_source("small", cache_dir=tmp_path / "hf-cache", endpoint=hub.url)
        monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
        requests = len(hub.heads) + len(hub.gets)
        cfg, source = runtime_hub.pretrained_source("small", cache_dir=tmp_path / "hf-cache",
                                                endpoint=hub.url)
        assert len(hub.heads) + len(hub.gets) == requests      # offline: not one request
        assert source.revision == COMMIT
        with pytest.raises(ValueError) as err:
            runtime_hub.pretrained_source("small", cache_dir=tmp_path / "empty-cache",
                                      endpoint=hub.url)
    text = str(err.value)
    for needed in ("HF_HUB_OFFLINE", "hf download openai-community/gpt2 model.safetensors",
                   "models--openai-community--gpt2", "upload", "from file"):
        assert needed in text


def test_an_unreachable_hub_gets_the_same_advice_without_the_clients_back_off(
        tiny_gpt2, tmp_path, monkeypatch):
    # huggingface_hub retries a refused connection with back-off (~23 s of waiting) before it
    # looks in its cache; the explorer's one quick connection answers first. Any wait of the
    # client's is recorded (not slept): there must be none.
    from huggingface_hub.utils import _http
    waits = []
    monkeypatch.setattr(_http.time, "sleep", waits.append)
    nothing_there = "http://127.0.0.1:9"   # nothing listens there
    assert not runtime_hub.hub_reachable(nothing_there)
    with pytest.raises(ValueError, match="cannot be reached.*hf download"):
        runtime_hub.pretrained_source("small", cache_dir=tmp_path / "empty",
                                      endpoint=nothing_there)
    assert waits == [], f"the hub's client backed off {waits} before the advice"


def test_an_unreachable_hub_serves_the_file_its_cache_holds(tiny_gpt2, tmp_path, monkeypatch):
    from huggingface_hub.utils import _http
    _, file = tiny_gpt2
    with HubStandIn({("openai-community/gpt2", "model.safetensors"): file}) as hub:
        runtime_hub.pretrained_source("small", cache_dir=tmp_path / "hf-cache", endpoint=hub.url)
    waits = []
    monkeypatch.setattr(_http.time, "sleep", waits.append)
    # the stand-in has gone: its address refuses connections now
    cfg, source = runtime_hub.pretrained_source("small", cache_dir=tmp_path / "hf-cache",
                                                endpoint=hub.url)
    assert source.repo_id == "openai-community/gpt2" and source.revision == COMMIT
    assert waits == []


def test_the_budget_refuses_a_pretrained_size_before_any_download(tmp_path):
    def no_download(*args, **kwargs):
        raise AssertionError("nothing may be downloaded")

    with pytest.raises(ValueError) as err:
        runtime_hub.pretrained_source("xl", budget_bytes=2000 * MB, download=no_download)
    need = -(-model_bytes(gpt2_config("gpt2-xl")) // MB)
    assert f"needs {need:,} MB" in str(err.value) and "budget is 2,000 MB" in str(err.value)
    assert 5_900 < need < 6_000                                   # ~6.2 GB at float32


def test_an_unknown_size_is_refused():
    with pytest.raises(ValueError, match="small, medium, large and xl"):
        runtime_hub.pretrained_source("huge")


def test_book_shapes_list_every_weight_once():
    cfg = VARIANTS["tie_weights=True"]
    shapes = book_shapes(cfg)
    assert "out_head.weight" not in shapes
    assert sum(torch.Size(s).numel() for s in shapes.values()) == count_parameters(cfg).total


# ---------------------------------------------------------------------------------------------
# The store is bounded: least recently used checkpoints out
def _distinct_checkpoints(folder, n):
    """``n`` checkpoints of one small GPT-2 shape, each with other weights (another sha256)."""
    paths = []
    for i in range(n):
        make_hf_checkpoint(folder / str(i), seed=i, **HF_SHAPES["tied, 4 heads"])
        paths.append(folder / str(i) / "model.safetensors")
    return paths


def test_the_store_stays_within_its_limit_least_recently_used_out(tmp_path, monkeypatch,
                                                                   weights_store):
    paths = _distinct_checkpoints(tmp_path / "uploads", 10)
    one = checkpoints.file_source(paths[0])[1]
    cfg = checkpoints.inspect_file(paths[0]).config
    loading.load_file(paths[0], cache=ModelCache(budget_bytes=512 * MB))
    each = store.store_bytes()
    assert each > 0
    monkeypatch.setenv(store.STORE_LIMIT_ENV, str(3.5 * each / MB))   # room for three
    kept_in_use = None
    for i, path in enumerate(paths[1:], start=1):
        cache = ModelCache(budget_bytes=512 * MB)
        loading.load_file(path, cache=cache)
        if i == 5:   # used again: the most recently used stays
            kept_in_use = store.stored_path(one, cfg)
            loading.load_file(paths[0], cache=cache)
        assert store.store_bytes() <= 3.5 * each
    stored = sorted(p.name for p in weights_store.glob(store.STORED))
    assert len(stored) == 3
    assert kept_in_use.name not in stored          # five loads ago: out
    newest = store.stored_path(checkpoints.file_source(paths[-1])[1], cfg)
    assert newest.name in stored


def test_a_checkpoint_removed_from_the_store_is_converted_again_identically(tmp_path,
                                                                            monkeypatch):
    paths = _distinct_checkpoints(tmp_path / "uploads", 2)
    cache = ModelCache(budget_bytes=512 * MB)
    first, key = loading.load_file(paths[0], cache=cache)
    ids = prompt(key.config.vocab_size)
    expected = first(ids)
    monkeypatch.setenv(store.STORE_LIMIT_ENV, "0.001")          # room for the newest only
    loading.load_file(paths[1], cache=cache)
    assert not store.stored_path(key.source, key.config).exists()
    cache.clear()
    again, cached = cache.get(key)
    assert not cached and torch.equal(again(ids), expected)


@pytest.mark.parametrize("value", ["lots", "-1", "nan"])
def test_a_bad_store_limit_is_refused_clearly(monkeypatch, value):
    monkeypatch.setenv(store.STORE_LIMIT_ENV, value)
    with pytest.raises(ValueError, match=store.STORE_LIMIT_ENV):
        store.store_limit_bytes()
