"""`nettel rucio-sync` at scale: syncs, ~120 sites (~14,000 RSE pairs) with a local Rucio."""

from __future__ import annotations

import math
import os
import random
import time
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry

from benchmarks.context import SuiteContext, Unavailable
from benchmarks.report import MeasurementResult
from benchmarks.support.link_fill import host_ip, write_snapshot
from benchmarks.support.model import serve_model_args
from devtools.activemq import free_port
from devtools.rucio_server import (
    SERVER_VENV,
    RucioServer,
    server_python,
    start_rucio_server,
)
from devtools.service_process import ServiceProcess, launch_service, wait_for_status
from service.rucio.distances import rse_pairs
from service.rucio.sync import (
    MAX_CHANGES,
    REREAD_SYNCS,
    RucioSync,
    StateFile,
    SyncMetrics,
    SyncOptions,
    SyncReport,
)

NAME = "rucio_sync"
METHOD = (
    "A private Rucio 41.5.1 server (`devtools/rucio_server.py`, SQLite, werkzeug; its venv "
    "`.venv-rucio` from `python -m devtools.rucio_server install`) gets one RSE per site "
    "(attribute `site`) and a distance row for every ordered pair (baselines 1-5, seeded). "
    "`nettel serve` serves a state snapshot of the full mesh of S hosts "
    "(`benchmarks/support/link_fill.py`: ~5 % of links busy, with queueing delay and loss) with"
    " a topology naming each host's site. Then, in the suite's process, the syncs an operator's"
    " `nettel rucio-sync` would make (default concurrency, 4 requests in flight): first from an"
    " empty state dir (reads and writes the pairs with a penalty) and the syncs after it until"
    " none defers a change; the same costs again (must "
    "send no write and read only its slice of the managed pairs); nettel restarted on another "
    "snapshot (other links busy) and the sync after that cost change. With the default mapping "
    "nearly every pair with a cost gets a penalty, so a sync visits at most `MAX_CHANGES` pairs"
    " that change (largest change first; the rest at the next syncs) besides its slice of "
    "re-reads (drift repair: each managed pair once in `REREAD_SYNCS` syncs). Each sync's wall "
    "time and requests by operation are reported; at the end every distance row in Rucio is "
    "checked against the state file (each managed pair holds the distance recorded, every other"
    " pair its baseline)."
)


def run(ctx: SuiteContext) -> MeasurementResult:
    if not server_python().exists():
        raise Unavailable(
            f"no Rucio server venv at {SERVER_VENV.name}: run "
            "`python -m devtools.rucio_server install` first"
        )
    sites = ctx.sizes.rucio_sites
    topology = ctx.work / "topology.yaml"
    topology.write_text("".join(f"{site_name(i)}: [{host_ip(i)}]\n" for i in range(sites)))
    server = start_rucio_server(ctx.work / "rucio")
    try:
        measured = _syncs(ctx, server, topology)
    finally:
        server.stop()
    return _result(measured)


def _syncs(ctx: SuiteContext, server: RucioServer, topology: Path) -> dict[str, Any]:
    sites = ctx.sizes.rucio_sites
    spec, baselines = rucio_spec(sites, SEED)
    server.run_script("setup", spec)
    os.environ["RUCIO_CONFIG"] = str(server.config)
    from service.rucio.client import RucioDistances  # reads RUCIO_CONFIG when imported

    state_dir = ctx.work / "sync-state"
    state_dir.mkdir()
    service = start_nettel(ctx, sites, 1, topology)
    syncs: dict[str, SyncReport] = {}
    try:
        options = SyncOptions(nettel_url=service.url)
        sync = RucioSync(
            options, RucioDistances(), StateFile(state_dir), SyncMetrics(CollectorRegistry())
        )
        ctx.log("rucio_sync: first sync")
        syncs["first, from an empty state dir"] = sync.run_once()
        converging = 1
        while syncs[list(syncs)[-1]].deferred > 0 and converging < 20:
            converging += 1
            ctx.log(f"rucio_sync: sync {converging} (changes deferred by the first)")
            syncs[f"sync {converging}, the changes deferred"] = sync.run_once()
        syncs["the same costs again"] = sync.run_once()
        service.stop()
        service = start_nettel(ctx, sites, 2, topology)
        sync.options = SyncOptions(nettel_url=service.url)
        ctx.log("rucio_sync: sync after a cost change")
        syncs["after a cost change"] = sync.run_once()
        sync.close()
    finally:
        service.stop()
    return {
        "sites": sites,
        "rse_pairs": len(baselines),
        "concurrency": options.concurrency,
        "max_changes": MAX_CHANGES,
        "syncs": {name: report.fields() for name, report in syncs.items()},
        "checked": check_rucio(server, baselines, StateFile(state_dir), server.url),
    }


