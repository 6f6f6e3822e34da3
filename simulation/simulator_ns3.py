"""Simulator family C: each link a packet-level ns-3 simulation of real TCP, UDP and queues.

Python draws every random choice of a link (seeded numpy, `draw_links`), the C++ scenario of
`simulation/ns3_scenario.cpp` (loaded with `cppyy.cppdef`) simulates it packet by packet at C++
speed, and Python turns the probe delays and the bottleneck's byte counter into a directory that
`training.dataset.build_real_dataset` and `nettel evaluate --perfsonar-dir` read as they are
(`write_capture`). The physics, the parameters drawn and the cost are in docs/simulator-ns3.md.

Per link (all draws from a generator keyed by (seed, link), so a link's data do not depend on
how many links or processes there are):

- bottleneck rate 2-3 Mb/s (segments of 1448 bytes), queue discipline FIFO, RED, FQ-CoDel,
  CoDel or PIE with a buffer of 5-100 ms of the link rate (at least MIN_QUEUE_PACKETS packets);
- one-way propagation delay 1-150 ms (log-uniform), TCP senders on the bottleneck router and
  on a far host behind extra delay (RTT diversity), a second hop with UDP cross traffic on some
  paths, a constant clock offset on some pairs (some negative);
- TCP flows of several congestion controls with Pareto sizes arriving at a rate that follows a
  compressed day, long-lived bulk transfers, UDP on/off traffic; idle links carry almost nothing;
- a 10 Hz UDP probe (600 packets a minute, like powstream) whose one-way delays make the minute's
  histogram (0.01 ms buckets, perfSONAR 5's 0.1 ms on some links) and loss ratio;
- the utilisation label: bytes the bottleneck device transmitted per minute, written as SNMP
  ifHCOutOctets counters polled every minute (read by training.readers.snmp_counters).
"""

from __future__ import annotations

import gzip
import ipaddress
import json
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import numpy as np

from simulation.bus_format import build_delay_message, build_loss_message
from simulation.ns3_modules import included_modules, load_ns3_modules
from simulation.simulator import Mesh, build_mesh

SCENARIO_SOURCE = Path(__file__).with_name("ns3_scenario.cpp")
PROBES_PER_MINUTE = 600
PROBE_INTERVAL_S = 60.0 / PROBES_PER_MINUTE
PROBE_BYTES = 40
SEGMENT_BYTES = 1448
#: Initial congestion window (segments), Linux's.
INITIAL_WINDOW = 10
#: Bytes of a full-sized packet on the wire: segment, TCP/IP headers with options, PPP.
PACKET_BYTES = SEGMENT_BYTES + 52 + 2
UDP_BYTES = 1200

RATE_BPS = (2e6, 3e6)
BUFFER_MS = (5.0, 100.0)
MIN_QUEUE_PACKETS = 4
#: Of a buffer's packets, those in the device's transmit queue below the queue discipline.
DEVICE_QUEUE_PACKETS = 1
QDISCS = ("fifo", "red", "fq_codel", "codel", "pie")
QDISC_SHARES = (0.45, 0.15, 0.2, 0.1, 0.1)
PROPAGATION_MS = (1.0, 150.0)
#: The far TCP sender's extra access delay, as a share of the path's propagation delay.
FAR_SENDER_SHARE = (0.2, 1.0)
HOP2_SHARE = 0.35
HOP2_RATE = (1.2, 2.0)
HOP2_BUFFER_MS = (10.0, 50.0)
HOP2_CROSS_LOAD = (0.2, 0.9)
CLOCK_OFFSET_SHARE = 0.25
CLOCK_OFFSET_MS = (1.0, 30.0)
COARSE_BUCKET_SHARE = 0.3
BUCKET_MS = (0.01, 0.1)

