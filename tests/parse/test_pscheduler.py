"""parse_runs: pScheduler run records (the http archiver's bodies) to delay and loss datapoints."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson
import pytest

from service.errors import RejectedInput, RejectReason
from service.parse import histogram_scan
from service.parse.histogram import HistogramStats
from service.parse.histogram_scan import SCANNER_IMPLEMENTATION, scan_histograms
from service.parse.limits import InputLimits
from service.parse.pscheduler import (
    ParsedRun,
    RunOutcome,
    RunResult,
    parse_runs,
    screen_run_record,
)
from service.parse.records import MeasurementKind, NamedEndpoints, ParsedMessage
from tests.run_factory import (
    DESTINATION_HOST,
    SAMPLE_END,
    SOURCE_HOST,
    run_body,
    run_record,
)

#: The sample's interval: 600 packets x 0.1 s ending at its end-time.
SAMPLE_START = SAMPLE_END - 60
#: Statistics of the real histogram (tests/data/README.md).
REAL_STATS = {"mean": 2.9321, "median": 2.60, "std": 4.3168, "minimum": 2.51, "p95": 2.75}


def parse_one(body: bytes | str, limits: InputLimits = InputLimits()) -> ParsedRun:
    (result,) = parse_runs([body], limits)
    assert isinstance(result, ParsedRun), result
    return result


def measured(body: bytes | str) -> tuple[ParsedMessage, ParsedMessage]:
    """The run's delay message and loss message."""
    messages = parse_one(body).measured
    assert isinstance(messages, tuple)
    return messages


def delays(body: bytes | str) -> list[tuple[int, HistogramStats]]:
    return measured(body)[0].delays


def refusal(body: bytes | str, limits: InputLimits = InputLimits()) -> RejectReason:
    (result,) = parse_runs([body], limits)
    assert isinstance(result, RejectedInput), result
    assert result.detail and len(result.detail) <= 120
    return result.reason


def rounded(stats: Any) -> dict[str, float]:
    return {name: round(getattr(stats, name), 4) for name in REAL_STATS}


def test_the_real_powstream_run_gives_the_histograms_statistics_and_its_loss() -> None:
    run = parse_one(run_body())
    assert run.key == f"https://{SOURCE_HOST}/pscheduler/tasks/1b7e/runs/5f1d"
    assert isinstance(run.measured, tuple)
    delay, loss = run.measured
    assert (delay.kind, loss.kind) == (MeasurementKind.DELAY, MeasurementKind.LOSS)
    assert delay.link == loss.link == NamedEndpoints(SOURCE_HOST, DESTINATION_HOST, "", "", 4)
    ((ts, stats),) = delay.delays
    assert ts == SAMPLE_START == 1_795_169_765  # 2026-11-20T10:16:05Z: in minute 10:16
    assert stats.packets == 600 and stats.dropped_packets == 0
    assert rounded(stats) == REAL_STATS
    assert stats.mean == pytest.approx(21991 / 7500, abs=1e-12)
    assert (delay.losses, loss.delays) == ([], [])
    assert loss.losses == [(SAMPLE_START, 0.0)]
    assert delay.rejected == loss.rejected == []


def test_another_bucket_width_is_scaled_to_milliseconds() -> None:
    """Width 0.0001 s: keys count tenths of a key unit of the default, e.g. "25.70" is 2.57 ms."""
    record = run_record(bucket_width=0.0001)
    sample = record["result"]["histogram-latency"]
    record["result"]["histogram-latency"] = {f"{float(k) * 10:.2f}": n for k, n in sample.items()}
    ((_, stats),) = delays(orjson.dumps(record))
    assert rounded(stats) == REAL_STATS
    assert stats.mean == pytest.approx(21991 / 7500, rel=1e-12)


def test_negative_keys_are_delays_below_zero_and_mark_the_clock() -> None:
    result = run_record()["result"] | {"histogram-latency": {"-0.50": 2, "1.50": 2}}
    ((_, stats),) = delays(run_body(result=result))
    assert (stats.mean, stats.minimum, stats.clock_suspect) == (0.5, -0.5, True)


def test_loss_is_lost_over_sent() -> None:
    result = run_record()["result"] | {"packets-sent": 600, "packets-lost": 15}
    assert measured(run_body(result=result))[1].losses == [(SAMPLE_START, 0.025)]


def test_the_latency_test_counts_its_own_default_packets() -> None:
    """owping's `latency`: 100 packets at 0.1 s by default, so 10 s before end-time."""
    owping = delays(run_body(test_type="latency", packet_count=None, packet_interval=None))
    assert [ts for ts, _ in owping] == [SAMPLE_END - 10]
    powstream = delays(run_body(packet_count=None, packet_interval=None))
    assert [ts for ts, _ in powstream] == [SAMPLE_START]


