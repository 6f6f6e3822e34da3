"""`GET /alarms` and `GET /alarms/stream` over a real uvicorn server configured as `nettel serve`
configures it, over a runtime fed tests/deploy/site_mesh.py's mesh: filters and their 422s, the
404 of an unknown site, the 503 with the alarm book off, the OpenAPI reference, open and close
events received over HTTP, the subscriber limit shared with /costmatrix/stream, and the alarm
metrics on /metrics."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn

from devtools.activemq import free_port
from devtools.metrics_reader import metric_value
from devtools.waiting import wait_for
from service.alarms.book import AlarmBook
from service.alarms.records import AlarmKind
from service.config import Settings
from service.publish.alarm_routes import AlarmsOut
from service.publish.alarm_view import alarm_record, home_sites
from service.publish.app import create_app
from service.publish.http_server import http_config
from service.publish.lifespan import publishers_lifespan
from service.runtime import Runtime, build_runtime
from tests.deploy.site_mesh import mesh_messages, write_topology
from tests.publish.alarm_data import FIREWALL, HIGH_LOSS, OPENED, closed, opened
from tests.publish.support import detach_alarm_engine, read_events

Served = tuple[str, Runtime, AlarmBook]
SITE_A_B = {"source": "SITE-A", "destination": "SITE-B"}
SITE_C_B = {"source": "SITE-C", "destination": "SITE-B"}


def fed_runtime(topology: Path, engine: bool = False, **settings: object) -> Runtime:
    """A runtime (with its alarm book unless alarms=False) fed the mesh, one matrix computed;
    the alarm engine detached unless `engine` (the mesh's lossy links raise alarms of its own)."""
    base: dict[str, Any] = {"model": "none", "publish_telemetry": False, "topology": topology}
    runtime = build_runtime(Settings(**(base | settings)))
    if not engine:
        detach_alarm_engine(runtime.cycle)  # the test records what the engine would
    runtime.pipeline.handle_frames([(t, json.dumps(body), None) for t, body in mesh_messages()])
    runtime.cycle.recompute()
    return runtime


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Callable[..., Served]]:
    """`serve(engine=False, **settings)`: the app and HTTP settings of `nettel serve` with its
    publishers running, on a free loopback port; the alarm engine's book, which the test records
    in (or, with `engine`, the engine did from the mesh)."""
    running: list[tuple[uvicorn.Server, threading.Thread]] = []

    def start(engine: bool = False, **settings: object) -> Served:
        runtime = fed_runtime(write_topology(tmp_path), engine, **settings)
        app = create_app(runtime, publishers_lifespan)
        port = free_port()
        server = uvicorn.Server(http_config(app, "127.0.0.1", port, runtime.http_guard))
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        wait_for(lambda: server.started, timeout=20, interval=0.02, what="uvicorn started")
        running.append((server, thread))
        return f"http://127.0.0.1:{port}", runtime, runtime.alarms or AlarmBook()

    yield start
    for server, thread in running:
        server.should_exit = True
        thread.join(10)


def get(url: str, **params: object) -> httpx.Response:
    return httpx.get(f"{url}/alarms", params=params, timeout=10)


def ids(document: dict[str, list[dict[str, Any]]]) -> dict[str, list[str]]:
    return {part: [alarm["id"] for alarm in alarms] for part, alarms in document.items()}


