"""Throughput state: the latest result and its retransmits, the 4-day bins and AAAS's scores
over them, windows, repeats, retirement."""

from __future__ import annotations

import math

import numpy as np
import pytest

from service.errors import RejectReason
from service.parse.records import LinkEndpoints, MeasurementKind, ParsedMessage
from service.state import link_state
from service.state.link_state import LinkState
from service.state.throughput_state import BIN_SECONDS, BINS, ThroughputState
from tests.message_factory import link, loss_message

#: The start of a 4-day bin, and a moment well inside the newest one.
BIN = 1_795_000_000 // BIN_SECONDS * BIN_SECONDS
NOW = BIN + 3 * 86_400
GBIT = 1e9


def rates(values: dict[int, float], ends: LinkEndpoints | None = None) -> ParsedMessage:
    message = ParsedMessage(MeasurementKind.THROUGHPUT, ends or link())
    message.throughputs.extend(values.items())
    return message


def retransmits(values: dict[int, int], ends: LinkEndpoints | None = None) -> ParsedMessage:
    message = ParsedMessage(MeasurementKind.RETRANSMITS, ends or link())
    message.retransmits.extend(values.items())
    return message


def test_the_latest_result_and_its_retransmits_are_read_together() -> None:
    state = LinkState()
    earlier, later = NOW - 4 * 3600, NOW - 60
    outcomes = state.apply_batch(
        [rates({earlier: 9.1 * GBIT, later: 8.5 * GBIT}), retransmits({earlier: 120})], NOW
    )
    assert [o.applied for o in outcomes] == [2, 1] and state.stored_total == 3
    latest = state.results(NOW).throughput
    assert (latest.bps.tolist(), latest.time.tolist()) == ([8.5 * GBIT], [later])
    assert latest.retransmits.tolist() == [-1]  # the count is the earlier test's
    state.apply(retransmits({later: 7}), NOW)
    assert state.results(NOW).throughput.retransmits.tolist() == [7]


def test_a_link_without_results_reads_as_none() -> None:
    state = LinkState()
    state.apply(loss_message({NOW - 60: 0.0}), NOW)
    latest = state.results(NOW).throughput
    assert math.isnan(latest.bps[0]) and latest.time[0] == -1 and latest.retransmits[0] == -1
    change = state.results(NOW).bandwidth
    assert change.bins.tolist() == [0] and math.isnan(change.z[0])


def test_results_fall_into_4_day_bins_and_give_their_means() -> None:
    state = LinkState()
    batch = [rates({BIN - k * BIN_SECONDS + 3600: (k + 1) * GBIT}) for k in range(BINS)]
    batch.append(rates({BIN + 7200: 2 * GBIT}))  # a second result in the newest bin
    state.apply_batch(sorted(batch, key=lambda m: m.throughputs[0][0]), NOW)
    means, counts = state.throughput.bin_means(np.array([0]), NOW)
    assert counts.tolist() == [[1, 1, 1, 1, 1, 2]]
    assert means.tolist() == [[6 * GBIT, 5 * GBIT, 4 * GBIT, 3 * GBIT, 2 * GBIT, 1.5 * GBIT]]
    later = NOW + BIN_SECONDS  # a bin on: the oldest has left the 21 days
    means, _ = state.throughput.bin_means(np.array([0]), later)
    assert np.isnan(means[0, -1]) and means[0, 0] == 5 * GBIT


def aaas_scores(bin_means: list[float]) -> tuple[float, float]:
    """AAAS's z and change of the newest bin, as its pandas code computes them (std ddof 1)."""
    values = np.array(bin_means)
    mean, std = values.mean(), values.std(ddof=1)
    return (values[-1] - mean) / std, (values[-1] - mean) / mean


def test_the_bandwidth_change_is_aaas_z_and_change_of_the_newest_bin() -> None:
    history = [9.4, 9.3, 9.5, 9.4, 9.2, 3.1]  # Gb/s per bin, oldest first: a drop
    state = LinkState()
    for k, value in enumerate(history):
        start = BIN - (BINS - 1 - k) * BIN_SECONDS
        state.apply(rates({start + 600: value * GBIT}), NOW)
    change = state.results(NOW).bandwidth
    z, ratio = aaas_scores([v * GBIT for v in history])
    assert change.z[0] == pytest.approx(z) and change.change[0] == pytest.approx(ratio)
    assert change.z[0] <= -2 and change.change[0] <= -0.5  # AAAS's "bandwidth decreased"
    assert change.bins.tolist() == [BINS] and change.newest_mean[0] == 3.1 * GBIT


def test_no_score_without_two_bins_a_newest_one_or_any_spread() -> None:
    state = LinkState()
    ends = [link(source=f"192.0.2.{n}") for n in (1, 2, 3)]
    state.apply(rates({NOW - 60: GBIT}, ends[0]), NOW)  # one bin
    state.apply(rates({BIN - BIN_SECONDS: GBIT}, ends[1]), NOW)  # not the newest bin
    state.apply(rates({BIN - BIN_SECONDS: GBIT, NOW - 60: GBIT}, ends[2]), NOW)  # no spread
    change = state.results(NOW).bandwidth
    assert np.isnan(change.z).all() and np.isnan(change.change).all()
    assert change.bins.tolist() == [1, 1, 2]


