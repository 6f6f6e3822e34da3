"""`MinuteMeasurements.histogram` and `delay_statistics` come from one sort of the whole minute;
they equal, exactly and in the same key order, what each link's own packets give (`np.unique`
of its delivered buckets, numpy's sort of its delays)."""

from __future__ import annotations

import numpy as np
import pytest

from simulation.simulator import (
    BUCKETS_PER_MS,
    MinuteMeasurements,
    build_mesh,
    simulate_minute,
    simulate_utilisation,
)

MINUTE = 28_800_000


def per_link_histogram(measured: MinuteMeasurements, link: int) -> list[tuple[str, int]]:
    """The histogram as one link's own np.unique gives it, keys in ascending delay order."""
    delivered = measured.buckets[link, : measured.received[link]]
    values, counts = np.unique(delivered, return_counts=True)
    keys = [f"{value / BUCKETS_PER_MS:.2f}" for value in values.tolist()]
    return list(zip(keys, counts.tolist(), strict=True))


def per_link_statistics(measured: MinuteMeasurements) -> list[np.ndarray]:
    """Mean, std and median from each link's delays sorted as floats (NaN for lost packets)."""
    delays = np.sort(measured.delays_ms, axis=1)
    received = measured.received
    with np.errstate(invalid="ignore"):
        mean = np.nansum(delays, axis=1) / received
        std = np.sqrt(np.nansum((delays - mean[:, None]) ** 2, axis=1) / received)
    rows = np.arange(len(delays))
    low = delays[rows, np.maximum(received - 1, 0) // 2]
    high = delays[rows, received // 2]
    return [mean, std, (low + high) / 2]


def assert_same_as_per_link(measured: MinuteMeasurements) -> None:
    for link in range(len(measured.received)):
        histogram = measured.histogram(link)
        assert list(histogram.items()) == per_link_histogram(measured, link), link
        assert all(type(key) is str and type(count) is int for key, count in histogram.items())
    for whole, own in zip(measured.delay_statistics(), per_link_statistics(measured), strict=True):
        assert whole.tobytes() == own.tobytes()


@pytest.mark.parametrize("packets", [600, 7, 1])
def test_a_simulated_minute_with_losses_equals_each_links_own_histogram(packets: int) -> None:
    mesh = build_mesh(12, 7)
    utilisation = simulate_utilisation(mesh, MINUTE, 1, 7)[:, 0]
    utilisation[::5] = 1.3  # overflow: many lost packets
    measured = simulate_minute(mesh, utilisation, MINUTE, 7, packets)
    assert (measured.received < packets).any()
    assert_same_as_per_link(measured)
    coarse = measured.coarsened(np.arange(mesh.n_links) % 2 == 0, 10)
    assert_same_as_per_link(coarse)


def test_edge_cases_equal_each_links_own_histogram() -> None:
    buckets = np.array([[5, 5, 5, 5], [1, 2, 3, 4], [-3, 7, -3, 9], [9, 9, 1, 1]], np.int32)
    measured = MinuteMeasurements(0, buckets, np.array([4, 0, 3, 2]), 4)
    assert [measured.histogram(link) for link in range(4)] == [
        {"0.05": 4},
        {},
        {"-0.03": 2, "0.07": 1},
        {"0.09": 2},
    ]
    assert_same_as_per_link(measured)
    nothing = MinuteMeasurements(0, np.zeros((2, 3), np.int64), np.array([0, 0]), 3)
    assert [nothing.histogram(0), nothing.histogram(1)] == [{}, {}]
    assert_same_as_per_link(nothing)


def test_a_histogram_is_the_callers_own_copy() -> None:
    measured = MinuteMeasurements(0, np.array([[257, 257]]), np.array([2]), 2)
    measured.histogram(0)["2.57"] = 1
    assert measured.histogram(0) == {"2.57": 2}


def test_buckets_spanning_more_than_the_key_cache_are_formatted_one_by_one() -> None:
    wide = np.array([[-100_000, 500_000, 257]], np.int32)
    measured = MinuteMeasurements(0, wide, np.array([3]), 3)
    assert measured.histogram(0) == {"-1000.00": 1, "2.57": 1, "5000.00": 1}
