"""Throughput and retransmits: the bus's raw, push and summary layouts, pScheduler's iperf3 and
nuttcp runs, and every refusal with its reason."""

from __future__ import annotations

import copy
from typing import Any

import orjson
import pytest

from service.errors import RejectedInput, RejectReason
from service.parse.limits import InputLimits
from service.parse.perfsonar import parse_message
from service.parse.pscheduler import ParsedRun, RunOutcome, parse_runs
from service.parse.records import LinkEndpoints, MeasurementKind, NamedEndpoints, ParsedMessage
from service.parse.throughput import MAX_THROUGHPUT_BPS
from tests.data import load_sample

THROUGHPUT, RETRANSMITS = MeasurementKind.THROUGHPUT, MeasurementKind.RETRANSMITS
RAW = load_sample("throughput-raw.json")
RUN = load_sample("pscheduler-throughput-run.json")["body"]
#: The two tests of the samples: their starts, rates and retransmits.
FIRST, SECOND = 1_795_176_011, 1_795_190_448
LINK = LinkEndpoints(
    "192.0.2.11",
    "198.51.100.21",
    "ps-bandwidth.site-a.example.org",
    "ps-bandwidth.site-b.example.net",
)
SOURCE_HOST, DESTINATION_HOST = LINK.source_host, LINK.destination_host


def parsed(kind: MeasurementKind, document: dict[str, Any]) -> ParsedMessage:
    return parse_message(kind, orjson.dumps(document))


def with_datapoint(value: Any, kind: MeasurementKind = THROUGHPUT) -> ParsedMessage:
    document = copy.deepcopy(RAW["body"]) | {"datapoints": {str(FIRST): value}}
    return parsed(kind, document)


def only_reason(message: ParsedMessage) -> RejectReason:
    assert message.accepted_count == 0
    [(reason, _)] = message.rejected
    return reason


def test_the_raw_layout_gives_each_test_its_rate_at_its_start() -> None:
    message = parsed(THROUGHPUT, RAW["body"])
    assert message.link == LINK
    assert message.throughputs == [(FIRST, 389_274_697.0), (SECOND, 412_903_544.0)]
    assert not message.delays and not message.losses and not message.rejected


def test_retransmits_arrive_on_their_own_topic_for_the_same_tests() -> None:
    message = parsed(RETRANSMITS, load_sample("packet-retransmits-raw.json")["body"])
    assert message.retransmits == [(FIRST, 159), (SECOND, 37)]
    assert message.throughputs == []


def test_the_push_layout_carries_the_same_values() -> None:
    """OSG's push collector: version 2, push in meta, int(throughput-bits) at the run's start."""
    body = {
        "version": 2,
        "meta": {
            "input_source": SOURCE_HOST,
            "input_destination": DESTINATION_HOST,
            "source": "192.0.2.11",
            "destination": "198.51.100.21",
            "measurement_agent": "192.0.2.11",
            "push": True,
        },
        "datapoints": {str(FIRST): 389_274_697},
    }
    assert parsed(THROUGHPUT, body).throughputs == [(FIRST, 389_274_697.0)]


def test_the_summary_layout_takes_the_daily_average_at_its_window_start() -> None:
    message = parsed(THROUGHPUT, load_sample("throughput-summary.json")["body"])
    assert message.throughputs == [(1_795_132_800, (389_274_697 + 412_903_544) / 2)]


def test_other_summaries_are_refused_one_by_one_and_the_average_kept() -> None:
    body = copy.deepcopy(load_sample("throughput-summary.json")["body"])
    average = body["summaries"][0]
    body["summaries"] = [
        average | {"summary_type": "aggregation"},
        average | {"event_type": "packet-retransmits"},
        average | {"summary_data": [[1, 2, 3]]},
        average,
    ]
    message = parsed(THROUGHPUT, body)
    assert [reason for reason, _ in message.rejected] == [RejectReason.BAD_VALUE] * 3
    assert len(message.throughputs) == 1


def test_the_summary_layout_is_read_for_throughput_and_retransmits_only() -> None:
    body = load_sample("throughput-summary.json")["body"]
    with pytest.raises(RejectedInput) as refused:
        parse_message(MeasurementKind.TRACE, orjson.dumps(body))
    assert refused.value.reason is RejectReason.MISSING_FIELD  # no datapoints


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (-1, RejectReason.THROUGHPUT_OUT_OF_RANGE),
        (MAX_THROUGHPUT_BPS * 2, RejectReason.THROUGHPUT_OUT_OF_RANGE),
        ("-5e9", RejectReason.THROUGHPUT_OUT_OF_RANGE),
        ("Infinity", RejectReason.THROUGHPUT_OUT_OF_RANGE),
        (2**64 - 1, RejectReason.THROUGHPUT_OUT_OF_RANGE),  # the largest integer JSON brings
        ("fast", RejectReason.BAD_VALUE),
        (True, RejectReason.BAD_VALUE),
        ({"val": 1}, RejectReason.BAD_VALUE),
        (None, RejectReason.BAD_VALUE),
        ("9" * 300, RejectReason.BAD_VALUE),  # longer than the string limit
    ],
)
def test_a_bad_rate_is_refused_with_its_reason(value: Any, reason: RejectReason) -> None:
    assert only_reason(with_datapoint(value)) is reason


