"""Front door: /healthz latency while a client sends huge headers, holds thousands of half-sent
requests, or opens thousands of server-sent event streams it never reads."""

from __future__ import annotations

import multiprocessing
import resource
import socket
import statistics
import threading
import time
from collections.abc import Callable
from typing import Any

from benchmarks.context import SuiteContext
from benchmarks.report import MeasurementResult
from benchmarks.support.broker import address
from benchmarks.support.link_fill import write_snapshot
from benchmarks.support.model import serve_model_args
from benchmarks.support.proc import memory_of
from benchmarks.support.service_process import labelled_samples
from devtools.service_process import ServiceProcess, launch_service, wait_for_status

NAME = "front_door"
TARGET_P99_MS = 100.0
MIB = 2**20
TOKEN = "benchmark-front-door"
#: An attack: the service's URL and an event that ends it -> what it saw.
Attack = Callable[[str, Any], dict[str, Any]]
METHOD = (
    "`nettel serve --brokers none` (pScheduler over HTTP only; the shipped model when there is "
    "one) starts from a `--state-dir` snapshot of L links with full windows "
    "(`benchmarks/support/link_fill.py`), so /costmatrix/stream has a real matrix to send. Then, "
    "phase by phase, for the stated seconds each, /healthz is requested every 20 ms on a new "
    "connection (loopback) and its latency recorded, while the attack runs in a process of its "
    "own: `baseline` nothing else; `huge_headers` one client after another sends a request whose "
    "one header is H MiB (1 MiB writes) and reads the answer; `slow_connections` S connections "
    "each send a request line and half a header, then nothing, those the service closes being "
    "opened again (a slowloris keeping its count); `idle_streams` N connections each send GET "
    "/costmatrix/stream and never read. Per phase: /healthz p50, p99 and max, failed requests, "
    "the service's peak RSS during the phase, and what its `nettel_http_refused_total` and "
    "`nettel_sse_streams` say after it."
)
PHASE_TITLES = {
    "baseline": "baseline",
    "huge_headers": "huge headers",
    "slow_connections": "slow connections",
    "idle_streams": "idle streams",
}


def _address(url: str) -> tuple[str, int]:
    return address(url.removeprefix("http://"))


def huge_headers(size: int) -> Attack:
    def attack(url: str, stop: Any) -> dict[str, Any]:
        answers: dict[str, int] = {}
        piece = b"a" * MIB
        while not stop.is_set():
            with socket.create_connection(_address(url), timeout=60) as sock:
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
                    sock = socket.create_connection(_address(url), timeout=5)
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
        with socket.create_connection(_address(url), timeout=10) as sock:
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
    """Refusals by reason and open streams by endpoint (`nettel_sse_streams_costmatrix_stream`)."""
    return labelled_samples(url, "nettel_http_refused_total") | labelled_samples(
        url, "nettel_sse_streams"
    )


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


def run(ctx: SuiteContext) -> MeasurementResult:
    sizes = ctx.sizes
    _raise_open_files(sizes.front_door_slow + sizes.front_door_streams + 1024)
    state = ctx.work / "front-door-state"
    write_snapshot(state, sizes.front_door_links, time.time())
    serve = [*serve_model_args(), "--state-dir", str(state)]
    env = {"NETTEL_INGEST_TOKEN": TOKEN}
    service = launch_service("none", serve, ctx.logs / "front-door.log", env)
    stream = b"GET /costmatrix/stream HTTP/1.1\r\nHost: nettel\r\n\r\n"
    slow = b"GET /healthz HTTP/1.1\r\nHost: nettel\r\nX-Slow: a"
    attacks: dict[str, Attack | None] = {
        "baseline": None,
        "huge_headers": huge_headers(sizes.front_door_header_mib * MIB),
        "slow_connections": held_connections(sizes.front_door_slow, slow),
        "idle_streams": held_connections(sizes.front_door_streams, stream),
    }
    try:
        wait_for_status(service, "/readyz", timeout=300)
        phases = {}
        for name, attack in attacks.items():
            ctx.log(f"front_door: {name}")
            phases[name] = phase(service, sizes.front_door_seconds, attack)
    finally:
        service.stop()
    return _result(ctx, phases)


def _result(ctx: SuiteContext, phases: dict[str, dict[str, Any]]) -> MeasurementResult:
    sizes = ctx.sizes
    result = MeasurementResult(NAME, "Front door: /healthz under HTTP attacks", METHOD)
    result.add("links", "links in the served matrix", sizes.front_door_links)
    result.add("seconds", "seconds per phase", sizes.front_door_seconds, "s")
    result.add("header_mib", "huge headers: header size", sizes.front_door_header_mib, "MiB")
    result.add("slow", "slow connections held", sizes.front_door_slow)
    result.add("streams", "idle streams opened", sizes.front_door_streams)
    for name, p in phases.items():
        title = PHASE_TITLES[name]
        result.add(f"{name}_p50", f"{title}: /healthz p50", p["healthz_p50_ms"], "ms")
        result.add(f"{name}_p99", f"{title}: /healthz p99", p["healthz_p99_ms"], "ms")
        result.add(f"{name}_max", f"{title}: /healthz max", p["healthz_max_ms"], "ms")
        result.add(f"{name}_failed", f"{title}: /healthz failed", p["healthz_failed"])
        result.add(f"{name}_rss", f"{title}: peak RSS", p["rss_peak_mib"], "MiB")
    worst = max(phases.values(), key=lambda p: p["healthz_p99_ms"])
    result.target(
        "healthz_p99",
        "/healthz p99, worst phase",
        worst["healthz_p99_ms"],
        "<=",
        TARGET_P99_MS,
        "ms",
    )
    failed = sum(p["healthz_failed"] for p in phases.values())
    result.target("healthz_failed", "/healthz failures, all phases", failed, "<=", 0)
    rows = [
        [
            PHASE_TITLES[name],
            p["healthz_requests"],
            p["healthz_p50_ms"],
            p["healthz_p99_ms"],
            p["healthz_max_ms"],
            p["healthz_failed"],
            p["rss_peak_mib"],
            _counters(p["after"]),
        ]
        for name, p in phases.items()
    ]
    result.details["tables"] = [
        {
            "title": "Phases",
            "columns": [
                "phase",
                "requests",
                "p50 ms",
                "p99 ms",
                "max ms",
                "failed",
                "peak RSS MiB",
                "refused so far, streams open (after the phase)",
            ],
            "rows": rows,
        }
    ]
    result.details["phases"] = phases
    return result


def _counters(after: dict[str, float]) -> str:
    """The refusals by reason and the open streams by endpoint that are not 0."""
    names = {"nettel_http_refused_total_": "refused ", "nettel_sse_streams_": "streams "}
    shown = []
    for name, value in sorted(after.items()):
        prefix = next(p for p in names if name.startswith(p))
        if value:
            shown.append(f"{names[prefix]}{name.removeprefix(prefix)} {value:,.0f}")
    return ", ".join(shown) or "none"


def _raise_open_files(wanted: int) -> None:
    """The suite holds the attacks' sockets: raise its open-file limit to fit them."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < wanted:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(wanted, hard), hard))
