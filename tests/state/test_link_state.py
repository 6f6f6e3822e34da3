"""LinkState, LinkBuffers, LinkIndex, Topology: window, idempotence, exact all-time stats."""

from __future__ import annotations

import numpy as np
import pytest

from service.analysis.features import AllTimeStats
from service.analysis.link_analysis import analyse_links
from service.errors import RejectReason
from service.state.link_buffers import WINDOW_MINUTES
from service.state.link_state import MAX_FUTURE_SECONDS, LinkState, window_reject_reason
from service.topology.topology import Topology
from tests.message_factory import (
    BASE_MINUTE,
    BASE_TS,
    delay_message,
    link,
    loss_message,
    stats_at,
)

N = BASE_MINUTE  # "now" minute in most tests


def ts_of(minute: int) -> int:
    return minute * 60


def all_time(state: LinkState, now: float) -> AllTimeStats:
    return analyse_links(state.view(now), None).all_time


def all_time_tuple(state: LinkState, now: float) -> tuple[float, ...]:
    stats = all_time(state, now)
    return tuple(
        float(getattr(stats, name)[0])
        for name in ("delay_mean", "delay_std", "delay_min", "loss_mean", "loss_std")
    )


def feed_minutes(state: LinkState, delays: dict[int, float], losses: dict[int, float]) -> None:
    """Apply each minute's delay and loss at a `now` 30 s after that minute started."""
    for minute in sorted(set(delays) | set(losses)):
        now = ts_of(minute) + 30
        if minute in delays:
            assert state.apply(delay_message({ts_of(minute): delays[minute]}), now).applied == 1
        if minute in losses:
            assert state.apply(loss_message({ts_of(minute): losses[minute]}), now).applied == 1


def slots_holding(state: LinkState, row: int, minute: int) -> int:
    return int((state.buffers.slot_minute[row] == minute).sum())


# --- repeats and ordering ------------------------------------------------------------------


def test_same_minute_twice_is_stored_once_and_later_value_wins() -> None:
    state = LinkState()
    now = BASE_TS + 30
    first = state.apply(delay_message({BASE_TS: 5.0}), now)
    second = state.apply(delay_message({BASE_TS: 7.0}), now)
    assert (first.applied, first.rejected, second.applied, second.rejected) == (1, [], 1, [])
    assert slots_holding(state, 0, N) == 1
    assert state.buffers.series["delay_mean"][0, N % WINDOW_MINUTES] == 7.0
    assert all_time_tuple(state, now)[:3] == (7.0, 0.0, 7.0)


def test_repeated_datapoints_leave_all_time_stats_unchanged() -> None:
    state = LinkState()
    minutes = range(N - 4, N + 1)
    feed_minutes(state, {m: float(m - N + 5) for m in minutes}, {m: 0.01 for m in minutes})
    now = ts_of(N) + 30
    before = all_time_tuple(state, now)
    # A re-poll repeating all five minutes with the same values changes nothing.
    state.apply(delay_message({ts_of(m): float(m - N + 5) for m in minutes}), now)
    state.apply(loss_message({ts_of(m): 0.01 for m in minutes}), now)
    assert all_time_tuple(state, now) == before
    assert before[0] == pytest.approx(3.0)
    assert before[1] == pytest.approx(np.std([1.0, 2, 3, 4, 5]))
    assert before[2] == 1.0


def test_repeat_with_new_value_replaces_the_old_one_in_all_time_stats() -> None:
    state = LinkState()
    minutes = range(N - 4, N + 1)
    feed_minutes(state, {m: float(m - N + 5) for m in minutes}, {})
    now = ts_of(N) + 30
    state.apply(delay_message({ts_of(N - 2): 9.0}), now)  # minute with value 3 becomes 9
    values = [1.0, 2.0, 9.0, 4.0, 5.0]
    mean, std, minimum = all_time_tuple(state, now)[:3]
    assert mean == pytest.approx(np.mean(values), rel=1e-12)
    assert std == pytest.approx(np.std(values), rel=1e-12)
    assert minimum == 1.0


def test_repeat_of_a_minute_already_archived_is_too_old_and_changes_nothing() -> None:
    state = LinkState()
    minutes = range(N - 40, N + 1)
    feed_minutes(state, {m: float(m - N + 41) for m in minutes}, {m: 0.001 for m in minutes})
    now = ts_of(N) + 30
    before = all_time_tuple(state, now)
    outcome = state.apply(delay_message({ts_of(N - 35): 1000.0}), now)
    assert (outcome.applied, outcome.rejected) == (0, [RejectReason.TOO_OLD])
    assert all_time_tuple(state, now) == before


