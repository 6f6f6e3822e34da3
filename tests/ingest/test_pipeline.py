"""IngestPipeline.handle_frame with a fixed clock, and the rate-limited reject log."""

from __future__ import annotations

import logging

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from service.errors import RejectReason
from service.ingest.pipeline import IngestPipeline
from service.ingest.reject_log import RateLimitedRejectLog
from service.parse.limits import InputLimits
from service.parse.records import MeasurementKind
from service.state.link_state import LinkState
from tests.clock import TestClock
from tests.message_factory import body, sample_body

DELAY_TOPIC = "/topic/perfsonar.raw.histogram-owdelay"  # the perfSONAR raw delay topic
LOSS_TOPIC = "/topic/perfsonar.raw.packet-loss-rate"
NOW = 1_700_000_200.0  # all three loss-sample datapoints and the delay sample fit the window
TOPICS = {DELAY_TOPIC: MeasurementKind.DELAY, LOSS_TOPIC: MeasurementKind.LOSS}


def make_pipeline(**kwargs) -> IngestPipeline:
    return IngestPipeline(LinkState(), TOPICS, clock=lambda: NOW, **kwargs)


def test_valid_frames_are_applied_and_counted_by_topic() -> None:
    pipeline = make_pipeline()
    assert pipeline.handle_frame(DELAY_TOPIC, sample_body("owdelay-histogram-real.json")) == 1
    assert pipeline.handle_frame(LOSS_TOPIC, sample_body("packet-loss-rate.json")) == 3
    assert pipeline.handle_frame(DELAY_TOPIC, sample_body("owdelay-v2-push.json")) == 1
    counters = pipeline.counters
    assert counters.messages_by_topic == {DELAY_TOPIC: 2, LOSS_TOPIC: 1}
    assert counters.datapoints_applied == 5
    assert counters.rejected_by_reason == {}
    assert counters.last_message_at == NOW
    assert len(pipeline.state) == 2


def test_unknown_topic() -> None:
    pipeline = make_pipeline()
    raw = sample_body("packet-loss-rate.json")
    assert pipeline.handle_frame("/topic/perfsonar.raw.throughput", raw) == 0
    assert pipeline.counters.messages_by_topic == {"other": 1}
    assert pipeline.counters.rejected_by_reason == {"unknown_topic": 1}
    assert len(pipeline.state) == 0


def test_invalid_json() -> None:
    pipeline = make_pipeline()
    assert pipeline.handle_frame(LOSS_TOPIC, b'{"meta": ') == 0
    assert pipeline.handle_frame(LOSS_TOPIC, b"\xff\x00garbage") == 0
    assert pipeline.counters.messages_by_topic == {LOSS_TOPIC: 2}
    assert pipeline.counters.rejected_by_reason == {"invalid_json": 2}
    assert pipeline.counters.last_message_at == NOW


def test_too_old_and_future_datapoints_are_counted_per_datapoint() -> None:
    pipeline = make_pipeline()
    now = int(NOW)
    raw = body({now - 3600: 0.1, now - 7200: 0.2, now + 3600: 0.3, now - 60: 0.4})
    assert pipeline.handle_frame(LOSS_TOPIC, raw) == 1
    assert pipeline.counters.rejected_by_reason == {"too_old": 2, "future": 1}
    assert pipeline.counters.datapoints_applied == 1
    assert pipeline.counters.messages_by_topic == {LOSS_TOPIC: 1}


def test_parser_datapoint_rejections_are_counted_beside_applied_ones() -> None:
    pipeline = make_pipeline()
    now = int(NOW)
    raw = body({now - 120: 0.1, now - 60: 1.5, "x": 0.2})
    assert pipeline.handle_frame(LOSS_TOPIC, raw) == 1
    assert pipeline.counters.rejected_by_reason == {"loss_out_of_range": 1, "bad_value": 1}


def test_whole_message_rejection_uses_the_limits() -> None:
    pipeline = make_pipeline(limits=InputLimits(max_body_bytes=10))
    assert pipeline.handle_frame(LOSS_TOPIC, sample_body("packet-loss-rate.json")) == 0
    assert pipeline.counters.rejected_by_reason == {"too_large": 1}


def test_dropped_clock_error_packets_are_counted() -> None:
    pipeline = make_pipeline()
    now = int(NOW)
    raw = body({now - 60: {"-2000": 3, "3.5": 597}})
    assert pipeline.handle_frame(DELAY_TOPIC, raw) == 1
    assert pipeline.counters.clock_error_packets == 3


def test_each_frame_is_stamped_with_the_clock() -> None:
    times = iter([100.0, 200.0])
    pipeline = IngestPipeline(LinkState(), TOPICS, clock=lambda: next(times))
    pipeline.handle_frame("/topic/other", b"{}")
    assert pipeline.counters.last_message_at == 100.0
    pipeline.handle_frame(LOSS_TOPIC, b"[]")
    assert pipeline.counters.last_message_at == 200.0


