"""Decision scenarios on family C's physics: one destination, K candidate source paths, transfers.

A scenario (`draw_scenario`, all draws seeded by (seed, scenario)) has K = 2..5 candidate paths
to one destination, each drawn as family C draws a link (`simulation.simulator_ns3.draw_link`:
rate, buffer, queue discipline, RTT, cross-traffic mix); in some scenarios two of them share a
congested segment (a FIFO link loaded by UDP cross traffic, as on a shared backbone) on their
way to the destination. Transfer requests arrive as a Poisson process after a warm-up, with
heavy-tailed (Pareto) sizes scaled to the paths' rates, so that a file takes seconds to minutes
at full rate. `DecisionWorld` steps the ns-3 simulation of `ns3_decisions.cpp` minute by minute:
the caller reads each minute's probe delays, decides, and starts transfers as real TCP flows
that compete with the cross traffic and with each other. With `throughput_tests`, perfSONAR's
throughput tests run on every candidate path as its toolkits schedule them
(`draw_throughput_tests`): a short single-stream TCP test that loads the path it measures.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from simulation.simulator import Mesh
from simulation.simulator_ns3 import (
    DAY_MINUTES,
    PACKET_BYTES,
    PROBES_PER_MINUTE,
    LinkDraw,
    draw_link,
    fill_vector,
    link_spec,
    load_ns3,
    on_off_periods,
)

DECISIONS_SOURCE = Path(__file__).with_name("ns3_decisions.cpp")
CANDIDATES = (2, 5)
#: Minutes before the first request: every path's 32-minute window fills, so the served view has
#: the model's estimate for it (its features need the whole window), as on a running service.
WARMUP_MINUTES = 32
#: Minutes during which requests arrive.
REQUEST_MINUTES = 15
#: Minutes after the last request for transfers in flight to finish (then they are censored).
DRAIN_MINUTES = 5
SHARED_SEGMENT_SHARE = 0.4
SHARED_RATE = (1.1, 1.8)
SHARED_BUFFER_MS = (10.0, 50.0)
SHARED_CROSS_LOAD = (0.3, 0.9)
SHARED_ON_MEAN_S = (20.0, 120.0)
SHARED_OFF_MEAN_S = (20.0, 120.0)
#: A file's transfer time at the paths' mean rate: Pareto(shape) from the minimum, capped.
FILE_SECONDS = (2.0, 120.0)
FILE_PARETO_SHAPE = 1.2
#: Offered load of the requests, as a share of one path of the scenario's mean rate.
REQUEST_LOAD = (0.15, 0.45)
#: Herding scenarios: requests that would saturate the best path on their own.
HERDING_LOAD = (1.0, 1.2)
#: A transfer's TCP congestion control (what a transfer tool's Linux host runs).
TRANSFER_CC = "ns3::TcpCubic"
#: perfSONAR's throughput test: one iperf3 TCP stream (the hosts' Cubic) for 20 s (pSConfig's
#: testbed example; pScheduler's iperf3 tool runs 10 s when a test names no duration).
THROUGHPUT_TEST_S = 20.0
#: Its schedule: every 4 h with a random slip of up to 4 h (pSConfig's "repeat": "PT4H",
#: "sliprand": true, "slip": "PT4H"), on family C's compressed day (240 minutes for 24 h): one
#: test at a uniform time in each 40-minute window.
THROUGHPUT_REPEAT_S = 4 * 3600.0 * DAY_MINUTES / (24 * 60)
#: pScheduler runs throughput tests exclusively on a host: a test that would overlap another
#: to the same destination starts this long after it ends (iperf3's 3 s wait and 2 s shutdown).
THROUGHPUT_SLOT_GAP_S = 5.0
#: The test sender's socket buffer (Linux autotuning keeps it near twice the path's BDP, well
#: under this; the transfers' 2 MiB would keep sending for seconds after the test's end).
THROUGHPUT_SEND_BUFFER_BYTES = 256 * 1024


@dataclass(frozen=True)
class Requests:
    """Transfer requests in arrival order: seconds from the first minute's start, bytes."""

    arrival_s: np.ndarray
    bytes: np.ndarray

    def __len__(self) -> int:
        return len(self.arrival_s)


