"""10,000 hostile messages interleaved with 1,000 valid ones through the broker subscription (the
in-memory broker as ActiveMQ, then as RabbitMQ; what the wire does to hostile frames, endless
or over the bound, is tests/broker/test_frame_limits.py's).

Every hostile kind carries known reasons (a message with several bad datapoints counts one per
datapoint), so at the end `nettel_rejected_total{reason}` must equal, reason by reason, exactly
what was sent; every valid datapoint must be in /costmatrix with its exact value, no hostile
message may have created a link, and the service must still be up.

Publishing uses several connections on threads, as several producers would.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import httpx
import orjson
import pytest

from devtools.metrics_reader import sample_value, samples_named
from devtools.stomp_client import BrokerClient
from devtools.waiting import wait_for
from service.broker.memory_broker import MemoryBroker
from service.parse.limits import InputLimits
from tests.integration.wire import current_minute_ts, get_json

pytestmark = pytest.mark.slow

DELAY = "/topic/perfsonar.raw.histogram-owdelay"
LOSS = "/topic/perfsonar.raw.packet-loss-rate"
HOSTILE_COUNT = 10_000
VALID_COUNT = 1_000
PUBLISHERS = 4
VALID_DESTINATION = "192.0.2.77"
HOSTILE_DESTINATION = "192.0.2.66"
LIMITS = InputLimits()


@dataclass(frozen=True)
class Kind:
    """One hostile message: where it goes, its body, and the reasons it must be counted under."""

    name: str
    topic: str
    body: bytes
    reasons: Counter[str]


@dataclass
class Plan:
    messages: list[tuple[str, bytes]] = field(default_factory=list)
    reasons: Counter[str] = field(default_factory=Counter)
    per_topic: Counter[str] = field(default_factory=Counter)
    kinds: Counter[str] = field(default_factory=Counter)
    valid: dict[str, tuple[str, float]] = field(default_factory=dict)  # source -> (topic, value)


# --- message bodies ----------------------------------------------------------------------------


def meta(source: str, destination: str = HOSTILE_DESTINATION, **extra: object) -> dict:
    return {
        "subject_type": "point-to-point",
        "source": source,
        "destination": destination,
        "input_source": f"ps.{source}.example.org",
        "input_destination": f"ps.{destination}.example.org",
        "tool_name": "powstream",
        **extra,
    }


def document(datapoints: object, **meta_fields: object) -> dict:
    return {"meta": meta("10.66.0.1") | meta_fields, "datapoints": datapoints}


def dumps(value: object) -> bytes:
    return orjson.dumps(value)


def padded(raw: bytes, size: int) -> bytes:
    """A JSON object padded with insignificant whitespace to exactly `size` bytes."""
    return raw[:-1] + b" " * (size - len(raw)) + b"}"


def small_kinds(ts: int) -> list[Kind]:
    """Hostile messages of every sort, each a few hundred bytes; `ts` is a recent minute."""
    old, future = ts - 3 * 3600, ts + 3600
    good_loss = dumps(document({str(ts): 0.5}))
    good_delay = dumps(document({str(ts): {"2.50": 600}}))
    one = Counter

    def body(datapoints: object, **meta_fields: object) -> bytes:
        return dumps(document(datapoints, **meta_fields))

    kinds = [
        ("truncated_json", LOSS, good_loss[:-7], one(invalid_json=1)),
        ("truncated_histogram", DELAY, good_delay[:-3], one(invalid_json=1)),
        (
            "non_utf8",
            LOSS,
            good_loss.replace(b"example", b"exa\xff\xfeple", 1),
            one(invalid_json=1),
        ),
        ("raw_nan", LOSS, good_loss.replace(b"0.5", b"NaN"), one(invalid_json=1)),
        ("deep_nesting", LOSS, b'{"x":' + b"[" * 1100 + b"]" * 1100 + b"}", one(invalid_json=1)),
        ("binary_noise", DELAY, bytes(range(256)) * 2, one(invalid_json=1)),
        ("array", LOSS, b"[1, 2, 3]", one(not_an_object=1)),
        ("string", DELAY, b'"histogram"', one(not_an_object=1)),
        ("no_meta", LOSS, dumps({"datapoints": {str(ts): 0.1}}), one(missing_field=1)),
        ("null_source", LOSS, body({str(ts): 0.1}, source=None), one(missing_field=1)),
        ("meta_is_list", LOSS, dumps({"meta": [1], "datapoints": {}}), one(bad_value=1)),
        ("source_is_number", LOSS, body({str(ts): 0.1}, source=12345), one(bad_value=1)),
        (
            "source_not_ip",
            DELAY,
            body({str(ts): {"2.5": 600}}, source="ps.cern.ch"),
            one(bad_value=1),
        ),
        ("host_too_long", LOSS, body({str(ts): 0.1}, input_source="h" * 300), one(bad_value=1)),
        ("datapoints_is_list", LOSS, body([0.1, 0.2]), one(bad_value=1)),
        ("ts_not_number", LOSS, body({"yesterday": 0.1}), one(bad_value=1)),
        ("ts_nan", DELAY, body({"NaN": {"2.5": 600}}), one(bad_value=1)),
        ("histogram_is_string", DELAY, body({str(ts): "2.5ms"}), one(bad_value=1)),
        ("bucket_key_inf", DELAY, body({str(ts): {"Infinity": 600}}), one(bad_value=1)),
        ("float_count", DELAY, body({str(ts): {"2.5": 600.0}}), one(bad_value=1)),
        ("negative_count", DELAY, body({str(ts): {"2.5": -600}}), one(bad_value=1)),
        ("loss_is_object", LOSS, body({str(ts): {"loss": 0.1}}), one(bad_value=1)),
        ("loss_1_5", LOSS, body({str(ts): 1.5}), one(loss_out_of_range=1)),
        ("loss_negative", LOSS, body({str(ts): -0.01}), one(loss_out_of_range=1)),
        ("loss_nan_text", LOSS, body({str(ts): "NaN"}), one(loss_out_of_range=1)),
        ("too_old", LOSS, body({str(old): 0.1}), one(too_old=1)),
        ("future", DELAY, body({str(future): {"2.5": 600}}), one(future=1)),
        ("clock_error", DELAY, body({str(ts): {"-5000": 300, "60000": 300}}), one(clock_error=1)),
        ("no_datapoints", LOSS, body({}), one(empty=1)),
        ("empty_histogram", DELAY, body({str(ts): {}}), one(empty=1)),
        (
            "too_many_datapoints",
            LOSS,
            body({str(ts - i): 0.1 for i in range(LIMITS.max_datapoints + 1)}),
            one(too_many_datapoints=1),
        ),
        (
            "several_bad_datapoints",
            LOSS,
            body({str(old): 0.1, str(future): 0.1, "x": 0.1, str(ts): 2.0, str(ts + 1): "?"}),
            one(too_old=1, future=1, bad_value=2, loss_out_of_range=1),
        ),
        (
            "unknown_fields_and_bad_values",
            DELAY,
            dumps(
                {
                    "version": 2,
                    "extra": {"deep": [[[[{"a": None}]]]], "list": list(range(50))},
                    "meta": meta("10.66.0.2", push=True, ts_start=ts, extra={"k": ["v"]}),
                    "datapoints": {str(ts): {"2.5": "many"}, str(ts + 1): {"3": True}},
                }
            ),
            one(bad_value=2),
        ),
    ]
    return [Kind(name, topic, body, reasons) for name, topic, body, reasons in kinds]


def big_kinds(ts: int) -> list[Kind]:
    """A few bodies at the size limits: just over 1 MiB, exactly 1 MiB, 10,001 buckets."""
    over = padded(dumps(document({str(ts): 0.1})), LIMITS.max_body_bytes + 1)
    at_limit = padded(dumps(document({str(ts): 1.5})), LIMITS.max_body_bytes)
    buckets = {f"{i / 100:.2f}": 1 for i in range(LIMITS.max_buckets + 1)}
    many_buckets = dumps(document({str(ts): buckets}))
    assert len(many_buckets) < LIMITS.max_body_bytes
    return [
        *[Kind("over_1_mib", LOSS, over, Counter(too_large=1))] * 5,
        *[Kind("exactly_1_mib", LOSS, at_limit, Counter(loss_out_of_range=1))] * 5,
        *[Kind("10001_buckets", DELAY, many_buckets, Counter(too_large=1))] * 20,
    ]


def valid_message(number: int, ts: int) -> tuple[str, str, bytes, float]:
    """Link `number` (distinct source, one destination): a loss or a one-bucket histogram
    whose value identifies it; every fourth one in the version-2 layout with extra fields."""
    source = f"10.77.{number // 256}.{number % 256}"
    topic = DELAY if number % 2 == 0 else LOSS
    value = 1.0 + number / 100 if topic == DELAY else (number + 1) / 10_000
    datapoint = {f"{value:.2f}": 600} if topic == DELAY else value
    body: dict = {"meta": meta(source, VALID_DESTINATION), "datapoints": {str(ts): datapoint}}
    if number % 4 == 1:
        body["version"] = 2
        body["meta"] |= {"push": True, "summaries": 0, "ts_start": ts, "rsv-timestamp": ts + 1.5}
        body["unknown"] = {"nested": [[[[[1]]]]] * 3}
    return source, topic, dumps(body), value


def build_plan(ts: int) -> Plan:
    """10,000 hostile messages (the big ones spread out) with a valid one after every 10."""
    plan = Plan()
    small, big = small_kinds(ts), big_kinds(ts)
    big_every = HOSTILE_COUNT // len(big)
    valid_every = HOSTILE_COUNT // VALID_COUNT
    for n in range(HOSTILE_COUNT):
        spread = n % big_every == 0 and n // big_every < len(big)
        kind = big[n // big_every] if spread else small[n % len(small)]
        plan.messages.append((kind.topic, kind.body))
        plan.reasons.update(kind.reasons)
        plan.per_topic[kind.topic] += 1
        plan.kinds[kind.name] += 1
        if n % valid_every == valid_every - 1:
            source, topic, body, value = valid_message(n // valid_every, ts)
            plan.messages.append((topic, body))
            plan.per_topic[topic] += 1
            plan.valid[source] = (topic, value)
    return plan


# --- publishing and reading the service -----------------------------------------------------


def publish_all(broker: MemoryBroker, messages: list[tuple[str, bytes]]) -> None:
    """Send `messages` over PUBLISHERS connections at once; returns once the broker has them
    all."""
    errors: list[BaseException] = []

    def run(share: list[tuple[str, bytes]]) -> None:
        try:
            client = BrokerClient(broker.access())
            for topic, body in share:
                client.send(topic, body)
            client.close()
        except BaseException as error:  # noqa: BLE001 - re-raised in the test thread
            errors.append(error)

    threads = [
        threading.Thread(target=run, args=(messages[i::PUBLISHERS],)) for i in range(PUBLISHERS)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not errors, errors
    assert not any(thread.is_alive() for thread in threads)


def scrape(base_url: str) -> str:
    """The service's /metrics text."""
    return httpx.get(f"{base_url}/metrics", timeout=10).text


