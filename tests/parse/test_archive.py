"""Archive metadata and records become bus bodies that the bus parser reads as it reads the bus."""

from __future__ import annotations

from typing import Any

import pytest

from service.errors import RejectedInput, RejectReason
from service.parse.archive import ArchiveSeries, build_bodies, parse_metadata
from service.parse.histogram import HistogramStats
from service.parse.limits import InputLimits
from service.parse.perfsonar import parse_messages
from service.parse.records import MeasurementKind, ParsedMessage
from tests.data import load_sample
from tests.message_factory import sample_body

DELAY, LOSS = MeasurementKind.DELAY, MeasurementKind.LOSS
ARCHIVE = load_sample("esmond-archive.json")
METADATA: dict[str, Any] = ARCHIVE["metadata"]


def series_of(kind: MeasurementKind) -> ArchiveSeries:
    (series,), refused = parse_metadata([METADATA], kind)
    assert refused == []
    return series


def parsed(kind: MeasurementKind, records: list[Any]) -> tuple[list[ParsedMessage], list[Any]]:
    """Messages of `records` through the bus parser, and every refusal (records, then bodies)."""
    bodies, refused = build_bodies(series_of(kind), records)
    results = parse_messages([(body.kind, body.body) for body in bodies])
    messages = [result for result in results if isinstance(result, ParsedMessage)]
    refusals = [r.reason for r in refused] + [
        r.reason for r in results if isinstance(r, RejectedInput)
    ]
    return messages, refusals + [reason for m in messages for reason, _ in m.rejected]


def test_the_documented_metadata_layout_names_both_series_of_the_link() -> None:
    delay, loss = series_of(DELAY), series_of(LOSS)
    key = METADATA["metadata-key"]
    assert delay.base_uri == f"/esmond/perfsonar/archive/{key}/histogram-owdelay/base"
    assert loss.base_uri == f"/esmond/perfsonar/archive/{key}/packet-loss-rate/base"
    assert (
        delay.meta
        == loss.meta
        == {
            "source": "192.0.2.10",
            "destination": "198.51.100.20",
            "input_source": "ps-latency.site-a.example.org",
            "input_destination": "ps-latency.site-b.example.net",
        }
    )
    assert delay.link_key == ("192.0.2.10", "198.51.100.20")


def with_fields(**changes: Any) -> dict[str, Any]:
    return {**METADATA, **{name.replace("_", "-"): value for name, value in changes.items()}}


def event_types(base_uri: Any) -> list[dict[str, Any]]:
    return [{"event-type": "packet-loss-rate", "base-uri": base_uri}]


@pytest.mark.parametrize(
    ("item", "reason"),
    [
        ([METADATA], RejectReason.NOT_AN_OBJECT),
        (with_fields(source=None), RejectReason.MISSING_FIELD),
        (with_fields(destination=["198.51.100.20"]), RejectReason.BAD_VALUE),
        (with_fields(source="1" * 256), RejectReason.BAD_VALUE),
        (with_fields(event_types=None), RejectReason.MISSING_FIELD),
        (
            with_fields(event_types=[{"event-type": "throughput", "base-uri": "/x"}]),
            RejectReason.MISSING_FIELD,
        ),
        (with_fields(event_types=event_types(None)), RejectReason.MISSING_FIELD),
        (
            with_fields(event_types=event_types("http://elsewhere.example/x")),
            RejectReason.BAD_VALUE,
        ),
        (with_fields(event_types=event_types("//elsewhere.example/x")), RejectReason.BAD_VALUE),
        (with_fields(event_types=event_types(7)), RejectReason.BAD_VALUE),
    ],
)
def test_metadata_that_names_no_series_is_refused_with_a_reason(
    item: Any, reason: RejectReason
) -> None:
    series, refused = parse_metadata([item, METADATA], LOSS)
    assert [one.link_key for one in series] == [("192.0.2.10", "198.51.100.20")]
    assert [rejection.reason for rejection in refused] == [reason]


def test_the_real_histogram_with_elmond_keys_has_the_bus_statistics() -> None:
    """600 packets: mean 2.9321 ms (21991/7500), median 2.60, std 4.3168, min 2.51, p95 2.75."""
    records = ARCHIVE["histogram-owdelay"]
    assert "2.6" in records[0]["val"] and "2.60" not in records[0]["val"]
    (message,), refused = parsed(DELAY, records)
    (from_bus,) = parse_messages([(DELAY, sample_body("owdelay-histogram-real.json"))])
    assert refused == [] and isinstance(from_bus, ParsedMessage)
    assert message.delays == from_bus.delays
    ((ts, stats),) = message.delays
    assert ts == 1_700_000_040
    assert stats == HistogramStats(600, 21991 / 7500, stats.std, 2.60, 2.51, 2.75, False, 0)
    assert stats.std == pytest.approx(4.3168, abs=5e-5)
    assert message.link.source_host == "ps-latency.site-a.example.org"


