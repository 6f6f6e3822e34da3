"""Warm start: `nettel serve --warm-from PEER` from its request for the peer's state to ready.

    python -m benchmarks.warm_start [--links 15000 100000] [-- FLAGS]

For each link count a private ActiveMQ broker is up first; a peer `nettel serve` starts from a
`--state-dir` snapshot of that many links with full 32-minute windows (`benchmarks.link_fill`)
and an admin token. A replica `nettel serve --warm-from <peer>` (the shipped model when there is
one, as the peer) is then launched, and the figures are:

- `request_to_ready_seconds`: from the replica's request for GET /admin/state (the time its log
  line "warm start: state taken" gives, minus the seconds it reports) until its `/readyz` first
  answers 200 (polled every 50 ms): transfer, checks, decode, subscription and the first matrix;
- `transfer_and_load_seconds`: the request, the transfer, the checks and the decode alone;
- `process_start_to_ready_seconds`: the same from spawning the process (adds interpreter start
  and imports);
- `bytes`: the snapshot's size on the wire (Content-Length of GET /admin/state);
- `links_with_32_samples`: links of the replica's /costmatrix with a full window.

Prints one JSON document and writes it to `<output>/warm_start.json`.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx

from benchmarks.broker import private_broker
from benchmarks.environment import REPO_ROOT, describe_environment
from benchmarks.link_fill import write_snapshot
from benchmarks.model import model_description, serve_model_args
from devtools.service_process import ServiceProcess, launch_service, wait_for_status

TARGET_SECONDS = 5.0
TARGET_LINKS = 15_000
TOKEN = "benchmark-warm-start"


def run(links: int, extra: list[str], output: Path) -> dict[str, Any]:
    work, logs = output / "work" / f"warm-{links}", output / "logs"
    peer_dir = work / "peer"
    write_snapshot(peer_dir, links, time.time())
    env = {"NETTEL_ADMIN_TOKEN": TOKEN, "NETTEL_WARM_TOKEN": TOKEN}
    with private_broker(work, f"warm-{links}", logs) as broker:
        peer_args = [*serve_model_args(), "--client-id", "bench-peer", "--state-dir", str(peer_dir)]
        peer = launch_service(broker.brokers, peer_args, logs / f"warm-peer-{links}.log", env)
        try:
            wait_for_status(peer, "/readyz", timeout=300, interval=0.1)
            size = int(state_headers(peer.url)["content-length"])
            replica = launch_service(
                broker.brokers,
                [*serve_model_args(), "--client-id", "bench-replica", "--warm-from", peer.url]
                + extra,
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
    taken = warm_log_line(replica)
    requested_at = taken["time"] - taken["seconds"]
    request_to_ready = ready_wall - requested_at
    return {
        "links": links,
        "other_serve_arguments": extra,
        "bytes": size,
        "bytes_per_link": round(size / links, 1),
        "transfer_and_load_seconds": taken["seconds"],
        "request_to_ready_seconds": round(request_to_ready, 2),
        "process_start_to_ready_seconds": round(ready_at - replica.launched_at, 2),
        "links_with_32_samples": full,
        "target": f"request to ready <= {TARGET_SECONDS:.0f} s at {TARGET_LINKS:,} links",
        "met": full == links and (links > TARGET_LINKS or request_to_ready <= TARGET_SECONDS),
    }


def state_headers(url: str) -> httpx.Headers:
    """Headers of the peer's GET /admin/state (the body is read and dropped)."""
    auth = {"Authorization": f"Bearer {TOKEN}"}
    with httpx.stream("GET", f"{url}/admin/state", headers=auth, timeout=120) as response:
        response.raise_for_status()
        for _ in response.iter_bytes():
            pass
        return response.headers


def links_with_full_window(url: str) -> int:
    matrix = httpx.get(f"{url}/costmatrix", timeout=120).json()
    return sum(1 for link in matrix["links"] if link["samples"] == 32)


def warm_log_line(service: ServiceProcess) -> dict[str, Any]:
    """The replica's "warm start: state taken" log record."""
    for line in service.log_text().splitlines():
        if "warm start: state taken" in line:
            record: dict[str, Any] = json.loads(line)
            return record
    raise RuntimeError(f"the replica did not warm start:\n{service.log_tail(40)}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.warm_start", allow_abbrev=False)
    parser.add_argument("--links", type=int, nargs="+", default=[15_000, 100_000])
    parser.add_argument("--output", type=Path, default=REPO_ROOT / "out" / "bench")
    parser.add_argument("serve_args", nargs="*", help="more `nettel serve` flags, after --")
    args = parser.parse_args(argv)
    runs = [run(links, args.serve_args, args.output) for links in args.links]
    result = {"runs": runs, "environment": describe_environment("none", model_description())}
    args.output.mkdir(parents=True, exist_ok=True)
    (args.output / "warm_start.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0 if all(r["links_with_32_samples"] == r["links"] for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
