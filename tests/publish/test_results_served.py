"""Throughput tests and traceroutes as nettel serves them, over real HTTP: a service in this
process fed over the in-memory broker on perfSONAR's topics. `/costmatrix` rows (host and site
level) carry the latest test's rate and age, `/links/{source}/{destination}` the test, AAAS's
scores of its history and the current path with its changes, and ALTO's `tput` the rate in
bytes per second; the OpenAPI reference documents the fields."""

from __future__ import annotations

import time
from typing import Any

import httpx

from devtools.waiting import wait_for
from service.publish.schemas import CostMatrixOut, LinkDetailOut
from tests.integration.wire import current_minute_ts, get_json, sample_body
from tests.publish.wire_data import DELAY, DESTINATION, LOSS, SOURCE, delay_body, loss_body

THROUGHPUT = "/topic/perfsonar.raw.throughput"
RETRANSMITS = "/topic/perfsonar.raw.packet-retransmits"
TRACE = "/topic/perfsonar.raw.packet-trace"
META = {
    "source": SOURCE,
    "destination": DESTINATION,
    "input_source": "ps-latency.site-a.example.org",
    "input_destination": "ps-latency.site-b.example.org",
}
USUAL = ["192.0.2.1", "203.0.113.1", "203.0.113.9"]
NEW = ["192.0.2.1", "203.0.113.77", "203.0.113.9"]


def hops(routers: list[str]) -> list[dict[str, Any]]:
    """An esmond hop list over `routers` to the link's destination, the third hop silent."""
    addresses = [*routers, DESTINATION]
    listed = [
        {"ttl": ttl, "query": 1, "success": 1, "ip": ip, "as": {"number": 64496}, "rtt": 1.5 * ttl}
        for ttl, ip in enumerate(addresses, start=1)
    ]
    listed[2] = {"ttl": 3, "query": 1, "success": 0}
    return listed


def body(sample: str, datapoints: dict[int, Any]) -> dict[str, Any]:
    document = sample_body(sample, list(datapoints), **META)
    document["datapoints"] = {str(ts): value for ts, value in datapoints.items()}
    return document


def feed(publisher, now: int) -> tuple[int, int]:
    """Three minutes of delay and loss, two throughput tests (the older first), their
    retransmits, and four traces: the usual path, then a new one from the third on. Returns the
    newer test's start and the new path's first trace."""
    minutes = [now - 180, now - 120, now - 60]
    publisher.send(DELAY, delay_body(minutes, **META))
    publisher.send(LOSS, loss_body(dict.fromkeys(minutes, 0.0), **META))
    tested = now - 7_300  # 2 h 1 min 40 s before the newest minute
    rates = {tested - 14_400: 389_274_697, tested: 412_903_544}
    publisher.send(THROUGHPUT, body("throughput-raw.json", rates))
    publisher.send(RETRANSMITS, body("packet-retransmits-raw.json", {tested: 37}))
    traced = [now - 1800, now - 1200, now - 600, now - 5]
    paths = [hops(USUAL), hops(USUAL), hops(NEW), hops(NEW)]
    publisher.send(TRACE, body("packet-trace-raw.json", dict(zip(traced, paths, strict=True))))
    return tested, traced[2]


def test_costmatrix_links_and_alto_serve_the_latest_test_and_the_path(serve, publisher) -> None:
    service = serve()
    now = current_minute_ts()
    tested, changed = feed(publisher, now)

    def served() -> dict[str, Any] | None:
        matrix = get_json(f"{service.url}/costmatrix")
        links = (matrix or {}).get("links", [])
        return matrix if links and links[0]["throughput_bps"] is not None else None

    wait_for(served, what="the link's throughput in /costmatrix")
    document = httpx.get(f"{service.url}/costmatrix").json()
    CostMatrixOut.model_validate(document)
    (link,) = document["links"]
    assert link["throughput_bps"] == 412_903_544
    assert link["throughput_age_s"] == (int(document["generated_at"]) - tested) // 600 * 600
    assert 7_200 <= link["throughput_age_s"] <= 7_800
    (site,) = get_json(f"{service.url}/costmatrix", level="site")["links"]
    assert (site["source"], site["destination"]) == ("SITE-A", "SITE-B")
    assert (site["throughput_bps"], site["throughput_age_s"]) == (
        412_903_544,
        link["throughput_age_s"],
    )

    asked = time.time()
    detail = httpx.get(f"{service.url}/links/{SOURCE}/{DESTINATION}").json()
    LinkDetailOut.model_validate(detail)
    throughput = detail["throughput"]
    assert {k: throughput[k] for k in ("bps", "started_at", "retransmits")} == {
        "bps": 412_903_544,
        "started_at": tested,
        "retransmits": 37,
    }
    assert int(asked) - tested <= throughput["age_s"] <= time.time() - tested
    # both tests in the newest 4-day bin or one in each: AAAS's z needs two bins with results
    assert throughput["bandwidth"]["bin_days"] == 4
    assert throughput["bandwidth"]["bins"] in (1, 2)
    path = detail["path"]
    assert [hop["address"] for hop in path["hops"]] == [NEW[0], NEW[1], None, DESTINATION]
    assert path["hops"][0] == {"ttl": 1, "address": NEW[0], "rtt_ms": 1.5, "asn": 64496}
    assert path["reaches_destination"] is True
    assert path["since"] == changed and path["traced_at"] == now - 5
    assert path["changes_last_24h"] == 1
    assert detail["link"]["throughput_bps"] == 412_903_544

    tput = httpx.get(f"{service.url}/alto/costmap/tput").json()
    assert tput["cost-map"] == {"SITE-A": {"SITE-B": 51_612_943.0}}  # 412,903,544 / 8


def test_a_link_without_tests_or_traces_has_nulls_and_an_empty_path(serve, publisher) -> None:
    service = serve()
    minutes = [current_minute_ts(2), current_minute_ts(1)]
    publisher.send(LOSS, loss_body(dict.fromkeys(minutes, 0.0), **META))
    wait_for(lambda: (get_json(f"{service.url}/costmatrix") or {}).get("links"), what="a link")
    (link,) = get_json(f"{service.url}/costmatrix")["links"]
    assert (link["throughput_bps"], link["throughput_age_s"]) == (None, None)
    detail = httpx.get(f"{service.url}/links/{SOURCE}/{DESTINATION}").json()
    assert detail["throughput"] == {
        "bps": None, "started_at": None, "age_s": None, "retransmits": None, "bandwidth": None
    }  # fmt: skip
    assert detail["path"] == {
        "hops": [], "reaches_destination": None, "since": None, "traced_at": None,
        "changes_last_24h": 0,
    }  # fmt: skip
    assert httpx.get(f"{service.url}/alto/costmap/tput").json()["cost-map"] == {}
    assert httpx.get(f"{service.url}/links/{SOURCE}/192.0.2.99").status_code == 404


def test_the_openapi_reference_documents_the_served_fields(serve) -> None:
    service = serve()
    schemas = httpx.get(f"{service.url}/openapi.json").json()["components"]["schemas"]
    assert {"throughput_bps", "throughput_age_s"} <= set(schemas["LinkOut"]["properties"])
    assert {"throughput", "path"} <= set(schemas["LinkDetailOut"]["properties"])
    assert "changes_last_24h" in schemas["PathOut"]["properties"]
