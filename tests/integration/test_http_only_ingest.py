"""`nettel serve --brokers none`: a perfSONAR 5 deployment whose toolkits only post runs over
HTTP. The service becomes ready without a broker, serves the runs, and exports no bus metrics
(an alert on `nettel_broker_connected` would otherwise fire for ever)."""

from __future__ import annotations

import time

import httpx
import pytest

from devtools.local_http import LOCAL_HTTP
from devtools.metrics_reader import metric_value
from devtools.waiting import wait_for
from service.config import load_settings
from service.errors import ConfigError
from tests.integration.wire import get_json
from tests.run_factory import SOURCE_HOST, run_body

TOKEN = "http-only-token-5d1e"
HEADERS = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}


def test_no_brokers_needs_the_ingest_token_and_no_ha_group(monkeypatch: pytest.MonkeyPatch):
    with pytest.raises(ConfigError, match="ingest token"):
        load_settings(brokers="none")
    monkeypatch.setenv("NETTEL_INGEST_TOKEN", TOKEN)
    assert load_settings(brokers="none").brokers == ()
    assert load_settings(brokers="NONE").brokers == ()
    with pytest.raises(ConfigError, match="--ha-group / NETTEL_HA_GROUP elects through the broker"):
        load_settings(brokers="none", ha_group="replicas")


def test_a_service_without_brokers_is_ready_on_http_runs_alone(nettel_service):
    service = nettel_service(
        "none", "--interval", "1", "--model", "none", env={"NETTEL_INGEST_TOKEN": TOKEN}
    )
    ingest = f"{service.url}/ingest/pscheduler"
    response = httpx.put(ingest, content=run_body(time.time(), run_id="only-1"), headers=HEADERS)
    assert response.status_code == 202

    def ready() -> dict | None:
        answer = LOCAL_HTTP.get(f"{service.url}/readyz")
        return answer.json() if answer.status_code == 200 else None

    readiness = wait_for(ready, what="/readyz 200 without a broker")
    assert (readiness["ready"], readiness["problems"]) == (True, [])
    assert [source["kind"] for source in readiness["sources"]] == ["pscheduler-http"]
    (link,) = wait_for(
        lambda: (get_json(f"{service.url}/costmatrix", source=SOURCE_HOST) or {}).get("links"),
        what="the run's link in /costmatrix",
    )
    assert link["source_host"] == SOURCE_HOST and link["samples"] == 1
    assert metric_value(service.url, "nettel_pscheduler_runs_total", outcome="applied") == 1
    metrics = httpx.get(f"{service.url}/metrics", timeout=5.0).text
    assert "nettel_broker_connected" not in metrics
    assert "nettel_ingest_arrival_lag_seconds" not in metrics
    assert metric_value(service.url, "nettel_ha_leader") == 0.0  # no telemetry without a bus
