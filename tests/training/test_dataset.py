"""Dataset builder: replay through the service's state, feature/label alignment, link split."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from service.analysis.features import FEATURE_NAMES
from service.parse.histogram import compute_histogram_stats
from simulation.bus_format import build_delay_message, build_loss_message
from simulation.simulator import (
    MinuteMeasurements,
    build_mesh,
    simulate_minute,
    simulate_utilisation,
)
from training.dataset import (
    DEFAULT_START_MINUTE,
    WARMUP_MINUTES,
    Dataset,
    DataSource,
    build_real_dataset,
    build_simulated_dataset,
    compute_minute_stats,
    compute_target,
    replay_simulation,
    split_by_family,
    split_link_ids,
    split_links,
)

SEED = 3
FIRST = DEFAULT_START_MINUTE - WARMUP_MINUTES
COLUMNS = {name: i for i, name in enumerate(FEATURE_NAMES)}


@pytest.fixture(scope="module")
def small() -> Dataset:
    return build_simulated_dataset(sites=4, days=0.05, seed=SEED)


def step_utilisation(n_minutes: int, jump_at: int, links: int = 2) -> np.ndarray:
    """Link 0 idles at 0.1 and jumps to 1.2 at column `jump_at`; the others idle throughout."""
    utilisation = np.full((links, n_minutes), 0.1)
    utilisation[0, jump_at:] = 1.2
    return utilisation


def row_at(dataset: Dataset, link: int, minute: int) -> int:
    (index,) = np.flatnonzero((dataset.link == link) & (dataset.minute == minute))
    return int(index)


# --- per-minute statistics ---------------------------------------------------------------------


def test_vectorised_minute_stats_equal_the_service_histogram_stats_as_stored() -> None:
    mesh = build_mesh(4, SEED)
    rng = np.random.default_rng(1)
    for minute in range(FIRST, FIRST + 5):
        measured = simulate_minute(mesh, rng.uniform(0, 1.3, mesh.n_links), minute, SEED)
        for link, got in enumerate(compute_minute_stats(measured)):
            buckets = [(float(d), c) for d, c in measured.histogram(link).items()]
            want = compute_histogram_stats(buckets)
            fields = ("mean", "std", "median", "minimum", "p95")
            as_float32 = [np.float32(getattr(s, f)) for s in (got, want) for f in fields]
            assert as_float32[:5] == as_float32[5:]
            assert (got.packets, got.clock_suspect) == (want.packets, want.clock_suspect)


def test_minute_stats_are_none_for_a_link_that_lost_every_packet() -> None:
    buckets = np.array([[250, 260, 270], [100, 100, 100]], dtype=np.int32)
    measured = MinuteMeasurements(FIRST, buckets, received=np.array([3, 0]), packets=3)
    first, lost = compute_minute_stats(measured)
    assert (first.mean, first.median, first.minimum, first.p95) == (2.6, 2.6, 2.5, 2.7)
    assert lost is None


# --- alignment ---------------------------------------------------------------------------------


def test_label_and_features_of_a_row_describe_the_same_minute() -> None:
    mesh = build_mesh(2, SEED)
    jump = WARMUP_MINUTES + 10  # column of the first congested minute (column 0 is FIRST - 1)
    dataset = replay_simulation(mesh, step_utilisation(jump + 5, jump), FIRST, SEED)
    t = FIRST - 1 + jump
    before, at = row_at(dataset, 0, t - 1), row_at(dataset, 0, t)
    assert (dataset.label[before], dataset.label[at]) == (0.0, 1.0)
    assert (dataset.persistence[at], dataset.persistence[row_at(dataset, 0, t + 1)]) == (
        pytest.approx(0.1),
        pytest.approx(1.2),
    )
    gradient = dataset.features[:, COLUMNS["delay_gradient"]]
    loss = dataset.features[:, COLUMNS["loss_smoothed_lag0"]]
    assert abs(gradient[before]) < 0.05 < gradient[at]
    assert loss[at] > 10 * loss[before] + 0.001


def test_features_use_no_data_after_their_minute() -> None:
    mesh = build_mesh(3, SEED)
    calm = np.full((mesh.n_links, WARMUP_MINUTES + 30), 0.2)
    stormy = calm.copy()
    stormy[:, WARMUP_MINUTES + 15 :] = 1.2  # changes only minutes after the compared ones
    a = replay_simulation(mesh, calm, FIRST, SEED)
    b = replay_simulation(mesh, stormy, FIRST, SEED)
    early_a = a.minute < FIRST + WARMUP_MINUTES + 14
    early_b = b.minute < FIRST + WARMUP_MINUTES + 14
    np.testing.assert_array_equal(a.features[early_a], b.features[early_b])
    assert not np.array_equal(a.features[~early_a], b.features[~early_b])


def test_simulated_rows_carry_the_simulated_utilisation_of_their_minute(small: Dataset) -> None:
    mesh = build_mesh(4, SEED)
    for index in (0, len(small) // 2, len(small) - 1):
        truth = simulate_utilisation(mesh, int(small.minute[index]), 1, SEED)[small.link[index], 0]
        before = simulate_utilisation(mesh, int(small.minute[index]) - 1, 1, SEED)
        assert small.utilisation[index] == pytest.approx(truth, abs=1e-6)
        assert small.persistence[index] == pytest.approx(before[small.link[index], 0], abs=1e-6)


def test_a_simulated_dataset_has_every_link_every_minute_after_the_warm_up(small: Dataset) -> None:
    assert small.features.shape == (12 * 72, len(FEATURE_NAMES))
    assert small.features.dtype == np.float32 and not np.isnan(small.features).any()
    assert small.minute.min() == DEFAULT_START_MINUTE
    assert small.description["kind"] == "simulated" and "SIMULATED" in small.description["note"]
    np.testing.assert_array_equal(small.label, compute_target(small.utilisation, "nettel"))


def test_targets() -> None:
    u = np.array([0.2, 0.7, 0.75, 1.1])
    assert compute_target(u, "ratio").tolist() == pytest.approx([0.2, 0.7, 0.75, 1.0])
    assert compute_target(u, "nettel").tolist() == pytest.approx([0.0, 0.0, 0.75, 1.0])
    with pytest.raises(ValueError):
        compute_target(u, "bits")


def test_the_same_source_builds_the_same_rows(small: Dataset) -> None:
    again = DataSource(sites=4, days=0.05, seed=SEED).build("nettel")
    np.testing.assert_array_equal(small.features, again.features)
    np.testing.assert_array_equal(small.label, again.label)


# --- split -------------------------------------------------------------------------------------


def test_split_holds_out_whole_links_with_busy_links_on_both_sides() -> None:
    dataset = build_simulated_dataset(sites=8, days=0.01, seed=SEED)  # 56 links, 3 prone
    split = split_links(dataset, 0.2, seed=SEED)
    assert not set(split.train) & set(split.holdout)
    assert set(split.train) | set(split.holdout) == set(range(56))
    assert len(split.holdout) == 1 + round(0.2 * 53)
    assert dataset.prone[split.holdout].sum() == 1 and dataset.prone[split.train].sum() == 2
    training_rows = dataset.rows_of(split.train)
    assert not np.isin(training_rows.link, split.holdout).any()


def test_split_is_deterministic_for_a_seed(small: Dataset) -> None:
    first, second = split_links(small, 0.25, seed=1), split_links(small, 0.25, seed=1)
    np.testing.assert_array_equal(first.holdout, second.holdout)
    others = {tuple(split_links(small, 0.25, seed=s).holdout) for s in range(2, 8)}
    assert len(others) > 1


def test_calibration_links_come_out_of_the_training_links_as_split_by_family_draws_them(
    small: Dataset,
) -> None:
    split = split_links(small, 0.25, seed=1, calibration_fraction=0.2)
    without = split_links(small, 0.25, seed=1)
    np.testing.assert_array_equal(split.holdout, without.holdout)
    assert len(split.calibration) and set(split.calibration) <= set(without.train)
    np.testing.assert_array_equal(split.train, np.setdiff1d(without.train, split.calibration))
    by_family = split_by_family(small, 0.25, 1, 0.2)  # one family
    ids = split_link_ids(np.arange(12), small.prone, 0.25, 1, 0.2)  # as streamed training
    for side in ("train", "holdout", "calibration"):
        np.testing.assert_array_equal(getattr(split, side), getattr(by_family, side))
        np.testing.assert_array_equal(getattr(split, side), getattr(ids, side))
    with pytest.raises(ValueError, match="calibration fraction"):
        split_links(small, 0.25, seed=1, calibration_fraction=0.75)


# --- real source -------------------------------------------------------------------------------


#: Link 0's loss of this minute of a capture is sent wrong first, then right after every later
#: minute: a repeated datapoint out of order, whose last value wins (as in serving).
REPEATED_MINUTE = 16


def write_capture(
    directory: Path, minutes: int, first: int = FIRST
) -> tuple[list[str], np.ndarray]:
    """Bus messages of a 2-site simulated mesh from minute `first`, one JSON line per message;
    returns the link IPs and the utilisation (links x minutes: a rising series for link 0, a
    falling one for link 1). One datapoint is repeated out of order (REPEATED_MINUTE)."""
    mesh = build_mesh(2, SEED)
    rising = np.linspace(0.1, 1.1, minutes)
    utilisation = np.vstack([rising, rising[::-1]])
    lines, late = [], []
    for k in range(minutes):
        measured = simulate_minute(mesh, utilisation[:, k], first + k, SEED)
        for link in range(2):
            ts = measured.timestamp
            delay = build_delay_message(mesh, link, {ts: measured.histogram(link)})
            loss = build_loss_message(mesh, link, {ts: float(measured.loss[link])})
            if (k, link) == (REPEATED_MINUTE, 0):
                late.append(json.dumps({"headers": loss[0], "body": loss[1]}))
                loss = build_loss_message(mesh, link, {ts: 0.5})
            lines += [json.dumps({"headers": h, "body": b}) for h, b in (delay, loss)]
    directory.mkdir()
    (directory / "capture.jsonl").write_text("\n".join(lines + late) + "\n")
    return list(mesh.host_ips), utilisation


def test_real_data_is_labelled_through_the_router_map(tmp_path: Path) -> None:
    minutes = WARMUP_MINUTES + 20
    ips, utilisation = write_capture(tmp_path / "perfsonar", minutes)
    flows = [
        {
            "data": {
                "src_site": "A",
                "dst_site": "B",
                "timestamp": (FIRST + k) * 60,
                "throughput": utilisation[0, k] * 10e9,
            }
        }
        for k in range(minutes)
    ]
    (tmp_path / "flows.jsonl").write_text("\n".join(json.dumps(f) for f in flows))
    mapping = {
        "links": [
            {
                "source": ips[0],
                "destination": ips[1],
                "file": "flows.jsonl",
                "format": "lhcopn_flows",
                "series": "A->B",
                "capacity_bps": 10e9,
            }
        ]
    }
    (tmp_path / "map.json").write_text(json.dumps(mapping))
    dataset = build_real_dataset(tmp_path / "perfsonar", tmp_path / "map.json", "ratio")
    assert set(dataset.link.tolist()) == {0}  # only the mapped link has labels
    assert dataset.minute.min() == FIRST + WARMUP_MINUTES
    columns = dataset.minute - FIRST
    np.testing.assert_allclose(dataset.utilisation, utilisation[0, columns], rtol=1e-6)
    np.testing.assert_allclose(dataset.persistence, utilisation[0, columns - 1], rtol=1e-6)
    simulated = replay_simulation(
        build_mesh(2, SEED), np.hstack([utilisation[:, :1], utilisation]), FIRST, SEED, "ratio"
    )
    np.testing.assert_array_equal(dataset.features, simulated.rows_of(np.array([0])).features)
