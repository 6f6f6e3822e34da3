"""Composition root of `nettel serve`: builds state, ingest, the matrix cycle and the broker link."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

from service.config import Settings
from service.ingest.pipeline import IngestPipeline
from service.ingest.stomp_source import StompSource
from service.matrix.cycle import MatrixCycle
from service.parse.records import MeasurementKind
from service.state.link_state import LinkState
from service.state.topology import Topology
from service.state.topology_file import load_topology


@dataclass
class Runtime:
    """The running service's parts; started and stopped by the HTTP app's lifespan."""

    settings: Settings
    pipeline: IngestPipeline
    cycle: MatrixCycle
    source: StompSource
    started_at: float = field(default_factory=time.time)

    def start(self) -> None:
        self.cycle.start()
        self.source.start()

    def stop(self) -> None:
        self.source.stop()
        self.cycle.stop()

    def ready(self) -> tuple[bool, list[str]]:
        """Ready = connected to a broker and at least one matrix computed; else the reasons why not."""
        problems = []
        if not self.source.connected:
            problems.append("not connected to a broker")
        if self.cycle.latest is None:
            problems.append("no cost matrix computed yet")
        return not problems, problems


def build_runtime(settings: Settings) -> Runtime:
    topology = load_topology(settings.topology) if settings.topology else Topology()
    topics = {settings.delay_topic: MeasurementKind.DELAY, settings.loss_topic: MeasurementKind.LOSS}
    pipeline = IngestPipeline(LinkState(topology), topics, log=logging.getLogger("nettel.ingest"))
    source = StompSource(
        settings.brokers,
        list(topics),
        pipeline.handle_frame,
        user=settings.broker_user,
        passcode=settings.broker_passcode(),
        heartbeat_ms=settings.heartbeat_ms,
    )
    cycle = MatrixCycle(pipeline, settings.interval)
    return Runtime(settings, pipeline, cycle, source)
