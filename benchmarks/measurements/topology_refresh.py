"""Topology refresh: a large CRIC export re-read and swapped in under live link state."""

from __future__ import annotations

import ipaddress
import random
import statistics
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson

from benchmarks.context import SuiteContext
from benchmarks.report import MeasurementResult
from service.parse.records import LinkEndpoints, MeasurementKind, ParsedMessage
from service.state.link_state import LinkState
from service.topology.loading import load_topology
from service.topology.refresh import TopologyRefresher

NAME = "topology_refresh"
METHOD = (
    "A synthetic CRIC `rcsite` export of S sites (each with a PerfSonar latency and bandwidth "
    "service, two CEs, and P / S networks in three netroutes: 4/5 IPv4 from /16 to /28, 1/5 IPv6 "
    "/48 to /64, nested within a site and a few reaching into the next site's block, so "
    "longest-prefix matching decides) is written to a file. A `LinkState` holds L links whose "
    "ends are the sites' hosts: one per site named in the export (matched by host name), two "
    "known only by an address inside the site's networks (matched by prefix), and a few "
    "addresses in no network (unmapped), each link with a delay and a loss datapoint. Each "
    "repeat runs `TopologyRefresher.refresh()` (read, decode, detect, parse, match every link's "
    "ends off the lock, swap) while an ingest thread applies batches of 100 loss datapoints as "
    "fast as it can, and records the refresh's wall time, its parts, the longest single hold of "
    "the state's lock (measured inside it), and the longest `apply_batch` call of the ingest "
    "thread during the refresh (against the same thread's longest call over a second without a "
    "refresh): what ingest waited, lock and GIL together."
)


def run(ctx: SuiteContext) -> MeasurementResult:
    sizes = ctx.sizes
    ctx.log(f"topology_refresh: {sizes.topology_sites} sites, {sizes.topology_links:,} links")
    m = measure(
        sizes.topology_sites, sizes.topology_prefixes, sizes.topology_links, sizes.topology_repeats
    )
    result = MeasurementResult(NAME, "Topology refresh under live ingest", METHOD)
    result.add("sites", "sites in the export", m["sites"])
    result.add("networks", "networks", m["networks"])
    result.add("export_bytes", "export size", m["export_bytes"], "B")
    result.add("links", "links", m["links"])
    result.add("unmapped", "links with an unmapped end", m["links_unmapped"])
    result.add("repeats", "refreshes", len(m["runs"]))
    result.add("refresh_median", "refresh (median)", m["refresh_seconds_median"], "s")
    result.add("refresh_max", "refresh (max)", m["refresh_seconds_max"], "s")
    parse = statistics.median(r["read_and_parse_seconds"] for r in m["runs"])
    result.add("parse_median", "of which read and parse (median, timed apart)", parse, "s")
    result.add("lock_max", "longest hold of the state's lock", m["lock_held_seconds_max"], "s")
    result.add(
        "pause_max", "longest ingest call during a refresh", m["ingest_pause_seconds_max"], "s"
    )
    result.add(
        "baseline_max",
        "longest ingest call without a refresh",
        m["ingest_baseline_seconds_max"],
        "s",
    )
    result.target(
        "refresh_max", "refresh (max)", m["refresh_seconds_max"], "<=", TARGET_REFRESH_S, "s"
    )
    result.target(
        "pause_max",
        "longest ingest call during a refresh",
        m["ingest_pause_seconds_max"],
        "<=",
        TARGET_PAUSE_S,
        "s",
    )
    result.details["runs"] = m["runs"]
    return result


TARGET_REFRESH_S = 1.0
TARGET_PAUSE_S = 0.050
BATCH = 100
SEED = 17


