"""Path state: the current hops, when the path changed, changes of the last day by the hour,
whether it reaches the destination, repeats and stale traces, the hop table and its bound."""

from __future__ import annotations

import math

import numpy as np
import orjson
import pytest

from service.errors import RejectReason
from service.parse.packet_trace import path_fingerprint
from service.parse.perfsonar import parse_message
from service.parse.records import (
    LinkEndpoints,
    MeasurementKind,
    NamedEndpoints,
    ParsedMessage,
    Trace,
    TraceHop,
)
from service.state import hop_addresses
from service.state.link_state import LinkState
from service.state.path_state import DAY_SECONDS, PathHop, PathState
from tests.data import load_sample
from tests.message_factory import link

NOW = 1_795_190_400  # the start of an hour
DESTINATION = "198.51.100.20"


def trace(*addresses: str, rtt: float = 1.0, asn: int = 0) -> Trace:
    """A trace whose hop k (TTL k + 1) answered from addresses[k] ("" for no answer)."""
    hops = tuple(
        TraceHop(ttl, address, rtt * ttl if address else math.nan, asn if address else 0)
        for ttl, address in enumerate(addresses, start=1)
    )
    return Trace(hops, path_fingerprint([address for address in addresses if address]))


A = trace("192.0.2.1", "203.0.113.1", DESTINATION)
B = trace("192.0.2.1", "203.0.113.9", DESTINATION)


def traces(values: dict[int, Trace], ends: LinkEndpoints | None = None) -> ParsedMessage:
    message = ParsedMessage(MeasurementKind.TRACE, ends or link())
    message.traces.extend(values.items())
    return message


def summary(state: LinkState, now: float = NOW) -> dict[str, list[int]]:
    paths = state.results(now).paths
    return {name: values.tolist() for name, values in paths._asdict().items()}


def test_the_first_trace_is_the_path_and_no_change() -> None:
    state = LinkState()
    assert state.apply(traces({NOW - 600: A}), NOW).applied == 1
    assert summary(state) == {
        "fingerprint": [A.fingerprint],
        "seen": [NOW - 600],
        "since": [NOW - 600],
        "reached": [1],
        "changes_last_day": [0],
        "hop_count": [3],
    }
    assert state.path_of("192.0.2.10", DESTINATION) == [
        PathHop(1, "192.0.2.1", 1.0, 0),
        PathHop(2, "203.0.113.1", 2.0, 0),
        PathHop(3, DESTINATION, 3.0, 0),
    ]


def test_a_new_hop_set_is_a_change_and_the_same_again_is_not() -> None:
    state = LinkState()
    state.apply(traces({NOW - 3000: A, NOW - 2400: A}), NOW)
    state.apply(traces({NOW - 1800: B}), NOW)
    state.apply(traces({NOW - 1200: B, NOW - 600: A}), NOW)
    paths = summary(state)
    assert (paths["since"], paths["seen"], paths["changes_last_day"]) == (
        [NOW - 600],
        [NOW - 600],
        [2],
    )
    assert paths["fingerprint"] == [A.fingerprint]


def test_one_batch_counts_changes_as_traces_one_by_one_in_time_order() -> None:
    state = LinkState()
    shuffled = {NOW - 600: A, NOW - 3000: A, NOW - 1800: B, NOW - 2400: A, NOW - 1200: B}
    state.apply(traces(shuffled), NOW)
    paths = summary(state)
    assert (paths["changes_last_day"], paths["since"]) == ([2], [NOW - 600])


def test_a_repeat_changes_nothing_and_an_older_trace_is_too_old() -> None:
    state = LinkState()
    state.apply(traces({NOW - 600: A}), NOW)
    repeat = state.apply(traces({NOW - 600: B, NOW - 1200: B}), NOW)
    assert repeat.applied == 1 and repeat.rejected == [RejectReason.TOO_OLD]
    assert summary(state)["fingerprint"] == [A.fingerprint]
    assert summary(state)["changes_last_day"] == [0]


def test_traces_older_than_a_day_or_ahead_are_refused() -> None:
    state = LinkState()
    outcome = state.apply(
        traces({NOW - DAY_SECONDS - 1: A, NOW + 11: A, NOW - DAY_SECONDS: B}), NOW
    )
    assert outcome.rejected == [RejectReason.TOO_OLD, RejectReason.FUTURE]
    assert summary(state)["seen"] == [NOW - DAY_SECONDS]


def test_changes_are_counted_by_the_hour_for_the_current_hour_and_the_23_before() -> None:
    state = LinkState()
    hour = 3600
    alternating = {NOW - k * hour - 60: (A if k % 2 else B) for k in range(30, -1, -1)}
    state.apply(traces(alternating), NOW)  # 30 changes, one each hour, the newest 60 s ago
    assert summary(state, NOW)["changes_last_day"] == [23]  # hours NOW-23h .. NOW-1h
    assert summary(state, NOW + hour)["changes_last_day"] == [22]
    assert summary(state, NOW + 5 * hour)["changes_last_day"] == [18]
    assert summary(state, NOW + 25 * hour)["changes_last_day"] == [0]
    state.apply(traces({NOW + 30 * hour: A if alternating[NOW - 60] is B else B}), NOW + 30 * hour)
    assert summary(state, NOW + 30 * hour)["changes_last_day"] == [1]


