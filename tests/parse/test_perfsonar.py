"""parse_message: both perfSONAR layouts, limits, and every reject reason the parser produces."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from service.errors import RejectedInput, RejectReason
from service.parse.limits import InputLimits
from service.parse.perfsonar import parse_message
from service.parse.records import LinkEndpoints, MeasurementKind, ParsedMessage
from tests.message_factory import (
    BASE_TS,
    DESTINATION_HOST,
    DESTINATION_IP,
    SOURCE_HOST,
    SOURCE_IP,
    body,
    histogram,
    meta,
    sample_body,
)

DELAY = MeasurementKind.DELAY
LOSS = MeasurementKind.LOSS

#: Reasons parse_message can produce (unknown_topic, too_old and future come from other layers).
PARSER_REASONS = {
    RejectReason.INVALID_JSON,
    RejectReason.NOT_AN_OBJECT,
    RejectReason.MISSING_FIELD,
    RejectReason.BAD_VALUE,
    RejectReason.TOO_LARGE,
    RejectReason.TOO_MANY_DATAPOINTS,
    RejectReason.EMPTY,
    RejectReason.CLOCK_ERROR,
    RejectReason.LOSS_OUT_OF_RANGE,
}


def rejection(kind: MeasurementKind, raw: bytes | str, limits: InputLimits = InputLimits()):
    with pytest.raises(RejectedInput) as caught:
        parse_message(kind, raw, limits)
    return caught.value.reason


def only_datapoint_rejection(kind: MeasurementKind, value: Any, key: str = str(BASE_TS)):
    message = parse_message(kind, body({key: value}))
    assert message.accepted_count == 0
    assert len(message.rejected) == 1
    return message.rejected[0][0]


# --- layouts -------------------------------------------------------------------------------


def test_original_layout_delay_sample() -> None:
    message = parse_message(DELAY, sample_body("owdelay-histogram-real.json"))
    assert message.kind is DELAY
    assert message.link == LinkEndpoints(SOURCE_IP, DESTINATION_IP, SOURCE_HOST, DESTINATION_HOST)
    assert message.rejected == []
    assert message.losses == []
    [(ts, stats)] = message.delays
    assert ts == 1700000040
    assert stats.packets == 600
    assert stats.mean == pytest.approx(2.9321333333, abs=1e-9)
    assert (stats.median, stats.minimum, stats.p95) == (2.60, 2.51, 2.75)


def test_body_as_str_is_accepted() -> None:
    raw = sample_body("owdelay-histogram-real.json").decode()
    assert parse_message(DELAY, raw).accepted_count == 1


def test_version_2_push_layout() -> None:
    message = parse_message(DELAY, sample_body("owdelay-v2-push.json"))
    assert message.link == LinkEndpoints(
        "203.0.113.5", "192.0.2.10", "ps-lat.site-c.example.com", "ps-latency.site-a.example.org"
    )
    assert message.rejected == []
    [(ts, stats)] = message.delays
    assert ts == 1700000100
    assert stats.packets == 600
    assert stats.mean == pytest.approx((34.4 * 506 + 34.5 * 85 + 34.6 * 5 + 34.7 * 4) / 600)
    assert (stats.median, stats.minimum, stats.p95) == (34.4, 34.4, 34.5)


def test_loss_sample_with_three_datapoints() -> None:
    message = parse_message(LOSS, sample_body("packet-loss-rate.json"))
    assert message.link.source == SOURCE_IP
    assert message.delays == []
    assert message.rejected == []
    assert message.losses == [
        (1700000040, 0.04666666666666667),
        (1700000100, 0.06666666666666667),
        (1700000160, 0.0),
    ]


def test_fractional_timestamp_is_truncated_to_seconds() -> None:
    message = parse_message(LOSS, body({"1700000040.9": 0.5}))
    assert message.losses == [(1700000040, 0.5)]


@pytest.mark.parametrize("value", [0, 0.0, 1, 1.0, "0.25"])
def test_loss_bounds_are_inclusive_and_strings_accepted(value: Any) -> None:
    message = parse_message(LOSS, body({BASE_TS: value}))
    assert message.losses == [(BASE_TS, float(value))]


# --- datapoint counts ------------------------------------------------------------------------


@pytest.mark.parametrize("count", [1, 100])
def test_one_to_one_hundred_datapoints_accepted(count: int) -> None:
    points = {BASE_TS + 60 * i: 0.01 for i in range(count)}
    message = parse_message(LOSS, body(points))
    assert len(message.losses) == count
    assert [ts for ts, _ in message.losses] == sorted(points)


def test_one_hundred_and_one_datapoints_rejected() -> None:
    points = {BASE_TS + 60 * i: 0.01 for i in range(101)}
    assert rejection(LOSS, body(points)) is RejectReason.TOO_MANY_DATAPOINTS


def test_datapoint_limit_follows_input_limits() -> None:
    points = {BASE_TS + 60 * i: 0.01 for i in range(3)}
    assert rejection(LOSS, body(points), InputLimits(max_datapoints=2)) is (
        RejectReason.TOO_MANY_DATAPOINTS
    )


# --- whole-message rejections --------------------------------------------------------------

WHOLE_MESSAGE_CASES: list[tuple[str, bytes, RejectReason]] = [
    ("truncated json", b'{"meta": {', RejectReason.INVALID_JSON),
    ("empty body", b"", RejectReason.INVALID_JSON),
    ("non-utf8 bytes", b'{"meta": "\xff\xfe"}', RejectReason.INVALID_JSON),
    ("bare non-utf8", b"\xff\xfe\xfd", RejectReason.INVALID_JSON),
    ("nan literal", b'{"meta": NaN}', RejectReason.INVALID_JSON),
    ("list", b"[]", RejectReason.NOT_AN_OBJECT),
    ("string", b'"meta"', RejectReason.NOT_AN_OBJECT),
    ("number", b"3", RejectReason.NOT_AN_OBJECT),
    ("null", b"null", RejectReason.NOT_AN_OBJECT),
    ("no meta", orjson.dumps({"datapoints": {str(BASE_TS): 0.1}}), RejectReason.MISSING_FIELD),
    (
        "null meta",
        orjson.dumps({"meta": None, "datapoints": {str(BASE_TS): 0.1}}),
        RejectReason.MISSING_FIELD,
    ),
    (
        "null datapoints",
        orjson.dumps({"meta": meta(), "datapoints": None}),
        RejectReason.MISSING_FIELD,
    ),
    ("no datapoints", orjson.dumps({"meta": meta()}), RejectReason.MISSING_FIELD),
    (
        "no meta.source",
        body({BASE_TS: 0.1}, {"destination": DESTINATION_IP}),
        RejectReason.MISSING_FIELD,
    ),
    (
        "no meta.destination",
        body({BASE_TS: 0.1}, {"source": SOURCE_IP}),
        RejectReason.MISSING_FIELD,
    ),
    ("meta is a list", body({BASE_TS: 0.1}, [SOURCE_IP]), RejectReason.BAD_VALUE),
    ("datapoints is a list", body([[BASE_TS, 0.1]]), RejectReason.BAD_VALUE),
    (
        "source not an IP",
        body({BASE_TS: 0.1}, meta(source="ps.example.org")),
        RejectReason.BAD_VALUE,
    ),
    ("source a number", body({BASE_TS: 0.1}, meta(source=1234)), RejectReason.BAD_VALUE),
    (
        "destination too long",
        body({BASE_TS: 0.1}, meta(destination="1" * 300)),
        RejectReason.BAD_VALUE,
    ),
    ("host not a string", body({BASE_TS: 0.1}, meta(source_host=["h"])), RejectReason.BAD_VALUE),
    (
        "host too long",
        body({BASE_TS: 0.1}, meta(destination_host="h" * 256)),
        RejectReason.BAD_VALUE,
    ),
    ("no datapoints inside", body({}), RejectReason.EMPTY),
]


@pytest.mark.parametrize(
    ("raw", "reason"),
    [(raw, reason) for _, raw, reason in WHOLE_MESSAGE_CASES],
    ids=[name for name, _, _ in WHOLE_MESSAGE_CASES],
)
def test_whole_message_rejections(raw: bytes, reason: RejectReason) -> None:
    assert rejection(LOSS, raw) is reason
    assert rejection(DELAY, raw) is reason


def test_body_over_the_byte_limit_is_too_large() -> None:
    raw = sample_body("owdelay-histogram-real.json")
    assert rejection(DELAY, raw, InputLimits(max_body_bytes=len(raw) - 1)) is RejectReason.TOO_LARGE
    assert parse_message(DELAY, raw, InputLimits(max_body_bytes=len(raw))).accepted_count == 1


def test_default_limit_refuses_a_body_over_one_mebibyte_before_parsing() -> None:
    raw = b"{" + b" " * (1 << 20) + b"}"  # valid JSON, but too large
    assert rejection(LOSS, raw) is RejectReason.TOO_LARGE


# --- per-datapoint rejections --------------------------------------------------------------

DATAPOINT_CASES: list[tuple[str, MeasurementKind, str, Any, RejectReason]] = [
    ("timestamp not numeric", LOSS, "yesterday", 0.1, RejectReason.BAD_VALUE),
    ("timestamp negative", LOSS, "-60", 0.1, RejectReason.BAD_VALUE),
    ("timestamp nan", LOSS, "nan", 0.1, RejectReason.BAD_VALUE),
    ("timestamp absurd", LOSS, "1e12", 0.1, RejectReason.BAD_VALUE),
    ("histogram is a list", DELAY, str(BASE_TS), [1, 2], RejectReason.BAD_VALUE),
    ("histogram is a number", DELAY, str(BASE_TS), 600, RejectReason.BAD_VALUE),
    ("count is a bool", DELAY, str(BASE_TS), {"2.5": True}, RejectReason.BAD_VALUE),
    ("count negative", DELAY, str(BASE_TS), {"2.5": 600, "2.6": -1}, RejectReason.BAD_VALUE),
    ("count a float", DELAY, str(BASE_TS), {"2.5": 600.0}, RejectReason.BAD_VALUE),
    ("count a string", DELAY, str(BASE_TS), {"2.5": "600"}, RejectReason.BAD_VALUE),
    ("bucket nan", DELAY, str(BASE_TS), {"NaN": 600}, RejectReason.BAD_VALUE),
    ("bucket inf", DELAY, str(BASE_TS), {"2.5": 599, "inf": 1}, RejectReason.BAD_VALUE),
    ("bucket not a number", DELAY, str(BASE_TS), {"fast": 600}, RejectReason.BAD_VALUE),
    ("loss a bool", LOSS, str(BASE_TS), True, RejectReason.BAD_VALUE),
    ("loss a list", LOSS, str(BASE_TS), [0.1], RejectReason.BAD_VALUE),
    ("loss a word", LOSS, str(BASE_TS), "none", RejectReason.BAD_VALUE),
    ("empty histogram", DELAY, str(BASE_TS), {}, RejectReason.EMPTY),
    (
        "all delays implausible",
        DELAY,
        str(BASE_TS),
        {"-5000": 300, "60000": 300},
        RejectReason.CLOCK_ERROR,
    ),
    ("loss negative", LOSS, str(BASE_TS), -0.1, RejectReason.LOSS_OUT_OF_RANGE),
    ("loss above one", LOSS, str(BASE_TS), 1.5, RejectReason.LOSS_OUT_OF_RANGE),
    ("loss above one as string", LOSS, str(BASE_TS), "1.5", RejectReason.LOSS_OUT_OF_RANGE),
    ("loss huge integer", LOSS, str(BASE_TS), 10**18, RejectReason.LOSS_OUT_OF_RANGE),
]


@pytest.mark.parametrize(
    ("kind", "key", "value", "reason"),
    [case[1:] for case in DATAPOINT_CASES],
    ids=[case[0] for case in DATAPOINT_CASES],
)
def test_datapoint_rejections(kind: MeasurementKind, key: str, value: Any, reason: RejectReason):
    assert only_datapoint_rejection(kind, value, key) is reason


@pytest.mark.parametrize("value", ["NaN", "inf", "-inf"])
def test_non_finite_loss_string_is_loss_out_of_range(value: str) -> None:
    assert only_datapoint_rejection(LOSS, value) is RejectReason.LOSS_OUT_OF_RANGE


def test_non_finite_loss_string_is_currently_refused_somehow() -> None:
    # Whatever the reason, a NaN loss never reaches link state.
    message = parse_message(LOSS, body({BASE_TS: "NaN"}))
    assert message.losses == []
    assert len(message.rejected) == 1


def test_too_many_buckets_with_small_limits() -> None:
    limits = InputLimits(max_buckets=3)
    raw = body(
        {
            BASE_TS: {"1.0": 1, "2.0": 1, "3.0": 1, "4.0": 1},
            BASE_TS + 60: {"1.0": 1, "2.0": 1, "3.0": 1},
        }
    )
    message = parse_message(DELAY, raw, limits)
    assert [reason for reason, _ in message.rejected] == [RejectReason.TOO_LARGE]
    assert [ts for ts, _ in message.delays] == [BASE_TS + 60]


def test_every_parser_reason_is_covered_by_a_case() -> None:
    covered = {reason for _, _, reason in WHOLE_MESSAGE_CASES}
    covered |= {case[-1] for case in DATAPOINT_CASES}
    covered |= {RejectReason.TOO_LARGE, RejectReason.TOO_MANY_DATAPOINTS}
    assert covered == PARSER_REASONS


def test_rejected_input_detail_never_in_reason() -> None:
    with pytest.raises(RejectedInput) as caught:
        parse_message(LOSS, body({BASE_TS: 0.1}, meta(source="not-an-ip")))
    assert caught.value.reason is RejectReason.BAD_VALUE
    assert "source" in caught.value.detail


# --- mixed datapoints, host names, addresses -------------------------------------------------


def test_bad_loss_datapoint_beside_good_one() -> None:
    message = parse_message(LOSS, body({BASE_TS: 0.02, BASE_TS + 60: 2.0, "x": 0.1}))
    assert message.losses == [(BASE_TS, 0.02)]
    assert [reason for reason, _ in message.rejected] == [
        RejectReason.LOSS_OUT_OF_RANGE,
        RejectReason.BAD_VALUE,
    ]
    assert message.accepted_count == 1


def test_bad_histogram_beside_good_one() -> None:
    message = parse_message(DELAY, body({BASE_TS: {"-5000": 600}, BASE_TS + 60: histogram(3.25)}))
    assert [(ts, s.mean) for ts, s in message.delays] == [(BASE_TS + 60, 3.25)]
    assert [reason for reason, _ in message.rejected] == [RejectReason.CLOCK_ERROR]


def test_partly_implausible_histogram_is_kept_with_dropped_packets() -> None:
    message = parse_message(DELAY, body({BASE_TS: {"-5000": 2, "3.0": 598}}))
    [(_, stats)] = message.delays
    assert (stats.packets, stats.dropped_packets, stats.mean) == (598, 2, 3.0)


@pytest.mark.parametrize("hosts", [(None, None), ("", "")])
def test_host_names_default_to_the_ips(hosts: tuple[str | None, str | None]) -> None:
    raw = body({BASE_TS: 0.1}, meta(source_host=hosts[0], destination_host=hosts[1]))
    message = parse_message(LOSS, raw)
    assert message.link == LinkEndpoints(SOURCE_IP, DESTINATION_IP, SOURCE_IP, DESTINATION_IP)


def test_ipv6_addresses_are_canonicalised() -> None:
    raw = body(
        {BASE_TS: 0.1},
        meta(
            source="2001:DB8:0:0:0:0:0:0001",
            destination=" ::FFFF:1 ",
            source_host=None,
            destination_host=None,
        ),
    )
    message = parse_message(LOSS, raw)
    assert (message.link.source, message.link.destination) == ("2001:db8::1", "::ffff:1")
    assert (message.link.source_host, message.link.destination_host) == ("2001:db8::1", "::ffff:1")


def test_an_ipv4_address_written_as_ipv6_is_the_ipv4_address() -> None:
    """`::ffff:192.0.2.73` and `192.0.2.73` are one end, so one row."""
    raw = body({BASE_TS: 0.1}, meta(source="::ffff:192.0.2.73", source_host=None))
    assert parse_message(LOSS, raw).link.source == "192.0.2.73"


@pytest.mark.parametrize("address", ["fe80::1%eth0", "fe80::1%<b>x</b>", "fe80::1%25eth0"])
def test_an_address_with_a_scope_id_is_no_link_end(address: str) -> None:
    with pytest.raises(RejectedInput, match="not an IP address") as caught:
        parse_message(LOSS, body({BASE_TS: 0.1}, meta(destination=address)))
    assert caught.value.reason is RejectReason.BAD_VALUE


def test_version_field_and_push_meta_are_ignored() -> None:
    raw = body({BASE_TS: 0.1}, {**meta(), "push": True, "summaries": 0}, version=2)
    message = parse_message(LOSS, raw)
    assert isinstance(message, ParsedMessage)
    assert message.losses == [(BASE_TS, 0.1)]
