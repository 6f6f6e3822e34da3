"""The bus subscription (registered only with one: --brokers none has nothing to watch)."""

from __future__ import annotations

import math
from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from service.ingest.stomp_source import StompSource
from service.publish.metrics.families import AlwaysCollected


class BrokerCollector(AlwaysCollected):
    def __init__(self, source: StompSource) -> None:
        self._source = source

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        source = self._source
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
        dropped = CounterMetricFamily(
            "nettel_broker_connections_dropped",
            "Broker connections nettel dropped itself, by reason (frame_timeout: a frame still "
            "arriving after the heart-beat grace), each followed by a reconnect.",
            labels=["reason"],
        )
        dropped.add_metric(["frame_timeout"], source.dropped.get("frame_timeout", 0))
        yield dropped
        yield CounterMetricFamily(
            "nettel_broker_frames_cut",
            "Frames longer than the receive bound (2 MiB): only their start kept, the message "
            "refused as too_large.",
            value=source.frames_cut,
        )
        yield CounterMetricFamily(
            "nettel_broker_connections",
            "Broker connections made since start: each one after the first is a reconnect, and "
            "every reconnect makes the broker redeliver what was not yet acknowledged.",
            value=source.connections,
        )
