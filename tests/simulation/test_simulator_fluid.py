"""Simulator family B (simulation.simulator_fluid): seeded, and its queue physics as documented."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from simulation.simulator import BUCKETS_PER_MS, MinuteMeasurements
from simulation.simulator_fluid import (
    KINDS,
    SLICES_PER_MINUTE,
    FluidTraffic,
    build_fluid_mesh,
    kappa,
    norros_exceedance,
    policer_drop_probability,
    queue_waits_ms,
    simulate_fluid_minute,
    simulate_traffic,
)
from training.dataset import WARMUP_MINUTES, build_family_dataset, family_links, split_by_family

FIRST = 28_401_120
SEED = 5


def fixed_traffic(n_links: int, offered: float, queue_load: float | None = None) -> FluidTraffic:
    """One minute of constant load on every link (no uplink load)."""
    shape = (n_links, 1, SLICES_PER_MINUTE)
    load = np.full(shape, offered)
    queue = load if queue_load is None else np.full(shape, queue_load)
    return FluidTraffic(FIRST, load, queue, np.zeros(shape), np.minimum(load, 1.0))


def test_the_same_seed_gives_the_same_mesh_traffic_and_probes() -> None:
    one, two = build_fluid_mesh(4, SEED), build_fluid_mesh(4, SEED)
    np.testing.assert_array_equal(one.buffer_ms, two.buffer_ms)
    np.testing.assert_array_equal(one.kind, two.kind)
    traffic = simulate_traffic(one, FIRST, 30, SEED)
    again = simulate_traffic(two, FIRST, 30, SEED)
    np.testing.assert_array_equal(traffic.offered, again.offered)
    np.testing.assert_array_equal(traffic.hop_load, again.hop_load)
    first = simulate_fluid_minute(one, traffic, FIRST + 3, SEED)
    second = simulate_fluid_minute(two, again, FIRST + 3, SEED)
    np.testing.assert_array_equal(first.buckets, second.buckets)
    np.testing.assert_array_equal(first.received, second.received)
    other = simulate_traffic(build_fluid_mesh(4, SEED + 1), FIRST, 30, SEED + 1)
    assert not np.array_equal(other.offered, traffic.offered)


def test_the_mesh_has_every_link_kind_and_both_buffer_depths() -> None:
    mesh = build_fluid_mesh(20, SEED)
    assert {KINDS[k] for k in np.unique(mesh.kind)} == set(KINDS)
    plain = mesh.is_kind("plain")
    assert (mesh.buffer_ms[plain] <= 10).any() and (mesh.buffer_ms[plain] >= 30).any()
    assert (mesh.hurst >= 0.7).all() and (mesh.hurst <= 0.9).all()
    assert (
        mesh.hop[mesh.is_kind("shared_hop")] == mesh.hosts.source[mesh.is_kind("shared_hop")]
    ).all()
    assert (mesh.hop[~mesh.is_kind("shared_hop")] == -1).all()
    assert mesh.hosts.site_names[0] == "FLUID-01" and mesh.hosts.host_ips[0] == "10.128.1.10"


def test_labels_are_carried_traffic_never_above_the_limiter() -> None:
    mesh = build_fluid_mesh(8, SEED)
    traffic = simulate_traffic(mesh, FIRST, 6 * 60, SEED)
    np.testing.assert_array_equal(
        traffic.carried, np.minimum(traffic.offered, mesh.limiter_rate[:, None, None])
    )
    utilisation = traffic.utilisation
    assert utilisation.shape == (mesh.n_links, 6 * 60)
    limited = mesh.is_kind("policed") | mesh.is_kind("shaped")
    assert (utilisation[limited] <= mesh.limiter_rate[limited, None] + 1e-12).all()
    assert utilisation.max() <= 1.0
    shaped = mesh.is_kind("shaped")
    np.testing.assert_allclose(
        traffic.queue_load[shaped], traffic.offered[shaped] / mesh.limiter_rate[shaped, None, None]
    )


def test_policer_drops_exactly_the_excess_over_its_rate() -> None:
    assert policer_drop_probability(np.array([0.5, 0.8, 1.0, 1.25]), np.array(0.8)).round(
        6
    ).tolist() == [
        0.0,
        0.0,
        0.2,
        0.36,
    ]
    mesh = build_fluid_mesh(6, SEED)
    n = mesh.n_links
    policed = replace(
        mesh,
        kind=np.full(n, KINDS.index("policed")),
        limiter_rate=np.full(n, 0.8),
        buffer_ms=np.full(n, 100.0),
        burstiness_ms=np.full(n, 0.02),
        hop=np.full(n, -1),
    )
    policed = replace(policed, hosts=replace(mesh.hosts, background_loss=np.zeros(n)))
    # offered 1.0 -> the policer forwards 0.8: the queue behind it is below capacity
    measured = simulate_fluid_minute(policed, fixed_traffic(n, 1.0, queue_load=0.8), FIRST, SEED)
    loss = measured.loss.mean()
    sd = np.sqrt(0.2 * 0.8 / (n * measured.packets))
    assert abs(loss - 0.2) < 4 * sd  # only the policer drops: P(wait > 100 ms) ~ 1e-100


def test_waits_never_exceed_the_buffer_and_overload_fills_it() -> None:
    rng = np.random.default_rng(0)
    buffers = np.array([[2.0], [100.0]])
    waits, dropped = queue_waits_ms(
        rng, np.full((2, 1), 0.95), buffers, np.full((2, 1), 0.3), np.full((2, 1), 0.85), 20_000
    )
    assert (waits[0] <= 2.0).all() and (waits[1] <= 100.0).all()
    assert dropped[0].mean() > dropped[1].mean()  # the shallow buffer tail-drops more
    assert (waits[0][dropped[0]] == 2.0).all()
    waits, dropped = queue_waits_ms(
        rng, np.full((2, 1), 1.25), buffers, np.full((2, 1), 0.3), np.full((2, 1), 0.85), 20_000
    )
    assert (waits >= 0.9 * buffers).all() and (waits <= buffers).all()
    sd = np.sqrt(0.2 * 0.8 / 20_000)
    assert abs(dropped.mean(axis=1) - 0.2).max() < 4 * sd  # fluid overflow 1 - 1/1.25


def test_waits_follow_norros_weibull_tail() -> None:
    rng = np.random.default_rng(1)
    rho, a, h = 0.8, 0.2, 0.8
    waits, dropped = queue_waits_ms(
        rng, np.array([[rho]]), np.array([[1e6]]), np.array([[a]]), np.array([[h]]), 200_000
    )
    assert not dropped.any()
    sd = np.sqrt(0.25 / 200_000)
    assert abs((waits > 0).mean() - rho) < 4 * sd  # busy probability rho
    for x in (0.5, 2.0, 5.0):
        expected = float(norros_exceedance(np.array(rho), np.array(x), np.array(a), np.array(h)))
        assert abs((waits > x).mean() - expected) < 4 * sd
    assert float(kappa(np.array(0.5))) == pytest.approx(0.5)


def test_measurements_keep_family_a_interface() -> None:
    mesh = build_fluid_mesh(3, SEED)
    traffic = simulate_traffic(mesh, FIRST, 2, SEED)
    measured = simulate_fluid_minute(mesh, traffic, FIRST + 1, SEED)
    assert isinstance(measured, MinuteMeasurements)
    assert measured.buckets.shape == (mesh.n_links, 600) and measured.minute == FIRST + 1
    fixed = mesh.hosts.base_delay_ms + mesh.hosts.clock_offset_ms
    delivered = measured.delays_ms  # NaN for the lost probes, which sort last
    assert (np.nanmin(delivered, axis=1) >= np.floor(fixed * BUCKETS_PER_MS) / BUCKETS_PER_MS).all()


def test_a_mixed_dataset_splits_each_family_as_it_would_alone() -> None:
    days = 3 / 1440
    mixed = build_family_dataset("mixed", 3, days, SEED, "ratio", FIRST)
    alone = build_family_dataset("B", 3, days, SEED, "ratio", FIRST)
    families = family_links(mixed)
    assert {k: v.tolist() for k, v in families.items()} == {
        "A": list(range(6)),
        "B": list(range(6, 12)),
    }
    b_rows = mixed.rows_of(families["B"])
    np.testing.assert_array_equal(b_rows.features, alone.features)
    np.testing.assert_array_equal(b_rows.link - 6, alone.link)
    assert len(alone) == 6 * 3 and alone.minute.min() == FIRST  # rows after the warm-up
    assert alone.description["family"] == "B" and WARMUP_MINUTES == 32
    split, own = split_by_family(mixed, 0.34, SEED), split_by_family(alone, 0.34, SEED)
    np.testing.assert_array_equal(split.holdout[split.holdout >= 6] - 6, own.holdout)
    with_calibration = split_by_family(mixed, 0.34, SEED, 0.17)
    calibration = with_calibration.calibration
    assert (calibration < 6).any() and (calibration >= 6).any()  # each family calibrates
    np.testing.assert_array_equal(with_calibration.holdout, split.holdout)
    everything = np.concatenate(
        [with_calibration.train, with_calibration.holdout, with_calibration.calibration]
    )
    assert sorted(everything.tolist()) == list(range(12))
