"""GPTConfig: the book's numbers, accounting that matches a built model, and validation."""

import re
import time

import pytest
import torch
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from explorer.book.config import (
    ACTIVATIONS,
    GPT2_BY_REPO,
    GPT2_SIZES,
    GPT_CONFIG_124M,
    NORM_PLACEMENTS,
    POS_ENCODINGS,
    PRESETS,
    GPTConfig,
    count_parameters,
    get_preset,
)
from explorer.book.model import GPTModel
from explorer.runtime.build import build_model

from engine_variants import VARIANT_IDS, VARIANTS


def numel_on_meta(cfg) -> int:
    """Count a real model's parameters without allocating their storage."""
    with torch.device("meta"):
        model = GPTModel(cfg)
    return sum(p.numel() for p in model.parameters())


# ---------------------------------------------------------------------------------------------
# The book's published numbers (chapter 4, section 4.6, and exercise 4.2)
def test_gpt2_small_total_matches_book():
    assert count_parameters(GPT_CONFIG_124M).total == 163_009_536


def test_gpt2_small_without_output_head_matches_book():
    assert count_parameters(GPT_CONFIG_124M).total_without_output_head == 124_412_160


def test_gpt2_small_memory_matches_book():
    assert round(count_parameters(GPT_CONFIG_124M).memory_mb(), 2) == 621.83


def test_qkv_bias_adds_three_biases_per_block():
    counts = count_parameters({**GPT_CONFIG_124M, "qkv_bias": True})
    assert counts.total == 163_037_184


@pytest.mark.parametrize("name, total", [
    ("gpt2-medium", 406_212_608),
    ("gpt2-large", 838_220_800),
    ("gpt2-xl", 1_637_792_000),
])
def test_larger_gpt2_presets_match_book_exercise(name, total):
    assert count_parameters(get_preset(name)).total == total


def test_gpt2_sizes_are_one_table_and_the_presets_follow_it():
    """Each of OpenAI's four sizes once: its preset (GPT-2 small is the book's dict), its hub
    repository and its name on the page."""
    assert list(GPT2_SIZES) == ["gpt2-small", "gpt2-medium", "gpt2-large", "gpt2-xl"]
    assert [n for n in PRESETS if n.startswith("gpt2-")] == list(GPT2_SIZES)
    assert PRESETS["gpt2-small"] == GPTConfig.from_dict(GPT_CONFIG_124M)
    for name, size in GPT2_SIZES.items():
        assert PRESETS[name] == size.config() and GPT2_BY_REPO[size.repo_id] is size
        assert size.page_name == f"GPT-2 {size.short if size.short != 'xl' else 'XL'}"
    assert GPT2_SIZES["gpt2-small"].repo_id == "openai-community/gpt2"


def test_memory_halves_in_16_bit():
    counts = count_parameters(GPT_CONFIG_124M)
    assert counts.memory_mb("bfloat16") == pytest.approx(counts.memory_mb() / 2)
    with pytest.raises(ValueError, match="dtype must be one of"):
        counts.memory_mb("float8")


def test_unknown_preset_suggests_a_close_name():
    with pytest.raises(ValueError, match="Did you mean 'gpt2-small'"):
        get_preset("gpt2-smal")


# ---------------------------------------------------------------------------------------------
# Accounting agrees with the model that is actually built
def test_meta_device_build_allocates_nothing():
    with torch.device("meta"):
        model = GPTModel(PRESETS["gpt2-xl"])
    assert all(p.device.type == "meta" for p in model.parameters())


@pytest.mark.parametrize("name", [n for n in PRESETS if n.startswith("teach")])
def test_accounting_matches_built_teaching_preset(name):
    model = GPTModel(PRESETS[name])  # small enough to build for real
    assert count_parameters(PRESETS[name]).total == sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize("name", list(PRESETS))
def test_accounting_matches_meta_built_preset(name):
    assert count_parameters(PRESETS[name]).total == numel_on_meta(PRESETS[name])


@pytest.mark.parametrize("variant", VARIANT_IDS)
def test_accounting_matches_built_variant(variant):
    cfg = VARIANTS[variant]
    model = build_model(cfg, seed=0, device="cpu")
    assert count_parameters(cfg).total == sum(p.numel() for p in model.parameters())