def test_a_shorter_interval_starts_later_and_a_fraction_rounds_down() -> None:
    assert delays(run_body(packet_count=300, packet_interval=0.1005))[0][0] == SAMPLE_END - 31


def test_ip_literals_and_host_names_are_normalised() -> None:
    delay, _ = measured(run_body(source="192.0.2.10", dest="PS-Latency.Site-B.example.NET."))
    assert delay.link == NamedEndpoints("192.0.2.10", DESTINATION_HOST, "192.0.2.10", "", 4)
    v6, _ = measured(run_body(source="2001:DB8:0::1", dest=DESTINATION_HOST, ip_version=6))
    assert v6.link == NamedEndpoints("2001:db8::1", DESTINATION_HOST, "2001:db8::1", "", 6)
    assert measured(run_body(ip_version=None))[0].link.ip_version == 0


def test_a_failed_run_is_counted_not_measured() -> None:
    failed = {"schema": 1, "succeeded": False, "error": "powstream died", "diags": "..."}
    assert parse_one(run_body(result=failed)).measured is RunOutcome.FAILED


def test_other_test_types_are_ignored_whatever_their_result() -> None:
    run = parse_one(run_body(test_type="rtt", result={"succeeded": True, "roundtrips": []}))
    assert run.measured is RunOutcome.IGNORED
    assert run.key is not None


def test_the_key_falls_back_to_the_id_and_may_be_absent() -> None:
    record = run_record()
    del record["run"]["href"]
    assert parse_one(orjson.dumps(record)).key == "5f1d2a3e-8c41-4f8e-9b7a-0d3c2b1a4e55"
    del record["id"]
    assert parse_one(orjson.dumps(record)).key is None


def test_a_bad_histogram_refuses_the_delay_and_keeps_the_loss() -> None:
    """All packets lost: no histogram to read, and a loss of 1.0 worth storing."""
    result = run_record()["result"] | {"histogram-latency": {}, "packets-lost": 600}
    delay, loss = measured(run_body(result=result))
    assert delay.delays == [] and loss.losses == [(SAMPLE_START, 1.0)]
    assert [reason for reason, _ in delay.rejected] == [RejectReason.EMPTY]
    assert loss.rejected == []


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"histogram-latency": None}, RejectReason.MISSING_FIELD),
        ({"histogram-latency": [1, 2]}, RejectReason.BAD_VALUE),
        ({"histogram-latency": {"2.50": 1.5}}, RejectReason.BAD_VALUE),
        ({"histogram-latency": {"two": 1}}, RejectReason.BAD_VALUE),
        ({"histogram-latency": {"60000.00": 600}}, RejectReason.CLOCK_ERROR),
        ({"bucket-width": 0}, RejectReason.BAD_VALUE),
        ({"bucket-width": "0.001"}, RejectReason.BAD_VALUE),
        ({"bucket-width": 1e-300}, RejectReason.BAD_VALUE),  # every delay would be 0.0 ms
        ({"bucket-width": 5.0}, RejectReason.BAD_VALUE),
    ],
)
def test_delay_refusals_leave_the_loss(change: dict[str, Any], reason: RejectReason) -> None:
    width = change.get("bucket-width", 0.001)
    result = {k: v for k, v in (run_record()["result"] | change).items() if v is not None}
    result.pop("bucket-width", None)  # a spec field, not a result field
    delay, loss = measured(run_body(result=result, bucket_width=width))
    assert delay.delays == [] and len(loss.losses) == 1
    assert [r for r, _ in delay.rejected] == [reason] and loss.rejected == []


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"packets-lost": 601}, RejectReason.LOSS_OUT_OF_RANGE),
        ({"packets-sent": 0, "packets-lost": 0}, RejectReason.EMPTY),
        ({"packets-lost": None}, RejectReason.MISSING_FIELD),
        ({"packets-sent": "600"}, RejectReason.BAD_VALUE),
        ({"packets-lost": -1}, RejectReason.BAD_VALUE),
    ],
)
def test_loss_refusals_leave_the_delay(change: dict[str, Any], reason: RejectReason) -> None:
    result = {k: v for k, v in (run_record()["result"] | change).items() if v is not None}
    delay, loss = measured(run_body(result=result))
    assert loss.losses == [] and len(delay.delays) == 1
    assert [r for r, _ in loss.rejected] == [reason] and delay.rejected == []


def test_too_many_buckets_refuse_the_delay_as_too_large() -> None:
    buckets = {f"{2 + n / 100:.2f}": 1 for n in range(11)}
    result = run_record()["result"] | {"histogram-latency": buckets}
    (run,) = parse_runs([run_body(result=result)], InputLimits(max_buckets=10))
    assert isinstance(run, ParsedRun) and isinstance(run.measured, tuple)
    assert [r for r, _ in run.measured[0].rejected] == [RejectReason.TOO_LARGE]


