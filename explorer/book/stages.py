"""The stages of the chapter's diagram of the GPT model (from token ids to logits), in the
order a variant's forward pass reaches them, with the book's section for each and the probe
points (``probe_points.PROBE_POINTS``) that measure it.

A stage is what a reader points at in the diagram ("norm2", "the shortcut after attention");
a probe point is where a value is recorded. The mapping depends on the variant: in the book's
pre-LN block the first shortcut's sum is ``resid_mid``, in a post-LN block it is ``ln1_in``
(norm1 comes after the sum), and a model without shortcut connections has no shortcut stage.
"""
from __future__ import annotations

from dataclasses import dataclass

from .config import GPTConfig
from .errors import ExplorerError, Text


@dataclass(frozen=True)
class Stage:
    name: str       # the diagram's data-stage attribute and the /stage_details value
    title: Text     # what the walk calls it (English; the page says it in its language)
    section: str    # the book's section(s), as its table of contents numbers them
    scope: str      # "model": once per forward pass; "block": once per TransformerBlock


# Sections as in the book's table of contents (chapters 2-4): 2.7 "Creating token
# embeddings", 2.8 "Encoding word positions", 3.5 "Hiding future words with causal
# attention", 3.6 "Extending single-head attention to multi-head attention", 4.2 "Normalizing
# activations with layer normalization", 4.3 "Implementing a feed forward network with GELU
# activations", 4.4 "Adding shortcut connections", 4.5 "Connecting attention and linear
# layers in a transformer block", 4.6 "Coding the GPT model".
STAGES = (
    Stage("embeddings", Text("stage.embeddings", "Token and positional embeddings"),
          "2.7, 2.8", "model"),
    Stage("norm1", Text("stage.norm1", "norm1 (LayerNorm before attention)"), "4.2", "block"),
    Stage("attention", Text("stage.attention", "Masked multi-head attention"), "3.5, 3.6", "block"),
    Stage("shortcut1", Text("stage.shortcut1", "Shortcut around attention"), "4.4", "block"),
    Stage("norm2", Text("stage.norm2", "norm2 (LayerNorm before the feed-forward network)"),
          "4.2", "block"),
    Stage("feed_forward", Text("stage.feed_forward", "Feed-forward network"), "4.3", "block"),
    Stage("shortcut2", Text("stage.shortcut2", "Shortcut around the feed-forward network"),
          "4.4", "block"),
    Stage("final_norm", Text("stage.final_norm", "Final LayerNorm"), "4.2, 4.6", "model"),
    Stage("out_head", Text("stage.out_head", "Output head (logits)"), "4.6", "model"),
)
STAGES_BY_NAME = {s.name: s for s in STAGES}
STAGE_NAMES = tuple(STAGES_BY_NAME)
BLOCK_SECTION = "4.5"    # every block stage sits in the transformer block of section 4.5
# Post-LN puts each norm after its shortcut's sum, so the two norms swap places with the sums.
_POST_LN_TITLES = {
    "norm1": Text("stage.norm1_post", "norm1 (LayerNorm after the attention's shortcut)"),
    "norm2": Text("stage.norm2_post", "norm2 (LayerNorm after the feed-forward's shortcut)")}


def title_of(stage: Stage, cfg) -> str:
    """The stage's title in this variant (post-LN: the norms come after the sums)."""
    if GPTConfig.from_dict(cfg).norm_placement == "post":
        return _POST_LN_TITLES.get(stage.name, stage.title)
    return stage.title


def stages_of(cfg) -> tuple[str, ...]:
    """The stages a model of ``cfg`` has, in the order its forward pass reaches them (the
    diagram's order): a post-LN block normalises after each sum; no LayerNorm, no norm stages;
    no shortcut connections, no shortcut stages."""
    cfg = GPTConfig.from_dict(cfg)
    norms = cfg.norm_placement != "none"
    sums = cfg.shortcut

    def sub_block(norm, core, shortcut):
        steps = [norm] if norms and cfg.norm_placement == "pre" else []
        steps += [core] + ([shortcut] if sums else [])
        return steps + ([norm] if norms and cfg.norm_placement == "post" else [])

    return ("embeddings", *sub_block("norm1", "attention", "shortcut1"),
            *sub_block("norm2", "feed_forward", "shortcut2"), "final_norm", "out_head")


def stage_points(cfg, stage: str) -> tuple[str, ...]:
    """The probe points that show ``stage`` of a model of ``cfg``, input before output where a
    stage has both. The output head has none (a trace keeps the top next tokens, not the
    logits). Refused, with a message, for a stage this variant does not have."""
    cfg = GPTConfig.from_dict(cfg)
    if stage not in STAGES_BY_NAME:
        raise ExplorerError("stages.unknown", "Unknown stage {stage!r}: the diagram's stages are "
                            "{stages}.", stage=stage, stages=", ".join(STAGE_NAMES))
    if stage not in stages_of(cfg):
        if stage.startswith("norm"):
            raise ExplorerError("stages.no_layernorm", "This model has no LayerNorm "
                                "(norm_placement='none'): it has no {stage} stage.", stage=stage)
        raise ExplorerError("stages.no_shortcut", "This model has no shortcut connections "
                            "(shortcut=False): it has no {stage} stage.", stage=stage)
    post = cfg.norm_placement == "post"
    return {
        # token + position embedding, after drop_emb: the first block's input
        "embeddings": ("resid_pre",),
        "norm1": ("ln1_in", "ln1_out"),
        "attention": ("attn_out",),
        # x + attention output: post-LN normalises this sum, so it is norm1's input there
        "shortcut1": ("ln1_in",) if post else ("resid_mid",),
        "norm2": ("ln2_in", "ln2_out"),
        "feed_forward": ("ff_pre", "ff_post", "ff_out"),
        "shortcut2": ("ln2_in",) if post else ("resid_post",),
        "final_norm": ("final_norm_in", "final_norm_out"),
        "out_head": (),
    }[stage]


def point_width(cfg, point: str) -> int:
    """The channels of a probe point's tensor (batch, tokens, channels): the feed-forward's
    hidden layer is ``ff_expansion`` times wider than the residual stream."""
    cfg = GPTConfig.from_dict(cfg)
    return cfg.ff_hidden_dim if point in ("ff_pre", "ff_post") else cfg.emb_dim
