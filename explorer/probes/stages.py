"""One stage of the chapter's diagram for a traced prompt: the tensor's shape (batch, tokens,
channels) and its statistics at that point, read from the ``Trace`` (no forward pass)."""
from __future__ import annotations

from dataclasses import dataclass

from ..book.config import GPTConfig
from ..book.errors import ExplorerError
from ..book.probe_points import POINTS_BY_NAME
from ..book.stages import STAGES_BY_NAME, Stage, point_width, stage_points
from .data import Trace

# What the walk shows of each probe point (a subset of STAT_NAMES).
WALK_STATS = ("mean", "std", "min", "max")


@dataclass(frozen=True)
class PointDetails:
    point: str                       # a probe point's name (PROBE_POINTS)
    label: str                       # its label there
    where: str                       # exactly where it is measured
    shape: tuple[int, int, int]      # (batch, tokens, channels)
    stats: dict[str, float]          # WALK_STATS over the whole tensor
    nonfinite: int                   # inf/NaN values in it


@dataclass(frozen=True)
class StageDetails:
    stage: Stage
    block: int | None                # None for the model's own stages
    n_blocks: int
    shape: tuple[int, int, int]      # the stage's output (batch, tokens, channels)
    points: tuple[PointDetails, ...] # input before output where the stage has both
    tokens: list[str]
    next_token: tuple[str, float] | None   # out_head: the top next token after the last one


def stage_details(trace: Trace, stage: str, block: int | None = None) -> StageDetails:
    """``stage`` (``book.stages.STAGE_NAMES``) of ``trace``, in ``block`` for a block's stages
    (0 to n_layers - 1; the model's stages ignore it). A trace is of one prompt, batch 1."""
    cfg = GPTConfig.from_dict(trace.config)
    points = stage_points(cfg, stage)          # refuses unknown stages and absent ones
    info = STAGES_BY_NAME[stage]
    n_tokens = len(trace.token_ids)
    if info.scope == "block" or stage == "embeddings":
        layer = 0
        if info.scope == "block":
            if isinstance(block, bool) or not isinstance(block, int) \
                    or not 0 <= block < cfg.n_layers:
                raise ExplorerError("stages.no_block", "Block {block!r} does not exist: this "
                                    "model has blocks 0 to {last}.", block=block,
                                    last=cfg.n_layers - 1)
            layer = block
        group = trace.points
    else:
        layer, group = 0, trace.final
    details = []
    for point in points:
        overall = group[point].overall
        details.append(PointDetails(
            point=point, label=POINTS_BY_NAME[point].label, where=POINTS_BY_NAME[point].where,
            shape=(1, n_tokens, point_width(cfg, point)),
            stats={s: float(overall[s][layer]) for s in WALK_STATS},
            nonfinite=int(overall["nonfinite"][layer])))
    if stage == "out_head":
        shape = (1, n_tokens, cfg.vocab_size)
        top = (trace.next_texts[-1][0], float(trace.next_probs[-1][0]))
    else:
        shape, top = details[-1].shape, None
    return StageDetails(stage=info, block=block if info.scope == "block" else None,
                        n_blocks=cfg.n_layers, shape=shape, points=tuple(details),
                        tokens=list(trace.tokens), next_token=top)
