"""compute_cost: bounds, exact values from the documented formula, and monotonicity."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from service.analysis.cost import CONGESTED_FLOOR, SHIPPED_SHAPE, CostShape, compute_cost
from service.analysis.empirical_filter import apply_empirical_filter


def cost(
    u: float,
    loss: float,
    excess: float,
    base: float = 0.0,
    congested: bool = False,
    probability: float | None = None,
) -> float:
    return float(
        compute_cost(
            np.array([u]),
            np.array([loss]),
            np.array([excess]),
            np.array([base]),
            np.array([congested]),
            None if probability is None else np.array([probability]),
        )[0]
    )


def test_documented_shape_and_floor() -> None:
    """The weights docs/decisions.md's rule fitted (README and cost.py quote them)."""
    assert SHIPPED_SHAPE == CostShape(4, "linear", "linear", "log", 0.5653, 0.05385, 0.0, 0.0,
                                      0.2368)  # fmt: skip
    assert CONGESTED_FLOOR == 0.5


def test_idle_healthy_link_without_delay_costs_zero() -> None:
    assert cost(0.0, 0.0, 0.0) == 0.0


def test_missing_inputs_count_as_no_trouble() -> None:
    assert cost(math.nan, math.nan, math.nan, math.nan) == 0.0


@pytest.mark.parametrize(
    ("u", "loss", "excess", "base", "expected_hazard"),
    [
        (1.0, 0.0, 0.0, 0.0, 0.5653),
        (0.5, 0.0, 0.0, 0.0, 0.5653 * 0.0625),
        (0.0, 0.01, 0.0, 0.0, 0.05385),
        (0.0, 0.08, 0.0, 0.0, 8 * 0.05385),  # 0.4308: a lossy path
        (0.0, 0.0, 0.0, 10.0, 0.2368 * math.log(2)),  # 0.164: 10 ms away
        (0.0, 0.0, 0.0, 150.0, 0.2368 * math.log(16)),  # 0.657: 150 ms away
        (0.0, 0.0, 500.0, 0.0, 0.0),  # queueing delay above the minimum: weight 0
        (0.9, 0.02, 5.0, 30.0, 0.5653 * 0.6561 + 2 * 0.05385 + 0.2368 * math.log(4)),
    ],
)
def test_exact_values(
    u: float, loss: float, excess: float, base: float, expected_hazard: float
) -> None:
    assert cost(u, loss, excess, base) == pytest.approx(1 - math.exp(-expected_hazard), rel=1e-12)


def test_the_filter_floor_applies_only_without_a_probability() -> None:
    assert cost(0.0, 0.0, 0.0, congested=True) == 0.5
    assert cost(0.0, 0.0, 0.0, congested=True, probability=0.9) == 0.0  # a model: no floor
    assert cost(0.0, 0.0, 0.0, congested=True, probability=math.nan) == 0.5
    assert cost(1.0, 1.0, 0.0, congested=True) > 0.5  # the floor below the rest


def test_out_of_range_inputs_are_clipped() -> None:
    assert cost(1.5, 0.0, 0.0) == cost(1.0, 0.0, 0.0)
    assert cost(-0.2, 0.0, 0.0) == 0.0
    assert cost(0.0, -0.5, 0.0) == 0.0
    assert cost(0.0, 0.0, -10.0) == 0.0  # delay below the all-time minimum
    assert cost(0.0, 0.0, 0.0, -20.0) == 0.0  # a negative minimum (clock offset)


def test_vectorised_over_links() -> None:
    result = compute_cost(
        np.array([0.0, 1.0, 0.0]),
        np.zeros(3),
        np.zeros(3),
        np.array([0.0, 0.0, 10.0]),
        np.array([False, False, True]),
    )
    assert result.tolist() == pytest.approx(
        [0.0, 1 - math.exp(-0.5653), max(0.5, 1 - math.exp(-0.2368 * math.log(2)))]
    )


any_float = st.floats(allow_nan=True, allow_infinity=True)
utilisation = st.floats(-0.5, 1.5)
loss_ratio = st.floats(-0.1, 1.0)
excess_ms = st.floats(-100.0, 10_000.0)
base_ms = st.floats(-50.0, 1_000.0)


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")  # inf - inf
@given(any_float, any_float, any_float, any_float, st.booleans())
def test_cost_is_always_in_unit_interval(
    u: float, loss: float, excess: float, base: float, c: bool
) -> None:
    assert 0.0 <= cost(u, loss, excess, base, c) <= 1.0


@given(utilisation, utilisation, loss_ratio, excess_ms, base_ms, st.booleans())
def test_monotone_in_utilisation(
    a: float, b: float, loss: float, excess: float, base: float, c: bool
) -> None:
    low, high = sorted((a, b))
    assert cost(low, loss, excess, base, c) <= cost(high, loss, excess, base, c)


@given(utilisation, loss_ratio, loss_ratio, excess_ms, base_ms, st.booleans())
def test_monotone_in_loss(
    u: float, a: float, b: float, excess: float, base: float, c: bool
) -> None:
    low, high = sorted((a, b))
    assert cost(u, low, excess, base, c) <= cost(u, high, excess, base, c)


@given(utilisation, loss_ratio, excess_ms, excess_ms, base_ms, st.booleans())
def test_monotone_in_excess_delay(
    u: float, loss: float, a: float, b: float, base: float, c: bool
) -> None:
    low, high = sorted((a, b))
    assert cost(u, loss, low, base, c) <= cost(u, loss, high, base, c)


@given(utilisation, loss_ratio, excess_ms, base_ms, base_ms, st.booleans())
def test_monotone_in_base_delay(
    u: float, loss: float, excess: float, a: float, b: float, c: bool
) -> None:
    low, high = sorted((a, b))
    assert cost(u, loss, excess, low, c) <= cost(u, loss, excess, high, c)


def link_cost(u: float, loss: float, delay: float, minimum: float, std: float) -> float:
    """Cost as analyse_links combines it: the filter decides the congestion floor."""
    verdict = apply_empirical_filter(
        np.array([delay]), np.array([loss]), np.array([minimum]), np.array([std])
    )
    return float(
        compute_cost(
            np.array([u]),
            np.array([loss]),
            np.array([delay - minimum]),
            np.array([minimum]),
            verdict.congested,
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
