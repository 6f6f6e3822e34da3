"""Applies parsed measurements to the link index and buffers, and hands out consistent copies.

The state owns the lock that guards it: ingest applies batches, and the matrix cycle, the REST
API and persistence take copies, each through a method that holds the lock for its whole call.
"""

from __future__ import annotations

import functools
import math
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TypeVar

import numpy as np

from service.errors import RejectReason
from service.parse.addresses import canonical_ip
from service.parse.histogram import HistogramStats
from service.parse.records import LinkEndpoints, NamedEndpoints, ParsedMessage, Trace
from service.state.link_buffers import ARCHIVE, SERIES, WINDOW_MINUTES, Datapoints, LinkBuffers
from service.state.link_index import LinkIndex
from service.state.path_state import PathHop, PathState, PathSummary
from service.state.throughput_state import BandwidthChange, LatestThroughput, ThroughputState
from service.topology.topology import Topology

#: Datapoints further than this in the future (seconds) are refused: the clock tolerance. A
#: datapoint is stamped with the start of the minute (bus) or interval (pScheduler) it measured,
#: so an NTP-synchronised toolkit's are never ahead; one stamped later would become its link's
#: newest minute and hide the real one until the clock passes it.
MAX_FUTURE_SECONDS = 10
#: Why a new link is refused, given the link, how many the state holds, whether it comes from an
#: archive's history and who sent it when not its source host (None: take it).
Admission = Callable[[LinkEndpoints | NamedEndpoints, int, bool, str | None], RejectReason | None]
_Name = TypeVar("_Name", str, str | None)  # a link end's IP, host or site


@dataclass(slots=True)
class ApplyOutcome:
    """What one message changed: datapoints stored and reasons for the refused ones."""

    applied: int = 0
    rejected: list[RejectReason] = field(default_factory=list)
    #: What the log says about a refusal made here (the parser's are in the message).
    details: dict[RejectReason, str] = field(default_factory=dict)
    #: Host names of the message the link index refused (`IDENTITY_CONFLICT`), described; the
    #: datapoints are stored all the same.
    conflicts: list[str] = field(default_factory=list)
    #: Of `applied`, those older than the window, folded into the all-time moments.
    archived: int = 0


@dataclass(frozen=True)
class StateView:
    """A copy of every link's state at one moment; analysis works on this, never on live arrays."""

    taken_at: float
    sources: list[str]
    destinations: list[str]
    source_hosts: list[str]
    destination_hosts: list[str]
    source_sites: list[str | None]
    destination_sites: list[str | None]
    slot_minute: np.ndarray
    series: dict[str, np.ndarray]
    archive: dict[str, np.ndarray]
    latest_delay_minute: np.ndarray
    latest_p95: np.ndarray
    latest_minute: np.ndarray
    clock_suspect_minute: np.ndarray
    names_version: int = 0
    #: `LinkState.stored_total` when the copy was taken.
    stored_total: int = 0

    def __len__(self) -> int:
        return len(self.sources)

    def rows(self, block: slice) -> StateView:
        """The links in `block` (array views, not copies), for analysing a view piece by piece."""
        return StateView(
            taken_at=self.taken_at,
            sources=self.sources[block],
            destinations=self.destinations[block],
            source_hosts=self.source_hosts[block],
            destination_hosts=self.destination_hosts[block],
            source_sites=self.source_sites[block],
            destination_sites=self.destination_sites[block],
            slot_minute=self.slot_minute[block],
            series={name: values[block] for name, values in self.series.items()},
            archive={name: values[block] for name, values in self.archive.items()},
            latest_delay_minute=self.latest_delay_minute[block],
            latest_p95=self.latest_p95[block],
            latest_minute=self.latest_minute[block],
            clock_suspect_minute=self.clock_suspect_minute[block],
            names_version=self.names_version,
            stored_total=self.stored_total,
        )


@dataclass(frozen=True)
class LinkResults:
    """Copies of the throughput and path state of links (all rows, or the rows asked for) at
    one moment; take it in the same `LinkState.frozen()` block as a `StateView` to have both
    of the same links in the same order."""

    taken_at: float
    rows: np.ndarray
    throughput: LatestThroughput
    bandwidth: BandwidthChange
    paths: PathSummary


