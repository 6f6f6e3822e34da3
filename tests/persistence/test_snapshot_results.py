"""Snapshots of format version 2 carry throughput results and paths exactly; version 1 snapshots
still load; a state from elsewhere with impossible results or hop tables is refused."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

from service.parse.packet_trace import path_fingerprint
from service.parse.records import LinkEndpoints, MeasurementKind, ParsedMessage, Trace, TraceHop
from service.persistence.snapshot_checks import ContentCheck, ContentLimits, SnapshotContentError
from service.persistence.snapshot_codec import SnapshotFormatError, decode_state, encode_state
from service.state.link_state import LinkState
from service.topology.topology import Topology
from tests.persistence.hostile_snapshots import Arrays, arrays_of, honest_state, snapshot_bytes
from tests.persistence.test_snapshot_codec import assert_same_state, filled_state

DATA = Path(__file__).resolve().parents[1] / "data"


def trace(*addresses: str) -> Trace:
    hops = tuple(
        TraceHop(ttl, address, 0.5 * ttl if address else np.nan, 64496 if address else 0)
        for ttl, address in enumerate(addresses, start=1)
    )
    return Trace(hops, path_fingerprint([address for address in addresses if address]))


def with_results(state: LinkState, now: float) -> LinkState:
    """Throughput results, retransmits and two paths (one changed) on the state's links."""
    ends = LinkEndpoints(*(state.index.sources[0], state.index.destinations[0]), "a", "b")
    rates = ParsedMessage(MeasurementKind.THROUGHPUT, ends)
    rates.throughputs += [(int(now) - 86_400 * 5, 9.1e9), (int(now) - 600, 4.2e9)]
    rates.retransmits.append((int(now) - 600, 17))
    paths = ParsedMessage(MeasurementKind.TRACE, ends)
    paths.traces += [
        (int(now) - 1200, trace("10.0.0.1", "", state.index.destinations[0])),
        (int(now) - 600, trace("10.0.0.1", "10.0.0.9", state.index.destinations[0])),
    ]
    assert [o.applied for o in state.apply_batch([rates, paths], now)] == [3, 2]
    return state


def assert_same_results(left: LinkState, right: LinkState, now: float) -> None:
    n = len(left)
    for name in ("throughput", "paths"):
        for column, values in getattr(left, name).columns.items():
            other = getattr(right, name).columns[column]
            np.testing.assert_array_equal(values[:n], other[:n], err_msg=f"{name}/{column}")
    assert left.paths.addresses.addresses == right.paths.addresses.addresses
    np.testing.assert_array_equal(
        left.paths.addresses.asn_array(), right.paths.addresses.asn_array()
    )
    assert (
        left.results(now).paths.changes_last_day.tolist()
        == right.results(now).paths.changes_last_day.tolist()
    )


def test_results_and_paths_round_trip_exactly() -> None:
    now = time.time()
    state = with_results(honest_state(links=3, now=now), now)
    restored = decode_state(encode_state(state), Topology(), ContentLimits(now, 1000))
    assert_same_state(state, restored)
    assert_same_results(state, restored, now)
    source, destination = state.index.sources[0], state.index.destinations[0]
    assert restored.path_of(source, destination) == state.path_of(source, destination)
    assert restored.results(now).throughput.retransmits.tolist() == [17, -1, -1]


def test_a_restored_state_keeps_numbering_new_hops_after_its_table() -> None:
    now = time.time()
    restored = decode_state(encode_state(with_results(honest_state(2, now), now)), Topology())
    message = ParsedMessage(
        MeasurementKind.TRACE, LinkEndpoints("192.0.2.77", "198.51.100.7", "c", "d")
    )
    message.traces.append((int(now) - 30, trace("10.0.0.9", "10.0.0.10")))
    assert restored.apply(message, now).applied == 1
    assert restored.paths.addresses.addresses[-1] == "10.0.0.10"
    assert len(restored.paths.addresses) == 4  # 10.0.0.1, the destination, 10.0.0.9, the new one