small_configs = st.builds(
    lambda heads, head_dim, **kw: GPTConfig(n_heads=heads, emb_dim=heads * head_dim, **kw),
    heads=st.integers(1, 4),
    head_dim=st.sampled_from([2, 4, 6]),
    vocab_size=st.integers(1, 64),
    context_length=st.integers(1, 32),
    n_layers=st.integers(1, 3),
    drop_rate=st.sampled_from([0.0, 0.1]),
    qkv_bias=st.booleans(),
    norm_placement=st.sampled_from(NORM_PLACEMENTS),
    shortcut=st.booleans(),
    activation=st.sampled_from(ACTIVATIONS),
    ff_expansion=st.integers(1, 4),
    tie_weights=st.booleans(),
    pos_encoding=st.sampled_from(POS_ENCODINGS),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cfg=small_configs)
def test_accounting_matches_model_for_random_small_configs(cfg):
    counts = count_parameters(cfg)
    assert counts.total == numel_on_meta(cfg)
    assert sum(counts.breakdown().values()) == counts.total


@pytest.mark.parametrize("name", list(PRESETS))
def test_breakdown_sums_to_total(name):
    counts = count_parameters(PRESETS[name])
    assert sum(counts.breakdown().values()) == counts.total
    assert counts.total_without_output_head == counts.total - counts.breakdown()["output head"]


def test_tied_head_adds_no_parameters():
    untied = count_parameters(GPT_CONFIG_124M)
    tied = count_parameters({**GPT_CONFIG_124M, "tie_weights": True})
    assert tied.output_head == 0
    assert tied.total == untied.total_without_output_head