def test_a_path_that_stops_short_of_the_destination_does_not_reach_it() -> None:
    state = LinkState()
    short = trace("192.0.2.1", "203.0.113.1", "")
    state.apply(traces({NOW - 60: short}), NOW)
    assert summary(state)["reached"] == [0] and summary(state)["hop_count"] == [3]
    # a pScheduler run whose destination is known by name only
    named = ParsedMessage(
        MeasurementKind.TRACE, NamedEndpoints("ps-a.example.org", "ps-b.example.org")
    )
    named.traces.append((NOW - 60, A))
    state.apply(named, NOW)
    assert summary(state)["reached"] == [0, -1]


def test_the_sample_traces_give_the_path_of_the_bus_and_its_change() -> None:
    message = parse_message(
        MeasurementKind.TRACE, orjson.dumps(load_sample("packet-trace-raw.json")["body"])
    )
    state = LinkState()
    now = 1_795_176_914 + 60
    assert state.apply(message, now).applied == 2
    paths = summary(state, now)
    assert (paths["changes_last_day"], paths["since"], paths["reached"]) == (
        [1],
        [1_795_176_914],
        [1],
    )
    hops = state.path_of("192.0.2.11", "198.51.100.21")
    assert hops is not None
    assert [hop.address for hop in hops][2:6] == ["203.0.113.9", "", "203.0.113.65", "203.0.113.33"]
    assert (hops[4].rtt_ms, hops[4].asn) == (23.1, 64500)  # float16: three significant digits
    assert state.path_of("192.0.2.11", "192.0.2.99") is None


def test_retirement_drops_the_hops_no_path_holds_and_renumbers_the_rest() -> None:
    state = LinkState()
    old, kept = link(source="192.0.2.1"), link(source="192.0.2.2")
    state.apply(traces({NOW - 7200: trace("10.0.0.1", "10.0.0.2")}, old), NOW)
    state.apply(traces({NOW - 60: trace("10.0.0.2", "10.0.0.3")}, kept), NOW)
    assert len(state.paths.addresses) == 3
    assert state.retire_idle(NOW - 3600) == 1
    assert state.paths.addresses.addresses == ["10.0.0.2", "10.0.0.3"]
    assert [hop.address for hop in state.path_of("192.0.2.2", DESTINATION) or []] == [
        "10.0.0.2",
        "10.0.0.3",
    ]
    assert state.paths.columns["hops"][0, :3].tolist() == [1, 2, 0]  # numbers + 1, 0: none


def test_the_as_of_an_address_is_the_one_last_reported() -> None:
    state = LinkState()
    state.apply(traces({NOW - 600: trace("203.0.113.1", asn=64496)}, link(source="192.0.2.1")), NOW)
    state.apply(traces({NOW - 60: trace("203.0.113.1", asn=64499)}, link(source="192.0.2.2")), NOW)
    state.apply(traces({NOW - 30: trace("203.0.113.1", asn=0)}, link(source="192.0.2.3")), NOW)
    hops = state.path_of("192.0.2.1", DESTINATION)
    assert hops is not None and hops[0].asn == 64499


def test_a_full_hop_table_is_compacted_then_refuses_new_addresses(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(hop_addresses, "MAX_ADDRESSES", 4)
    state = LinkState()
    first, second, third = (link(source=f"192.0.2.{n}") for n in (1, 2, 3))
    state.apply(traces({NOW - 900: trace("10.0.0.1", "10.0.0.2")}, first), NOW)
    state.apply(traces({NOW - 600: trace("10.0.1.1")}, first), NOW)  # 10.0.0.x: held by none
    assert len(state.paths.addresses) == 3
    made_room = state.apply(traces({NOW - 300: trace("10.0.2.1", "10.0.2.2")}, second), NOW)
    assert made_room.applied == 1
    assert state.paths.addresses.addresses == ["10.0.1.1", "10.0.2.1", "10.0.2.2"]
    refused = state.apply(traces({NOW - 60: trace("10.0.3.1", "10.0.3.2")}, third), NOW)
    assert refused.rejected == [RejectReason.HOP_TABLE_FULL] and refused.applied == 0
    assert summary(state)["seen"] == [NOW - 600, NOW - 300]  # the third link got no row
    assert [hop.address for hop in state.path_of("192.0.2.2", DESTINATION) or []] == [
        "10.0.2.1",
        "10.0.2.2",
    ]


def test_bytes_per_link_are_the_columns_widths() -> None:
    # print, seen, since (8 B each); reached and hop count (1 each); change hour (4); 24
    # hourly counts (2 each); per hop a number (4) and an RTT (2)
    assert PathState(4).columns.nbytes_per_row() == 3 * 8 + 2 + 4 + 24 * 2 + 32 * 6 == 270


def test_summaries_of_rows_asked_for_come_in_that_order() -> None:
    state = LinkState()
    for n, path in ((1, A), (2, B)):
        state.apply(traces({NOW - 60: path}, link(source=f"192.0.2.{n}")), NOW)
    picked = state.results(NOW, rows=[1, 0]).paths
    assert picked.fingerprint.tolist() == [B.fingerprint, A.fingerprint]
    assert np.array_equal(picked.hop_count, [3, 3])
