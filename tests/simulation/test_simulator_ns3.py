"""Simulator family C (simulation.simulator_ns3): ns-3's packet-level physics in short scenarios,
seeded determinism, and a capture directory the real-data pipeline reads as it is."""

from __future__ import annotations

import gzip
import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("ns3", reason="ns-3 is not installed: pip install 'nettel[ns3]'")

from simulation.simulator_ns3 import (  # noqa: E402
    PACKET_BYTES,
    PROBES_PER_MINUTE,
    ROUTER_DIR,
    ROUTER_MAP,
    UDP_BYTES,
    CaptureRequest,
    LinkDraw,
    LinkMeasurement,
    TrafficSchedule,
    build_hosts,
    draw_links,
    simulate_link,
    write_links,
)
from training.dataset import WARMUP_MINUTES, build_real_dataset  # noqa: E402

SEED = 3
FIRST_MINUTE = 28_401_088
#: Bytes of one probe on the bottleneck's wire: payload, SeqTs header, UDP, IPv4, PPP.
PROBE_WIRE_BYTES = 40 + 12 + 8 + 20 + 2
#: A full-sized TCP packet's transmission time at 2 Mb/s.
PACKET_MS = PACKET_BYTES * 8 / 2e6 * 1e3
#: A UDP packet of the on/off sources on the wire.
UDP_WIRE_BYTES = UDP_BYTES + 8 + 20 + 2

pytestmark = pytest.mark.slow


def traffic(
    bulk: tuple[int, ...] = (),
    udp_load: float = 0.0,
    minutes: int = 4,
    udp_from_s: float = 0.5,
) -> TrafficSchedule:
    """Bulk TCP transfers (one per congestion-control index in `bulk`) from t = 1 s, and
    constant-rate UDP at `udp_load` of the 2 Mb/s link from `udp_from_s`, all until the end."""
    end = 60.0 * minutes
    n = len(bulk)
    udp = udp_load > 0
    return TrafficSchedule(
        flow_start=np.full(n, 1.0),
        flow_bytes=np.zeros(n),
        flow_stop=np.full(n, end),
        flow_sender=np.zeros(n, np.int64),
        flow_cc=np.array(bulk, np.int64),
        udp_start=np.array([udp_from_s] if udp else []),
        udp_stop=np.array([end] if udp else []),
        udp_rate_bps=np.array([udp_load * 2e6] if udp else []),
        cross_start=np.zeros(0),
        cross_stop=np.zeros(0),
        cross_rate_bps=np.zeros(0),
    )


def link(
    schedule: TrafficSchedule, minutes: int = 4, index: int = 0, **changes: object
) -> LinkDraw:
    """A 2 Mb/s FIFO link with a 66 ms buffer (11 packets), 20 ms away, one hop, true clocks."""
    drawn = draw_links(build_hosts(2, SEED), minutes, SEED)[index]
    fixed = replace(
        drawn,
        rate_bps=2e6,
        qdisc="fifo",
        queue_packets=10,
        buffer_ms=11 * PACKET_MS,
        propagation_ms=20.0,
        far_sender_ms=5.0,
        bottleneck_delay_ms=20.0,
        has_hop2=False,
        hop2_rate_bps=0.0,
        hop2_delay_ms=0.1,
        hop2_queue_packets=0,
        clock_offset_ms=0.0,
        probe_offset_s=0.03,
        traffic=schedule,
    )
    return replace(fixed, **changes)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def idle() -> LinkMeasurement:
    return simulate_link(link(traffic()))


@pytest.fixture(scope="module")
def saturated() -> LinkMeasurement:
    return simulate_link(link(traffic(bulk=(0,))))  # one TCP Cubic bulk transfer


def test_an_idle_link_neither_queues_nor_loses(idle: LinkMeasurement) -> None:
    assert not np.isnan(idle.delay_ms).any()
    base = idle.delay_ms.min()
    assert 20.0 <= base <= 21.0  # propagation + the probe's transmission times
    assert idle.delay_ms.max() - base < 0.01
    # the bottleneck carried exactly the probes: 600 a minute
    np.testing.assert_array_equal(idle.bytes_out, PROBES_PER_MINUTE * PROBE_WIRE_BYTES)


def test_a_saturated_fifo_link_queues_a_good_share_of_its_buffer_and_loses_probes(
    idle: LinkMeasurement, saturated: LinkMeasurement
) -> None:
    draw = link(traffic(bulk=(0,)))
    base = idle.delay_ms.min()
    busy = saturated.delay_ms[1:]  # after the transfer's slow start
    assert (saturated.utilisation(draw.rate_bps)[1:] > 0.95).all()
    queued = np.nanmedian(busy, axis=1) - base
    assert (queued > 0.4 * draw.buffer_ms).all(), queued
    # bounded by the buffer and the packet in transmission
    assert (np.nanmax(busy, axis=1) - base <= draw.buffer_ms + PACKET_MS).all()
    assert np.isnan(busy).sum() > 0  # a loss-based TCP overflows the buffer and probes drop
    assert saturated.queue_drops[1:].sum() > 0


