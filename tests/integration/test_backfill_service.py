"""The service with `--backfill-from` against a local archive server (real HTTP), fed over the
in-memory broker: ready with a full 32-minute window for the archived links within the bound,
no later than the bound when the archive stalls, and live data of backfilled minutes counted
once."""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest

from devtools.archive_server import ArchivedLink, ArchiveServer, Fault
from devtools.metrics_reader import metric_value
from devtools.waiting import wait_for
from service.broker.memory_broker import MemoryBroker
from service.parse.records import MeasurementKind
from tests.data import load_sample
from tests.in_memory_service import InMemoryService
from tests.integration.wire import current_minute_ts, get_json, sample_body

ARCHIVE = load_sample("esmond-archive.json")
HISTOGRAM = ARCHIVE["histogram-owdelay"][0]["val"]  # the real one, keyed as elmond keys it
LOSSES = [record["val"] for record in ARCHIVE["packet-loss-rate"]]
DESTINATION = "198.51.100.20"
BOUND = 20.0


def archived(number: int, minutes: int = 50, fault: Fault | None = None) -> ArchivedLink:
    stamps = [current_minute_ts(k) for k in range(minutes - 1, -1, -1)]
    return ArchivedLink(
        f"192.0.2.{number}",
        DESTINATION,
        f"ps-{number}.example.org",
        series={
            "histogram-owdelay": [{"ts": ts, "val": HISTOGRAM} for ts in stamps],
            "packet-loss-rate": [{"ts": ts, "val": LOSSES[ts // 60 % 3]} for ts in stamps],
        },
        fault=fault,
    )


def serve(
    memory_service: Callable[..., InMemoryService],
    broker: MemoryBroker,
    archive: str,
    *args: str,
) -> InMemoryService:
    return memory_service(
        broker,
        "--backfill-from",
        archive,
        "--backfill-bound",
        str(BOUND),
        "--backfill-history",
        "3600",
        "--interval",
        "1",
        "--model",
        "none",
        "--subscription",
        "plain",
        *args,
    )


def test_the_service_is_ready_with_a_full_window_for_every_archived_link(
    memory_broker: MemoryBroker, memory_service: Callable[..., InMemoryService]
) -> None:
    links = [archived(n) for n in range(1, 6)] + [archived(6, fault="fail")]
    with ArchiveServer(links) as archive:
        service = serve(memory_service, memory_broker, archive.url)
        ready_at = service.ready_at(timeout=BOUND + 10)
    assert ready_at - service.launched_at < BOUND
    matrix = get_json(f"{service.url}/costmatrix", destination=DESTINATION)
    by_source = {link["source"]: link for link in matrix["links"]}
    assert sorted(by_source) == [f"192.0.2.{n}" for n in range(1, 6)]
    for source, link in by_source.items():
        assert link["samples"] == 32, source
        assert link["delay_ms"]["median"] == pytest.approx(2.6, abs=1e-6)
        assert link["delay_ms"]["mean"] == pytest.approx(2.9321, abs=5e-5)
        assert link["source_host"] == f"ps-{source.rsplit('.', 1)[1]}.example.org"
    detail = httpx.get(f"{service.url}/links/192.0.2.1/{DESTINATION}").json()
    minutes = detail["series"]["minutes"]
    assert minutes[-1] == links[0].series["packet-loss-rate"][-1]["ts"] // 60
    assert detail["series"]["delay_mean"] == [pytest.approx(2.932133, abs=1e-6)] * 32
    assert detail["series"]["loss"] == [pytest.approx(LOSSES[m % 3], abs=1e-6) for m in minutes]
    assert metric_value(service.url, "nettel_backfill_links_total", outcome="filled") == 5
    assert metric_value(service.url, "nettel_backfill_links_total", outcome="failed") == 1
    assert metric_value(service.url, "nettel_backfill_datapoints_total", outcome="all_time") > 0
    assert metric_value(service.url, "nettel_backfill_in_progress") == 0
    assert "archive request failed" in service.log_text()


def test_a_stalled_archive_holds_readiness_back_no_longer_than_the_bound(
    memory_broker: MemoryBroker, memory_service: Callable[..., InMemoryService]
) -> None:
    bound = 4.0
    with ArchiveServer([archived(1)], stall_metadata=True) as archive:
        service = serve(memory_service, memory_broker, archive.url, "--backfill-bound", str(bound))
        waiting = httpx.get(f"{service.url}/readyz")
        in_progress = metric_value(service.url, "nettel_backfill_in_progress")
        ready_at = service.ready_at(timeout=bound + 10)
    assert waiting.status_code == 503
    assert "backfill from the archive in progress" in waiting.json()["problems"]
    assert in_progress == 1
    assert bound - 1 < ready_at - service.launched_at < bound + 5  # the start, then the bound
    listings = len(MeasurementKind)  # one stalled metadata listing per event type
    assert metric_value(service.url, "nettel_backfill_failed_requests_total") == listings
    readiness = get_json(f"{service.url}/readyz")
    assert (readiness["ready"], readiness["problems"]) == (True, [])


def test_live_data_of_backfilled_minutes_is_counted_once(
    memory_broker: MemoryBroker, memory_service: Callable[..., InMemoryService]
) -> None:
    """After the backfill the bus brings the 32 minutes of the window again (the real histogram,
    keyed "2.60" there): samples stay 32, and series and features do not move."""
    with ArchiveServer([archived(1)]) as archive:
        service = serve(memory_service, memory_broker, archive.url)
        service.ready_at(timeout=BOUND + 10)  # subscribed, too
    link_url = f"{service.url}/links/192.0.2.1/{DESTINATION}"
    before = httpx.get(link_url).json()
    applied = metric_value(service.url, "nettel_datapoints_applied_total")
    stamps = [minute * 60 for minute in before["series"]["minutes"]]
    body = sample_body("owdelay-histogram-real.json", stamps, source="192.0.2.1")
    publisher = service.publisher()
    try:
        publisher.send("/topic/perfsonar.raw.histogram-owdelay", body)
    finally:
        publisher.close()
    wait_for(
        lambda: metric_value(service.url, "nettel_datapoints_applied_total") >= applied + 32,
        what="the 32 datapoints applied",
    )
    after = httpx.get(link_url).json()
    assert after["link"]["samples"] == 32
    for name in ("delay_mean", "delay_median", "delay_std", "loss"):
        assert after["series"][name] == before["series"][name], name
    assert after["features"] == before["features"]
