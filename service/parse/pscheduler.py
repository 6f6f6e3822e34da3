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
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from itertools import chain
from typing import Any, TypeVar

import numpy as np

from service.errors import RejectedInput, RejectReason
from service.parse.histogram import compute_histogram_batch
from service.parse.limits import InputLimits
from service.parse.perfsonar import (
    canonical_ip,
    check_length,
    load_object,
    parse_buckets,
    require_object,
)
from service.parse.records import MeasurementKind, NamedEndpoints, ParsedMessage

#: The test types nettel reads, with pScheduler's default `packet-count` for each.
DEFAULT_PACKET_COUNTS = {"latencybg": 600, "latency": 100}
DEFAULT_PACKET_INTERVAL = 0.1
#: Seconds per histogram key unit by default: the keys are then milliseconds.
DEFAULT_BUCKET_WIDTH = 0.001


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
    `measured` its delay and loss as two messages, as the bus carries them, or why it has none
    (FAILED or IGNORED)."""

    key: str | None
    measured: tuple[ParsedMessage, ParsedMessage] | RunOutcome


RunResult = ParsedRun | RejectedInput
_T = TypeVar("_T")
#: A run's delay histogram until the batch's statistics are computed: the message it belongs
#: to, the timestamp, bucket delays in key units, counts, and milliseconds per key unit.
_Histogram = tuple[ParsedMessage, int, list[float], list[int], float]


def parse_runs(
    bodies: Sequence[bytes | str], limits: InputLimits = InputLimits()
) -> list[RunResult]:
    """Parse a batch of run records; the histogram statistics of all of them are computed at once.

    A record is refused as a whole (RejectedInput) when it cannot be read as a run; within a
    latency run, a bad histogram or bad packet counts refuse that datapoint only.
    """
    results: list[RunResult] = []
    histograms: list[_Histogram] = []
    for body in bodies:
        try:
            run, histogram = _parse_run(body, limits)
        except RejectedInput as rejection:
            results.append(rejection)
            continue
        results.append(run)
        if histogram is not None:
            histograms.append(histogram)
    _add_delay_stats(histograms)
    return results


def _parse_run(body: bytes | str, limits: InputLimits) -> tuple[ParsedRun, _Histogram | None]:
    size = len(body) if isinstance(body, bytes) else len(body.encode(errors="replace"))
    if size > limits.max_body_bytes:
        raise RejectedInput(RejectReason.TOO_LARGE, f"{size} bytes")
    document = load_object(body)
    key = _run_key(document)
    test = require_object(document.get("test"), "test")
    test_type = _string(test, "type", "test.type", limits)
    if test_type not in DEFAULT_PACKET_COUNTS:
        return ParsedRun(key, RunOutcome.IGNORED), None
    result = require_object(document.get("result"), "result")
    succeeded = result.get("succeeded")
    if not isinstance(succeeded, bool):
        reason = RejectReason.MISSING_FIELD if succeeded is None else RejectReason.BAD_VALUE
        raise RejectedInput(reason, "result.succeeded")
    if not succeeded:
        return ParsedRun(key, RunOutcome.FAILED), None
    spec = require_object(test.get("spec"), "test.spec")
    link = _parse_link(spec, limits)
    ts = _interval_start(document, spec, test_type, limits)
    delay = ParsedMessage(MeasurementKind.DELAY, link)
    loss = ParsedMessage(MeasurementKind.LOSS, link)
    histogram = _datapoint(delay, lambda: _histogram(delay, ts, result, spec, limits))
    value = _datapoint(loss, lambda: _loss(result))
    if value is not None:
        loss.losses.append((ts, value))
    return ParsedRun(key, (delay, loss)), histogram


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


def _parse_link(spec: dict[str, Any], limits: InputLimits) -> NamedEndpoints:
    source, source_address = _endpoint(spec, "source", limits)
    destination, destination_address = _endpoint(spec, "dest", limits)
    version = spec.get("ip-version", 0)
    if version not in (0, 4, 6) or isinstance(version, bool):
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
    return host, ""


def _interval_start(
    document: dict[str, Any], spec: dict[str, Any], test_type: str, limits: InputLimits
) -> int:
    """Epoch second the measured interval began: its length before `run.end-time`."""
    run = require_object(document.get("run"), "run")
    end = _time(_string(run, "end-time", "run.end-time", limits))
    count = spec.get("packet-count", DEFAULT_PACKET_COUNTS[test_type])
    if type(count) is not int or count < 1:
        raise RejectedInput(RejectReason.BAD_VALUE, "test.spec.packet-count is not a count")
    interval = _positive(spec, "packet-interval", DEFAULT_PACKET_INTERVAL)
    start = end - count * interval
    if not math.isfinite(start) or not 0 <= start <= 1e11:
        raise RejectedInput(RejectReason.BAD_VALUE, "measured interval out of range")
    return math.floor(start)


def _time(text: str) -> float:
    """Epoch seconds of an ISO 8601 time (pScheduler writes `2026-11-20T10:17:05+00:00`)."""
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise RejectedInput(RejectReason.BAD_VALUE, "run.end-time is not ISO 8601") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def _histogram(
    message: ParsedMessage,
    ts: int,
    result: dict[str, Any],
    spec: dict[str, Any],
    limits: InputLimits,
) -> _Histogram:
    buckets = result.get("histogram-latency")
    if buckets is None:
        raise RejectedInput(RejectReason.MISSING_FIELD, "result.histogram-latency")
    width = _positive(spec, "bucket-width", DEFAULT_BUCKET_WIDTH)
    delays, counts = parse_buckets(buckets, limits)
    return message, ts, delays, counts, width * 1000.0


def _loss(result: dict[str, Any]) -> float:
    sent, lost = _count(result, "packets-sent"), _count(result, "packets-lost")
    if sent == 0:
        raise RejectedInput(RejectReason.EMPTY, "no packet sent")
    if lost > sent:
        raise RejectedInput(RejectReason.LOSS_OUT_OF_RANGE, f"{lost} of {sent} packets lost")
    return lost / sent


def _add_delay_stats(histograms: list[_Histogram]) -> None:
    """Statistics of every histogram of the batch in one call, scaled to milliseconds."""
    lengths = np.array([len(delays) for _, _, delays, _, _ in histograms], dtype=np.int64)
    scale = np.repeat([ms_per_unit for *_, ms_per_unit in histograms], lengths)
    delays = np.fromiter(chain.from_iterable(h[2] for h in histograms), np.float64, lengths.sum())
    counts = np.fromiter(chain.from_iterable(h[3] for h in histograms), np.int64, lengths.sum())
    stats = compute_histogram_batch(delays * scale, counts, lengths)  # exact for a scale of 1
    for (message, ts, *_), result in zip(histograms, stats, strict=True):
        if result is None:
            message.rejected.append((RejectReason.CLOCK_ERROR, "no packet with a plausible delay"))
        else:
            message.delays.append((ts, result))


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
