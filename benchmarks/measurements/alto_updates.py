"""ALTO update streams (RFC 8895): how large a cycle's merge patch is next to the full document,
and what building them costs, at 15,000 links."""

from __future__ import annotations

import json
import statistics
import time
from typing import Any

import numpy as np
import orjson

from benchmarks.context import SuiteContext
from benchmarks.report import MeasurementResult
from benchmarks.support.alto_mesh import request_bodies, site_networks
from benchmarks.support.link_fill import SEED, advance_minute, build_full_state
from service.matrix.cycle import MatrixCycle
from service.matrix.snapshot import CostMatrix
from service.matrix.views import aggregate_sites
from service.publish.alto.request_bodies import AddUpdate
from service.publish.alto.updates import SharedDocuments, Substream, resolve_source
from service.publish.alto.view import AltoView
from service.publish.publishers import SnapshotMemo
from service.topology.topology import Topology

NAME = "alto_updates"
METHOD = (
    "In the suite's process, no HTTP: a link state of L full links "
    "(`benchmarks/support/link_fill.py`, the 20 sites with /24 netroutes of "
    "`alto_endpoint_cost`) gets M further minutes of data (each link's base delay kept; jitter, "
    "queueing and loss drawn anew), with a matrix recomputed after each (no model: costs from "
    "the empirical filter). Each resource a client can follow is then sent as the update stream "
    "sends it (`SharedDocuments`): the network map, the cost maps of `priv:nettel-cost` and "
    "`delay-ow`, a filtered `delay-ow` map of one source site, and endpoint costs of E x E "
    "measured hosts. Per resource, medians over the recomputes: full document and patch bytes, "
    "the time to build the document and its patch for the first substream, and for a second "
    "substream following the same resource (shared: the cost per extra client)."
)


def run(ctx: SuiteContext) -> MeasurementResult:
    sizes = ctx.sizes
    ctx.log(f"alto_updates: {sizes.alto_links:,} links, {sizes.alto_update_minutes} minutes")
    measured = measure(sizes.alto_links, sizes.alto_update_minutes, sizes.alto_endpoints)
    result = MeasurementResult(NAME, "ALTO update streams: patches and their cost", METHOD)
    result.add("links", "links", measured["links"])
    result.add("minutes", "recomputes", measured["minutes"])
    result.add("cycle", "matrix recompute (median)", measured["cycle_s_median"], "s")
    result.add("view", "site aggregation and network map (median)", measured["view_s_median"], "s")
    rows = []
    for i, (name, f) in enumerate(measured["resources"].items()):
        full, patch = f["full_bytes"], f["patch_bytes"]
        result.add(f"full_{i}", f"{name}: full document", full, "B")
        result.add(f"patch_{i}", f"{name}: patch", patch, "B")
        result.add(f"first_{i}", f"{name}: first substream", f["first_ms"], "ms")
        result.add(f"other_{i}", f"{name}: each other substream", f["second_ms"], "ms")
        rows.append(
            [
                name,
                f"{full / 1000:,.1f} kB",
                f"{patch / 1000:,.1f} kB",
                f"{patch / full:.0%}",
                f"{f['first_ms']:.2f} ms",
                f"{f['second_ms']:.2f} ms",
            ]
        )
    network = measured["resources"]["network map"]
    result.target(
        "network_patch",
        "network map patch (topology unchanged)",
        network["patch_bytes"],
        "<=",
        0,
        "B",
    )
    result.details["tables"] = [
        {
            "title": "Resources (medians)",
            "columns": [
                "resource",
                "full document",
                "patch",
                "patch / full",
                "first substream",
                "each other",
            ],
            "rows": rows,
        }
    ]
    return result


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


def measure(n_links: int, minutes: int, endpoints: int) -> dict[str, Any]:
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
