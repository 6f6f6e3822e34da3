"""The service fed through its broker subscription (the in-memory broker as ActiveMQ, then as
RabbitMQ): messages in, matrix out over HTTP, readiness following the broker, and a subscription
mode the broker has not refused with the reason."""

from __future__ import annotations

import json

import httpx
import pytest

from devtools.local_http import LOCAL_HTTP
from devtools.metrics_reader import metric_value
from devtools.waiting import wait_for
from service.analysis.features import FEATURE_NAMES
from service.broker.memory_broker import MemoryBroker
from service.config import DELAY_TOPIC as DELAY
from service.config import LOSS_TOPIC as LOSS
from tests.integration.wire import current_minute_ts, get_json, sample_body


def link_in(matrix: dict | None, source: str, destination: str) -> dict | None:
    for link in (matrix or {}).get("links", []):
        if link["source"] == source and link["destination"] == destination:
            return link
    return None


@pytest.fixture
def service(flavoured_memory_broker, memory_service, tmp_path):
    topology = tmp_path / "topology.yaml"
    topology.write_text(
        "SITE-A: [ps-latency.site-a.example.org]\n"
        "SITE-B: [198.51.100.20]\n"
        "SITE-C: [ps-lat.site-c.example.com]\n"
    )
    service = memory_service(
        flavoured_memory_broker, "--interval", "1", "--topology", str(topology)
    )
    wait_for(lambda: get_json(f"{service.url}/readyz"), what="ready (subscribed)")
    return service


@pytest.fixture
def publisher(service):
    pub = service.publisher()
    yield pub
    pub.close()


def test_real_histogram_and_loss_reach_the_matrix_with_exact_statistics(service, publisher):
    now = current_minute_ts()
    publisher.send(DELAY, sample_body("owdelay-histogram-real.json", [now - 60]))
    publisher.send(LOSS, sample_body("packet-loss-rate.json", [now - 180, now - 120, now - 60]))
    publisher.send(DELAY, sample_body("owdelay-v2-push.json", [now - 60]))

    def both_links():
        matrix = get_json(f"{service.url}/costmatrix")
        real = link_in(matrix, "192.0.2.10", "198.51.100.20")
        v2 = link_in(matrix, "203.0.113.5", "192.0.2.10")
        return (real, v2) if real and v2 and real["packet_loss"] is not None else None

    real, v2 = wait_for(both_links, what="both sample links in /costmatrix")
    assert real["delay_ms"] == {
        "mean": 2.9321,
        "median": 2.6,
        "std": 4.3168,
        "min": 2.51,
        "p95": 2.75,
    }
    assert real["source_host"] == "ps-latency.site-a.example.org"
    assert (real["source_site"], real["destination_site"]) == ("SITE-A", "SITE-B")
    assert real["samples"] == 3 and real["last_measurement"] == now - 60
    assert real["packet_loss"] == 0.0  # the sample's third value lands on the newest minute
    assert real["congested"] is False and real["empirical"] == 0.0
    assert real["utilisation"] is None and real["stale"] is False
    assert 0.0 <= real["cost"] <= 1.0
    assert v2["delay_ms"]["median"] == 34.4 and v2["source_site"] == "SITE-C"


def test_queries_by_site_host_and_dense_matrix(service, publisher):
    now = current_minute_ts()
    publisher.send(DELAY, sample_body("owdelay-histogram-real.json", [now - 60]))
    publisher.send(DELAY, sample_body("owdelay-v2-push.json", [now - 60]))
    wait_for(lambda: len((get_json(f"{service.url}/costmatrix") or {}).get("links", [])) >= 2)

    by_site = get_json(f"{service.url}/costmatrix", source="SITE-A")
    assert [(link["source"], link["destination"]) for link in by_site["links"]] == [
        ("192.0.2.10", "198.51.100.20")
    ]
    by_host = get_json(f"{service.url}/costmatrix", destination="ps-latency.site-a.example.org")
    assert [link["source"] for link in by_host["links"]] == ["203.0.113.5"]
    sites = get_json(f"{service.url}/costmatrix", level="site")
    assert {(link["source"], link["destination"], link["links"]) for link in sites["links"]} == {
        ("SITE-A", "SITE-B", 1),
        ("SITE-C", "SITE-A", 1),
    }
    dense = get_json(f"{service.url}/costmatrix", format="matrix", level="site")
    assert dense["nodes"] == ["SITE-A", "SITE-B", "SITE-C"]
    assert dense["cost"][0][0] is None and dense["cost"][0][1] is not None

    detail = get_json(f"{service.url}/links/ps-latency.site-a.example.org/198.51.100.20")
    assert len(detail["series"]["minutes"]) == 32
    assert detail["series"]["minutes"][-1] == (now - 60) // 60
    assert detail["series"]["delay_median"][-1] == 2.6
    assert list(detail["features"]) == list(FEATURE_NAMES)
    assert httpx.get(f"{service.url}/links/192.0.2.99/192.0.2.10").status_code == 404
    assert httpx.get(f"{service.url}/costmatrix", params={"level": "planet"}).status_code == 422

    unknown = httpx.get(f"{service.url}/costmatrix", params={"source": "NOPE", "level": "site"})
    assert unknown.status_code == 404
    assert unknown.json() == {
        "detail": "no site, host name or address in the matrix matches source=NOPE"
    }
    both = httpx.get(f"{service.url}/costmatrix", params={"source": "X", "destination": "Y"})
    assert both.json()["detail"].endswith("matches source=X and destination=Y")
    no_link = get_json(f"{service.url}/costmatrix", source="SITE-B", destination="SITE-C")
    assert no_link["links"] == []  # both sites known, no link that way