def test_a_version_1_snapshot_still_loads_without_results() -> None:
    data = (DATA / "state-snapshot-v1.bin").read_bytes()
    restored = decode_state(data, Topology(), ContentLimits(time.time(), 1000))
    assert_same_state(filled_state(links=3, minutes=40), restored)
    latest = restored.results(time.time())
    assert latest.throughput.time.tolist() == [-1, -1, -1]
    assert latest.paths.seen.tolist() == [-1, -1, -1] and len(restored.paths.addresses) == 0
    assert decode_state(encode_state(restored), Topology()).index.sources == restored.index.sources


# --- a state from elsewhere --------------------------------------------------------------------


def poisoned(change: object, hop_addresses: list[str] | None = None) -> bytes:
    """An honest state with results whose arrays `change` (arrays -> None) edits."""
    now = time.time()
    state = with_results(honest_state(links=3, now=now), now)
    arrays, links = arrays_of(state)
    change(arrays)  # type: ignore[operator]
    addresses = state.paths.addresses.addresses if hop_addresses is None else hop_addresses
    return snapshot_bytes(arrays, links, hop_addresses=addresses)


def refused_by(data: bytes) -> ContentCheck:
    with pytest.raises(SnapshotContentError) as refusal:
        decode_state(data, Topology(), ContentLimits(time.time(), 1000))
    return refusal.value.check


def test_an_honest_state_with_results_passes() -> None:
    decode_state(poisoned(lambda arrays: None), Topology(), ContentLimits(time.time(), 1000))


def set_value(name: str, value: float, where: tuple[int, ...] = (0,)):  # type: ignore[no-untyped-def]
    def change(arrays: Arrays) -> None:
        arrays[name][where] = value

    return change


@pytest.mark.parametrize(
    "change",
    [
        set_value("throughput/latest_bps", -1.0),
        set_value("throughput/latest_bps", 1e15),
        set_value("throughput/latest_bps", np.nan),
        set_value("throughput/latest_time", time.time() + 3600),
        set_value("throughput/retransmits", -1),
        lambda arrays: arrays["throughput/bin_count"][0].__setitem__(
            int(np.argmax(arrays["throughput/bin_period"][0])),
            0,  # a held bin without results
        ),
        set_value("throughput/bin_period", 7, (0, 0)),
        set_value("throughput/bin_sum", -5.0, (0, 1)),
        set_value("paths/seen", time.time() + 3600),
        set_value("paths/since", time.time() + 3600),
        set_value("paths/hops", 99, (0, 0)),
        set_value("paths/hops", 1, (0, 20)),
        set_value("paths/rtt_ms", -1.0, (0, 0)),
        set_value("paths/rtt_ms", 1.0, (0, 20)),
        set_value("paths/reached", 3),
        set_value("paths/hop_count", 40),
        set_value("paths/hour_changes", 1, (1, 0)),
    ],
)
def test_impossible_results_are_refused(change: object) -> None:
    assert refused_by(poisoned(change)) is ContentCheck.RESULTS


def test_a_row_without_any_datapoint_is_refused() -> None:
    def emptied(arrays: Arrays) -> None:
        arrays["latest_minute"][1] = -1
        arrays["latest_delay_minute"][1] = -1
        arrays["clock_suspect_minute"][1] = -1
        arrays["slot_minute"][1] = -1
        for name in ("delay_mean", "delay_median", "delay_std", "delay_min", "loss"):
            arrays[f"series/{name}"][1] = np.nan

    assert refused_by(poisoned(emptied)) is ContentCheck.WINDOW


def test_hop_addresses_must_be_canonical_and_distinct() -> None:
    keep = lambda arrays: None  # noqa: E731
    assert refused_by(poisoned(keep, ["10.0.0.1", "10.0.0.01", "x"])) is ContentCheck.NAMES
    assert refused_by(poisoned(keep, ["10.0.0.1", "10.0.0.1", "10.0.0.9"])) is ContentCheck.NAMES


def test_hop_as_numbers_and_addresses_must_match_in_length() -> None:
    with pytest.raises(SnapshotFormatError, match="differ in length"):
        decode_state(poisoned(lambda arrays: None, ["10.0.0.1"]), Topology())
