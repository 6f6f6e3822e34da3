"""From a received frame to link state: route by topic, parse, apply, count and log rejects.

Parsing (`parse_frames`) needs no lock and may run on another thread than applying
(`apply_parsed`), so the frame batcher overlaps the parse of one batch with the apply of the last.
Frames of PSCHEDULER_DESTINATION carry pScheduler run records (POST/PUT /ingest/pscheduler):
they take the same path, journal included, with the run parser beside the bus parser; a run
posted again (an archiver's retry of the same run) is applied once. Such a frame carries the
HTTP client that posted it (`PostedBy`) where a bus frame carries its ack token: the run's new
links are charged to that client (`service.ingest.link_admission`).
"""

from __future__ import annotations

import copy
import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from service.broker.ack_token import AckToken
from service.errors import RejectedInput, RejectReason
from service.ingest.recent_runs import RecentRuns
from service.ingest.reject_log import RateLimitedRejectLog
from service.parse.limits import InputLimits
from service.parse.perfsonar import ParseInput, ParseResult, parse_messages
from service.parse.pscheduler import ParsedRun, RunOutcome, RunResult, parse_runs
from service.parse.records import MeasurementKind, NamedEndpoints, ParsedMessage
from service.state.link_state import ApplyOutcome, LinkState


@dataclass(frozen=True, slots=True)
class PostedBy:
    """The HTTP client (address) that posted a frame's run; such a frame has nothing to ack."""

    client: str


#: (destination, body, what came with it: a bus frame's ack token, an HTTP run's client or None)
Frame = tuple[str, bytes | str, AckToken | PostedBy | None]
Parser = Callable[[ParseInput], list[ParseResult]]
#: Where a frame holding one pScheduler run record comes from (and its label in the metrics).
PSCHEDULER_DESTINATION = "/ingest/pscheduler"
#: What a frame amounts to once screened: None for an unknown topic, the refusal, a bus message,
#: a run's messages, or why a run has nothing to apply.
_Screened = RejectedInput | ParsedMessage | tuple[ParsedMessage, ...] | RunOutcome | None


@dataclass(frozen=True)
class ParsedFrames:
    """A batch of frames with the parse result of each one that has a known topic."""

    frames: Sequence[Frame]
    kinds: list[MeasurementKind | None]
    results: list[ParseResult]
    #: The parse result of each frame of PSCHEDULER_DESTINATION, in order.
    runs: list[RunResult] = field(default_factory=list)


@dataclass(frozen=True)
class HistoryApplied:
    """What became of a batch of archived messages: each one's parse result, and what applying
    them did (one outcome per `ParsedMessage` among the results, in order)."""

    results: list[ParseResult]
    outcomes: list[ApplyOutcome]


@dataclass
class IngestCounters:
    """Plain totals since start; the metrics collector reads them at scrape time."""

    messages_by_topic: Counter[str] = field(default_factory=Counter)
    rejected_by_reason: Counter[str] = field(default_factory=Counter)
    runs_by_outcome: Counter[str] = field(default_factory=Counter)
    datapoints_applied: int = 0
    clock_error_packets: int = 0
    last_message_at: float | None = None


