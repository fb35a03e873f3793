"""Activation functions as curves: each function's values and its derivative over a range of x,
computed on the very modules the model uses (``explorer.book.model.make_activation``), so a figure
shows exactly what the feed-forward layers compute.

Core module: torch and numpy only (no plotting).
"""
from __future__ import annotations

import math

import numpy as np
import torch

from .config import ACTIVATIONS
from .errors import ExplorerError, Text
from .model import make_activation

# The activations a model can be built with (one source of truth: explorer.book.config).
ACTIVATION_FUNCTIONS = ACTIVATIONS

ACTIVATION_LABELS = {
    "gelu": Text("activation.gelu", "GELU (tanh approx., book)"),
    "gelu_exact": Text("activation.gelu_exact", "GELU (exact)"),
    "relu": Text("activation.relu", "ReLU"),
    "silu": Text("activation.silu", "SiLU"),
}

X_LIMIT = 1000.0
MIN_POINTS, MAX_POINTS = 2, 5001


def activation_curves(x_min: float = -4.0, x_max: float = 4.0, points: int = 401,
                      names=ACTIVATION_FUNCTIONS) -> dict:
    """Values and derivatives of activation functions on ``points`` evenly spaced x values.

    Returns ``{"x": array, "functions": {name: {"label": str, "y": array, "dy": array}}}``
    (float64 numpy arrays, ``names`` in the order given). The derivative comes from torch
    autograd through the model's own activation module (ReLU's derivative at 0 is 0, as
    PyTorch defines it).
    """
    x_min, x_max = _check_range(x_min, x_max)
    points = _check_points(points)
    names = _check_names(names)

    x = torch.linspace(x_min, x_max, points, dtype=torch.float64)
    functions = {}
    for name in names:
        module = make_activation(name)
        xg = x.clone().requires_grad_(True)
        with torch.enable_grad():
            y = module(xg)
            (dy,) = torch.autograd.grad(y.sum(), xg)
        functions[name] = {
            "label": ACTIVATION_LABELS[name],
            "y": y.detach().numpy(),
            "dy": dy.numpy(),
        }
    return {"x": x.numpy(), "functions": functions}


def _check_range(x_min, x_max) -> tuple[float, float]:
    for label, value in (("x_min", x_min), ("x_max", x_max)):
        if isinstance(value, bool) or not isinstance(value, (int, float, np.number)):
            raise ExplorerError("curves.not_a_number", "{label} must be a number (got {value!r}).",
                                label=label, value=value)
        if not math.isfinite(value):
            raise ExplorerError("curves.not_finite", "{label} must be a finite number (got "
                                "{value!r}).", label=label, value=value)
        if abs(value) > X_LIMIT:
            raise ExplorerError("curves.out_of_range", "{label} must lie between {low:g} and "
                                "{high:g} (got {value!r}).", label=label, low=-X_LIMIT,
                                high=X_LIMIT, value=value)
    if not x_min < x_max:
        raise ExplorerError("curves.range_reversed", "x_min must be smaller than x_max (got "
                            "x_min={x_min!r}, x_max={x_max!r}); for example x_min=-4, x_max=4.",
                            x_min=x_min, x_max=x_max)
    return float(x_min), float(x_max)


def _check_points(points) -> int:
    if isinstance(points, float) and points.is_integer():
        points = int(points)   # number boxes deliver 401.0
    if isinstance(points, bool) or not isinstance(points, (int, np.integer)):
        raise ExplorerError("curves.points_not_whole", "points must be a whole number (got "
                            "{points!r}).", points=points)
    if not MIN_POINTS <= points <= MAX_POINTS:
        raise ExplorerError("curves.points_out_of_range", "points must be between {min_points} "
                            "and {max_points} (got {points}).", min_points=MIN_POINTS,
                            max_points=MAX_POINTS, points=points)
    return int(points)


def _check_names(names) -> tuple[str, ...]:
    if isinstance(names, str):
        names = (names,)
    names = tuple(names)
    if not names:
        raise ExplorerError("curves.none_chosen", "Choose at least one activation function.")
    for name in names:
        if name not in ACTIVATION_FUNCTIONS:
            raise ExplorerError("curves.unknown_activation", "Unknown activation {name!r}; "
                                "choose from {functions}.", name=name,
                                functions=", ".join(ACTIVATION_FUNCTIONS))
    return names
