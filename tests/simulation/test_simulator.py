"""The link simulator: mesh layout, utilisation truth, and the delay and loss physics."""

from __future__ import annotations

import re
import time

import numpy as np
import pytest

from service.parse.histogram import compute_histogram_stats
from simulation.simulator import (
    MAX_UTILISATION,
    Mesh,
    MinuteMeasurements,
    blocking_probability,
    build_mesh,
    simulate_histograms,
    simulate_minute,
    simulate_utilisation,
)

MINUTE = 28_333_334  # 2023-11-14T22:14:00Z
DELAY_KEY = re.compile(r"^-?\d+\.\d{2}$")


@pytest.fixture(scope="module")
def mesh() -> Mesh:
    return build_mesh()


def one_link_mesh(
    base_ms: float = 2.57, offset_ms: float = 0.0, jitter_ms: float = 0.0, buffer_ms: float = 40.0
) -> Mesh:
    """Host 0 -> host 1 with chosen physics, no background loss and a 0.5 ms burst service time."""

    def column(value: float) -> np.ndarray:
        return np.array([value])

    return Mesh(
        site_names=("SITE-01", "SITE-02"),
        host_names=("ps-latency.site01.example.org", "ps-latency.site02.example.org"),
        host_ips=("10.0.1.10", "10.0.2.10"),
        latitude_deg=np.zeros(2),
        longitude_deg=np.zeros(2),
        source=np.array([0]),
        destination=np.array([1]),
        base_delay_ms=column(base_ms),
        jitter_ms=column(jitter_ms),
        capacity_bps=column(10e9),
        buffer_ms=column(buffer_ms),
        service_ms=column(0.5),
        background_loss=column(0.0),
        clock_offset_ms=column(offset_ms),
        congestion_prone=np.array([False]),
    )


def minute_at(mesh: Mesh, utilisation: float, seed: int = 0) -> MinuteMeasurements:
    return simulate_minute(mesh, np.full(mesh.n_links, utilisation), MINUTE, seed)


def queueing_ms(mesh: Mesh, measured: MinuteMeasurements) -> np.ndarray:
    mean, _, _ = measured.delay_statistics()
    return mean - mesh.base_delay_ms - mesh.clock_offset_ms


# --- mesh ---------------------------------------------------------------------------------------


def test_default_mesh_links_every_directed_pair_once(mesh: Mesh) -> None:
    pairs = set(zip(mesh.source.tolist(), mesh.destination.tolist(), strict=True))
    assert mesh.n_links == 380 == len(pairs)
    assert all(source != destination for source, destination in pairs)
    assert len(set(mesh.host_ips)) == len(set(mesh.host_names)) == 20
    assert all(ip.startswith("10.") for ip in mesh.host_ips)
    assert mesh.host_names[0] == "ps-latency.site01.example.org"


def test_default_mesh_link_properties_are_in_range(mesh: Mesh) -> None:
    assert 1.0 <= mesh.base_delay_ms.min() and mesh.base_delay_ms.max() <= 150.0
    assert set(mesh.capacity_bps.tolist()) <= {10e9, 100e9}
    assert 20.0 <= mesh.buffer_ms.min() and mesh.buffer_ms.max() <= 80.0
    assert 0.0 < mesh.jitter_ms.min() and mesh.jitter_ms.max() < 1.0
    assert mesh.congestion_prone.sum() >= 3


def test_drifted_clocks_make_some_delays_negative_but_not_absurd(mesh: Mesh) -> None:
    measured_base = mesh.base_delay_ms + mesh.clock_offset_ms
    assert (mesh.clock_offset_ms == 0).mean() > 0.5
    assert (measured_base < 0).sum() >= 1
    assert measured_base.min() > -1000.0


def test_clock_offset_of_a_link_is_minus_that_of_its_reverse(mesh: Mesh) -> None:
    pairs = list(zip(mesh.source.tolist(), mesh.destination.tolist(), strict=True))
    index = {pair: link for link, pair in enumerate(pairs)}
    order = [index[(destination, source)] for source, destination in pairs]
    np.testing.assert_array_equal(mesh.clock_offset_ms, -mesh.clock_offset_ms[order])


def test_mesh_is_reproducible_by_seed_and_differs_between_seeds() -> None:
    first, again, other = build_mesh(seed=7), build_mesh(seed=7), build_mesh(seed=8)
    np.testing.assert_array_equal(first.base_delay_ms, again.base_delay_ms)
    np.testing.assert_array_equal(first.clock_offset_ms, again.clock_offset_ms)
    assert not np.array_equal(first.base_delay_ms, other.base_delay_ms)


