"""The HTTP front door: connections open, what its limits refused, SSE streams open."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

from prometheus_client import CollectorRegistry, Gauge
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from service.publish.http_guard import HttpGuard, HttpRefusal
from service.publish.metrics.families import AlwaysCollected, labelled_counter


class HttpCollector(AlwaysCollected):
    """`HttpGuard`'s connections and refusals."""

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
        yield labelled_counter(
            "nettel_http_refused",
            "HTTP connections closed or streams refused by the front door's limits, by reason.",
            "reason",
            refused,
        )


def register_stream_gauge(
    registry: CollectorRegistry, open_streams: Mapping[str, Callable[[], int]]
) -> None:
    """Per SSE endpoint (`open_streams`: its label -> how many streams it has open now)."""
    streams = Gauge(
        "nettel_sse_streams",
        "Server-sent event streams open, per endpoint.",
        ["endpoint"],
        registry=registry,
    )
    for endpoint, count in open_streams.items():
        streams.labels(endpoint).set_function(count)
