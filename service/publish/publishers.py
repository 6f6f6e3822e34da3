"""The publishers beside the REST API: SSE streams (the matrix's, the alarms' and ALTO's update
streams), broker telemetry and alarm events, and per-snapshot views.

`build_publishers` makes them (the runtime does, once, and lists `prepare` and `publish` among
the matrix cycle's observers); `Publishers` is one of the runtime's running parts: while it runs
(its start starts the telemetry thread), a new snapshot wakes both kinds of stream and goes to
the broker; its stop ends the open streams and telemetry. Views derived from a snapshot (site
aggregation, ALTO maps) are built once per snapshot, in the matrix cycle before it is served
(`prepare`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from service.alarms.book import AlarmBook
from service.config import Settings
from service.matrix.cycle import ServedMatrix
from service.matrix.link_record import LinkRecord
from service.matrix.snapshot import CostMatrix
from service.publish.alarm_feed import AlarmFeed, build_alarm_feed
from service.publish.alto.updates import AltoUpdates
from service.publish.alto.view import AltoView
from service.publish.http_guard import HttpGuard
from service.publish.rucio import load_rse_map
from service.publish.stream import MatrixStream
from service.publish.telemetry import TelemetryPublisher
from service.topology.topology import Topology

T = TypeVar("T")


class SnapshotMemo(Generic[T]):
    """A value derived from a snapshot, built once per snapshot: the values of the last two are
    kept (the one served and the one being prepared)."""

    def __init__(self, build: Callable[[CostMatrix], T]) -> None:
        self._build = build
        self._cached: tuple[tuple[CostMatrix, T], ...] = ()

    def __call__(self, matrix: CostMatrix) -> T:
        cached = self._cached
        for held, value in cached:
            if held is matrix:
                return value
        value = self._build(matrix)
        self._cached = (*cached[-1:], (matrix, value))
        return value


@dataclass
class Publishers:
    """Matrix observers and threads of the publishers, and the views they share."""

    name = "publishers"

    served: ServedMatrix
    stream: MatrixStream
    telemetry: TelemetryPublisher | None
    site_links: SnapshotMemo[Sequence[LinkRecord]]
    alto_view: SnapshotMemo[AltoView]
    alto_updates: AltoUpdates
    rse_map: dict[str, str] | None = None
    #: /alarms/stream and the broker's alarm events (None: alarms disabled).
    alarms: AlarmFeed | None = None
    #: Whether the publishers run (between `start` and `stop`): only then do new snapshots
    #: wake the streams, go to the broker and get their ALTO views built in the cycle.
    running: bool = field(default=False, init=False)

    def start(self) -> None:
        if self.telemetry is not None:
            self.telemetry.start()
        if self.alarms is not None:
            self.alarms.start()
        self.running = True

    def prepare(self, matrix: CostMatrix) -> None:
        """Build the snapshot's ALTO view (network map, cost maps) before it is served."""
        if self.running:
            self.alto_view(matrix).prepare()

    def publish(self, previous: CostMatrix | None, latest: CostMatrix) -> None:
        """A new snapshot is served: wake both kinds of SSE stream and send broker telemetry."""
        if not self.running:
            return
        self.stream.observe(previous, latest)
        self.alto_updates.observe(previous, latest)
        if self.telemetry is not None:
            self.telemetry.observe(previous, latest)

    def stream_counts(self) -> dict[str, Callable[[], int]]:
        """SSE endpoint (a metric label) -> how many streams it has open now."""
        counts = {
            "costmatrix_stream": self.stream.open_streams,
            "alto_updates": self.alto_updates.open_streams,
        }
        if self.alarms is not None:
            counts["alarms_stream"] = self.alarms.stream.open_streams
        return counts

    def close_streams(self) -> None:
        """End every open SSE stream; safe from any thread or a signal handler."""
        self.stream.close()
        self.alto_updates.close()

    def stop(self) -> None:
        self.running = False
        if self.alarms is not None:
            self.alarms.stop()
        self.close_streams()
        if self.telemetry is not None:
            self.telemetry.stop()


def build_publishers(
    settings: Settings,
    served: ServedMatrix,
    topology: Callable[[], Topology],
    telemetry: TelemetryPublisher | None,
    guard: HttpGuard,
    alarms: AlarmBook | None = None,
) -> Publishers:
    """The publishers of the snapshots `served` holds; `topology`: the one in use now (ALTO's
    network map), `guard` counts the streams refused or dropped, `alarms`: the alarm book whose
    events are streamed and sent to the broker (None: alarms disabled)."""
    site_links: SnapshotMemo[Sequence[LinkRecord]] = SnapshotMemo(lambda matrix: matrix.site_links)

    def alto_view_of(matrix: CostMatrix) -> AltoView:
        """The ALTO view of a snapshot, with the topology in use when it is first read."""
        in_use = topology()
        return AltoView(
            matrix.links,
            site_links(matrix),
            version=matrix.etag.strip('"'),
            networks_of=in_use.networks_of,
            listed_sites=tuple(in_use.networks_by_site),
        )

    alto_view = SnapshotMemo(alto_view_of)

    def latest() -> CostMatrix | None:
        return served.latest

    stream = MatrixStream(
        latest,
        site_links,
        settings.stream_cost_step,
        max_streams=settings.sse_max_streams,
        refuse=guard.refuse,
    )
    return Publishers(
        served,
        stream,
        telemetry,
        site_links,
        alto_view,
        AltoUpdates(latest, alto_view),
        load_rse_map(settings.rse_map) if settings.rse_map else None,
        None
        if alarms is None
        else build_alarm_feed(alarms, stream.limit, latest, telemetry, settings.alarm_topic),
    )
