"""From a received frame to link state: route by topic, parse, apply, count and log rejects.

Parsing (`parse_frames`) needs no lock and may run on another thread than applying
(`apply_parsed`), so the frame batcher overlaps the parse of one batch with the apply of the last.
"""

from __future__ import annotations

import copy
import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from service.errors import RejectedInput, RejectReason
from service.ingest.ack_token import AckToken
from service.ingest.reject_log import RateLimitedRejectLog
from service.parse.limits import InputLimits
from service.parse.perfsonar import ParseInput, ParseResult, parse_messages
from service.parse.records import MeasurementKind, ParsedMessage
from service.state.link_state import ApplyOutcome, LinkState

Frame = tuple[str, bytes | str, AckToken | None]
Parser = Callable[[ParseInput], list[ParseResult]]


@dataclass(frozen=True)
class ParsedFrames:
    """A batch of frames with the parse result of each one that has a known topic."""

    frames: Sequence[Frame]
    kinds: list[MeasurementKind | None]
    results: list[ParseResult]


@dataclass
class IngestCounters:
    """Plain totals since start; the metrics collector reads them at scrape time."""

    messages_by_topic: Counter[str] = field(default_factory=Counter)
    rejected_by_reason: Counter[str] = field(default_factory=Counter)
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
    ) -> None:
        """`parser` replaces in-thread `parse_messages` (e.g. by ParserProcesses.parse)."""
        self.state = state
        self.counters = IngestCounters()
        self._counters_lock = threading.Lock()
        self._topics = topics
        self._parse = parser or (lambda frames: parse_messages(frames, limits))
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
        return ParsedFrames(frames, kinds, self._parse(known))

    def apply_parsed(self, parsed: ParsedFrames) -> int:
        """Apply a parsed batch at once; returns datapoints stored. Never raises."""
        now = self._clock()
        results = iter(parsed.results)
        applied = 0
        messages = [r for r in parsed.results if not isinstance(r, RejectedInput)]
        outcomes = iter(self.state.apply_batch(messages, now))
        with self._counters_lock:
            self._count_messages(parsed, now)
            for (destination, _, _), kind in zip(parsed.frames, parsed.kinds, strict=True):
                if kind is None:
                    self._reject(RejectReason.UNKNOWN_TOPIC, destination[:80], destination)
                    continue
                result = next(results)
                if isinstance(result, RejectedInput):
                    self._reject(result.reason, result.detail, destination)
                else:
                    applied += self._account(result, next(outcomes), destination)
        return applied

    def _account(self, result: ParsedMessage, outcome: ApplyOutcome, destination: str) -> int:
        """Count what applying one message did and log its refusals."""
        self.counters.datapoints_applied += outcome.applied
        for _, stats in result.delays:
            self.counters.clock_error_packets += stats.dropped_packets
        if outcome.rejected:
            details = dict(result.rejected)
            for reason in outcome.rejected:
                self._reject(reason, details.get(reason, ""), destination)
        return outcome.applied

    def _count_messages(self, parsed: ParsedFrames, now: float) -> None:
        self.counters.messages_by_topic.update(
            "other" if kind is None else destination
            for (destination, _, _), kind in zip(parsed.frames, parsed.kinds, strict=True)
        )
        if parsed.frames:
            self.counters.last_message_at = now

    def _reject(self, reason: RejectReason, detail: str, destination: str) -> None:
        self.counters.rejected_by_reason[reason.value] += 1
        self._reject_log.record(reason, detail, destination)