def test_small_meshes_still_have_a_negative_delay_link() -> None:
    for n_sites in (2, 3, 5):
        small = build_mesh(n_sites, seed=1)
        assert small.n_links == n_sites * (n_sites - 1)
        assert (small.base_delay_ms + small.clock_offset_ms < 0).any()


def test_a_mesh_needs_two_sites() -> None:
    with pytest.raises(ValueError):
        build_mesh(1)


# --- utilisation --------------------------------------------------------------------------------


def test_each_utilisation_minute_is_a_pure_function_of_the_minute(mesh: Mesh) -> None:
    start = MINUTE - 7
    block = simulate_utilisation(mesh, start, 300, seed=3)
    for k in (0, 1, 6, 7, 66, 67, 181, 299):
        single = simulate_utilisation(mesh, start + k, 1, seed=3)
        np.testing.assert_array_equal(block[:, k], single[:, 0])
    head = simulate_utilisation(mesh, start, 100, seed=3)
    tail = simulate_utilisation(mesh, start + 100, 200, seed=3)
    np.testing.assert_array_equal(block, np.hstack([head, tail]))


def test_utilisation_works_for_minutes_near_epoch_zero(mesh: Mesh) -> None:
    early = simulate_utilisation(mesh, 0, 120, seed=0)
    assert early.shape == (380, 120)
    np.testing.assert_array_equal(early[:, 5], simulate_utilisation(mesh, 5, 1, 0)[:, 0])


def test_utilisation_over_a_day_has_diurnal_bursty_bulk_load(mesh: Mesh) -> None:
    day = simulate_utilisation(mesh, MINUTE, 1440, seed=0)
    assert day.shape == (380, 1440)
    assert 0.0 <= day.min() and day.max() <= MAX_UTILISATION
    assert (day > 1.0).any()
    prone_busy = (day[mesh.congestion_prone] > 0.8).mean()
    other_busy = (day[~mesh.congestion_prone] > 0.8).mean()
    assert prone_busy > 0.1 and prone_busy > 5 * other_busy
    assert (day > 0.8).mean(axis=1).max() < 1.0  # no link is saturated all day


def test_utilisation_is_reproducible_by_seed_and_differs_between_seeds(mesh: Mesh) -> None:
    first = simulate_utilisation(mesh, MINUTE, 60, seed=1)
    np.testing.assert_array_equal(first, simulate_utilisation(mesh, MINUTE, 60, seed=1))
    assert not np.array_equal(first, simulate_utilisation(mesh, MINUTE, 60, seed=2))


# --- one minute of measurements -----------------------------------------------------------------


def test_idle_link_without_jitter_delivers_every_packet_at_its_base_delay() -> None:
    measured = minute_at(one_link_mesh(base_ms=2.57), 0.0)
    assert measured.histogram(0) == {"2.57": 600}
    assert measured.loss.tolist() == [0.0]
    assert measured.timestamp == MINUTE * 60


def test_a_clock_offset_beyond_the_base_delay_gives_negative_delays() -> None:
    measured = minute_at(one_link_mesh(base_ms=2.57, offset_ms=-10.0), 0.0)
    assert measured.histogram(0) == {"-7.43": 600}
    stats = compute_histogram_stats([(-7.43, 600)])
    assert stats is not None and stats.clock_suspect


def test_negative_delays_appear_on_the_default_mesh(mesh: Mesh) -> None:
    measured = minute_at(mesh, 0.3)
    negative = np.flatnonzero(mesh.base_delay_ms + mesh.clock_offset_ms < -1.0)
    assert all(float(min(measured.histogram(link), key=float)) < 0 for link in negative)


def test_above_capacity_the_queue_sits_at_the_buffer_and_the_overflow_is_lost() -> None:
    link = one_link_mesh(base_ms=5.0, buffer_ms=40.0)
    measured = minute_at(link, 1.3)
    delays = measured.delays_ms[0, : measured.received[0]]
    assert delays.max() <= 45.0
    assert np.median(delays) > 5.0 + 0.9 * 40.0
    assert measured.loss[0] == pytest.approx(1 - 1 / 1.3, abs=0.07)


def test_queueing_delay_never_exceeds_the_buffer(mesh: Mesh) -> None:
    for utilisation in (0.9, 1.0, 1.3):
        measured = minute_at(mesh, utilisation)
        queue = measured.delays_ms - (mesh.base_delay_ms + mesh.clock_offset_ms)[:, None]
        jitter_allowance = 20 * mesh.jitter_ms[:, None] + 0.01
        assert np.nanmax(queue - mesh.buffer_ms[:, None] - jitter_allowance) <= 0


