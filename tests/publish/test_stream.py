"""`/costmatrix/stream`: per-client change detection, event framing, and a live service."""

from __future__ import annotations

import asyncio
import json
import threading
import time

import httpx

from devtools.metrics_reader import metric_value
from devtools.waiting import wait_for
from service.matrix.views import aggregate_sites
from service.publish.http_guard import HttpRefusal
from service.publish.stream import (
    BACKLOG_EVENTS,
    MatrixStream,
    moved_links,
    removed_links,
    sse_event,
)
from tests.integration.wire import current_minute_ts, get_json
from tests.publish.support import host_link, make_matrix, read_events
from tests.publish.wire_data import DELAY, DESTINATION, LOSS, SOURCE, delay_body, loss_body

A = host_link("192.0.2.1", "192.0.2.2", cost=0.10)
B = host_link("192.0.2.2", "192.0.2.1", cost=0.20)


def test_moved_links_compares_with_what_the_client_was_sent():
    sent = {("192.0.2.1", "192.0.2.2"): (0.10, False, None)}
    assert moved_links([A, B], sent, step=0.01) == [B]  # B was never sent
    assert moved_links([A | {"cost": 0.11}], sent, step=0.01) == []  # moved by exactly the step
    assert moved_links([A | {"cost": 0.1101}], sent, step=0.01) == [A | {"cost": 0.1101}]
    assert moved_links([A | {"congested": True}], sent, step=0.01) == [A | {"congested": True}]
    assert moved_links([A | {"cost": None}], sent, step=0.01) == [A | {"cost": None}]
    tested = A | {"throughput_bps": 9_000_000_000, "throughput_age_s": 60}
    assert moved_links([tested], sent, step=0.01) == [tested]  # a new throughput test
    again = {("192.0.2.1", "192.0.2.2"): (0.10, False, 9_000_000_000)}
    assert moved_links([tested | {"throughput_age_s": 120}], again, step=0.01) == []


def test_removed_links_are_those_sent_that_the_matrix_no_longer_has():
    sent = {
        ("192.0.2.1", "192.0.2.2"): (0.10, False, None),
        ("192.0.2.2", "192.0.2.1"): (0.2, False, None),
    }
    assert removed_links([A, B], sent) == []
    assert removed_links([B], sent) == [("192.0.2.1", "192.0.2.2")]
    assert removed_links([], {}) == []


def test_event_framing():
    assert sse_event("changes", "12.500", b'{"links":[]}') == (
        b'event: changes\nid: 12.500\ndata: {"links":[]}\n\n'
    )


def test_client_gets_the_matrix_then_changes_and_the_stream_ends_on_close():
    first, second = make_matrix([A, B], 100.0), make_matrix([A | {"cost": 0.5}, B], 101.0)
    latest = [first]
    stream = MatrixStream(lambda: latest[0], lambda m: aggregate_sites(m.links), 0.01, 30.0)

    async def scenario() -> list[bytes]:
        events = stream.events("host")
        chunks = [await anext(events), await anext(events)]
        latest[0] = second
        stream.observe(first, second)
        chunks.append(await anext(events))
        stream.close()
        chunks += [chunk async for chunk in events]
        return chunks

    retry, matrix, changes = asyncio.run(scenario())
    assert retry == b"retry: 3000\n\n"
    assert matrix == sse_event("matrix", "100.000", first.body)
    event = next(read_events(iter(changes.decode().split("\n"))))
    assert (event["event"], event["id"]) == ("changes", "101.000")
    assert json.loads(event["data"]) == {
        "generated_at": 101.0,
        "links": [A | {"cost": 0.5}],
        "removed": [],
    }


def test_a_link_that_leaves_the_matrix_is_announced_once_and_again_when_it_returns():
    matrices = [make_matrix([A, B], 100.0), make_matrix([B], 101.0), make_matrix([B], 102.0)]
    matrices.append(make_matrix([A, B], 103.0))
    latest = [matrices[0]]
    stream = MatrixStream(lambda: latest[0], lambda m: aggregate_sites(m.links), 0.01, 30.0)

    async def scenario() -> list[dict[str, object]]:
        events = stream.events("host")
        await anext(events), await anext(events)  # retry, matrix
        changes = []
        for previous, current in zip(matrices, matrices[1:], strict=False):
            latest[0] = current
            stream.observe(previous, current)
            chunk = await anext(events)
            changes.append(json.loads(next(read_events(iter(chunk.decode().split("\n"))))["data"]))
        stream.close()
        return changes

    retired, quiet, back = asyncio.run(scenario())
    assert retired == {
        "generated_at": 101.0,
        "links": [],
        "removed": [{"source": "192.0.2.1", "destination": "192.0.2.2"}],
    }
    assert quiet == {"generated_at": 102.0, "links": [], "removed": []}  # said once
    assert back == {"generated_at": 103.0, "links": [A], "removed": []}  # new to the client again


def test_site_level_clients_get_site_records():
    matrix = make_matrix([A | {"source_site": "S1"}, B | {"destination_site": "S1"}], 100.0)
    stream = MatrixStream(lambda: matrix, lambda m: aggregate_sites(m.links), 0.01, 30.0)

    async def first_event() -> bytes:
        events = stream.events("site")
        await anext(events)
        return await anext(events)

    event = next(read_events(iter(asyncio.run(first_event()).decode().split("\n"))))
    links = json.loads(event["data"])["links"]
    assert [(link["source"], link["destination"], link["links"]) for link in links] == [
        ("S1", "ps.192.0.2.2.example", 1),
        ("ps.192.0.2.2.example", "S1", 1),
    ]


