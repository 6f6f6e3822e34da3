"""Metadata and records of an esmond-compatible archive, turned into bus message bodies.

perfSONAR 4's esmond (and perfSONAR 5's elmond) list metadata objects, one per measured link,
whose `event-types` give each event type's `base-uri`; its records are
`[{"ts": <epoch s>, "val": <value>}, ...]`. Each link's records become bodies of the bus layout
(`meta` with the link's addresses and host names, `datapoints` keyed by timestamp), so the bus
parser checks and measures them exactly as it does what the bus carries: histogram keys in ms
(elmond's "2.6" and the bus's "2.60" are one bucket), loss as a fraction, the same limits and
rejection reasons.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import orjson

from service.errors import RejectedInput, RejectReason
from service.parse.limits import InputLimits
from service.parse.records import MeasurementKind


class ArchiveSeries(NamedTuple):
    """One event type of one link in the archive: where its records are, and the link as a bus
    `meta` object (addresses and host names as the archive gave them; the bus parser checks
    them)."""

    kind: MeasurementKind
    base_uri: str
    meta: dict[str, Any]

    @property
    def link_key(self) -> tuple[str, str]:
        return self.meta["source"], self.meta["destination"]


class ArchiveBody(NamedTuple):
    """A bus message body made of `datapoints` archive records."""

    kind: MeasurementKind
    body: bytes
    datapoints: int


def parse_metadata(
    objects: Sequence[Any], kind: MeasurementKind, limits: InputLimits = InputLimits()
) -> tuple[list[ArchiveSeries], list[RejectedInput]]:
    """The `kind` series of metadata objects, and why the others name none.

    >>> series, refused = parse_metadata([{"source": "192.0.2.1", "destination": "192.0.2.2",
    ...     "input-source": "a.example.org", "event-types": [{"event-type": "packet-loss-rate",
    ...     "base-uri": "/esmond/perfsonar/archive/f00/packet-loss-rate/base"}]}, 7],
    ...     MeasurementKind.LOSS)
    >>> series[0].base_uri, series[0].meta["input_source"], refused[0].reason.value
    ('/esmond/perfsonar/archive/f00/packet-loss-rate/base', 'a.example.org', 'not_an_object')
    """
    found: list[ArchiveSeries] = []
    refused: list[RejectedInput] = []
    for item in objects:
        try:
            found.append(_series(item, kind, limits))
        except RejectedInput as rejection:
            refused.append(rejection)
    return found, refused


def _series(item: Any, kind: MeasurementKind, limits: InputLimits) -> ArchiveSeries:
    if not isinstance(item, dict):
        raise RejectedInput(RejectReason.NOT_AN_OBJECT, "metadata is not an object")
    meta = {
        "source": _text(item, "source", limits),
        "destination": _text(item, "destination", limits),
        "input_source": item.get("input-source"),
        "input_destination": item.get("input-destination"),
    }
    event_types = item.get("event-types")
    if not isinstance(event_types, list):
        raise RejectedInput(RejectReason.MISSING_FIELD, "event-types")
    for entry in event_types:
        if isinstance(entry, dict) and entry.get("event-type") == kind.value:
            return ArchiveSeries(kind, _path(entry.get("base-uri"), limits), meta)
    raise RejectedInput(RejectReason.MISSING_FIELD, f"event type {kind.value}")


def _text(item: dict[str, Any], name: str, limits: InputLimits) -> str:
    value = item.get(name)
    if value is None:
        raise RejectedInput(RejectReason.MISSING_FIELD, name)
    if not isinstance(value, str) or len(value) > limits.max_string_length:
        raise RejectedInput(RejectReason.BAD_VALUE, f"{name} is not a short string")
    return value


def _path(value: Any, limits: InputLimits) -> str:
    """A `base-uri`: a path on the archive's host, never a URL elsewhere."""
    if value is None:
        raise RejectedInput(RejectReason.MISSING_FIELD, "base-uri")
    if (
        not isinstance(value, str)
        or len(value) > limits.max_string_length
        or not value.startswith("/")
        or value.startswith("//")
    ):
        raise RejectedInput(RejectReason.BAD_VALUE, "base-uri is not a path")
    return value


def build_bodies(
    series: ArchiveSeries, records: Sequence[Any], limits: InputLimits = InputLimits()
) -> tuple[list[ArchiveBody], list[RejectedInput]]:
    """Bus bodies holding `records` in order, each within the bus limits of datapoints and bytes,
    and why the records left out are unusable. A timestamp repeats in no body (a JSON object
    would keep only its last value): a repeat starts the next one.

    >>> bodies, refused = build_bodies(
    ...     ArchiveSeries(MeasurementKind.LOSS, "/x", {"source": "192.0.2.1"}),
    ...     [{"ts": 1700000040, "val": 0.0467}, {"val": 0.1}])
    >>> bodies[0].body, bodies[0].datapoints, refused[0].reason.value
    (b'{"meta":{"source":"192.0.2.1"},"datapoints":{"1700000040":0.0467}}', 1, 'missing_field')
    """
    bodies: list[ArchiveBody] = []
    refused: list[RejectedInput] = []
    chunk: dict[str, Any] = {}
    for record in records:
        try:
            key, value = _datapoint(record)
        except RejectedInput as rejection:
            refused.append(rejection)
            continue
        if key in chunk or len(chunk) == limits.max_datapoints:
            _encode(series, chunk, limits, bodies, refused)
            chunk = {}
        chunk[key] = value
    if chunk:
        _encode(series, chunk, limits, bodies, refused)
    return bodies, refused


def _datapoint(record: Any) -> tuple[str, Any]:
    """A record's timestamp as a datapoint key, and its value."""
    if not isinstance(record, dict):
        raise RejectedInput(RejectReason.NOT_AN_OBJECT, "record is not an object")
    ts, value = record.get("ts"), record.get("val")
    if ts is None or value is None:
        raise RejectedInput(RejectReason.MISSING_FIELD, "ts" if ts is None else "val")
    if not isinstance(ts, int | float | str):
        raise RejectedInput(RejectReason.BAD_VALUE, "ts is not a number")
    return str(ts), value


def _encode(
    series: ArchiveSeries,
    datapoints: dict[str, Any],
    limits: InputLimits,
    bodies: list[ArchiveBody],
    refused: list[RejectedInput],
) -> None:
    """Add `datapoints` to `bodies` as one body, or in halves while a body would be over the
    size limit (one record over it alone is left for the parser to refuse) or cannot be written
    (JSON nested deeper than orjson writes: that record is refused)."""
    try:
        body = orjson.dumps({"meta": series.meta, "datapoints": datapoints})
    except orjson.JSONEncodeError:
        body = None
    if len(datapoints) == 1 and body is None:
        refused.append(RejectedInput(RejectReason.BAD_VALUE, "nested too deep to write"))
    elif body is not None and (len(body) <= limits.max_body_bytes or len(datapoints) == 1):
        bodies.append(ArchiveBody(series.kind, body, len(datapoints)))
    else:
        items = list(datapoints.items())
        for half in (items[: len(items) // 2], items[len(items) // 2 :]):
            _encode(series, dict(half), limits, bodies, refused)