def test_out_of_order_datapoints_land_in_their_own_minute() -> None:
    state = LinkState()
    now = ts_of(N) + 30
    outcome = state.apply(delay_message({ts_of(N): 3.0, ts_of(N - 2): 1.0, ts_of(N - 1): 2.0}), now)
    assert outcome.applied == 3
    state.apply(delay_message({ts_of(N - 3): 0.5}), now)  # arrives later, belongs earlier
    for minute, value in [(N - 3, 0.5), (N - 2, 1.0), (N - 1, 2.0), (N, 3.0)]:
        slot = minute % WINDOW_MINUTES
        assert state.buffers.slot_minute[0, slot] == minute
        assert state.buffers.series["delay_mean"][0, slot] == value
    assert int(state.buffers.latest_minute[0]) == N
    assert int(state.buffers.latest_delay_minute[0]) == N


def test_delay_and_loss_of_the_same_minute_share_a_slot() -> None:
    state = LinkState()
    now = ts_of(N) + 30
    state.apply(delay_message({ts_of(N): 4.5}), now)
    state.apply(loss_message({ts_of(N) + 20: 0.25}), now)  # same minute, other second
    slot = N % WINDOW_MINUTES
    assert slots_holding(state, 0, N) == 1
    assert (state.buffers.slot_minute[0] >= 0).sum() == 1
    assert state.buffers.series["delay_mean"][0, slot] == 4.5
    assert state.buffers.series["loss"][0, slot] == 0.25


# --- window limits -------------------------------------------------------------------------


def test_too_old_relative_to_now() -> None:
    state = LinkState()
    now = ts_of(N) + 30
    outcome = state.apply(
        loss_message({ts_of(N - WINDOW_MINUTES - 1): 0.1, ts_of(N - WINDOW_MINUTES): 0.2}), now
    )
    assert outcome.applied == 1  # the 32 complete minutes before the current one are kept
    assert outcome.rejected == [RejectReason.TOO_OLD]
    assert slots_holding(state, 0, N - WINDOW_MINUTES - 1) == 0
    assert slots_holding(state, 0, N - WINDOW_MINUTES) == 1


def test_future_beyond_the_clock_tolerance_is_rejected() -> None:
    state = LinkState()
    now = float(ts_of(N))
    outcome = state.apply(
        loss_message({ts_of(N) + MAX_FUTURE_SECONDS: 0.1, ts_of(N) + MAX_FUTURE_SECONDS + 1: 0.2}),
        now,
    )
    assert MAX_FUTURE_SECONDS == 10
    assert outcome.applied == 1
    assert outcome.rejected == [RejectReason.FUTURE]


def test_a_future_dated_datapoint_cannot_become_the_newest_minute() -> None:
    """The attack: loss 1.0 stamped 290 s ahead is refused, so the toolkit's real minute, sent
    after it with loss 0, is the link's newest."""
    state = LinkState()
    now = float(ts_of(N) + 30)
    forged = state.apply(loss_message({int(now) + 290: 1.0}), now)
    assert (forged.applied, forged.rejected) == (0, [RejectReason.FUTURE])
    assert state.apply(loss_message({ts_of(N): 0.0}), now).applied == 1
    assert int(state.buffers.latest_minute[0]) == N


@pytest.mark.parametrize(
    ("ts", "now", "reason"),
    [
        (ts_of(N), ts_of(N) + 59.9, None),
        (ts_of(N - 31), ts_of(N) + 59.9, None),
        (ts_of(N - 32), ts_of(N) + 59.9, None),
        (ts_of(N - 33) + 59, ts_of(N), RejectReason.TOO_OLD),
        (ts_of(N) + 10, ts_of(N), None),
        (ts_of(N) + 11, ts_of(N), RejectReason.FUTURE),
        (0, ts_of(N), RejectReason.TOO_OLD),
    ],
)
def test_window_reject_reason(ts: int, now: float, reason: RejectReason | None) -> None:
    assert window_reject_reason(ts, now) is reason


def test_minute_older_than_the_links_ring_content_is_too_old() -> None:
    state = LinkState()
    now = float(ts_of(N + 1) - 5)
    # A datapoint 5 s ahead (allowed) in minute N + 1 takes the slot of minute N + 1 - 32.
    assert state.apply(loss_message({ts_of(N + 1): 0.3}), now).applied == 1
    outcome = state.apply(loss_message({ts_of(N - 31): 0.1}), now)
    assert window_reject_reason(ts_of(N - 31), now) is None  # inside the window by the clock
    assert (outcome.applied, outcome.rejected) == (0, [RejectReason.TOO_OLD])
    assert state.buffers.series["loss"][0, (N - 31) % WINDOW_MINUTES] == pytest.approx(0.3)


