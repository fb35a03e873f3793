import math

import numpy as np
import pytest

from explorer.book.config import ACTIVATIONS
from explorer.book.curves import ACTIVATION_FUNCTIONS, ACTIVATION_LABELS, activation_curves


def _erf(x):
    return np.vectorize(math.erf)(x)


FORMULAS = {
    "relu": lambda x: np.maximum(x, 0.0),
    "gelu_exact": lambda x: 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0))),
    "gelu": lambda x: 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi)
                                                * (x + 0.044715 * x ** 3))),
    "silu": lambda x: x / (1.0 + np.exp(-x)),
}


def test_activation_functions_are_the_configs_choices():
    assert ACTIVATION_FUNCTIONS == ACTIVATIONS
    assert set(ACTIVATION_LABELS) == set(ACTIVATIONS)


def test_curves_have_x_values_derivatives_and_labels():
    c = activation_curves()
    assert c["x"].shape == (401,)
    assert c["x"][0] == -4.0 and c["x"][-1] == 4.0
    assert list(c["functions"]) == list(ACTIVATIONS)
    for name, f in c["functions"].items():
        assert f["y"].shape == f["dy"].shape == (401,)
        assert f["label"] == ACTIVATION_LABELS[name]
    assert c["functions"]["gelu"]["label"] == "GELU (tanh approx., book)"


@pytest.mark.parametrize("name", sorted(FORMULAS))
def test_values_equal_the_formulas(name):
    c = activation_curves(-6.0, 6.0, 1201, names=[name])
    x = c["x"]
    # The book's GELU holds sqrt(2 / pi) in a float32 tensor: float32 precision in that one
    # constant, everything else in float64.
    rtol = 1e-6 if name == "gelu" else 1e-9
    np.testing.assert_allclose(c["functions"][name]["y"], FORMULAS[name](x),
                               rtol=rtol, atol=1e-12)


@pytest.mark.parametrize("name", sorted(FORMULAS))
def test_derivatives_match_finite_differences(name):
    c = activation_curves(-5.0, 5.0, 1001, names=[name])
    x, h = c["x"], 1e-6
    numeric = (FORMULAS[name](x + h) - FORMULAS[name](x - h)) / (2 * h)
    dy = c["functions"][name]["dy"]
    away_from_kink = np.abs(x) > 1e-3   # ReLU has no derivative at 0
    np.testing.assert_allclose(dy[away_from_kink], numeric[away_from_kink], atol=1e-6)


def test_relu_derivative_is_a_step():
    c = activation_curves(-1.0, 1.0, 5, names=["relu"])
    assert c["functions"]["relu"]["dy"].tolist() == [0.0, 0.0, 0.0, 1.0, 1.0]


def test_gelu_minimum_is_about_minus_0_17_near_minus_0_75():
    c = activation_curves(-3.0, 1.0, 4001, names=["gelu", "gelu_exact"])
    for name in ("gelu", "gelu_exact"):
        y = c["functions"][name]["y"]
        i = int(np.argmin(y))
        assert y[i] == pytest.approx(-0.17, abs=0.005)
        assert c["x"][i] == pytest.approx(-0.75, abs=0.03)
        # the derivative crosses zero at the minimum
        assert abs(c["functions"][name]["dy"][i]) < 1e-2


def test_default_names_give_every_activation_in_config_order():
    assert tuple(activation_curves(points=3)["functions"]) == ACTIVATIONS


@pytest.mark.parametrize("kwargs, words", [
    ({"x_min": 1.0, "x_max": 1.0}, "smaller than x_max"),
    ({"x_min": 2.0, "x_max": -2.0}, "smaller than x_max"),
    ({"x_min": float("nan")}, "finite"),
    ({"x_max": float("inf")}, "finite"),
    ({"x_min": -1001.0}, "between"),
    ({"x_max": 1e6}, "between"),
    ({"x_min": "a"}, "number"),
    ({"x_min": True}, "number"),
    ({"points": 1}, "between 2 and 5001"),
    ({"points": 5002}, "between 2 and 5001"),
    ({"points": 10.5}, "whole number"),
    ({"names": ["tanh"]}, "Unknown activation"),
    ({"names": []}, "at least one"),
])
def test_bad_arguments_raise_value_error(kwargs, words):
    with pytest.raises(ValueError, match=words):
        activation_curves(**kwargs)


def test_extreme_but_allowed_range_and_float_points():
    c = activation_curves(-1000, 1000, 2.0)
    assert c["x"].tolist() == [-1000.0, 1000.0]
    assert np.isfinite(c["functions"]["silu"]["y"]).all()
    assert np.isfinite(c["functions"]["silu"]["dy"]).all()
