"""What --backfill-from did (zeros, and NaN seconds, without it)."""

from __future__ import annotations

import math
import time
from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from service.ingest.archive_backfill import (
    ArchiveBackfill,
    BackfillReport,
    DatapointOutcome,
    LinkOutcome,
)
from service.ingest.archive_client import CutReason
from service.publish.metrics.families import AlwaysCollected, labelled_counter


class BackfillCollector(AlwaysCollected):
    def __init__(self, backfill: ArchiveBackfill | None) -> None:
        self._backfill = backfill

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        report = self._backfill.report() if self._backfill else BackfillReport()
        running = report.started_at is not None and report.finished_at is None
        yield GaugeMetricFamily(
            "nettel_backfill_in_progress", "1 while the backfill runs.", value=float(running)
        )
        seconds = report.seconds(time.time())
        yield GaugeMetricFamily(
            "nettel_backfill_duration_seconds",
            "How long the backfill ran (so far, while it runs; NaN: none).",
            value=math.nan if seconds is None else seconds,
        )
        links = {outcome.value: report.links[outcome.value] for outcome in LinkOutcome}
        yield labelled_counter(
            "nettel_backfill_links",
            "Archived links the backfill read, by outcome.",
            "outcome",
            links,
        )
        datapoints = {
            outcome.value: report.datapoints[outcome.value] for outcome in DatapointOutcome
        }
        yield labelled_counter(
            "nettel_backfill_datapoints",
            "Usable archive datapoints, by where they went.",
            "outcome",
            datapoints,
        )
        yield CounterMetricFamily(
            "nettel_backfill_failed_requests",
            "Archive requests that failed or timed out.",
            value=report.failed_requests,
        )
        yield labelled_counter(
            "nettel_backfill_cut",
            "Archive reads cut by a bound of the backfill, by reason.",
            "reason",
            {reason.value: report.cuts[reason.value] for reason in CutReason},
        )
        yield CounterMetricFamily(
            "nettel_backfill_read_bytes",
            "Response bytes the backfill read from the archive.",
            value=report.bytes_read,
        )
