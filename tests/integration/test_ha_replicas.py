"""Two real `nettel serve` replicas behind a real HAProxy (the shipped deploy/haproxy/haproxy.cfg)
on the session ActiveMQ, then on its RabbitMQ node: SIGKILL one under load and no client request
fails; the answers before and after agree (same links, costs within COST_TOLERANCE:
docs/high-availability.md). And a
replica given another's client id is refused (ActiveMQ, RabbitMQ) with the reason logged, and
not ready until the first one is gone."""

from __future__ import annotations

import time
import uuid

import httpx
import pytest

from devtools.haproxy import HAProxyProcess
from devtools.http_load import HttpLoad
from devtools.stomp_client import StompClient
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


def test_a_replica_sharing_a_client_id_is_refused_and_not_ready(stomp_broker, nettel_service):
    client_id = f"shared-{uuid.uuid4().hex[:8]}"
    args = ("--interval", "1", "--model", "none", "--client-id", client_id)
    first = nettel_service(stomp_broker.brokers, *args)
    wait_for(lambda: get_json(f"{first.url}/readyz"), what="the first replica ready")
    second = nettel_service(stomp_broker.brokers, *args)
    reason = {  # ActiveMQ refuses the CONNECT; RabbitMQ the client id's exclusive lock queue
        "activemq": f"Client: {client_id} already connected",
        "rabbitmq": f"client id {client_id} is in use by another connection",
    }[stomp_broker.flavour]
    wait_for(lambda: reason in second.log_text(), timeout=15, what="the refusal logged")
    readiness = httpx.get(f"{second.url}/readyz")
    assert readiness.status_code == 503
    # (under load it may also not have computed its first matrix yet)
    assert "not connected to a broker" in readiness.json()["problems"]
    first_readiness = get_json(f"{first.url}/readyz")
    assert (first_readiness["ready"], first_readiness["problems"]) == (True, [])
    bus = next(source for source in first_readiness["sources"] if source["kind"] == "bus")
    assert bus["running"] and bus["detail"]["connected"]
    first.stop()  # the id is free again: the second replica takes it over
    wait_for(lambda: get_json(f"{second.url}/readyz"), timeout=20, what="the second ready")
