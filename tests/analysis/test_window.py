"""order_window and moving_average on hand-made rings and series."""

from __future__ import annotations

import numpy as np
import pytest

from service.analysis.features import SMOOTHING_POINTS, moving_average
from service.analysis.window import order_window

nan = np.nan


def assert_rows(actual: np.ndarray, expected: list[list[float]]) -> None:
    np.testing.assert_array_equal(actual, np.array(expected, dtype=float))


def test_order_window_rotates_a_full_ring() -> None:
    slot_minute = np.array([[8, 5, 6, 7]])
    values = np.array([[80.0, 50.0, 60.0, 70.0]])
    assert_rows(order_window(slot_minute, values, np.array([8])), [[50, 60, 70, 80]])


def test_order_window_hides_minutes_newer_than_the_reference() -> None:
    slot_minute = np.array([[8, 5, 6, 7]])
    values = np.array([[80.0, 50.0, 60.0, 70.0]])
    # Minutes 4..7 expected: slot 0 holds 8, not 4.
    assert_rows(order_window(slot_minute, values, np.array([7])), [[nan, 50, 60, 70]])


def test_order_window_hides_empty_and_stale_slots() -> None:
    slot_minute = np.array([[12, -1, 6, 15]])  # slot 2 holds 6, but 14 is expected
    values = np.array([[120.0, 999.0, 60.0, 150.0]])
    assert_rows(order_window(slot_minute, values, np.array([15])), [[120, nan, nan, 150]])


def test_order_window_each_row_has_its_own_reference() -> None:
    slot_minute = np.array([[4, 1, 2, 3], [4, 5, 6, 7]])
    values = np.array([[4.0, 1.0, 2.0, 3.0], [40.0, 50.0, 60.0, 70.0]])
    ordered = order_window(slot_minute, values, np.array([4, 6]))
    assert_rows(ordered, [[1, 2, 3, 4], [nan, 40, 50, 60]])


def test_order_window_returns_float64_for_float32_state() -> None:
    slot_minute = np.arange(32)[None, :] + 64
    values = np.arange(32, dtype=np.float32)[None, :]
    ordered = order_window(slot_minute, values, np.array([95]))
    assert ordered.dtype == np.float64
    assert ordered.tolist() == [list(map(float, range(32)))]


def test_order_window_of_a_32_slot_ring_wrapping_around() -> None:
    reference = 1000  # slot 1000 % 32 = 8 is the newest
    slot_minute = np.array([[m for m in range(reference - 31, reference + 1)]])
    slot_minute = slot_minute[:, np.argsort(slot_minute[0] % 32)]
    values = slot_minute.astype(float) / 10
    ordered = order_window(slot_minute, values, np.array([reference]))
    assert ordered[0, 0] == (reference - 31) / 10
    assert ordered[0, -1] == reference / 10
    assert np.all(np.diff(ordered[0]) > 0)


def test_moving_average_ignores_nan_within_a_window() -> None:
    result = moving_average(np.array([[1.0, 2.0, nan, 4.0]]), points=2)
    assert_rows(result, [[1.5, 2.0, 4.0]])


def test_moving_average_is_nan_when_a_window_has_no_value() -> None:
    result = moving_average(np.array([[nan, nan, 3.0, nan, nan]]), points=2)
    assert_rows(result, [[nan, 3.0, 3.0, nan]])


def test_moving_average_three_points() -> None:
    result = moving_average(np.array([[1.0, 2.0, 3.0, 4.0, 5.0], [0.0, nan, 6.0, nan, 9.0]]), 3)
    assert_rows(result, [[2.0, 3.0, 4.0], [3.0, 6.0, 7.5]])


def test_moving_average_default_is_fifteen_points() -> None:
    assert SMOOTHING_POINTS == 15
    result = moving_average(np.arange(32, dtype=float)[None, :])
    assert result.shape == (1, 18)
    assert result[0].tolist() == pytest.approx([7.0 + j for j in range(18)], rel=1e-12)
    assert result[0, -1] == pytest.approx(24.0, rel=1e-12)
