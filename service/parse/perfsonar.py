"""Parse perfSONAR bus messages into ParsedMessage records.

A body is `meta` (the link) and either `datapoints` (epoch second -> value: the raw layout, in
its original and `version: 2` forms) or `summaries` (the summary layout of the
`perfsonar.summary.*` topics: `[{"event_type", "summary_type", "summary_window",
"summary_data": [[ts, value], ...]}]`). Values are read by event type: a delay histogram, a
loss ratio, a throughput or retransmit count (`service.parse.throughput`), a traceroute
(`service.parse.packet_trace`). Summaries are read for throughput and retransmits only, and only
esmond's `average` ones (perfSONAR's throughput summary is the daily average): each point is
taken as a result at its window's start.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from service.errors import RejectedInput, RejectReason
from service.parse.addresses import canonical_ip
from service.parse.histogram_batch import RawHistogram, add_histogram_stats, parse_buckets
from service.parse.histogram_scan import LONGEST_KEY, ScannedBatch, scan_histograms
from service.parse.json_fields import check_length, load_object, require_object
from service.parse.limits import InputLimits
from service.parse.packet_trace import read_trace
from service.parse.records import LinkEndpoints, MeasurementKind, ParsedMessage
from service.parse.throughput import read_retransmits, read_throughput

ParseInput = Sequence[tuple[MeasurementKind, bytes | str]]
ParseResult = ParsedMessage | RejectedInput
#: The event types whose summary layout is read, and the one summary type taken.
SUMMARY_KINDS = frozenset({MeasurementKind.THROUGHPUT, MeasurementKind.RETRANSMITS})
SUMMARY_TYPE = "average"


def parse_message(
    kind: MeasurementKind, body: bytes | str, limits: InputLimits = InputLimits()
) -> ParsedMessage:
    """Parse one message body of `kind`; raise RejectedInput when the whole message is unusable.

    Datapoints that are individually bad are listed in `ParsedMessage.rejected`, the rest kept.
    """
    (result,) = parse_messages([(kind, body)], limits)
    if isinstance(result, RejectedInput):
        raise result
    return result


def parse_messages(frames: ParseInput, limits: InputLimits = InputLimits()) -> list[ParseResult]:
    """Parse a batch of messages; histogram statistics are computed for the whole batch at once.

    Delay histograms in plain form are read by the C scanner (histogram_scan); the rest of each
    body, and any body the scanner cannot stand for, goes through orjson.
    """
    scan = _scan_delay_bodies(frames, limits)
    results: list[ParseResult] = []
    histograms: list[tuple[ParsedMessage, RawHistogram]] = []
    for position, (kind, body) in enumerate(frames):
        try:
            message, raw = _parse_document(kind, body, limits, scan, position)
        except RejectedInput as rejection:
            results.append(rejection)
            continue
        results.append(message)
        histograms.extend((message, histogram) for histogram in raw)
    add_histogram_stats(histograms, scan)
    return results


def _scan_delay_bodies(frames: ParseInput, limits: InputLimits) -> ScannedBatch:
    """Scan the delay bodies, unless the string limit is below keys the scanner accepts."""
    allowed = limits.max_string_length >= LONGEST_KEY
    bodies = [body if allowed and kind is MeasurementKind.DELAY else None for kind, body in frames]
    return scan_histograms(bodies, limits.max_buckets)


def _parse_document(
    kind: MeasurementKind, body: bytes | str, limits: InputLimits, scan: ScannedBatch, position: int
) -> tuple[ParsedMessage, list[RawHistogram]]:
    size = len(body) if isinstance(body, bytes) else len(body.encode(errors="replace"))
    if size > limits.max_body_bytes:
        raise RejectedInput(RejectReason.TOO_LARGE, f"{size} bytes")
    if scan.placed[position]:
        parsed = _parse_scanned(kind, limits, scan, position)
        if parsed is not None:
            return parsed
    return _parse_fields(kind, load_object(body), limits)


def _parse_scanned(
    kind: MeasurementKind, limits: InputLimits, scan: ScannedBatch, position: int
) -> tuple[ParsedMessage, list[RawHistogram]] | None:
    """The message from its scanned document, or None when that cannot stand for the body."""
    try:
        message, raw = _parse_fields(kind, load_object(scan.documents[position]), limits, scan)
    except RejectedInput:
        return None
    used = [source for _, source in raw if type(source) is int]
    if len(used) != scan.placed[position] or scan.unusable[used].any():
        return None
    return message, raw


def _parse_fields(
    kind: MeasurementKind,
    document: dict[str, Any],
    limits: InputLimits,
    scan: ScannedBatch | None = None,
) -> tuple[ParsedMessage, list[RawHistogram]]:
    link = _parse_link(require_object(document.get("meta"), "meta"), limits)
    message = ParsedMessage(kind=kind, link=link)
    if "datapoints" not in document and kind in SUMMARY_KINDS and "summaries" in document:
        points = _summary_points(document["summaries"], kind, limits, message)
    else:
        points = list(require_object(document.get("datapoints"), "datapoints").items())
    if not points:
        raise RejectedInput(RejectReason.EMPTY, "no datapoints")
    if len(points) > limits.max_datapoints:
        raise RejectedInput(RejectReason.TOO_MANY_DATAPOINTS, str(len(points)))
    raw: list[RawHistogram] = []
    for key, value in points:
        try:
            ts = _parse_timestamp(key, limits)
            if kind is MeasurementKind.LOSS:
                message.losses.append((ts, _parse_loss(value, limits)))
            elif kind is not MeasurementKind.DELAY:
                _add_result(message, ts, value, limits)
            elif scan is not None and (index := scan.histogram_index(value)) is not None:
                raw.append((ts, index))
            else:
                raw.append((ts, parse_buckets(value, limits)))
        except RejectedInput as rejection:
            message.rejected.append((rejection.reason, rejection.detail))
    return message, raw


def _add_result(message: ParsedMessage, ts: int, value: Any, limits: InputLimits) -> None:
    """A throughput, retransmit count or trace datapoint, read by the message's event type."""
    if message.kind is MeasurementKind.THROUGHPUT:
        message.throughputs.append((ts, read_throughput(value, limits)))
    elif message.kind is MeasurementKind.RETRANSMITS:
        message.retransmits.append((ts, read_retransmits(value, limits)))
    else:
        message.traces.append((ts, read_trace(value, limits)))


