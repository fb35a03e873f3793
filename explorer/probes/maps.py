"""What the tabs ask of the two maps, beside computing them: the order in which the cells of
the knock-out map (``attribution``) are made exact, and both maps as plain numbers for the
API (the patching maps: ``patching``)."""
from __future__ import annotations

from .attribution import TOP, Attribution
from .patching import Patching


def knockout_plan(result: Attribution, everywhere: bool = False):
    """The cells to make exact, in the order they come: the estimate's top ``TOP`` and the
    cells without an estimate shown (exact-only, blind) one at a time (each turns exact as it
    comes); then, for exact everywhere (asked for, or an estimate that missed one of those
    exact values by more than ``MISS``: asked once they are in), the rest one batch per block
    and table (as the exact map batches them)."""
    order = result.order()
    first = TOP + sum(1 for c in order if not result.trusted(c))
    for cell in order[:first]:
        yield [cell]
    if not (everywhere or result.estimate_failed):
        return
    groups: dict[tuple, list] = {}
    for cell in order[first:]:
        groups.setdefault(cell[:2], []).append(cell)
    yield from groups.values()                   # (in the order of their largest estimate)


def _grid(a):
    return None if a is None else [[None if v != v else float(v) for v in row] for row in a]


def knockout_numbers(result: Attribution) -> dict:
    """The map as plain numbers (for the API): exact values (None where not computed), the
    estimates (None where there is none), and which cells are exact."""
    return {"token_ids": list(result.token_ids), "clean_loss": result.clean_loss,
            "clean_prob": result.clean_prob, "layers": list(result.layer_labels),
            "parts": list(result.parts), "head_loss": _grid(result.head_loss),
            "head_prob": _grid(result.head_prob), "part_loss": _grid(result.part_loss),
            "part_prob": _grid(result.part_prob), "head_estimate": _grid(result.head_estimate),
            "part_estimate": _grid(result.part_estimate), "noise_floor": result.floor,
            "head_blind": result.blind("head").tolist(),
            "part_blind": (result.blind("part") & result.has_part).tolist(),
            "estimate_missed": result.missed,
            "exact_cells": result.n_exact, "cells": len(result.cells())}


def patching_numbers(result: Patching, attribution=None) -> dict:
    """The maps, and the direct attribution where there is one (``explorer.probes.direct``),
    as plain numbers (for the API)."""
    def grid(a):
        return [[None if v != v else float(v) for v in row] for row in a]
    out = {"clean_ids": list(result.pair.clean), "corrupted_ids": list(result.pair.corrupted),
           "right": result.pair.right, "wrong": result.pair.wrong,
           "clean_diff": result.clean_diff, "corrupted_diff": result.corrupted_diff,
           "layers": list(result.layer_labels),
           "head_share_estimate": grid(result.shares(result.head_estimate)),
           "head_share_exact": grid(result.shares(result.head_exact)),
           "resid_share_estimate": grid(result.shares(result.resid_estimate)),
           "resid_share_exact": grid(result.shares(result.resid_exact)),
           "noise_floor": result.floor, "first_order_miss": result.miss,
           "exact_cells": result.n_exact, "cells": len(result.cells())}
    if attribution is not None:
        out["direct_attribution"] = {
            "heads": grid(attribution.heads), "ff": [float(v) for v in attribution.ff],
            "tok_emb": attribution.tok_emb, "pos_emb": attribution.pos_emb,
            "biases": attribution.biases, "total": attribution.total,
            "model_diff": attribution.model_diff, "final_norm_scale": attribution.final_scale}
    return out