def test_a_rate_as_text_and_the_largest_rate_are_taken() -> None:
    assert with_datapoint("9.4e9").throughputs == [(FIRST, 9.4e9)]
    assert with_datapoint(MAX_THROUGHPUT_BPS).throughputs == [(FIRST, MAX_THROUGHPUT_BPS)]
    assert with_datapoint(0).throughputs == [(FIRST, 0.0)]


@pytest.mark.parametrize("value", [-1, 1.5, "12a", "²", True, [3], 2**60])
def test_a_bad_retransmit_count_is_refused(value: Any) -> None:
    assert only_reason(with_datapoint(value, RETRANSMITS)) is RejectReason.BAD_VALUE


def test_retransmits_as_text_or_a_whole_float_are_taken() -> None:
    assert with_datapoint("42", RETRANSMITS).retransmits == [(FIRST, 42)]
    assert with_datapoint(42.0, RETRANSMITS).retransmits == [(FIRST, 42)]


# --- pScheduler's throughput runs ------------------------------------------------------------


def run_of(record: dict[str, Any]) -> ParsedRun:
    (result,) = parse_runs([orjson.dumps(record)])
    assert isinstance(result, ParsedRun), result
    return result


def message_of(record: dict[str, Any]) -> ParsedMessage:
    measured = run_of(record).measured
    assert isinstance(measured, tuple)
    (message,) = measured
    return message


def test_an_iperf3_run_gives_its_rate_and_retransmits_at_its_start() -> None:
    message = message_of(RUN)
    assert message.kind is THROUGHPUT
    assert message.link == NamedEndpoints(SOURCE_HOST, DESTINATION_HOST, "", "", 4)
    assert message.throughputs == [(FIRST, 389_274_697.967401)]
    assert message.retransmits == [(FIRST, 159)]
    assert run_of(RUN).key == RUN["run"]["href"]


def test_a_nuttcp_run_reads_alike() -> None:
    record = RUN | {"result": load_sample("pscheduler-throughput-nuttcp-result.json")["result"]}
    message = message_of(record)
    assert (message.throughputs, message.retransmits) == ([(FIRST, 1_842_379_000.0)], [(FIRST, 90)])


def test_a_udp_run_without_retransmits_gives_the_rate_alone() -> None:
    record = copy.deepcopy(RUN)
    del record["result"]["summary"]["summary"]["retransmits"]
    record["result"]["summary"]["summary"] |= {"sent": 1000, "lost": 2, "jitter": 0.1}
    message = message_of(record)
    assert (message.throughputs, message.retransmits) == ([(FIRST, 389_274_697.967401)], [])
    record["result"]["summary"]["summary"]["retransmits"] = None
    assert message_of(record).retransmits == []


def test_a_reverse_test_measured_the_link_from_dest_to_source() -> None:
    record = copy.deepcopy(RUN)
    record["test"]["spec"]["reverse"] = True
    link = message_of(record).link
    assert (link.source_host, link.destination_host) == (DESTINATION_HOST, SOURCE_HOST)


def test_a_spec_without_source_runs_from_the_lead_participant() -> None:
    record = copy.deepcopy(RUN)
    del record["test"]["spec"]["source"]
    record["participants"] = ["192.0.2.11", DESTINATION_HOST]
    link = message_of(record).link
    assert link == NamedEndpoints("192.0.2.11", DESTINATION_HOST, "192.0.2.11", "", 4)


def test_a_failed_run_is_counted_not_measured() -> None:
    record = RUN | {"result": {"succeeded": False, "error": "iperf3 could not connect"}}
    assert run_of(record).measured is RunOutcome.FAILED


@pytest.mark.parametrize(
    ("result", "reason"),
    [
        ({"succeeded": True}, RejectReason.MISSING_FIELD),
        ({"succeeded": True, "summary": {"summary": {}}}, RejectReason.MISSING_FIELD),
        ({"succeeded": True, "summary": []}, RejectReason.BAD_VALUE),
        (
            {"succeeded": True, "summary": {"summary": {"throughput-bits": -3}}},
            RejectReason.THROUGHPUT_OUT_OF_RANGE,
        ),
        (
            {
                "succeeded": True,
                "summary": {"summary": {"throughput-bits": 1e9, "retransmits": -2}},
            },
            RejectReason.BAD_VALUE,
        ),
    ],
)
def test_a_run_without_a_usable_result_has_its_refusal(
    result: dict[str, Any], reason: RejectReason
) -> None:
    assert only_reason(message_of(RUN | {"result": result})) is reason


@pytest.mark.parametrize(
    ("run", "reason"),
    [
        ({"end-time": "2026-11-20T12:00:23+00:00"}, RejectReason.MISSING_FIELD),
        ({"start-time": "noon"}, RejectReason.BAD_VALUE),
    ],
)
def test_a_run_without_a_start_is_refused_whole(run: dict[str, Any], reason: RejectReason) -> None:
    (result,) = parse_runs([orjson.dumps(RUN | {"run": run})])
    assert isinstance(result, RejectedInput) and result.reason is reason


def test_limits_apply_to_throughput_runs_as_to_others() -> None:
    body = orjson.dumps(RUN)
    (result,) = parse_runs([body], InputLimits(max_body_bytes=len(body) - 1))
    assert isinstance(result, RejectedInput) and result.reason is RejectReason.TOO_LARGE