def test_excess_buckets_are_told_before_a_run_is_taken_in() -> None:
    def body(buckets: int) -> bytes:
        histogram = {f"{2 + n / 100:.2f}": 1 for n in range(buckets)}
        return run_body(result=run_record()["result"] | {"histogram-latency": histogram})

    refusal = screen_run_record(body(11), max_buckets=10)
    assert refusal is not None and refusal.reason is RejectReason.TOO_LARGE
    assert refusal.detail == "histogram-latency has 11 buckets, over 10"
    assert screen_run_record(body(10), max_buckets=10) is None


@pytest.mark.parametrize(
    ("body", "reason", "detail"),
    [
        (b"name=value", RejectReason.INVALID_JSON, "line 1 column 1"),
        (b"[1, 2]", RejectReason.NOT_AN_OBJECT, "list"),
        (b'{"tasks": []}', RejectReason.MISSING_FIELD, "test"),
        (b'{"test": "latencybg", "run": {}, "result": {}}', RejectReason.BAD_VALUE, "test is not"),
        (
            b'{"test": {"spec": {}}, "run": {}, "result": {}}',
            RejectReason.MISSING_FIELD,
            "test.type",
        ),
        (b'{"test": {"type": 7}, "run": {}, "result": {}}', RejectReason.BAD_VALUE, "test.type"),
        (b'{"test": {"type": "rtt"}, "result": {}}', RejectReason.MISSING_FIELD, "run"),
        (
            b'{"test": {"type": "rtt"}, "run": {}, "result": []}',
            RejectReason.BAD_VALUE,
            "result is",
        ),
    ],
)
def test_a_body_that_is_not_a_run_record_is_told_before_it_is_taken_in(
    body: bytes, reason: RejectReason, detail: str
) -> None:
    refusal = screen_run_record(body, max_buckets=10)
    assert refusal is not None and refusal.reason is reason and detail in refusal.detail


def test_run_records_pass_the_screen_whatever_their_outcome_will_be() -> None:
    """Failed runs, other test types and bad values inside a latency run are the parser's."""
    for body in (
        run_body(),
        run_body(result={"succeeded": False}),
        run_body(test_type="rtt"),
        run_body(packet_count=-1),
    ):
        assert screen_run_record(body, max_buckets=10_000) is None


def without(path: str) -> bytes:
    record = run_record()
    *parents, name = path.split(".")
    node = record
    for parent in parents:
        node = node[parent]
    del node[name]
    return orjson.dumps(record)


def with_value(path: str, value: Any) -> bytes:
    record = run_record()
    *parents, name = path.split(".")
    node = record
    for parent in parents:
        node = node[parent]
    node[name] = value
    return orjson.dumps(record)


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b'{"test": ', RejectReason.INVALID_JSON),
        (b"\xff\xfe not json", RejectReason.INVALID_JSON),
        (b"[1, 2, 3]", RejectReason.NOT_AN_OBJECT),
        (without("test"), RejectReason.MISSING_FIELD),
        (without("test.type"), RejectReason.MISSING_FIELD),
        (without("test.spec"), RejectReason.MISSING_FIELD),
        (without("test.spec.source"), RejectReason.MISSING_FIELD),
        (without("test.spec.dest"), RejectReason.MISSING_FIELD),
        (without("result"), RejectReason.MISSING_FIELD),
        (without("result.succeeded"), RejectReason.MISSING_FIELD),
        (without("run"), RejectReason.MISSING_FIELD),
        (without("run.end-time"), RejectReason.MISSING_FIELD),
        (with_value("test", "latencybg"), RejectReason.BAD_VALUE),
        (with_value("test.type", 7), RejectReason.BAD_VALUE),
        (with_value("test.spec.source", ["a"]), RejectReason.BAD_VALUE),
        (with_value("test.spec.dest", " . "), RejectReason.BAD_VALUE),
        (with_value("test.spec.dest", "x" * 256), RejectReason.BAD_VALUE),
        (with_value("test.spec.ip-version", 5), RejectReason.BAD_VALUE),
        (with_value("test.spec.ip-version", 4.0), RejectReason.BAD_VALUE),
        (with_value("test.spec.ip-version", True), RejectReason.BAD_VALUE),
        (with_value("test.spec.dest", "fe80::1%eth0"), RejectReason.BAD_VALUE),
        (with_value("test.spec.source", "fe80::1%<img src=x>"), RejectReason.BAD_VALUE),
        (with_value("test.spec.packet-count", 0), RejectReason.BAD_VALUE),
        (with_value("test.spec.packet-count", 600.0), RejectReason.BAD_VALUE),
        (with_value("test.spec.packet-interval", -0.1), RejectReason.BAD_VALUE),
        (with_value("test.spec.packet-interval", "0.1"), RejectReason.BAD_VALUE),
        (with_value("test.spec.packet-count", 10**18), RejectReason.BAD_VALUE),
        (with_value("result.succeeded", "yes"), RejectReason.BAD_VALUE),
        (with_value("run.end-time", "yesterday"), RejectReason.BAD_VALUE),
        (with_value("run.end-time", 1795601825), RejectReason.BAD_VALUE),
    ],
)
def test_malformed_runs_are_refused_with_their_reason(body: bytes, reason: RejectReason) -> None:
    assert refusal(body) == reason


