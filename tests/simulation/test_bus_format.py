"""Bus messages of the simulated mesh: the layouts of the samples, readable by the service."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from service.parse.perfsonar import parse_message
from service.parse.records import MeasurementKind
from simulation.bus_format import (
    build_delay_message,
    build_loss_message,
    compute_metadata_key,
)
from simulation.simulator import Mesh, build_mesh, simulate_minute, simulate_utilisation

TS = 1_700_000_040
# Key order of tests/data/owdelay-histogram-real.json and tests/data/packet-loss-rate.json.
V1_HEADER_KEYS = [
    "destination",
    "event-type",
    "input-source",
    "input-destination",
    "org_metadata_key",
    "ts_start",
    "rsv-timestamp",
    "summaries",
]
V1_META_KEYS = [
    "subject_type",
    "source",
    "destination",
    "input_source",
    "input_destination",
    "measurement_agent",
    "tool_name",
    "time_duration",
    "ip_transport_protocol",
    "org_metadata_key",
]
# Key order of tests/data/owdelay-v2-push.json.
V2_HEADER_KEYS = ["destination", "event-type", "summaries"]
V2_META_KEYS = [
    "subject_type",
    "source",
    "destination",
    "input_source",
    "input_destination",
    "measurement_agent",
    "tool_name",
    "event-type",
    "summaries",
    "ts_start",
    "rsv-timestamp",
    "push",
]
HEX32 = re.compile(r"^[0-9a-f]{32}$")
DELAY_KEY = re.compile(r"^-?\d+\.\d{2}$")


@pytest.fixture(scope="module")
def mesh() -> Mesh:
    return build_mesh()


def test_delay_message_of_a_constructed_link_is_exact() -> None:
    two_sites = build_mesh(2, seed=0)
    headers, body = build_delay_message(two_sites, 0, {TS: {"2.57": 600}}, sent_at=1700000105.27)
    key = compute_metadata_key(two_sites, 0)
    assert headers == {
        "destination": "/topic/perfsonar.raw.histogram-owdelay",
        "event-type": "histogram-owdelay",
        "input-source": "ps-latency.site01.example.org",
        "input-destination": "ps-latency.site02.example.org",
        "org_metadata_key": key,
        "ts_start": "1700000040",
        "rsv-timestamp": "1700000105.27",
        "summaries": "0",
    }
    assert body == {
        "meta": {
            "subject_type": "point-to-point",
            "source": "10.0.1.10",
            "destination": "10.0.2.10",
            "input_source": "ps-latency.site01.example.org",
            "input_destination": "ps-latency.site02.example.org",
            "measurement_agent": "10.0.1.10",
            "tool_name": "powstream",
            "time_duration": "60",
            "ip_transport_protocol": "udp",
            "org_metadata_key": key,
        },
        "datapoints": {"1700000040": {"2.57": 600}},
    }


def test_v1_messages_have_the_sample_layout(mesh: Mesh) -> None:
    delay = build_delay_message(mesh, 5, {TS: {"2.57": 599}})
    loss = build_loss_message(mesh, 5, {TS: 1 / 600})
    for (headers, body), event_type in ((delay, "histogram-owdelay"), (loss, "packet-loss-rate")):
        assert list(headers) == V1_HEADER_KEYS
        assert list(body) == ["meta", "datapoints"]
        assert list(body["meta"]) == V1_META_KEYS
        assert headers["destination"] == f"/topic/perfsonar.raw.{event_type}"
        assert headers["event-type"] == event_type
        assert all(isinstance(value, str) for value in headers.values())
        assert json.loads(json.dumps(body)) == body
    assert loss[1]["datapoints"] == {str(TS): 1 / 600}


def test_endpoints_come_from_the_link(mesh: Mesh) -> None:
    link = 123
    source, destination = mesh.source[link], mesh.destination[link]
    headers, body = build_loss_message(mesh, link, {TS: 0.0})
    meta = body["meta"]
    assert (meta["source"], meta["destination"]) == (
        mesh.host_ips[source],
        mesh.host_ips[destination],
    )
    assert meta["measurement_agent"] == meta["source"]
    assert headers["input-source"] == meta["input_source"] == mesh.host_names[source]
    assert headers["input-destination"] == meta["input_destination"] == mesh.host_names[destination]


def test_metadata_key_is_stable_per_link_and_shared_by_its_event_types(mesh: Mesh) -> None:
    keys = [compute_metadata_key(mesh, link) for link in range(mesh.n_links)]
    assert all(HEX32.match(key) for key in keys)
    assert len(set(keys)) == mesh.n_links
    assert keys == [compute_metadata_key(build_mesh(seed=9), link) for link in range(mesh.n_links)]
    delay_headers, delay_body = build_delay_message(mesh, 7, {TS: {"1.00": 600}})
    loss_headers, loss_body = build_loss_message(mesh, 7, {TS: 0.0})
    assert delay_headers["org_metadata_key"] == delay_body["meta"]["org_metadata_key"] == keys[7]
    assert loss_headers["org_metadata_key"] == loss_body["meta"]["org_metadata_key"] == keys[7]


def test_several_datapoints_are_sorted_and_ts_start_is_the_earliest(mesh: Mesh) -> None:
    headers, body = build_loss_message(mesh, 0, {TS + 120: 0.0, TS: 0.05, TS + 60: 0.1})
    assert list(body["datapoints"]) == [str(TS), str(TS + 60), str(TS + 120)]
    assert headers["ts_start"] == str(TS)
    assert headers["rsv-timestamp"] == f"{TS + 120 + 65:.2f}"


def test_v2_messages_have_the_push_layout(mesh: Mesh) -> None:
    headers, body = build_delay_message(
        mesh, 1, {TS: {"34.40": 506, "34.50": 94}}, sent_at=1700000161.4, version=2
    )
    assert list(headers) == V2_HEADER_KEYS
    assert list(body) == ["version", "meta", "datapoints"]
    assert body["version"] == 2
    assert list(body["meta"]) == V2_META_KEYS
    meta = body["meta"]
    assert meta["tool_name"] == "pscheduler/powstream"
    assert (meta["event-type"], meta["summaries"], meta["push"]) == ("histogram-owdelay", 0, True)
    assert (meta["ts_start"], meta["rsv-timestamp"]) == (TS, 1700000161.4)


@pytest.mark.parametrize(
    ("datapoints", "version"),
    [({}, 1), ({TS + 60 * i: 0.0 for i in range(101)}, 1), ({TS: 0.0}, 3)],
)
def test_messages_without_a_valid_size_or_layout_are_refused(
    mesh: Mesh, datapoints: dict[int, float], version: int
) -> None:
    with pytest.raises(ValueError):
        build_loss_message(mesh, 0, datapoints, version=version)


@pytest.mark.parametrize("version", [1, 2])
def test_simulated_minutes_parse_with_the_service_parser(mesh: Mesh, version: int) -> None:
    minute = TS // 60
    utilisation = simulate_utilisation(mesh, minute, 1, seed=0)[:, 0]
    utilisation[::50] = 1.2
    measured = simulate_minute(mesh, utilisation, minute, seed=0)
    mean, _, median = measured.delay_statistics()
    for link in range(0, mesh.n_links, 25):
        histogram = measured.histogram(link)
        assert all(DELAY_KEY.match(key) for key in histogram)
        _, delay_body = build_delay_message(mesh, link, {TS: histogram}, version=version)
        parsed = parse_message(MeasurementKind.DELAY, json.dumps(delay_body).encode())
        [(ts, stats)] = parsed.delays
        assert (ts, stats.packets, parsed.rejected) == (TS, measured.received[link], [])
        assert (stats.mean, stats.median) == pytest.approx((mean[link], median[link]), abs=1e-9)
        assert stats.clock_suspect == (stats.minimum < 0)
        assert parsed.link.source == mesh.host_ips[mesh.source[link]]
        assert parsed.link.destination_host == mesh.host_names[mesh.destination[link]]
        loss = {TS: float(measured.loss[link])}
        _, loss_body = build_loss_message(mesh, link, loss, version=version)
        parsed = parse_message(MeasurementKind.LOSS, json.dumps(loss_body))
        assert parsed.losses == [(TS, measured.loss[link])]


def test_negative_delay_links_parse_as_clock_suspect(mesh: Mesh) -> None:
    link = int(np.argmin(mesh.base_delay_ms + mesh.clock_offset_ms))
    measured = simulate_minute(mesh, np.full(mesh.n_links, 0.2), TS // 60, seed=0)
    _, body = build_delay_message(mesh, link, {TS: measured.histogram(link)})
    [(_, stats)] = parse_message(MeasurementKind.DELAY, json.dumps(body)).delays
    assert stats.clock_suspect and stats.minimum < 0
