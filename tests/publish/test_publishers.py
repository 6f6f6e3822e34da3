"""The app factory and the publishers: routes, dependencies, web page, observers attached and
detached by the lifespan."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from service.config import Settings
from service.matrix.snapshot import CostMatrix
from service.publish.app import create_app
from service.publish.dependencies import latest_matrix
from service.publish.lifespan import publishers_lifespan
from service.publish.publishers import SnapshotMemo
from service.runtime import Runtime, build_runtime
from tests.publish.support import host_link, make_matrix

LINKS = [host_link("192.0.2.1", "192.0.2.2", source_site="CERN", destination_site="RAL")]


def build(**settings: object) -> Runtime:
    return build_runtime(Settings(**{"model": "none", "publish_telemetry": False} | settings))


@pytest.fixture
def rse_map(tmp_path: Path) -> Path:
    path = tmp_path / "rses.yaml"
    path.write_text("CERN_DISK: CERN\nRAL_DISK: RAL\n")
    return path


def test_routes_serve_the_current_matrix(rse_map):
    runtime = build(rse_map=rse_map)
    with TestClient(create_app(runtime)) as client:
        assert client.get("/alto/networkmap").status_code == 503
        before = client.get("/costmatrix.csv", params={"format": "rucio"})
        assert before.status_code == 503 and before.headers["retry-after"] == "10"
        runtime.cycle.latest = make_matrix(LINKS)
        assert set(client.get("/alto/networkmap").json()["network-map"]) == {"CERN", "RAL"}
        csv = client.get("/costmatrix.csv", params={"format": "rucio"}).text
        assert csv == "CERN,CERN_DISK,0.0000\nRAL,CERN_DISK,0.1000\nRAL,RAL_DISK,0.0000\n"
        assert client.get("/alto/costmap/lossrate").json()["cost-map"] == {"CERN": {"RAL": 0.0}}


def test_rucio_table_is_404_without_rse_map():
    runtime = build()
    runtime.cycle.latest = make_matrix(LINKS)
    with TestClient(create_app(runtime)) as client:
        response = client.get("/costmatrix.csv", params={"format": "rucio"})
    assert response.status_code == 404 and "--rse-map" in response.json()["detail"]


def test_web_page_and_its_files_are_served_from_the_package():
    with TestClient(create_app(build())) as client:
        page = client.get("/")
        script = client.get("/web/app.js")
        styles = client.get("/web/styles.css")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert page.headers["content-security-policy"].startswith("default-src 'self'")
    assert 'src="web/app.js"' in page.text
    assert not re.search(r'(src|href)="(https?:)?//', page.text)  # nothing from elsewhere
    assert "javascript" in script.headers["content-type"] and "EventSource" in script.text
    assert styles.headers["content-type"].startswith("text/css")


def test_snapshots_reach_the_publishers_only_while_their_lifespan_runs(monkeypatch):
    runtime = build(publish_telemetry=True)
    publishers = runtime.publishers
    assert runtime.cycle.observers.published == (publishers.publish,)  # listed once, at build
    woken: list[object] = []
    sent: list[object] = []
    monkeypatch.setattr(publishers.stream, "observe", lambda old, new: woken.append(new))
    monkeypatch.setattr(publishers.telemetry, "observe", lambda old, new: sent.append(new))
    runtime.cycle.recompute()
    assert woken == sent == []  # not started: nothing wakes, nothing goes to the broker
    with TestClient(create_app(runtime, lifespan=publishers_lifespan)):
        matrix = runtime.cycle.recompute()
        assert woken == sent == [matrix]
    runtime.cycle.recompute()
    assert woken == sent == [matrix] and not publishers.running


def test_a_second_app_over_one_runtime_adds_nothing_to_its_cycle():
    runtime = build()
    cycle = runtime.cycle
    observers = cycle.observers
    first, second = create_app(runtime), create_app(runtime)
    assert cycle.observers is observers
    cycle.recompute()
    with TestClient(first) as one, TestClient(second) as two:
        for client in (one, two):
            metrics = client.get("/metrics").text
            assert "nettel_cycle_duration_seconds_count 1.0" in metrics


def test_the_app_alone_starts_nothing():
    runtime = build(publish_telemetry=True)
    with TestClient(create_app(runtime)) as client:
        assert client.get("/healthz").json() == {"status": "ok"}
        assert not runtime.publishers.running
        assert runtime.bus is not None and not runtime.bus.connected


def test_a_test_can_stand_in_for_the_latest_matrix():
    """Every matrix route takes the snapshot through one dependency: overriding it serves the
    given matrix without a cycle (and without it, each answers 503)."""
    app = create_app(build())
    paths = ["/costmatrix", "/costmatrix?level=site", "/alto/costmap/lossrate"]
    with TestClient(app) as client:
        assert [client.get(path).status_code for path in paths] == [503, 503, 503]
        app.dependency_overrides[latest_matrix] = lambda: make_matrix(LINKS)
        assert client.get("/costmatrix").json()["links"] == LINKS
        site = client.get("/costmatrix", params={"level": "site"}).json()["links"]
        assert [(r["source"], r["destination"], r["links"]) for r in site] == [("CERN", "RAL", 1)]
        assert client.get("/alto/costmap/lossrate").json()["cost-map"] == {"CERN": {"RAL": 0.0}}


def test_snapshot_memo_rebuilds_only_for_a_new_snapshot():
    calls: list[CostMatrix] = []
    memo = SnapshotMemo(lambda matrix: calls.append(matrix) or len(calls))
    first, second = make_matrix(LINKS), make_matrix(LINKS)
    assert [memo(first), memo(first), memo(second), memo(second)] == [1, 1, 2, 2]
