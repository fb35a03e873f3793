"""The guided walk of the chapter's diagram: each stage's shape and statistics from a trace
(explorer/probes/stages.py) against the same tensors taken independently from a plain
forward pass (PyTorch hooks on the book's modules), for the book's block and its variants;
the diagram has one focusable button per stage, in the variant's order; the card shows them.
Fast: teach-tiny-sized models only."""
import re

import pytest
import torch

from explorer.app.plots.model import architecture_html
from explorer.app.plots.walk import stage_html
from explorer.book.config import PRESETS, count_parameters
from explorer.book.stages import STAGE_NAMES, STAGES_BY_NAME, stage_points, stages_of
from explorer.book.tokenizer import get_tokenizer
from explorer.probes import trace
from explorer.probes.stages import stage_details
from explorer.runtime.build import build_model

PROMPT = "Every effort moves you forward"
VARIANTS = {
    "pre-LN (book)": {},
    "post-LN": {"norm_placement": "post"},
    "no LayerNorm": {"norm_placement": "none"},
    "no shortcut": {"shortcut": False},
    "ReLU, x2, RoPE": {"activation": "relu", "ff_expansion": 2, "pos_encoding": "rope"},
}


def config(changes):
    return PRESETS["teach-tiny"].replace(n_layers=3, **changes)


def reference_tensors(model, ids):
    """Every stage's tensors from a plain forward pass, taken with hooks on the book's modules
    (not from the probe points): {(stage, block): [tensors, input before output]}."""
    seen, hooks = {}, []

    def keep(name):
        def hook(module, args, output):
            seen[name] = (args[0].detach().clone(), output.detach().clone())
        return hook

    for i, block in enumerate(model.trf_blocks):
        for part in ("norm1", "norm2", "att", "ff"):
            hooks.append(getattr(block, part).register_forward_hook(keep(f"{part}{i}")))
        hooks.append(block.ff.layers[0].register_forward_hook(keep(f"ff_pre{i}")))
        hooks.append(block.ff.layers[1].register_forward_hook(keep(f"ff_post{i}")))
        hooks.append(block.register_forward_hook(keep(f"block{i}")))
    hooks.append(model.final_norm.register_forward_hook(keep("final_norm")))
    with torch.inference_mode():
        logits = model(torch.tensor([ids]))
    for hook in hooks:
        hook.remove()
    cfg, out = model.cfg, {}
    post, norms = cfg.norm_placement == "post", cfg.norm_placement != "none"
    for i in range(cfg.n_layers):
        block_in, block_out = seen[f"block{i}"]
        attn = seen[f"att{i}"][1]
        if i == 0:
            out[("embeddings", None)] = [block_in]
        if norms:
            out[("norm1", i)] = list(seen[f"norm1{i}"])
            out[("norm2", i)] = list(seen[f"norm2{i}"])
        out[("attention", i)] = [attn]
        if cfg.shortcut:
            # x + attention output (dropout is off in eval mode); post-LN normalises this sum
            out[("shortcut1", i)] = [block_in + attn]
            out[("shortcut2", i)] = [seen[f"norm2{i}"][0] if post else block_out]
        out[("feed_forward", i)] = [seen[f"ff_pre{i}"][1], seen[f"ff_post{i}"][1],
                                    seen[f"ff{i}"][1]]
    out[("final_norm", None)] = list(seen["final_norm"])
    return out, logits


@pytest.fixture(scope="module", params=list(VARIANTS), ids=list(VARIANTS))
def traced(request):
    cfg = config(VARIANTS[request.param])
    model = build_model(cfg, seed=123, device="cpu", fused=False)
    ids = get_tokenizer().encode(PROMPT)
    return cfg, model, ids, trace(model, ids, attention_layers=None, lens=None, entropy=False)


def test_each_stages_shape_and_statistics_match_the_tensor_there(traced):
    cfg, model, ids, tr = traced
    expected, _ = reference_tensors(model, ids)
    assert {stage for stage, _ in expected} | {"out_head"} == set(stages_of(cfg))
    for (stage, block), tensors in expected.items():
        details = stage_details(tr, stage, block)
        assert len(details.points) == len(tensors), (stage, block)
        for point, tensor in zip(details.points, tensors):
            assert point.shape == tuple(tensor.shape), (stage, block, point.point)
            x = tensor.double()
            want = {"mean": x.mean(), "std": x.std(unbiased=False), "min": x.min(),
                    "max": x.max()}
            for stat, value in want.items():
                assert point.stats[stat] == pytest.approx(float(value), rel=1e-4, abs=1e-5), \
                    (stage, block, point.point, stat)
        assert details.shape == tuple(tensors[-1].shape)
        assert (details.block is None) == (STAGES_BY_NAME[stage].scope == "model")


