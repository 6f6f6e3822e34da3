"""The service taking pScheduler runs over HTTP, as a toolkit's http archiver PUTs them, beside
the bus (the in-memory broker): the run's link shows in /costmatrix with the sample's
statistics, and the bus messages for the same link land in the same row."""

from __future__ import annotations

import time

import httpx
import pytest

from devtools.metrics_reader import metric_value
from devtools.waiting import wait_for
from service.config import DELAY_TOPIC as DELAY
from service.config import LOSS_TOPIC as LOSS
from tests.integration.wire import current_minute_ts, get_json, sample_body
from tests.run_factory import DESTINATION_HOST, SOURCE_HOST, run_body

TOKEN = "toolkit-token-3b9c"
#: What the archiver sends with the archives.d example of docs/pscheduler.md.
ARCHIVER_HEADERS = [
    ("Authorization", f"Bearer {TOKEN}"),
    ("x-ps-observer", "192.0.2.10"),
    ("content-type", "application/json"),
    ("Content-Type", "application/json"),
]
REAL = {"mean": 2.9321, "median": 2.6, "std": 4.3168, "min": 2.51, "p95": 2.75}


@pytest.fixture
def service(memory_broker, memory_service, tmp_path):
    topology = tmp_path / "topology.yaml"
    topology.write_text(f"SITE-A: [{SOURCE_HOST}]\nSITE-B: [198.51.100.20]\n")
    args = ("--interval", "1", "--model", "none", "--subscription", "plain")
    return memory_service(
        memory_broker,
        *args,
        "--topology",
        str(topology),
        env={"NETTEL_INGEST_TOKEN": TOKEN},
    )


def links_between(url: str, source: str) -> list[dict]:
    return (get_json(f"{url}/costmatrix", source=source) or {}).get("links", [])


def test_runs_put_over_http_reach_the_matrix_and_share_the_bus_row(service):
    ingest = f"{service.url}/ingest/pscheduler"
    posted = time.time()
    put = httpx.put(ingest, content=run_body(posted, run_id="r-1"), headers=ARCHIVER_HEADERS)
    assert put.status_code == 202
    retry = httpx.post(ingest, content=run_body(posted, run_id="r-1"), headers=ARCHIVER_HEADERS)
    assert retry.status_code == 202

    (named,) = wait_for(lambda: links_between(service.url, SOURCE_HOST), what="the run's link")
    # no address known yet: the ends are keyed by name, with the run's IP version
    assert named["source"] == f"ipv4:{SOURCE_HOST}"
    assert named["destination"] == f"ipv4:{DESTINATION_HOST}"
    assert (named["source_host"], named["destination_host"]) == (SOURCE_HOST, DESTINATION_HOST)
    assert named["delay_ms"] == REAL and named["packet_loss"] == 0.0
    assert (named["source_site"], named["samples"]) == ("SITE-A", 1)
    assert named["last_measurement"] == int(posted - 60) // 60 * 60
    assert metric_value(service.url, "nettel_pscheduler_runs_total", outcome="applied") == 1
    assert metric_value(service.url, "nettel_pscheduler_runs_total", outcome="duplicate") == 1

    bus_minute = current_minute_ts(3)  # the bus sample's link, with IPs and the same host names
    publisher = service.publisher()

    def one_row_with_both() -> dict | None:
        """Publish (again: a plain subscription drops what comes before it exists) and look."""
        publisher.send(DELAY, sample_body("owdelay-histogram-real.json", [bus_minute]))
        publisher.send(LOSS, sample_body("packet-loss-rate.json", [bus_minute]))
        links = links_between(service.url, SOURCE_HOST)
        return links[0] if len(links) == 1 and links[0]["samples"] == 2 else None

    try:
        link = wait_for(one_row_with_both, interval=0.5, what="the bus's minute in the run's row")
    finally:
        publisher.close()
    assert (link["source"], link["destination"]) == ("192.0.2.10", "198.51.100.20")
    assert (link["source_host"], link["destination_host"]) == (SOURCE_HOST, DESTINATION_HOST)
    assert link["last_measurement"] == named["last_measurement"]  # the run's minute is newest
    assert link["delay_ms"] == REAL and link["source_site"] == "SITE-A"
    assert len(get_json(f"{service.url}/costmatrix", destination="198.51.100.20")["links"]) == 1

    later = run_body(posted + 60, run_id="r-2")  # the next interval, after the bus revealed IPs
    assert httpx.put(ingest, content=later, headers=ARCHIVER_HEADERS).status_code == 202
    wait_for(
        lambda: [x["samples"] for x in links_between(service.url, "192.0.2.10")] == [3],
        what="the next run in the same row",
    )