def build_export(sites: int, prefixes: int) -> dict[str, Any]:
    """The CRIC rcsite export: site i owns 10.0.0.0/8 + i's /16 ... (see the module doc)."""
    per_site = max(prefixes // sites, 2)
    export = {}
    for i in range(sites):
        name = f"T2_SITE_{i:03d}"
        routes = {
            f"{name}-{k}": {"netsite": name, "networks": {"ipv4": [], "ipv6": []}} for k in "ABC"
        }
        for j, network in enumerate(_site_networks(i, per_site, sites)):
            family = "ipv6" if network.version == 6 else "ipv4"
            routes[f"{name}-{'ABC'[j % 3]}"]["networks"][family].append(str(network))
        export[name] = {
            "name": name,
            "country": "Simulated",
            "latitude": 0.0,
            "longitude": 0.0,
            "rc_tier_level": 2,
            "services": [
                _service("PerfSonar", "Latency", f"ps-lat.site{i:03d}.example.org"),
                _service("PerfSonar", "Bandwidth", f"ps-bw.site{i:03d}.example.org"),
                _service("CE", "HTCONDOR-CE", f"ce01.site{i:03d}.example.org:9619"),
                _service("CE", "HTCONDOR-CE", f"ce02.site{i:03d}.example.org:9619"),
            ],
            "netroutes": routes,
        }
    return export


def _site_networks(i: int, count: int, sites: int) -> list[Any]:
    """`count` distinct networks of site i: 4/5 IPv4 inside its /16 (one /26 inside the next
    site's), the rest IPv6 inside its /44 of 2001:db8::/32."""
    rng = random.Random(SEED + i)
    block = ipaddress.ip_network(f"{_site_ipv4(i)}/16")
    neighbour = ipaddress.ip_network(f"{_site_ipv4((i + 1) % sites)}/16")
    v6 = ipaddress.ip_network((int(ipaddress.IPv6Address("2001:db8::")) + (i << 84), 44))
    networks: dict[Any, None] = {block: None, _random_subnet(rng, neighbour, 26): None}
    while len(networks) < count * 4 // 5:
        networks[_random_subnet(rng, block, rng.choice((20, 22, 24, 26, 28)))] = None
    while len(networks) < count:
        networks[_random_subnet(rng, v6, rng.choice((48, 56, 64)))] = None
    return list(networks)


def _random_subnet(rng: random.Random, parent: Any, length: int) -> Any:
    offset = rng.randrange(1 << (length - parent.prefixlen)) << (parent.max_prefixlen - length)
    return ipaddress.ip_network((int(parent.network_address) + offset, length))


def _site_ipv4(i: int) -> str:
    return str(ipaddress.IPv4Address((10 << 24) + (i << 16)))


def _service(kind: str, flavour: str, endpoint: str) -> dict[str, str]:
    return {
        "type": kind,
        "flavour": flavour,
        "endpoint": endpoint,
        "status": "production",
        "state": "ACTIVE",
    }


def build_ends(sites: int) -> list[tuple[str, str]]:
    """(host, IP) of every measurement host: per site the CRIC-named one and two known only by
    an address in the site's /16; plus 20 hosts in no site's network."""
    ends = []
    for i in range(sites):
        base = int(ipaddress.IPv4Address(_site_ipv4(i)))
        ends.append((f"ps-lat.site{i:03d}.example.org", str(ipaddress.IPv4Address(base + 10))))
        for k in (1, 2):
            address = str(ipaddress.IPv4Address(base + (k << 8) + 77))
            ends.append((f"perfsonar{k}.campus{i:03d}.example.net", address))
    ends += [(f"ps{k}.nowhere.example.com", f"198.18.{k}.1") for k in range(20)]
    return ends


def build_state(
    loaded_topology: Any, ends: Sequence[tuple[str, str]], links: int
) -> tuple[LinkState, list[ParsedMessage]]:
    """A state with `links` distinct directed links between `ends`, and a loss message for each."""
    rng = random.Random(SEED)
    pairs: set[tuple[int, int]] = set()
    while len(pairs) < links:
        a, b = rng.randrange(len(ends)), rng.randrange(len(ends))
        if a != b:
            pairs.add((a, b))
    minute = (int(time.time()) // 60 - 1) * 60
    messages = []
    for a, b in sorted(pairs):
        endpoints = LinkEndpoints(ends[a][1], ends[b][1], ends[a][0], ends[b][0])
        message = ParsedMessage(MeasurementKind.LOSS, endpoints)
        message.losses.append((minute, 0.001))
        messages.append(message)
    state = LinkState(loaded_topology, capacity=links)
    state.apply_batch(messages, time.time())
    return state, messages


class IngestLoad:
    """A thread applying batches of loss datapoints back to back, timing every call."""

    def __init__(self, state: LinkState, messages: list[ParsedMessage]) -> None:
        self._state, self._messages = state, messages
        self._stop = threading.Event()
        self.calls: list[tuple[float, float]] = []  # (start, seconds)
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> IngestLoad:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def longest_between(self, start: float, end: float) -> float:
        """Longest call that overlapped [start, end]."""
        return max((s for t, s in self.calls if t <= end and t + s >= start), default=0.0)

    def _run(self) -> None:
        offset = 0
        while not self._stop.is_set():
            batch = self._messages[offset : offset + BATCH]
            offset = (offset + BATCH) % max(len(self._messages) - BATCH, 1)
            started = time.perf_counter()
            self._state.apply_batch(batch, time.time())
            self.calls.append((started, time.perf_counter() - started))


def measure(sites: int, prefixes: int, links: int, repeats: int) -> dict[str, Any]:
    export = build_export(sites, prefixes)
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "cric-rcsite.json"
        path.write_bytes(orjson.dumps(export))
        loaded = load_topology(str(path))
        state, messages = build_state(loaded.topology, build_ends(sites), links)
        refresher = TopologyRefresher(state, str(path), loaded, interval=0)
        runs = [_one_refresh(refresher, state, messages, str(path)) for _ in range(repeats)]
        size = path.stat().st_size
    topology = loaded.topology
    return {
        "sites": len(topology.sites),
        "networks": sum(map(len, topology.networks_by_site.values())),
        "hosts": len(topology.site_by_host),
        "links": len(state),
        "links_unmapped": state.index.unmapped,
        "export_bytes": size,
        "runs": runs,
        "refresh_seconds_median": statistics.median(r["refresh_seconds"] for r in runs),
        "refresh_seconds_max": max(r["refresh_seconds"] for r in runs),
        "lock_held_seconds_max": max(r["lock_held_seconds"] for r in runs),
        "ingest_pause_seconds_max": max(r["ingest_longest_call_seconds"] for r in runs),
        "ingest_baseline_seconds_max": max(r["baseline_longest_call_seconds"] for r in runs),
    }


def _one_refresh(
    refresher: TopologyRefresher, state: LinkState, messages: list[ParsedMessage], source: str
) -> dict[str, float]:
    with IngestLoad(state, messages) as ingest:
        time.sleep(0.3)
        baseline_start = time.perf_counter()
        time.sleep(1.0)
        baseline_end = started = time.perf_counter()
        assert refresher.refresh()
        ended = time.perf_counter()
        time.sleep(0.1)
    parse_started = time.perf_counter()
    loaded = load_topology(source)
    parse_seconds = time.perf_counter() - parse_started
    match_started = time.perf_counter()
    state.swap_topology(loaded.topology)
    return {
        "refresh_seconds": ended - started,
        "read_and_parse_seconds": parse_seconds,
        "match_and_swap_seconds": time.perf_counter() - match_started,
        "lock_held_seconds": refresher.last_lock_seconds,
        "ingest_longest_call_seconds": ingest.longest_between(started, ended),
        "baseline_longest_call_seconds": ingest.longest_between(baseline_start, baseline_end),
        "ingest_calls_during_refresh": sum(1 for t, _ in ingest.calls if started <= t <= ended),
    }