@dataclass(frozen=True)
class SharedSegment:
    """A FIFO link both `paths` cross to the destination, with UDP cross traffic on/off."""

    paths: tuple[int, int]
    rate_bps: float
    delay_ms: float
    queue_packets: int
    cross_start: np.ndarray = field(repr=False)
    cross_stop: np.ndarray = field(repr=False)
    cross_rate_bps: np.ndarray = field(repr=False)


@dataclass(frozen=True)
class ThroughputTests:
    """perfSONAR throughput tests in start order: candidate path, start (s), duration (s)."""

    path: np.ndarray
    start_s: np.ndarray
    duration_s: float = THROUGHPUT_TEST_S

    def __len__(self) -> int:
        return len(self.path)

    @property
    def end_s(self) -> np.ndarray:
        return self.start_s + self.duration_s


@dataclass(frozen=True)
class DecisionScenario:
    """Everything drawn for one scenario; `paths[i]` is candidate i's family-C link draw."""

    seed: int
    index: int
    herding: bool
    minutes: int
    run: int
    paths: tuple[LinkDraw, ...]
    shared: SharedSegment | None
    requests: Requests
    #: Seeds of the policies' own random choices (ties, the random policy).
    choice_seed: int
    #: perfSONAR's throughput tests on the candidate paths (None: no test runs).
    throughput_tests: ThroughputTests | None = None

    @property
    def request_start_s(self) -> float:
        return 60.0 * WARMUP_MINUTES

    def summary(self) -> dict[str, Any]:
        """The scenario's parameters in a few numbers (for the outcome file)."""
        tests = self.throughput_tests
        return {
            "seed": self.seed,
            "index": self.index,
            "herding": self.herding,
            "minutes": self.minutes,
            "candidates": len(self.paths),
            "shared_paths": None if self.shared is None else list(self.shared.paths),
            "requests": len(self.requests),
            "paths": [
                {
                    "rate_bps": round(p.rate_bps),
                    "qdisc": p.qdisc,
                    "buffer_ms": round(p.buffer_ms, 2),
                    "propagation_ms": round(p.propagation_ms, 2),
                    "idle": p.idle,
                    "has_hop2": p.has_hop2,
                }
                for p in self.paths
            ],
        } | ({} if tests is None else {"throughput_tests": len(tests)})


def draw_scenario(
    seed: int, index: int, herding: bool = False, throughput_tests: bool = False
) -> DecisionScenario:
    """Scenario `index` of `seed` (herding: requests at a rate that saturates one path); with
    `throughput_tests`, the same scenario with perfSONAR's throughput tests on every path."""
    rng = np.random.default_rng([seed, 0xDEC15, index, int(herding)])
    minutes = WARMUP_MINUTES + REQUEST_MINUTES + DRAIN_MINUTES
    k = int(rng.integers(CANDIDATES[0], CANDIDATES[1] + 1))
    link_seed = int(rng.integers(2**31))
    longitude = float(rng.uniform(-120.0, 30.0))
    paths = [draw_link(i, minutes, link_seed, longitude) for i in range(k)]
    shared = None
    if rng.random() < SHARED_SEGMENT_SHARE:
        pair = tuple(sorted(rng.choice(k, 2, replace=False).tolist()))
        shared = _draw_shared(rng, (pair[0], pair[1]), paths, minutes)
        paths = [
            replace(p, has_hop2=False, hop2_rate_bps=0.0, hop2_delay_ms=0.0, hop2_queue_packets=0)
            if p.index in pair
            else p
            for p in paths
        ]
    mean_rate = float(np.mean([p.rate_bps for p in paths]))
    load = rng.uniform(*(HERDING_LOAD if herding else REQUEST_LOAD))
    requests = _draw_requests(rng, mean_rate, load)
    return DecisionScenario(
        seed=seed,
        index=index,
        herding=herding,
        minutes=minutes,
        run=int(rng.integers(1, 2**31)),
        paths=tuple(paths),
        shared=shared,
        requests=requests,
        choice_seed=int(rng.integers(2**31)),
        throughput_tests=(
            draw_throughput_tests([seed, 0x7E57, index, int(herding)], k, minutes)
            if throughput_tests
            else None
        ),
    )