def test_fq_codel_keeps_the_queue_short_under_the_same_transfer(idle: LinkMeasurement) -> None:
    draw = link(traffic(bulk=(0,)), qdisc="fq_codel", queue_packets=100)
    measured = simulate_link(draw)
    assert (measured.utilisation(draw.rate_bps)[1:] > 0.9).all()
    queued = np.nanmedian(measured.delay_ms[1:], axis=1) - idle.delay_ms.min()
    assert (queued < 15.0).all(), queued  # the probe's own flow queue stays short


def test_utilisation_from_transmitted_bytes_matches_the_offered_load() -> None:
    draw = link(traffic(udp_load=0.4), minutes=3)
    measured = simulate_link(draw)
    packets_per_minute = 60.0 / (UDP_BYTES * 8 / (0.4 * 2e6))
    expected = (packets_per_minute * UDP_WIRE_BYTES + PROBES_PER_MINUTE * PROBE_WIRE_BYTES) * 8
    np.testing.assert_allclose(
        measured.utilisation(draw.rate_bps)[1:], expected / 60 / 2e6, rtol=0.005
    )
    assert not np.isnan(measured.delay_ms).any()  # 42 % load: no loss


def test_the_same_seed_gives_the_same_links_and_the_same_packets(
    saturated: LinkMeasurement,
) -> None:
    one, two = (
        draw_links(build_hosts(6, SEED), 30, SEED),
        draw_links(build_hosts(6, SEED), 30, SEED),
    )
    assert [d.summary() for d in one] == [d.summary() for d in two]
    np.testing.assert_array_equal(one[2].traffic.flow_start, two[2].traffic.flow_start)
    other = draw_links(build_hosts(6, SEED + 1), 30, SEED + 1)
    assert [d.rate_bps for d in other] != [d.rate_bps for d in one]
    again = simulate_link(link(traffic(bulk=(0,))))
    np.testing.assert_array_equal(again.delay_ms, saturated.delay_ms)
    np.testing.assert_array_equal(again.bytes_out, saturated.bytes_out)


def test_the_capture_directory_reads_through_the_real_data_pipeline(tmp_path: Path) -> None:
    minutes = WARMUP_MINUTES + 3
    hosts = build_hosts(2, SEED)
    overload = traffic(udp_load=1.3, minutes=minutes, udp_from_s=60.0 * (WARMUP_MINUTES - 4))
    draws = [
        link(overload, minutes, index=0, bucket_ms=0.1),
        link(traffic(minutes=minutes), minutes, index=1, clock_offset_ms=-25.0),
    ]
    request = CaptureRequest(tmp_path, 2, minutes, SEED, 1, FIRST_MINUTE)
    *_, summaries = write_links(tmp_path, hosts, draws, request)
    assert [s["name"] for s in summaries] == ["NS3-01->NS3-02", "NS3-02->NS3-01"]

    dataset = build_real_dataset(tmp_path, tmp_path / ROUTER_DIR / ROUTER_MAP)
    assert dataset.description["rejected"] == {}
    first, second = hosts.host_ips[:2]
    assert sorted(dataset.link_names) == [f"{first}->{second}", f"{second}->{first}"]
    rows_per_link = minutes - WARMUP_MINUTES
    assert len(dataset) == 2 * rows_per_link
    overloaded = np.array([dataset.link_names[i] == f"{first}->{second}" for i in dataset.link])
    assert (dataset.utilisation[overloaded] > 0.98).all()
    assert (dataset.utilisation[~overloaded] < 0.01).all()
    assert (dataset.empirical[overloaded] > 0).all()  # the filter: queued and lost, congested
    assert (dataset.empirical[~overloaded] == 0).all()
    assert dataset.minute.min() == FIRST_MINUTE + WARMUP_MINUTES

    lines = gzip.decompress((tmp_path / "link-0000.jsonl.gz").read_bytes()).splitlines()
    first = json.loads(lines[0])
    assert first["headers"]["event-type"] == "histogram-owdelay"
    keys = next(iter(first["body"]["datapoints"].values()))
    assert all(len(key.split(".")[1]) == 1 for key in keys)  # perfSONAR 5's 0.1 ms buckets
    offset = json.loads(
        gzip.decompress((tmp_path / "link-0001.jsonl.gz").read_bytes()).split(b"\n")[0]
    )
    delays = [float(k) for k in next(iter(offset["body"]["datapoints"].values()))]
    assert max(delays) < 0  # 20 ms away, a clock 25 ms behind: negative one-way delays


def test_nettel_simulate_writes_a_complete_capture(tmp_path: Path) -> None:
    from service.cli import main

    seed = 5  # its one link is an idle one: quick to simulate
    assert draw_links(build_hosts(1, seed), WARMUP_MINUTES + 1, seed)[0].idle
    argv = ["simulate", "--family", "C", "--output", str(tmp_path), "--links", "1", "--seed", "5"]
    assert main([*argv, "--minutes", str(WARMUP_MINUTES + 1), "--processes", "1"]) == 0

    manifest = json.loads((tmp_path / ROUTER_DIR / "scenario.json").read_text())
    assert manifest["complete"] and manifest["links_written"] == 1
    assert manifest["link_parameters"][0]["cpu_seconds"] > 0
    dataset = build_real_dataset(tmp_path, tmp_path / ROUTER_DIR / ROUTER_MAP)
    assert len(dataset) == 1
    assert dataset.minute[0] == FIRST_MINUTE + WARMUP_MINUTES  # the first row: 2024-01-01T00:00Z