class LinkState:
    """All links' buffers; thread-safe: every method holds the state's own lock.

    Beside the delay and loss buffers each row has throughput results (`throughput`,
    `ThroughputState`) and a path from traceroutes (`paths`, `PathState`).
    """

    def __init__(
        self,
        topology: Topology | None = None,
        capacity: int = 1024,
        admission: Admission | None = None,
    ) -> None:
        self.index = LinkIndex(topology or Topology())
        self.buffers = LinkBuffers(capacity)
        self.throughput = ThroughputState(capacity)
        self.paths = PathState(capacity)
        #: Datapoints stored since start; a reader compares it with a view's to see new data.
        self.stored_total = 0
        #: Links removed by `retire_idle` since start.
        self.retired_total = 0
        #: Decides on new links (`service.ingest.link_admission`); None takes every one.
        self.admission = admission
        self._lock = threading.RLock()

    def __len__(self) -> int:
        return len(self.index)

    @contextmanager
    def frozen(self) -> Iterator[LinkState]:
        """Hold the state still for a block: nothing is applied until it ends (e.g. while the
        state is encoded and the journal rotated as one step)."""
        with self._lock:
            yield self

    def apply(self, message: ParsedMessage, now: float) -> ApplyOutcome:
        """Store every datapoint of `message` that falls inside the window ending at `now`."""
        (outcome,) = self.apply_batch([message], now)
        return outcome

    def apply_batch(self, messages: Sequence[ParsedMessage], now: float) -> list[ApplyOutcome]:
        """Apply `messages` with the outcome of applying them one by one, in order.

        A link gets a row only once one of its datapoints passes the window check.
        """
        with self._lock:
            outcomes = self._apply_batch(messages, now)
            self.stored_total += sum(outcome.applied for outcome in outcomes)
        return outcomes

    def apply_history(self, messages: Sequence[ParsedMessage], now: float) -> list[ApplyOutcome]:
        """`apply_batch` for messages read back from an archive, with each link's whole history
        in this one call: datapoints before the window are folded into the all-time moments
        where that counts no minute twice (`LinkBuffers.write_with_history`), else `too_old`.
        """
        with self._lock:
            outcomes = self._apply_batch(messages, now, history=True)
            self.stored_total += sum(outcome.applied for outcome in outcomes)
        return outcomes

    def _apply_batch(
        self, messages: Sequence[ParsedMessage], now: float, history: bool = False
    ) -> list[ApplyOutcome]:
        outcomes = [ApplyOutcome(rejected=[reason for reason, _ in m.rejected]) for m in messages]
        rows: dict[int, int | RejectReason] = {}
        self._apply_measurements(messages, outcomes, rows, now, history)
        self._apply_results(messages, outcomes, rows, now, history)
        return outcomes

    def _apply_measurements(
        self,
        messages: Sequence[ParsedMessage],
        outcomes: list[ApplyOutcome],
        rows: dict[int, int | RejectReason],
        now: float,
        history: bool,
    ) -> None:
        """Delays and losses into the window (and, from history, the all-time moments)."""
        table = _datapoint_table(messages)
        if not len(table):
            return
        message_of = table[:, 0].astype(np.intp)
        timestamps = table[:, 1].astype(np.int64)
        codes = window_reject_codes(timestamps, now)
        kept = codes != _FUTURE if history else codes == 0
        for point in np.flatnonzero(~kept).tolist():
            outcomes[message_of[point]].rejected.append(_WINDOW_REASONS[codes[point]])
        if not kept.any():
            return
        row_of, kept = self._admitted(messages, outcomes, rows, message_of, kept, history)
        if not kept.any():
            return
        table, message_of = table[kept], message_of[kept]
        points = Datapoints(row_of[message_of], timestamps[kept] // 60, *_point_columns(table))
        if history:
            stored, archived = self.buffers.write_with_history(points, codes[kept] == _TOO_OLD)
        else:
            stored, archived = self.buffers.write(points), np.zeros(len(message_of), dtype=bool)
        _count_stored(outcomes, message_of, stored, archived)

    def _apply_results(
        self,
        messages: Sequence[ParsedMessage],
        outcomes: list[ApplyOutcome],
        rows: dict[int, int | RejectReason],
        now: float,
        history: bool,
    ) -> None:
        """Throughput results, retransmit counts and traces, each within its own window: the
        throughput history's bins (`ThroughputState.window_start`), a day for traces."""
        table = _result_table(messages)
        if not len(table):
            return
        message_of, kinds, positions = (table[:, column].astype(np.intp) for column in (0, 2, 3))
        times = table[:, 1].astype(np.int64)
        newest_allowed = now + MAX_FUTURE_SECONDS
        earliest = np.where(
            kinds == _TRACE,
            PathState.window_start(now),
            ThroughputState.window_start(newest_allowed),
        )
        codes = np.where(times > newest_allowed, _FUTURE, np.where(times < earliest, _TOO_OLD, 0))
        for point in np.flatnonzero(codes).tolist():
            outcomes[message_of[point]].rejected.append(_WINDOW_REASONS[codes[point]])
        traced = np.flatnonzero((codes == 0) & (kinds == _TRACE))
        traces = [
            messages[m].traces[p][1]
            for m, p in zip(message_of[traced].tolist(), positions[traced].tolist(), strict=True)
        ]
        numbers = self._number_hops(traces, traced, message_of, outcomes)
        candidates = codes == 0
        candidates[traced[[hops is None for hops in numbers]]] = False
        row_of, kept = self._admitted(messages, outcomes, rows, message_of, candidates, history)
        rows_of_points = row_of[message_of]
        stored = np.zeros(len(table), dtype=bool)
        for kind, add in (
            (_RATE, self.throughput.add_rates),
            (_COUNT, self.throughput.add_retransmits),
        ):
            chosen = np.flatnonzero(kept & (kinds == kind))
            stored[chosen] = add(rows_of_points[chosen], times[chosen], table[chosen, 4])
        taken = kept[traced]
        if taken.any():
            chosen = traced[taken]
            stored[chosen] = self._store_traces(
                rows_of_points[chosen],
                times[chosen],
                [trace for trace, take in zip(traces, taken, strict=True) if take],
                [hops for hops, take in zip(numbers, taken, strict=True) if take and hops],
            )
        applied = np.bincount(message_of[stored], minlength=len(outcomes)).tolist()
        for number, outcome in enumerate(outcomes):
            outcome.applied += applied[number]
        for point in np.flatnonzero(kept & ~stored).tolist():
            outcomes[message_of[point]].rejected.append(RejectReason.TOO_OLD)

    def _number_hops(
        self,
        traces: list[Trace],
        points: np.ndarray,
        message_of: np.ndarray,
        outcomes: list[ApplyOutcome],
    ) -> list[list[int] | None]:
        """The hop-table numbers of each trace's hops, before its link gets a row (a trace the
        table has no room for adds no link): None for such a trace, refused in its outcome."""
        numbers = self.paths.number_hops(traces, len(self.index))
        for point, hops in zip(points.tolist(), numbers, strict=True):
            if hops is None:
                outcome = outcomes[message_of[point]]
                outcome.rejected.append(RejectReason.HOP_TABLE_FULL)
                outcome.details[RejectReason.HOP_TABLE_FULL] = "the hop address table is full"
        return numbers

    def _store_traces(
        self, rows: np.ndarray, times: np.ndarray, traces: list[Trace], numbers: list[list[int]]
    ) -> np.ndarray:
        """`PathState.add_traces` with the address each row's link ends at ("" for a name)."""
        destinations = [_address(self.index.destinations[row]) for row in rows.tolist()]
        return self.paths.add_traces(rows, times, traces, numbers, destinations)

    def _admitted(
        self,
        messages: Sequence[ParsedMessage],
        outcomes: list[ApplyOutcome],
        rows: dict[int, int | RejectReason],
        message_of: np.ndarray,
        kept: np.ndarray,
        history: bool,
    ) -> tuple[np.ndarray, np.ndarray]:
        """The row of each message (-1: none) and `kept` less the datapoints whose new link was
        refused (listed in the outcomes). New links get rows in message order; `rows` keeps
        what each message got, so that a message is admitted once."""
        for number in np.unique(message_of[kept]).tolist():
            if number not in rows:
                rows[number] = self._row_for(messages[number], outcomes[number], history)
        row_of = np.full(len(messages), -1, dtype=np.int64)
        for number, row in rows.items():
            if not isinstance(row, RejectReason):
                row_of[number] = row
        refused = kept & (row_of[message_of] < 0)
        for point in np.flatnonzero(refused).tolist():
            reason = rows[int(message_of[point])]
            assert isinstance(reason, RejectReason)
            outcomes[message_of[point]].rejected.append(reason)
        return row_of, kept & ~refused

    def _row_for(
        self, message: ParsedMessage, outcome: ApplyOutcome, history: bool
    ) -> int | RejectReason:
        """The row of the message's link, or why `admission` refuses it as a new link; a host
        name the index refused is listed in `outcome` (its datapoints are stored all the same)."""
        admission, link, producer = self.admission, message.link, message.producer
        refusal: RejectReason | None = None

        def admit() -> bool:
            nonlocal refusal
            refusal = admission(link, len(self.index), history, producer) if admission else None
            return refusal is None

        row = self.index.row_for(link, admit)
        outcome.conflicts += self.index.take_conflicts()
        if row is None:
            reason = refusal or RejectReason.LINK_LIMIT
            outcome.details[reason] = _refusal_detail(reason, link, producer)
            return reason
        self.ensure_row(row)
        return row

    def ensure_row(self, row: int) -> None:
        """Room for `row` in every per-link part (buffers, throughput, paths): rows given out
        by the index must have it, also when a caller fills the index itself."""
        for part in (self.buffers, self.throughput.columns, self.paths.columns):
            part.ensure_row(row)

    def adopt(self, other: LinkState) -> None:
        """Take `other`'s links in place of this state's (e.g. a peer's for a warm start), so
        that everything holding this state sees them; counters since start carry on."""
        with self._lock:
            other.index.names_version = self.index.names_version + 1  # every record is rebuilt
            self.index, self.buffers = other.index, other.buffers
            self.throughput, self.paths = other.throughput, other.paths

    @property
    def unmapped(self) -> int:
        """Links with an end in no site."""
        return self.index.unmapped

    def swap_topology(self, topology: Topology) -> float:
        """Re-map every link to `topology`; the longest time (s) it held the lock (once to copy
        the links' ends, once to swap the new site columns in). Ends are matched in between,
        while ingest carries on, each distinct host and address once."""
        site_of = functools.lru_cache(maxsize=None)(topology.site_of)
        with self.frozen():
            started = time.perf_counter()
            source_hosts, sources, destination_hosts, destinations = self.index.ends()
            copy_seconds = time.perf_counter() - started
        for hosts, ips in ((source_hosts, sources), (destination_hosts, destinations)):
            for host, ip in zip(hosts, ips, strict=True):
                site_of(host, ip)
        with self.frozen():
            started = time.perf_counter()
            self.index.set_topology(topology, site_of)
            swap_seconds = time.perf_counter() - started
        return max(copy_seconds, swap_seconds)

    def retire_idle(self, cutoff: float) -> int:
        """Remove every link whose newest datapoint (a delay or loss minute's start, a
        throughput test's or trace's start) is before `cutoff` (epoch s): its row, history,
        all-time statistics, throughput results and path go, later rows move up and new links
        reuse the freed rows, so a link that comes back starts afresh. Returns how many were
        removed."""
        with self._lock:
            n = len(self.index)
            newest = np.maximum.reduce(
                [
                    self.buffers.latest_minute[:n].astype(np.int64) * 60,
                    self.throughput.newest_time(n),
                    self.paths.newest_time(n),
                ]
            )
            idle = newest < cutoff
            if not idle.any():
                return 0
            keep = np.flatnonzero(~idle)
            self.buffers.keep_rows(keep, n)
            self.throughput.columns.keep_rows(keep, n)
            self.paths.keep_rows(keep, n)
            self.index.keep_rows(keep.tolist())
            retired = n - len(keep)
            self.retired_total += retired
            return retired

    def view(self, now: float, rows: list[int] | None = None) -> StateView:
        """Copy of all links' state (or of `rows` only) for analysis outside the lock."""
        with self._lock:
            return self._copy(now, rows)

    def view_link(self, source: str, destination: str, now: float) -> StateView | None:
        """Copy of one link's state (endpoints by IP or host name), or None when unknown."""
        with self._lock:
            row = self.index.find_by_name(source, destination)
            return None if row is None else self._copy(now, [row])

    def results(self, now: float, rows: list[int] | None = None) -> LinkResults:
        """Copies of every link's (or `rows`') latest throughput, AAAS's bandwidth scores and
        path summary at `now` (see `ThroughputState` and `PathState`)."""
        with self._lock:
            picked = np.arange(len(self.index)) if rows is None else np.asarray(rows, np.intp)
            starts = range(0, len(picked), RESULT_BLOCK) or range(1)
            blocks = [picked[start : start + RESULT_BLOCK] for start in starts]
            latest = [self.throughput.latest(block) for block in blocks]
            bandwidth = [self.throughput.bandwidth_change(block, now) for block in blocks]
            paths = [self.paths.summary(block, now) for block in blocks]
        return LinkResults(now, picked, _joined(latest), _joined(bandwidth), _joined(paths))

    def path_of(self, source: str, destination: str) -> list[PathHop] | None:
        """The current path of one link (endpoints by IP or host name): its hops from TTL 1;
        None when the link is unknown, [] when it has no trace."""
        with self._lock:
            row = self.index.find_by_name(source, destination)
            return None if row is None else self.paths.hops_of(row)

    def _copy(self, now: float, rows: list[int] | None) -> StateView:
        n = len(self.index)
        pick: slice | list[int] = slice(0, n) if rows is None else rows
        b, i = self.buffers, self.index

        def names(values: list[_Name]) -> list[_Name]:
            return values[:n] if rows is None else [values[r] for r in rows]

        return StateView(
            taken_at=now,
            sources=names(i.sources),
            destinations=names(i.destinations),
            source_hosts=names(i.source_hosts),
            destination_hosts=names(i.destination_hosts),
            source_sites=names(i.source_sites),
            destination_sites=names(i.destination_sites),
            slot_minute=b.slot_minute[pick].copy(),
            series={k: b.series[k][pick].copy() for k in SERIES},
            archive={k: b.archive[k][pick].copy() for k in ARCHIVE},
            latest_delay_minute=b.latest_delay_minute[pick].copy(),
            latest_p95=b.latest_p95[pick].copy(),
            latest_minute=b.latest_minute[pick].copy(),
            clock_suspect_minute=b.clock_suspect_minute[pick].copy(),
            names_version=i.names_version,
            stored_total=self.stored_total,
        )


#: Links `LinkState.results` reads at a time: the scores' temporaries (24 hourly counts of 8
#: bytes per link, a few arrays of them) stay within a few MB whatever the number of links.
RESULT_BLOCK = 16_384
_Columns = TypeVar("_Columns", LatestThroughput, BandwidthChange, PathSummary)


def _joined(blocks: list[_Columns]) -> _Columns:
    """Arrays of several blocks of rows, joined in order."""
    return type(blocks[0])._make(np.concatenate(columns) for columns in zip(*blocks, strict=True))


_WINDOW_REASONS = (None, RejectReason.FUTURE, RejectReason.TOO_OLD)
_FUTURE, _TOO_OLD = 1, 2  # their codes
#: The kinds of `_result_table`'s rows.
_RATE, _COUNT, _TRACE = 0, 1, 2
#: Columns of `_datapoint_table`, after the message number and timestamp.
_COLUMNS = ("is_loss", "loss", *HistogramStats._fields[1:7])


def window_reject_reason(ts: int, now: float) -> RejectReason | None:
    """Why a datapoint at `ts` cannot be stored at time `now`, or None when it fits the window.

    The window is the 32 complete minutes before the current one (plus the current minute, which
    shares its ring slot with the oldest and replaces it once its data arrives).
    """
    return _WINDOW_REASONS[int(window_reject_codes(np.array([ts], np.int64), now)[0])]


def window_reject_codes(timestamps: np.ndarray, now: float) -> np.ndarray:
    """`window_reject_reason` of each timestamp as an index into `_WINDOW_REASONS`."""
    too_old = timestamps // 60 < int(now // 60) - WINDOW_MINUTES
    return np.where(timestamps > now + MAX_FUTURE_SECONDS, 1, np.where(too_old, 2, 0))


def _refusal_detail(
    reason: RejectReason, link: LinkEndpoints | NamedEndpoints, producer: str | None
) -> str:
    ends = f"{link.source_host} -> {link.destination_host}"
    if reason is RejectReason.LINK_LIMIT:
        return f"new link {ends}: the state holds --max-links links"
    who = f"client {producer}" if producer else "its producer"
    return f"new link {ends}: {who} added --new-links-per-minute links this minute"


def _count_stored(
    outcomes: list[ApplyOutcome], message_of: np.ndarray, stored: np.ndarray, archived: np.ndarray
) -> None:
    """Set each message's datapoints stored and archived; the others are `too_old`."""
    applied = np.bincount(message_of[stored], minlength=len(outcomes)).tolist()
    folded = np.bincount(message_of[archived], minlength=len(outcomes)).tolist()
    for number, outcome in enumerate(outcomes):
        outcome.applied, outcome.archived = applied[number], folded[number]
    for number in message_of[~stored].tolist():
        outcomes[number].rejected.append(RejectReason.TOO_OLD)


def _datapoint_table(messages: Sequence[ParsedMessage]) -> np.ndarray:
    """One row per datapoint in application order (each message's delays, then its losses):
    message number, timestamp, then `_COLUMNS`."""
    nan = math.nan
    rows: list[tuple[float, ...]] = []
    for number, message in enumerate(messages):
        for ts, stats in message.delays:
            rows.append((number, ts, 0.0, nan, *stats[1:7]))
        for ts, loss in message.losses:
            rows.append((number, ts, 1.0, loss, nan, nan, nan, nan, nan, 0.0))
    return np.array(rows, dtype=np.float64).reshape(len(rows), 2 + len(_COLUMNS))


def _result_table(messages: Sequence[ParsedMessage]) -> np.ndarray:
    """One row per throughput, retransmit count and trace: message number, timestamp, kind
    (`_RATE`, `_COUNT`, `_TRACE`), position in its message's list, value (NaN for a trace)."""
    rows: list[tuple[float, ...]] = []
    for number, message in enumerate(messages):
        for position, (ts, bps) in enumerate(message.throughputs):
            rows.append((number, ts, _RATE, position, bps))
        for position, (ts, count) in enumerate(message.retransmits):
            rows.append((number, ts, _COUNT, position, count))
        for position, (ts, _) in enumerate(message.traces):
            rows.append((number, ts, _TRACE, position, math.nan))
    return np.array(rows, dtype=np.float64).reshape(len(rows), 5)


def _address(identity: str) -> str:
    """A link end's address when the index keys it by one, else "" (a host name)."""
    return identity if canonical_ip(identity) == identity else ""


def _point_columns(table: np.ndarray) -> list[np.ndarray]:
    """The `_COLUMNS` of `table` in the order of `Datapoints`' fields after rows and minutes."""
    columns = dict(zip(_COLUMNS, table[:, 2:].T, strict=True))
    columns["is_loss"] = columns["is_loss"] > 0
    columns["clock_suspect"] = columns["clock_suspect"] > 0
    return [columns[name] for name in Datapoints._fields[2:]]
