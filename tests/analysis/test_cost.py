"""compute_cost: bounds, exact values from the documented formula, and monotonicity."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from service.analysis.cost import (
    CONGESTED_FLOOR,
    EXCESS_DELAY_SCALE_MS,
    LOSS_SCALE,
    UTILISATION_EXPONENT,
    compute_cost,
)
from service.analysis.empirical_filter import apply_empirical_filter


def cost(u: float, loss: float, excess: float, congested: bool = False) -> float:
    return float(
        compute_cost(np.array([u]), np.array([loss]), np.array([excess]), np.array([congested]))[0]
    )


def test_documented_constants() -> None:
    assert (LOSS_SCALE, EXCESS_DELAY_SCALE_MS, UTILISATION_EXPONENT, CONGESTED_FLOOR) == (
        0.01,
        20.0,
        4,
        0.5,
    )


def test_idle_healthy_link_costs_zero() -> None:
    assert cost(0.0, 0.0, 0.0) == 0.0


def test_missing_inputs_count_as_no_trouble() -> None:
    assert cost(math.nan, math.nan, math.nan) == 0.0


def test_full_utilisation_costs_one() -> None:
    assert cost(1.0, 0.0, 0.0) == 1.0


@pytest.mark.parametrize(
    ("u", "loss", "excess", "congested", "expected"),
    [
        (0.5, 0.0, 0.0, False, 0.5**4),  # 0.0625
        (0.0, 0.01, 0.0, False, 1 - math.exp(-1)),  # 0.632120...
        (0.0, 0.0, 20.0, False, 1 - math.exp(-1)),
        (0.0, 0.02, 0.0, False, 1 - math.exp(-2)),  # 0.864664...
        (0.5, 0.01, 20.0, False, 1 - 0.9375 * math.exp(-2)),  # 0.873124...
        (0.9, 0.001, 5.0, False, 1 - (1 - 0.6561) * math.exp(-0.1) * math.exp(-0.25)),
        (0.0, 0.0, 0.0, True, 0.5),  # congestion floor
        (0.0, 0.02, 0.0, True, 1 - math.exp(-2)),  # floor below the rest
        (0.1, 0.001, 1.0, True, 0.5),
    ],
)
def test_exact_values(
    u: float, loss: float, excess: float, congested: bool, expected: float
) -> None:
    assert cost(u, loss, excess, congested) == pytest.approx(expected, rel=1e-12)


def test_out_of_range_inputs_are_clipped() -> None:
    assert cost(1.5, 0.0, 0.0) == 1.0
    assert cost(-0.2, 0.0, 0.0) == 0.0
    assert cost(0.0, -0.5, 0.0) == 0.0
    assert cost(0.0, 0.0, -10.0) == 0.0  # delay below the all-time minimum


def test_vectorised_over_links() -> None:
    result = compute_cost(
        np.array([0.0, 1.0, 0.5]),
        np.array([0.0, 0.0, 0.0]),
        np.array([0.0, 0.0, 0.0]),
        np.array([False, False, True]),
    )
    assert result.tolist() == [0.0, 1.0, 0.5]


any_float = st.floats(allow_nan=True, allow_infinity=True)
utilisation = st.floats(-0.5, 1.5)
loss_ratio = st.floats(-0.1, 1.0)
excess_ms = st.floats(-100.0, 10_000.0)


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")  # inf loss / 0.01
@given(any_float, any_float, any_float, st.booleans())
def test_cost_is_always_in_unit_interval(u: float, loss: float, excess: float, c: bool) -> None:
    assert 0.0 <= cost(u, loss, excess, c) <= 1.0


@given(utilisation, utilisation, loss_ratio, excess_ms, st.booleans())
def test_monotone_in_utilisation(a: float, b: float, loss: float, excess: float, c: bool) -> None:
    low, high = sorted((a, b))
    assert cost(low, loss, excess, c) <= cost(high, loss, excess, c)


@given(utilisation, loss_ratio, loss_ratio, excess_ms, st.booleans())
def test_monotone_in_loss(u: float, a: float, b: float, excess: float, c: bool) -> None:
    low, high = sorted((a, b))
    assert cost(u, low, excess, c) <= cost(u, high, excess, c)


@given(utilisation, loss_ratio, excess_ms, excess_ms, st.booleans())
def test_monotone_in_excess_delay(u: float, loss: float, a: float, b: float, c: bool) -> None:
    low, high = sorted((a, b))
    assert cost(u, loss, low, c) <= cost(u, loss, high, c)


def link_cost(u: float, loss: float, delay: float, minimum: float, std: float) -> float:
    """Cost as analyse_links combines it: the filter decides the congestion floor."""
    verdict = apply_empirical_filter(
        np.array([delay]), np.array([loss]), np.array([minimum]), np.array([std])
    )
    return float(
        compute_cost(
            np.array([u]), np.array([loss]), np.array([delay - minimum]), verdict.congested
        )[0]
    )


@given(
    utilisation,
    st.floats(0.0, 1.0),
    st.floats(0.0, 1.0),
    st.floats(0.0, 500.0),
    st.floats(0.0, 500.0),
    st.floats(0.0, 50.0),
    st.floats(0.0, 50.0),
)
def test_monotone_with_the_filter_deciding_congestion(
    u: float,
    loss_a: float,
    loss_b: float,
    delay_a: float,
    delay_b: float,
    minimum: float,
    std: float,
) -> None:
    loss_low, loss_high = sorted((loss_a, loss_b))
    delay_low, delay_high = sorted((delay_a, delay_b))
    base = link_cost(u, loss_low, delay_low, minimum, std)
    assert base <= link_cost(u, loss_high, delay_low, minimum, std)
    assert base <= link_cost(u, loss_low, delay_high, minimum, std)