class IngestPipeline:
    """Thread-safe entry point for frames (link state guards itself; the counters have a lock)."""

    def __init__(
        self,
        state: LinkState,
        topics: dict[str, MeasurementKind],
        limits: InputLimits = InputLimits(),
        clock: Callable[[], float] = time.time,
        log: logging.Logger | None = None,
        parser: Parser | None = None,
        resolve: Callable[[NamedEndpoints], NamedEndpoints] | None = None,
    ) -> None:
        """`parser` replaces in-thread `parse_messages` (e.g. by ParserProcesses.parse);
        `resolve` gives runs' named ends addresses before they are applied (e.g. DNS)."""
        self.state = state
        self.counters = IngestCounters()
        self._counters_lock = threading.Lock()
        self._topics = topics
        self._limits = limits
        self._parse = parser or (lambda frames: parse_messages(frames, limits))
        self._resolve = resolve
        self._recent_runs = RecentRuns()
        self._clock = clock
        self._reject_log = RateLimitedRejectLog(log or logging.getLogger("nettel.ingest"))

    def counters_snapshot(self) -> IngestCounters:
        """A copy of the counters as they are now (for readers on other threads)."""
        with self._counters_lock:
            return copy.deepcopy(self.counters)

    def handle_frame(self, destination: str, body: bytes | str, ack: AckToken | None = None) -> int:
        """Apply one frame; returns datapoints stored. Never raises on bad input."""
        return self.handle_frames([(destination, body, ack)])

    def handle_frames(self, frames: Sequence[Frame]) -> int:
        """Parse and apply a batch of frames; returns datapoints stored. Never raises."""
        return self.apply_parsed(self.parse_frames(frames))

    def parse_frames(self, frames: Sequence[Frame]) -> ParsedFrames:
        """Route by topic and parse; touches no state, so it needs no lock."""
        kinds = [self._topics.get(destination) for destination, _, _ in frames]
        known = [(kind, frame[1]) for kind, frame in zip(kinds, frames, strict=True) if kind]
        runs = [(body, sender) for to, body, sender in frames if to == PSCHEDULER_DESTINATION]
        return ParsedFrames(frames, kinds, self._parse(known), self._parse_runs(runs))

    def apply_parsed(self, parsed: ParsedFrames) -> int:
        """Apply a parsed batch at once; returns datapoints stored. Never raises."""
        now = self._clock()
        with self._counters_lock:  # also guards the memory of recent runs
            screened = self._screen(parsed)
        messages = [m for _, item in screened for m in _messages(item)]
        outcomes = iter(self.state.apply_batch(messages, now))
        with self._counters_lock:
            self._count_messages(parsed, now)
            return sum(self._account_frame(item, outcomes, dest) for dest, item in screened)

    def apply_history(
        self, inputs: ParseInput, now: float, parse: Parser | None = None
    ) -> HistoryApplied:
        """Parse archived messages (with `parse`, else this pipeline's parser) and apply them as
        history at `now`; the caller counts what became of them."""
        results = (parse or self._parse)(inputs)
        messages = [result for result in results if isinstance(result, ParsedMessage)]
        return HistoryApplied(results, self.state.apply_history(messages, now))

    def refuse(
        self, reason: RejectReason, detail: str, destination: str, client: str | None = None
    ) -> None:
        """Count and log input refused before it reached the pipeline (e.g. an HTTP request
        from `client`)."""
        with self._counters_lock:
            self._reject(reason, detail, destination, client)

    def _parse_runs(
        self, posted: list[tuple[bytes | str, AckToken | PostedBy | None]]
    ) -> list[RunResult]:
        runs = parse_runs([body for body, _ in posted], self._limits)
        for run, (_, sender) in zip(runs, posted, strict=True):
            if isinstance(sender, PostedBy):
                _charge_to(run, sender.client)
            if self._resolve is not None:
                _resolve_names(run, self._resolve)
        return runs

    def _screen(self, parsed: ParsedFrames) -> list[tuple[str, _Screened]]:
        """Each frame's destination and what it amounts to, a re-posted run as DUPLICATE."""
        results, runs = iter(parsed.results), iter(parsed.runs)
        screened: list[tuple[str, _Screened]] = []
        for (destination, _, _), kind in zip(parsed.frames, parsed.kinds, strict=True):
            item: _Screened = None
            if kind is not None:
                item = next(results)
            elif destination == PSCHEDULER_DESTINATION:
                item = self._screen_run(next(runs))
            screened.append((destination, item))
        return screened

    def _screen_run(self, run: RunResult) -> _Screened:
        if isinstance(run, RejectedInput):
            return run
        if run.key is not None and not self._recent_runs.first_time(run.key):
            return RunOutcome.DUPLICATE
        return run.measured

    def _account_frame(
        self, item: _Screened, outcomes: Iterator[ApplyOutcome], destination: str
    ) -> int:
        """Count what became of one frame; returns its datapoints stored."""
        run = destination == PSCHEDULER_DESTINATION
        if item is None:
            self._reject(RejectReason.UNKNOWN_TOPIC, destination[:80], destination)
            return 0
        if isinstance(item, RunOutcome):
            self.counters.runs_by_outcome[item.value] += 1
            return 0
        if isinstance(item, RejectedInput):
            self._reject(item.reason, item.detail, destination)
            applied = 0
        else:
            applied = sum(self._account(m, next(outcomes), destination) for m in _messages(item))
        if run:
            outcome = RunOutcome.APPLIED if applied else RunOutcome.REJECTED
            self.counters.runs_by_outcome[outcome.value] += 1
        return applied

    def _account(self, result: ParsedMessage, outcome: ApplyOutcome, destination: str) -> int:
        """Count what applying one message did and log its refusals."""
        self.counters.datapoints_applied += outcome.applied
        for _, stats in result.delays:
            self.counters.clock_error_packets += stats.dropped_packets
        if outcome.rejected:
            details = dict(result.rejected) | outcome.details
            for reason in outcome.rejected:
                self._reject(reason, details.get(reason, ""), destination, result.producer)
        for conflict in outcome.conflicts:
            self._reject(RejectReason.IDENTITY_CONFLICT, conflict, destination)
        return outcome.applied

    def _count_messages(self, parsed: ParsedFrames, now: float) -> None:
        self.counters.messages_by_topic.update(
            "other" if kind is None and destination != PSCHEDULER_DESTINATION else destination
            for (destination, _, _), kind in zip(parsed.frames, parsed.kinds, strict=True)
        )
        if parsed.frames:
            self.counters.last_message_at = now

    def _reject(
        self, reason: RejectReason, detail: str, destination: str, client: str | None = None
    ) -> None:
        self.counters.rejected_by_reason[reason.value] += 1
        self._reject_log.record(reason, detail, destination, client)


def _messages(item: _Screened) -> list[ParsedMessage]:
    """The messages a screened frame has to apply."""
    if isinstance(item, ParsedMessage):
        return [item]
    return list(item) if isinstance(item, tuple) else []


def _charge_to(run: RunResult, client: str) -> None:
    """Make the HTTP client that posted `run` the producer of its messages (new-link budget)."""
    if isinstance(run, ParsedRun) and isinstance(run.measured, tuple):
        for message in run.measured:
            message.producer = client


def _resolve_names(run: RunResult, resolve: Callable[[NamedEndpoints], NamedEndpoints]) -> None:
    """Give a run's named ends the addresses `resolve` finds (its messages share the link)."""
    if isinstance(run, ParsedRun) and isinstance(run.measured, tuple):
        link = run.measured[0].link
        if isinstance(link, NamedEndpoints):
            resolved = resolve(link)
            for message in run.measured:
                message.link = resolved
