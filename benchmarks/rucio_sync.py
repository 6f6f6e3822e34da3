"""`nettel rucio-sync` at scale: one sync of ~120 sites (~14,000 RSE pairs) against a local Rucio.

    python -m benchmarks.rucio_sync [--sites 120] [--concurrency 4] [--output out/bench-rucio-sync]

A private Rucio 41.5.1 server (`devtools.rucio_server`, SQLite, werkzeug) gets one RSE per site
(attribute `site`) and a distance row for every ordered pair (baselines 1-5, seeded). `nettel
serve` serves a state snapshot of the full mesh of `--sites` hosts (`benchmarks.link_fill`: ~5 %
of links busy, with queueing delay and loss) with a topology naming each host's site. Then, in
this process, the syncs an operator's `nettel rucio-sync` would make:

1. first sync from an empty state dir (reads and writes the pairs with a penalty);
2. the same costs again: must send no write and read no distance;
3. nettel restarted on another snapshot (other links busy): the sync after a cost change.

Each sync's wall time and requests sent by operation are reported; at the end every distance row
in Rucio is checked against the state file (each managed pair holds the distance recorded, every
other pair its baseline).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry

from benchmarks.environment import REPO_ROOT, describe_environment
from benchmarks.link_fill import host_ip, write_snapshot
from benchmarks.model import model_description, serve_model_args
from devtools.activemq import free_port
from devtools.rucio_server import RucioServer, install_server_venv, start_rucio_server
from devtools.service_process import ServiceProcess, launch_service, wait_for_status
from service.rucio.distances import rse_pairs
from service.rucio.sync import RucioSync, StateFile, SyncMetrics, SyncOptions, SyncReport

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


def start_nettel(output: Path, sites: int, seed: int, topology: Path) -> ServiceProcess:
    state = output / f"nettel-state-{seed}"
    shutil.rmtree(state, ignore_errors=True)
    write_snapshot(state, sites * (sites - 1), time.time(), seed)
    extra = [*serve_model_args(), "--state-dir", str(state), "--topology", str(topology)]
    extra += ["--interval", "3600", "--snapshot-interval", "3600"]
    service = launch_service(f"127.0.0.1:{free_port()}", extra, output / f"nettel-{seed}.log")
    wait_for_status(service, "/costmatrix?level=site", timeout=180)
    return service


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    output: Path = args.output
    shutil.rmtree(output, ignore_errors=True)
    output.mkdir(parents=True)
    install_server_venv()
    topology = output / "topology.yaml"
    topology.write_text("".join(f"{site_name(i)}: [{host_ip(i)}]\n" for i in range(args.sites)))
    server = start_rucio_server(output / "rucio")
    try:
        report = _run(server, args, topology)
    finally:
        server.stop()
    (output / "report.json").write_text(json.dumps(report, indent=1))
    print(render(report))
    return 0 if report["checked"]["mismatches"] == 0 else 1


def _run(server: RucioServer, args: argparse.Namespace, topology: Path) -> dict[str, Any]:
    spec, baselines = rucio_spec(args.sites, SEED)
    started = time.monotonic()
    server.run_script("setup", spec)
    setup_seconds = time.monotonic() - started
    os.environ["RUCIO_CONFIG"] = str(server.config)
    from service.rucio.client import RucioDistances

    state_dir = args.output / "sync-state"
    state_dir.mkdir()
    service = start_nettel(args.output, args.sites, 1, topology)
    syncs: dict[str, SyncReport] = {}
    try:
        options = SyncOptions(nettel_url=service.url, concurrency=args.concurrency)
        sync = RucioSync(
            options, RucioDistances(), StateFile(state_dir), SyncMetrics(CollectorRegistry())
        )
        syncs["first"] = sync.run_once()
        syncs["no change"] = sync.run_once()
        service.stop()
        service = start_nettel(args.output, args.sites, 2, topology)
        sync.options = SyncOptions(nettel_url=service.url, concurrency=args.concurrency)
        syncs["after a cost change"] = sync.run_once()
        sync.close()
    finally:
        service.stop()
    return {
        "environment": describe_environment("rucio_sync", model_description()),
        "sites": args.sites,
        "rse_pairs": len(baselines),
        "concurrency": args.concurrency,
        "rucio_setup_seconds": round(setup_seconds, 1),
        "syncs": {name: report.fields() for name, report in syncs.items()},
        "checked": check_rucio(server, baselines, StateFile(state_dir), server.url),
    }


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


def render(report: dict[str, Any]) -> str:
    lines = [
        f"{report['sites']} sites, {report['rse_pairs']:,} RSE pairs, Rucio 41.5.1 on SQLite "
        f"(werkzeug), {report['concurrency']} requests in flight",
        "| sync | wall s | requests | get_distance | update_distance | listing "
        "| pairs visited | written | penalised after |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, sync in report["syncs"].items():
        requests = sync["requests"]
        listing = requests.get("list_rses", 0) + requests.get("list_rse_attributes", 0)
        lines.append(
            f"| {name} | {sync['seconds']:.1f} | {sum(requests.values()):,} "
            f"| {requests.get('get_distance', 0):,} | {requests.get('update_distance', 0):,} "
            f"| {listing} | {sync['visited']:,} | {sync['written']:,} | {sync['penalised']:,} |"
        )
    checked = report["checked"]
    lines.append(
        f"Rucio rows checked against the state file: {checked['rows']:,} rows, "
        f"{checked['managed']:,} managed pairs, {checked['mismatches']} mismatches"
    )
    return "\n".join(lines)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.rucio_sync")
    parser.add_argument("--sites", type=int, default=120, help="sites (one RSE and host each)")
    parser.add_argument("--concurrency", type=int, default=SyncOptions.concurrency)
    parser.add_argument("--output", type=Path, default=REPO_ROOT / "out" / "bench-rucio-sync")
    return parser


if __name__ == "__main__":
    sys.exit(main())
