"""Backfill at start: every archived link's 32-minute window and all-time statistics, read from an
esmond-compatible archive, so a new deployment need not wait 32 minutes for a full matrix.

The archive's metadata lists the links (their series of every event type nettel reads); each
link's records of the last `history` seconds are read (throughput results and retransmits: the
throughput state's three weeks of bins, `ThroughputState.window_start`), with `concurrency`
requests in flight, each within `timeout`, turned
into bus bodies and parsed as the bus's are (`service.parse.archive`), and delivered in batches
of whole links as history (`service.ingest.entry.HistoryBatch`, applied with
`LinkState.apply_history`): minutes in the window are stored as live ones (later live data of
the same minute replaces them, counted once), older ones are folded into the all-time moments.
It all ends within `bound` seconds of the start; links not read by then are counted as
`unfinished` and left to live data, and the reads still in flight are cut then (their sockets
shut down: no thread goes on reading an archive that never ends its answer). Bytes are bounded
too (per response, per backfill) and so are pages (`service.ingest.archive_client`); every cut
is counted by reason and logged.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from functools import partial
from itertools import islice
from typing import Any, Generic, TypeVar

from service.errors import RejectedInput, RejectReason
from service.ingest.archive_client import (
    MAX_BACKFILL_BYTES,
    MAX_PAGE_SIZE,
    MAX_RESPONSE_BYTES,
    ArchiveClient,
    ArchiveCut,
    ArchiveUnavailable,
    CutReason,
)
from service.ingest.entry import HistoryBatch, IngestEntry
from service.ingest.parser_processes import ParserProcesses
from service.ingest.pipeline import Parser
from service.ingest.reject_log import RateLimitedRejectLog
from service.ingest.source import SourceDescription
from service.lifecycle import BackgroundLoop
from service.parse.archive import ArchiveBody, ArchiveSeries, build_bodies, parse_metadata
from service.parse.limits import InputLimits
from service.parse.perfsonar import parse_messages
from service.parse.records import MeasurementKind, ParsedMessage
from service.state.link_state import ApplyOutcome
from service.state.throughput_state import ThroughputState

#: Links parsed and applied together (their statistics in one batch, one state call).
APPLY_LINKS = 256
TICK_SECONDS = 0.1
#: Failed links logged one by one; the rest only counted (and summed up at the end).
LOGGED_FAILURES = 10
#: The event types whose history is the throughput state's bins rather than `history`.
THROUGHPUT_KINDS = frozenset({MeasurementKind.THROUGHPUT, MeasurementKind.RETRANSMITS})
_T = TypeVar("_T")


class LinkOutcome(StrEnum):
    """What the backfill did for a link; the labels of `nettel_backfill_links_total`."""

    FILLED = "filled"  # at least one datapoint applied
    EMPTY = "empty"  # read, but nothing to apply: no records, or all refused or covered
    FAILED = "failed"  # a request for it failed or timed out
    UNFINISHED = "unfinished"  # not read when the bound expired (or the service stopped)


class DatapointOutcome(StrEnum):
    """Where a usable archive datapoint went; the labels of `nettel_backfill_datapoints_total`."""

    WINDOW = "window"  # stored live: in the 32-minute window, or as a throughput result or path
    ALL_TIME = "all_time"  # before the window: folded into the all-time statistics
    COVERED = "covered"  # before the window, but the link's state may hold that minute already


@dataclass(frozen=True)
class BackfillSettings:
    url: str
    bound: float = 60.0
    timeout: float = 10.0
    page_size: int = MAX_PAGE_SIZE
    concurrency: int = 8
    history: float = 1920.0
    #: parse in this many children of the backfill's own, unless given a parser
    parse_processes: int = 0
    max_response_bytes: int = MAX_RESPONSE_BYTES
    max_bytes: int = MAX_BACKFILL_BYTES


@dataclass
class BackfillReport:
    """What the backfill has done so far: wall-clock times, and counts by outcome or reason
    (keys are the enums' values)."""

    started_at: float | None = None
    finished_at: float | None = None
    links: Counter[str] = field(default_factory=Counter)
    datapoints: Counter[str] = field(default_factory=Counter)
    rejected: Counter[str] = field(default_factory=Counter)
    failed_requests: int = 0
    #: Reads cut, by CutReason.
    cuts: Counter[str] = field(default_factory=Counter)
    #: Response bytes read from the archive.
    bytes_read: int = 0

    @property
    def applied(self) -> int:
        """Datapoints stored in the window or folded into the all-time statistics."""
        return self.datapoints[DatapointOutcome.WINDOW] + self.datapoints[DatapointOutcome.ALL_TIME]

    @property
    def complete(self) -> bool:
        """Every archive request answered, every listed link read, nothing cut."""
        return (
            not self.failed_requests
            and not self.links[LinkOutcome.UNFINISHED.value]
            and not self.cuts.total()
        )

    def seconds(self, now: float | None = None) -> float | None:
        """How long it ran (until `now`, or now, while it runs); None before it started."""
        if self.started_at is None:
            return None
        return (self.finished_at or now or time.time()) - self.started_at

    def summary(self) -> dict[str, Any]:
        """The report as a JSON-ready document."""
        return {
            "seconds": round(self.seconds() or 0.0, 3),
            "links": dict(self.links),
            "datapoints": dict(self.datapoints),
            "rejected": dict(self.rejected),
            "failed_requests": self.failed_requests,
            "cut": dict(self.cuts),
            "bytes": self.bytes_read,
        }

    def copy(self) -> BackfillReport:
        return replace(
            self,
            links=self.links.copy(),
            datapoints=self.datapoints.copy(),
            rejected=self.rejected.copy(),
            cuts=self.cuts.copy(),
        )


@dataclass
class _LinkRead:
    """One link's archive records as bus bodies, and the records left out (with where from)."""

    bodies: list[ArchiveBody]
    refused: list[tuple[RejectedInput, str]]


class ArchiveBackfill:
    """Runs once, on its own thread (`start`) or the caller's (`run`); thread-safe to read."""

    name = "archive-backfill"

    def __init__(
        self,
        entry: IngestEntry,
        settings: BackfillSettings,
        limits: InputLimits = InputLimits(),
        clock: Callable[[], float] = time.time,
        log: logging.Logger | None = None,
        parser: Parser | None = None,
    ) -> None:
        """`parser` replaces `parse_messages` (e.g. by ParserProcesses.parse, as for the bus);
        without one, `settings.parse_processes` children parse while the backfill runs."""
        self.settings = settings
        self._entry = entry
        self._limits = limits
        self._parser = parser
        self._parse: Parser = parser or partial(parse_messages, limits=limits)
        self._clock = clock
        self._log = log or logging.getLogger("nettel.backfill")
        self._reject_log = RateLimitedRejectLog(self._log)
        self._report = BackfillReport()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._loop = BackgroundLoop.once(self.name, self.run)

    def start(self) -> None:
        self._loop.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop reading (what was read is applied) and wait for the backfill thread."""
        self._stop.set()
        self._loop.join(timeout)

    def describe(self) -> SourceDescription:
        report = self.report()
        return SourceDescription(
            kind="archive-backfill",
            reads=(self.settings.url,),
            running=report.started_at is not None and report.finished_at is None,
            detail={"bound_seconds": self.settings.bound} | report.summary(),
        )

    def report(self) -> BackfillReport:
        with self._lock:
            return self._report.copy()

    @property
    def running(self) -> bool:
        with self._lock:
            return self._report.finished_at is None

    def unready_reason(self, matrix_generated_at: float | None) -> str | None:
        """Why readiness waits for the backfill: it runs (within its bound), or what it applied
        is in no cost matrix yet. None when readiness need not wait."""
        report, now = self.report(), self._clock()
        settled_at = report.finished_at or (report.started_at or now) + self.settings.bound
        if report.finished_at is None and now < settled_at:
            return "backfill from the archive in progress"
        if report.applied and (matrix_generated_at or 0.0) < settled_at:
            return "no cost matrix since the backfill"
        return None

    def run(self) -> BackfillReport:
        """Backfill within the bound; returns the report."""
        deadline = time.monotonic() + self.settings.bound
        with self._lock:
            self._report.started_at = self._clock()
        self._log.info("backfill started", extra={"archive": self.settings.url})
        settings = self.settings
        archive = ArchiveClient(
            settings.url,
            settings.timeout,
            settings.page_size,
            settings.max_response_bytes,
            settings.max_bytes,
        )
        listings = _Reads[tuple[MeasurementKind, list[Any]]](len(MeasurementKind))
        reads = _Reads[_LinkRead](self.settings.concurrency)
        children = self._start_parsers()
        try:
            links = self._list_links(archive, listings, deadline)
            self._read_links(archive, links, reads, deadline)
        finally:
            self._cut_in_flight(archive)
            if children is not None:
                children.stop()
            closer = partial(_close_when_idle, archive, listings, reads)
            BackgroundLoop.once("backfill-close", closer).start()
            self._finish()
        return self.report()

    def _cut_in_flight(self, archive: ArchiveClient) -> None:
        """Cut the reads still in flight (the bound passed, the bytes are spent, or a stop)."""
        in_flight = archive.cancel()
        if archive.exhausted:
            self._cut(CutReason.BACKFILL_BYTES, f"read {archive.max_total_bytes:,} bytes")
        if in_flight:
            self._cut(CutReason.BOUND, f"{in_flight} reads in flight", in_flight)
        with self._lock:
            self._report.bytes_read = archive.bytes_read

    def _cut(self, reason: CutReason, detail: str, count: int = 1) -> None:
        """Count a cut; the first of each reason is logged (each failed request is, up to ten)."""
        with self._lock:
            first = not self._report.cuts[reason.value]
            self._report.cuts[reason.value] += count
        if first:
            self._log.warning("archive read cut", extra={"reason": reason.value, "detail": detail})

    def _start_parsers(self) -> ParserProcesses | None:
        """The backfill's own parser children (spawned while the metadata is listed), if any."""
        count = self.settings.parse_processes
        if self._parser is not None or count == 0:
            return None
        children = ParserProcesses(count, self._limits, log=self._log)
        self._parse = children.parse
        return children

    def _list_links(
        self,
        archive: ArchiveClient,
        listings: _Reads[tuple[MeasurementKind, list[Any]]],
        deadline: float,
    ) -> list[list[ArchiveSeries]]:
        """Each link's series, from the metadata of every event type (listed side by side)."""
        now = self._clock()
        for kind in MeasurementKind:
            listings.put(partial(_listing, archive, kind, self._history_seconds(kind, now)))
        links: dict[tuple[str, str], list[ArchiveSeries]] = {}
        answered = 0
        for outcome in self._outcomes(archive, listings, len(MeasurementKind), deadline):
            answered += 1
            if isinstance(outcome, ArchiveUnavailable):
                self._request_failed(outcome, "metadata")
                continue
            kind, objects = outcome
            series, refused = parse_metadata(objects, kind, self._limits)
            self._count_refused([(rejection, "metadata") for rejection in refused])
            for one in series:
                links.setdefault(one.link_key, []).append(one)
        for _ in range(len(MeasurementKind) - answered):
            self._request_failed(ArchiveUnavailable("no answer within the bound"), "metadata")
        return list(links.values())

    def _read_links(
        self,
        archive: ArchiveClient,
        links: list[list[ArchiveSeries]],
        reads: _Reads[_LinkRead],
        deadline: float,
    ) -> None:
        """Read every link's series; parse and apply them as they come, APPLY_LINKS at once."""
        for series in links:
            reads.put(partial(self._read_link, archive, series))
        batch: list[_LinkRead] = []
        answered = 0
        for outcome in self._outcomes(archive, reads, len(links), deadline):
            if isinstance(outcome, ArchiveCut) and outcome.reason is CutReason.BACKFILL_BYTES:
                continue  # left unread (unfinished), as at the bound: counted once, at the end
            answered += 1
            if isinstance(outcome, ArchiveUnavailable):
                self._request_failed(outcome, "link")
                with self._lock:
                    self._report.links[LinkOutcome.FAILED.value] += 1
                continue
            batch.append(outcome)
            if len(batch) == APPLY_LINKS:
                self._apply(batch)
                batch = []
        self._apply(batch)
        with self._lock:
            self._report.links[LinkOutcome.UNFINISHED.value] += len(links) - answered

    def _outcomes(
        self, archive: ArchiveClient, reads: _Reads[_T], count: int, deadline: float
    ) -> Iterator[_T | ArchiveUnavailable]:
        """The outcomes of `count` reads, as they end, until the deadline, a stop or the
        backfill's bytes spent."""
        while count and not self._stop.is_set() and time.monotonic() < deadline:
            if archive.exhausted:
                return
            try:
                outcome = reads.done.get(timeout=TICK_SECONDS)
            except queue.Empty:
                continue
            count -= 1
            with self._lock:
                self._report.bytes_read = archive.bytes_read
            yield outcome

    def _history_seconds(self, kind: MeasurementKind, now: float) -> int:
        """How far back the records of `kind` are read."""
        if kind in THROUGHPUT_KINDS:
            return int(now) - ThroughputState.window_start(now)
        return int(self.settings.history)

    def _read_link(self, archive: ArchiveClient, series: list[ArchiveSeries]) -> _LinkRead:
        read = _LinkRead([], [])
        for one in series:
            now = self._clock()
            start = int(now) - self._history_seconds(one.kind, now)
            records = archive.records(one.base_uri, start, int(now))
            bodies, refused = build_bodies(one, records, self._limits)
            read.bodies += bodies
            read.refused += [(rejection, one.base_uri) for rejection in refused]
        return read

    def _apply(self, batch: Sequence[_LinkRead]) -> None:
        """Parse the bodies of whole links at once and apply them in one state call."""
        if not batch:
            return
        bodies = [body for link in batch for body in link.bodies]
        inputs = [(body.kind, body.body) for body in bodies]
        applied_history = self._entry.deliver(HistoryBatch(inputs, self._clock(), self._parse))
        outcomes = iter(applied_history.outcomes)
        parsed = iter(applied_history.results)
        for link in batch:
            self._count_refused(link.refused)
            applied = 0
            for body, result in zip(link.bodies, islice(parsed, len(link.bodies)), strict=True):
                if isinstance(result, RejectedInput):
                    self._count_refused([(result, "archive")], body.datapoints)
                else:
                    applied += self._count_applied(result, next(outcomes))
            outcome = LinkOutcome.FILLED if applied else LinkOutcome.EMPTY
            with self._lock:
                self._report.links[outcome.value] += 1

    def _count_applied(self, message: ParsedMessage, outcome: ApplyOutcome) -> int:
        """Count where a message's datapoints went (too_old: covered); returns those applied."""
        covered = outcome.rejected.count(RejectReason.TOO_OLD)
        details = dict(message.rejected)
        refused = [
            (RejectedInput(reason, details.get(reason, "")), "archive")
            for reason in outcome.rejected
            if reason is not RejectReason.TOO_OLD
        ]
        self._count_refused(refused)
        with self._lock:
            self._report.datapoints.update(
                {
                    DatapointOutcome.WINDOW.value: outcome.applied - outcome.archived,
                    DatapointOutcome.ALL_TIME.value: outcome.archived,
                    DatapointOutcome.COVERED.value: covered,
                }
            )
        return outcome.applied

    def _count_refused(self, refused: list[tuple[RejectedInput, str]], each: int = 1) -> None:
        """Count refused records (`each` records per refusal) and log them, rate-limited."""
        with self._lock:
            for rejection, _ in refused:
                self._report.rejected[rejection.reason.value] += each
        for rejection, where in refused:
            self._reject_log.record(rejection.reason, rejection.detail, where)

    def _request_failed(self, error: ArchiveUnavailable, what: str) -> None:
        if isinstance(error, ArchiveCut) and error.reason is not CutReason.BACKFILL_BYTES:
            self._cut(error.reason, str(error))  # the spent bytes are counted once, at the end
        with self._lock:
            self._report.failed_requests += 1
            failures = self._report.failed_requests
        if failures <= LOGGED_FAILURES:
            self._log.warning("archive request failed", extra={"read": what, "error": str(error)})

    def _finish(self) -> None:
        with self._lock:
            self._report.finished_at = self._clock()
            summary = self._report.summary()
        self._log.info("backfill finished", extra=summary)


def _listing(
    archive: ArchiveClient, kind: MeasurementKind, seconds: int
) -> tuple[MeasurementKind, list[Any]]:
    return kind, archive.metadata(kind, seconds)


class _Reads(Generic[_T]):
    """Archive reads on daemon threads: each call's result, or the ArchiveUnavailable it raised,
    is queued in `done` as it ends. Daemons, so that a read stuck until its timeout holds no
    process open at exit (a ThreadPoolExecutor's threads would)."""

    def __init__(self, count: int) -> None:
        self.done: queue.SimpleQueue[_T | ArchiveUnavailable] = queue.SimpleQueue()
        self._calls: queue.SimpleQueue[Callable[[], _T] | None] = queue.SimpleQueue()
        self._ended = threading.Event()
        self.workers = [BackgroundLoop.once("backfill-read", self._work) for _ in range(count)]
        for worker in self.workers:
            worker.start()

    def put(self, call: Callable[[], _T]) -> None:
        self._calls.put(call)

    def end(self) -> None:
        """Drop the calls not started; each thread ends once its running call does."""
        self._ended.set()
        for _ in self.workers:
            self._calls.put(None)

    def _work(self) -> None:
        while (call := self._calls.get()) is not None:
            if self._ended.is_set():
                continue
            try:
                self.done.put(call())
            except ArchiveUnavailable as error:
                self.done.put(error)
            except Exception as error:  # a bug: the read counts as failed, the thread goes on
                logging.getLogger("nettel.backfill").exception("archive read failed")
                self.done.put(ArchiveUnavailable(f"unexpected {type(error).__name__}"))


def _close_when_idle(archive: ArchiveClient, *reads: _Reads[Any]) -> None:
    """End the reads, let those in flight end (cut by `archive.cancel()`), then close it."""
    for one in reads:
        one.end()
    for one in reads:
        for worker in one.workers:
            worker.join(timeout=None)
    archive.close()
