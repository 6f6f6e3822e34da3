"""The ingest corpus with throughput tests and traceroutes mixed in at WLCG's proportions.

A WLCG directed pair, as perfSONAR schedules its tests (pSConfig's own templates: latencybg
continuously, traces every 10 minutes `PT10M`, throughput every 4 hours `PT4H`), yields per hour
60 one-way delay histograms, 60 loss ratios, 6 traces and a quarter of a throughput result with
its retransmit count. `build_mixed_corpus` keeps those datapoint proportions: the delay and loss
messages of `corpus.build_ingest_corpus`, then for every 120 of their datapoints 6 traces (a
link's traces of the covered minutes in one message, esmond's version-1 layout: a hop list per
trace, as tests/data/packet-trace-raw.json) and a quarter of a throughput result and of its
retransmit count (one per message, on their own topics, as tests/data/throughput-raw.json).

Paths are made up per link from its sites (two routers at each site, two to six of a shared
backbone between them, ASNs per site, RTTs growing to the link's base delay), about one in ten
second traces of a link taking another backbone route: a path change.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from benchmarks.support.corpus import SEED, Corpus, WireMessage, build_ingest_corpus, mesh_for
from service.config import RETRANSMITS_TOPIC, THROUGHPUT_TOPIC, TRACE_TOPIC
from simulation.simulator import Mesh


@dataclass(frozen=True)
class FeedMix:
    """Datapoints per directed link and hour, by event type."""

    delay: float = 60.0
    loss: float = 60.0
    trace: float = 6.0
    throughput: float = 0.25
    retransmits: float = 0.25

    def per_delay_and_loss(self, kind: str) -> float:
        """Datapoints of `kind` for one delay or loss datapoint."""
        value: float = getattr(self, kind)
        return value / (self.delay + self.loss)


WLCG_MIX = FeedMix()
#: Backbone routers the made-up paths cross, and the most of them on one path.
BACKBONE_ROUTERS = 64
BACKBONE_HOPS = (2, 6)
#: Share of second traces of a link that take another route.
CHANGED_ROUTES = 0.1


@dataclass(frozen=True)
class MixedCorpus:
    """The corpus and how many messages and datapoints of each event type it holds."""

    corpus: Corpus
    messages: dict[str, int]
    datapoints: dict[str, int]


def build_mixed_corpus(
    n_messages: int,
    n_links: int,
    now: float,
    cache_dir: Path | None = None,
    mix: FeedMix = WLCG_MIX,
    seed: int = SEED,
) -> MixedCorpus:
    """About `n_messages` messages: delay and loss ones, then traces and throughput results in
    `mix`'s proportions to their datapoints, all ordered by their newest minute."""
    delay_loss_per_message = 2.0  # 1-3 datapoints each (corpus.MAX_DATAPOINTS_PER_MESSAGE)
    trace_share = mix.per_delay_and_loss("trace") * delay_loss_per_message
    results_share = 2 * mix.per_delay_and_loss("throughput") * delay_loss_per_message
    others = n_links if trace_share * n_messages >= n_links else trace_share * n_messages
    n_delay_loss = round((n_messages - others) / (1.0 + results_share))
    base = build_ingest_corpus(n_delay_loss, n_links, now, cache_dir, seed)
    rng = np.random.default_rng(seed + 1)
    mesh = mesh_for(n_links, seed)
    dl_points = base.datapoints
    traces = _trace_messages(
        mesh, n_links, base, round(dl_points * mix.per_delay_and_loss("trace")), rng
    )
    tests = round(dl_points * mix.per_delay_and_loss("throughput"))
    throughput = _throughput_messages(mesh, n_links, base, tests, rng)
    count = len(base.messages)
    keyed = [((_newest_minute(m), k / count), m) for k, m in enumerate(base.messages)]
    keyed += [((_newest_minute(m), float(rng.random())), m) for m in (*traces, *throughput)]
    keyed.sort(key=lambda item: item[0])
    corpus = replace(base, messages=[m for _, m in keyed])
    messages = {
        "delay and loss": len(base.messages),
        "packet-trace": len(traces),
        "throughput and packet-retransmits": len(throughput),
    }
    datapoints = {
        "delay and loss": dl_points,
        "packet-trace": sum(m.datapoints for m in traces),
        "throughput": len(throughput) // 2,
        "packet-retransmits": len(throughput) // 2,
    }
    return MixedCorpus(corpus, messages, datapoints)


def _newest_minute(message: WireMessage) -> int:
    """The minute of a message's newest datapoint (its collector sent it 65 s after it began:
    `simulation.bus_format.COLLECTOR_LAG_S`), which orders the corpus; within a minute the
    delay and loss messages keep their order and the others fall among them at random."""
    return int(float(message.headers["rsv-timestamp"]) - 65) // 60