def draw_throughput_tests(
    seed: list[int], paths: int, minutes: int, duration_s: float = THROUGHPUT_TEST_S
) -> ThroughputTests:
    """Each path's tests: one at a uniform time in every THROUGHPUT_REPEAT_S window (a test
    must end before the scenario does), then pushed back where they would overlap (pScheduler
    runs one throughput test at a time at the destination they share). Seeded apart from the
    scenario's other draws, so the scenario is the same with and without tests.

    >>> tests = draw_throughput_tests([1], paths=2, minutes=52)
    >>> tests.path.tolist(), [round(t) for t in tests.start_s]
    ([1, 0], [346, 1228])
    """
    rng = np.random.default_rng(seed)
    end_s = 60.0 * minutes
    windows = np.arange(0.0, end_s, THROUGHPUT_REPEAT_S)
    starts = windows[None, :] + rng.uniform(0.0, THROUGHPUT_REPEAT_S, (paths, len(windows)))
    path = np.repeat(np.arange(paths), len(windows))
    order = np.argsort(starts.ravel(), kind="stable")
    path, starts_in_order = path[order], starts.ravel()[order]
    kept_path, kept_start, free_at = [], [], 0.0
    for p, start in zip(path.tolist(), starts_in_order.tolist(), strict=True):
        start = max(start, free_at)
        if start + duration_s > end_s:
            continue
        kept_path.append(p)
        kept_start.append(start)
        free_at = start + duration_s + THROUGHPUT_SLOT_GAP_S
    return ThroughputTests(np.array(kept_path, dtype=np.int64), np.array(kept_start), duration_s)


def _draw_shared(
    rng: np.random.Generator, pair: tuple[int, int], paths: list[LinkDraw], minutes: int
) -> SharedSegment:
    rate = min(paths[pair[0]].rate_bps, paths[pair[1]].rate_bps) * rng.uniform(*SHARED_RATE)
    packet_ms = PACKET_BYTES * 8 / rate * 1e3
    buffer_packets = max(4, round(rng.uniform(*SHARED_BUFFER_MS) / packet_ms))
    end_s = 60.0 * minutes
    on_mean, off_mean = rng.uniform(*SHARED_ON_MEAN_S), rng.uniform(*SHARED_OFF_MEAN_S)
    starts, stops, unit_rate = on_off_periods(rng, end_s, 1.0, on_mean, off_mean)
    cross_rate = rate * rng.uniform(*SHARED_CROSS_LOAD)
    return SharedSegment(
        paths=pair,
        rate_bps=float(rate),
        delay_ms=float(rng.uniform(0.5, 10.0)),
        queue_packets=int(buffer_packets),
        cross_start=starts,
        cross_stop=stops,
        cross_rate_bps=unit_rate * cross_rate,
    )


def _draw_requests(rng: np.random.Generator, mean_rate_bps: float, load: float) -> Requests:
    """Poisson arrivals over the request minutes; sizes Pareto in seconds at `mean_rate_bps`."""
    low, high = FILE_SECONDS
    shape = FILE_PARETO_SHAPE
    tail = (low / high) ** shape
    mean_s = low * shape / (shape - 1) * (1 - (low / high) ** (shape - 1)) + high * tail
    per_s = load / mean_s
    start, span = 60.0 * WARMUP_MINUTES, 60.0 * REQUEST_MINUTES
    count = int(rng.poisson(per_s * span))
    arrivals = np.sort(start + rng.uniform(0.0, span, count))
    seconds = np.minimum(low * (1 + rng.pareto(shape, count)), high)
    return Requests(arrivals, np.rint(seconds * mean_rate_bps / 8))


# --- the hosts the served view names ------------------------------------------------------------


def scenario_hosts(scenario: DecisionScenario) -> Mesh:
    """Site 0 is the destination, site i + 1 candidate i's source; link i is candidate i's path."""
    k = len(scenario.paths)
    numbers = range(k + 1)
    zeros = np.zeros(k)
    return Mesh(
        site_names=tuple(f"DEC-{i:02d}" for i in numbers),
        host_names=tuple(f"ps-latency.dec-{i:02d}.example.net" for i in numbers),
        host_ips=tuple(str(ipaddress.IPv4Address(0x0AC80000 + (i << 8) + 10)) for i in numbers),
        latitude_deg=np.zeros(k + 1),
        longitude_deg=np.zeros(k + 1),
        source=np.arange(1, k + 1),
        destination=np.zeros(k, dtype=np.int64),
        base_delay_ms=np.array([p.propagation_ms for p in scenario.paths]),
        jitter_ms=zeros,
        capacity_bps=np.array([p.rate_bps for p in scenario.paths]),
        buffer_ms=np.array([p.buffer_ms for p in scenario.paths]),
        service_ms=zeros,
        background_loss=zeros,
        clock_offset_ms=np.array([p.clock_offset_ms for p in scenario.paths]),
        congestion_prone=np.zeros(k, dtype=bool),
    )


