"""What a state from elsewhere must satisfy before it is adopted: the checks live input passes.

A warm start takes a peer's state (`--warm-from URL`) or another replica's snapshot file (a
shared directory). Their checksum proves nothing (the sender computes it), so the content is
checked as strictly as live ingest checks a datapoint, link or host name, and refused whole on
the first problem (`SnapshotContentError`, with the check that failed):

- at most `--max-links` links, no link twice, names as long as the parser allows;
- host bindings as the index keeps them: a name the topology, this replica or an earlier row of
  the snapshot binds to one address is not given another (`identity`);
- no minute after now + the clock tolerance (`future`); every held slot holds a minute of its
  own slot, none after its row's newest minute (`window`);
- finite values in their physical ranges (`range`): loss in [0, 1]; delays as the histogram
  parser keeps them (-1000 .. 50000 ms), minimum <= median and mean, standard deviation
  >= 0; all-time moments consistent with their counts (`archive`);
- throughput results and paths as ingest leaves them (`results`): rates in 0 .. the parser's
  largest, with a time where there is a rate; bins in their own ring slots, none after now,
  counts and sums of rates that fit; a path's times in order, hop numbers into the hop table,
  RTTs the parser takes; hop addresses canonical and distinct (`names`). A row holds a datapoint
  of some kind (a minute, a throughput result or count, a trace).

Minutes before the window are history, not a fault: a link that stopped reporting keeps its
last minutes until retirement, and an archive backfill takes older minutes too.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

import numpy as np

from service.parse.addresses import canonical_ip
from service.parse.histogram import CLOCK_ERROR_HIGH_MS, CLOCK_ERROR_LOW_MS
from service.parse.limits import InputLimits
from service.parse.packet_trace import MAX_HOPS, MAX_RTT_MS
from service.parse.throughput import MAX_RETRANSMITS, MAX_THROUGHPUT_BPS
from service.persistence.snapshot_codec import SnapshotFormatError
from service.state.hop_addresses import MAX_ADDRESSES
from service.state.link_buffers import WINDOW_MINUTES
from service.state.link_state import MAX_FUTURE_SECONDS
from service.state.throughput_state import BIN_SECONDS, BINS
from service.topology.topology import Topology, host_key

#: Longest host name (the parser's string limit) and link-end identity ("ipv6:" + a name).
_MAX_NAME = InputLimits().max_string_length
_MAX_IDENTITY = _MAX_NAME + len("ipv6:")
#: Most minutes an all-time count can hold (exact in float32: 31 years).
_MAX_COUNT = float(1 << 24)
_DELAY_SPAN = CLOCK_ERROR_HIGH_MS - CLOCK_ERROR_LOW_MS


class ContentCheck(StrEnum):
    """Which check refused a state (`nettel_warm_start_rejected_total{check}`)."""

    LINK_LIMIT = "link_limit"
    DUPLICATE_LINK = "duplicate_link"
    NAMES = "names"
    IDENTITY = "identity"
    FUTURE = "future"
    WINDOW = "window"
    RANGE = "range"
    ARCHIVE = "archive"
    RESULTS = "results"


class SnapshotContentError(SnapshotFormatError):
    """Snapshot bytes that decode but hold a state live input could never have built."""

    def __init__(self, check: ContentCheck, detail: str) -> None:
        super().__init__(f"{check.value}: {detail}")
        self.check = check


@dataclass(frozen=True)
class ContentLimits:
    """What a state from elsewhere is checked against: the time now, --max-links and the host
    bindings this replica holds already ((host name, IP version) -> address). Passed to
    `decode_state` as its `checks`."""

    now: float
    max_links: int
    bindings: Mapping[tuple[str, int], str] = field(default_factory=dict)

    def check_links(self, links: list[list[str]], topology: Topology) -> None:
        check_index(links, self, topology)

    def check_hop_addresses(self, addresses: list[str]) -> None:
        check_hop_addresses(addresses)

    def check_arrays(self, arrays: Mapping[str, np.ndarray]) -> None:
        check_arrays(arrays, self)


def check_index(links: list[list[str]], limits: ContentLimits, topology: Topology) -> None:
    """The link list (sources, destinations, source hosts, destination hosts): count, names,
    duplicates and host bindings. Runs before any array is read."""
    sources, destinations, source_hosts, destination_hosts = links
    n = len(sources)
    if n > limits.max_links:
        raise SnapshotContentError(
            ContentCheck.LINK_LIMIT, f"{n:,} links, more than --max-links {limits.max_links:,}"
        )
    for values, longest, what in (
        (sources, _MAX_IDENTITY, "source"),
        (destinations, _MAX_IDENTITY, "destination"),
        (source_hosts, _MAX_NAME, "source host"),
        (destination_hosts, _MAX_NAME, "destination host"),
    ):
        for row, value in enumerate(values):
            if not value or len(value) > longest or not value.isprintable():
                shown = value[:40] + ("..." if len(value) > 40 else "")
                detail = f"row {row}: {what} {shown!r} is empty, too long or not printable"
                raise SnapshotContentError(ContentCheck.NAMES, detail)
    seen: dict[tuple[str, str], int] = {}
    for row, key in enumerate(zip(sources, destinations, strict=True)):
        first = seen.setdefault(key, row)
        if first != row:
            detail = f"{key[0]} -> {key[1]} in rows {first} and {row}"
            raise SnapshotContentError(ContentCheck.DUPLICATE_LINK, detail)
    _check_bindings(links, limits.bindings, topology)


def _check_bindings(
    links: list[list[str]], own: Mapping[tuple[str, int], str], topology: Topology
) -> None:
    """A row with two addresses binds its host names to them when restored (as the first bus
    message did): each name must be free or bound to the same address, by the topology (which
    wins), this replica, or an earlier row."""
    bound: dict[tuple[str, int], str] = {}
    rows = zip(*links, strict=True)
    for row, (source, destination, source_host, destination_host) in enumerate(rows):
        if canonical_ip(source) != source or canonical_ip(destination) != destination:
            continue  # keyed by a host name (a pScheduler run): binds nothing
        for host, address in ((source_host, source), (destination_host, destination)):
            name = host_key(host)
            if host == address or not name:
                continue
            version = 6 if ":" in address else 4
            for by, holder in (
                ("the topology", topology.address_of(name, version)),
                ("this replica", own.get((name, version))),
                ("an earlier row", bound.get((name, version))),
            ):
                if holder is not None and holder != address:
                    detail = f"row {row}: host {name} is bound to {holder} by {by}; the snapshot "
                    raise SnapshotContentError(ContentCheck.IDENTITY, detail + f"gives {address}")
            bound[(name, version)] = address


def check_hop_addresses(addresses: list[str]) -> None:
    """The hop table: at most its bound, each address canonical and listed once."""
    if len(addresses) > MAX_ADDRESSES:
        detail = f"{len(addresses):,} hop addresses, more than {MAX_ADDRESSES:,}"
        raise SnapshotContentError(ContentCheck.NAMES, detail)
    for number, address in enumerate(addresses):
        if canonical_ip(address) != address:
            shown = address[:40]
            raise SnapshotContentError(ContentCheck.NAMES, f"hop address {number}: {shown!r}")
    if len(set(addresses)) != len(addresses):
        raise SnapshotContentError(ContentCheck.NAMES, "a hop address is listed twice")


def check_arrays(arrays: Mapping[str, np.ndarray], limits: ContentLimits) -> None:
    """Every array of a decoded snapshot (shapes and types checked already)."""
    newest_allowed = int((limits.now + MAX_FUTURE_SECONDS) // 60)
    latest = arrays["latest_minute"].astype(np.int64)
    _first(latest > newest_allowed, ContentCheck.FUTURE, "newest minute", latest, minutes=True)
    results = np.maximum.reduce(
        [
            arrays["throughput/latest_time"],
            arrays["throughput/retransmits_time"],
            arrays["paths/seen"],
        ]
    )
    empty = (latest < 0) & (results <= 0)
    _first(empty, ContentCheck.WINDOW, "row without a datapoint: newest minute", latest)
    slots = arrays["slot_minute"].astype(np.int64)
    held = slots >= 0
    own_slot = slots % WINDOW_MINUTES == np.arange(WINDOW_MINUTES)
    _first(held & ~own_slot, ContentCheck.WINDOW, "minute in another minute's slot", slots)
    _first(slots > latest[:, None], ContentCheck.WINDOW, "slot after the newest minute", slots)
    _first(slots < -1, ContentCheck.WINDOW, "slot minute", slots)
    for name in ("latest_delay_minute", "clock_suspect_minute"):
        minute = arrays[name].astype(np.int64)
        _first((minute < -1) | (minute > latest), ContentCheck.WINDOW, name, minute)
    _check_series(arrays, held)
    p95 = arrays["latest_p95"]
    _first(~np.isnan(p95) & ~_in_delay_range(p95), ContentCheck.RANGE, "latest_p95", p95)
    _check_archive(arrays)
    newest_second = limits.now + MAX_FUTURE_SECONDS
    _check_throughput(arrays, newest_second)
    _check_paths(arrays, newest_second)


def _check_series(arrays: Mapping[str, np.ndarray], held: np.ndarray) -> None:
    loss = arrays["series/loss"]
    bad_loss = ~np.isnan(loss) & ~((loss >= 0) & (loss <= 1))
    _first(bad_loss, ContentCheck.RANGE, "packet loss (0 .. 1)", loss)
    mean, median = arrays["series/delay_mean"], arrays["series/delay_median"]
    std, minimum = arrays["series/delay_std"], arrays["series/delay_min"]
    present = ~np.isnan(mean)
    for values, name in ((median, "delay_median"), (std, "delay_std"), (minimum, "delay_min")):
        _first(np.isnan(values) == present, ContentCheck.RANGE, f"{name} beside mean", values)
    for values, name in ((mean, "delay_mean"), (median, "delay_median"), (minimum, "delay_min")):
        _first(present & ~_in_delay_range(values), ContentCheck.RANGE, name + " (ms)", values)
    bad_std = present & ~((std >= 0) & (std <= _DELAY_SPAN))
    _first(bad_std, ContentCheck.RANGE, "delay_std (ms)", std)
    above = present & ((minimum > mean) | (minimum > median))
    _first(above, ContentCheck.RANGE, "delay_min above mean or median", minimum)
    for name in ("delay_mean", "delay_median", "delay_std", "delay_min", "loss"):
        values = arrays[f"series/{name}"]
        _first(~held & ~np.isnan(values), ContentCheck.WINDOW, f"{name} in an empty slot", values)


def _check_throughput(arrays: Mapping[str, np.ndarray], newest_second: float) -> None:
    """Latest rates and retransmits, and the bins, as `ThroughputState` leaves them (a time or
    period of 0: none)."""
    check = ContentCheck.RESULTS
    bps, time = arrays["throughput/latest_bps"], arrays["throughput/latest_time"]
    _first((time > newest_second) | (time < 0), check, "throughput time", time)
    in_range = (bps >= 0) & (bps <= MAX_THROUGHPUT_BPS)  # NaN is not
    _first(np.where(time > 0, ~in_range, bps != 0), check, "throughput rate (bit/s)", bps)
    count, at = arrays["throughput/retransmits"], arrays["throughput/retransmits_time"]
    _first((at > newest_second) | (at < 0), check, "retransmits time", at)
    bad_count = np.where(at > 0, (count < 0) | (count > MAX_RETRANSMITS), count != 0)
    _first(bad_count, check, "retransmits", count)
    period = arrays["throughput/bin_period"].astype(np.int64)
    held = period > 0
    own_slot = period % BINS == np.arange(BINS)
    _first(held & ~own_slot, check, "bin period in another period's slot", period)
    _first(period < 0, check, "bin period", period)
    _first(period * BIN_SECONDS > newest_second, check, "bin period after now", period)
    n, total = arrays["throughput/bin_count"].astype(np.int64), arrays["throughput/bin_sum"]
    _first(held != (n > 0), check, "bin count beside its period", n)
    _first(~held & (total != 0), check, "bin sum without a period", total)
    bad_sum = ~((total >= 0) & (total <= n * MAX_THROUGHPUT_BPS))
    _first(bad_sum, check, "bin sum beside its count", total)


def _check_paths(arrays: Mapping[str, np.ndarray], newest_second: float) -> None:
    """Paths as `PathState` leaves them (a time or hour of 0: none; hops numbered from 1 into
    the hop table, 0: no answer; `reached` stored + 1): times in order, RTTs in range."""
    check = ContentCheck.RESULTS
    seen, since = arrays["paths/seen"], arrays["paths/since"]
    _first((seen > newest_second) | (seen < 0), check, "trace time", seen)
    _first((since > seen) | ((since == 0) != (seen == 0)), check, "path since beside seen", since)
    hops, table = arrays["paths/hops"].astype(np.int64), len(arrays["paths/hop_asn"])
    _first((hops < 0) | (hops > table), check, "hop number", hops)
    count = arrays["paths/hop_count"].astype(np.int64)
    _first((count > MAX_HOPS) | ((count == 0) != (seen == 0)), check, "hop count", count)
    beyond = np.arange(MAX_HOPS) >= count[:, None]
    _first(beyond & (hops > 0), check, "hop after the highest TTL", hops)
    rtt = arrays["paths/rtt_ms"].astype(np.float64)
    measured = (rtt >= 0) & (rtt <= MAX_RTT_MS)
    bad_rtt = np.where(hops > 0, ~measured & ~np.isnan(rtt), (rtt != 0) & ~np.isnan(rtt))
    _first(bad_rtt, check, "hop RTT (ms)", rtt)
    reached = arrays["paths/reached"]
    _first((reached < 0) | (reached > 2), check, "reached", reached)
    hour = arrays["paths/change_hour"].astype(np.int64)
    _first((hour < 0) | (hour * 3600 > newest_second), check, "change hour", hour)
    changes = arrays["paths/hour_changes"].astype(np.int64)
    _first((hour == 0)[:, None] & (changes > 0), check, "changes without an hour", changes)
    _first(changes > 3600, check, "changes in an hour", changes)


def _check_archive(arrays: Mapping[str, np.ndarray]) -> None:
    for quantity, span in (("delay", _DELAY_SPAN), ("loss", 1.0)):
        n = arrays[f"archive/{quantity}_n"].astype(np.float64)
        mean, m2 = arrays[f"archive/{quantity}_mean"], arrays[f"archive/{quantity}_m2"]
        counted = n > 0
        bad_n = ~((n >= 0) & (n <= _MAX_COUNT) & (n == np.floor(n)))
        _first(bad_n, ContentCheck.ARCHIVE, f"{quantity}_n", n)
        empty = ~counted & ((mean != 0) | (m2 != 0))
        _first(empty, ContentCheck.ARCHIVE, f"{quantity} moments without a count", mean)
        low, high = (CLOCK_ERROR_LOW_MS, CLOCK_ERROR_HIGH_MS) if quantity == "delay" else (0, 1)
        _first(counted & ~((mean >= low) & (mean <= high)), ContentCheck.ARCHIVE, "mean", mean)
        bad_m2 = ~((m2 >= 0) & (m2 <= n * span * span))
        _first(bad_m2, ContentCheck.ARCHIVE, f"{quantity}_m2", m2)
    n = arrays["archive/delay_n"]
    minimum, mean = arrays["archive/delay_min"], arrays["archive/delay_mean"]
    counted = n > 0
    _first(~counted & (minimum != np.inf), ContentCheck.ARCHIVE, "delay_min without a count", n)
    tolerance = 1e-9 * (np.abs(mean) + 1.0)
    bad_min = counted & ~(_in_delay_range(minimum) & (minimum <= mean + tolerance))
    _first(bad_min, ContentCheck.ARCHIVE, "all-time delay_min", minimum)


def _in_delay_range(values: np.ndarray) -> np.ndarray:
    return (values >= CLOCK_ERROR_LOW_MS) & (values <= CLOCK_ERROR_HIGH_MS)


def _first(
    bad: np.ndarray, check: ContentCheck, what: str, values: np.ndarray, minutes: bool = False
) -> None:
    """Refuse with the first (row-major) element where `bad` holds, naming its row."""
    if not bad.any():
        return
    where = np.unravel_index(int(np.argmax(bad)), bad.shape)
    value = values[where]
    shown = f"{value!r}" if not minutes else f"minute {int(value)} ({int(value) * 60} s)"
    raise SnapshotContentError(check, f"row {int(where[0])}: {what} {shown}")
