"""Fitting the cost's shape to transfer outcomes: the rule of docs/decisions.md section 4."""

from __future__ import annotations

import numpy as np
import pytest

from service.analysis.cost import CostShape
from training.decisions.cost_fit import (
    OutcomeRows,
    candidate_shapes,
    choose_shape,
    design,
    fit_weights,
)


def synthetic_rows(n: int = 600, noise: float = 0.05) -> OutcomeRows:
    """Rows whose log time per byte follows a known shape: U^2, log-scaled loss and linear base
    delay matter, the delay above the minimum and the probability do not; six scenarios."""
    rng = np.random.default_rng(0)
    u, p = rng.uniform(0, 1, n), rng.uniform(0, 1, n)
    loss, excess = rng.exponential(0.01, n), rng.exponential(10.0, n)
    base = rng.uniform(1.0, 150.0, n)
    y = (
        -12.0
        + 1.5 * u**2
        + 0.4 * np.log1p(loss / 0.001)
        + 0.8 * base / 50
        + rng.normal(0, noise, n)
    )
    scenarios = np.repeat(np.arange(6).astype(str), n // 6)
    return OutcomeRows(u, p, loss, excess, base, np.zeros(n), y, scenarios)


def test_there_are_72_candidate_shapes() -> None:
    shapes = candidate_shapes()
    assert len(shapes) == 72 == len(set(shapes))


def test_weights_are_never_negative_and_the_intercept_is_free() -> None:
    x = np.array([[0.0], [1.0], [2.0], [3.0]])
    weights, intercept = fit_weights(x, np.array([5.0, 4.0, 3.0, 2.0]))  # y falls with x
    assert weights.tolist() == [0.0]
    assert intercept == pytest.approx(3.5)


def test_the_rule_finds_the_shape_and_weights_that_made_the_outcomes() -> None:
    report = choose_shape(synthetic_rows())
    chosen = report.chosen
    assert (chosen.utilisation_power, chosen.loss_form, chosen.base_delay_form) == (
        2,
        "log",
        "linear",
    )
    assert chosen.base_delay_weight == pytest.approx(0.8, abs=0.02)
    assert chosen.utilisation_weight == pytest.approx(1.5, abs=0.05)
    assert chosen.loss_weight == pytest.approx(0.4, abs=0.02)
    assert chosen.delay_weight < 0.02 and chosen.probability_weight < 0.05
    assert report.intercept == pytest.approx(-12.0, abs=0.05)
    assert report.chosen_mse == pytest.approx(0.05**2, rel=0.2)
    assert report.chosen_mse < report.intercept_only_mse
    assert report.rows == 600 and report.scenarios == 6


def test_a_shape_without_the_probability_term_ignores_it() -> None:
    rows = synthetic_rows(60)
    shape = CostShape(1, "linear", "linear", "none", 1.0, 1.0, 1.0, 0.0, 1.0)
    assert (design(shape, rows)[:, 3] == 0).all()
    assert (design(shape, rows)[:, 4] == 0).all()  # nor the base delay, with form "none"