@settings(max_examples=300, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    frames=st.lists(
        st.tuples(
            st.sampled_from([DELAY_TOPIC, LOSS_TOPIC, "/topic/x"]),
            st.binary(max_size=300) | st.text(max_size=100),
        ),
        min_size=1,
        max_size=5,
    )
)
def test_never_raises_on_garbage(frames: list[tuple[str, bytes | str]]) -> None:
    pipeline = make_pipeline()
    for destination, raw in frames:
        assert pipeline.handle_frame(destination, raw) == 0
    assert sum(pipeline.counters.messages_by_topic.values()) == len(frames)
    assert sum(pipeline.counters.rejected_by_reason.values()) >= len(frames)
    assert set(pipeline.counters.rejected_by_reason) <= {r.value for r in RejectReason}


json_leaf = (
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=6)
    | st.sampled_from(["NaN", "inf", "2.57", "-5000", "192.0.2.1", "::1", "1700000100"])
)
json_value = st.recursive(
    json_leaf,
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(
            st.sampled_from(["2.5", "-3", "60000", "1700000100", "1700000160", "x"])
            | st.text(max_size=5),
            children,
            max_size=4,
        )
    ),
    max_leaves=10,
)
meta_value = st.fixed_dictionaries(
    {
        "source": st.sampled_from(["192.0.2.1", "2001:db8::1", "bad"]) | json_leaf,
        "destination": st.sampled_from(["192.0.2.2"]) | json_leaf,
    },
    optional={"input_source": json_leaf, "input_destination": json_leaf},
)


@settings(max_examples=400)
@given(
    topic=st.sampled_from([DELAY_TOPIC, LOSS_TOPIC]),
    meta_object=meta_value | json_value,
    datapoints=json_value,
)
def test_never_raises_on_structured_nonsense(topic: str, meta_object, datapoints) -> None:
    pipeline = make_pipeline()
    applied = pipeline.handle_frame(
        topic, orjson.dumps({"meta": meta_object, "datapoints": datapoints})
    )
    assert applied == pipeline.counters.datapoints_applied
    assert pipeline.counters.messages_by_topic == {topic: 1}


# --- rate-limited reject log -----------------------------------------------------------------


@pytest.fixture
def reject_logger(caplog: pytest.LogCaptureFixture) -> logging.Logger:
    caplog.set_level(logging.WARNING, logger="test.nettel.rejects")
    return logging.getLogger("test.nettel.rejects")


def test_reject_log_logs_a_reason_once_per_period(
    caplog: pytest.LogCaptureFixture, reject_logger: logging.Logger, clock: TestClock
) -> None:
    log = RateLimitedRejectLog(reject_logger, period_seconds=60.0, clock=clock)
    assert log.record(RejectReason.BAD_VALUE, "first", LOSS_TOPIC) is True
    clock.now += 10
    assert log.record(RejectReason.BAD_VALUE, "second", LOSS_TOPIC) is False
    clock.now += 49.9
    assert log.record(RejectReason.BAD_VALUE, "third", LOSS_TOPIC) is False
    assert log.record(RejectReason.TOO_OLD, "other reason", DELAY_TOPIC) is True
    clock.now = 1060.0
    assert log.record(RejectReason.BAD_VALUE, "fourth", LOSS_TOPIC) is True
    clock.now += 1
    assert log.record(RejectReason.BAD_VALUE, "fifth", LOSS_TOPIC) is False

    records = [r for r in caplog.records if r.name == "test.nettel.rejects"]
    assert [(r.reason, r.detail, r.topic, r.suppressed_since_last) for r in records] == [
        ("bad_value", "first", LOSS_TOPIC, 0),
        ("too_old", "other reason", DELAY_TOPIC, 0),
        ("bad_value", "fourth", LOSS_TOPIC, 2),
    ]
    assert all(r.levelno == logging.WARNING for r in records)
    assert all(r.getMessage() == "rejected input" for r in records)


def test_pipeline_rejects_are_logged_rate_limited(
    caplog: pytest.LogCaptureFixture, reject_logger: logging.Logger
) -> None:
    pipeline = make_pipeline(log=reject_logger)
    for _ in range(5):
        pipeline.handle_frame(LOSS_TOPIC, b"not json")
    pipeline.handle_frame("/topic/unknown", b"{}")
    records = [r for r in caplog.records if r.name == "test.nettel.rejects"]
    assert [(r.reason, r.topic) for r in records] == [
        ("invalid_json", LOSS_TOPIC),
        ("unknown_topic", "/topic/unknown"),
    ]
    assert pipeline.counters.rejected_by_reason == {"invalid_json": 5, "unknown_topic": 1}
