"""Per-link network path from traceroutes: the hops, when the path last changed, how often.

Each link keeps its latest trace (hop numbers into `HopAddresses`, RTTs, the highest TTL), the
path's fingerprint (`packet_trace.path_fingerprint`), the start of that trace (`seen`) and of
the first trace of the current path (`since`: when it last changed), whether the last hop is
the link's destination (`reached`: 1, 0, or -1 when the destination's address is not known),
and the changes of the last day counted by the hour: a ring of 24 hourly counts and the hour of
the newest change. A change is a trace whose fingerprint differs from the one before it; the
first trace of a link is no change.

Bounds per link: `MAX_HOPS` hops (4-byte hop numbers, RTTs as float16 milliseconds: three
significant digits), 24 hourly counts; the hop table is shared (`hop_addresses.MAX_ADDRESSES`).

Every column's empty value is 0, so that the rows of links without traces take no resident
memory (`RowColumns.grow_to`): a time or hour of 0 is none, a hop is its table number + 1 (0:
no answer), `reached` is stored + 1 (0: unknown). Reading translates (`summary`, `hops_of`).

Traces are taken as if one by one in time order. One older than its link's latest is too old
(it cannot be placed in the link's history of changes); one at the latest's time is a repeat
and changes nothing; so is one older than a day (`DAY_SECONDS`) for a link without a path.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from service.parse.packet_trace import MAX_HOPS
from service.parse.records import Trace
from service.state.hop_addresses import HopAddresses
from service.state.row_columns import ColumnSpec, RowColumns, first_of_each, newest_of_each

DAY_SECONDS = 86_400
HOURS = 24
COLUMNS = {
    "fingerprint": ColumnSpec(np.int64, 0),
    "seen": ColumnSpec(np.int64, 0),
    "since": ColumnSpec(np.int64, 0),
    "reached": ColumnSpec(np.int8, 0),
    "hop_count": ColumnSpec(np.uint8, 0),
    "change_hour": ColumnSpec(np.int32, 0),
    "hour_changes": ColumnSpec(np.uint16, 0, (HOURS,)),
    "hops": ColumnSpec(np.int32, 0, (MAX_HOPS,)),
    "rtt_ms": ColumnSpec(np.float16, 0.0, (MAX_HOPS,)),
}


class PathSummary(NamedTuple):
    """Per link: the path's fingerprint, the start of its latest trace and of the path's first
    (epoch s; -1: no path), whether it reaches the destination (1, 0, -1: unknown), the changes
    in the current hour and the 23 before it, and the highest TTL of its latest trace."""

    fingerprint: np.ndarray
    seen: np.ndarray
    since: np.ndarray
    reached: np.ndarray
    changes_last_day: np.ndarray
    hop_count: np.ndarray


class PathHop(NamedTuple):
    """A hop of a link's current path ("" address: no answer at that TTL; NaN RTT; 0 AS)."""

    ttl: int
    address: str
    rtt_ms: float
    asn: int


