"""The new-link budget of pScheduler runs posted over HTTP is the posting client's, over a real
`nettel serve` and real HTTP connections: a client that names a new source host in every run
still adds only --new-links-per-minute links a minute; another client has a budget of its own;
X-Forwarded-For names the client only when a --trusted-proxies address sends it."""

from __future__ import annotations

import json
import time

import httpx

from devtools.metrics_reader import metric_value
from devtools.waiting import wait_for
from tests.integration.wire import get_json
from tests.run_factory import run_body

TOKEN = "budget-token-61c2"
HEADERS = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
PROXY = "127.0.0.1"  # the test's own connections come from it: they stand for HAProxy's
UNTRUSTED_PEER = "127.0.0.2"  # a client connecting directly, from another loopback address


def post_runs(url: str, sources: list[str], forwarded_for: list[str], peer: str = PROXY) -> None:
    """One run a source host (each a new link), each request with its X-Forwarded-For."""
    transport = httpx.HTTPTransport(local_address=peer)
    with httpx.Client(transport=transport, timeout=5.0) as client:
        for source, forwarded in zip(sources, forwarded_for, strict=True):
            body = run_body(time.time(), run_id=f"run-{source}", source=source)
            headers = HEADERS | {"X-Forwarded-For": forwarded}
            response = client.put(f"{url}/ingest/pscheduler", content=body, headers=headers)
            assert response.status_code == 202, response.text


def link_sources(url: str) -> set[str]:
    return {link["source_host"] for link in (get_json(f"{url}/costmatrix") or {}).get("links", [])}


def refused(url: str) -> float:
    return metric_value(url, "nettel_rejected_total", 0.0, reason="new_link_rate")


def test_new_links_of_runs_posted_over_http_are_charged_to_the_posting_client(nettel_service):
    service = nettel_service(
        "none",
        *("--interval", "1", "--model", "none", "--new-links-per-minute", "2"),
        *("--trusted-proxies", PROXY),
        env={"NETTEL_INGEST_TOKEN": TOKEN},
    )
    url = service.url
    flooder = [f"ps-{n}.flood.example.org" for n in range(3)]
    post_runs(url, flooder, ["192.0.2.50"] * 3)
    wait_for(lambda: refused(url) > 0, what="the flooding client's third new link refused")
    other = ["ps-0.other.example.org"]
    post_runs(url, other, ["192.0.2.51"])
    forging = [f"ps-{n}.forger.example.org" for n in range(3)]
    post_runs(url, forging, ["192.0.2.60", "192.0.2.61", "192.0.2.62"], peer=UNTRUSTED_PEER)

    expected = {*flooder[:2], *other, *forging[:2]}
    wait_for(lambda: link_sources(url) == expected, what="two links of each budget, one of 51")
    # a refused run's delay and loss messages are each counted
    wait_for(lambda: refused(url) == 4, what="two refused runs counted")
    assert metric_value(url, "nettel_pscheduler_runs_total", outcome="applied") == 5
    assert metric_value(url, "nettel_pscheduler_runs_total", outcome="rejected") == 2
    logged = [
        json.loads(line)
        for line in service.log_text().splitlines()
        if '"reason":"new_link_rate"' in line
    ]
    assert len(logged) == 1  # once a minute: the forger's refusal waits for the next one
    assert logged[0]["client"] == "192.0.2.50"
    assert logged[0]["detail"] == (
        "new link ps-2.flood.example.org -> ps-latency.site-b.example.net: client 192.0.2.50 "
        "added --new-links-per-minute links this minute"
    )
