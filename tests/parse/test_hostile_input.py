"""Hostile input: whatever arrives, the parser and the ingest pipeline refuse it with a named
reason, or accept it; no exception escapes and no datapoint goes unaccounted for.

The accounting invariant checked throughout: a frame either is refused as a whole (exactly one
reason counted, nothing applied) or each of its datapoints is either applied or counted under
exactly one reason. Limits are in `service.parse.limits` and docs/reliability.md.

Hypothesis runs derandomised (fixed seed per test, no example database) so CI sees the same
examples on every run.
"""

from __future__ import annotations

import copy
import math
from collections import Counter
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from service.errors import RejectedInput, RejectReason
from service.ingest.pipeline import IngestPipeline
from service.parse.histogram_batch import MAX_BUCKET_COUNT
from service.parse.limits import InputLimits
from service.parse.perfsonar import SUMMARY_KINDS, parse_message
from service.parse.records import MeasurementKind, ParsedMessage
from service.state.link_state import LinkState
from tests.message_factory import BASE_TS, meta

DELAY = MeasurementKind.DELAY
LOSS = MeasurementKind.LOSS
DELAY_TOPIC = "/topic/perfsonar.raw.histogram-owdelay"
LOSS_TOPIC = "/topic/perfsonar.raw.packet-loss-rate"
KIND_OF_TOPIC = {kind: f"/topic/perfsonar.raw.{kind.value}" for kind in MeasurementKind}
TOPICS = {topic: kind for kind, topic in KIND_OF_TOPIC.items()}
#: A valid value of each event type that is not a histogram or a loss.
RESULT_VALUES = {
    MeasurementKind.THROUGHPUT: 9.4e9,
    MeasurementKind.RETRANSMITS: 12,
    MeasurementKind.TRACE: [{"ttl": 1, "query": 1, "ip": "192.0.2.1", "rtt": 0.3}],
}
NOW = BASE_TS + 120.0  # BASE_TS and the two minutes after it fit the 32-minute window
LIMITS = InputLimits()

#: Reasons the parser may give; unknown_topic, too_old and future come from other layers.
PARSER_REASONS = set(RejectReason) - {
    RejectReason.UNKNOWN_TOPIC,
    RejectReason.TOO_OLD,
    RejectReason.FUTURE,
}
NON_FINITE_TEXTS = ["NaN", "nan", "-nan", "Infinity", "-Infinity", "inf", "-inf", "1e400"]

HOSTILE = settings(
    derandomize=True,
    database=None,
    deadline=None,
    max_examples=150,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)

# --- strategies ----------------------------------------------------------------------------

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20)
)
json_values = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4)
    ),
    max_leaves=12,
)


