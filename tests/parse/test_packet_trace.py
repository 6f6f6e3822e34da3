"""Traceroutes: esmond's hop lists and pScheduler's paths read alike, exact hops and prints,
and every refusal with its reason."""

from __future__ import annotations

import copy
import math
from typing import Any

import orjson
import pytest

from service.errors import RejectedInput, RejectReason
from service.parse.limits import InputLimits
from service.parse.packet_trace import MAX_HOPS, path_fingerprint, read_trace
from service.parse.parse_codec import decode_results, encode_results
from service.parse.perfsonar import parse_message, parse_messages
from service.parse.pscheduler import ParsedRun, parse_runs
from service.parse.records import MeasurementKind, NamedEndpoints, ParsedMessage, TraceHop
from tests.data import load_sample

TRACE = MeasurementKind.TRACE
RAW = load_sample("packet-trace-raw.json")
PUSH = load_sample("packet-trace-v2-push.json")
RUN = load_sample("pscheduler-trace-run.json")["body"]
FIRST, SECOND = 1_795_176_314, 1_795_176_914
LIMITS = InputLimits()
#: The hops of pScheduler's example trace (documentation addresses): TTL, address, RTT, AS.
PATH = [
    (1, "10.0.2.2", 0.2, 0),
    (2, "203.0.113.1", 1.5, 64496),
    (3, "203.0.113.9", 21.4, 64496),
    (4, "203.0.113.17", 11.9, 64497),
    (5, "203.0.113.25", 21.6, 64498),
    (6, "203.0.113.33", 21.9, 64499),
    (7, "203.0.113.41", 24.8, 64499),
    (8, "203.0.113.49", 22.1, 64499),
    (9, "203.0.113.57", 22.7, 64499),
    (10, "198.51.100.21", 22.3, 64499),
]


def hops_of(trace_hops: tuple[TraceHop, ...]) -> list[tuple[int, str, float, int]]:
    """The hops with RTTs to 0.1 ms (esmond's come as seconds x 1000, with float remainders)."""
    return [(h.ttl, h.address, round(h.rtt_ms, 1), h.asn) for h in trace_hops]


def test_esmond_hop_lists_give_each_hop_its_ttl_address_rtt_and_as() -> None:
    message = parse_message(TRACE, orjson.dumps(RAW["body"]))
    (first_ts, first), (second_ts, second) = message.traces
    assert (first_ts, second_ts) == (FIRST, SECOND)
    assert hops_of(first.hops) == PATH
    assert first.fingerprint == path_fingerprint([address for _, address, _, _ in PATH])
    silent = second.hops[3]
    assert (silent.ttl, silent.address, silent.asn) == (4, "", 0) and math.isnan(silent.rtt_ms)
    assert second.hops[4][:2] == (5, "203.0.113.65")
    assert second.fingerprint != first.fingerprint
    assert not message.rejected


def test_the_push_layout_and_the_pscheduler_run_give_the_same_trace() -> None:
    esmond = parse_message(TRACE, orjson.dumps(RAW["body"])).traces[0][1]
    pushed = parse_message(TRACE, orjson.dumps(PUSH["body"])).traces
    (result,) = parse_runs([orjson.dumps(RUN)])
    assert isinstance(result, ParsedRun) and isinstance(result.measured, tuple)
    (run,) = result.measured
    assert pushed[0][0] == run.traces[0][0] == FIRST
    for other in (pushed[0][1], run.traces[0][1]):
        assert other.fingerprint == esmond.fingerprint
        assert [(h.ttl, h.address, h.asn) for h in other.hops] == [(t, a, n) for t, a, _, n in PATH]
        assert [h.rtt_ms for h in other.hops] == pytest.approx([h[2] for h in PATH])
    assert run.link == NamedEndpoints(
        "ps-bandwidth.site-a.example.org", "ps-bandwidth.site-b.example.net", "", "", 4
    )


def test_a_hop_that_stays_silent_on_one_run_changes_only_that_hop() -> None:
    hops = RAW["body"]["datapoints"][str(FIRST)]
    silent = [hop if hop["ttl"] != 3 else {"ttl": 3, "query": 1, "success": 0} for hop in hops]
    print_of = read_trace(silent, LIMITS).fingerprint
    assert print_of == path_fingerprint([a for ttl, a, _, _ in PATH if ttl != 3])
    assert print_of != read_trace(hops, LIMITS).fingerprint


def test_later_queries_and_repeated_ttls_are_left_out() -> None:
    hops = [
        {"ttl": 1, "query": 1, "ip": "192.0.2.1", "rtt": 0.5},
        {"ttl": 1, "query": 2, "ip": "192.0.2.99", "rtt": 0.6},
        {"ttl": "2", "query": "1", "ip": "192.0.2.2", "rtt": "1.25"},
        {"ttl": 2, "query": 1, "ip": "192.0.2.98"},
    ]
    trace = read_trace(hops, LIMITS)
    assert [(h.ttl, h.address, h.rtt_ms) for h in trace.hops] == [
        (1, "192.0.2.1", 0.5),
        (2, "192.0.2.2", 1.25),
    ]


