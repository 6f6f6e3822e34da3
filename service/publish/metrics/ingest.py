"""Ingest: messages, runs and datapoints taken in or rejected, frames queued, time since one."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from service.errors import RejectReason
from service.ingest.archive_backfill import ArchiveBackfill
from service.ingest.frame_batcher import FrameBatcher
from service.ingest.pipeline import IngestPipeline
from service.parse.pscheduler import RunOutcome
from service.publish.metrics.families import AlwaysCollected, labelled_counter


class IngestCollector(AlwaysCollected):
    """The pipeline's counts (with the backfill's rejections) and the frame batcher's queue."""

    def __init__(
        self,
        pipeline: IngestPipeline,
        batcher: FrameBatcher,
        backfill: ArchiveBackfill | None,
        started_at: Callable[[], float],
    ) -> None:
        """`started_at`: when the service started (the last message's time before any came)."""
        self._pipeline = pipeline
        self._batcher = batcher
        self._backfill = backfill
        self._started_at = started_at

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        counters = self._pipeline.counters_snapshot()
        yield labelled_counter(
            "nettel_messages_received",
            "Messages received, by topic.",
            "topic",
            counters.messages_by_topic,
        )
        rejected = counters.rejected_by_reason
        if self._backfill is not None:
            rejected = rejected + self._backfill.report().rejected
        every_reason = {reason.value: rejected.get(reason.value, 0) for reason in RejectReason}
        yield labelled_counter(
            "nettel_rejected",
            "Messages, datapoints or archive records rejected, by reason.",
            "reason",
            every_reason,
        )
        yield CounterMetricFamily(
            "nettel_datapoints_applied",
            "Datapoints stored in link state.",
            value=counters.datapoints_applied,
        )
        yield CounterMetricFamily(
            "nettel_clock_error_packets",
            "Packets dropped for implausible one-way delay (<= -1 s or >= 50 s).",
            value=counters.clock_error_packets,
        )
        runs = {outcome.value: counters.runs_by_outcome[outcome.value] for outcome in RunOutcome}
        yield labelled_counter(
            "nettel_pscheduler_runs", "pScheduler runs taken in, by outcome.", "outcome", runs
        )
        yield GaugeMetricFamily(
            "nettel_ingest_queued_frames",
            "Received frames waiting to be parsed and applied.",
            value=self._batcher.queued(),
        )
        last_message = counters.last_message_at
        since = time.time() - (last_message if last_message is not None else self._started_at())
        yield GaugeMetricFamily(
            "nettel_seconds_since_last_message",
            "Seconds since the last message (since start when none yet).",
            value=since,
        )
