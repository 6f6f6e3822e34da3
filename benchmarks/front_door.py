"""The HTTP front door under attack: /healthz latency while a client sends huge headers, holds
thousands of half-sent requests, or opens thousands of server-sent event streams it never reads.

    python -m benchmarks.front_door [--links 15000] [--seconds 40] [--header-mib 128]
        [--slow 3000] [--streams 2000] [--phases baseline huge_headers ...] [-- FLAGS]

`nettel serve --brokers none` (pScheduler over HTTP only; the shipped model when there is one)
starts from a `--state-dir` snapshot of `--links` links with full windows
(`benchmarks.link_fill`), so /costmatrix/stream has a real matrix to send. Then, phase by phase,
for `--seconds` each, /healthz is requested every 20 ms on a new connection (loopback) and
its latency recorded, while:

- `baseline`: nothing else happens;
- `huge_headers`: one client after another sends a request whose one header is `--header-mib`
  MiB (1 MiB writes) and reads the answer;
- `slow_connections`: `--slow` connections each send a request line and half a header, then
  nothing; those the service closes are opened again (a slowloris keeping its count);
- `idle_streams`: `--streams` connections each send GET /costmatrix/stream and never read.

Per phase: /healthz p50, p99 and max (ms), failed requests, the service's peak RSS during the
phase, and what its `nettel_http_refused_total` and `nettel_sse_streams` say after it. Prints
one JSON document and writes it to `<output>/front_door.json`. Target: /healthz p99 <= 100 ms in
every phase.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import resource
import socket
import statistics
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import httpx

from benchmarks.environment import REPO_ROOT, describe_environment
from benchmarks.link_fill import write_snapshot
from benchmarks.model import model_description, serve_model_args
from benchmarks.proc import memory_of
from devtools.service_process import ServiceProcess, launch_service, wait_for_status

TARGET_P99_MS = 100.0
PHASES = ("baseline", "huge_headers", "slow_connections", "idle_streams")
MIB = 2**20
TOKEN = "benchmark-front-door"
#: An attack: the service's URL and an event that ends it -> what it saw.
Attack = Callable[[str, Any], dict[str, Any]]


def address(url: str) -> tuple[str, int]:
    host, port = url.removeprefix("http://").split(":")
    return host, int(port)


def huge_headers(size: int) -> Attack:
    def attack(url: str, stop: Any) -> dict[str, Any]:
        answers: dict[str, int] = {}
        piece = b"a" * MIB
        while not stop.is_set():
            with socket.create_connection(address(url), timeout=60) as sock:
                try:
                    sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: nettel\r\nX-Pad: ")
                    for _ in range(size // MIB):
                        sock.sendall(piece)
                    sock.sendall(b"\r\n\r\n")
                except OSError:
                    pass  # refused while still sending
                try:
                    status = sock.recv(64).split(b" ")[1].decode() or "closed"
                except (OSError, IndexError):
                    status = "reset"
            answers[status] = answers.get(status, 0) + 1
        return {"answers": answers}

    return attack


def held_connections(count: int, request: bytes) -> Attack:
    """`count` connections that each send `request` and then nothing; reopened when closed."""

    def attack(url: str, stop: Any) -> dict[str, Any]:
        sockets: list[socket.socket] = []
        opened = 0
        while not stop.is_set():
            alive = []
            for sock in sockets:
                try:
                    closed = sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
                except BlockingIOError:
                    closed = False
                except OSError:
                    closed = True
                if closed:
                    sock.close()
                else:
                    alive.append(sock)
            sockets = alive
            while len(sockets) < count and not stop.is_set():
                try:
                    sock = socket.create_connection(address(url), timeout=5)
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
                    sock.sendall(request)
                except OSError:
                    break
                sockets.append(sock)
                opened += 1
            stop.wait(1.0)
        held = len(sockets)
        for sock in sockets:
            sock.close()
        return {"connections_opened": opened, "held_at_end": held}

    return attack


def healthz(url: str) -> bool:
    """GET /healthz on a new connection (raw socket: the sampler's own cost stays small)."""
    try:
        with socket.create_connection(address(url), timeout=10) as sock:
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: nettel\r\nConnection: close\r\n\r\n")
            answer = b""
            while chunk := sock.recv(4096):
                answer += chunk
    except OSError:
        return False
    return answer.startswith(b"HTTP/1.1 200 ") and answer.endswith(b'{"status":"ok"}')


def sample_healthz(url: str, stop: threading.Event, pid: int) -> dict[str, Any]:
    latencies: list[float] = []
    failures = 0
    peak_rss = 0
    while not stop.is_set():
        started = time.perf_counter()
        ok = healthz(url)
        if ok:
            latencies.append((time.perf_counter() - started) * 1000)
        else:
            failures += 1
        peak_rss = max(peak_rss, memory_of(pid)["VmRSS"])
        stop.wait(0.02)
    latencies.sort()
    p99 = latencies[int(0.99 * (len(latencies) - 1))] if latencies else float("inf")
    return {
        "healthz_requests": len(latencies) + failures,
        "healthz_failed": failures,
        "healthz_p50_ms": round(statistics.median(latencies), 2) if latencies else None,
        "healthz_p99_ms": round(p99, 2),
        "healthz_max_ms": round(latencies[-1], 2) if latencies else None,
        "rss_peak_mib": round(peak_rss / MIB, 1),
    }


def front_door_metrics(url: str) -> dict[str, float]:
    found: dict[str, float] = {}
    for line in httpx.get(url + "/metrics", timeout=30).text.splitlines():
        if line.startswith(("nettel_http_refused_total{", "nettel_sse_streams{")):
            name, _, value = line.rpartition(" ")
            found[name] = float(value)
    return found


def phase(service: ServiceProcess, seconds: float, attack: Attack | None) -> dict[str, Any]:
    """Sample /healthz for `seconds` while `attack` runs in a process of its own (so that its
    Python work does not hold up the sampler)."""
    context = multiprocessing.get_context("fork")
    stop_attack = context.Event()
    outcomes: multiprocessing.Queue[dict[str, Any]] = context.Queue()
    attacker = None
    if attack is not None:
        attacker = context.Process(
            target=lambda: outcomes.put(attack(service.url, stop_attack)),  # type: ignore[arg-type]
            daemon=True,
        )
        attacker.start()
        time.sleep(min(5.0, seconds / 4))  # let the attack build up
    sampled = sample_healthz_for(service, seconds, threading.Event())
    stop_attack.set()
    outcome = outcomes.get(timeout=120) if attacker is not None else {}
    if attacker is not None:
        attacker.join(30)
    service.check_alive()
    return sampled | {"attack": outcome, "after": front_door_metrics(service.url)}


def sample_healthz_for(service: ServiceProcess, seconds: float, stop: threading.Event) -> Any:
    timer = threading.Timer(seconds, stop.set)
    timer.start()
    try:
        return sample_healthz(service.url, stop, service.pid)
    finally:
        timer.cancel()


def run(args: argparse.Namespace) -> dict[str, Any]:
    work, logs = args.output / "work" / "front-door", args.output / "logs"
    write_snapshot(work / "state", args.links, time.time())
    serve = [*serve_model_args(), "--state-dir", str(work / "state"), *args.serve_args]
    env = {"NETTEL_INGEST_TOKEN": TOKEN}
    service = launch_service("none", serve, logs / "front-door.log", env)
    stream = b"GET /costmatrix/stream HTTP/1.1\r\nHost: nettel\r\n\r\n"
    slow = b"GET /healthz HTTP/1.1\r\nHost: nettel\r\nX-Slow: a"
    attacks: dict[str, Attack | None] = {
        "baseline": None,
        "huge_headers": huge_headers(args.header_mib * MIB),
        "slow_connections": held_connections(args.slow, slow),
        "idle_streams": held_connections(args.streams, stream),
    }
    chosen = {name: attacks[name] for name in args.phases}
    try:
        wait_for_status(service, "/readyz", timeout=300)
        phases = {name: phase(service, args.seconds, attack) for name, attack in chosen.items()}
    finally:
        service.stop()
    met = all(
        p["healthz_p99_ms"] <= TARGET_P99_MS and not p["healthz_failed"] for p in phases.values()
    )
    return {
        "links": args.links,
        "seconds_per_phase": args.seconds,
        "header_mib": args.header_mib,
        "slow_connections": args.slow,
        "idle_streams": args.streams,
        "phases": phases,
        "target": f"/healthz p99 <= {TARGET_P99_MS:.0f} ms and no failure in every phase",
        "met": met,
        "other_serve_arguments": args.serve_args,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.front_door", allow_abbrev=False)
    parser.add_argument("--links", type=int, default=15_000)
    parser.add_argument("--seconds", type=float, default=40.0)
    parser.add_argument("--header-mib", type=int, default=128)
    parser.add_argument("--slow", type=int, default=3_000)
    parser.add_argument("--streams", type=int, default=2_000)
    parser.add_argument(
        "--phases", nargs="+", choices=PHASES, default=list(PHASES), help="the phases to run"
    )
    parser.add_argument("--output", type=Path, default=REPO_ROOT / "out" / "bench")
    parser.add_argument("serve_args", nargs="*", help="more `nettel serve` flags, after --")
    args = parser.parse_args(argv)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = args.slow + args.streams + 1024
    if soft < wanted:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(wanted, hard), hard))
    result = run(args)
    result["environment"] = describe_environment("none", model_description())
    args.output.mkdir(parents=True, exist_ok=True)
    (args.output / "front_door.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0 if result["met"] else 1


if __name__ == "__main__":
    sys.exit(main())