def test_parser_rejections_are_passed_through() -> None:
    message = loss_message({ts_of(N): 0.1})
    message.rejected.append((RejectReason.BAD_VALUE, "x"))
    outcome = LinkState().apply(message, ts_of(N) + 1)
    assert (outcome.applied, outcome.rejected) == (1, [RejectReason.BAD_VALUE])


# --- exact all-time statistics ---------------------------------------------------------------


def test_all_time_stats_after_one_hundred_minutes_are_exact() -> None:
    rng = np.random.default_rng(7)
    minutes = list(range(N - 99, N + 1))
    delays = dict(zip(minutes, rng.uniform(1.0, 80.0, 100).tolist(), strict=True))
    losses = dict(zip(minutes, rng.uniform(0.0, 0.05, 100).tolist(), strict=True))
    state = LinkState()
    feed_minutes(state, delays, losses)
    stored_delays = np.array([stats_at(delays[m]).mean for m in minutes], np.float32).astype(float)
    stored_losses = np.array([losses[m] for m in minutes], np.float32).astype(float)
    stats = all_time(state, ts_of(N) + 30)
    assert stats.delay_mean[0] == pytest.approx(stored_delays.mean(), rel=1e-9)
    assert stats.delay_std[0] == pytest.approx(stored_delays.std(), rel=1e-9)
    assert stats.delay_min[0] == pytest.approx(stored_delays.min(), rel=1e-9)
    assert stats.loss_mean[0] == pytest.approx(stored_losses.mean(), rel=1e-9)
    assert stats.loss_std[0] == pytest.approx(stored_losses.std(), rel=1e-9)
    assert state.buffers.archive["delay_n"][0] == 100 - WINDOW_MINUTES
    assert state.buffers.archive["loss_n"][0] == 100 - WINDOW_MINUTES


def test_all_time_minimum_can_come_from_the_archive() -> None:
    minutes = list(range(N - 49, N + 1))
    delays = {m: 50.0 for m in minutes}
    delays[N - 49] = 2.0  # long archived by the end
    state = LinkState()
    feed_minutes(state, delays, {})
    stats = all_time(state, ts_of(N) + 30)
    assert stats.delay_min[0] == 2.0
    assert np.isnan(stats.loss_mean[0]) and np.isnan(stats.loss_std[0])


def test_all_time_stats_stay_exact_when_a_minute_is_missing() -> None:
    minutes = [m for m in range(N - 39, N + 1) if m != N - 4]  # one measurement lost
    delays = {m: float(i + 1) for i, m in enumerate(minutes)}
    state = LinkState()
    feed_minutes(state, delays, {m: 0.01 * (i % 3) for i, m in enumerate(minutes)})
    stats = all_time(state, ts_of(N) + 30)
    values = np.array(list(delays.values()))
    # Expected 20.0 (values 1..39); the bug gives 20.421 = (780 - 4) / 38: the value 4 of
    # minute N-36, still held in the slot of the missing minute N-4, is left out.
    assert stats.delay_mean[0] == pytest.approx(values.mean(), rel=1e-9)
    assert stats.delay_std[0] == pytest.approx(values.std(), rel=1e-9)


# --- index, topology, growth -----------------------------------------------------------------


def test_link_index_keeps_host_names_and_sites() -> None:
    topology = Topology.from_mapping(
        {
            "SITE-A": ["PS-Latency.Site-A.Example.Org"],  # host name, matched case-insensitively
            "SITE-B": ["198.51.100.20"],  # IP
        }
    )
    state = LinkState(topology)
    now = ts_of(N) + 30
    state.apply(loss_message({ts_of(N): 0.0}), now)
    other = link("203.0.113.5", "192.0.2.10", "ps.site-c.example.com", "ps.site-d.example.com")
    state.apply(loss_message({ts_of(N): 0.0}, other), now)
    index = state.index
    assert len(state) == 2
    assert index.sources == ["192.0.2.10", "203.0.113.5"]
    assert index.destinations == ["198.51.100.20", "192.0.2.10"]
    assert index.source_hosts == ["ps-latency.site-a.example.org", "ps.site-c.example.com"]
    assert index.destination_hosts == ["ps-latency.site-b.example.net", "ps.site-d.example.com"]
    assert index.source_sites == ["SITE-A", None]
    assert index.destination_sites == ["SITE-B", None]
    assert index.find_by_name("ps-latency.site-a.example.org", "198.51.100.20") == 0
    assert index.find_by_name("ps.site-c.example.com", "ps.site-d.example.com") == 1
    assert index.find_by_name("192.0.2.10", "203.0.113.5") is None
    view = state.view(now)
    assert view.source_sites == ["SITE-A", None]
    assert view.source_hosts == index.source_hosts