class PathState:
    """Path columns over link rows and their hop table (not thread-safe: `LinkState` holds
    the lock)."""

    def __init__(self, capacity: int = 1024) -> None:
        self.columns = RowColumns(COLUMNS, capacity)
        self.addresses = HopAddresses()

    @staticmethod
    def window_start(now: float) -> int:
        """The earliest start a trace may have to be taken at `now`."""
        return int(now) - DAY_SECONDS

    def number_hops(self, traces: Sequence[Trace], in_use: int) -> list[list[int] | None]:
        """Each trace's hops as hop-table numbers (-1: no answer), or None for a trace whose new
        addresses do not fit (the table is compacted to the `in_use` rows' paths first when
        they might not); to be stored with `add_traces`."""
        self._make_room(sum(len(trace.hops) for trace in traces), in_use)
        return [self._numbers(trace) for trace in traces]

    def add_traces(
        self,
        rows: np.ndarray,
        times: np.ndarray,
        traces: Sequence[Trace],
        numbers: Sequence[list[int]],
        destinations: Sequence[str],
    ) -> np.ndarray:
        """Store traces (inside the window, hops numbered by `number_hops`) at their rows,
        `destinations` the address each row's link ends at ("" when not known); per trace,
        whether it was stored (False: older than its link's latest trace)."""
        c = self.columns
        seen = c["seen"][rows]
        stored: np.ndarray = times >= seen
        taken = np.flatnonzero((times > seen) & first_of_each(rows, times))
        taken = taken[np.lexsort((taken, times[taken], rows[taken]))]
        if len(taken):
            self._follow(rows[taken], times[taken], taken, traces)
            latest = taken[newest_of_each(rows[taken], times[taken], np.ones(len(taken), bool))]
            self._store_latest(rows[latest], latest, traces, numbers, destinations)
        return stored

    def _numbers(self, trace: Trace) -> list[int] | None:
        """The hop table's number of each hop (-1: no answer), or None when one does not fit."""
        numbers = []
        for hop in trace.hops:
            number = self.addresses.number_of(hop.address, hop.asn) if hop.address else -1
            if number is None:
                return None
            numbers.append(number)
        return numbers

    def _make_room(self, incoming: int, in_use: int) -> None:
        """Drop the addresses no path holds when `incoming` new ones might not fit."""
        if not self.addresses.room_for(incoming):
            self._compact(in_use)

    def _follow(
        self, rows: np.ndarray, times: np.ndarray, taken: np.ndarray, traces: Sequence[Trace]
    ) -> None:
        """Fingerprints, changes and `since` of traces sorted by row, then time."""
        c = self.columns
        prints = np.array([traces[i].fingerprint for i in taken.tolist()], np.int64)
        first = np.ones(len(rows), dtype=bool)
        first[1:] = rows[1:] != rows[:-1]
        before = np.where(first, c["fingerprint"][rows], np.roll(prints, 1))
        had_path = ~first | (c["seen"][rows] > 0)
        changed = had_path & (prints != before)
        starts = changed | ~had_path
        begun = newest_of_each(rows, times, starts)
        c["since"][rows[begun]] = times[begun]
        self._count_changes(rows[changed], times[changed] // 3600)
        last = newest_of_each(rows, times, np.ones(len(rows), dtype=bool))
        c["fingerprint"][rows[last]] = prints[last]
        c["seen"][rows[last]] = times[last]

    def _count_changes(self, rows: np.ndarray, hours: np.ndarray) -> None:
        """Add changes (row, epoch hour; hours ascending per row) to the hourly rings."""
        if not len(rows):
            return
        c = self.columns
        links, inverse = np.unique(rows, return_inverse=True)
        newest = c["change_hour"][links].astype(np.int64)
        old = newest.copy()
        np.maximum.at(newest, inverse, hours)
        ring = c["hour_changes"][links]
        ring[_slot_hours(old) <= newest[:, None] - HOURS] = 0
        c["hour_changes"][links] = ring
        c["change_hour"][links] = newest
        recent = hours > newest[inverse] - HOURS
        np.add.at(c["hour_changes"], (rows[recent], hours[recent] % HOURS), 1)

    def _store_latest(
        self,
        rows: np.ndarray,
        latest: np.ndarray,
        traces: Sequence[Trace],
        numbers: Sequence[list[int]],
        destinations: Sequence[str],
    ) -> None:
        """Hops, RTTs, highest TTL and `reached` of the traces `latest` at `rows` (one each)."""
        c = self.columns
        hops = np.zeros((len(latest), MAX_HOPS), np.int32)
        rtts = np.zeros((len(latest), MAX_HOPS), np.float32)
        top = np.zeros(len(latest), np.uint8)
        reached = np.zeros(len(latest), np.int8)
        for k, i in enumerate(latest.tolist()):
            trace = traces[i]
            ttls = [hop.ttl - 1 for hop in trace.hops]
            hops[k, ttls] = [number + 1 for number in numbers[i]]
            rtts[k, ttls] = [hop.rtt_ms for hop in trace.hops]
            last = trace.hops[-1]
            top[k] = last.ttl
            if destinations[i]:
                reached[k] = 2 if last.address == destinations[i] else 1
        c["hops"][rows] = hops
        c["rtt_ms"][rows] = rtts.astype(np.float16)
        c["hop_count"][rows] = top
        c["reached"][rows] = reached

    def keep_rows(self, keep: np.ndarray, n: int) -> None:
        """Keep rows `keep` (as `RowColumns.keep_rows`) and the addresses they still hold."""
        self.columns.keep_rows(keep, n)
        self._compact(len(keep))

    def _compact(self, in_use: int) -> None:
        hops = self.columns["hops"][:in_use]
        renumber = self.addresses.keep(np.unique(hops[hops > 0]) - 1)
        hops[:] = renumber[hops - 1] + 1  # no answer (0) maps through renumber[-1] = -1 to 0

    def newest_time(self, n: int) -> np.ndarray:
        """Per row below `n`: the start of its latest trace (0: none)."""
        return self.columns["seen"][:n]

    # --- reading ---------------------------------------------------------------------------

    def summary(self, rows: np.ndarray, now: float) -> PathSummary:
        c = self.columns
        seen = c["seen"][rows]
        return PathSummary(
            c["fingerprint"][rows].copy(),
            np.where(seen > 0, seen, -1),
            np.where(seen > 0, c["since"][rows], -1),
            c["reached"][rows].astype(np.int8) - 1,
            self.changes_last_day(rows, now),
            c["hop_count"][rows].copy(),
        )

    def changes_last_day(self, rows: np.ndarray, now: float) -> np.ndarray:
        """Per link, the path changes in the hour holding `now` and the 23 before it."""
        c = self.columns
        newest = c["change_hour"][rows].astype(np.int64)
        held = _slot_hours(newest)
        hour = int(now) // 3600
        in_day = (held > hour - HOURS) & (held <= hour) & (newest > 0)[:, None]
        counts: np.ndarray = (c["hour_changes"][rows].astype(np.int64) * in_day).sum(axis=1)
        return counts

    def hops_of(self, row: int) -> list[PathHop]:
        """The current path of the link at `row`, TTL 1 up to its latest trace's highest."""
        c = self.columns
        count = int(c["hop_count"][row])
        numbers = (c["hops"][row, :count] - 1).tolist()
        # The shortest decimal each float16 stands for: 21.4, not 21.40625.
        rtts = [float(np.format_float_positional(rtt)) for rtt in c["rtt_ms"][row, :count]]
        asns, addresses = self.addresses.asn_array(), self.addresses.addresses
        return [
            PathHop(ttl, addresses[n], rtt, int(asns[n]))
            if n >= 0
            else PathHop(ttl, "", math.nan, 0)
            for ttl, (n, rtt) in enumerate(zip(numbers, rtts, strict=True), start=1)
        ]


def _slot_hours(newest: np.ndarray) -> np.ndarray:
    """The epoch hour each ring slot holds, given the newest hour written (0: none)."""
    slots = np.arange(HOURS)
    return newest[:, None] - ((newest[:, None] - slots) % HOURS)