def test_2_6_and_2_60_are_one_bucket() -> None:
    (a,), _ = parsed(DELAY, [{"ts": 60, "val": {"2.6": 3, "2.7": 1}}])
    (b,), _ = parsed(DELAY, [{"ts": 60, "val": {"2.60": 3, "2.70": 1}}])
    (c,), _ = parsed(DELAY, [{"ts": 60, "val": {"2.6": 1, "2.60": 2, "2.7": 1}}])
    assert a.delays == b.delays == c.delays
    assert a.delays[0][1].median == 2.6


def test_loss_records_are_fractions() -> None:
    (message,), refused = parsed(LOSS, ARCHIVE["packet-loss-rate"])
    assert refused == []
    assert message.losses == [
        (1_700_000_040, 0.04666666666666667),
        (1_700_000_100, 0.06666666666666667),
        (1_700_000_160, 0.0),
    ]


def test_bodies_hold_at_most_a_hundred_datapoints() -> None:
    records = [{"ts": 60 * i, "val": 0.001} for i in range(250)]
    bodies, _ = build_bodies(series_of(LOSS), records)
    assert [body.datapoints for body in bodies] == [100, 100, 50]
    messages, refused = parsed(LOSS, records)
    assert refused == [] and [ts for m in messages for ts, _ in m.losses] == [
        60 * i for i in range(250)
    ]


def test_bodies_stay_under_the_body_limit_and_a_record_over_it_alone_is_refused() -> None:
    wide = {f"{2 + i / 100:.2f}": 1 for i in range(9_000)}  # ~120 kB of JSON
    records = [{"ts": 60 * i, "val": wide} for i in range(20)]
    limits = InputLimits()
    bodies, _ = build_bodies(series_of(DELAY), records, limits)
    assert sum(body.datapoints for body in bodies) == 20
    assert all(len(body.body) <= limits.max_body_bytes for body in bodies)
    messages, refused = parsed(DELAY, records)
    assert refused == [] and sum(len(m.delays) for m in messages) == 20
    huge = {f"{i}.{'0' * 120}": 1 for i in range(1, 10_000)}  # 1.3 MB of JSON
    messages, refused = parsed(DELAY, [records[0] | {"ts": 0}, {"ts": 60, "val": huge}, records[1]])
    assert refused == [RejectReason.TOO_LARGE]
    assert [ts for m in messages for ts, _ in m.delays] == [0, 60]


def test_a_value_nested_deeper_than_json_is_written_is_refused_alone() -> None:
    deep: Any = 0.1
    for _ in range(300):  # orjson reads 1024 levels but writes 255
        deep = [deep]
    records = [{"ts": 60, "val": 0.1}, {"ts": 120, "val": deep}, {"ts": 180, "val": 0.2}]
    messages, refused = parsed(LOSS, records)
    assert refused == [RejectReason.BAD_VALUE]
    assert [point for m in messages for point in m.losses] == [(60, 0.1), (180, 0.2)]


def test_a_repeated_timestamp_starts_a_new_body_so_no_record_is_lost() -> None:
    records = [{"ts": 60, "val": 0.1}, {"ts": 120, "val": 0.2}, {"ts": 60, "val": 0.3}]
    bodies, _ = build_bodies(series_of(LOSS), records)
    assert [body.datapoints for body in bodies] == [2, 1]
    messages, _ = parsed(LOSS, records)
    assert [point for m in messages for point in m.losses] == [(60, 0.1), (120, 0.2), (60, 0.3)]


def test_malformed_records_are_refused_by_reason_and_the_rest_kept() -> None:
    records = [
        [60, 0.1],  # not an object
        {"val": 0.1},  # no ts
        {"ts": 60},  # no val
        {"ts": [60], "val": 0.1},  # ts not a number
        {"ts": "sixty", "val": 0.1},  # bus parser: bad timestamp
        {"ts": 120, "val": 1.5},  # bus parser: loss beyond 1
        {"ts": 180, "val": "0.25"},  # a numeric string, as the bus allows
        {"ts": 240, "val": 0.5},
    ]
    messages, refused = parsed(LOSS, records)
    assert sorted(refused) == sorted(
        [
            RejectReason.NOT_AN_OBJECT,
            RejectReason.MISSING_FIELD,
            RejectReason.MISSING_FIELD,
            RejectReason.BAD_VALUE,
            RejectReason.BAD_VALUE,
            RejectReason.LOSS_OUT_OF_RANGE,
        ]
    )
    assert [point for m in messages for point in m.losses] == [(180, 0.25), (240, 0.5)]
    histograms = [
        {"ts": 60, "val": {"2.5": 600.0}},  # a count that is not an integer
        {"ts": 120, "val": {}},  # no bucket
        {"ts": 180, "val": {"-2000": 600}},  # only a broken clock's delays
        {"ts": 240, "val": {"2.5": 600}},
    ]
    messages, refused = parsed(DELAY, histograms)
    assert sorted(refused) == sorted(
        [RejectReason.BAD_VALUE, RejectReason.EMPTY, RejectReason.CLOCK_ERROR]
    )
    assert [ts for m in messages for ts, _ in m.delays] == [240]
