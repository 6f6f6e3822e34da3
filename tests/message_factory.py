"""Builders for perfSONAR message bodies and parsed records used by the unit tests."""

from __future__ import annotations

from typing import Any

import orjson

from service.parse.histogram import HistogramStats, compute_histogram_stats
from service.parse.records import LinkEndpoints, MeasurementKind, ParsedMessage
from tests.data import load_sample

#: An epoch second at the start of a minute (1700000040 = 28333334 * 60).
BASE_TS = 1_700_000_040
BASE_MINUTE = BASE_TS // 60

SOURCE_IP = "192.0.2.10"
DESTINATION_IP = "198.51.100.20"
SOURCE_HOST = "ps-latency.site-a.example.org"
DESTINATION_HOST = "ps-latency.site-b.example.net"


def sample_body(name: str) -> bytes:
    """The JSON body of a sample of tests/data, serialised as it travels on the bus."""
    return orjson.dumps(load_sample(name)["body"])


def meta(
    source: str = SOURCE_IP,
    destination: str = DESTINATION_IP,
    source_host: str | None = SOURCE_HOST,
    destination_host: str | None = DESTINATION_HOST,
) -> dict[str, Any]:
    """A point-to-point `meta` object; host names left out when None."""
    out: dict[str, Any] = {
        "subject_type": "point-to-point",
        "source": source,
        "destination": destination,
        "tool_name": "powstream",
    }
    if source_host is not None:
        out["input_source"] = source_host
    if destination_host is not None:
        out["input_destination"] = destination_host
    return out


def body(datapoints: Any, meta_object: Any = None, **extra: Any) -> bytes:
    """A message body with `datapoints` (keys are turned into strings) and a default meta."""
    if isinstance(datapoints, dict):
        datapoints = {str(k): v for k, v in datapoints.items()}
    document = {
        "meta": meta() if meta_object is None else meta_object,
        "datapoints": datapoints,
        **extra,
    }
    return orjson.dumps(document)


def histogram(delay_ms: float, packets: int = 600) -> dict[str, int]:
    """A one-bucket histogram: every packet at `delay_ms`."""
    return {f"{delay_ms}": packets}


def link(
    source: str = SOURCE_IP,
    destination: str = DESTINATION_IP,
    source_host: str = SOURCE_HOST,
    destination_host: str = DESTINATION_HOST,
) -> LinkEndpoints:
    return LinkEndpoints(source, destination, source_host, destination_host)


def stats_at(delay_ms: float, packets: int = 600) -> HistogramStats:
    """Statistics of a histogram with every packet at `delay_ms` (mean = median = min = delay)."""
    stats = compute_histogram_stats([(delay_ms, packets)])
    assert stats is not None
    return stats


def delay_message(
    values: dict[int, float | HistogramStats], endpoints: LinkEndpoints | None = None
) -> ParsedMessage:
    """A parsed delay message: epoch second -> delay (ms) or ready statistics."""
    message = ParsedMessage(MeasurementKind.DELAY, endpoints or link())
    for ts, value in values.items():
        stats = value if isinstance(value, HistogramStats) else stats_at(float(value))
        message.delays.append((ts, stats))
    return message


def loss_message(values: dict[int, float], endpoints: LinkEndpoints | None = None) -> ParsedMessage:
    """A parsed loss message: epoch second -> loss ratio."""
    message = ParsedMessage(MeasurementKind.LOSS, endpoints or link())
    message.losses.extend((ts, float(v)) for ts, v in values.items())
    return message