#: ns-3's TCP congestion controls a flow may use (BBR paced, as Linux paces it).
CONGESTION_CONTROLS = ("TcpCubic", "TcpNewReno", "TcpBbr", "TcpHighSpeed", "TcpVegas")
CC_WEIGHTS = (4.0, 2.0, 2.0, 1.0, 1.0)
IDLE_SHARE = 0.2
#: Minutes of one compressed day: the short-flow arrival rate goes through a day in this time.
DAY_MINUTES = 240
SHORT_LOAD_BASE = ((0.002, 0.02), (0.05, 0.35))
SHORT_LOAD_AMPLITUDE = ((0.0, 0.05), (0.1, 0.7))
#: Highest offered short-flow load at the day's peak (above 1 flows would pile up without end).
SHORT_LOAD_PEAK = 0.95
PARETO_SHAPE = (1.1, 1.6)
FLOW_MIN_BYTES = (30_000.0, 100_000.0)
FLOW_MAX_BYTES = 20e6
BULK_PER_HOUR = (0.2, 1.5)
BULK_MEAN_MINUTES = (10.0, 40.0)
UDP_SHARE = 0.5
UDP_LOAD = (0.05, 0.3)
UDP_ON_MEAN_S = (1.0, 10.0)
UDP_OFF_MEAN_S = (5.0, 60.0)

#: Datapoints (minutes) per captured bus message.
MINUTES_PER_MESSAGE = 10
ROUTER_DIR = "routers"
ROUTER_MAP = "router-map.json"
MANIFEST = "scenario.json"


@dataclass(frozen=True)
class TrafficSchedule:
    """Start, stop and size of every TCP flow, and the on/off periods of UDP traffic (seconds
    from the first minute's start; bytes 0 = a bulk transfer that runs until its stop)."""

    flow_start: np.ndarray
    flow_bytes: np.ndarray
    flow_stop: np.ndarray
    flow_sender: np.ndarray
    flow_cc: np.ndarray
    udp_start: np.ndarray
    udp_stop: np.ndarray
    udp_rate_bps: np.ndarray
    cross_start: np.ndarray
    cross_stop: np.ndarray
    cross_rate_bps: np.ndarray


@dataclass(frozen=True)
class LinkDraw:
    """Everything drawn for one link; `run` seeds ns-3's own generators (RED, FQ-CoDel)."""

    index: int
    run: int
    minutes: int
    idle: bool
    rate_bps: float
    qdisc: str
    buffer_ms: float
    queue_packets: int
    propagation_ms: float
    far_sender_ms: float
    bottleneck_delay_ms: float
    has_hop2: bool
    hop2_rate_bps: float
    hop2_delay_ms: float
    hop2_queue_packets: int
    clock_offset_ms: float
    bucket_ms: float
    probe_offset_s: float
    traffic: TrafficSchedule = field(repr=False)

    def summary(self) -> dict[str, Any]:
        """The link's parameters (no schedule) and its traffic counts, for the manifest."""
        values = {k: v for k, v in asdict(self).items() if k != "traffic"}
        bulk = self.traffic.flow_bytes == 0
        return values | {
            "short_flows": int((~bulk).sum()),
            "bulk_transfers": int(bulk.sum()),
            "udp_periods": len(self.traffic.udp_start),
            "cross_periods": len(self.traffic.cross_start),
        }


@dataclass(frozen=True)
class LinkMeasurement:
    """What ns-3 measured on one link: probe delays (minutes x 600, ms, NaN lost, clock offset
    not yet added), bytes out of the bottleneck and into it (ACKs) per minute."""

    index: int
    delay_ms: np.ndarray
    bytes_out: np.ndarray
    bytes_in: np.ndarray
    queue_drops: np.ndarray
    flows_started: int
    flows_completed: int
    events: int
    cpu_seconds: float

    def utilisation(self, rate_bps: float) -> np.ndarray:
        """Per-minute utilisation of the bottleneck (what the router counters carry)."""
        return self.bytes_out * 8 / 60.0 / rate_bps

    def summary(self, rate_bps: float) -> dict[str, Any]:
        """What the simulation measured and cost, in a few numbers (for the manifest)."""
        utilisation = self.utilisation(rate_bps)
        return {
            "cpu_seconds": round(self.cpu_seconds, 2),
            "events": self.events,
            "flows_started": self.flows_started,
            "flows_completed": self.flows_completed,
            "mean_utilisation": round(float(utilisation.mean()), 4),
            "minutes_above_70": int((utilisation > 0.7).sum()),
            "probe_loss": round(float(np.isnan(self.delay_ms).mean()), 5),
        }


def _rng(seed: int, link: int) -> np.random.Generator:
    return np.random.default_rng([seed, 0x5EED_C, link])


