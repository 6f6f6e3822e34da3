"""Parse pScheduler run records, as its `http` archiver sends them, into ParsedMessage records.

A record is one run of one task: `test{type,spec}`, `run{start-time,end-time,...}` and `result`.
Runs of the latency tests (`latencybg`: powstream, one record per interval; `latency`: owping)
become one datapoint of delay (`result.histogram-latency`, statistics exactly as for the bus
histograms) and one of loss (`packets-lost / packets-sent`), both at the start of the measured
interval: `packet-count x packet-interval` seconds ending at `run.end-time`, the moment the
interval's result was posted. State stores a datapoint in the minute its timestamp falls in,
as it does for the bus, whose powstream datapoints carry the start of their interval.

Histogram keys are delays divided by the spec's `bucket-width` (`'%.2f'`): milliseconds at
0.01 ms with the default 0.001 s, and scaled to milliseconds for any other width.

A `throughput` run (iperf3, nuttcp) becomes one message holding its rate and, when the tool
reports them, its retransmits (`service.parse.throughput`); a `trace` run (traceroute,
tracepath, paris-traceroute) one holding its first path (`service.parse.packet_trace`). Both are
stamped with `run.start-time`, as perfSONAR's collectors stamp them. Their spec may leave out
`source` (the host that runs the test: the run's lead participant), and a throughput test with
`reverse: true` sent its data from `dest` to `source`: that is the link.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, TypeVar

import numpy as np

from service.errors import RejectedInput, RejectReason
from service.parse.addresses import canonical_ip
from service.parse.histogram_batch import RawHistogram, add_histogram_stats, parse_buckets
from service.parse.histogram_scan import LONGEST_KEY, ScannedBatch, scan_histograms
from service.parse.json_fields import check_length, load_object, require_object
from service.parse.limits import InputLimits
from service.parse.packet_trace import MAX_HOPS, read_paths
from service.parse.records import MeasurementKind, NamedEndpoints, ParsedMessage
from service.parse.throughput import read_throughput_result

#: The latency test types nettel reads, with pScheduler's default `packet-count` for each.
DEFAULT_PACKET_COUNTS = {"latencybg": 600, "latency": 100}
#: The other test types nettel reads.
THROUGHPUT_TEST, TRACE_TEST = "throughput", "trace"
DEFAULT_PACKET_INTERVAL = 0.1
#: Seconds per histogram key unit by default: the keys are then milliseconds.
DEFAULT_BUCKET_WIDTH = 0.001
#: A host name as `_endpoint` takes it (lower case): letters, digits, `-`, `_` and dots.
_HOST_NAME = re.compile(r"[a-z0-9_][a-z0-9_.-]*")
#: The bucket widths (s) taken: a microsecond to a second. perfSONAR's are 0.01 ms to 0.1 ms;
#: a width of 1e-300 s would make every delay 0.0 ms.
MIN_BUCKET_WIDTH, MAX_BUCKET_WIDTH = 1e-6, 1.0


class RunOutcome(StrEnum):
    """What became of a run taken in; the label set of `nettel_pscheduler_runs_total`."""

    APPLIED = "applied"  # at least one of its datapoints stored
    REJECTED = "rejected"  # refused, or none of its datapoints stored (reasons counted apart)
    FAILED = "failed"  # the measurement failed (`succeeded: false`): counted, not applied
    IGNORED = "ignored"  # a test type nettel does not read
    DUPLICATE = "duplicate"  # a re-post of a run already taken in


@dataclass(frozen=True, slots=True)
class ParsedRun:
    """One run record: `key` names the run (a re-post has the same; None when it names none),
    `measured` its messages (a latency run's delay and loss as two, as the bus carries them; a
    throughput or trace run's one), or why it has none (FAILED or IGNORED)."""

    key: str | None
    measured: tuple[ParsedMessage, ...] | RunOutcome


RunResult = ParsedRun | RejectedInput
_T = TypeVar("_T")
#: A run's delay histogram until the batch's statistics are computed: its message, timestamp and
#: buckets (scanned or parsed, delays in key units), and milliseconds per key unit.
_Histogram = tuple[ParsedMessage, RawHistogram, float]
#: The buckets pScheduler writes as objects of the plain form the histogram scanner reads.
_HISTOGRAM_FIELDS = ("histogram-latency", "histogram-ttl")


def screen_run_record(body: bytes, max_buckets: int) -> RejectedInput | None:
    """Why `body` cannot be taken in as a pScheduler run record, or None: it must be a JSON
    object with `test` (its `type` a string), `run` and `result` objects, and a delay histogram
    of at most `max_buckets` buckets. This runs before a run is queued, so that a misconfigured
    archiver hears why; what a latency run holds (spec, times, counts) is read when it is parsed.

    >>> screen_run_record(b'{"test": {"type": "rtt"}, "run": {}}', 10)
    RejectedInput('missing_field: result')
    >>> screen_run_record(b'{"test": {"type": "rtt"}, "run": {}, "result": {}}', 10) is None
    True
    """
    try:
        document = load_object(body)
        test = require_object(document.get("test"), "test")
        test_type = test.get("type")
        if not isinstance(test_type, str):
            reason = RejectReason.MISSING_FIELD if test_type is None else RejectReason.BAD_VALUE
            raise RejectedInput(reason, "test.type")
        require_object(document.get("run"), "run")
        result = require_object(document.get("result"), "result")
    except RejectedInput as rejection:
        return rejection
    histogram = result.get("histogram-latency")
    if isinstance(histogram, dict) and len(histogram) > max_buckets:
        detail = f"histogram-latency has {len(histogram)} buckets, over {max_buckets}"
        return RejectedInput(RejectReason.TOO_LARGE, detail)
    return None


def parse_runs(
    bodies: Sequence[bytes | str], limits: InputLimits = InputLimits()
) -> list[RunResult]:
    """Parse a batch of run records; the histogram statistics of all of them are computed at once.

    A record is refused as a whole (RejectedInput) when it cannot be read as a run; within a
    latency run, a bad histogram or bad packet counts refuse that datapoint only. Histograms are
    read by the C scanner as the bus's are (histogram_scan); a body it cannot stand for is
    decoded whole by orjson.
    """
    scanned = bodies if limits.max_string_length >= LONGEST_KEY else [None] * len(bodies)
    scan = scan_histograms(scanned, limits.max_buckets)
    results: list[RunResult] = []
    histograms: list[_Histogram] = []
    for position, body in enumerate(bodies):
        try:
            run, histogram = _parse_body(body, limits, scan, position)
        except RejectedInput as rejection:
            results.append(rejection)
            continue
        results.append(run)
        if histogram is not None:
            histograms.append(histogram)
    add_histogram_stats(*_in_milliseconds(histograms, scan))
    return results


def _parse_body(
    body: bytes | str, limits: InputLimits, scan: ScannedBatch, position: int
) -> tuple[ParsedRun, _Histogram | None]:
    size = len(body) if isinstance(body, bytes) else len(body.encode(errors="replace"))
    if size > limits.max_body_bytes:
        raise RejectedInput(RejectReason.TOO_LARGE, f"{size} bytes")
    if scan.placed[position]:
        parsed = _parse_scanned(limits, scan, position)
        if parsed is not None:
            return parsed
    return _parse_run(load_object(body), limits)


def _parse_scanned(
    limits: InputLimits, scan: ScannedBatch, position: int
) -> tuple[ParsedRun, _Histogram | None] | None:
    """The run from its scanned document, or None when that cannot stand for the body: unless
    every placeholder came back where pScheduler writes histograms, the scan misread it."""
    try:
        document = load_object(scan.documents[position])
        parsed = _parse_run(document, limits, scan)
    except RejectedInput:
        return None
    result = document.get("result")
    values = [result.get(name) for name in _HISTOGRAM_FIELDS] if isinstance(result, dict) else []
    used = [index for value in values if (index := scan.histogram_index(value)) is not None]
    if len(used) != scan.placed[position] or any(scan.unusable[index] for index in used):
        return None
    return parsed


def _parse_run(
    document: dict[str, Any], limits: InputLimits, scan: ScannedBatch | None = None
) -> tuple[ParsedRun, _Histogram | None]:
    key = _run_key(document)
    test = require_object(document.get("test"), "test")
    test_type = _string(test, "type", "test.type", limits)
    if test_type not in DEFAULT_PACKET_COUNTS and test_type not in (THROUGHPUT_TEST, TRACE_TEST):
        return ParsedRun(key, RunOutcome.IGNORED), None
    result = require_object(document.get("result"), "result")
    succeeded = result.get("succeeded")
    if not isinstance(succeeded, bool):
        reason = RejectReason.MISSING_FIELD if succeeded is None else RejectReason.BAD_VALUE
        raise RejectedInput(reason, "result.succeeded")
    if not succeeded:
        return ParsedRun(key, RunOutcome.FAILED), None
    spec = require_object(test.get("spec"), "test.spec")
    if test_type == THROUGHPUT_TEST:
        return ParsedRun(key, (_throughput_message(document, spec, result, limits),)), None
    if test_type == TRACE_TEST:
        return ParsedRun(key, (_trace_message(document, spec, result, limits),)), None
    link = _parse_link(spec, limits)
    ts = _interval_start(document, spec, test_type, limits)
    delay = ParsedMessage(MeasurementKind.DELAY, link)
    loss = ParsedMessage(MeasurementKind.LOSS, link)
    raw = _datapoint(delay, lambda: _histogram(ts, result, spec, limits, scan))
    value = _datapoint(loss, lambda: _loss(result))
    if value is not None:
        loss.losses.append((ts, value))
    return ParsedRun(key, (delay, loss)), None if raw is None else (delay, *raw)


def _throughput_message(
    document: dict[str, Any], spec: dict[str, Any], result: dict[str, Any], limits: InputLimits
) -> ParsedMessage:
    """A throughput run's rate and retransmits at its start, on the link its data took."""
    link = _parse_link(spec, limits, _lead_participant(document, limits))
    if spec.get("reverse") is True:
        link = NamedEndpoints(
            link.destination_host, link.source_host, link.destination, link.source, link.ip_version
        )
    ts = _start_time(document, limits)
    message = ParsedMessage(MeasurementKind.THROUGHPUT, link)
    measured = _datapoint(message, lambda: read_throughput_result(result, limits))
    if measured is not None:
        bits, retransmits = measured
        message.throughputs.append((ts, bits))
        if retransmits is not None:
            message.retransmits.append((ts, retransmits))
    return message


def _trace_message(
    document: dict[str, Any], spec: dict[str, Any], result: dict[str, Any], limits: InputLimits
) -> ParsedMessage:
    """A trace run's first path at its start (`first-ttl` places its first hop)."""
    link = _parse_link(spec, limits, _lead_participant(document, limits))
    ts = _start_time(document, limits)
    message = ParsedMessage(MeasurementKind.TRACE, link)
    first_ttl = spec.get("first-ttl", 1)
    if type(first_ttl) is not int or not 1 <= first_ttl <= MAX_HOPS:
        message.rejected.append((RejectReason.BAD_VALUE, "test.spec.first-ttl"))
        return message
    paths = result.get("paths")
    if paths is None:
        message.rejected.append((RejectReason.MISSING_FIELD, "result.paths"))
        return message
    trace = _datapoint(message, lambda: read_paths(paths, first_ttl, limits))
    if trace is not None:
        message.traces.append((ts, trace))
    return message


def _lead_participant(document: dict[str, Any], limits: InputLimits) -> str | None:
    """The run's first participant (the host that ran it), None when it names none."""
    participants = document.get("participants")
    if not isinstance(participants, list) or not participants:
        return None
    lead = participants[0]
    return lead if isinstance(lead, str) and len(lead) <= limits.max_string_length else None


def _start_time(document: dict[str, Any], limits: InputLimits) -> int:
    """Epoch second of `run.start-time`."""
    run = require_object(document.get("run"), "run")
    start = _time(_string(run, "start-time", "run.start-time", limits), "run.start-time")
    if not 0 <= start <= 1e11:
        raise RejectedInput(RejectReason.BAD_VALUE, "run.start-time out of range")
    return math.floor(start)


def _datapoint(message: ParsedMessage, read: Callable[[], _T]) -> _T | None:
    """`read()`, or None with its refusal listed in `message` (the other message is unaffected)."""
    try:
        return read()
    except RejectedInput as rejection:
        message.rejected.append((rejection.reason, rejection.detail))
        return None


def _run_key(document: dict[str, Any]) -> str | None:
    """The run's URL (`run.href`), else its `id`: what a re-post of the same run repeats."""
    run = document.get("run")
    href = run.get("href") if isinstance(run, dict) else None
    if isinstance(href, str) and href:
        return href
    identifier = document.get("id")
    return identifier if isinstance(identifier, str) and identifier else None


def _parse_link(
    spec: dict[str, Any], limits: InputLimits, default_source: str | None = None
) -> NamedEndpoints:
    """The spec's `source` (else `default_source`, when given) and `dest`."""
    if spec.get("source") is None and default_source is not None:
        spec = spec | {"source": default_source}
    source, source_address = _endpoint(spec, "source", limits)
    destination, destination_address = _endpoint(spec, "dest", limits)
    version = spec.get("ip-version", 0)
    if type(version) is not int or version not in (0, 4, 6):  # not 4.0, not True
        raise RejectedInput(RejectReason.BAD_VALUE, "test.spec.ip-version is not 4 or 6")
    return NamedEndpoints(source, destination, source_address, destination_address, version)


def _endpoint(spec: dict[str, Any], name: str, limits: InputLimits) -> tuple[str, str]:
    """A host name (lower case, no trailing dot) and "", or an IP literal twice, canonical."""
    text = _string(spec, name, f"test.spec.{name}", limits).strip()
    address = canonical_ip(text)
    if address is not None:
        return address, address
    host = text.rstrip(".").lower()
    if not host:
        raise RejectedInput(RejectReason.BAD_VALUE, f"test.spec.{name} is empty")
    if not _HOST_NAME.fullmatch(host):  # e.g. an address with a scope id, fe80::1%eth0
        raise RejectedInput(RejectReason.BAD_VALUE, f"test.spec.{name} is no address or host name")
    return host, ""


def _interval_start(
    document: dict[str, Any], spec: dict[str, Any], test_type: str, limits: InputLimits
) -> int:
    """Epoch second the measured interval began: its length before `run.end-time`."""
    run = require_object(document.get("run"), "run")
    end = _time(_string(run, "end-time", "run.end-time", limits), "run.end-time")
    count = spec.get("packet-count", DEFAULT_PACKET_COUNTS[test_type])
    if type(count) is not int or count < 1:
        raise RejectedInput(RejectReason.BAD_VALUE, "test.spec.packet-count is not a count")
    interval = _positive(spec, "packet-interval", DEFAULT_PACKET_INTERVAL)
    start = end - count * interval
    if not math.isfinite(start) or not 0 <= start <= 1e11:
        raise RejectedInput(RejectReason.BAD_VALUE, "measured interval out of range")
    return math.floor(start)


def _time(text: str, what: str) -> float:
    """Epoch seconds of an ISO 8601 time (pScheduler writes `2026-11-20T10:17:05+00:00`)."""
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise RejectedInput(RejectReason.BAD_VALUE, f"{what} is not ISO 8601") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def _histogram(
    ts: int,
    result: dict[str, Any],
    spec: dict[str, Any],
    limits: InputLimits,
    scan: ScannedBatch | None,
) -> tuple[RawHistogram, float]:
    """The delay histogram (scanned, or parsed here) and its milliseconds per key unit."""
    buckets = result.get("histogram-latency")
    if buckets is None:
        raise RejectedInput(RejectReason.MISSING_FIELD, "result.histogram-latency")
    width = _positive(spec, "bucket-width", DEFAULT_BUCKET_WIDTH)
    if not MIN_BUCKET_WIDTH <= width <= MAX_BUCKET_WIDTH:
        detail = f"test.spec.bucket-width is not {MIN_BUCKET_WIDTH} to {MAX_BUCKET_WIDTH} s"
        raise RejectedInput(RejectReason.BAD_VALUE, detail)
    index = None if scan is None else scan.histogram_index(buckets)
    return (ts, parse_buckets(buckets, limits) if index is None else index), width * 1000.0


def _loss(result: dict[str, Any]) -> float:
    sent, lost = _count(result, "packets-sent"), _count(result, "packets-lost")
    if sent == 0:
        raise RejectedInput(RejectReason.EMPTY, "no packet sent")
    if lost > sent:
        raise RejectedInput(RejectReason.LOSS_OUT_OF_RANGE, f"{lost} of {sent} packets lost")
    return lost / sent


def _in_milliseconds(
    histograms: list[_Histogram], scan: ScannedBatch
) -> tuple[list[tuple[ParsedMessage, RawHistogram]], ScannedBatch]:
    """The histograms and the scan with every used delay in milliseconds (a width of 0.001 s,
    one millisecond per key unit, leaves the keys' values exactly as they are)."""
    scales = np.ones(len(scan.lengths))
    scaled: list[tuple[ParsedMessage, RawHistogram]] = []
    for message, (ts, source), ms_per_unit in histograms:
        if isinstance(source, int):
            scales[source] = ms_per_unit
        elif ms_per_unit != 1.0:
            source = ([delay * ms_per_unit for delay in source[0]], source[1])
        scaled.append((message, (ts, source)))
    if (scales != 1.0).any():
        scan = replace(scan, delays=scan.delays * np.repeat(scales, scan.lengths))
    return scaled, scan


def _string(parent: dict[str, Any], name: str, path: str, limits: InputLimits) -> str:
    value = parent.get(name)
    if value is None:
        raise RejectedInput(RejectReason.MISSING_FIELD, path)
    if not isinstance(value, str):
        raise RejectedInput(RejectReason.BAD_VALUE, f"{path} is not a string")
    check_length(value, path, limits)
    return value


def _positive(spec: dict[str, Any], name: str, default: float) -> float:
    value = spec.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise RejectedInput(RejectReason.BAD_VALUE, f"test.spec.{name} is not a number")
    if not math.isfinite(value) or value <= 0:
        raise RejectedInput(RejectReason.BAD_VALUE, f"test.spec.{name} is not positive")
    return float(value)


def _count(result: dict[str, Any], name: str) -> int:
    value = result.get(name)
    if value is None:
        raise RejectedInput(RejectReason.MISSING_FIELD, f"result.{name}")
    if type(value) is not int or value < 0:
        raise RejectedInput(RejectReason.BAD_VALUE, f"result.{name} is not a count")
    return value
