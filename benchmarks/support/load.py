"""HTTP load from a separate process: wrk (with wrk_report.lua beside this module), or a Python
fallback.

Both report requests/s, latency percentiles, responses by status and errors (transport errors
plus any response whose status is not the expected one). For multi-megabyte bodies wrk runs
without its per-response Lua hook (which copies each body into Lua and would measure wrk, not the
server): it then counts responses with status >= 400 itself, and every response counts as the
expected status only if the bytes received per response cover the expected body.
"""

from __future__ import annotations

import http.client
import json
import multiprocessing
import re
import shutil
import subprocess
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import numpy as np

from benchmarks.context import Unavailable

LUA_SCRIPT = Path(__file__).resolve().parent / "wrk_report.lua"
PYTHON_PROCESSES = 2


@dataclass(frozen=True)
class LoadResult:
    requests: int
    seconds: float
    p50_ms: float
    p99_ms: float
    max_ms: float
    statuses: dict[str, int]
    transport_errors: int
    body_bytes: int
    expected_status: int
    details: dict[str, object] = field(default_factory=dict)

    @property
    def rate(self) -> float:
        return self.requests / self.seconds if self.seconds > 0 else 0.0

    @property
    def errors(self) -> int:
        unexpected = sum(
            n for code, n in self.statuses.items() if int(code) != self.expected_status
        )
        return self.transport_errors + unexpected

    @property
    def expected_share(self) -> float:
        return (
            self.statuses.get(str(self.expected_status), 0) / self.requests
            if self.requests
            else 0.0
        )


def run_load(
    generator: str,
    url: str,
    headers: Mapping[str, str],
    seconds: float,
    connections: int,
    expected_status: int = 200,
    large_body: int | None = None,
) -> LoadResult:
    """`large_body`: the expected body size when it is too big for wrk's per-response hook."""
    if generator == "wrk":
        return run_wrk(url, headers, seconds, connections, expected_status, large_body)
    return run_python_load(url, headers, seconds, connections, expected_status)


def run_wrk(
    url: str,
    headers: Mapping[str, str],
    seconds: float,
    connections: int,
    expected_status: int,
    large_body: int | None = None,
) -> LoadResult:
    command = wrk_command(max(1, seconds), connections)
    for name, value in headers.items():
        command += ["-H", f"{name}: {value}"]
    data = wrk_summary(command, _lua_script(count_statuses=large_body is None), url)
    statuses = data["statuses"]
    if large_body is not None:
        statuses = _statuses_from_summary(data, expected_status, large_body)
    latency = latency_ms(data)
    return LoadResult(
        requests=data["requests"],
        seconds=data["duration_us"] / 1e6,
        p50_ms=latency["p50_ms"],
        p99_ms=latency["p99_ms"],
        max_ms=latency["max_ms"],
        statuses=statuses,
        transport_errors=transport_errors(data),
        body_bytes=data["bytes"],
        expected_status=expected_status,
        details={"command": " ".join(command), "wrk": data, "per_response_hook": not large_body},
    )


def wrk_command(seconds: float, connections: int, timeout: str = "5s") -> list[str]:
    """wrk with one thread and `connections` keep-alive connections for `seconds` (rounded)."""
    return ["wrk", "-t1", f"-c{connections}", f"-d{round(seconds)}s", "--timeout", timeout]


def wrk_summary(
    command: Sequence[str], script: str, url: str, script_args: Sequence[str] = ()
) -> dict[str, Any]:
    """Run `command` (from `wrk_command`) on `url` with the Lua `script` (wrk_report.lua's text,
    perhaps with more Lua added), passing it `script_args`; the BENCH_JSON summary it prints."""
    with tempfile.TemporaryDirectory() as folder:
        script_file = Path(folder) / LUA_SCRIPT.name
        script_file.write_text(script)
        arguments = ["-s", str(script_file), url, *(["--", *script_args] if script_args else [])]
        completed = subprocess.run(
            [*command, *arguments], capture_output=True, text=True, check=True
        )
    line = next(x for x in completed.stdout.splitlines() if x.startswith("BENCH_JSON "))
    summary: dict[str, Any] = json.loads(line.removeprefix("BENCH_JSON "))
    return summary


def latency_ms(summary: Mapping[str, Any]) -> dict[str, float]:
    """p50_ms, p99_ms and max_ms of a wrk summary's latencies."""
    latency = summary["latency_us"]
    return {f"{name}_ms": latency[name] / 1000 for name in ("p50", "p99", "max")}