def is_float_text(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


non_numeric_text = st.text(max_size=30).filter(lambda s: not is_float_text(s))
not_a_dict = json_values.filter(lambda v: v is not None and not isinstance(v, dict))
not_a_string = json_values.filter(lambda v: v is not None and not isinstance(v, str))
not_a_count = (
    st.floats(allow_nan=False, allow_infinity=False)
    | st.integers(min_value=-(2**63), max_value=-1)
    | st.booleans()
    | st.none()
    | st.text(max_size=10)
    | st.lists(json_scalars, max_size=3)
    | st.dictionaries(st.text(max_size=5), json_scalars, max_size=3)
)
not_a_loss = (
    st.booleans()
    | st.none()
    | non_numeric_text
    | st.lists(json_scalars, max_size=3)
    | st.dictionaries(st.text(max_size=5), json_scalars, max_size=3)
)
loss_out_of_range = (
    st.floats(max_value=-1e-12, allow_nan=False, allow_infinity=False)
    | st.floats(min_value=1.000001, allow_nan=False, allow_infinity=False)
    | st.integers(min_value=2, max_value=2**63)
    | st.integers(max_value=-1, min_value=-(2**63))
    | st.sampled_from(NON_FINITE_TEXTS)
)
timestamp_keys = (
    st.integers(0, 2_000_000_000).map(str)
    | st.sampled_from([str(BASE_TS), f"{BASE_TS}.5", f" {BASE_TS} ", "-60", "1e11", "1e12"])
    | st.sampled_from(NON_FINITE_TEXTS)
    | st.text(max_size=12)
)
bucket_keys = (
    st.floats(-2000, 60000, allow_nan=False).map(lambda d: f"{d:.2f}")
    | st.sampled_from(NON_FINITE_TEXTS)
    | st.text(max_size=8)
)
histograms = (
    st.dictionaries(bucket_keys, st.integers(0, 700) | not_a_count, max_size=6)
    | not_a_dict
    | st.none()
)
loss_values = st.floats(0, 1) | st.sampled_from(["0.5", " 0.25 ", "1"]) | loss_out_of_range
datapoint_values = histograms | loss_values | json_values
shaped_meta = st.fixed_dictionaries(
    {},
    optional={
        "source": st.sampled_from(["192.0.2.10", " 192.0.2.10 ", "2001:db8::1", "999.1.1.1"])
        | json_values,
        "destination": st.sampled_from(["198.51.100.20", "::1"]) | json_values,
        "input_source": st.text(max_size=300) | json_values,
        "input_destination": st.text(max_size=30) | json_values,
        "tool_name": json_values,
    },
)
shaped_documents = st.fixed_dictionaries(
    {},
    optional={
        "meta": shaped_meta | json_values,
        "datapoints": st.dictionaries(timestamp_keys, datapoint_values, max_size=6) | json_values,
        "version": json_values,
        "summaries": json_values,
    },
)

# --- helpers ---------------------------------------------------------------------------------


def dumps(document: Any) -> bytes:
    return orjson.dumps(document)


def delay_document() -> dict[str, Any]:
    return {"meta": meta(), "datapoints": {str(BASE_TS): {"2.50": 300, "2.60": 300}}}


def loss_document() -> dict[str, Any]:
    return {"meta": meta(), "datapoints": {str(BASE_TS): 0.01}}


def valid_document(kind: MeasurementKind) -> dict[str, Any]:
    if kind in RESULT_VALUES:
        return {"meta": meta(), "datapoints": {str(BASE_TS): RESULT_VALUES[kind]}}
    return delay_document() if kind is DELAY else loss_document()


def parse_or_reason(kind: MeasurementKind, raw: bytes | str, limits: InputLimits = LIMITS):
    """The ParsedMessage, or the RejectReason of a whole-message rejection. Other exceptions
    propagate and fail the test."""
    try:
        return parse_message(kind, raw, limits)
    except RejectedInput as rejection:
        assert isinstance(rejection.reason, RejectReason)
        assert rejection.reason in PARSER_REASONS
        assert isinstance(rejection.detail, str) and len(rejection.detail) <= 120
        return rejection.reason


def datapoint_count(raw: bytes | str, kind: MeasurementKind | None = None) -> int:
    """The datapoints of a body: its `datapoints`, or for the summary layout each point of a
    summary read and one for each summary refused."""
    document = orjson.loads(raw)
    if "datapoints" in document or kind not in SUMMARY_KINDS:
        return len(document["datapoints"])
    return sum(summary_points(summary, kind) for summary in document["summaries"])


def summary_points(summary: Any, kind: MeasurementKind) -> int:
    """The points a summary counts for: its data when it is read, else 1 (its refusal)."""
    if not isinstance(summary, dict) or summary.get("summary_type") != "average":
        return 1
    data = summary.get("summary_data")
    pairs = isinstance(data, list) and all(
        isinstance(p, list)
        and len(p) == 2
        and not isinstance(p[0], bool)
        and isinstance(p[0], int | float | str)
        for p in data
    )
    return len(data) if pairs and summary.get("event_type", kind.value) == kind.value else 1


def assert_accounted(kind: MeasurementKind, raw: bytes | str) -> ParsedMessage | RejectReason:
    """Parse `raw`; on success every datapoint is either accepted or has a parser reason."""
    outcome = parse_or_reason(kind, raw)
    if isinstance(outcome, ParsedMessage):
        for reason, detail in outcome.rejected:
            assert reason in PARSER_REASONS and isinstance(detail, str)
        assert outcome.accepted_count + len(outcome.rejected) == datapoint_count(raw, kind)
    return outcome


def only_datapoint_reason(kind: MeasurementKind, document: dict[str, Any]) -> RejectReason:
    outcome = parse_or_reason(kind, dumps(document))
    assert isinstance(outcome, ParsedMessage), outcome
    assert outcome.accepted_count == 0
    [(reason, _)] = outcome.rejected
    return reason


def make_pipeline() -> IngestPipeline:
    return IngestPipeline(LinkState(capacity=4), TOPICS, clock=lambda: NOW)


def feed(pipeline: IngestPipeline, topic: str, raw: bytes | str) -> tuple[int, Counter[str]]:
    """handle_frame must not raise; returns (applied, reasons counted for this frame)."""
    before = Counter(pipeline.counters.rejected_by_reason)
    applied_before = pipeline.counters.datapoints_applied
    applied = pipeline.handle_frame(topic, raw)
    assert applied == pipeline.counters.datapoints_applied - applied_before
    counted = Counter(pipeline.counters.rejected_by_reason)
    counted.subtract(before)
    assert set(+counted) <= {reason.value for reason in RejectReason}
    return applied, +counted


def assert_frame_accounted(pipeline: IngestPipeline, topic: str, raw: bytes | str) -> None:
    """Whole-frame refusal counts one reason; otherwise applied + refused = datapoints."""
    kind = TOPICS.get(topic)
    outcome = parse_or_reason(kind, raw) if kind is not None else RejectReason.UNKNOWN_TOPIC
    applied, counted = feed(pipeline, topic, raw)
    if isinstance(outcome, RejectReason):
        assert (applied, counted) == (0, Counter({outcome.value: 1}))
    else:
        assert applied + sum(counted.values()) == datapoint_count(raw, kind)


# --- arbitrary input never escapes ------------------------------------------------------------


@HOSTILE
@given(kind=st.sampled_from(MeasurementKind), document=json_values)
def test_arbitrary_json_documents(kind: MeasurementKind, document: Any) -> None:
    assert_accounted(kind, dumps(document))


@HOSTILE
@given(kind=st.sampled_from(MeasurementKind), document=shaped_documents)
def test_perfsonar_shaped_documents_through_the_pipeline(
    kind: MeasurementKind, document: dict[str, Any]
) -> None:
    assert_frame_accounted(make_pipeline(), KIND_OF_TOPIC[kind], dumps(document))


@HOSTILE
@given(topic=st.sampled_from(sorted(TOPICS)), raw=st.binary(max_size=400))
def test_arbitrary_bytes_through_the_pipeline(topic: str, raw: bytes) -> None:
    assert_frame_accounted(make_pipeline(), topic, raw)


@HOSTILE
@given(
    kind=st.sampled_from(MeasurementKind),
    position=st.integers(0, 10_000),
    junk=st.binary(min_size=1, max_size=4).filter(lambda b: not _is_utf8(b)),
)
def test_non_utf8_bytes_anywhere_in_a_valid_body_are_invalid_json(
    kind: MeasurementKind, position: int, junk: bytes
) -> None:
    raw = dumps(valid_document(kind))
    cut = position % (len(raw) + 1)
    assert parse_or_reason(kind, raw[:cut] + junk + raw[cut:]) is RejectReason.INVALID_JSON


def _is_utf8(raw: bytes) -> bool:
    try:
        raw.decode()
    except UnicodeDecodeError:
        return False
    return True


@HOSTILE
@given(kind=st.sampled_from(MeasurementKind), text=st.text(max_size=200))
def test_str_bodies_including_lone_surrogates(kind: MeasurementKind, text: str) -> None:
    pipeline = make_pipeline()
    assert_frame_accounted(pipeline, KIND_OF_TOPIC[kind], text)
    assert_frame_accounted(pipeline, KIND_OF_TOPIC[kind], '{"meta": "\ud800' + text)


@HOSTILE
@given(topic=st.text(max_size=100).filter(lambda t: t not in TOPICS), raw=st.binary(max_size=50))
def test_unknown_topics_are_refused_before_parsing(topic: str, raw: bytes) -> None:
    pipeline = make_pipeline()
    assert feed(pipeline, topic, raw) == (0, Counter({"unknown_topic": 1}))
    assert feed(pipeline, topic, dumps(loss_document())) == (0, Counter({"unknown_topic": 1}))
    assert pipeline.counters.messages_by_topic == {"other": 2}
    assert len(pipeline.state) == 0


# --- a wrong type at every field ----------------------------------------------------------------


@HOSTILE
@given(kind=st.sampled_from(MeasurementKind), value=not_a_dict)
def test_meta_not_an_object(kind: MeasurementKind, value: Any) -> None:
    document = valid_document(kind) | {"meta": value}
    assert parse_or_reason(kind, dumps(document)) is RejectReason.BAD_VALUE


@HOSTILE
@given(kind=st.sampled_from(MeasurementKind), value=not_a_dict)
def test_datapoints_not_an_object(kind: MeasurementKind, value: Any) -> None:
    document = valid_document(kind) | {"datapoints": value}
    assert parse_or_reason(kind, dumps(document)) is RejectReason.BAD_VALUE


@pytest.mark.parametrize("field", ["meta", "datapoints"])
@pytest.mark.parametrize("kind", list(MeasurementKind))
def test_missing_or_null_top_level_field(kind: MeasurementKind, field: str) -> None:
    document = valid_document(kind)
    assert parse_or_reason(kind, dumps(document | {field: None})) is RejectReason.MISSING_FIELD
    del document[field]
    assert parse_or_reason(kind, dumps(document)) is RejectReason.MISSING_FIELD


@HOSTILE
@given(
    kind=st.sampled_from(MeasurementKind),
    field=st.sampled_from(["source", "destination"]),
    value=not_a_string | non_numeric_text,
)
def test_endpoint_ip_of_wrong_type_or_not_an_address(
    kind: MeasurementKind, field: str, value: Any
) -> None:
    document = valid_document(kind)
    document["meta"][field] = value
    assert parse_or_reason(kind, dumps(document)) is RejectReason.BAD_VALUE


@HOSTILE
@given(
    kind=st.sampled_from(MeasurementKind),
    field=st.sampled_from(["input_source", "input_destination"]),
    value=not_a_string,
)
def test_host_name_of_wrong_type(kind: MeasurementKind, field: str, value: Any) -> None:
    document = valid_document(kind)
    document["meta"][field] = value
    assert parse_or_reason(kind, dumps(document)) is RejectReason.BAD_VALUE


@HOSTILE
@given(kind=st.sampled_from(MeasurementKind), key=non_numeric_text)
def test_timestamp_key_not_a_number(kind: MeasurementKind, key: str) -> None:
    document = valid_document(kind)
    document["datapoints"] = {key: next(iter(document["datapoints"].values()))}
    assert only_datapoint_reason(kind, document) is RejectReason.BAD_VALUE


@pytest.mark.parametrize("key", [*NON_FINITE_TEXTS, "-1", "-0.5", "1e11.5", "100000000001"])
@pytest.mark.parametrize("kind", list(MeasurementKind))
def test_timestamp_key_not_finite_or_out_of_range(kind: MeasurementKind, key: str) -> None:
    document = valid_document(kind)
    document["datapoints"] = {key: next(iter(document["datapoints"].values()))}
    assert only_datapoint_reason(kind, document) is RejectReason.BAD_VALUE


@HOSTILE
@given(value=not_a_dict | st.none())
def test_histogram_not_an_object(value: Any) -> None:
    document = delay_document()
    document["datapoints"][str(BASE_TS)] = value
    assert only_datapoint_reason(DELAY, document) is RejectReason.BAD_VALUE


@HOSTILE
@given(key=non_numeric_text | st.sampled_from(NON_FINITE_TEXTS))
def test_bucket_key_not_a_finite_number(key: str) -> None:
    document = delay_document()
    document["datapoints"][str(BASE_TS)] = {"2.50": 300, key: 300}
    assert only_datapoint_reason(DELAY, document) is RejectReason.BAD_VALUE


@HOSTILE
@given(count=not_a_count)
def test_bucket_count_not_a_count(count: Any) -> None:
    """Counts must be non-negative JSON integers: floats (even 600.0), negatives, booleans,
    strings, null, lists and objects are refused."""
    document = delay_document()
    document["datapoints"][str(BASE_TS)] = {"2.50": 300, "2.60": count}
    assert only_datapoint_reason(DELAY, document) is RejectReason.BAD_VALUE


def test_bucket_count_limit() -> None:
    document = delay_document()
    document["datapoints"][str(BASE_TS)] = {"2.5": MAX_BUCKET_COUNT}
    assert isinstance(parse_or_reason(DELAY, dumps(document)), ParsedMessage)
    for count in (MAX_BUCKET_COUNT + 1, 2**64 - 1):
        document["datapoints"][str(BASE_TS)] = {"2.5": count}
        assert only_datapoint_reason(DELAY, document) is RejectReason.BAD_VALUE
    huge = dumps(document).replace(b"%d" % (2**64 - 1), b"%d" % 2**70)  # decodes as a float
    message = parse_or_reason(DELAY, huge)
    assert isinstance(message, ParsedMessage)
    assert [reason for reason, _ in message.rejected] == [RejectReason.BAD_VALUE]


@HOSTILE
@given(value=not_a_loss)
def test_loss_not_a_number(value: Any) -> None:
    document = loss_document()
    document["datapoints"][str(BASE_TS)] = value
    assert only_datapoint_reason(LOSS, document) is RejectReason.BAD_VALUE


@HOSTILE
@given(value=loss_out_of_range)
def test_loss_out_of_range_or_not_finite(value: Any) -> None:
    document = loss_document()
    document["datapoints"][str(BASE_TS)] = value
    assert only_datapoint_reason(LOSS, document) is RejectReason.LOSS_OUT_OF_RANGE


@HOSTILE
@given(kind=st.sampled_from(MeasurementKind), value=st.floats(0, 1) | st.integers(0, 1))
def test_a_histogram_on_the_loss_topic_and_a_number_on_the_delay_topic(
    kind: MeasurementKind, value: float
) -> None:
    swapped = {str(BASE_TS): {"2.5": 600} if kind is not DELAY else value}
    reason = only_datapoint_reason(kind, valid_document(kind) | {"datapoints": swapped})
    assert reason is RejectReason.BAD_VALUE


# --- NaN and Infinity ----------------------------------------------------------------------------


@pytest.mark.parametrize("literal", [b"NaN", b"Infinity", b"-Infinity", b"nan", b"1e400"])
@pytest.mark.parametrize("kind", list(MeasurementKind))
def test_raw_nan_and_infinity_literals_are_invalid_json(kind: MeasurementKind, literal: bytes):
    raw = dumps(valid_document(kind)).replace(b"0.01", literal).replace(b"300}", literal + b"}")
    for value in (b"9400000000.0}", b"12}", b"0.3}"):  # the RESULT_VALUES, each before a brace
        raw = raw.replace(b":" + value, b":" + literal + b"}")
    assert literal in raw
    assert parse_or_reason(kind, raw) is RejectReason.INVALID_JSON


@pytest.mark.parametrize("text", NON_FINITE_TEXTS)
def test_non_finite_strings_at_every_numeric_position(text: str) -> None:
    with_count = delay_document()
    with_count["datapoints"][str(BASE_TS)] = {"2.50": text}
    with_key = delay_document()
    with_key["datapoints"][str(BASE_TS)] = {text: 600}
    with_loss = loss_document()
    with_loss["datapoints"][str(BASE_TS)] = text
    assert only_datapoint_reason(DELAY, with_count) is RejectReason.BAD_VALUE
    assert only_datapoint_reason(DELAY, with_key) is RejectReason.BAD_VALUE
    assert only_datapoint_reason(LOSS, with_loss) is RejectReason.LOSS_OUT_OF_RANGE


# --- limits -------------------------------------------------------------------------------------


def test_empty_histogram_and_empty_datapoints() -> None:
    document = delay_document()
    document["datapoints"][str(BASE_TS)] = {}
    assert only_datapoint_reason(DELAY, document) is RejectReason.EMPTY
    for kind in MeasurementKind:
        empty = valid_document(kind) | {"datapoints": {}}
        assert parse_or_reason(kind, dumps(empty)) is RejectReason.EMPTY


def test_histogram_with_only_zero_counts_or_implausible_delays_is_a_clock_error() -> None:
    for buckets in ({"2.5": 0}, {"-1000": 300, "50000": 300}, {"-5000.5": 1, "99999": 599}):
        document = delay_document()
        document["datapoints"][str(BASE_TS)] = buckets
        assert only_datapoint_reason(DELAY, document) is RejectReason.CLOCK_ERROR


def raw_histogram_body(buckets: int) -> bytes:
    """A delay body with one datapoint of `buckets` one-packet buckets, built as bytes."""
    head = dumps({"meta": meta()})[:-1] + b',"datapoints":{"%d":{' % BASE_TS
    return head + b",".join(b'"%d.%02d":1' % divmod(i, 100) for i in range(buckets)) + b"}}}"


@pytest.fixture(scope="module")
def million_buckets() -> bytes:
    return raw_histogram_body(1_000_000)


def test_a_million_bucket_histogram_is_refused_by_size_before_parsing(million_buckets) -> None:
    assert len(million_buckets) > LIMITS.max_body_bytes
    assert parse_or_reason(DELAY, million_buckets) is RejectReason.TOO_LARGE


def test_a_million_bucket_histogram_under_a_larger_body_limit_hits_the_bucket_limit(
    million_buckets,
) -> None:
    raw = million_buckets
    roomy = InputLimits(max_body_bytes=len(raw))
    message = parse_or_reason(DELAY, raw, roomy)
    assert isinstance(message, ParsedMessage)
    assert message.accepted_count == 0
    assert message.rejected == [(RejectReason.TOO_LARGE, "1000000 buckets")]


def test_bucket_limit_is_inclusive() -> None:
    at_limit = raw_histogram_body(LIMITS.max_buckets)
    over = raw_histogram_body(LIMITS.max_buckets + 1)
    assert len(over) < LIMITS.max_body_bytes
    accepted = parse_or_reason(DELAY, at_limit)
    assert isinstance(accepted, ParsedMessage) and accepted.delays[0][1].packets == 10_000
    assert only_datapoint_reason(DELAY, orjson.loads(over)) is RejectReason.TOO_LARGE


def padded_to(raw: bytes, size: int) -> bytes:
    """`raw` (a JSON object) padded with insignificant whitespace to exactly `size` bytes."""
    return raw[:-1] + b" " * (size - len(raw)) + b"}"


@pytest.mark.parametrize("kind", list(MeasurementKind))
def test_body_limit_is_inclusive_and_measured_in_bytes(kind: MeasurementKind) -> None:
    raw = dumps(valid_document(kind))
    at_limit = padded_to(raw, LIMITS.max_body_bytes)
    assert isinstance(parse_or_reason(kind, at_limit), ParsedMessage)
    over = padded_to(raw, LIMITS.max_body_bytes + 1)
    assert parse_or_reason(kind, over) is RejectReason.TOO_LARGE
    # As a str, the limit counts UTF-8 bytes, not characters: 'é' is two bytes.
    text = at_limit.decode()
    accented = text[:-2] + "é}"
    assert len(accented) == len(text) and len(accented.encode()) == LIMITS.max_body_bytes + 1
    assert parse_or_reason(kind, accented) is RejectReason.TOO_LARGE


@pytest.mark.parametrize("kind", list(MeasurementKind))
def test_datapoint_limit(kind: MeasurementKind) -> None:
    value = next(iter(valid_document(kind)["datapoints"].values()))
    hundred = {str(BASE_TS + i): value for i in range(LIMITS.max_datapoints)}
    ok = parse_or_reason(kind, dumps(valid_document(kind) | {"datapoints": hundred}))
    assert isinstance(ok, ParsedMessage) and ok.accepted_count == 100
    over = hundred | {str(BASE_TS + 100): value}
    reason = parse_or_reason(kind, dumps(valid_document(kind) | {"datapoints": over}))
    assert reason is RejectReason.TOO_MANY_DATAPOINTS


def nested(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


@pytest.mark.parametrize("kind", list(MeasurementKind))
def test_nesting_deeper_than_1024_is_invalid_json(kind: MeasurementKind) -> None:
    """orjson's fixed depth limit counts the top-level object: 1 + 1023 levels parse."""
    raw = dumps(valid_document(kind))
    deep = raw[:-1] + b',"x":' + nested(1023) + b"}"
    too_deep = raw[:-1] + b',"x":' + nested(1024) + b"}"
    assert isinstance(parse_or_reason(kind, deep), ParsedMessage)  # unknown field, ignored
    assert parse_or_reason(kind, too_deep) is RejectReason.INVALID_JSON


@pytest.mark.parametrize("kind", list(MeasurementKind))
def test_nesting_where_a_scalar_is_read_is_a_bad_value(kind: MeasurementKind) -> None:
    """Parsing reads fixed depths; a deep structure where a scalar belongs is refused without
    being walked (or printed: a repr of 1000 levels would overflow the stack)."""

    def with_deep(document: dict[str, Any]) -> bytes:
        return dumps(document).replace(b'"DEEP"', nested(1000))

    for field in ("source", "input_source"):
        document = valid_document(kind)
        document["meta"][field] = "DEEP"
        assert parse_or_reason(kind, with_deep(document)) is RejectReason.BAD_VALUE
    values = ["DEEP", {"2.5": "DEEP"}] if kind is DELAY else ["DEEP"]
    for value in values:
        document = valid_document(kind)
        document["datapoints"][str(BASE_TS)] = value
        message = parse_or_reason(kind, with_deep(document))
        assert isinstance(message, ParsedMessage)
        assert [reason for reason, _ in message.rejected] == [RejectReason.BAD_VALUE]


LONG = LIMITS.max_string_length + 1


def test_meta_strings_over_the_length_limit() -> None:
    for field, value in [
        ("source", " " * LONG + "192.0.2.10"),
        ("destination", "0" * LONG),
        ("input_source", "h" * LONG),
        ("input_destination", "h" * LONG),
    ]:
        document = loss_document()
        document["meta"][field] = value
        assert parse_or_reason(LOSS, dumps(document)) is RejectReason.BAD_VALUE
    document = loss_document()
    document["meta"]["input_source"] = "h" * LIMITS.max_string_length
    assert isinstance(parse_or_reason(LOSS, dumps(document)), ParsedMessage)


def test_numeric_strings_over_the_length_limit() -> None:
    """Timestamps, bucket delays and loss strings are strings too: a number padded past the
    limit (still a valid float to Python) is refused, not parsed."""
    padded_ts = "0" * LONG + str(BASE_TS)
    long_key = delay_document()
    long_key["datapoints"] = {padded_ts: {"2.5": 600}}
    long_bucket = delay_document()
    long_bucket["datapoints"][str(BASE_TS)] = {"2.5" + "0" * LONG: 600}
    long_loss = loss_document()
    long_loss["datapoints"][str(BASE_TS)] = "0." + "0" * LONG + "1"
    assert float(padded_ts) == BASE_TS
    assert only_datapoint_reason(DELAY, long_key) is RejectReason.BAD_VALUE
    assert only_datapoint_reason(DELAY, long_bucket) is RejectReason.BAD_VALUE
    assert only_datapoint_reason(LOSS, long_loss) is RejectReason.BAD_VALUE


def test_unknown_fields_are_ignored() -> None:
    for kind in MeasurementKind:
        document = valid_document(kind)
        document["meta"] |= {"extra": {"a": [1, {"b": None}]}, "ts_start": 5, "push": True}
        document |= {"version": 2, "future_field": ["x"] * 100}
        outcome = parse_or_reason(kind, dumps(document))
        assert isinstance(outcome, ParsedMessage) and outcome.accepted_count == 1


# --- many bad datapoints: one count each -------------------------------------------------------


def test_several_bad_datapoints_count_one_reason_each() -> None:
    pipeline = make_pipeline()
    document = loss_document()
    document["datapoints"] = {
        str(BASE_TS): 0.5,  # applied
        str(BASE_TS + 60): 1.5,  # loss_out_of_range
        str(BASE_TS + 61): -0.1,  # loss_out_of_range
        "abc": 0.1,  # bad_value
        str(BASE_TS + 120): True,  # bad_value
        str(BASE_TS - 3600): 0.1,  # too_old
        str(BASE_TS + 3600): 0.1,  # future
    }
    applied, counted = feed(pipeline, LOSS_TOPIC, dumps(document))
    assert applied == 1
    assert counted == {"loss_out_of_range": 2, "bad_value": 2, "too_old": 1, "future": 1}


@HOSTILE
@given(
    kind=st.sampled_from(MeasurementKind),
    values=st.lists(datapoint_values, min_size=1, max_size=20),
    offsets=st.lists(st.integers(-7200, 7200), min_size=20, max_size=20),
)
def test_mixed_datapoints_are_each_accounted_for(
    kind: MeasurementKind, values: list[Any], offsets: list[int]
) -> None:
    document = valid_document(kind)
    timestamps = [str(BASE_TS + offset) for offset in offsets[: len(values)]]
    document["datapoints"] = dict(zip(timestamps, values, strict=True))
    assert_frame_accounted(make_pipeline(), KIND_OF_TOPIC[kind], dumps(document))


@HOSTILE
@given(
    frames=st.lists(
        st.tuples(
            st.sampled_from([*sorted(TOPICS), "/topic/elsewhere"]),
            shaped_documents.map(dumps) | st.binary(max_size=100),
        ),
        min_size=1,
        max_size=12,
    )
)
def test_a_batch_of_hostile_frames_loses_nothing(frames: list[tuple[str, bytes]]) -> None:
    """The batcher hands frames over in batches; one bad frame must not cost the others."""
    expected = 0
    for topic, raw in frames:
        kind = TOPICS.get(topic)
        outcome = parse_or_reason(kind, raw) if kind is not None else RejectReason.UNKNOWN_TOPIC
        expected += 1 if isinstance(outcome, RejectReason) else datapoint_count(raw)
    pipeline = make_pipeline()
    applied = pipeline.handle_frames([(topic, raw, None) for topic, raw in frames])
    counters = pipeline.counters
    assert applied == counters.datapoints_applied
    assert applied + sum(counters.rejected_by_reason.values()) == expected
    assert sum(counters.messages_by_topic.values()) == len(frames)


def test_state_never_holds_a_non_finite_value_after_hostile_input() -> None:
    pipeline = make_pipeline()
    hostile = [
        {str(BASE_TS): {"1e308": 600}},
        {str(BASE_TS): {"49999.99": 2**63, "-999.99": 2**63}},
        {str(BASE_TS): {"1e-320": 1}},
    ]
    for datapoints in hostile:
        pipeline.handle_frame(DELAY_TOPIC, dumps(delay_document() | {"datapoints": datapoints}))
    view = pipeline.state.view(NOW)
    for series in view.series.values():
        assert not any(math.isinf(x) for x in series.ravel().tolist())


def test_hostile_frames_do_not_disturb_good_ones() -> None:
    pipeline = make_pipeline()
    good = copy.deepcopy(loss_document())
    frames = [b"", b"\x00", b"{", b"[]", b'"x"', b"1e400", nested(2000), dumps(good)]
    results = [pipeline.handle_frame(LOSS_TOPIC, raw) for raw in frames]
    assert results == [0, 0, 0, 0, 0, 0, 0, 1]
    assert pipeline.counters.rejected_by_reason == {"invalid_json": 5, "not_an_object": 2}
