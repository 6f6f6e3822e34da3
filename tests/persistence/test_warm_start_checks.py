"""A state from elsewhere (a warm-start peer, another replica's snapshot) is checked as strictly
as live input before anything is adopted, and refused whole on the first problem: each of
issue 40's hand-written hostile snapshots (valid checksum, poisoned content) is refused with its
check, an honest one passes unchanged."""

from __future__ import annotations

import time

import numpy as np
import pytest

from service.persistence.snapshot_checks import ContentCheck, ContentLimits, SnapshotContentError
from service.persistence.snapshot_codec import SnapshotFormatError, decode_state, encode_state
from service.topology.topology import Topology
from tests.persistence.hostile_snapshots import (
    Arrays,
    Links,
    arrays_of,
    future_link,
    honest_state,
    many_links,
    snapshot_bytes,
    tampered,
)
from tests.persistence.test_snapshot_codec import assert_same_state


def limits(max_links: int = 1000, own: dict[str, str] | None = None) -> ContentLimits:
    """--max-links and this replica's own IPv4 bindings (host name -> address)."""
    bindings = {(name, 4): address for name, address in (own or {}).items()}
    return ContentLimits(time.time(), max_links, bindings)


def refused_by(data: bytes, topology: Topology | None = None, **kwargs: int) -> ContentCheck:
    with pytest.raises(SnapshotContentError) as refusal:
        decode_state(data, topology or Topology(), limits(**kwargs))
    return refusal.value.check


def test_an_honest_state_passes_unchanged() -> None:
    state = honest_state(links=6)
    restored = decode_state(encode_state(state), Topology(), limits())
    assert_same_state(state, restored)
    arrays, links = arrays_of(state)  # the hand-written encoder writes what encode_state does
    assert_same_state(state, decode_state(snapshot_bytes(arrays, links), Topology(), limits()))


def test_a_link_frozen_19_years_ahead_is_refused_as_future() -> None:
    assert refused_by(tampered(future_link)) is ContentCheck.FUTURE

    def one_minute_ahead(arrays: Arrays, links: Links) -> None:
        arrays["latest_minute"][2] = int(time.time() // 60) + 2

    assert refused_by(tampered(one_minute_ahead)) is ContentCheck.FUTURE


@pytest.mark.parametrize(
    ("array", "value"),
    [
        ("series/loss", 3.5),
        ("series/loss", -0.1),
        ("series/delay_std", -7.0),
        ("series/delay_min", -1e30),
        ("series/delay_mean", float("inf")),
        ("series/delay_median", 60_000.0),
        ("series/delay_mean", float("nan")),  # the rest of the minute's statistics present
    ],
)
def test_impossible_values_are_refused_as_out_of_range(array: str, value: float) -> None:
    def poison(arrays: Arrays, links: Links) -> None:
        newest = arrays["latest_minute"][1] % 32
        arrays[array][1, newest] = value

    assert refused_by(tampered(poison)) is ContentCheck.RANGE


@pytest.mark.parametrize(
    ("array", "value"),
    [
        ("archive/delay_n", -1.0),
        ("archive/delay_n", 2.5),
        ("archive/loss_mean", 3.5),
        ("archive/delay_m2", -7.0),
        ("archive/delay_min", -1e30),
        ("archive/delay_mean", float("nan")),
    ],
)
def test_impossible_all_time_moments_are_refused(array: str, value: float) -> None:
    def poison(arrays: Arrays, links: Links) -> None:
        arrays[array][3] = value

    assert refused_by(tampered(poison)) is ContentCheck.ARCHIVE


def test_slots_that_live_ingest_cannot_fill_are_refused() -> None:
    def wrong_slot(arrays: Arrays, links: Links) -> None:
        arrays["slot_minute"][0, 5] = arrays["slot_minute"][0, 6]

    def value_in_an_empty_slot(arrays: Arrays, links: Links) -> None:
        arrays["slot_minute"][0, 7] = -1

    def row_without_a_datapoint(arrays: Arrays, links: Links) -> None:
        arrays["latest_minute"][0] = -1

    for change in (wrong_slot, value_in_an_empty_slot, row_without_a_datapoint):
        assert refused_by(tampered(change)) is ContentCheck.WINDOW, change.__name__


def test_a_duplicate_pair_is_refused() -> None:
    def duplicate(arrays: Arrays, links: Links) -> None:
        links[0][1] = links[0][0]
        links[2][1] = links[2][0]

    assert refused_by(tampered(duplicate)) is ContentCheck.DUPLICATE_LINK


def test_host_names_are_bound_as_live_ones_are() -> None:
    def steal(arrays: Arrays, links: Links) -> None:
        links[2][1] = links[2][0]  # row 1's source, 10.1.0.2, named like row 0's: ps-0

    assert refused_by(tampered(steal)) is ContentCheck.IDENTITY
    honest = encode_state(honest_state())
    inventory = Topology.from_inventory([], [], [("ps-0.example.org", "10.9.9.9")])
    assert refused_by(honest, inventory) is ContentCheck.IDENTITY  # the topology wins
    with pytest.raises(SnapshotContentError, match="bound to 10.9.9.9 by this replica"):
        decode_state(honest, Topology(), limits(own={"ps-dst.example.org": "10.9.9.9"}))
    same = decode_state(honest, Topology(), limits(own={"ps-dst.example.org": "10.2.0.1"}))
    assert len(same) == 4  # a binding this replica shares is no conflict

    def unprintable(arrays: Arrays, links: Links) -> None:
        links[3][0] = "ps\x00.example.org"

    assert refused_by(tampered(unprintable)) is ContentCheck.NAMES


def test_300000_links_in_a_small_compressed_payload_are_refused_before_decoding() -> None:
    arrays, links = many_links(300_000)
    compressed = snapshot_bytes(arrays, links, compressed=True)
    assert len(compressed) < 8 << 20  # a few MB for 300,000 links
    with pytest.raises(SnapshotFormatError, match="is compressed"):
        decode_state(compressed, Topology(), limits(max_links=1000))
    stored = snapshot_bytes(*many_links(1001))
    assert refused_by(stored, max_links=1000) is ContentCheck.LINK_LIMIT
    assert len(decode_state(snapshot_bytes(*many_links(1000)), Topology(), limits())) == 1000


def test_array_headers_are_checked_before_their_data_is_read() -> None:
    arrays, links = arrays_of(honest_state())
    arrays["series/loss"] = np.zeros((4, 32), np.float64)  # another type
    with pytest.raises(SnapshotFormatError, match="series/loss has shape"):
        decode_state(snapshot_bytes(arrays, links), Topology(), limits())
    arrays, links = arrays_of(honest_state())
    arrays["extra"] = np.zeros(3)
    with pytest.raises(SnapshotFormatError, match="do not match"):
        decode_state(snapshot_bytes(arrays, links), Topology(), limits())