def test_the_body_size_limit_is_inclusive() -> None:
    body = run_body()
    assert isinstance(parse_one(body, InputLimits(max_body_bytes=len(body))), ParsedRun)
    assert refusal(body, InputLimits(max_body_bytes=len(body) - 1)) == RejectReason.TOO_LARGE


def test_a_batch_keeps_order_and_computes_every_histogram() -> None:
    other = run_record(run_id="second")
    other["result"]["histogram-latency"] = {"10.00": 3, "20.00": 1}
    results = parse_runs([run_body(), b"{}", orjson.dumps(other), run_body(test_type="rtt")])
    first, refused, second, ignored = results
    assert isinstance(refused, RejectedInput) and refused.reason is RejectReason.MISSING_FIELD
    assert isinstance(ignored, ParsedRun) and ignored.measured is RunOutcome.IGNORED
    assert isinstance(first, ParsedRun) and isinstance(first.measured, tuple)
    assert isinstance(second, ParsedRun) and isinstance(second.measured, tuple)
    assert rounded(first.measured[0].delays[0][1]) == REAL_STATS
    assert second.measured[0].delays[0][1].mean == 12.5
    assert second.key != first.key


# --- the C scanner's path and the whole-body path give the same runs ------------------------


@pytest.fixture
def whole(monkeypatch: pytest.MonkeyPatch) -> Callable[[list[bytes]], list[RunResult]]:
    """parse_runs with the scanner off (as without the C extension): bodies decoded whole."""

    def parse(bodies: list[bytes]) -> list[RunResult]:
        with monkeypatch.context() as patch:
            patch.setattr(histogram_scan, "SCANNER_IMPLEMENTATION", "python")
            return parse_runs(bodies)

    return parse


def same_runs(body: bytes, whole: Callable[[list[bytes]], list[RunResult]]) -> ParsedRun:
    (scanned,), (decoded,) = parse_runs([body]), whole([body])
    assert scanned == decoded
    assert isinstance(scanned, ParsedRun)
    return scanned


@pytest.mark.skipif(SCANNER_IMPLEMENTATION != "c", reason="the C scanner is not built")
def test_the_scanned_histogram_is_the_decoded_one(whole) -> None:
    scan = scan_histograms([run_body()], InputLimits().max_buckets)
    assert scan.placed == [2]  # histogram-latency and histogram-ttl
    run = same_runs(run_body(), whole)
    assert isinstance(run.measured, tuple)
    assert rounded(run.measured[0].delays[0][1]) == REAL_STATS


@pytest.mark.parametrize(
    "change",
    [
        {"reference": {"1": 2}},  # a plain-form object where no histogram is
        {"result": {"succeeded": False, "error": "x", "diags": {"7": 1}}},
        {"test": {"type": "rtt", "spec": {"source": "a", "dest": "b"}}},
    ],
)
def test_a_placeholder_out_of_place_falls_back_to_the_whole_body(change, whole) -> None:
    same_runs(orjson.dumps(run_record() | change), whole)


def test_a_key_written_twice_is_read_as_json_reads_it(whole) -> None:
    """JSON keeps the last of two equal keys; the scanner would keep both: it steps aside."""
    body = run_body().replace(b'"2.72":4', b'"2.72":4,"2.72":400')
    run = same_runs(body, whole)
    assert isinstance(run.measured, tuple)
    assert run.measured[0].delays[0][1].packets == 996


def test_scanned_histograms_are_scaled_too(whole) -> None:
    record = run_record(bucket_width=0.0001)
    sample = record["result"]["histogram-latency"]
    record["result"]["histogram-latency"] = {f"{float(k) * 10:.2f}": n for k, n in sample.items()}
    body = orjson.dumps(record)
    scanned = parse_runs([body, run_body()])
    assert scanned == whole([body, run_body()])
    wide, default = (run.measured[0].delays[0][1] for run in scanned)  # type: ignore[union-attr]
    assert rounded(wide) == rounded(default) == REAL_STATS