def test_alarms_lists_open_and_closed_ones_filtered_by_site_kind_and_since(serve) -> None:
    url, runtime, book = serve()
    assert get(url).json() == {"open": [], "closed": []}
    book.record([opened(HIGH_LOSS), opened(FIREWALL)])
    book.record([closed(HIGH_LOSS, OPENED + 600.0)])

    everything = get(url)
    assert everything.status_code == 200
    document = AlarmsOut.model_validate(everything.json())
    assert ids(everything.json()) == {"open": [FIREWALL.id], "closed": [HIGH_LOSS.id]}
    assert everything.json()["open"] == [alarm_record(FIREWALL, runtime.cycle.latest)]
    [firewall] = document.open
    assert firewall.kind is AlarmKind.FIREWALL_ISSUE and firewall.subject == "SITE-B"
    assert firewall.tags == ["SITE-A", "SITE-B", "SITE-C"]
    assert [pair.model_dump() for pair in firewall.site_pairs] == [SITE_A_B, SITE_C_B]
    [ended] = document.closed
    assert ended.status == "closed" and ended.ended_at == OPENED + 600.0

    assert ids(get(url, site="SITE-A").json()) == {"open": [FIREWALL.id], "closed": [HIGH_LOSS.id]}
    assert ids(get(url, site="SITE-B", kind="firewall issue").json()) == {
        "open": [FIREWALL.id],
        "closed": [],
    }
    assert ids(get(url, site="SITE-C", kind="high packet loss").json()) == {  # known, none
        "open": [],
        "closed": [],
    }
    later = OPENED + 601.0  # after the loss alarm ended: only the open one is in effect
    assert ids(get(url, since=later).json()) == {"open": [FIREWALL.id], "closed": []}
    assert ids(get(url, since="2023-11-14T22:23:20Z").json()) == {  # OPENED + 600, ISO 8601
        "open": [FIREWALL.id],
        "closed": [HIGH_LOSS.id],
    }
    assert ids(get(url, limit=0).json()) == {"open": [FIREWALL.id], "closed": []}


def test_wrong_filters_are_answered_with_what_is_wrong(serve) -> None:
    url, _, _ = serve()
    kind = get(url, kind="packet loss")
    assert kind.status_code == 422
    [problem] = kind.json()["detail"]
    assert problem["loc"] == ["query", "kind"] and "'firewall issue'" in problem["msg"]
    naive = get(url, since="2024-05-01T12:00:00")
    assert naive.status_code == 422 and "timezone" in naive.json()["detail"][0]["msg"]
    assert get(url, since="yesterday").status_code == 422
    assert get(url, limit=10_001).status_code == 422
    assert get(url, site="").status_code == 422
    unknown = get(url, site="NOPE")
    assert unknown.status_code == 404
    assert unknown.json() == {
        "detail": "no site named NOPE in the topology, the matrix or an alarm"
    }


def test_without_the_alarm_book_both_endpoints_answer_503(serve) -> None:
    url, runtime, _ = serve(alarms=False)
    assert runtime.alarms is None
    for path in ("/alarms", "/alarms/stream"):
        response = httpx.get(url + path, timeout=10)
        assert response.status_code == 503, path
        assert response.json() == {"detail": "this instance raises no alarms (--alarms false)"}


def test_the_openapi_reference_documents_both_endpoints(serve) -> None:
    url, _, _ = serve()
    spec = httpx.get(f"{url}/openapi.json", timeout=10).json()
    listing = spec["paths"]["/alarms"]["get"]
    assert {p["name"] for p in listing["parameters"]} == {"site", "kind", "since", "limit"}
    schema = listing["responses"]["200"]["content"]["application/json"]["schema"]
    assert schema == {"$ref": "#/components/schemas/AlarmsOut"}
    assert set(listing["responses"]) == {"200", "404", "422", "503"}
    alarm = spec["components"]["schemas"]["AlarmOut"]["properties"]
    assert {"id", "kind", "tags", "body", "source", "site_pairs", "ended_at"} <= set(alarm)
    kinds = spec["components"]["schemas"]["AlarmKind"]["enum"]
    assert kinds == [kind.value for kind in AlarmKind]
    stream = spec["paths"]["/alarms/stream"]["get"]["responses"]
    assert "text/event-stream" in stream["200"]["content"] and "503" in stream


def test_the_stream_sends_the_open_alarms_then_open_and_close_events(serve) -> None:
    url, runtime, book = serve()
    book.record([opened(HIGH_LOSS)])
    received: list[dict[str, Any]] = []
    with httpx.stream("GET", f"{url}/alarms/stream", timeout=httpx.Timeout(10, read=30)) as got:
        assert got.headers["content-type"].startswith("text/event-stream")
        events = read_events(got.iter_lines())
        received.append(next(events))
        # the engine records from the matrix cycle's thread
        threading.Thread(target=book.record, args=([opened(FIREWALL)],)).start()
        received.append(next(events))
        book.record([closed(HIGH_LOSS, OPENED + 600.0)])
        received.append(next(events))
    matrix = runtime.cycle.latest
    assert [(e["event"], e["id"]) for e in received] == [
        ("alarms", "1"),  # the last event it includes: HIGH_LOSS opening
        ("open", "2"),
        ("close", "3"),
    ]
    current, opening, closing = (json.loads(event["data"]) for event in received)
    assert current == {"open": [alarm_record(HIGH_LOSS, matrix)]}
    assert opening == alarm_record(FIREWALL, matrix)
    assert opening["site_pairs"] == [SITE_A_B, SITE_C_B]
    assert closing == alarm_record(HIGH_LOSS.closed(OPENED + 600.0), matrix)


