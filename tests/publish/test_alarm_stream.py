"""/alarms/stream's hub and the alarm records it sends: the open alarms on connect, then each
event once for every subscriber, slow subscribers dropped, every stream ended with the limit it
shares with /costmatrix/stream; and the site pairs an alarm's links join."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from service.alarms.book import AlarmBook
from service.alarms.records import AlarmKind
from service.matrix.views import aggregate_sites
from service.publish.alarm_stream import BACKLOG_EVENTS, AlarmStream
from service.publish.alarm_view import alarm_record, home_sites, site_pairs
from service.publish.http_guard import HttpRefusal
from service.publish.stream import MatrixStream, StreamLimit
from tests.publish.alarm_data import FIREWALL, HIGH_LOSS, closed, make_alarm, opened
from tests.publish.support import host_link, make_matrix, read_events

#: The two host pairs the alarms name, and one more, as the matrix has them (one unsited end).
MATRIX = make_matrix(
    [
        host_link("192.0.2.11", "198.51.100.21", source_site="SITE-A", destination_site="SITE-B"),
        host_link("203.0.113.5", "198.51.100.21", source_site="SITE-C", destination_site="SITE-B"),
        host_link("203.0.113.99", "198.51.100.21", destination_site="SITE-B"),
    ]
)


def parsed(chunk: bytes) -> dict[str, Any]:
    event = next(read_events(iter(chunk.decode().split("\n"))))
    return event | {"data": json.loads(event["data"])}


def test_site_pairs_are_the_site_level_cells_of_the_alarms_links() -> None:
    assert site_pairs(HIGH_LOSS, MATRIX) == [{"source": "SITE-A", "destination": "SITE-B"}]
    assert site_pairs(FIREWALL, MATRIX) == [
        {"source": "SITE-A", "destination": "SITE-B"},
        {"source": "SITE-C", "destination": "SITE-B"},
    ]
    unsited = make_alarm(
        HIGH_LOSS.kind, "x", ("SITE-B",), (("203.0.113.99", "198.51.100.21"),), {"loss": 0.1}
    )
    assert site_pairs(unsited, MATRIX) == [  # an unsited host stands for itself, as at level=site
        {"source": "ps.203.0.113.99.example", "destination": "SITE-B"}
    ]
    assert {(p["source"], p["destination"]) for p in site_pairs(FIREWALL, MATRIX)} <= {
        (pair["source"], pair["destination"]) for pair in aggregate_sites(MATRIX.links)
    }
    gone = make_alarm(HIGH_LOSS.kind, "y", ("SITE-A",), (("192.0.2.99", "192.0.2.98"),), {})
    assert site_pairs(gone, MATRIX) == [] and site_pairs(HIGH_LOSS, None) == []


def test_an_alarm_is_about_a_links_ends_a_groups_site_or_a_hosts_site() -> None:
    assert home_sites(HIGH_LOSS, MATRIX) == ["SITE-A", "SITE-B"]
    assert FIREWALL.sites == ("SITE-A", "SITE-B", "SITE-C")
    assert home_sites(FIREWALL, MATRIX) == ["SITE-B"]  # not the peers whose tests fail
    links = FIREWALL.links
    host_group = make_alarm(HIGH_LOSS.kind, "ps.198.51.100.21.example", FIREWALL.sites, links, {})
    assert home_sites(host_group, MATRIX) == ["SITE-B"]  # the host's own site, by the matrix
    unsited = make_alarm(HIGH_LOSS.kind, "ps.203.0.113.99.example", ("SITE-B",), links, {})
    assert home_sites(unsited, MATRIX) == []
    clock = make_alarm(AlarmKind.LARGE_CLOCK_CORRECTION, "ps.gone.example", ("SITE-C",), (), {})
    assert home_sites(clock, MATRIX) == home_sites(clock, None) == ["SITE-C"]


def test_an_alarm_record_is_the_books_json_plus_its_site_pairs() -> None:
    record = alarm_record(HIGH_LOSS, MATRIX)
    assert record == HIGH_LOSS.to_json() | {
        "site_pairs": [{"source": "SITE-A", "destination": "SITE-B"}]
    }
    assert record["tags"] == ["SITE-A", "SITE-B"] and record["source"] == {
        "loss": 0.08,
        "threshold": 0.02,
    }


def test_a_client_gets_the_open_alarms_then_open_and_close_events() -> None:
    book = AlarmBook()
    book.record([opened(HIGH_LOSS)])
    stream = AlarmStream(book, StreamLimit(), lambda: MATRIX)
    book.add_listener(stream.on_event)

    async def scenario() -> list[bytes]:
        events = stream.events()
        chunks = [await anext(events), await anext(events)]
        book.record([opened(FIREWALL)])
        chunks.append(await anext(events))
        book.record([closed(HIGH_LOSS, HIGH_LOSS.opened_at + 600.0)])
        chunks.append(await anext(events))
        stream.limit.close()
        chunks += [chunk async for chunk in events]
        return chunks

    retry, current, opening, closing = asyncio.run(scenario())
    assert retry == b"retry: 3000\n\n"
    first = parsed(current)
    assert (first["event"], first["id"]) == ("alarms", "0")
    assert first["data"] == {"open": [alarm_record(HIGH_LOSS, MATRIX)]}
    second = parsed(opening)
    assert (second["event"], second["id"]) == ("open", "1")
    assert second["data"] == alarm_record(FIREWALL, MATRIX)
    third = parsed(closing)
    assert (third["event"], third["id"]) == ("close", "2")
    assert third["data"]["id"] == HIGH_LOSS.id and third["data"]["status"] == "closed"
    assert third["data"]["ended_at"] == HIGH_LOSS.opened_at + 600.0


def test_subscribers_share_one_encoded_event() -> None:
    book = AlarmBook()
    stream = AlarmStream(book, StreamLimit(), lambda: MATRIX)
    book.add_listener(stream.on_event)

    async def scenario() -> list[bytes]:
        clients = [stream.events(), stream.events()]
        for client in clients:
            await anext(client), await anext(client)  # retry, alarms
        book.record([opened(HIGH_LOSS)])
        received = [await anext(client) for client in clients]
        stream.limit.close()
        return received

    first, second = asyncio.run(scenario())
    assert first is second and parsed(first)["event"] == "open"


def test_a_subscriber_too_far_behind_is_dropped_and_counted() -> None:
    book = AlarmBook()
    refusals: list[tuple[HttpRefusal, str, str]] = []
    stream = AlarmStream(
        book, StreamLimit(refuse=lambda *refusal: refusals.append(refusal)), lambda: None
    )
    book.add_listener(stream.on_event)
    alarms = [
        make_alarm(HIGH_LOSS.kind, f"pair {n}", ("SITE-A",), (), {}, opened_at=HIGH_LOSS.opened_at)
        for n in range(BACKLOG_EVENTS + 1)
    ]

    async def scenario() -> list[bytes]:
        events = stream.events("192.0.2.9")
        await anext(events), await anext(events)  # retry, alarms
        for alarm in alarms:  # the client reads nothing meanwhile
            book.record([opened(alarm)])
        return [chunk async for chunk in events]

    assert asyncio.run(scenario()) == []
    ((reason, client, _),) = refusals
    assert (reason, client) == (HttpRefusal.SLOW_READER, "192.0.2.9")
    assert stream.open_streams() == 0


def test_alarm_and_matrix_streams_count_against_one_limit_and_end_together() -> None:
    matrix_stream = MatrixStream(lambda: MATRIX, lambda m: aggregate_sites(m.links), 0.01, 30.0, 2)
    book = AlarmBook()
    stream = AlarmStream(book, matrix_stream.limit, lambda: MATRIX)

    async def scenario() -> tuple[bool, bool, list[bytes]]:
        alarms, matrices = stream.events(), matrix_stream.events("site")
        await anext(alarms), await anext(alarms)
        with_one = matrix_stream.limit.full()
        await anext(matrices), await anext(matrices)
        with_two = matrix_stream.limit.full()
        matrix_stream.close()  # at shutdown: every stream under the limit ends
        return with_one, with_two, [c async for c in alarms] + [c async for c in matrices]

    with_one, with_two, rest = asyncio.run(scenario())
    assert (with_one, with_two, rest) == (False, True, [])
    assert stream.open_streams() == matrix_stream.open_streams() == 0