def _log_uniform(rng: np.random.Generator, bounds: tuple[float, float]) -> float:
    return float(np.exp(rng.uniform(np.log(bounds[0]), np.log(bounds[1]))))


def build_hosts(n_links: int, seed: int) -> Mesh:
    """The sites and hosts of `n_links` directed links (named NS3-nn, hosts 10.192.n.10):
    family A's geography with its own seed, links drawn among all site pairs. Only the hosts,
    the link endpoints and the sites' longitudes are family C's; the per-link physics of the
    Mesh is family A's, unused (family C's is in each link's LinkDraw)."""
    sites = 2
    while sites * (sites - 1) < n_links:
        sites += 1
    mesh = build_mesh(sites, seed + 104_729)
    chosen = np.sort(np.random.default_rng([seed, 0x5EED_C]).permutation(mesh.n_links)[:n_links])
    numbers = range(1, sites + 1)
    per_link = {
        name: getattr(mesh, name)[chosen]
        for name in (
            "source",
            "destination",
            "base_delay_ms",
            "jitter_ms",
            "capacity_bps",
            "buffer_ms",
            "service_ms",
            "background_loss",
            "clock_offset_ms",
            "congestion_prone",
        )
    }
    return Mesh(
        site_names=tuple(f"NS3-{i:02d}" for i in numbers),
        host_names=tuple(f"ps-latency.ns3-{i:02d}.example.net" for i in numbers),
        host_ips=tuple(str(ipaddress.IPv4Address(0x0AC00000 + (i << 8) + 10)) for i in numbers),
        latitude_deg=mesh.latitude_deg,
        longitude_deg=mesh.longitude_deg,
        **per_link,
    )


def draw_links(hosts: Mesh, minutes: int, seed: int) -> list[LinkDraw]:
    """The parameters and traffic of every link of `hosts` for `minutes` minutes."""
    return [
        draw_link(link, minutes, seed, float(hosts.longitude_deg[hosts.source[link]]))
        for link in range(hosts.n_links)
    ]


def draw_link(link: int, minutes: int, seed: int, longitude_deg: float) -> LinkDraw:
    """One link's parameters and traffic (see the module docstring)."""
    rng = _rng(seed, link)
    rate = float(rng.uniform(*RATE_BPS))
    packet_ms = PACKET_BYTES * 8 / rate * 1e3
    qdisc = str(rng.choice(QDISCS, p=QDISC_SHARES))
    buffer_packets = max(MIN_QUEUE_PACKETS, round(_log_uniform(rng, BUFFER_MS) / packet_ms))
    propagation = _log_uniform(rng, PROPAGATION_MS)
    far_sender = propagation * float(rng.uniform(*FAR_SENDER_SHARE))
    has_hop2 = bool(rng.random() < HOP2_SHARE)
    hop2_rate = rate * float(rng.uniform(*HOP2_RATE))
    hop2_packets = max(
        MIN_QUEUE_PACKETS,
        round(float(rng.uniform(*HOP2_BUFFER_MS)) / (PACKET_BYTES * 8 / hop2_rate * 1e3)),
    )
    hop2_delay = propagation * float(rng.uniform(0.05, 0.3)) if has_hop2 else 0.0
    bottleneck_delay = max(propagation - hop2_delay, 0.05)
    offset = 0.0
    if rng.random() < CLOCK_OFFSET_SHARE:
        offset = float(rng.choice([-1.0, 1.0]) * rng.uniform(*CLOCK_OFFSET_MS))
    idle = bool(rng.random() < IDLE_SHARE)
    traffic = draw_traffic(rng, minutes, rate, idle, has_hop2, hop2_rate, longitude_deg)
    return LinkDraw(
        index=link,
        run=int(rng.integers(1, 2**31)),
        minutes=minutes,
        idle=idle,
        rate_bps=rate,
        qdisc=qdisc,
        buffer_ms=buffer_packets * packet_ms,
        queue_packets=buffer_packets - DEVICE_QUEUE_PACKETS,
        propagation_ms=propagation,
        far_sender_ms=far_sender,
        bottleneck_delay_ms=bottleneck_delay,
        has_hop2=has_hop2,
        hop2_rate_bps=hop2_rate if has_hop2 else 0.0,
        hop2_delay_ms=hop2_delay,
        hop2_queue_packets=hop2_packets if has_hop2 else 0,
        clock_offset_ms=offset,
        bucket_ms=BUCKET_MS[1] if rng.random() < COARSE_BUCKET_SHARE else BUCKET_MS[0],
        probe_offset_s=float(rng.uniform(0.0, PROBE_INTERVAL_S)),
        traffic=traffic,
    )