def test_mean_delay_and_loss_rise_with_utilisation(mesh: Mesh) -> None:
    levels = (0.2, 0.5, 0.8, 0.9, 0.95, 1.0, 1.1, 1.3)
    queue = [np.mean(queueing_ms(mesh, minute_at(mesh, u))) for u in levels]
    loss = [minute_at(mesh, u).loss.mean() for u in levels]
    assert np.all(np.diff(queue) > 0)
    assert np.all(np.diff(loss[2:]) > 0)
    assert queue[0] < 1.0 and queue[2] > 2 * queue[0] and queue[-1] > 30.0
    assert loss[0] < 0.001 and loss[-1] > 0.2


def test_loss_is_mostly_zero_at_low_load_with_occasional_single_packets(mesh: Mesh) -> None:
    minutes = [minute_at(mesh, 0.3, seed) for seed in range(5)]
    lost = np.concatenate([m.packets - m.received for m in minutes])
    assert (lost == 0).mean() > 0.9
    assert (lost == 1).any()


def test_histograms_hold_the_delivered_packets_and_loss_is_a_ratio(mesh: Mesh) -> None:
    utilisation = simulate_utilisation(mesh, MINUTE, 1, seed=0)[:, 0]
    utilisation[:40] = 1.2  # some links overloaded
    measured = simulate_minute(mesh, utilisation, MINUTE, seed=0)
    for link in range(mesh.n_links):
        histogram = measured.histogram(link)
        assert sum(histogram.values()) == measured.received[link]
        assert all(DELAY_KEY.match(key) for key in histogram)
    np.testing.assert_array_equal(measured.loss, (600 - measured.received) / 600)
    assert 0.0 <= measured.loss.min() and measured.loss.max() <= 1.0
    assert measured.loss[:40].min() > 0.05


def test_delay_statistics_agree_with_the_service_histogram_stats(mesh: Mesh) -> None:
    utilisation = np.linspace(0.0, 1.3, mesh.n_links)
    measured = simulate_minute(mesh, utilisation, MINUTE, seed=5)
    mean, std, median = measured.delay_statistics()
    for link in range(0, mesh.n_links, 19):
        buckets = [(float(k), n) for k, n in measured.histogram(link).items()]
        stats = compute_histogram_stats(buckets)
        assert stats is not None and stats.packets == measured.received[link]
        assert (mean[link], std[link], median[link]) == pytest.approx(
            (stats.mean, stats.std, stats.median), abs=1e-9
        )


def test_delay_statistics_are_nan_when_every_packet_is_lost() -> None:
    measured = MinuteMeasurements(0, np.zeros((1, 4), np.int32), np.array([0]), 4)
    assert all(np.isnan(value[0]) for value in measured.delay_statistics())
    assert measured.histogram(0) == {}
    assert measured.loss.tolist() == [1.0]


def test_measurements_are_reproducible_by_seed_and_differ_between_seeds(mesh: Mesh) -> None:
    first, again, other = (minute_at(mesh, 0.9, seed) for seed in (4, 4, 5))
    np.testing.assert_array_equal(first.buckets, again.buckets)
    np.testing.assert_array_equal(first.received, again.received)
    assert not np.array_equal(first.buckets, other.buckets)


def test_blocking_probability_of_constructed_queues() -> None:
    probability = blocking_probability(np.array([0.5, 1.0, 2.0, 0.0]), np.array([1, 4, 60, 10]))
    expected = [1 / 3, 1 / 5, 2**60 / (2**61 - 1), 0.0]
    np.testing.assert_allclose(probability, expected, rtol=1e-6, atol=1e-12)


def test_simulate_histograms_yields_the_minutes_in_order(mesh: Mesh) -> None:
    utilisation = simulate_utilisation(mesh, MINUTE, 3, seed=0)
    minutes = list(simulate_histograms(mesh, utilisation, MINUTE, seed=0))
    assert [m.minute for m in minutes] == [MINUTE, MINUTE + 1, MINUTE + 2]
    single = simulate_minute(mesh, utilisation[:, 2], MINUTE + 2, seed=0)
    np.testing.assert_array_equal(minutes[2].buckets, single.buckets)


def test_an_hour_of_the_whole_mesh_simulates_quickly(mesh: Mesh) -> None:
    started = time.perf_counter()
    utilisation = simulate_utilisation(mesh, MINUTE, 60, seed=0)
    for measured in simulate_histograms(mesh, utilisation, MINUTE, seed=0):
        measured.delay_statistics()
    assert time.perf_counter() - started < 10.0  # about 1 s: a day of 380 links in well under 1 min
