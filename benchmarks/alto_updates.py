"""ALTO update streams (RFC 8895): how large a cycle's merge patch is next to the full document,
and what building them costs, at 15,000 links.

    python -m benchmarks.alto_updates [--links 15000] [--minutes 4] [--endpoints 100]
                                      [--output out/bench-alto-updates]

In this process, no HTTP: a link state of `--links` full links (`benchmarks.link_fill`, the 20
sites with /24 netroutes of `benchmarks.alto_endpoint_cost`) gets `--minutes` further minutes
of data (each link's base delay kept; jitter, queueing and loss drawn anew, as link_fill draws
them), with a matrix recomputed after each (no model: costs from the empirical filter). Each
resource a client can follow is then sent as the update stream sends it
(`alto_updates.SharedDocuments`): the network map, the cost maps of `priv:nettel-cost` and
`delay-ow`, a filtered `delay-ow` map of one source site, and endpoint costs of `--endpoints` x
`--endpoints` measured hosts. Per resource and recompute: full document and patch bytes, the
time to build the document and its patch for the first substream, and for a second substream
following the same resource (shared: the cost per extra client).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from benchmarks.alto_endpoint_cost import request_bodies, site_networks
from benchmarks.environment import describe_environment
from benchmarks.link_fill import SEED, advance_minute, build_full_state
from service.matrix.cycle import MatrixCycle
from service.matrix.snapshot import CostMatrix
from service.matrix.views import aggregate_sites
from service.publish.alto.request_bodies import AddUpdate
from service.publish.alto.updates import SharedDocuments, Substream, resolve_source
from service.publish.alto.view import AltoView
from service.publish.publishers import SnapshotMemo
from service.topology.topology import Topology

DELAY = {"cost-mode": "numerical", "cost-metric": "delay-ow"}


def resources(n_links: int, endpoints: int) -> dict[str, AddUpdate]:
    """Name -> the `AddUpdateReq` of a substream following it."""
    ecs = json.loads(request_bodies(n_links, endpoints)["hosts"])
    filtered = {"cost-type": DELAY, "pids": {"srcs": ["SITE-00"]}}
    return {
        name: AddUpdate(name, resource_id, None, True, body)
        for name, resource_id, body in (
            ("network map", "networkmap", None),
            ("cost map priv:nettel-cost", "costmap-nettel-cost", None),
            ("cost map delay-ow", "costmap-delay-ow", None),
            ("filtered delay-ow, 1 source site", "filtered-costmap-delay-ow", filtered),
            (f"endpoint costs {endpoints} x {endpoints}", "endpointcost", ecs),
        )
    }


def run(n_links: int, minutes: int, endpoints: int) -> dict[str, Any]:
    now = 1_800_000_000.0
    state = build_full_state(n_links, now)
    networks = site_networks(n_links)
    state.index.set_topology(
        Topology.from_inventory(
            [], [(cidr, site) for site, cidrs in networks.items() for cidr in cidrs]
        )
    )
    clock = [now]
    cycle = MatrixCycle(state, 60.0, clock=lambda: clock[0])
    views: SnapshotMemo[AltoView] = SnapshotMemo(
        lambda matrix: AltoView(
            matrix.links,
            aggregate_sites(matrix.links),
            version=matrix.etag.strip('"'),
            networks_of=state.index.topology.networks_of,
        )
    )
    documents = SharedDocuments(views)
    adds = resources(n_links, endpoints)
    followers = {
        name: [Substream(f"c{i}", resolve_source(add, None), True, None) for i in range(2)]
        for name, add in adds.items()
    }
    rng = np.random.default_rng(SEED + 1)
    minute = int(now // 60) - 1
    rows: dict[str, list[dict[str, float]]] = {name: [] for name in adds}
    cycle_seconds, view_seconds = [], []
    matrix: CostMatrix = cycle.recompute()
    for substreams in followers.values():
        for substream in substreams:
            documents.update(matrix, substream)  # the full documents every client starts from
    for _ in range(minutes):
        minute += 1
        clock[0] += 60.0
        advance_minute(state.buffers, n_links, minute, rng)
        started = time.perf_counter()
        matrix = cycle.recompute()
        cycle_seconds.append(time.perf_counter() - started)
        started = time.perf_counter()
        views(matrix).network  # noqa: B018 - built once per snapshot, before any document
        view_seconds.append(time.perf_counter() - started)
        for name, (first, second) in followers.items():
            started = time.perf_counter()
            patch = documents.update(matrix, first)
            first_seconds = time.perf_counter() - started
            started = time.perf_counter()
            documents.update(matrix, second)
            second_seconds = time.perf_counter() - started
            full = orjson.dumps(first.sent)  # what the update brought the client to
            rows[name].append(
                {
                    "full_bytes": len(full),
                    "patch_bytes": len(patch),
                    "first_ms": first_seconds * 1000,
                    "second_ms": second_seconds * 1000,
                }
            )
    return {
        "links": n_links,
        "minutes": minutes,
        "cycle_s_median": statistics.median(cycle_seconds),
        "view_s_median": statistics.median(view_seconds),
        "resources": {
            name: {key: statistics.median(row[key] for row in series) for key in series[0]}
            for name, series in rows.items()
        },
    }


def report(result: dict[str, Any]) -> str:
    lines = [
        f"{result['links']:,} links, median over {result['minutes']} recomputes "
        f"(recompute {result['cycle_s_median']:.2f} s, site aggregation and network map "
        f"{result['view_s_median'] * 1000:.0f} ms):",
        "",
        "| resource | full document | patch | patch / full | first substream | each other |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, figures in result["resources"].items():
        full, patch = figures["full_bytes"], figures["patch_bytes"]
        lines.append(
            f"| {name} | {full / 1000:,.1f} kB | {patch / 1000:,.1f} kB | "
            f"{patch / full:.0%} | {figures['first_ms']:.1f} ms | {figures['second_ms']:.2f} ms |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--links", type=int, default=15_000)
    parser.add_argument("--minutes", type=int, default=4)
    parser.add_argument("--endpoints", type=int, default=100)
    parser.add_argument("--output", type=Path, default=Path("out/bench-alto-updates"))
    args = parser.parse_args(argv)
    result = run(args.links, args.minutes, args.endpoints)
    result["environment"] = describe_environment("none", "none: costs from the empirical filter")
    args.output.mkdir(parents=True, exist_ok=True)
    (args.output / "alto_updates.json").write_text(json.dumps(result, indent=2))
    print(report(result))


if __name__ == "__main__":
    main()
