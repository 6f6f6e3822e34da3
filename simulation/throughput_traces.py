"""The demo mesh's throughput tests and traceroutes, as perfSONAR's meshes schedule them.

Pure functions, seeded like the simulator: what a link measures in a minute depends only on the
mesh, the seed and the minute.

Throughput (every `THROUGHPUT_EVERY_MINUTES`, 4 hours, per pair, as WLCG's bandwidth meshes)
    Each link runs a bulk TCP test (iperf3, some seconds) at its own minute of the cycle and its
    own second of that minute. Its rate is what the path leaves free, capped by the host's NIC,
    and less over a long round trip (the test spends more of its seconds in slow start and in
    loss recovery): ``min(NIC_BPS, capacity x max(1 - utilisation, MIN_FREE)) /
    (1 + RTT / RTT_HALVING_MS) x noise``, the noise lognormal (sd `RATE_NOISE`). Its TCP
    retransmits: a Poisson count of mean `RETRANSMITS_PER_GB` per gigabyte sent, more the busier
    the path.
Traceroute (every `TRACE_EVERY_MINUTES`, 10 minutes, per pair)
    Each link's usual route: the source site's gateway and border router, 2 to 6 backbone
    routers (more the longer the link) drawn for the pair from a shared pool, the destination
    site's border router and gateway, then the destination host. Its alternative route (what a
    `path-change` fault switches to) crosses other backbone routers. A hop's RTT is twice the
    share of the link's one-way delay it has come, plus a little jitter. Sites have private AS
    numbers (64512 + site), the backbone's routers belong to one of `BACKBONE_ASES` ASes.

What faults do to these is `simulation.faults`' business (`MinuteTests` is what it changes).
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, replace

import numpy as np

from service.state.throughput_state import ThroughputState
from simulation.simulator import Mesh, simulate_utilisation

THROUGHPUT_EVERY_MINUTES = 240
TRACE_EVERY_MINUTES = 10
#: traceroute's default highest TTL: a trace that does not reach its destination ends there.
MAX_TTL = 30
NIC_BPS = 10e9
MIN_FREE = 0.02
RTT_HALVING_MS = 200.0
RATE_NOISE = 0.08
RETRANSMITS_PER_GB = 2.0
BACKBONE_ROUTERS = 48
BACKBONE_ASES = 4
SITE_AS_BASE = 64512
BACKBONE_AS_BASE = 65000
#: Backbone hops of a route: 2 at the shortest links, 6 at the longest.
BACKBONE_HOPS = (2, 6)
HOP_JITTER_MS = 0.05
#: Seconds a bulk test takes, and the trace test's own duration, as the messages' meta says.
THROUGHPUT_SECONDS = 10

_STREAM_ROUTES, _STREAM_RATE, _STREAM_HISTORY = 11, 12, 13


@dataclass(frozen=True)
class RouteHop:
    """A router (or the destination host) on a route: its address, its AS, and the share of the
    link's one-way delay a packet has come when it reaches it."""

    address: str
    asn: int
    share: float


@dataclass(frozen=True, eq=False)
class MeshRoutes:
    """Every link's usual and alternative route, the destination host last on both."""

    usual: tuple[tuple[RouteHop, ...], ...]
    alternative: tuple[tuple[RouteHop, ...], ...]


@dataclass(frozen=True, eq=False)
class MinuteTests:
    """The throughput tests and traceroutes that start in one minute (arrays per test).

    A trace takes its link's usual route (`alternative` False) or the alternative one, and all
    of it, or (`answered` >= 0) only its first `answered` hops before the rest stay silent up
    to `MAX_TTL`: the destination was not reached.
    """

    minute: int
    throughput_links: np.ndarray
    throughput_ts: np.ndarray
    bps: np.ndarray
    retransmits: np.ndarray
    trace_links: np.ndarray
    trace_ts: np.ndarray
    alternative: np.ndarray
    answered: np.ndarray

    def without(self, throughput: np.ndarray, traces: np.ndarray) -> MinuteTests:
        """These tests less the throughput tests and traces of the links masked (over links)."""
        kept_tests = ~throughput[self.throughput_links]
        kept_traces = ~traces[self.trace_links]
        return replace(
            self,
            throughput_links=self.throughput_links[kept_tests],
            throughput_ts=self.throughput_ts[kept_tests],
            bps=self.bps[kept_tests],
            retransmits=self.retransmits[kept_tests],
            trace_links=self.trace_links[kept_traces],
            trace_ts=self.trace_ts[kept_traces],
            alternative=self.alternative[kept_traces],
            answered=self.answered[kept_traces],
        )


