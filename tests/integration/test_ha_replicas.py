"""Two real `nettel serve` replicas of one HA group on a real broker (the session ActiveMQ, then
its RabbitMQ node), and SIGKILL of one of them: what only real processes on the wire show, the
broker noticing a dead connection and handing its exclusive consumer (ActiveMQ) or its single
active consumer (RabbitMQ) over, and HAProxy taking the dead replica out.

- Behind a real HAProxy (the shipped deploy/haproxy/haproxy.cfg), one replica killed under
  load fails no client request; the answers before and after agree (same links, costs within
  COST_TOLERANCE: docs/high-availability.md).
- One telemetry publisher per --ha-group: a feed gives every link a new minute every
  `MINUTE_SECONDS` s (loss alternating 0 and 0.5, so every new minute changes the cost and is
  published); a subscriber counts telemetry messages per link and minute. In steady state each
  (link, minute) arrives exactly once; after SIGKILL of the leader the other replica publishes
  within 15 s, and around the switch each link has at most one minute duplicated or missing.

The election's rules (eligibility, a shared lease queue reported, a client id held once) run
over the in-memory broker: test_ha_election.py.
"""

from __future__ import annotations

import time
import uuid
from collections import Counter

import httpx
import pytest

from devtools.haproxy import HAProxyProcess
from devtools.http_load import HttpLoad
from devtools.local_http import LOCAL_HTTP
from devtools.metrics_reader import metric_value
from devtools.minute_feed import MinuteFeed
from devtools.stomp_client import Message, StompClient
from devtools.waiting import wait_for
from tests.integration.wire import current_minute_ts, get_json
from tests.publish.wire_data import DELAY, LOSS, delay_body, loss_body

pytestmark = [pytest.mark.broker, pytest.mark.slow]

SOURCES = [f"10.62.0.{n}" for n in range(1, 21)]
#: Replicas fed the same data agree once both applied it; this bounds float noise only.
COST_TOLERANCE = 1e-9


def costs(document: dict) -> dict[tuple[str, str], float | None]:
    return {(link["source"], link["destination"]): link["cost"] for link in document["links"]}


def test_a_replica_killed_under_load_fails_no_request_through_haproxy(
    stomp_broker, nettel_service, tmp_path
):
    run = uuid.uuid4().hex[:8]
    replicas = [
        nettel_service(
            stomp_broker.brokers,
            "--interval",
            "1",
            "--model",
            "none",
            "--client-id",
            f"{run}-{name}",
        )
        for name in ("a", "b")
    ]
    for replica in replicas:
        wait_for(lambda r=replica: get_json(f"{r.url}/readyz"), what="replica ready")
    publisher = StompClient(stomp_broker.brokers)
    minutes = [current_minute_ts(n) for n in (3, 2, 1)]
    for source in SOURCES:
        publisher.send(DELAY, delay_body(minutes, source=source))
        publisher.send(LOSS, loss_body(dict.fromkeys(minutes, 0.0), source=source))
    publisher.close()
    for replica in replicas:
        wait_for(
            lambda r=replica: (
                len((get_json(f"{r.url}/costmatrix") or {"links": []})["links"]) == len(SOURCES)
            ),
            what="every link in both replicas",
        )
    all_seen_at = time.time()
    for replica in replicas:
        wait_for(
            lambda r=replica: (
                (get_json(f"{r.url}/costmatrix") or {}).get("generated_at", 0) > all_seen_at
            ),
            what="a cycle on both after the last datapoint",
        )
    addresses = [r.url.removeprefix("http://") for r in replicas]
    servers = [(f"nettel-{n}", address) for n, address in zip("ab", addresses, strict=True)]
    with HAProxyProcess(tmp_path / "haproxy", servers) as haproxy:
        matrix_url = f"{haproxy.url}/costmatrix"
        wait_for(lambda: get_json(matrix_url), what="HAProxy up with both replicas")
        before = costs(httpx.get(matrix_url).json())
        load_started = time.monotonic()
        load = HttpLoad(matrix_url, threads=4).start()
        wait_for(lambda: load.completed_since(load_started) >= 50, what="50 requests under load")
        replicas[0].kill()
        killed_at = time.monotonic()
        wait_for(
            lambda: (
                "nettel_replicas/nettel-a is DOWN" in haproxy.log_path.read_text()
                and load.completed_since(killed_at) > 50
            ),
            what="HAProxy's health check to see the replica go, and 50 requests after the kill",
        )
        result = load.stop()
        after = costs(httpx.get(matrix_url).json())
        log = haproxy.log_path.read_text()

    assert result.failures == [], result.failures[:5]
    assert sum(done > killed_at for done in result.completed) > 50  # served by the survivor
    assert "nettel_replicas/nettel-a is DOWN" in log  # the health check saw it go
    assert before.keys() == after.keys() and len(before) == len(SOURCES)
    for link, cost in before.items():
        assert cost is not None and after[link] == pytest.approx(cost, abs=COST_TOLERANCE)