def _summary_points(
    summaries: Any, kind: MeasurementKind, limits: InputLimits, message: ParsedMessage
) -> list[tuple[str, Any]]:
    """The (timestamp text, value) points of the `average` summaries of `kind`; other
    summaries, and malformed points, are listed as refused in `message`."""
    if not isinstance(summaries, list):
        raise RejectedInput(RejectReason.BAD_VALUE, "summaries is not a list")
    if len(summaries) > limits.max_datapoints:
        raise RejectedInput(RejectReason.TOO_MANY_DATAPOINTS, f"{len(summaries)} summaries")
    points: list[tuple[str, Any]] = []
    for summary in summaries:
        try:
            points += _summary_data(summary, kind)
        except RejectedInput as rejection:
            message.rejected.append((rejection.reason, rejection.detail))
    return points


def _summary_data(summary: Any, kind: MeasurementKind) -> list[tuple[str, Any]]:
    summary = require_object(summary, "summary")
    event_type = summary.get("event_type", kind.value)
    summary_type = summary.get("summary_type")
    if event_type != kind.value or summary_type != SUMMARY_TYPE:
        shown = f"{event_type!r:.40} {summary_type!r:.20}"
        raise RejectedInput(RejectReason.BAD_VALUE, f"summary {shown} is not read")
    data = summary.get("summary_data")
    if not isinstance(data, list):
        raise RejectedInput(RejectReason.MISSING_FIELD, "summary_data")
    points: list[tuple[str, Any]] = []
    for point in data:
        if (
            not isinstance(point, list)
            or len(point) != 2
            or isinstance(point[0], bool)
            or not isinstance(point[0], int | float | str)
        ):
            raise RejectedInput(RejectReason.BAD_VALUE, "summary point is not [ts, value]")
        points.append((str(point[0]), point[1]))
    return points