def build_routes(mesh: Mesh, seed: int) -> MeshRoutes:
    """Every link's usual and alternative route (deterministic for the mesh and seed).

    >>> from simulation.simulator import build_mesh
    >>> routes = build_routes(build_mesh(3, seed=1), seed=1)
    >>> [hop.address for hop in routes.usual[0]][:2], routes.usual[0][-1].address
    (['10.0.1.1', '172.16.1.1'], '10.0.2.10')
    >>> routes.usual[0][2:-2] != routes.alternative[0][2:-2]
    True
    """
    rng = np.random.default_rng([seed, _STREAM_ROUTES])
    longest = float(mesh.base_delay_ms.max())
    low, high = BACKBONE_HOPS
    counts = low + np.rint((high - low) * mesh.base_delay_ms / longest).astype(int)
    usual, alternative = [], []
    for link in range(mesh.n_links):
        source, destination = int(mesh.source[link]), int(mesh.destination[link])
        routers = rng.choice(BACKBONE_ROUTERS, 2 * counts[link], replace=False)
        first, second = routers[: counts[link]], routers[counts[link] :]
        usual.append(_route(mesh, source, destination, first))
        alternative.append(_route(mesh, source, destination, second))
    return MeshRoutes(tuple(usual), tuple(alternative))


def _route(mesh: Mesh, source: int, destination: int, backbone: np.ndarray) -> tuple[RouteHop, ...]:
    """Gateway, border, backbone, border, gateway, host: the shares of the delay rise evenly
    over the backbone (the sites' own hops take a few hundredths)."""
    start = [
        RouteHop(_site_address(source, 1), SITE_AS_BASE + source, 0.005),
        RouteHop(_border_address(source), SITE_AS_BASE + source, 0.02),
    ]
    shares = np.linspace(0.05, 0.95, len(backbone)).tolist()
    middle = [
        RouteHop(_backbone_address(int(router)), _backbone_as(int(router)), share)
        for router, share in zip(backbone.tolist(), shares, strict=True)
    ]
    end = [
        RouteHop(_border_address(destination), SITE_AS_BASE + destination, 0.98),
        RouteHop(_site_address(destination, 1), SITE_AS_BASE + destination, 0.995),
        RouteHop(mesh.host_ips[destination], SITE_AS_BASE + destination, 1.0),
    ]
    return (*start, *middle, *end)


def simulate_tests(mesh: Mesh, seed: int, minute: int, utilisation: np.ndarray) -> MinuteTests:
    """The tests that start in epoch `minute`, given every link's utilisation then."""
    links = np.arange(mesh.n_links)
    tested = links[_starts(links, minute, THROUGHPUT_EVERY_MINUTES, 37)]
    traced = links[_starts(links, minute, TRACE_EVERY_MINUTES, 7)]
    rng = np.random.default_rng([seed, _STREAM_RATE, minute])
    bps = throughput_bps(mesh, tested, utilisation[tested], rng)
    return MinuteTests(
        minute=minute,
        throughput_links=tested,
        throughput_ts=minute * 60 + _second(tested, 13),
        bps=bps,
        retransmits=_retransmits(bps, utilisation[tested], rng),
        trace_links=traced,
        trace_ts=minute * 60 + _second(traced, 29),
        alternative=np.zeros(len(traced), dtype=bool),
        answered=np.full(len(traced), -1),
    )


def throughput_bps(
    mesh: Mesh, links: np.ndarray, utilisation: np.ndarray, rng: np.random.Generator
) -> np.ndarray:
    """The rate (bits/s) a bulk test on `links` gets at their `utilisation` (see the module).

    >>> from simulation.simulator import build_mesh
    >>> mesh = build_mesh(2, seed=1)
    >>> rng = np.random.default_rng(0)
    >>> idle, busy = (throughput_bps(mesh, np.array([0]), np.array([u]), rng) for u in (0.1, 1.2))
    >>> bool(idle[0] > 20 * busy[0])
    True
    """
    free = mesh.capacity_bps[links] * np.maximum(1 - utilisation, MIN_FREE)
    rtt_ms = 2 * mesh.base_delay_ms[links]
    noise = rng.lognormal(0.0, RATE_NOISE, len(links))
    rate: np.ndarray = np.minimum(NIC_BPS, free) / (1 + rtt_ms / RTT_HALVING_MS) * noise
    return rate


