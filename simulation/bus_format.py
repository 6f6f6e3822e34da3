"""Messages of a simulated mesh in the perfSONAR bus format: (STOMP headers, JSON body) pairs.

Version 1 is the original collector's layout (tests/data/owdelay-histogram-real.json,
tests/data/packet-loss-rate.json, and for throughput tests and traceroutes
tests/data/throughput-raw.json, packet-retransmits-raw.json, packet-trace-raw.json); version 2
the toolkit-push layout (tests/data/owdelay-v2-push.json).
Pure builders: serialising and sending are the caller's business.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from simulation.simulator import Mesh

DELAY_EVENT = "histogram-owdelay"
LOSS_EVENT = "packet-loss-rate"
THROUGHPUT_EVENT = "throughput"
RETRANSMITS_EVENT = "packet-retransmits"
TRACE_EVENT = "packet-trace"
TOPIC_PREFIX = "/topic/perfsonar.raw."
MAX_DATAPOINTS = 100
#: Seconds between the start of a message's last minute and the collector sending it.
COLLECTOR_LAG_S = 65.0

Message = tuple[dict[str, str], dict[str, Any]]
#: The test tool behind each event type, and what its metadata says of the test.
_TESTS: dict[str, tuple[str, dict[str, str]]] = {
    DELAY_EVENT: ("powstream", {"time_duration": "60", "ip_transport_protocol": "udp"}),
    LOSS_EVENT: ("powstream", {"time_duration": "60", "ip_transport_protocol": "udp"}),
    THROUGHPUT_EVENT: ("iperf3", {"time_duration": "10", "ip_transport_protocol": "tcp"}),
    RETRANSMITS_EVENT: ("iperf3", {"time_duration": "10", "ip_transport_protocol": "tcp"}),
    TRACE_EVENT: ("traceroute", {"time_duration": "8"}),
}


def build_delay_message(
    mesh: Mesh,
    link_index: int,
    datapoints: Mapping[int, Mapping[str, int]],
    *,
    sent_at: float | None = None,
    version: int = 1,
) -> Message:
    """A histogram-owdelay message: epoch second -> {delay ms "2.57": packet count}."""
    return _build(mesh, link_index, DELAY_EVENT, datapoints, sent_at, version)


def build_loss_message(
    mesh: Mesh,
    link_index: int,
    datapoints: Mapping[int, float],
    *,
    sent_at: float | None = None,
    version: int = 1,
) -> Message:
    """A packet-loss-rate message: epoch second -> loss ratio in [0, 1]."""
    return _build(mesh, link_index, LOSS_EVENT, datapoints, sent_at, version)


def build_throughput_message(
    mesh: Mesh, link_index: int, datapoints: Mapping[int, int], *, sent_at: float | None = None
) -> Message:
    """A throughput message: a test's start (epoch s) -> its rate in bits/s (an integer)."""
    return _build(mesh, link_index, THROUGHPUT_EVENT, datapoints, sent_at, 1)


def build_retransmits_message(
    mesh: Mesh, link_index: int, datapoints: Mapping[int, int], *, sent_at: float | None = None
) -> Message:
    """A packet-retransmits message: a test's start -> its TCP retransmits."""
    return _build(mesh, link_index, RETRANSMITS_EVENT, datapoints, sent_at, 1)


def build_trace_message(
    mesh: Mesh,
    link_index: int,
    datapoints: Mapping[int, list[dict[str, Any]]],
    *,
    sent_at: float | None = None,
) -> Message:
    """A packet-trace message: a trace's start -> esmond's hop list (`ttl`, `query`, `success`,
    `ip`, `as`, `rtt` ms; a hop that did not answer has no `ip`)."""
    return _build(mesh, link_index, TRACE_EVENT, datapoints, sent_at, 1)


def compute_metadata_key(mesh: Mesh, link_index: int, tool: str = "powstream") -> str:
    """Stable 32-hex key of the link's test with `tool`.

    As in esmond, the key names the test, so the delay and loss messages of a link share it
    (the two samples of the same link do), as do a throughput test's rate and retransmits.
    """
    source, destination = _endpoints(mesh, link_index)
    identity = f"{source[0]}|{destination[0]}|{tool}".encode()
    return hashlib.blake2b(identity, digest_size=16).hexdigest()


def _build(
    mesh: Mesh,
    link_index: int,
    event_type: str,
    datapoints: Mapping[int, Any],
    sent_at: float | None,
    version: int,
) -> Message:
    if not 1 <= len(datapoints) <= MAX_DATAPOINTS:
        raise ValueError(f"a message carries 1 to {MAX_DATAPOINTS} datapoints: {len(datapoints)}")
    ts_start = min(datapoints)
    sent = max(datapoints) + COLLECTOR_LAG_S if sent_at is None else sent_at
    points = {str(ts): datapoints[ts] for ts in sorted(datapoints)}
    if version == 1:
        return _build_v1(mesh, link_index, event_type, points, ts_start, sent)
    if version == 2:
        return _build_v2(mesh, link_index, event_type, points, ts_start, sent)
    raise ValueError(f"unknown message layout version {version}")


def _build_v1(
    mesh: Mesh, link: int, event_type: str, points: dict[str, Any], ts_start: int, sent: float
) -> Message:
    tool, test = _TESTS[event_type]
    key = compute_metadata_key(mesh, link, tool)
    meta = _common_meta(mesh, link, f"pscheduler/{tool}" if tool != "powstream" else tool)
    meta |= test | {"org_metadata_key": key}
    headers = {
        "destination": TOPIC_PREFIX + event_type,
        "event-type": event_type,
        "input-source": meta["input_source"],
        "input-destination": meta["input_destination"],
        "org_metadata_key": key,
        "ts_start": str(ts_start),
        "rsv-timestamp": f"{sent:.2f}",
        "summaries": "0",
    }
    return headers, {"meta": meta, "datapoints": points}


def _build_v2(
    mesh: Mesh, link: int, event_type: str, points: dict[str, Any], ts_start: int, sent: float
) -> Message:
    headers = {"destination": TOPIC_PREFIX + event_type, "event-type": event_type, "summaries": "0"}
    meta = _common_meta(mesh, link, "pscheduler/powstream") | {
        "event-type": event_type,
        "summaries": 0,
        "ts_start": ts_start,
        "rsv-timestamp": round(sent, 2),
        "push": True,
    }
    return headers, {"version": 2, "meta": meta, "datapoints": points}


def _common_meta(mesh: Mesh, link: int, tool_name: str) -> dict[str, Any]:
    (source_ip, source_host), (destination_ip, destination_host) = _endpoints(mesh, link)
    return {
        "subject_type": "point-to-point",
        "source": source_ip,
        "destination": destination_ip,
        "input_source": source_host,
        "input_destination": destination_host,
        "measurement_agent": source_ip,
        "tool_name": tool_name,
    }


def _endpoints(mesh: Mesh, link: int) -> tuple[tuple[str, str], tuple[str, str]]:
    """((sender IP, sender host name), (receiver IP, receiver host name)) of a link."""
    source, destination = int(mesh.source[link]), int(mesh.destination[link])
    return (
        (mesh.host_ips[source], mesh.host_names[source]),
        (mesh.host_ips[destination], mesh.host_names[destination]),
    )