def test_full_matrix_supports_etag_and_gzip(service, publisher):
    publisher.send(DELAY, sample_body("owdelay-histogram-real.json", [current_minute_ts(1)]))
    wait_for(lambda: (get_json(f"{service.url}/costmatrix") or {}).get("links"), what="a link")
    first = httpx.get(f"{service.url}/costmatrix", headers={"Accept-Encoding": "gzip"})
    assert first.headers["content-encoding"] == "gzip" and first.json()["links"]
    etag = first.headers["etag"]
    again = httpx.get(f"{service.url}/costmatrix", headers={"If-None-Match": etag})
    assert again.status_code in (200, 304)  # 200 only if a cycle changed the matrix meanwhile
    if again.status_code == 304:
        assert again.content == b""


def test_malformed_burst_is_counted_by_reason_and_valid_messages_all_land(service, publisher):
    now = current_minute_ts()
    valid_sources = [f"10.9.0.{i}" for i in range(1, 41)]
    for i, source in enumerate(valid_sources):
        publisher.send(LOSS, sample_body("packet-loss-rate.json", [now - 60], source=source))
        publisher.send(LOSS, "{not json")
        publisher.send(LOSS, json.dumps({"datapoints": {str(now): 0.1}}))
        publisher.send(LOSS, sample_body("packet-loss-rate.json", [now - 60], source="not-an-ip"))
        bad_loss = sample_body("packet-loss-rate.json", [now - 60], source=f"10.8.0.{i}")
        bad_loss["datapoints"] = {str(now - 60): 1.5}
        publisher.send(LOSS, bad_loss)
        publisher.send(
            LOSS, sample_body("packet-loss-rate.json", [now - 3600], source=f"10.7.0.{i}")
        )
        publisher.send(
            LOSS, sample_body("packet-loss-rate.json", [now + 3600], source=f"10.6.0.{i}")
        )

    def all_counted():
        counts = {
            reason: metric_value(service.url, "nettel_rejected_total", reason=reason)
            for reason in (
                "invalid_json",
                "missing_field",
                "bad_value",
                "loss_out_of_range",
                "too_old",
                "future",
            )
        }
        return counts if all(v >= 40 for v in counts.values()) else None

    counts = wait_for(all_counted, what="every malformed message counted")
    assert counts == {k: 40.0 for k in counts}
    matrix = wait_for(
        lambda: (
            (m := get_json(f"{service.url}/costmatrix"))
            and {link["source"] for link in m["links"]} >= set(valid_sources)
            and m
        ),
        what="every valid link in the matrix",
    )
    assert {link["source"] for link in matrix["links"]} & set(valid_sources) == set(valid_sources)
    assert metric_value(service.url, "nettel_datapoints_applied_total") >= 40
    assert metric_value(service.url, "nettel_broker_connected") == 1.0


def test_readyz_turns_503_when_the_broker_stops(flavoured_memory_broker, memory_service):
    broker = flavoured_memory_broker
    service = memory_service(broker, "--interval", "1", "--heartbeat-ms", "1000")
    wait_for(lambda: LOCAL_HTTP.get(f"{service.url}/readyz").status_code == 200, what="ready")
    broker.stop()
    response = wait_for(
        lambda: (r := LOCAL_HTTP.get(f"{service.url}/readyz")).status_code == 503 and r,
        timeout=20,
        what="/readyz 503 after the broker died",
    )
    assert "not connected to a broker" in response.json()["problems"]
    assert metric_value(service.url, "nettel_broker_connected") == 0.0
    broker.start()
    wait_for(lambda: LOCAL_HTTP.get(f"{service.url}/readyz").status_code == 200, what="ready again")


def test_openapi_docs_are_served(service):
    assert httpx.get(f"{service.url}/docs").status_code == 200
    spec = httpx.get(f"{service.url}/openapi.json").json()
    assert {
        "/costmatrix",
        "/links/{source}/{destination}",
        "/healthz",
        "/readyz",
        "/metrics",
    } <= set(spec["paths"])


def test_auto_refuses_virtual_topics_on_rabbitmq_and_says_why(memory_service):
    service = memory_service(MemoryBroker("rabbitmq"), "--subscription", "virtual")
    reason = "subscription virtual needs ActiveMQ's virtual topics; the broker is rabbitmq"
    wait_for(lambda: reason in service.log_text(), timeout=15, what="the refusal logged")
    response = httpx.get(f"{service.url}/readyz")
    assert response.status_code == 503
    assert "not connected to a broker" in response.json()["problems"]
