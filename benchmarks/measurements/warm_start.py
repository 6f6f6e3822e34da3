"""Warm start: `nettel serve --warm-from PEER`, from its request for the peer's state to ready."""

from __future__ import annotations

import json
import time
from typing import Any

import httpx

from benchmarks.context import SuiteContext
from benchmarks.report import MeasurementResult
from benchmarks.support.broker import measurement_broker
from benchmarks.support.link_fill import write_snapshot
from benchmarks.support.model import serve_model_args
from benchmarks.support.service_process import links_with_full_window
from devtools.service_process import ServiceProcess, launch_service, wait_for_status

NAME = "warm_start"
TARGET_SECONDS = 5.0
TARGET_LINKS = 15_000
TOKEN = "benchmark-warm-start"
METHOD = (
    "For each link count a private ActiveMQ broker is up first; a peer `nettel serve` starts "
    "from a `--state-dir` snapshot of that many links with full 32-minute windows "
    "(`benchmarks/support/link_fill.py`) and an admin token. A replica `nettel serve --warm-from "
    "<peer>` (the shipped model when there is one, as the peer) is then launched. Request to "
    "ready: from the replica's request for GET /admin/state (the time of its log line \"warm "
    'start: state taken" minus the seconds it reports) until its `/readyz` first answers 200 '
    "(polled every 50 ms): transfer, checks, decode, subscription and the first matrix. "
    "Transfer and load: the request, the transfer, the checks and the decode alone. Process "
    "start to ready adds interpreter start and imports. Bytes: Content-Length of GET "
    "/admin/state. Links with 32 samples: links of the replica's /costmatrix with a full window."
)


def run(ctx: SuiteContext) -> MeasurementResult:
    result = MeasurementResult(NAME, "Warm start: a replica from a peer's state", METHOD)
    runs = [_warm_start(ctx, links) for links in ctx.sizes.warm_links]
    for r in runs:
        label = f"{r['links']:,} links"
        key = f"{r['links'] // 1000}k" if r["links"] >= 1000 else str(r["links"])
        result.add(f"bytes_{key}", f"{label}: state on the wire", r["bytes"], "B")
        result.add(
            f"transfer_{key}",
            f"{label}: request, transfer, checks, decode",
            r["transfer_and_load_seconds"],
            "s",
        )
        result.add(f"ready_{key}", f"{label}: request to ready", r["request_to_ready_seconds"], "s")
        result.add(
            f"process_ready_{key}",
            f"{label}: process start to ready",
            r["process_start_to_ready_seconds"],
            "s",
        )
        result.add(f"full_{key}", f"{label}: links with 32 samples", r["links_with_32_samples"])
    first = runs[0]
    result.target(
        "ready",
        f"request to ready at {first['links']:,} links (target set at {TARGET_LINKS:,})",
        first["request_to_ready_seconds"],
        "<=",
        TARGET_SECONDS,
        "s",
    )
    result.target(
        "links_missing",
        "links without a full window, all sizes",
        sum(r["links"] - r["links_with_32_samples"] for r in runs),
        "<=",
        0,
    )
    result.details["runs"] = runs
    return result


def _warm_start(ctx: SuiteContext, links: int) -> dict[str, Any]:
    ctx.log(f"warm_start: {links:,} links")
    work, logs = ctx.work / f"warm-{links}", ctx.logs
    peer_dir = work / "peer"
    write_snapshot(peer_dir, links, time.time())
    env = {"NETTEL_ADMIN_TOKEN": TOKEN, "NETTEL_WARM_TOKEN": TOKEN}
    with measurement_broker(ctx, f"warm-{links}") as broker:
        peer_args = [*serve_model_args(), "--client-id", "bench-peer", "--state-dir", str(peer_dir)]
        peer = launch_service(broker.brokers, peer_args, logs / f"warm-peer-{links}.log", env)
        try:
            wait_for_status(peer, "/readyz", timeout=300, interval=0.1)
            size = int(_state_headers(peer.url)["content-length"])
            replica_args = [*serve_model_args(), "--client-id", "bench-replica"]
            replica = launch_service(
                broker.brokers,
                [*replica_args, "--warm-from", peer.url],
                logs / f"warm-replica-{links}.log",
                env,
            )
            try:
                ready_at = wait_for_status(replica, "/readyz", timeout=300, interval=0.05)
                ready_wall = time.time() - (time.monotonic() - ready_at)
                full = links_with_full_window(replica.url)
            finally:
                replica.stop()
        finally:
            peer.stop()
    taken = _warm_log_line(replica)
    requested_at = taken["time"] - taken["seconds"]
    return {
        "links": links,
        "bytes": size,
        "transfer_and_load_seconds": taken["seconds"],
        "request_to_ready_seconds": ready_wall - requested_at,
        "process_start_to_ready_seconds": ready_at - replica.launched_at,
        "links_with_32_samples": full,
    }


def _state_headers(url: str) -> httpx.Headers:
    """Headers of the peer's GET /admin/state (the body is read and dropped)."""
    auth = {"Authorization": f"Bearer {TOKEN}"}
    with httpx.stream("GET", f"{url}/admin/state", headers=auth, timeout=120) as response:
        response.raise_for_status()
        for _ in response.iter_bytes():
            pass
        return response.headers


def _warm_log_line(service: ServiceProcess) -> dict[str, Any]:
    """The replica's "warm start: state taken" log record."""
    for line in service.log_text().splitlines():
        if "warm start: state taken" in line:
            record: dict[str, Any] = json.loads(line)
            return record
    raise RuntimeError(f"the replica did not warm start:\n{service.log_tail(40)}")