def test_gpt3_sized_config_is_counted_instantly_without_building(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("count_parameters must not build any module")

    monkeypatch.setattr(torch.nn.Module, "__init__", refuse)
    V, C, d, L = 50257, 2048, 12288, 96
    started = time.perf_counter()
    counts = count_parameters({**GPT_CONFIG_124M, "n_layers": L, "emb_dim": d, "n_heads": 96,
                               "context_length": C})
    elapsed = time.perf_counter() - started
    per_block = (4 * d * d + d) + (8 * d * d + 4 * d + d) + 4 * d  # attention, ff, two norms
    expected = V * d + C * d + L * per_block + 2 * d + d * V
    assert counts.total == expected
    assert 174e9 < counts.total_without_output_head < 176e9  # "GPT-3 175B"
    assert elapsed < 0.05


# ---------------------------------------------------------------------------------------------
# Building from the book's dict
def test_from_dict_accepts_book_dict_verbatim():
    cfg = GPTConfig.from_dict(GPT_CONFIG_124M)
    assert cfg == GPTConfig()  # defaults are the book's GPT-2 small
    for key, value in GPT_CONFIG_124M.items():
        assert getattr(cfg, key) == value


def test_from_dict_accepts_book_dict_without_qkv_bias():
    book = {k: v for k, v in GPT_CONFIG_124M.items() if k != "qkv_bias"}
    assert GPTConfig.from_dict(book).qkv_bias is False


def test_gpt_model_accepts_dict_or_config():
    cfg = PRESETS["teach-tiny"].replace(vocab_size=97)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(5)
        from_config = GPTModel(cfg)
        torch.manual_seed(5)
        from_dict = GPTModel(cfg.to_dict())
    assert from_dict.cfg == from_config.cfg == cfg
    a, b = from_config.state_dict(), from_dict.state_dict()
    assert a.keys() == b.keys()
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_float_sizes_from_number_boxes_are_accepted():
    cfg = GPTConfig(emb_dim=768.0, n_layers=12.0)
    assert cfg.emb_dim == 768 and isinstance(cfg.emb_dim, int)


def test_replace_and_to_dict_round_trip():
    cfg = PRESETS["teach-small"].replace(activation="relu")
    assert GPTConfig.from_dict(cfg.to_dict()) == cfg
    assert cfg.activation == "relu" and PRESETS["teach-small"].activation == "gelu"


# ---------------------------------------------------------------------------------------------
# Invalid configs: a ValueError a student can act on
def test_emb_dim_not_divisible_by_heads_lists_head_counts_that_work():
    with pytest.raises(ValueError, match="divisible by n_heads") as info:
        GPTConfig(emb_dim=770, n_heads=12)
    message = str(info.value)
    listed = re.search(r"Head counts that work with emb_dim=770: ([\d, ]+);", message)
    assert listed, message
    counts = [int(h) for h in listed.group(1).split(",")]
    assert 10 in counts and 14 in counts and 12 not in counts
    for heads in counts:  # every suggestion must really work
        assert GPTConfig(emb_dim=770, n_heads=heads).n_heads == heads
    dims = re.search(r"keep 12 heads with emb_dim (\d+) or (\d+)", message)
    assert dims, message
    for dim in dims.groups():
        assert GPTConfig(emb_dim=int(dim), n_heads=12).emb_dim == int(dim)


@pytest.mark.parametrize("key", ["vocab_size", "context_length", "emb_dim", "n_heads",
                                 "n_layers", "ff_expansion"])
@pytest.mark.parametrize("value", [0, -1])
def test_zero_or_negative_size_is_refused(key, value):
    with pytest.raises(ValueError, match=f"{key} must be at least 1"):
        GPTConfig.from_dict({**GPT_CONFIG_124M, key: value})


@pytest.mark.parametrize("rate", [1.0, -0.1, float("nan"), float("inf")])
def test_drop_rate_outside_unit_interval_is_refused(rate):
    with pytest.raises(ValueError, match=r"drop_rate must be in \[0, 1\)"):
        GPTConfig(drop_rate=rate)


def test_drop_rate_as_text_is_refused():
    with pytest.raises(ValueError, match="drop_rate must be a number"):
        GPTConfig(drop_rate="0.1")


def test_rope_with_odd_head_size_is_refused():
    with pytest.raises(ValueError, match="RoPE.*even"):
        GPTConfig(emb_dim=36, n_heads=4, pos_encoding="rope")  # head size 9
    assert GPTConfig(emb_dim=36, n_heads=4).head_dim == 9  # learned positions don't care


def test_unknown_key_is_refused_with_suggestion():
    with pytest.raises(ValueError, match="Unknown config key 'emb_size'.*Did you mean 'emb_dim'"):
        GPTConfig.from_dict({**GPT_CONFIG_124M, "emb_size": 768})


def test_unknown_key_suggestion_for_a_typo():
    with pytest.raises(ValueError, match="Unknown config key 'n_layer'.*Did you mean 'n_layers'"):
        GPTConfig.from_dict({"n_layer": 12})


def test_config_that_is_not_a_dict_is_refused():
    with pytest.raises(ValueError, match="must be a dict or GPTConfig"):
        GPTConfig.from_dict([("emb_dim", 768)])


@pytest.mark.parametrize("key, value, phrase", [
    ("emb_dim", "768", "emb_dim must be a whole number"),
    ("emb_dim", 768.5, "emb_dim must be a whole number"),
    ("n_layers", True, "n_layers must be a whole number"),
    ("context_length", float("inf"), "context_length must be a whole number"),
    ("qkv_bias", "yes", "qkv_bias must be True or False"),
    ("tie_weights", 1, "tie_weights must be True or False"),
])
def test_wrong_type_is_refused(key, value, phrase):
    with pytest.raises(ValueError, match=phrase):
        GPTConfig.from_dict({**GPT_CONFIG_124M, key: value})


@pytest.mark.parametrize("key, value", [
    ("norm_placement", "middle"),
    ("activation", "tanh"),
    ("pos_encoding", "sinusoidal"),
    ("activation", "GELU"),
])
def test_unknown_choice_is_refused(key, value):
    with pytest.raises(ValueError, match=f"{key} must be one of"):
        GPTConfig.from_dict({key: value})


KNOWN_KEYS = list(GPTConfig().to_dict())
config_values = st.one_of(
    st.integers(-(2 ** 70), 2 ** 70),
    st.integers(-2, 2000),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, 0.1, 0.5, 0.99, 1.0, 64.0, 768.0]),
    st.text(max_size=8),
    st.sampled_from(NORM_PLACEMENTS + ACTIVATIONS + POS_ENCODINGS),
    st.booleans(),
)
config_dicts = st.dictionaries(
    st.one_of(st.sampled_from(KNOWN_KEYS), st.text(max_size=10), st.integers()),
    config_values, max_size=6)


@settings(max_examples=300, deadline=None)
@given(d=config_dicts)
@example(d={})
@example(d={"emb_dim": 64.0, "n_heads": 4, "activation": "relu", "drop_rate": 0})
@example(d={"emb_dim": 2 ** 70, "n_heads": 3})
def test_any_dict_builds_a_config_or_raises_value_error(d):
    try:
        cfg = GPTConfig.from_dict(d)
    except ValueError:
        return
    assert isinstance(cfg, GPTConfig)
    assert GPTConfig.from_dict(cfg.to_dict()) == cfg
    assert cfg.emb_dim % cfg.n_heads == 0
    assert count_parameters(cfg).total > 0