LINKS = [f"10.61.0.{n}" for n in range(1, 6)]
DESTINATION = "198.51.100.20"
#: Wall-clock seconds per fed minute: longer than a failover (lease timeout 1.5 s + a cycle).
MINUTE_SECONDS = 3.0
LEASE_ARGS = ("--ha-lease-interval", "0.5", "--ha-lease-timeout", "1.5")
SERVE_ARGS = ("--interval", "0.5", "--freshness", "0.2", "--model", "none")


def loss_message(source: str, minute: int, loss: float) -> tuple[str, dict, dict[str, str]]:
    return LOSS, loss_body({minute: loss}, source=source), {}


def readiness_ha(url: str) -> dict:
    """/readyz's `ha` field ({} while the replica does not answer)."""
    try:
        return LOCAL_HTTP.get(f"{url}/readyz", timeout=2.0).json()["ha"]
    except (httpx.HTTPError, KeyError, ValueError):
        return {}


def role(url: str) -> str | None:
    return readiness_ha(url).get("role")


def counts(messages: list[Message]) -> Counter[tuple[str, int]]:
    """Telemetry messages per (link source, minute)."""
    return Counter((m.json()["meta"]["source"], int(m.headers["timestamp"])) for m in messages)


def published_up_to(messages: list[Message], minute: int) -> bool:
    """Whether every link has telemetry of `minute` or a later one."""
    latest: dict[str, int] = {}
    for (source, published), _ in counts(messages).items():
        latest[source] = max(published, latest.get(source, published))
    return all(latest.get(source, 0) >= minute for source in LINKS)


def test_one_publisher_per_group_and_a_takeover_after_sigkill(stomp_broker, nettel_service):
    group = f"t{uuid.uuid4().hex[:8]}"
    topic = f"/topic/telemetry.ha-{group}"
    if stomp_broker.flavour == "rabbitmq":  # what the operator does once per group
        stomp_broker.declare_queue(f"nettel.ha.{group}", {"x-single-active-consumer": True})
    subscriber = StompClient(stomp_broker.brokers)
    subscriber.subscribe(topic)
    replicas = [
        nettel_service(
            stomp_broker.brokers,
            *SERVE_ARGS,
            *LEASE_ARGS,
            "--ha-group",
            group,
            "--client-id",
            f"{group}-{name}",
            "--telemetry-topic",
            topic,
        )  # fmt: skip
        for name in ("a", "b")
    ]
    wait_for(
        lambda: sorted(role(r.url) or "" for r in replicas) == ["leader", "standby"],
        timeout=20,
        what="one leader and one standby",
    )
    feed = MinuteFeed(
        stomp_broker.brokers,
        LINKS,
        loss_message,
        period=MINUTE_SECONDS,
        first_minute=current_minute_ts(25),
    ).start()
    try:
        wait_for(
            lambda: len({minute for _, minute in counts(subscriber.messages)}) >= 4,
            timeout=8 * MINUTE_SECONDS,
            what="telemetry of four minutes in steady state",
        )
        steady = counts(subscriber.take())
        (leader,) = [r for r in replicas if role(r.url) == "leader"]
        (survivor,) = [r for r in replicas if r is not leader]
        leader.kill()
        killed_at = time.monotonic()
        wait_for(lambda: role(survivor.url) == "leader", timeout=15, interval=0.1, what="takeover")
        wait_for(lambda: subscriber.messages, timeout=15, interval=0.05, what="telemetry")
        failover = time.monotonic() - killed_at
        two_minutes_on = feed.minutes[-1] + 120
        wait_for(
            lambda: published_up_to(subscriber.messages, two_minutes_on),
            timeout=6 * MINUTE_SECONDS,
            what="every link published by the survivor two minutes after the takeover",
        )
    finally:
        feed.stop()
    wait_for(
        lambda: published_up_to(subscriber.messages, max(feed.minutes) - 60),
        timeout=4 * MINUTE_SECONDS,
        what="the last minutes' messages",
    )
    after = counts(subscriber.take())
    subscriber.close()

    assert failover < 15.0
    fed = set(feed.minutes)
    assert steady and max(steady.values()) == 1, "a duplicate in steady state"
    steady_minutes = sorted({minute for _, minute in steady})
    assert len(steady_minutes) >= 3
    for source in LINKS:  # every minute of the steady part, once per link
        published = {m for s, m in steady if s == source}
        assert published >= set(steady_minutes[:-1])  # the last one may be under way
    assert metric_value(survivor.url, "nettel_ha_leader") == 1.0
    assert metric_value(survivor.url, "nettel_ha_transitions_total") >= 2  # acquiring, leader
    assert metric_value(survivor.url, "nettel_ha_lease_shared") == 0.0  # its tokens all came back
    for source in LINKS:
        seen = Counter({m: n for (s, m), n in (steady + after).items() if s == source})
        span = {m for m in fed if min(seen) <= m <= max(seen)}
        duplicated = [m for m, n in seen.items() if n > 1]
        missing = span - set(seen)
        assert len(duplicated) + len(missing) <= 1, (source, duplicated, missing)
        assert max(seen) >= max(fed) - 60  # the survivor keeps publishing
