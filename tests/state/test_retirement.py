"""Link retirement: idle links leave the state, the matrix and the site view; a link that comes
back starts afresh; the state with freed rows survives a snapshot round trip."""

from __future__ import annotations

import numpy as np

from service.matrix.cycle import CycleObservers, MatrixCycle
from service.matrix.views import aggregate_sites
from service.persistence.snapshot_codec import decode_state, encode_state
from service.state.link_buffers import ARCHIVE, SERIES
from service.state.link_state import LinkState, StateView
from service.state.retirement import LinkRetirement
from service.topology.topology import Topology
from tests.message_factory import delay_message, link, loss_message
from tests.persistence.test_snapshot_codec import NOW, assert_same_state, filled_state

WEEK = 7 * 86_400
#: A week after `filled_state`'s data: links 0, 2 and 4 report again, 1 and 3 stay silent.
LATER = NOW + WEEK + 120
TOPOLOGY = Topology.from_mapping(
    {"site-a": [f"10.0.0.{n}" for n in (1, 3, 5)], "site-b": ["10.0.0.2", "10.0.0.4"]}
    | {"site-z": ["198.51.100.20"]}
)


def endpoints(number: int):  # type: ignore[no-untyped-def]
    return link(source=f"10.0.0.{number + 1}", source_host=f"host-{number}.example")


def minute_of(number: int, ts: int, delay: float = 40.0) -> list:  # type: ignore[type-arg]
    return [
        delay_message({ts: delay}, endpoints(number)),
        loss_message({ts: 0.0}, endpoints(number)),
    ]


def state_a_week_later() -> LinkState:
    state = filled_state(links=5, topology=TOPOLOGY)
    for number in (0, 2, 4):
        state.apply_batch(minute_of(number, LATER - 60), LATER)
    return state


def assert_same_rows(before: StateView, after: StateView) -> None:
    assert after.sources == before.sources
    assert after.source_hosts == before.source_hosts
    assert after.source_sites == before.source_sites
    np.testing.assert_array_equal(after.slot_minute, before.slot_minute)
    for name in SERIES:
        np.testing.assert_array_equal(after.series[name], before.series[name])
    for name in ARCHIVE:
        np.testing.assert_array_equal(after.archive[name], before.archive[name])
    for name in ("latest_delay_minute", "latest_p95", "latest_minute", "clock_suspect_minute"):
        np.testing.assert_array_equal(getattr(after, name), getattr(before, name))


def test_exactly_the_idle_links_leave_and_the_others_keep_every_value() -> None:
    state = state_a_week_later()
    kept_before = state.view(LATER, rows=[0, 2, 4])
    capacity = state.buffers.capacity
    assert state.retire_idle(LATER - WEEK) == 2
    assert len(state) == 3 and state.retired_total == 2
    assert_same_rows(kept_before, state.view(LATER))
    assert state.index.find_by_name("10.0.0.2", "198.51.100.20") is None
    assert state.index.find_by_name("host-4.example", "198.51.100.20") == 2
    assert state.buffers.capacity == capacity
    freed = state.buffers
    assert (freed.slot_minute[3:5] == -1).all() and np.isnan(freed.series["loss"][3:5]).all()
    assert (freed.archive["delay_n"][3:5] == 0).all() and (freed.latest_minute[3:5] == -1).all()
    assert state.retire_idle(LATER - WEEK) == 0


def test_a_link_that_comes_back_starts_afresh_in_a_freed_row() -> None:
    state = state_a_week_later()
    state.retire_idle(LATER - WEEK)
    assert "host-1.example" not in state.index.ip_by_host
    (outcome,) = state.apply_batch(minute_of(1, LATER, delay=7.0)[:1], LATER + 30)
    assert outcome.applied == 1
    view = state.view(LATER + 30, rows=[3])
    assert view.sources == ["10.0.0.2"] and view.source_sites == ["site-b"]
    assert (view.slot_minute >= 0).sum() == 1  # only the new minute, no old history
    assert view.archive["delay_n"][0] == 0 and view.archive["delay_min"][0] == np.inf
    assert np.nanmax(view.series["delay_mean"]) == 7.0
    assert state.index.ip_by_host["host-1.example"] == "10.0.0.2"


def test_the_matrix_and_site_view_lose_the_retired_links() -> None:
    state = state_a_week_later()
    clock = [LATER]
    retirement = LinkRetirement(state, WEEK, clock=lambda: clock[0])
    plain = MatrixCycle(state, interval=10, clock=lambda: clock[0])
    before = aggregate_sites(plain.recompute().links)
    assert [(s["source"], s["links"]) for s in before] == [("site-a", 3), ("site-b", 2)]
    observers = CycleObservers(recomputed=(retirement.after_cycle,))
    cycle = MatrixCycle(state, interval=10, clock=lambda: clock[0], observers=observers)
    cycle.recompute()  # retires after this cycle ...
    matrix = cycle.recompute()  # ... so the next matrix no longer has them
    assert [record["source"] for record in matrix.links] == ["10.0.0.1", "10.0.0.3", "10.0.0.5"]
    sites = aggregate_sites(matrix.links)
    assert [(s["source"], s["links"]) for s in sites] == [("site-a", 3)]


def test_retirement_waits_for_the_whole_period() -> None:
    state = filled_state(links=3)
    newest = NOW - 60  # filled_state's newest minute
    retirement = LinkRetirement(state, WEEK, clock=lambda: newest + WEEK)
    assert retirement.check() == 0
    retirement = LinkRetirement(state, WEEK, clock=lambda: newest + WEEK + 1)
    assert retirement.check() == 3 and len(state) == 0


def test_a_state_with_freed_rows_round_trips_through_a_snapshot() -> None:
    state = state_a_week_later()
    state.retire_idle(LATER - WEEK)
    restored = decode_state(encode_state(state), TOPOLOGY)
    assert_same_state(state, restored)
    assert restored.view(LATER).source_sites == ["site-a", "site-a", "site-a"]
    (outcome,) = restored.apply_batch(minute_of(3, LATER)[:1], LATER + 30)
    assert outcome.applied == 1 and len(restored) == 4
    assert restored.buffers.archive["delay_n"][3] == 0