def test_an_as_number_alone_and_hops_from_a_first_ttl_above_one() -> None:
    (hop,) = read_trace([{"ttl": 3, "ip": "2001:DB8::1", "as": 64500}], LIMITS).hops
    assert (hop.ttl, hop.address, hop.asn) == (3, "2001:db8::1", 64500) and math.isnan(hop.rtt_ms)
    record = copy.deepcopy(RUN)
    record["test"]["spec"]["first-ttl"] = 3
    (result,) = parse_runs([orjson.dumps(record)])
    assert isinstance(result, ParsedRun) and isinstance(result.measured, tuple)
    assert [hop.ttl for hop in result.measured[0].traces[0][1].hops] == list(range(3, 13))


@pytest.mark.parametrize(
    ("duration", "milliseconds"),
    [("PT0.0015S", 1.5), ("PT0.001234S", 1.234), ("P0D", 0.0), ("PT1M", 60_000.0), ("PT0S", 0.0)],
)
def test_pscheduler_rtts_are_iso_8601_durations(duration: str, milliseconds: float) -> None:
    trace = read_trace([[{"ip": "192.0.2.1", "rtt": duration}]], LIMITS)
    assert trace.hops[0].rtt_ms == pytest.approx(milliseconds)


def value_reason(value: Any) -> RejectReason:
    with pytest.raises(RejectedInput) as refused:
        read_trace(value, LIMITS)
    return refused.value.reason


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ({"ttl": 1}, RejectReason.BAD_VALUE),
        ([], RejectReason.EMPTY),
        ([{"ttl": 1, "query": 1}], RejectReason.EMPTY),  # no hop answered
        ([[]], RejectReason.EMPTY),
        ([{"ttl": 1, "ip": "ps.example.org"}], RejectReason.BAD_VALUE),
        ([{"ttl": 1, "ip": "fe80::1%eth0"}], RejectReason.BAD_VALUE),
        ([{"ttl": 1, "ip": 3232235777}], RejectReason.BAD_VALUE),
        ([{"ip": "192.0.2.1"}], RejectReason.MISSING_FIELD),
        ([{"ttl": 0, "ip": "192.0.2.1"}], RejectReason.BAD_VALUE),
        ([{"ttl": 1.5, "ip": "192.0.2.1"}], RejectReason.BAD_VALUE),
        ([{"ttl": MAX_HOPS + 1, "ip": "192.0.2.1"}], RejectReason.TOO_MANY_HOPS),
        ([{"ttl": 1, "ip": "192.0.2.1", "rtt": -0.1}], RejectReason.BAD_VALUE),
        ([{"ttl": 1, "ip": "192.0.2.1", "rtt": "NaN"}], RejectReason.BAD_VALUE),
        ([{"ttl": 1, "ip": "192.0.2.1", "rtt": 60_001}], RejectReason.BAD_VALUE),
        ([{"ttl": 1, "ip": "192.0.2.1", "as": {"number": -1}}], RejectReason.BAD_VALUE),
        ([{"ttl": 1, "ip": "192.0.2.1", "as": 2**32}], RejectReason.BAD_VALUE),
        ([{"ttl": 1, "ip": "192.0.2.1"}] * 200, RejectReason.TOO_LARGE),
        ([["not a hop"]], RejectReason.BAD_VALUE),
        ([[{"ip": "192.0.2.1", "rtt": 0.5}]], RejectReason.BAD_VALUE),  # pScheduler's are text
        ([[{"ip": "192.0.2.1", "rtt": "PT"}]], RejectReason.BAD_VALUE),
        ([[{"ip": "192.0.2.1", "rtt": "P1Y"}]], RejectReason.BAD_VALUE),
        ([[{"ip": "192.0.2.1", "rtt": "PT2M"}]], RejectReason.BAD_VALUE),
        ([[{"ip": "192.0.2.1"}] * (MAX_HOPS + 1)], RejectReason.TOO_MANY_HOPS),
    ],
)
def test_a_bad_trace_is_refused_with_its_reason(value: Any, reason: RejectReason) -> None:
    assert value_reason(value) is reason


def test_a_bad_trace_on_the_bus_refuses_that_datapoint_only() -> None:
    body = copy.deepcopy(RAW["body"])
    body["datapoints"][str(SECOND)][2]["ip"] = "not an address"
    message = parse_message(TRACE, orjson.dumps(body))
    assert [ts for ts, _ in message.traces] == [FIRST]
    assert [reason for reason, _ in message.rejected] == [RejectReason.BAD_VALUE]


def test_a_trace_run_without_paths_or_with_a_bad_first_ttl_has_its_refusal() -> None:
    for result, spec, reason in [
        ({"succeeded": True, "schema": 1}, {}, RejectReason.MISSING_FIELD),
        ({"succeeded": True, "paths": []}, {}, RejectReason.EMPTY),
        (RUN["result"], {"first-ttl": 0}, RejectReason.BAD_VALUE),
    ]:
        record = copy.deepcopy(RUN) | {"result": result}
        record["test"]["spec"] |= spec
        (run,) = parse_runs([orjson.dumps(record)])
        assert isinstance(run, ParsedRun) and isinstance(run.measured, tuple)
        message: ParsedMessage = run.measured[0]
        assert [r for r, _ in message.rejected] == [reason] and not message.traces


def test_parser_processes_hand_traces_back_unchanged() -> None:
    frames = [(TRACE, orjson.dumps(RAW["body"])), (TRACE, b"[]")]
    results = parse_messages(frames)
    assert decode_results(encode_results(results))[0] == results[0]
    decoded = decode_results(encode_results(results))[1]
    assert isinstance(decoded, RejectedInput) and decoded.reason is RejectReason.NOT_AN_OBJECT