def draw_traffic(
    rng: np.random.Generator,
    minutes: int,
    rate_bps: float,
    idle: bool,
    has_hop2: bool,
    hop2_rate_bps: float,
    longitude_deg: float,
) -> TrafficSchedule:
    """Short flows over a compressed day, bulk transfers, UDP on/off and hop-2 cross traffic."""
    end_s = 60.0 * minutes
    weights = rng.dirichlet(CC_WEIGHTS)
    short = _short_flows(rng, end_s, rate_bps, idle, longitude_deg)
    bulk_start, bulk_stop = _bulk_transfers(rng, end_s, idle)
    start = np.concatenate([short[0], bulk_start])
    order = np.argsort(start, kind="stable")
    n = len(start)
    has_udp = rng.random() < UDP_SHARE and not idle
    udp = _on_off(rng, end_s, rate_bps * rng.uniform(*UDP_LOAD)) if has_udp else None
    cross = _on_off(rng, end_s, hop2_rate_bps * rng.uniform(*HOP2_CROSS_LOAD)) if has_hop2 else None
    empty = np.zeros(0)
    return TrafficSchedule(
        flow_start=start[order],
        flow_bytes=np.concatenate([short[1], np.zeros(len(bulk_start))])[order],
        flow_stop=np.concatenate([np.full(len(short[0]), end_s), bulk_stop])[order],
        flow_sender=rng.integers(0, 2, n)[order],
        flow_cc=rng.choice(len(CONGESTION_CONTROLS), n, p=weights)[order],
        udp_start=empty if udp is None else udp[0],
        udp_stop=empty if udp is None else udp[1],
        udp_rate_bps=empty if udp is None else udp[2],
        cross_start=empty if cross is None else cross[0],
        cross_stop=empty if cross is None else cross[1],
        cross_rate_bps=empty if cross is None else cross[2],
    )


def _short_flows(
    rng: np.random.Generator, end_s: float, rate_bps: float, idle: bool, longitude_deg: float
) -> tuple[np.ndarray, np.ndarray]:
    """Poisson arrivals whose rate follows the compressed day (thinning), Pareto sizes."""
    base = rng.uniform(*SHORT_LOAD_BASE[0 if idle else 1])
    amplitude = min(rng.uniform(*SHORT_LOAD_AMPLITUDE[0 if idle else 1]), SHORT_LOAD_PEAK - base)
    shape = rng.uniform(*PARETO_SHAPE)
    smallest = rng.uniform(*FLOW_MIN_BYTES)
    mean_bytes = _truncated_pareto_mean(shape, smallest, FLOW_MAX_BYTES)
    peak_minute = (12.0 - longitude_deg / 15.0 + 3.0) / 24.0 * DAY_MINUTES
    peak_rate = (base + amplitude) * rate_bps / 8 / mean_bytes
    candidates = np.cumsum(rng.exponential(1.0 / peak_rate, int(peak_rate * end_s * 1.2) + 16))
    candidates = candidates[candidates < end_s]
    phase = 2 * np.pi * (candidates / 60.0 - peak_minute) / DAY_MINUTES
    load = base + amplitude * (1 + np.cos(phase)) / 2
    arrivals = candidates[rng.random(len(candidates)) < load / (base + amplitude)]
    sizes = np.minimum(smallest * (1 + rng.pareto(shape, len(arrivals))), FLOW_MAX_BYTES)
    return arrivals, np.rint(sizes)


def _truncated_pareto_mean(shape: float, smallest: float, largest: float) -> float:
    """Mean of min(X, largest) for X Pareto with `shape` and minimum `smallest`."""
    tail = (smallest / largest) ** shape
    body = smallest * shape / (shape - 1) * (1 - (smallest / largest) ** (shape - 1))
    return float(body + largest * tail)