def test_the_output_head_shows_the_logits_shape_and_the_models_next_token(traced):
    cfg, model, ids, tr = traced
    _, logits = reference_tensors(model, ids)
    details = stage_details(tr, "out_head")
    assert details.shape == tuple(logits.shape) == (1, len(ids), cfg.vocab_size)
    assert details.points == ()
    top = int(logits[0, -1].argmax())
    assert details.next_token[0] == get_tokenizer().token_text(top)
    assert details.next_token[1] == pytest.approx(float(logits[0, -1].softmax(-1)[top]),
                                                  rel=1e-4)


def test_the_feed_forward_hidden_layer_is_ff_expansion_times_wider():
    cfg = config({"ff_expansion": 2})
    tr = trace(build_model(cfg, device="cpu"), get_tokenizer().encode(PROMPT))
    widths = [p.shape[2] for p in stage_details(tr, "feed_forward", 1).points]
    assert widths == [2 * cfg.emb_dim, 2 * cfg.emb_dim, cfg.emb_dim]


def test_a_stage_the_model_lacks_or_a_block_beyond_it_is_refused_with_a_message():
    tr = trace(build_model(config({"norm_placement": "none", "shortcut": False}), device="cpu"),
               get_tokenizer().encode(PROMPT))
    with pytest.raises(ValueError, match="no LayerNorm.*no norm2 stage"):
        stage_details(tr, "norm2", 0)
    with pytest.raises(ValueError, match="no shortcut connections.*no shortcut1 stage"):
        stage_details(tr, "shortcut1", 0)
    with pytest.raises(ValueError, match="Unknown stage 'norm3'"):
        stage_details(tr, "norm3", 0)
    for block in (3, -1, None, True, 1.0):
        with pytest.raises(ValueError, match="does not exist: this model has blocks 0 to 2"):
            stage_details(tr, "attention", block)


def test_the_sections_are_the_books():
    sections = {name: STAGES_BY_NAME[name].section for name in STAGE_NAMES}
    assert sections == {"embeddings": "2.7, 2.8", "norm1": "4.2", "attention": "3.5, 3.6",
                        "shortcut1": "4.4", "norm2": "4.2", "feed_forward": "4.3",
                        "shortcut2": "4.4", "final_norm": "4.2, 4.6", "out_head": "4.6"}


# ---------------------------------------------------------------------------------------------
# The diagram and the card
STAGE_ELEMENT = re.compile(r'<div data-stage="(\w+)" role="button" tabindex="0" '
                           r'aria-label="[^"]+" title="[^"]+"')


@pytest.mark.parametrize("changes", list(VARIANTS.values()), ids=list(VARIANTS))
def test_the_diagram_has_one_focusable_button_per_stage_in_the_variants_order(changes):
    cfg = config(changes)
    html = architecture_html([cfg], [count_parameters(cfg)], stages=True)
    assert STAGE_ELEMENT.findall(html) == list(stages_of(cfg))
    # the diagram without the walk (other views of it) has no buttons
    assert "data-stage" not in architecture_html([cfg], [count_parameters(cfg)])


def test_the_order_of_the_stages_follows_the_variant():
    assert stages_of(config({})) == STAGE_NAMES
    assert stages_of(config({"norm_placement": "post"})) == (
        "embeddings", "attention", "shortcut1", "norm1", "feed_forward", "shortcut2", "norm2",
        "final_norm", "out_head")
    assert stage_points(config({"norm_placement": "post"}), "shortcut1") == ("ln1_in",)


def test_the_card_shows_the_stage_the_block_the_section_and_the_numbers(traced):
    cfg, _, _, tr = traced
    if cfg.norm_placement == "none":
        pytest.skip("no norm stage")
    details = stage_details(tr, "norm2", 2)
    card = stage_html(details, cfg)
    assert "block 2 of 3" in card and "book §4.2, in the transformer block of §4.5" in card
    for point in details.points:
        assert f"<code>{point.point}</code>" in card
        assert f"(1, {len(tr.token_ids)}, {cfg.emb_dim})" in card
        assert f"{point.stats['max']:.4g}" in card
    head = stage_html(stage_details(tr, "out_head"), cfg)
    assert f"(1, {len(tr.token_ids)}, 50,257)" in head and "book §4.6" in head
