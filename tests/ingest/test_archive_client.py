"""ArchiveClient against a local archive server that pages like elmond (real HTTP)."""

from __future__ import annotations

import httpx
import pytest

from devtools.archive_server import ArchivedLink, ArchiveServer, Fault
from service.ingest.archive_client import MAX_PAGE_SIZE, ArchiveClient, ArchiveUnavailable
from service.parse.records import MeasurementKind

DELAY, LOSS = MeasurementKind.DELAY.value, MeasurementKind.LOSS.value
T0 = 1_700_000_040


def loss_records(count: int, step: int = 60) -> list[dict[str, object]]:
    return [{"ts": T0 + step * i, "val": i / 1e6} for i in range(count)]


def link(number: int, records: list[dict[str, object]], fault: Fault | None = None) -> ArchivedLink:
    return ArchivedLink(f"192.0.2.{number}", "198.51.100.20", series={LOSS: records}, fault=fault)


def base_uri(link: ArchivedLink) -> str:
    uri: str = link.metadata()["event-types"][0]["base-uri"]
    return uri


def client_for(archive: ArchiveServer, page_size: int) -> ArchiveClient:
    return ArchiveClient(archive.url, 1.0, page_size)


def test_records_are_paged_from_the_last_ts_plus_one() -> None:
    records = loss_records(40)
    one = link(1, records)
    with ArchiveServer([one]) as archive:
        got = client_for(archive, 7).records(base_uri(one), T0, T0 + 10**6)
        queries = archive.data_requests(one.key)
    assert got == records
    assert [int(q["time-start"]) for q in queries] == [T0] + [
        T0 + 60 * (7 * k - 1) + 1 for k in range(1, 6)
    ]
    assert {q["limit"] for q in queries} == {"7"}
    assert len(queries) == 6  # 5 full pages of 7, then 5 records


def test_a_page_of_exactly_the_limit_asks_once_more() -> None:
    one = link(1, loss_records(14))
    with ArchiveServer([one]) as archive:
        assert len(client_for(archive, 7).records(base_uri(one), T0, T0 + 10**6)) == 14
        assert len(archive.data_requests(one.key)) == 3


def test_elmond_caps_a_page_at_ten_thousand_and_the_client_asks_no_more() -> None:
    records = loss_records(25_000, step=1)
    one = link(1, records)
    with ArchiveServer([one]) as archive:
        query = {"time-start": T0, "limit": 20_000}
        capped = httpx.get(archive.url + base_uri(one), params=query)
        got = client_for(archive, MAX_PAGE_SIZE).records(base_uri(one), T0, T0 + 10**6)
        queries = archive.data_requests(one.key)[1:]
    assert len(capped.json()) == 10_000
    assert got == records
    assert [(q["limit"], int(q["time-start"]) - T0) for q in queries] == [
        ("10000", 0),
        ("10000", 10_000),
        ("10000", 20_000),
    ]
    with pytest.raises(ValueError):
        ArchiveClient(archive.url, 1.0, MAX_PAGE_SIZE + 1)


def test_metadata_is_paged_by_offset() -> None:
    links = [link(n, loss_records(3)) for n in range(1, 12)]
    delay_only = ArchivedLink("192.0.2.99", "198.51.100.20", series={DELAY: loss_records(1)})
    with ArchiveServer([*links, delay_only]) as archive:
        found = client_for(archive, 4).metadata(MeasurementKind.LOSS, 10**10)
        queries = [q for path, q in archive.requests]
    assert [item["source"] for item in found] == [f"192.0.2.{n}" for n in range(1, 12)]
    assert [q["offset"] for q in queries] == ["0", "4", "8"]
    assert {(q["event-type"], q["limit"]) for q in queries} == {(LOSS, "4")}


@pytest.mark.parametrize(
    ("fault", "error"),
    [("fail", "HTTP 500"), ("stall", "TimeoutError"), ("not_a_list", "not a JSON list")],
)
def test_a_series_without_a_usable_answer_is_unavailable(fault: Fault, error: str) -> None:
    bad = link(1, loss_records(3), fault=fault)
    with ArchiveServer([bad]) as archive:
        client = client_for(archive, 100)
        with pytest.raises(ArchiveUnavailable, match=error):
            client.records(base_uri(bad), T0, T0 + 600)


def test_unknown_paths_and_a_gone_server_are_unavailable() -> None:
    with ArchiveServer([link(1, loss_records(3))]) as archive:
        client = client_for(archive, 100)
        with pytest.raises(ArchiveUnavailable, match="HTTP 404"):
            client.records("/esmond/perfsonar/archive/nope/packet-loss-rate/base", T0, T0)
    with pytest.raises(ArchiveUnavailable, match="ConnectionRefusedError"):
        client.metadata(MeasurementKind.LOSS, 60)