def test_a_repeated_result_counts_once_and_an_older_one_is_too_old() -> None:
    state = LinkState()
    state.apply(rates({NOW - 600: GBIT}), NOW)
    repeat = state.apply(rates({NOW - 600: GBIT, NOW - 7200: 3 * GBIT}), NOW)
    assert repeat.applied == 1 and repeat.rejected == [RejectReason.TOO_OLD]
    _, counts = state.throughput.bin_means(np.array([0]), NOW)
    assert counts.sum() == 1
    twice = state.apply(rates({NOW - 60: 2 * GBIT}), NOW)
    twice_again = state.apply_batch([rates({NOW - 30: GBIT}), rates({NOW - 30: GBIT})], NOW)
    assert twice.applied == 1 and [o.applied for o in twice_again] == [1, 1]
    means, counts = state.throughput.bin_means(np.array([0]), NOW)
    assert counts.sum() == 3 and means[0, -1] == pytest.approx(4 * GBIT / 3)


def test_results_outside_the_window_are_refused_by_reason() -> None:
    state = LinkState()
    oldest = ThroughputState.window_start(NOW + 10)
    outcome = state.apply(
        rates({NOW + 11: GBIT, oldest - 1: GBIT, oldest: 2 * GBIT, NOW + 10: 3 * GBIT}), NOW
    )
    assert outcome.rejected == [RejectReason.FUTURE, RejectReason.TOO_OLD]
    assert outcome.applied == 2
    assert state.results(NOW).throughput.bps.tolist() == [3 * GBIT]


def test_the_window_spans_the_ring_and_no_more() -> None:
    assert ThroughputState.window_start(BIN) == BIN - (BINS - 1) * BIN_SECONDS
    assert ThroughputState.window_start(BIN - 1) == BIN - BINS * BIN_SECONDS
    assert (BINS - 1) * BIN_SECONDS < 21 * 86_400 <= BINS * BIN_SECONDS  # AAAS's 21 days


def test_a_history_batch_fills_the_bins_as_live_ones_do() -> None:
    state = LinkState()
    values = {BIN - k * 86_400: (10 - k) * GBIT for k in range(16)}
    state.apply_history([rates(dict(sorted(values.items())))], NOW)
    _, counts = state.throughput.bin_means(np.array([0]), NOW)
    assert counts.sum() == 16 and state.results(NOW).throughput.time.tolist() == [BIN]


def test_retirement_keeps_a_link_whose_newest_datapoint_is_a_recent_result() -> None:
    state = LinkState()
    idle, tested = link(source="192.0.2.1"), link(source="192.0.2.2")
    state.apply_batch([loss_message({NOW - 1800: 0.0}, idle), rates({NOW - 60: GBIT}, tested)], NOW)
    state.apply(retransmits({NOW - 60: 4}, tested), NOW)
    assert state.retire_idle(NOW - 600) == 1
    assert state.index.sources == ["192.0.2.2"]
    latest = state.results(NOW).throughput
    assert (latest.bps.tolist(), latest.retransmits.tolist()) == ([GBIT], [4])
    assert state.retire_idle(NOW) == 1 and len(state) == 0


def test_rows_move_up_with_their_results_when_links_before_them_retire() -> None:
    state = LinkState(capacity=2)
    ends = [link(source=f"192.0.2.{n}") for n in range(1, 6)]
    for number, ends_ in enumerate(ends):
        when = NOW - 60 if number % 2 else NOW - 7200
        state.apply(rates({when: (number + 1) * GBIT}, ends_), NOW)
    assert state.retire_idle(NOW - 3600) == 3
    assert state.results(NOW).throughput.bps.tolist() == [2 * GBIT, 4 * GBIT]
    state.apply(rates({NOW - 5: 7 * GBIT}, link(source="192.0.2.99")), NOW)
    assert state.results(NOW).throughput.bps.tolist() == [2 * GBIT, 4 * GBIT, 7 * GBIT]
    _, counts = state.throughput.bin_means(np.arange(3), NOW)
    assert counts.sum(axis=1).tolist() == [1, 1, 1]


def test_results_of_rows_asked_for_come_in_that_order() -> None:
    state = LinkState()
    for n in (1, 2, 3):
        state.apply(rates({NOW - 60: n * GBIT}, link(source=f"192.0.2.{n}")), NOW)
    picked = state.results(NOW, rows=[2, 0])
    assert picked.rows.tolist() == [2, 0] and picked.throughput.bps.tolist() == [3 * GBIT, GBIT]


def test_bytes_per_link_are_the_columns_widths() -> None:
    # latest rate, time, retransmits and its time (8 B each); per bin a period (4), count (4)
    # and sum (8)
    assert ThroughputState(4).columns.nbytes_per_row() == 4 * 8 + BINS * 16 == 128


def test_results_read_in_blocks_join_in_order(monkeypatch: pytest.MonkeyPatch) -> None:
    state = LinkState()
    for n in range(1, 6):
        state.apply(
            rates({BIN - BIN_SECONDS: GBIT, NOW - 60 * n: n * GBIT}, link(source=f"192.0.2.{n}")),
            NOW,
        )
    whole = state.results(NOW)
    monkeypatch.setattr(link_state, "RESULT_BLOCK", 2)
    blocks = state.results(NOW)
    for name in ("throughput", "bandwidth", "paths"):
        for left, right in zip(getattr(whole, name), getattr(blocks, name), strict=True):
            np.testing.assert_array_equal(left, right)
    assert blocks.throughput.bps.tolist() == [n * GBIT for n in range(1, 6)]
