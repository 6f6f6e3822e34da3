"""compute_histogram_stats: exact statistics of one minute's one-way delay histogram."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from service.parse.histogram import _by_histogram_then_delay, compute_histogram_stats
from tests.message_factory import load_sample


def real_buckets() -> list[tuple[float, int]]:
    histogram = load_sample("owdelay-histogram-real.json")["body"]["datapoints"]["1700000040"]
    return [(float(delay), count) for delay, count in histogram.items()]


def test_real_sample_statistics() -> None:
    stats = compute_histogram_stats(real_buckets())
    assert stats is not None
    assert stats.packets == 600
    assert stats.mean == pytest.approx(2.9321, abs=1e-4)
    assert stats.mean == pytest.approx(21991 / 7500, rel=1e-12)  # exact: 1759.28 ms / 600
    assert stats.std == pytest.approx(4.3168, abs=1e-4)
    assert stats.median == 2.60
    assert stats.minimum == 2.51
    assert stats.p95 == 2.75
    assert stats.clock_suspect is False
    assert stats.dropped_packets == 0


def test_real_sample_std_is_the_exact_population_std() -> None:
    histogram = load_sample("owdelay-histogram-real.json")["body"]["datapoints"]["1700000040"]
    exact = [(Fraction(d), c) for d, c in histogram.items()]
    mean = sum(d * c for d, c in exact) / 600
    variance = sum(c * (d - mean) ** 2 for d, c in exact) / 600
    stats = compute_histogram_stats(real_buckets())
    assert stats is not None
    assert stats.std == pytest.approx(math.sqrt(variance), rel=1e-12)


def test_bucket_order_does_not_matter() -> None:
    buckets = real_buckets()
    assert compute_histogram_stats(buckets) == compute_histogram_stats(buckets[::-1])


def test_odd_packet_count_median_is_the_middle_packet() -> None:
    stats = compute_histogram_stats([(7.0, 1), (1.0, 1), (2.0, 1)])
    assert stats is not None
    assert (stats.packets, stats.median, stats.minimum, stats.p95) == (3, 2.0, 1.0, 7.0)
    assert stats.mean == pytest.approx(10 / 3, rel=1e-12)
    assert stats.std == pytest.approx(math.sqrt(186 / 27), rel=1e-12)


def test_even_packet_count_median_is_midpoint_of_two_middle_packets() -> None:
    stats = compute_histogram_stats([(1.0, 1), (2.0, 1), (4.0, 1), (10.0, 1)])
    assert stats is not None
    assert stats.median == 3.0
    assert stats.mean == 4.25
    assert stats.std == pytest.approx(math.sqrt((3.25**2 + 2.25**2 + 0.25**2 + 5.75**2) / 4))


def test_even_median_across_two_buckets() -> None:
    stats = compute_histogram_stats([(1.0, 2), (3.0, 2)])
    assert stats is not None
    assert (stats.median, stats.mean, stats.std) == (2.0, 2.0, 1.0)


def test_even_median_inside_one_bucket() -> None:
    stats = compute_histogram_stats([(1.0, 1), (3.0, 2), (5.0, 1)])
    assert stats is not None
    assert stats.median == 3.0


def test_p95_is_nearest_rank() -> None:
    twenty = compute_histogram_stats([(float(i), 1) for i in range(1, 21)])
    hundred = compute_histogram_stats([(float(i), 1) for i in range(1, 101)])
    three = compute_histogram_stats([(1.0, 1), (2.0, 1), (3.0, 1)])
    assert twenty is not None and hundred is not None and three is not None
    assert (twenty.p95, twenty.median) == (19.0, 10.5)  # rank ceil(19.0) = 19
    assert hundred.p95 == 95.0
    assert three.p95 == 3.0  # rank ceil(2.85) = 3


def test_zero_count_buckets_are_ignored() -> None:
    stats = compute_histogram_stats([(1.0, 0), (5.0, 2)])
    assert stats is not None
    assert (stats.packets, stats.minimum, stats.mean, stats.dropped_packets) == (2, 5.0, 5.0, 0)


def test_implausible_delays_are_dropped_and_counted() -> None:
    stats = compute_histogram_stats(
        [(-1000.0, 2), (50000.0, 3), (70000.0, 1), (-999.99, 1), (49999.99, 1), (10.0, 2)]
    )
    assert stats is not None
    assert stats.packets == 4
    assert stats.dropped_packets == 6
    assert stats.minimum == -999.99
    assert stats.mean == pytest.approx((-999.99 + 49999.99 + 20.0) / 4, rel=1e-12)
    assert stats.clock_suspect is True


def test_plausible_negative_delays_are_kept_and_flagged() -> None:
    stats = compute_histogram_stats([(-0.5, 1), (1.5, 3)])
    assert stats is not None
    assert (stats.packets, stats.mean, stats.minimum, stats.dropped_packets) == (4, 1.0, -0.5, 0)
    assert stats.clock_suspect is True


def test_positive_delays_are_not_clock_suspect() -> None:
    stats = compute_histogram_stats([(0.0, 1), (1.5, 3)])
    assert stats is not None
    assert stats.clock_suspect is False


@pytest.mark.parametrize(
    "buckets",
    [[(-2000.0, 10), (60000.0, 5)], [(-1000.0, 600)], [(50000.0, 1)], [], [(3.0, 0)]],
)
def test_no_plausible_packet_gives_none(buckets: list[tuple[float, int]]) -> None:
    assert compute_histogram_stats(buckets) is None


@given(
    st.lists(
        st.lists(
            st.one_of(
                st.sampled_from([-999.99, -0.5, 0.0, 2.6, 2.6 + 1e-12, 49999.99]),
                st.floats(-999.0, 49999.0, allow_nan=False),
            ),
            max_size=6,
        ),
        max_size=6,
    )
)
def test_bucket_order_is_lexsorts_also_with_repeated_and_nearly_equal_delays(
    histograms: list[list[float]],
) -> None:
    delays = np.array([d for h in histograms for d in h], dtype=np.float64)
    segment = np.repeat(np.arange(len(histograms)), [len(h) for h in histograms])
    expected = np.lexsort((delays, segment))
    assert np.array_equal(_by_histogram_then_delay(delays, segment), expected)
