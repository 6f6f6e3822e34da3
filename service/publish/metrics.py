"""Prometheus exposition: a custom collector reads the runtime at scrape time."""

from __future__ import annotations

import heapq
import math
import platform
import time
from collections.abc import Callable, Iterator, Mapping, Sequence

from prometheus_client import CollectorRegistry, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, InfoMetricFamily
from prometheus_client.registry import Collector

from service.build_info import package_version
from service.errors import RejectReason
from service.ingest.archive_backfill import BackfillReport, DatapointOutcome, LinkOutcome
from service.ingest.stomp_source import StompSource
from service.matrix.link_record import LinkRecord
from service.matrix.snapshot import CostMatrix
from service.model.slot import ModelSlot
from service.parse.histogram_scan import SCANNER_IMPLEMENTATION
from service.parse.pscheduler import RunOutcome
from service.persistence.warm_start import WarmOutcome
from service.publish.http_guard import HttpGuard, HttpRefusal
from service.publish.publishers import SnapshotMemo
from service.runtime import Runtime

SitePairCost = tuple[str, str, float]
SiteLinks = Callable[[CostMatrix], Sequence[LinkRecord]]
CYCLE_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class RuntimeCollector(Collector):
    """Ingest, broker, matrix and state-snapshot state, the costliest site pairs and the build,
    as they are at scrape time (site pairs aggregated once per matrix, not per scrape)."""

    def __init__(self, runtime: Runtime, site_links: SiteLinks | None = None) -> None:
        """`site_links`: the matrix aggregated by site pair, when another publisher has it."""
        self._runtime = runtime
        top = runtime.settings.metrics_top_site_pairs
        by_site = site_links or (lambda matrix: matrix.site_links)
        self._costliest = SnapshotMemo(lambda matrix: costliest_site_pairs(by_site(matrix), top))
        self._build_info = {
            "version": package_version(),
            "histogram_scanner": SCANNER_IMPLEMENTATION,
            "python": platform.python_version(),
        }

    def prepare(self, matrix: CostMatrix) -> None:
        """The costliest site pairs of a new snapshot, before it is served (a matrix cycle's
        snapshot preparer): a scrape only reads them."""
        self._costliest(matrix)

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily | InfoMetricFamily]:
        runtime = self._runtime
        counters = runtime.pipeline.counters_snapshot()
        received, rejected = counters.messages_by_topic, counters.rejected_by_reason
        applied, clock_packets = counters.datapoints_applied, counters.clock_error_packets
        last_message = counters.last_message_at
        links = len(runtime.state)
        yield _labelled_counter(
            "nettel_messages_received", "Messages received, by topic.", "topic", received
        )
        backfill = runtime.backfill.report() if runtime.backfill else BackfillReport()
        rejected = rejected + backfill.rejected
        every_reason = {reason.value: rejected.get(reason.value, 0) for reason in RejectReason}
        yield _labelled_counter(
            "nettel_rejected",
            "Messages, datapoints or archive records rejected, by reason.",
            "reason",
            every_reason,
        )
        yield CounterMetricFamily(
            "nettel_datapoints_applied", "Datapoints stored in link state.", value=applied
        )
        yield CounterMetricFamily(
            "nettel_clock_error_packets",
            "Packets dropped for implausible one-way delay (<= -1 s or >= 50 s).",
            value=clock_packets,
        )
        runs = {outcome.value: counters.runs_by_outcome[outcome.value] for outcome in RunOutcome}
        yield _labelled_counter(
            "nettel_pscheduler_runs", "pScheduler runs taken in, by outcome.", "outcome", runs
        )
        yield GaugeMetricFamily("nettel_links_tracked", "Directed links in state.", value=links)
        yield GaugeMetricFamily(
            "nettel_links_limit",
            "Links the state holds at most (--max-links); new ones beyond are refused.",
            value=runtime.settings.max_links,
        )
        yield from _state_lifecycle(runtime)
        yield GaugeMetricFamily(
            "nettel_links_unmapped",
            "Links with an end that no site of --topology matches (all links without one).",
            value=runtime.state.index.unmapped,
        )
        yield GaugeMetricFamily(
            "nettel_ingest_queued_frames",
            "Received frames waiting to be parsed and applied.",
            value=runtime.batcher.queued(),
        )
        if runtime.source is not None:
            yield from _broker(runtime.source)
        yield from _high_availability(runtime)
        yield from self._freshness(last_message)
        yield from self._persistence()
        yield from _backfill(backfill)
        yield from self._topology()
        build = InfoMetricFamily("nettel_build", "The running nettel: package, scanner, Python.")
        build.add_metric([], self._build_info)
        yield build
        if runtime.model is not None:
            info = runtime.model.current.info
            model = InfoMetricFamily("nettel_model", "The served utilisation model.")
            model.add_metric(
                [], {"name": info.name, "version": info.version, "sha256": info.sha256}
            )
            yield model

    def _topology(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        """Only with --topology: refreshes by outcome and the age of the mapping in use."""
        topology = self._runtime.topology
        if topology is None:
            return
        outcomes = {outcome: topology.outcomes[outcome] for outcome in ("ok", "failed")}
        yield _labelled_counter(
            "nettel_topology_refreshes",
            "Re-reads of --topology, by outcome (failed: the old mapping stays).",
            "outcome",
            outcomes,
        )
        yield GaugeMetricFamily(
            "nettel_topology_age_seconds",
            "Time since the topology in use was read.",
            value=time.time() - topology.loaded_at,
        )

    def _persistence(self) -> Iterator[GaugeMetricFamily]:
        """Only with --state-dir. Before this process's first snapshot the age counts from start,
        so NettelStateSnapshotStale fires when snapshots never succeed."""
        persistence = self._runtime.persistence
        if persistence is None:
            return
        written_at = persistence.last_written_at
        yield GaugeMetricFamily(
            "nettel_state_snapshot_age_seconds",
            "Age of the last state snapshot this process wrote (since start when none yet).",
            value=time.time() - (written_at or self._runtime.started_at),
        )
        duration = persistence.last_duration
        yield GaugeMetricFamily(
            "nettel_state_snapshot_duration_seconds",
            "Time to encode and write the last state snapshot (NaN: none yet).",
            value=math.nan if duration is None else duration,
        )

    def _freshness(self, last_message: float | None) -> Iterator[GaugeMetricFamily]:
        now = time.time()
        since = now - (last_message if last_message is not None else self._runtime.started_at)
        yield GaugeMetricFamily(
            "nettel_seconds_since_last_message",
            "Seconds since the last message (since start when none yet).",
            value=since,
        )
        matrix = self._runtime.cycle.latest
        if matrix is not None:
            yield GaugeMetricFamily(
                "nettel_snapshot_age_seconds",
                "Age of the served cost matrix.",
                value=now - matrix.generated_at,
            )
            yield GaugeMetricFamily(
                "nettel_congested_links",
                "Links the empirical filter marks congested.",
                value=matrix.congested_count,
            )
            yield self._link_cost(matrix)

    def _link_cost(self, matrix: CostMatrix) -> GaugeMetricFamily:
        family = GaugeMetricFamily(
            "nettel_link_cost",
            f"Cost (0..1) between two sites as /costmatrix?level=site gives it, for the "
            f"{self._runtime.settings.metrics_top_site_pairs} costliest site pairs.",
            labels=["source_site", "destination_site"],
        )
        for source, destination, cost in self._costliest(matrix):
            family.add_metric([source, destination], cost)
        return family


def _broker(source: StompSource) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
    """The bus subscription's families (absent with --brokers none: nothing to watch)."""
    yield GaugeMetricFamily(
        "nettel_ingest_unread_bytes",
        "Bytes the broker sent that wait unread in the socket (many: the receiver is behind).",
        value=source.unread_bytes(),
    )
    lag = source.arrival_lag_seconds()
    yield GaugeMetricFamily(
        "nettel_ingest_arrival_lag_seconds",
        "Arrival time of the last message minus the broker's timestamp on it (NaN: none yet).",
        value=math.nan if lag is None else lag,
    )
    yield GaugeMetricFamily(
        "nettel_broker_connected",
        "1 when subscribed to a broker.",
        value=1.0 if source.connected else 0.0,
    )
    yield CounterMetricFamily(
        "nettel_broker_disconnected_seconds",
        "Time without a broker connection since start.",
        value=source.disconnected_seconds(),
    )
    yield CounterMetricFamily(
        "nettel_broker_connections",
        "Broker connections made since start: each one after the first is a reconnect, and "
        "every reconnect makes the broker redeliver what was not yet acknowledged.",
        value=source.connections,
    )


def _high_availability(runtime: Runtime) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
    election = runtime.election
    publishes = runtime.publishes_telemetry()
    yield GaugeMetricFamily(
        "nettel_ha_leader",
        "1 while this instance is its --ha-group's telemetry publisher (without a group: 1 "
        "when it publishes telemetry at all).",
        value=1.0 if publishes else 0.0,
    )
    yield GaugeMetricFamily(
        "nettel_ha_lease_shared",
        "1 while the --ha-group's lease queue hands tokens to more than one replica (a RabbitMQ "
        "queue declared without x-single-active-consumer: every replica may publish).",
        value=1.0 if election is not None and election.lease_shared else 0.0,
    )
    yield CounterMetricFamily(
        "nettel_ha_transitions",
        "Role changes (standby, acquiring, leader) in this replica's --ha-group election.",
        value=0 if election is None else election.transitions,
    )


def _state_lifecycle(runtime: Runtime) -> Iterator[CounterMetricFamily]:
    """Links retired for --retire-after, and how --warm-from ended (zeros without it)."""
    yield CounterMetricFamily(
        "nettel_links_retired",
        "Links removed from state after --retire-after without a datapoint.",
        value=runtime.state.retired_total,
    )
    outcomes = {outcome.value: int(outcome is runtime.warm_outcome) for outcome in WarmOutcome}
    yield _labelled_counter(
        "nettel_warm_start",
        "Warm starts from --warm-from at start, by outcome (loaded, or why not).",
        "outcome",
        outcomes,
    )


def _backfill(report: BackfillReport) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
    """What --backfill-from did (zeros, and NaN seconds, without it)."""
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
    yield _labelled_counter(
        "nettel_backfill_links", "Archived links the backfill read, by outcome.", "outcome", links
    )
    datapoints = {outcome.value: report.datapoints[outcome.value] for outcome in DatapointOutcome}
    yield _labelled_counter(
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


def costliest_site_pairs(site_links: Sequence[LinkRecord], top: int) -> list[SitePairCost]:
    """The `top` costliest (source site, destination site, cost) of site-level links, costliest
    first; pairs without a cost are left out."""
    pairs = [
        (pair["source"], pair["destination"], pair["cost"])
        for pair in site_links
        if pair["cost"] is not None
    ]
    return heapq.nlargest(top, pairs, key=lambda pair: pair[2])


def _labelled_counter(
    name: str, doc: str, label: str, values: dict[str, int]
) -> CounterMetricFamily:
    family = CounterMetricFamily(name, doc, labels=[label])
    for key, value in sorted(values.items()):
        family.add_metric([key], value)
    return family


class HttpCollector(Collector):
    """The HTTP front door: connections open, and what its limits refused (`HttpGuard`)."""

    def __init__(self, guard: HttpGuard) -> None:
        self._guard = guard

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        guard = self._guard
        yield GaugeMetricFamily(
            "nettel_http_connections",
            f"HTTP connections open (at most {guard.limits.max_connections}).",
            value=len(guard.connections),
        )
        refused = {reason.value: guard.refused[reason.value] for reason in HttpRefusal}
        yield _labelled_counter(
            "nettel_http_refused",
            "HTTP connections closed or streams refused by the front door's limits, by reason.",
            "reason",
            refused,
        )


def build_registry(
    runtime: Runtime,
    site_links: SiteLinks | None = None,
    open_streams: Mapping[str, Callable[[], int]] | None = None,
    guard: HttpGuard | None = None,
) -> CollectorRegistry:
    """A registry with the runtime collector, histograms fed by the cycle and the model, per
    SSE endpoint (`open_streams`: its label -> how many streams it has open) a gauge, and the
    HTTP front door's counts (`guard`)."""
    registry = CollectorRegistry()
    collector = RuntimeCollector(runtime, site_links)
    registry.register(collector)
    runtime.cycle.snapshot_preparers.append(collector.prepare)
    registry.register(HttpCollector(guard or HttpGuard()))
    streams = Gauge(
        "nettel_sse_streams",
        "Server-sent event streams open, per endpoint.",
        ["endpoint"],
        registry=registry,
    )
    for endpoint, count in (open_streams or {}).items():
        streams.labels(endpoint).set_function(count)
    cycle_seconds = Histogram(
        "nettel_cycle_duration_seconds",
        "Time to recompute the cost matrix.",
        buckets=CYCLE_BUCKETS,
        registry=registry,
    )
    runtime.cycle.cycle_observers.append(cycle_seconds.observe)
    if runtime.model is not None:
        _observe_inference(runtime.model, registry)
    return registry


def _observe_inference(model: ModelSlot, registry: CollectorRegistry) -> None:
    inference_seconds = Histogram(
        "nettel_inference_duration_seconds",
        "Time of one batched model call over all links.",
        buckets=CYCLE_BUCKETS,
        registry=registry,
    )
    links_predicted = Gauge(
        "nettel_links_predicted",
        "Links given a utilisation estimate in the last cycle.",
        registry=registry,
    )

    def observe(seconds: float, rows: int) -> None:
        inference_seconds.observe(seconds)
        links_predicted.set(rows)

    model.inference_observers.append(observe)