def _trace_messages(
    mesh: Mesh, n_links: int, base: Corpus, count: int, rng: np.random.Generator
) -> list[WireMessage]:
    """`count` traces over the links (as evenly as they go), each link's in one message."""
    per_link = np.full(n_links, count // n_links)
    per_link[rng.choice(n_links, size=count % n_links, replace=False)] += 1
    first, last = base.minutes[0] * 60, base.minutes[-1] * 60 + 59
    out = []
    for link in np.flatnonzero(per_link).tolist():
        stamps = sorted(int(t) for t in rng.integers(first, last, size=int(per_link[link])))
        points: dict[str, Any] = {}
        for number, ts in enumerate(dict.fromkeys(stamps)):
            route = 1 if number and rng.random() < CHANGED_ROUTES else 0
            points[str(ts)] = _hops(mesh, link, route)
        out.append(
            _message(mesh, link, TRACE_TOPIC, "packet-trace", "pscheduler/traceroute", points)
        )
    return out


def _throughput_messages(
    mesh: Mesh, n_links: int, base: Corpus, tests: int, rng: np.random.Generator
) -> list[WireMessage]:
    """`tests` throughput results on distinct links, each with its retransmit count."""
    first, last = base.minutes[0] * 60, base.minutes[-1] * 60 + 59
    out = []
    for link in rng.choice(n_links, size=min(tests, n_links), replace=False).tolist():
        ts = str(int(rng.integers(first, last)))
        rate = int(float(mesh.capacity_bps[link]) * rng.uniform(0.3, 0.95))
        retransmits = int(rng.integers(0, 400))
        out.append(
            _message(mesh, link, THROUGHPUT_TOPIC, "throughput", "pscheduler/iperf3", {ts: rate})
        )
        out.append(
            _message(
                mesh,
                link,
                RETRANSMITS_TOPIC,
                "packet-retransmits",
                "pscheduler/iperf3",
                {ts: retransmits},
            )
        )
    return out


def _hops(mesh: Mesh, link: int, route: int) -> list[dict[str, Any]]:
    """esmond's hop list of the link's made-up path (`route` 1: the other backbone route)."""
    source, destination = int(mesh.source[link]), int(mesh.destination[link])
    digest = hashlib.blake2b(f"{source}>{destination}:{route}".encode(), digest_size=8).digest()
    pick = int.from_bytes(digest, "little")
    backbone = [
        (pick >> (6 * k)) % BACKBONE_ROUTERS
        for k in range(BACKBONE_HOPS[0] + pick % (BACKBONE_HOPS[1] - BACKBONE_HOPS[0] + 1))
    ]
    routers = [
        (_site_router(source, 1), 64512 + source),
        (_site_router(source, 2), 64512 + source),
        *((f"198.51.100.{100 + router}", 64496) for router in backbone),
        (_site_router(destination, 2), 64512 + destination),
        (mesh.host_ips[destination], 64512 + destination),
    ]
    base_rtt = 2 * float(mesh.base_delay_ms[link])
    hops = []
    for ttl, (address, asn) in enumerate(routers, start=1):
        hops.append(
            {
                "ttl": ttl,
                "query": 1,
                "success": 1,
                "ip": address,
                "hostname": f"rtr{ttl}.as{asn}.example.net",
                "as": {"number": asn, "owner": f"EXAMPLE-{asn} - Example Network {asn}, US"},
                "rtt": round(base_rtt * ttl / len(routers) + 0.05, 3),
            }
        )
    return hops


def _site_router(site: int, number: int) -> str:
    """A site's router address (from 100.64.0.0/10, shared address space)."""
    value = (site << 2) | number
    return f"100.{64 + (value >> 16 & 63)}.{value >> 8 & 255}.{value & 255}"


def _message(
    mesh: Mesh, link: int, topic: str, event: str, tool: str, points: dict[str, Any]
) -> WireMessage:
    """A version-1 bus message of `event` on the link, as tests/data's samples are laid out."""
    source, destination = int(mesh.source[link]), int(mesh.destination[link])
    key = hashlib.blake2b(f"{source}|{destination}|{tool}".encode(), digest_size=16).hexdigest()
    meta = {
        "subject_type": "point-to-point",
        "source": mesh.host_ips[source],
        "destination": mesh.host_ips[destination],
        "input_source": mesh.host_names[source],
        "input_destination": mesh.host_names[destination],
        "measurement_agent": mesh.host_ips[source],
        "tool_name": tool,
        "org_metadata_key": key,
    }
    start = min(points, key=int)
    headers = {
        "destination": topic,
        "event-type": event,
        "input-source": meta["input_source"],
        "input-destination": meta["input_destination"],
        "org_metadata_key": key,
        "ts_start": start,
        "rsv-timestamp": f"{int(max(points, key=int)) + 65}.00",
        "summaries": "0",
        "persistent": "true",
    }
    body = orjson.dumps({"meta": meta, "datapoints": points})
    return WireMessage(topic, headers, body, len(points))
