"""A hostile archive (real HTTP, devtools.archive_server): an answer that never ends, pages that
never end, more bytes than a backfill may read. Every read is cut by its bound, counted by
reason, and no thread goes on reading once the backfill has ended."""

from __future__ import annotations

import threading
import time

import pytest

from devtools.archive_server import ArchivedLink, ArchiveServer, Fault
from devtools.waiting import wait_for
from service.ingest import archive_client
from service.ingest.archive_backfill import ArchiveBackfill, BackfillSettings
from service.ingest.archive_client import ArchiveClient, ArchiveCut, CutReason
from service.parse.records import MeasurementKind
from service.state.link_state import LinkState
from tests.ingest.test_archive_backfill import HISTORY_MINUTES, NOW, archived, entry_of

LOSS = MeasurementKind.LOSS.value
T0 = 1_700_000_040
MIB = 1 << 20


def loss_link(number: int, fault: Fault | None = None, count: int = 3) -> ArchivedLink:
    records = [{"ts": T0 + 60 * i, "val": 0.0} for i in range(count)]
    return ArchivedLink(f"192.0.2.{number}", "198.51.100.20", series={LOSS: records}, fault=fault)


def base_uri(link: ArchivedLink) -> str:
    uri: str = link.metadata()["event-types"][0]["base-uri"]
    return uri


def cut_of(call: object) -> ArchiveCut:
    with pytest.raises(ArchiveCut) as error:
        call()  # type: ignore[operator]
    return error.value


# ---- the client -------------------------------------------------------------------------------


def test_an_endless_answer_is_cut_at_the_response_cap_and_its_connection_closed() -> None:
    endless = loss_link(1, "endless")
    with ArchiveServer([endless]) as archive:
        client = ArchiveClient(archive.url, 2.0, 100, max_response_bytes=MIB)
        cut = cut_of(lambda: client.records(base_uri(endless), T0, T0 + 3600))
        assert cut.reason is CutReason.RESPONSE_BYTES
        assert "response over 1,048,576 bytes" in str(cut)
        assert MIB - archive_client.READ_CHUNK <= client.bytes_read <= MIB
        wait_for(lambda: archive.endless_open == 0, timeout=5, what="the server saw the close")


def test_a_response_announcing_more_than_the_cap_is_not_read() -> None:
    big = loss_link(1, count=1000)  # about 30 KB of records with a Content-Length
    with ArchiveServer([big]) as archive:
        client = ArchiveClient(archive.url, 2.0, 1000, max_response_bytes=10_000)
        cut = cut_of(lambda: client.records(base_uri(big), T0, T0 + 10**6))
    assert cut.reason is CutReason.RESPONSE_BYTES
    assert client.bytes_read == 0


def test_the_backfill_byte_cap_cuts_the_read_that_crosses_it_and_every_later_one() -> None:
    links = [loss_link(n, count=1000) for n in (1, 2, 3)]
    with ArchiveServer(links) as archive:
        client = ArchiveClient(archive.url, 2.0, 1000, max_total_bytes=50_000)
        assert len(client.records(base_uri(links[0]), T0, T0 + 10**6)) == 1000
        assert not client.exhausted
        cut = cut_of(lambda: client.records(base_uri(links[1]), T0, T0 + 10**6))
        assert (cut.reason, client.exhausted) == (CutReason.BACKFILL_BYTES, True)
        requests = len(archive.requests)
        cut = cut_of(lambda: client.records(base_uri(links[2]), T0, T0 + 10**6))
        assert cut.reason is CutReason.BACKFILL_BYTES
        assert len(archive.requests) == requests  # not even asked


def test_records_paging_ends_at_the_series_time_span() -> None:
    endless = loss_link(1, "full_pages")
    with ArchiveServer([endless]) as archive:
        client = ArchiveClient(archive.url, 2.0, 10)
        cut = cut_of(lambda: client.records(base_uri(endless), T0, T0 + 100))
        pages = archive.data_requests(endless.key)
    assert cut.reason is CutReason.PAGES
    assert len(pages) == 100 // 10 + 2  # one record a second at most, and one page more
    assert [int(page["time-start"]) for page in pages[:3]] == [T0, T0 + 1, T0 + 2]


