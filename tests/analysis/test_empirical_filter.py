"""The delay-and-loss filter exactly as netTel defines it (service/analysis/empirical_filter.py)."""

from __future__ import annotations

import numpy as np
import pytest

from service.analysis.empirical_filter import LOSS_THRESHOLD, apply_empirical_filter

nan = np.nan


def run(cases: list[tuple[float, float, float, float]]) -> tuple[list[bool], list[float]]:
    """cases: (delay, loss, all-time min delay, all-time std delay)."""
    delay, loss, minimum, std = (
        np.array(column, dtype=float) for column in zip(*cases, strict=True)
    )
    result = apply_empirical_filter(delay, loss, minimum, std)
    return result.congested.tolist(), result.score.tolist()


def test_threshold_is_one_in_ten_thousand() -> None:
    assert LOSS_THRESHOLD == 1e-4


def test_loss_below_threshold_is_never_congested() -> None:
    congested, score = run([(500.0, 0.0, 10.0, 2.0), (500.0, 0.99e-4, 10.0, 2.0)])
    assert congested == [False, False]
    assert score == [0.0, 0.0]


def test_loss_at_threshold_counts() -> None:
    congested, score = run([(30.0, 1e-4, 10.0, 2.0)])
    assert congested == [True]
    assert score == [pytest.approx(3e-3, rel=1e-12)]


def test_delay_below_min_plus_one_std_is_not_congested() -> None:
    congested, score = run([(11.99, 0.5, 10.0, 2.0), (10.0, 0.5, 10.0, 2.0)])
    assert congested == [False, False]
    assert score == [0.0, 0.0]


def test_delay_at_min_plus_one_std_counts() -> None:
    congested, score = run([(12.0, 0.05, 10.0, 2.0)])
    assert congested == [True]
    assert score == [pytest.approx(0.6, rel=1e-12)]


def test_score_is_absolute_product_of_loss_and_delay() -> None:
    congested, score = run([(30.0, 0.05, 10.0, 2.0), (-1.0, 0.05, -10.0, 2.0)])
    assert congested == [True, True]
    assert score == [pytest.approx(1.5, rel=1e-12), pytest.approx(0.05, rel=1e-12)]


@pytest.mark.parametrize("position", range(4))
def test_any_missing_input_is_not_congested_and_scores_zero(position: int) -> None:
    case = [30.0, 0.05, 10.0, 2.0]
    case[position] = nan
    congested, score = run([tuple(case), (30.0, 0.05, 10.0, 2.0)])  # type: ignore[list-item]
    assert congested == [False, True]
    assert score == [0.0, pytest.approx(1.5)]


def test_vectorised_mix_matches_case_by_case() -> None:
    cases = [
        (30.0, 0.05, 10.0, 2.0),
        (30.0, 0.00005, 10.0, 2.0),
        (11.0, 0.05, 10.0, 2.0),
        (100.0, 0.2, 50.0, 10.0),
        (55.0, 0.2, 50.0, 10.0),
    ]
    congested, score = run(cases)
    assert congested == [True, False, False, True, False]
    assert score == pytest.approx([1.5, 0.0, 0.0, 20.0, 0.0], rel=1e-12)