# --- running ns-3 -----------------------------------------------------------------------------

_DECISIONS: Any = None


def load_decisions() -> Any:
    """The compiled scenario namespace with the decision world (compiled once per process)."""
    global _DECISIONS
    if _DECISIONS is None:
        namespace = load_ns3()
        import cppyy

        cppyy.cppdef(DECISIONS_SOURCE.read_text())
        _DECISIONS = namespace
    return _DECISIONS


class DecisionWorld:
    """One scenario in ns-3, stepped by the caller (one at a time per process)."""

    def __init__(self, scenario: DecisionScenario) -> None:
        ns = load_decisions()
        spec = ns.DecisionScenario()
        spec.rng_run = scenario.run
        spec.minutes = scenario.minutes
        for draw in scenario.paths:
            spec.paths.push_back(link_spec(ns, draw))
        if scenario.shared is not None:
            shared = scenario.shared
            spec.shared_first, spec.shared_second = shared.paths
            spec.shared_rate_bps = shared.rate_bps
            spec.shared_delay_ms = shared.delay_ms
            spec.shared_queue_packets = shared.queue_packets
            fill_vector(spec.shared_cross_start, shared.cross_start)
            fill_vector(spec.shared_cross_stop, shared.cross_stop)
            fill_vector(spec.shared_cross_rate_bps, shared.cross_rate_bps)
        spec.transfer_cc = TRANSFER_CC
        if scenario.throughput_tests is not None:
            tests = scenario.throughput_tests
            fill_vector(spec.test_path, tests.path)
            fill_vector(spec.test_start, tests.start_s)
            spec.test_duration_s = tests.duration_s
            spec.test_send_buffer_bytes = THROUGHPUT_SEND_BUFFER_BYTES
        self._scenario = scenario
        self._world = ns.DecisionWorld(spec)

    def run_until(self, seconds: float) -> None:
        self._world.RunUntil(seconds)

    def start_transfer(self, path: int, start_s: float, size_bytes: float) -> int:
        """Start a transfer on candidate `path` at `start_s` (not before now); its id."""
        return int(self._world.StartTransfer(path, start_s, size_bytes))

    def completion_s(self, transfer: int) -> float | None:
        """When the transfer's last byte arrived (s from the start); None while in flight."""
        done = float(self._world.Completion(transfer))
        return None if done < 0 else done

    def throughput_bps(self) -> np.ndarray:
        """Each throughput test's result (NaN until it has ended): the bytes its receiver got
        during the test over its duration, as iperf3's receiver reports it."""
        tests = self._scenario.throughput_tests
        if tests is None:
            return np.zeros(0)
        received = np.array(list(self._world.ThroughputTestBytes()), dtype=np.float64)
        return np.where(received < 0, np.nan, received * 8 / tests.duration_s)

    def minute_delays(self, minute: int) -> np.ndarray:
        """Every path's probe delays (ms, NaN lost) in `minute`: paths x 600, no clock offset."""
        rows = [list(self._world.MinuteDelays(i, minute)) for i in range(len(self._scenario.paths))]
        return np.array(rows, dtype=np.float64).reshape(-1, PROBES_PER_MINUTE)

    def utilisation(self) -> np.ndarray:
        """Every path's bottleneck utilisation per minute sampled so far (paths x minutes)."""
        rows = [
            np.array(list(self._world.BottleneckBytes(i))) * 8 / 60.0 / draw.rate_bps
            for i, draw in enumerate(self._scenario.paths)
        ]
        return np.array(rows)

    def close(self) -> None:
        """Destroy the simulation (the next world may be built)."""
        self._world.__destruct__()

    def __enter__(self) -> DecisionWorld:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()