def test_same_link_keeps_its_row_and_its_host_names() -> None:
    """A message cannot rename a named row (nor move it to another site): the claim is a
    conflict, the datapoint is stored."""
    state = LinkState(Topology.from_mapping({"NEW": ["new-name.example.org"]}))
    now = ts_of(N) + 30
    state.apply(loss_message({ts_of(N): 0.0}), now)
    renamed = link(source_host="new-name.example.org")
    outcome = state.apply(loss_message({ts_of(N): 0.0}, renamed), now)
    assert len(state) == 1 and outcome.applied == 1 and len(outcome.conflicts) == 1
    assert state.index.source_hosts == ["ps-latency.site-a.example.org"]
    assert state.index.source_sites == [None]


def test_topology_maps_hosts_to_sites() -> None:
    topology = Topology.from_mapping({"CERN": ["a.cern.ch", "192.0.2.1"], "RAL": [" B.ral.uk "]})
    assert topology.site_by_host == {"a.cern.ch": "CERN", "192.0.2.1": "CERN", "b.ral.uk": "RAL"}
    assert topology.sites == ["CERN", "RAL"]
    assert topology.site_of("A.CERN.CH", "10.0.0.1") == "CERN"
    assert topology.site_of("unknown", "192.0.2.1") == "CERN"
    assert topology.site_of("unknown", "10.0.0.1") is None


def test_host_under_two_sites_raises() -> None:
    with pytest.raises(ValueError, match="listed under 'CERN' and 'RAL'"):
        Topology.from_mapping({"CERN": ["a.cern.ch"], "RAL": ["A.CERN.CH"]})


def test_host_listed_twice_under_one_site_is_fine() -> None:
    assert Topology.from_mapping({"CERN": ["a.cern.ch", "a.cern.ch"]}).sites == ["CERN"]


def test_buffers_grow_beyond_initial_capacity_with_data_intact() -> None:
    state = LinkState(capacity=2)
    now = ts_of(N) + 30
    for i in range(5):
        endpoints = link(f"192.0.2.{i + 1}", "198.51.100.1", f"h{i}", "dst")
        state.apply(delay_message({ts_of(N - i): 10.0 + i}, endpoints), now)
        state.apply(loss_message({ts_of(N - i): 0.01 * i}, endpoints), now)
    assert len(state) == 5
    assert state.buffers.capacity >= 5
    for i in range(5):
        slot = (N - i) % WINDOW_MINUTES
        assert state.buffers.slot_minute[i, slot] == N - i
        assert state.buffers.series["delay_mean"][i, slot] == 10.0 + i
        assert state.buffers.series["loss"][i, slot] == pytest.approx(0.01 * i)
        assert (state.buffers.slot_minute[i] >= 0).sum() == 1
    view = state.view(now)
    assert len(view) == 5
    assert view.slot_minute.shape == (5, WINDOW_MINUTES)
    assert view.sources == [f"192.0.2.{i + 1}" for i in range(5)]


def test_view_is_a_copy() -> None:
    state = LinkState()
    now = ts_of(N) + 30
    state.apply(delay_message({ts_of(N): 1.0}), now)
    view = state.view(now)
    state.apply(delay_message({ts_of(N): 2.0}), now)
    assert view.series["delay_mean"][0, N % WINDOW_MINUTES] == 1.0


def test_view_of_selected_rows() -> None:
    state = LinkState()
    now = ts_of(N) + 30
    for i in range(3):
        state.apply(delay_message({ts_of(N): float(i)}, link(f"192.0.2.{i + 1}")), now)
    view = state.view(now, rows=[2, 0])
    assert view.sources == ["192.0.2.3", "192.0.2.1"]
    assert view.series["delay_mean"][:, N % WINDOW_MINUTES].tolist() == [2.0, 0.0]


def test_memory_per_link_is_at_most_one_kibibyte() -> None:
    state = LinkState(capacity=64)
    assert 0 < state.buffers.nbytes_per_link() <= 1024