def _result(m: dict[str, Any]) -> MeasurementResult:
    result = MeasurementResult(NAME, "Rucio sync: distances of ~14,000 RSE pairs", METHOD)
    result.add("sites", "sites (one RSE and host each)", m["sites"])
    result.add("rse_pairs", "RSE pairs with distance rows", m["rse_pairs"])
    result.add("concurrency", "requests in flight", m["concurrency"])
    result.add("max_changes", "pairs that change visited per sync at most", m["max_changes"])
    rows = []
    for i, (name, sync) in enumerate(m["syncs"].items()):
        requests = sync["requests"]
        listing = requests.get("list_rses", 0) + requests.get("list_rse_attributes", 0)
        result.add(f"seconds_{i}", f"{name}: wall time", sync["seconds"], "s")
        result.add(f"requests_{i}", f"{name}: requests to Rucio", sum(requests.values()))
        rows.append(
            [
                name,
                f"{sync['seconds']:.1f}",
                f"{sum(requests.values()):,}",
                f"{requests.get('get_distance', 0):,}",
                f"{requests.get('update_distance', 0):,}",
                listing,
                f"{sync['visited']:,}",
                f"{sync['written']:,}",
                f"{sync['penalised']:,}",
                f"{sync['reread']:,}",
                f"{sync['deferred']:,}",
            ]
        )
    unchanged = m["syncs"]["the same costs again"]["requests"]
    checked = m["checked"]
    result.add("rows", "Rucio rows checked against the state file", checked["rows"])
    result.add("managed", "managed pairs", checked["managed"])
    result.target(
        "unchanged_writes",
        "distances written by a sync with no change",
        unchanged.get("update_distance", 0),
        "<=",
        0,
    )
    slice_bound = math.ceil(2 * checked["managed"] / REREAD_SYNCS)
    result.target(
        "unchanged_reads",
        f"distances read by a sync with no change (its re-read slice; bound 2 x managed / "
        f"{REREAD_SYNCS} = {slice_bound})",
        unchanged.get("get_distance", 0),
        "<=",
        slice_bound,
    )
    result.target(
        "slowest_sync",
        "slowest sync's wall time",
        max(sync["seconds"] for sync in m["syncs"].values()),
        "<=",
        60.0,
        "s",
    )
    result.target("mismatches", "Rucio rows unlike the state file", checked["mismatches"], "<=", 0)
    result.details["tables"] = [
        {
            "title": "Syncs",
            "columns": [
                "sync",
                "wall s",
                "requests",
                "get_distance",
                "update_distance",
                "listing",
                "pairs visited",
                "written",
                "penalised after",
                "re-read",
                "deferred",
            ],
            "rows": rows,
        }
    ]
    result.details["syncs"] = m["syncs"]
    return result


SEED = 29


def site_name(i: int) -> str:
    return f"SITE-{i:03d}"


def rucio_spec(sites: int, seed: int) -> tuple[dict[str, Any], dict[tuple[str, str], int]]:
    """One RSE per site and a distance row (baseline 1-5) for every ordered pair."""
    rng = random.Random(seed)
    rses = {f"{site_name(i)}_DATADISK": site_name(i) for i in range(sites)}
    baselines = {pair: rng.randint(1, 5) for pair in rse_pairs(rses)}
    rows = [[s, d, distance] for (s, d), distance in baselines.items()]
    return {"group": "bench", "rses": rses, "distances": rows}, baselines


def start_nettel(ctx: SuiteContext, sites: int, seed: int, topology: Path) -> ServiceProcess:
    state = ctx.work / f"nettel-state-{seed}"
    write_snapshot(state, sites * (sites - 1), time.time(), seed)
    extra = [*serve_model_args(), "--state-dir", str(state), "--topology", str(topology)]
    extra += ["--interval", "3600", "--snapshot-interval", "3600"]
    log = ctx.logs / f"rucio-sync-nettel-{seed}.log"
    service = launch_service(f"127.0.0.1:{free_port()}", extra, log)
    wait_for_status(service, "/costmatrix?level=site", timeout=180)
    return service


def check_rucio(
    server: RucioServer, baselines: dict[tuple[str, str], int], state: StateFile, url: str
) -> dict[str, int]:
    """Every distance row against the state: managed pairs hold the recorded distance, others
    their baseline."""
    rows = {(s, d): distance for s, d, distance in server.run_script("distances")}
    managed = state.load(url).pairs
    expected = {
        pair: managed[pair].distance if pair in managed else b for pair, b in baselines.items()
    }
    mismatches = sum(rows.get(pair) != distance for pair, distance in expected.items())
    above = sum(record.distance > record.baseline for record in managed.values())
    return {
        "rows": len(rows),
        "managed": len(managed),
        "penalised": above,
        "mismatches": mismatches,
    }