def _bulk_transfers(
    rng: np.random.Generator, end_s: float, idle: bool
) -> tuple[np.ndarray, np.ndarray]:
    """Long-lived transfers: Poisson starts, exponential durations."""
    if idle:
        return np.zeros(0), np.zeros(0)
    per_hour = rng.uniform(*BULK_PER_HOUR)
    count = rng.poisson(per_hour * end_s / 3600.0)
    start = np.sort(rng.uniform(0.0, end_s, count))
    duration = rng.exponential(60.0 * rng.uniform(*BULK_MEAN_MINUTES), count)
    return start, np.minimum(start + duration, end_s)


def _on_off(
    rng: np.random.Generator, end_s: float, rate_bps: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """UDP on/off periods: mean on and off times drawn from UDP_ON_MEAN_S, UDP_OFF_MEAN_S."""
    on_mean, off_mean = rng.uniform(*UDP_ON_MEAN_S), rng.uniform(*UDP_OFF_MEAN_S)
    return on_off_periods(rng, end_s, rate_bps, on_mean, off_mean)


def on_off_periods(
    rng: np.random.Generator, end_s: float, rate_bps: float, on_mean_s: float, off_mean_s: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Alternating exponential on and off periods at a constant rate while on."""
    starts, stops = [], []
    t = rng.exponential(off_mean_s)
    while t < end_s:
        stop = min(t + rng.exponential(on_mean_s), end_s)
        starts.append(t)
        stops.append(stop)
        t = stop + rng.exponential(off_mean_s)
    return np.array(starts), np.array(stops), np.full(len(starts), rate_bps)


# --- running ns-3 (in worker processes) ---------------------------------------------------------

_SCENARIO: Any = None


def load_ns3() -> Any:
    """The compiled scenario namespace (compiled once per process)."""
    global _SCENARIO
    if _SCENARIO is None:
        source = SCENARIO_SOURCE.read_text()
        load_ns3_modules(included_modules(source))
        import cppyy

        cppyy.cppdef(source)
        _SCENARIO = cppyy.gbl.nettel_ns3
    return _SCENARIO


def simulate_link(draw: LinkDraw) -> LinkMeasurement:
    """Run one link's ns-3 simulation (in this process) and collect what it measured."""
    scenario = load_ns3()
    spec = link_spec(scenario, draw)
    started = time.process_time()
    result = scenario.RunLink(spec)
    cpu = time.process_time() - started
    delays = np.frombuffer(_copy(result.probe_delay_ms), dtype=np.float64)
    return LinkMeasurement(
        index=draw.index,
        delay_ms=delays.reshape(draw.minutes, PROBES_PER_MINUTE).copy(),
        bytes_out=np.array(list(result.bottleneck_bytes)),
        bytes_in=np.array(list(result.bottleneck_bytes_in)),
        queue_drops=np.array(list(result.queue_drops)),
        flows_started=int(result.flows_started),
        flows_completed=int(result.flows_completed),
        events=int(result.events),
        cpu_seconds=cpu,
    )


def link_spec(scenario: Any, draw: LinkDraw) -> Any:
    """The C++ LinkScenario of `draw` (`scenario`: the namespace `load_ns3` returns)."""
    spec = scenario.LinkScenario()
    spec.rng_run = draw.run
    spec.minutes = draw.minutes
    spec.segment_bytes = SEGMENT_BYTES
    spec.initial_window = INITIAL_WINDOW
    spec.rate_bps = draw.rate_bps
    spec.bottleneck_delay_ms = draw.bottleneck_delay_ms
    spec.far_sender_delay_ms = draw.far_sender_ms
    spec.queue_packets = draw.queue_packets
    spec.device_queue_packets = DEVICE_QUEUE_PACKETS
    spec.qdisc = draw.qdisc
    for name in CONGESTION_CONTROLS:
        spec.congestion_controls.push_back(f"ns3::{name}")
    spec.has_hop2 = draw.has_hop2
    spec.hop2_rate_bps = draw.hop2_rate_bps or 1e9
    spec.hop2_delay_ms = draw.hop2_delay_ms
    spec.hop2_queue_packets = max(draw.hop2_queue_packets, 1)
    spec.probe_bytes = PROBE_BYTES
    spec.probe_interval_s = PROBE_INTERVAL_S
    spec.probe_offset_s = draw.probe_offset_s
    spec.udp_bytes = UDP_BYTES
    for name, values in asdict(draw.traffic).items():
        fill_vector(getattr(spec, name), values)
    return spec


def fill_vector(target: Any, values: Any) -> None:
    """Append `values` (any array-like) to the C++ std::vector `target`."""
    for value in np.asarray(values).tolist():
        target.push_back(value)


def _copy(vector: Any) -> bytes:
    return np.array(list(vector), dtype=np.float64).tobytes()


def simulate_links(draws: list[LinkDraw], processes: int) -> Iterator[LinkMeasurement]:
    """Every link's measurement, in the order the links finish; `processes` worker processes
    (each its own ns-3 simulator: ns-3's Simulator is one per process), or this process when 1.
    """
    if processes <= 1:
        yield from map(simulate_link, draws)
        return
    context = get_context("spawn")  # ns-3 and cppyy do not survive a fork
    with context.Pool(processes) as pool:  # leaving it (also on an error) ends the workers
        yield from pool.imap_unordered(simulate_link, draws, chunksize=1)


# --- writing the capture -------------------------------------------------------------------------


def minute_histograms(delay_ms: np.ndarray, bucket_ms: float) -> list[dict[str, int]]:
    """Per minute, the perfSONAR histogram of the delivered probes' delays: bucket -> count.

    >>> minute_histograms(np.array([[1.004, 1.006, np.nan]]), 0.01)
    [{'1.00': 1, '1.01': 1}]
    >>> minute_histograms(np.array([[1.04, 1.06, 1.06]]), 0.1)
    [{'1.0': 1, '1.1': 2}]
    """
    decimals = 2 if bucket_ms < 0.1 else 1
    histograms = []
    for row in delay_ms:
        buckets = np.rint(row[~np.isnan(row)] / bucket_ms).astype(np.int64)
        values, counts = np.unique(buckets, return_counts=True)
        histograms.append(
            {
                f"{value * bucket_ms:.{decimals}f}": int(count)
                for value, count in zip(values.tolist(), counts.tolist(), strict=True)
            }
        )
    return histograms


def capture_lines(
    hosts: Mesh, draw: LinkDraw, measured: LinkMeasurement, first_minute: int
) -> Iterator[str]:
    """The link's bus messages (delay and loss, MINUTES_PER_MESSAGE minutes each) as capture
    lines ``{"headers": ..., "body": ...}``; a minute that lost every probe has no histogram."""
    delays = measured.delay_ms + draw.clock_offset_ms
    histograms = minute_histograms(delays, draw.bucket_ms)
    loss = np.isnan(delays).mean(axis=1)
    for lo in range(0, draw.minutes, MINUTES_PER_MESSAGE):
        minutes = range(lo, min(lo + MINUTES_PER_MESSAGE, draw.minutes))
        delay_points = {(first_minute + m) * 60: histograms[m] for m in minutes if histograms[m]}
        loss_points = {(first_minute + m) * 60: float(loss[m]) for m in minutes}
        messages = [build_loss_message(hosts, draw.index, loss_points)]
        if delay_points:
            messages.insert(0, build_delay_message(hosts, draw.index, delay_points))
        for headers, body in messages:
            yield json.dumps({"headers": headers, "body": body}, separators=(",", ":"))


def router_counter_rows(
    interface: str, measured: LinkMeasurement, rate_bps: float, first_minute: int
) -> Iterator[str]:
    """SNMP polls at every minute boundary: cumulative octets out of and into the bottleneck."""
    out_octets = np.concatenate([[0], np.cumsum(measured.bytes_out)]).astype(np.int64)
    in_octets = np.concatenate([[0], np.cumsum(measured.bytes_in)]).astype(np.int64)
    yield "timestamp,interface,ifHCInOctets,ifHCOutOctets,ifSpeed"
    polls = zip(in_octets.tolist(), out_octets.tolist(), strict=True)
    for minute, (received, sent) in enumerate(polls):
        yield f"{(first_minute + minute) * 60},{interface},{received},{sent},{int(rate_bps)}"


def link_file_stem(draw: LinkDraw) -> str:
    return f"link-{draw.index:04d}"


def write_link(
    directory: Path, hosts: Mesh, draw: LinkDraw, measured: LinkMeasurement, first_minute: int
) -> dict[str, Any]:
    """Write one link's capture and router counters; its router map entry."""
    stem = link_file_stem(draw)
    lines = "".join(line + "\n" for line in capture_lines(hosts, draw, measured, first_minute))
    (directory / f"{stem}.jsonl.gz").write_bytes(gzip.compress(lines.encode(), mtime=0))
    interface = f"{hosts.site_names[hosts.source[draw.index]]}:ns3-bottleneck-{draw.index}"
    rows = router_counter_rows(interface, measured, draw.rate_bps, first_minute)
    (directory / ROUTER_DIR / f"{stem}.csv").write_text("\n".join(rows) + "\n")
    return {
        "source": hosts.host_ips[hosts.source[draw.index]],
        "destination": hosts.host_ips[hosts.destination[draw.index]],
        "file": f"{stem}.csv",
        "format": "snmp_counters",
        "series": interface,
        "direction": "out",
        "capacity_bps": draw.rate_bps,
    }


@dataclass(frozen=True)
class CaptureRequest:
    """What `nettel simulate --family C --output DIR` asked for."""

    output: Path
    links: int
    minutes: int
    seed: int
    processes: int
    first_minute: int


Progress = Callable[[int, int, float], None]


def write_capture(request: CaptureRequest, progress: Progress | None = None) -> dict[str, Any]:
    """Draw, simulate and write every link of `request` (layout in docs/simulator-ns3.md);
    returns the manifest, routers/scenario.json (rewritten after every link, `complete` once
    all are written, so a stopped run leaves a usable directory of the links it finished)."""
    if min(request.links, request.minutes, request.processes) < 1:
        raise ValueError("links, minutes and processes must be >= 1")
    hosts = build_hosts(request.links, request.seed)
    draws = draw_links(hosts, request.minutes, request.seed)
    started = time.monotonic()
    manifest: dict[str, Any] = {}
    for links in write_links(request.output, hosts, draws, request, progress):
        cpu = sum(link["cpu_seconds"] for link in links)
        manifest = {
            "family": "C",
            "simulator": "simulation.simulator_ns3 (ns-3 3.44, training/ns3_scenario.cpp)",
            "seed": request.seed,
            "links": request.links,
            "minutes": request.minutes,
            "first_minute": request.first_minute,
            "processes": request.processes,
            "complete": len(links) == len(draws),
            "links_written": len(links),
            "wall_seconds": round(time.monotonic() - started, 1),
            "cpu_seconds": round(cpu, 1),
            "cpu_seconds_per_link_minute": round(cpu / (len(links) * request.minutes), 4),
            "router_map": f"{ROUTER_DIR}/{ROUTER_MAP}",
            "link_parameters": links,
        }
        (request.output / ROUTER_DIR / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
    return manifest


def write_links(
    directory: Path,
    hosts: Mesh,
    draws: list[LinkDraw],
    request: CaptureRequest,
    progress: Progress | None = None,
) -> Iterator[list[dict[str, Any]]]:
    """Simulate `draws` (links of `hosts`) and write their captures, router counters and the
    router map into `directory`; after each link, the parameters and cost of those written."""
    (directory / ROUTER_DIR).mkdir(parents=True, exist_ok=True)
    entries: dict[int, dict[str, Any]] = {}
    summaries: dict[int, dict[str, Any]] = {}
    started = time.monotonic()
    by_index = {draw.index: draw for draw in draws}
    for done, measured in enumerate(simulate_links(draws, request.processes), start=1):
        draw = by_index[measured.index]
        entries[draw.index] = write_link(directory, hosts, draw, measured, request.first_minute)
        summaries[draw.index] = draw.summary() | measured.summary(draw.rate_bps)
        summaries[draw.index]["name"] = _link_name(hosts, draw.index)
        router_map = {"links": [entries[i] for i in sorted(entries)]}
        (directory / ROUTER_DIR / ROUTER_MAP).write_text(json.dumps(router_map, indent=1) + "\n")
        if progress is not None:
            progress(done, len(draws), time.monotonic() - started)
        yield [summaries[i] for i in sorted(summaries)]


def _link_name(hosts: Mesh, link: int) -> str:
    return f"{hosts.site_names[hosts.source[link]]}->{hosts.site_names[hosts.destination[link]]}"