def rejected(metrics: str) -> Counter[str]:
    """Frames rejected per reason (reasons never seen are absent)."""
    return Counter(
        {
            sample.labels["reason"]: int(sample.value)
            for sample in samples_named(metrics, "nettel_rejected_total")
            if sample.value
        }
    )


def received(metrics: str, topic: str) -> int:
    """Frames received on `topic`; none yet (no sample of that topic) is 0."""
    return int(sample_value(metrics, "nettel_messages_received_total", default=0.0, topic=topic))


def settled(base_url: str, expected_frames: int) -> Callable[[], str | None]:
    def probe() -> str | None:
        metrics = scrape(base_url)
        return (
            metrics
            if received(metrics, DELAY) + received(metrics, LOSS) >= expected_frames
            else None
        )

    return probe


# --- the test ----------------------------------------------------------------------------------


def test_hostile_flood_counts_every_reason_and_loses_no_valid_datapoint(
    flavoured_memory_broker, memory_service
):
    service = memory_service(
        flavoured_memory_broker,
        "--interval",
        "2",
        "--model",
        "none",
        "--publish-telemetry",
        "false",
        "--subscription",
        "plain",
    )
    wait_for(lambda: httpx.get(f"{service.url}/readyz").status_code == 200, what="ready")
    plan = build_plan(current_minute_ts(1))
    assert len(plan.messages) == HOSTILE_COUNT + VALID_COUNT
    assert sum(plan.kinds.values()) == HOSTILE_COUNT and len(plan.valid) == VALID_COUNT

    started = time.monotonic()
    publish_all(flavoured_memory_broker, plan.messages)
    published_in = time.monotonic() - started
    metrics = wait_for(
        settled(service.url, len(plan.messages)), timeout=120, interval=1.0, what="every frame"
    )
    consumed_in = time.monotonic() - started
    time.sleep(1.0)  # proves that nothing more trickles in
    metrics = scrape(service.url)

    assert httpx.get(f"{service.url}/healthz").status_code == 200
    assert received(metrics, DELAY) == plan.per_topic[DELAY]
    assert received(metrics, LOSS) == plan.per_topic[LOSS]
    assert rejected(metrics) == plan.reasons
    assert sample_value(metrics, "nettel_datapoints_applied_total") == VALID_COUNT

    def matrix_has_all_valid_links():
        matrix = get_json(f"{service.url}/costmatrix", destination=VALID_DESTINATION)
        links = {link["source"]: link for link in (matrix or {"links": []})["links"]}
        return links if set(links) == set(plan.valid) else None

    links = wait_for(matrix_has_all_valid_links, timeout=30, what=f"{VALID_COUNT:,} valid links")
    for source, (topic, value) in plan.valid.items():
        link = links[source]
        if topic == DELAY:
            assert link["delay_ms"]["mean"] == round(value, 2), source
        else:
            assert link["packet_loss"] == pytest.approx(value, abs=1e-6), source
    tracked = sample_value(scrape(service.url), "nettel_links_tracked")
    assert tracked == VALID_COUNT  # no hostile link
    print(
        f"\npublished {len(plan.messages)} messages in {published_in:.1f} s; all consumed "
        f"after {consumed_in:.1f} s; rejected {sum(plan.reasons.values())} by reason "
        f"{dict(plan.reasons)}"
    )