def test_metadata_paging_ends_at_the_listing_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(archive_client, "MAX_LISTED", 8)
    with ArchiveServer([loss_link(n) for n in range(1, 12)]) as archive:
        client = ArchiveClient(archive.url, 2.0, 4)
        cut = cut_of(lambda: client.metadata(MeasurementKind.LOSS, 10**10))
        assert len(archive.requests) == 2
    assert cut.reason is CutReason.PAGES


def test_cancel_ends_a_read_in_flight_at_once_and_every_later_one() -> None:
    endless = loss_link(1, "endless")
    with ArchiveServer([endless]) as archive:
        client = ArchiveClient(archive.url, 30.0, 100, max_response_bytes=1 << 30)
        errors: list[Exception] = []

        def read() -> None:
            try:
                client.records(base_uri(endless), T0, T0 + 3600)
            except Exception as error:
                errors.append(error)

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        wait_for(lambda: client.bytes_read > 4 * MIB, timeout=10, what="reading")
        assert client.cancel() == 1
        reader.join(timeout=5)
        assert not reader.is_alive()
        assert len(errors) == 1 and isinstance(errors[0], ArchiveCut)
        assert errors[0].reason is CutReason.BOUND
        wait_for(lambda: archive.endless_open == 0, timeout=5, what="the server saw the close")
        requests = len(archive.requests)
        assert cut_of(lambda: client.records(base_uri(endless), T0, T0)).reason is CutReason.BOUND
        assert len(archive.requests) == requests


# ---- the backfill -----------------------------------------------------------------------------


def run_backfill(archive: ArchiveServer, **settings: object) -> ArchiveBackfill:
    options = {"timeout": 30.0, "bound": 20.0, "history": HISTORY_MINUTES * 60.0} | settings
    filling = ArchiveBackfill(
        entry_of(LinkState()),
        BackfillSettings(archive.url, **options),  # type: ignore[arg-type]
        clock=lambda: NOW,
    )
    filling.run()
    return filling


def test_endless_links_are_cut_at_the_response_cap_and_the_others_filled(
    caplog: pytest.LogCaptureFixture,
) -> None:
    links = [archived(1), archived(2, "endless"), archived(3), archived(4, "endless")]
    with ArchiveServer(links) as archive:
        report = run_backfill(archive, max_response_bytes=MIB).report()
        wait_for(lambda: archive.endless_open == 0, timeout=5, what="every answer closed")
    assert report.links == {"filled": 2, "failed": 2, "unfinished": 0}
    assert report.cuts == {"response_bytes": 2}
    assert report.bytes_read >= 2 * (MIB - archive_client.READ_CHUNK)
    assert not report.complete
    cuts = [record for record in caplog.records if record.message == "archive read cut"]
    assert [record.reason for record in cuts] == ["response_bytes"]  # type: ignore[attr-defined]


def test_reads_in_flight_are_cut_at_the_bound_and_no_thread_reads_on() -> None:
    links = [archived(1), *(archived(n, "endless") for n in (2, 3, 4))]
    with ArchiveServer(links) as archive:
        started = time.monotonic()
        filling = run_backfill(archive, bound=1.5, max_response_bytes=1 << 30)
        took = time.monotonic() - started
        wait_for(lambda: archive.endless_open == 0, timeout=5, what="every answer closed")
        sent = archive.endless_bytes
        time.sleep(0.5)
        assert archive.endless_bytes == sent  # nobody reads any more
    report = filling.report()
    assert 1.5 <= took < 3
    assert report.links == {"filled": 1, "unfinished": 3}
    assert report.cuts == {"bound": 3}
    assert report.failed_requests == 0
    assert filling.unready_reason(None) == "no cost matrix since the backfill"


def test_a_backfill_stops_once_it_has_read_its_bytes() -> None:
    links = [archived(n) for n in range(1, 31)]
    with ArchiveServer(links) as archive:
        report = run_backfill(archive, max_bytes=200_000, concurrency=1).report()
    assert report.cuts == {"backfill_bytes": 1}
    assert 200_000 <= report.bytes_read < 200_000 + 100_000
    assert report.links["filled"] < 30
    assert report.links["filled"] + report.links["unfinished"] == 30
    assert not report.complete