def test_live_stream_sends_matrix_then_changes_and_resends_the_matrix_on_resume(serve, publisher):
    service = serve()
    now = current_minute_ts()
    publisher.send(DELAY, delay_body([now - 120, now - 60]))
    publisher.send(LOSS, loss_body({now - 120: 0.0, now - 60: 0.0}))
    wait_for(lambda: (get_json(f"{service.url}/costmatrix") or {}).get("links"), what="a link")

    url = f"{service.url}/costmatrix/stream"
    with httpx.stream("GET", url, timeout=httpx.Timeout(10.0, read=30.0)) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        events = read_events(response.iter_lines())
        first = next(events)
        matrix = json.loads(first["data"])
        assert first["event"] == "matrix" and first["id"] == f"{matrix['generated_at']:.3f}"
        assert [link["source"] for link in matrix["links"]] == [SOURCE]
        following = next(events)
        assert following["event"] == "changes" and float(following["id"]) > float(first["id"])

        publisher.send(DELAY, delay_body([now]))
        publisher.send(LOSS, loss_body({now: 0.5}))
        moved = wait_for_event(events, lambda e: json.loads(e["data"])["links"])
    link = json.loads(moved["data"])["links"][0]
    assert (link["source"], link["destination"], link["packet_loss"]) == (SOURCE, DESTINATION, 0.5)

    resumed = {"Last-Event-ID": moved["id"]}
    with httpx.stream("GET", url, params={"level": "site"}, headers=resumed, timeout=10.0) as again:
        first_again = next(read_events(again.iter_lines()))
    assert first_again["event"] == "matrix"
    site_links = json.loads(first_again["data"])["links"]
    assert [(s["source"], s["destination"], s["links"]) for s in site_links] == [
        ("SITE-A", "SITE-B", 1)
    ]


def wait_for_event(events, wanted, limit: int = 20) -> dict:
    for _, event in zip(range(limit), events, strict=False):
        if wanted(event):
            return event
    raise AssertionError(f"no wanted event within {limit} events")


def test_service_stops_promptly_with_a_stream_open(nettel_service):
    """A real `nettel serve` (SIGTERM ends the streams first), fed by no broker."""
    token = {"NETTEL_INGEST_TOKEN": "stream-test-token"}  # --brokers none needs an input
    service = nettel_service("none", "--interval", "1", "--model", "none", env=token)
    wait_for(lambda: get_json(f"{service.url}/readyz"), what="a matrix computed")
    ended = threading.Event()

    def read_until_the_server_ends_it() -> None:
        url = f"{service.url}/costmatrix/stream"
        with httpx.stream("GET", url, timeout=httpx.Timeout(10.0, read=60.0)) as response:
            for _ in response.iter_lines():
                pass
        ended.set()

    threading.Thread(target=read_until_the_server_ends_it, daemon=True).start()
    wait_for(
        lambda: metric_value(service.url, "nettel_sse_streams", endpoint="costmatrix_stream"),
        what="the stream open",
    )
    started = time.monotonic()
    assert service.stop(timeout=8) == 0
    assert time.monotonic() - started < 8 and ended.wait(2)


def test_subscribers_share_one_encoded_event_per_matrix():
    first, second = make_matrix([A, B], 100.0), make_matrix([A | {"cost": 0.5}, B], 101.0)
    latest = [first]
    stream = MatrixStream(lambda: latest[0], lambda m: aggregate_sites(m.links), 0.01, 30.0)

    async def scenario() -> list[list[bytes]]:
        clients = [stream.events("host"), stream.events("host")]
        received = [[await anext(c), await anext(c)] for c in clients]
        latest[0] = second
        stream.observe(first, second)
        for chunks, client in zip(received, clients, strict=True):
            chunks.append(await anext(client))
        stream.close()
        return received

    (_, matrix_a, changes_a), (_, matrix_b, changes_b) = asyncio.run(scenario())
    assert matrix_a is matrix_b and changes_a is changes_b  # built once, not per subscriber
    assert b'"cost":0.5' in changes_a


def test_a_subscriber_too_far_behind_is_dropped_and_counted():
    matrices = [make_matrix([A, B], 100.0 + n) for n in range(BACKLOG_EVENTS + 2)]
    latest = [matrices[0]]
    refusals = []
    stream = MatrixStream(
        lambda: latest[0],
        lambda m: aggregate_sites(m.links),
        0.01,
        30.0,
        refuse=lambda *refusal: refusals.append(refusal),
    )

    async def scenario() -> list[bytes]:
        events = stream.events("host", "192.0.2.9")
        await anext(events), await anext(events)  # retry, matrix
        for previous, current in zip(matrices, matrices[1:], strict=False):
            latest[0] = current  # the client reads nothing meanwhile
            stream.observe(previous, current)
        return [chunk async for chunk in events]

    assert asyncio.run(scenario()) == []
    ((reason, client, _),) = refusals
    assert (reason, client) == (HttpRefusal.SLOW_READER, "192.0.2.9")
    assert stream.open_streams() == 0