def test_alarm_and_matrix_streams_share_the_subscriber_limit(serve) -> None:
    url, _, _ = serve(sse_max_streams=2)
    with httpx.Client(base_url=url, timeout=10) as client:
        with client.stream("GET", "/alarms/stream") as alarms:
            with client.stream("GET", "/costmatrix/stream") as matrix:
                assert alarms.status_code == matrix.status_code == 200
                wait_for(
                    lambda: (
                        metric_value(url, "nettel_sse_streams", endpoint="alarms_stream")
                        == metric_value(url, "nettel_sse_streams", endpoint="costmatrix_stream")
                        == 1
                    ),
                    timeout=10,
                    what="one stream of each open",
                )
                for path in ("/alarms/stream", "/costmatrix/stream"):
                    refused = client.get(path)
                    assert refused.status_code == 503 and refused.headers["retry-after"] == "30"
    assert metric_value(url, "nettel_http_refused_total", reason="stream_limit") == 2


def test_metrics_count_open_alarms_by_kind_and_site_and_events_by_kind_and_action(serve) -> None:
    url, _, book = serve()

    def value(name: str, **labels: str) -> float:
        return metric_value(url, name, **labels)

    assert value("nettel_site_alarms_open", kind="firewall issue", site="SITE-B") == 0
    book.record([opened(HIGH_LOSS), opened(FIREWALL)])
    book.record([closed(HIGH_LOSS, OPENED + 600.0)])
    assert value("nettel_alarms_open", kind="firewall issue") == 1
    assert value("nettel_alarms_open", kind="high packet loss") == 0
    assert value("nettel_alarm_events_total", kind="high packet loss", action="open") == 1
    assert value("nettel_alarm_events_total", kind="high packet loss", action="close") == 1
    assert value("nettel_alarm_events_total", kind="firewall issue", action="close") == 0
    assert value("nettel_site_alarms_open", kind="firewall issue", site="SITE-B") == 1
    # at the site it is about, not at the peers whose tests to it fail
    assert value("nettel_site_alarms_open", kind="firewall issue", site="SITE-A") == 0
    assert value("nettel_site_alarms_open", kind="high packet loss", site="SITE-A") == 0
    assert value("nettel_site_alarms_open", kind="link silent", site="SITE-C") == 0


def test_the_engines_own_alarms_reach_the_api_the_stream_and_the_metrics(serve) -> None:
    url, runtime, book = serve(engine=True)
    matrix = runtime.cycle.latest
    raised = book.open_alarms()
    assert raised, "the mesh's lossy links (3 % and 8 % for 32 minutes) raise alarms"
    assert get(url).json()["open"] == [alarm_record(alarm, matrix) for alarm in raised]
    with httpx.stream("GET", f"{url}/alarms/stream", timeout=httpx.Timeout(10, read=30)) as got:
        first = next(read_events(got.iter_lines()))
    assert json.loads(first["data"]) == {"open": [alarm_record(a, matrix) for a in raised]}
    for kind in AlarmKind:
        opened_now = sum(alarm.kind is kind for alarm in raised)
        assert metric_value(url, "nettel_alarms_open", kind=kind.value) == opened_now
        events = metric_value(url, "nettel_alarm_events_total", kind=kind.value, action="open")
        assert events == opened_now, kind
    for alarm in raised:
        assert home_sites(alarm, matrix), alarm  # every mesh alarm is about a site
        for site in home_sites(alarm, matrix):
            assert metric_value(url, "nettel_site_alarms_open", kind=alarm.kind.value, site=site)