def _retransmits(bps: np.ndarray, utilisation: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    gigabytes = bps * THROUGHPUT_SECONDS / 8e9
    counts: np.ndarray = rng.poisson(RETRANSMITS_PER_GB * gigabytes * (1 + 10 * utilisation))
    return counts


@dataclass(frozen=True, eq=False)
class ThroughputResults:
    """Throughput tests of many minutes: per test its link, start (epoch s), rate and
    retransmits."""

    links: np.ndarray
    ts: np.ndarray
    bps: np.ndarray
    retransmits: np.ndarray


def throughput_history(mesh: Mesh, seed: int, first_minute: int) -> ThroughputResults:
    """The throughput tests of the days before `first_minute` that the service's throughput
    history holds (from `ThroughputState.window_start` on): what an archive or a collector's
    backlog brings a service that starts then. Computed a UTC day at a time (a test's rate
    depends on the mesh, the seed and its day). No traces: a day of them is the service's
    whole path history, and the feed's back-filled minutes bring their own."""
    start = ThroughputState.window_start(first_minute * 60) // 60
    parts = []
    for day in range(start // 1440, (first_minute - 1) // 1440 + 1):
        utilisation = simulate_utilisation(mesh, day * 1440, 1440, seed)
        links = np.arange(mesh.n_links)
        first = day * 1440 + (links * 37 - day * 1440) % THROUGHPUT_EVERY_MINUTES
        per_day = 1440 // THROUGHPUT_EVERY_MINUTES
        tested = np.tile(links, per_day)
        minutes = np.tile(first, per_day) + np.repeat(
            np.arange(per_day) * THROUGHPUT_EVERY_MINUTES, mesh.n_links
        )
        kept = (minutes >= start) & (minutes < first_minute)
        tested, minutes = tested[kept], minutes[kept]
        rng = np.random.default_rng([seed, _STREAM_HISTORY, day])
        load = utilisation[tested, minutes - day * 1440]
        bps = throughput_bps(mesh, tested, load, rng)
        ts = minutes * 60 + _second(tested, 13)
        parts.append((tested, ts, bps, _retransmits(bps, load, rng)))
    return ThroughputResults(*(np.concatenate(column) for column in zip(*parts, strict=True)))


def trace_hops(route: tuple[RouteHop, ...], one_way_ms: float, answered: int) -> list[dict]:
    """A trace along `route` as esmond's hop list (`ttl`, `query`, `success`, `ip`, `as`,
    `rtt` in ms): every hop, or the first `answered` (>= 0) and silent hops up to `MAX_TTL`.

    >>> route = (RouteHop("10.0.1.1", 64512, 0.005), RouteHop("10.0.2.10", 64513, 1.0))
    >>> [hop.get("ip") for hop in trace_hops(route, 20.0, -1)]
    ['10.0.1.1', '10.0.2.10']
    >>> hops = trace_hops(route, 20.0, 1)
    >>> len(hops), hops[0]["rtt"], hops[1]
    (30, 0.25, {'ttl': 2, 'query': 1, 'success': 0})
    """
    shown = route if answered < 0 else route[:answered]
    hops: list[dict] = [
        {
            "ttl": ttl,
            "query": 1,
            "success": 1,
            "ip": hop.address,
            "as": {"number": hop.asn},
            "rtt": round(2 * one_way_ms * hop.share + HOP_JITTER_MS, 3),
        }
        for ttl, hop in enumerate(shown, start=1)
    ]
    if answered >= 0:
        silent = range(len(hops) + 1, MAX_TTL + 1)
        hops += [{"ttl": ttl, "query": 1, "success": 0} for ttl in silent]
    return hops


def upstream_hops(route: tuple[RouteHop, ...]) -> int:
    """How many hops of a route answer when the destination's site is cut off: up to the last
    backbone router (the site's border and everything behind it are gone)."""
    return len(route) - 3


def _starts(links: np.ndarray, minute: int, every: int, spread: int) -> np.ndarray:
    """Whether each link's test of period `every` starts in `minute` (phases spread by link)."""
    mask: np.ndarray = (minute - links * spread) % every == 0
    return mask


def _second(links: np.ndarray, spread: int) -> np.ndarray:
    """The second of its minute each link's test starts at (spread over the minute)."""
    seconds: np.ndarray = (links * spread + 11) % 60
    return seconds


def _site_address(site: int, last: int) -> str:
    return str(ipaddress.IPv4Address(0x0A000000 + ((site + 1) << 8) + last))


def _border_address(site: int) -> str:
    return str(ipaddress.IPv4Address(0xAC100000 + ((site + 1) << 8) + 1))  # 172.16.x.1


def _backbone_address(router: int) -> str:
    return str(ipaddress.IPv4Address(0xC6120000 + (router << 8) + 1))  # 198.18.r.1


def _backbone_as(router: int) -> int:
    return BACKBONE_AS_BASE + router % BACKBONE_ASES