def transport_errors(summary: Mapping[str, Any]) -> int:
    """Connect, read, write and timeout errors of a wrk summary (not non-2xx/3xx responses)."""
    return sum(v for k, v in summary["errors"].items() if k != "status")


def require_wrk() -> None:
    """Measurements that drive wrk with a Lua script of their own have no Python fallback."""
    if shutil.which("wrk") is None:
        raise Unavailable("wrk is not installed (`apt-get install wrk`)")


def _lua_script(count_statuses: bool) -> str:
    text = LUA_SCRIPT.read_text()
    if count_statuses:
        return text
    return re.sub(r"-- BEGIN response.*?-- END response\n", "", text, flags=re.DOTALL)


def _statuses_from_summary(data: dict, expected_status: int, body_size: int) -> dict[str, int]:
    """Without the hook: wrk's own count of >= 400 responses, and the bytes per response."""
    failed = data["errors"]["status"]
    answered = data["requests"] - failed
    full = answered and data["bytes"] / data["requests"] >= body_size
    counts = {str(expected_status) if full else "short body": answered}
    return counts | ({">= 400": failed} if failed else {})


def run_python_load(
    url: str, headers: Mapping[str, str], seconds: float, connections: int, expected_status: int
) -> LoadResult:
    """Keep-alive http.client loops: `connections` threads over PYTHON_PROCESSES processes."""
    per_process = [
        connections // PYTHON_PROCESSES + (i < connections % PYTHON_PROCESSES)
        for i in range(PYTHON_PROCESSES)
    ]
    context = multiprocessing.get_context("spawn")
    with context.Pool(PYTHON_PROCESSES) as pool:
        parts = pool.starmap(
            _python_worker, [(url, dict(headers), seconds, n) for n in per_process if n]
        )
    latencies = np.concatenate([np.asarray(p["latencies"]) for p in parts]) * 1000
    statuses: Counter[str] = Counter()
    for part in parts:
        statuses.update(part["statuses"])
    return LoadResult(
        requests=int(sum(statuses.values())),
        seconds=max(p["seconds"] for p in parts),
        p50_ms=float(np.percentile(latencies, 50)) if len(latencies) else float("nan"),
        p99_ms=float(np.percentile(latencies, 99)) if len(latencies) else float("nan"),
        max_ms=float(latencies.max()) if len(latencies) else float("nan"),
        statuses=dict(statuses),
        transport_errors=sum(p["errors"] for p in parts),
        body_bytes=sum(p["bytes"] for p in parts),
        expected_status=expected_status,
        details={"generator": f"python ({PYTHON_PROCESSES} processes, http.client keep-alive)"},
    )


def _python_worker(url: str, headers: dict[str, str], seconds: float, threads: int) -> dict:
    parts = urlsplit(url)
    target = parts.path + (f"?{parts.query}" if parts.query else "")
    results: list[dict] = []
    deadline = time.monotonic() + seconds
    workers = [
        threading.Thread(
            target=_python_loop,
            args=(parts.hostname, parts.port, target, headers, deadline, results),
        )
        for _ in range(threads)
    ]
    started = time.monotonic()
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    statuses: Counter[str] = Counter()
    for r in results:
        statuses.update(r["statuses"])
    return {
        "latencies": [x for r in results for x in r["latencies"]],
        "statuses": dict(statuses),
        "errors": sum(r["errors"] for r in results),
        "bytes": sum(r["bytes"] for r in results),
        "seconds": time.monotonic() - started,
    }


def _python_loop(
    host: str, port: int, target: str, headers: dict[str, str], deadline: float, results: list[dict]
) -> None:
    latencies: list[float] = []
    statuses: Counter[str] = Counter()
    errors = received = 0
    connection = http.client.HTTPConnection(host, port, timeout=5)
    while time.monotonic() < deadline:
        started = time.perf_counter()
        try:
            connection.request("GET", target, headers=headers)
            response = connection.getresponse()
            received += len(response.read())
        except (OSError, http.client.HTTPException):
            errors += 1
            connection.close()
            connection = http.client.HTTPConnection(host, port, timeout=5)
            continue
        latencies.append(time.perf_counter() - started)
        statuses[str(response.status)] += 1
    connection.close()
    results.append(
        {"latencies": latencies, "statuses": statuses, "errors": errors, "bytes": received}
    )