#: Links already parsed, by their raw meta fields and the string limit; ~250 toolkits send the
#: same few tens of thousands of (source, destination, host, host) combinations over and over.
_LINKS: dict[tuple[Any, ...], LinkEndpoints] = {}
_LINK_CACHE_LIMIT = 1 << 17


def _parse_link(meta: dict[str, Any], limits: InputLimits) -> LinkEndpoints:
    key = (
        limits.max_string_length,
        meta.get("source"),
        meta.get("destination"),
        meta.get("input_source"),
        meta.get("input_destination"),
    )
    try:
        link = _LINKS.get(key)  # only checked keys (strings or None) are cached, and a string
    except TypeError:  # equals no other type, so a hit needs no check again
        return _checked_link(meta, limits)  # unhashable values: refused
    if link is None:
        link = _checked_link(meta, limits)  # raises unless every field is a string or None
        if len(_LINKS) >= _LINK_CACHE_LIMIT:
            _LINKS.clear()
        _LINKS[key] = link
    return link


def _checked_link(meta: dict[str, Any], limits: InputLimits) -> LinkEndpoints:
    source = _ip_field(meta, "source", limits)
    destination = _ip_field(meta, "destination", limits)
    return LinkEndpoints(
        source=source,
        destination=destination,
        source_host=_host_field(meta, "input_source", source, limits),
        destination_host=_host_field(meta, "input_destination", destination, limits),
    )


def _ip_field(meta: dict[str, Any], name: str, limits: InputLimits) -> str:
    value = meta.get(name)
    if value is None:
        raise RejectedInput(RejectReason.MISSING_FIELD, f"meta.{name}")
    if not isinstance(value, str) or len(value) > limits.max_string_length:
        raise RejectedInput(RejectReason.BAD_VALUE, f"meta.{name} is not a string")
    canonical = canonical_ip(value)
    if canonical is None:
        raise RejectedInput(RejectReason.BAD_VALUE, f"meta.{name} is not an IP address")
    return canonical


def _host_field(meta: dict[str, Any], name: str, fallback: str, limits: InputLimits) -> str:
    value = meta.get(name)
    if value is None or value == "":
        return fallback
    if not isinstance(value, str) or len(value) > limits.max_string_length:
        raise RejectedInput(RejectReason.BAD_VALUE, f"meta.{name} is not a short string")
    return value


#: Timestamps already parsed, by key text: a minute's key arrives from every link.
_TIMESTAMPS: dict[str, int] = {}
_TIMESTAMP_CACHE_LIMIT = 1 << 12


def _parse_timestamp(key: str, limits: InputLimits) -> int:
    check_length(key, "timestamp", limits)
    seconds = _TIMESTAMPS.get(key)
    if seconds is None:
        seconds = _timestamp_value(key)
        if len(_TIMESTAMPS) >= _TIMESTAMP_CACHE_LIMIT:
            _TIMESTAMPS.clear()
        _TIMESTAMPS[key] = seconds
    return seconds


def _timestamp_value(key: str) -> int:
    try:
        seconds = float(key)
    except ValueError:
        raise RejectedInput(RejectReason.BAD_VALUE, "timestamp is not a number") from None
    if not math.isfinite(seconds) or seconds < 0 or seconds > 1e11:
        raise RejectedInput(RejectReason.BAD_VALUE, "timestamp out of range")
    return int(seconds)


def _parse_loss(value: Any, limits: InputLimits) -> float:
    if isinstance(value, str):
        check_length(value, "loss", limits)
        try:
            value = float(value)
        except ValueError:
            raise RejectedInput(RejectReason.BAD_VALUE, "loss is not a number") from None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise RejectedInput(RejectReason.BAD_VALUE, "loss is not a number")
    if not math.isfinite(value) or not 0.0 <= value <= 1.0:
        raise RejectedInput(RejectReason.LOSS_OUT_OF_RANGE, repr(value)[:40])
    return float(value)
