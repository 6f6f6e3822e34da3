"""The shipped model in a service fed over the (in-memory) broker: utilisation in /costmatrix,
hot reload (the admin endpoint, and `runtime.reload`, what SIGHUP runs), refusals (at start: a
real `nettel serve`)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import httpx
import pytest

from devtools.local_http import LOCAL_HTTP
from devtools.metrics_reader import metric_value
from devtools.waiting import wait_for
from service.config import DEFAULT_BUNDLE
from service.config import DELAY_TOPIC as DELAY
from service.config import LOSS_TOPIC as LOSS
from service.model.bundle import CARD_FILE, MODEL_FILE
from tests.integration.wire import current_minute_ts, get_json, sample_body

TOKEN = "test-admin-token-123"


@pytest.fixture
def bundle_copy(tmp_path):
    directory = tmp_path / "bundle"
    shutil.copytree(DEFAULT_BUNDLE, directory)
    return directory


def set_card_version(directory, version: str) -> None:
    card = json.loads((directory / CARD_FILE).read_text())
    card["version"] = version
    (directory / CARD_FILE).write_text(json.dumps(card))


def publish_full_window(service) -> None:
    """32 minutes of delay and loss for the sample link, so its feature row is complete."""
    publisher = service.publisher()
    minutes = [current_minute_ts(m) for m in range(32, 0, -1)]
    publisher.send(DELAY, sample_body("owdelay-histogram-real.json", minutes))
    publisher.send(LOSS, sample_body("packet-loss-rate.json", minutes))
    publisher.close()


def predicted_link(url: str) -> dict | None:
    matrix = get_json(f"{url}/costmatrix", source="192.0.2.10")
    links = (matrix or {}).get("links", [])
    return matrix if links and links[0]["utilisation"] is not None else None


def test_shipped_model_fills_utilisation_and_model_identity(memory_broker, memory_service):
    service = memory_service(memory_broker, "--interval", "1", "--subscription", "plain")
    wait_for(lambda: LOCAL_HTTP.get(f"{service.url}/readyz").status_code == 200, what="ready")
    publish_full_window(service)
    matrix = wait_for(lambda: predicted_link(service.url), what="a predicted utilisation")
    card = json.loads((DEFAULT_BUNDLE / CARD_FILE).read_text())
    assert matrix["model"]["version"] == card["version"]
    assert matrix["model"]["sha256"] == card["sha256"]
    link = matrix["links"][0]
    assert 0.0 <= link["utilisation"] <= 1.0 and link["utilisation_reason"] is None
    assert 0.0 <= link["congestion_probability"] <= 1.0  # the shipped bundle is calibrated
    assert link["utilisation_low"] <= link["utilisation"] <= link["utilisation_high"]
    assert f'sha256="{card["sha256"]}"' in httpx.get(f"{service.url}/metrics").text
    assert metric_value(service.url, "nettel_links_predicted") >= 1
    assert httpx.post(f"{service.url}/admin/reload-model").status_code == 404  # no token set


def test_reload_swaps_the_model_keeps_state_and_refuses_bad_bundles(
    memory_broker, memory_service, bundle_copy
):
    service = memory_service(
        memory_broker,
        "--interval",
        "1",
        "--subscription",
        "plain",
        "--model",
        str(bundle_copy),
        env={"NETTEL_ADMIN_TOKEN": TOKEN},
    )
    wait_for(lambda: LOCAL_HTTP.get(f"{service.url}/readyz").status_code == 200, what="ready")
    publish_full_window(service)
    before = wait_for(lambda: predicted_link(service.url), what="a predicted utilisation")
    reload_url = f"{service.url}/admin/reload-model"
    auth = {"Authorization": f"Bearer {TOKEN}"}

    assert httpx.post(reload_url).status_code == 401
    assert httpx.post(reload_url, headers={"Authorization": "Bearer wrong"}).status_code == 401

    set_card_version(bundle_copy, "reloaded-by-api")
    response = httpx.post(reload_url, headers=auth)
    assert response.status_code == 200 and response.json()["version"] == "reloaded-by-api"
    after = wait_for(
        lambda: (
            (m := predicted_link(service.url)) and m["model"]["version"] == "reloaded-by-api" and m
        )
    )
    assert after["links"][0]["samples"] == before["links"][0]["samples"] == 32

    (bundle_copy / MODEL_FILE).write_bytes(b"not a keras archive")
    refused = httpx.post(reload_url, headers=auth)
    assert (
        refused.status_code == 409 and "not a readable .keras archive" in refused.json()["detail"]
    )
    assert predicted_link(service.url)["model"]["version"] == "reloaded-by-api"

    shutil.copy(DEFAULT_BUNDLE / MODEL_FILE, bundle_copy / MODEL_FILE)
    set_card_version(bundle_copy, "reloaded-by-sighup")
    service.runtime.reload()  # what SIGHUP runs
    wait_for(
        lambda: (
            (m := predicted_link(service.url)) and m["model"]["version"] == "reloaded-by-sighup"
        ),
        what="the SIGHUP reload",
    )


def test_a_bundle_with_features_the_service_lacks_is_refused_at_start(bundle_copy):
    card = json.loads((bundle_copy / CARD_FILE).read_text())
    card["feature_names"][0] = "delay_p99"
    (bundle_copy / CARD_FILE).write_text(json.dumps(card))
    result = subprocess.run(
        [sys.executable, "-m", "service", "serve", "--model", str(bundle_copy)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert "features this nettel does not compute: ['delay_p99']" in result.stderr
