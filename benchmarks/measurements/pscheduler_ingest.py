"""pScheduler results through PUT /ingest/pscheduler: sustained rate, latency, queued memory."""

from __future__ import annotations

import time
import tracemalloc
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson

from benchmarks.context import SuiteContext
from benchmarks.report import MeasurementResult
from benchmarks.support.corpus import mesh_for, simulated_pool
from benchmarks.support.interference import other_cores, sample_cpu
from benchmarks.support.load import (
    LUA_SCRIPT,
    latency_ms,
    require_wrk,
    transport_errors,
    wrk_command,
    wrk_summary,
)
from benchmarks.support.proc import cpu_seconds
from benchmarks.support.service_process import labelled_samples
from devtools.service_process import ServiceProcess, launch_service, wait_for_status
from service.ingest.frame_batcher import FrameBatcher
from service.ingest.pipeline import PSCHEDULER_DESTINATION, PostedBy

NAME = "pscheduler_ingest"
TOKEN = "bench-ingest-token"
TARGET_RATE = 5000.0
TARGET_P99_MS = 50.0
METHOD = (
    "A `nettel serve` (shipped model, default interval and freshness, ingest token set, "
    "`--brokers none`: all data comes over HTTP) takes run records from wrk: keep-alive "
    "connections, each PUTting the next body as soon as the last was answered. Bodies are "
    "latencybg runs over L links of the training simulator's mesh (its histograms: 600 packets, "
    "~100 buckets), posted within the last 30 minutes, every one with its own run id. wrk has "
    "one address (127.0.0.1), so the per-client rate limit is raised to 1,000,000 runs/s for the "
    "run (the limiter's own cost is in the figures, its refusals are not). After a 3 s warm-up "
    "(every link gets its row), for each connection count: 202s per second and wrk's latency "
    "percentiles while wrk runs; then the time until the service applied everything it took "
    "(`nettel_pscheduler_runs_total` grown by the 202 count), so applied/s counts only runs that "
    "reached the state. Once the intake queue is full, runs are refused with 503 (backpressure). "
    "Memory per queued result: tracemalloc around `FrameBatcher.offer` of the same bodies in the "
    "suite's process (a waiting run's body and its place in the queue)."
)


def run(ctx: SuiteContext) -> MeasurementResult:
    require_wrk()
    sizes = ctx.sizes
    templates = run_templates(sizes.pscheduler_links, time.time(), ctx.cache)
    templates_file = ctx.work / "run-templates.jsonl"
    templates_file.write_bytes(b"\n".join(templates) + b"\n")
    extra = ["--interval", "10", "--freshness", "1", "--ingest-client-rate", "1000000"]
    extra += ["--ingest-client-burst", "1000000"]
    env = {"NETTEL_INGEST_TOKEN": TOKEN}
    service = launch_service("none", extra, ctx.logs / "pscheduler-serve.log", env=env)
    try:
        wait_for_status(service, "/healthz", timeout=60)
        measure(service, templates_file, 3, 16)  # warm-up: every link gets its row
        runs = []
        for connections in sizes.pscheduler_connections:
            ctx.log(f"pscheduler_ingest: {connections} connections")
            runs.append(measure(service, templates_file, sizes.pscheduler_seconds, connections))
    finally:
        service.stop()
    return _result(ctx, runs, queued_memory(templates))


def _result(
    ctx: SuiteContext, runs: list[dict[str, Any]], memory: dict[str, float]
) -> MeasurementResult:
    result = MeasurementResult(NAME, "pScheduler ingest over HTTP", METHOD)
    result.add("links", "links posted", ctx.sizes.pscheduler_links)
    result.add("seconds", "seconds per connection count", ctx.sizes.pscheduler_seconds, "s")
    for r in runs:
        n = r["connections"]
        result.add(f"applied_{n}", f"{n} connections: applied runs/s", r["applied_per_s"], "runs/s")
        result.add(f"p50_{n}", f"{n} connections: p50 latency", r["p50_ms"], "ms")
        result.add(f"p99_{n}", f"{n} connections: p99 latency", r["p99_ms"], "ms")
        result.add(f"refused_{n}", f"{n} connections: answered other than 202", r["other_statuses"])
        result.add(
            f"cpu_{n}", f"{n} connections: service CPU per run", r["service_cpu_us_per_run"], "µs"
        )
    result.add("queued_bytes", "memory per queued result", memory["bytes_per_queued_result"], "B")
    result.add("body_bytes", "mean body", memory["mean_body_bytes"], "B")
    slowest = min(runs, key=lambda r: r["applied_per_s"])
    result.target(
        "applied",
        "applied runs/s, slowest connection count",
        slowest["applied_per_s"],
        ">=",
        TARGET_RATE,
        "runs/s",
    )
    worst = max(runs, key=lambda r: r["p99_ms"])
    result.target(
        "p99", "p99 latency, worst connection count", worst["p99_ms"], "<=", TARGET_P99_MS, "ms"
    )
    result.details["tables"] = [
        {
            "title": "Connection counts",
            "columns": [
                "connections",
                "202 / s",
                "applied / s",
                "p50 ms",
                "p99 ms",
                "max ms",
                "non-202",
                "drain s",
                "service CPU µs / run",
                "other processes (cores)",
            ],
            "rows": [
                [
                    r["connections"],
                    f"{r['accepted_per_s']:,.0f}",
                    f"{r['applied_per_s']:,.0f}",
                    f"{r['p50_ms']:.1f}",
                    f"{r['p99_ms']:.1f}",
                    f"{r['max_ms']:.1f}",
                    _refusals(r),
                    f"{r['drain_seconds']:.2f}",
                    f"{r['service_cpu_us_per_run']:.0f}",
                    f"{r['other_cores']:.2f}",
                ]
                for r in runs
            ],
        }
    ]
    result.details["runs"] = runs
    return result


#: wrk_report.lua counts statuses and prints the summary; this adds the PUT of run bodies:
#: templates (one JSON body a line) from the first script argument, each request's RUNID
#: replaced by a number of its own.
REQUEST_LUA = """
function init(args)
  statuses = {}
  templates = {}
  for line in io.lines(args[1]) do table.insert(templates, line) end
  sent = 0
  wrk.method = "PUT"
  wrk.headers["Authorization"] = "Bearer " .. args[2]
  wrk.headers["Content-Type"] = "application/json"
end

function request()
  sent = sent + 1
  local body = string.gsub(templates[sent % #templates + 1], "RUNID", "r" .. sent)
  return wrk.format(nil, nil, nil, body)
end
"""


def run_templates(n_links: int, now: float, cache: Path | None) -> list[bytes]:
    """One latencybg run record per link (`RUNID` where each request puts its own run id)."""
    mesh = mesh_for(n_links)
    (minute,) = simulated_pool(n_links, 1, cache)
    templates = []
    for link in range(n_links):
        source = mesh.host_names[mesh.source[link]]
        destination = mesh.host_names[mesh.destination[link]]
        histogram = orjson.loads(minute.histograms[link] or b"{}")
        lost = round(minute.loss[link] * 600)
        end = now - 60 - (link % 28) * 60  # within the window for the next few minutes
        templates.append(orjson.dumps(_run(source, destination, histogram, lost, end)))
    return templates


def _run(source: str, destination: str, histogram: dict[str, int], lost: int, end: float) -> Any:
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime(end))
    href = f"https://{source}/pscheduler/tasks/bench/runs/RUNID"
    return {
        "id": "RUNID",
        "schedule": {"start": stamp, "duration": "PT24H"},
        "test": {
            "type": "latencybg",
            "spec": {"schema": 1, "source": source, "dest": destination, "ip-version": 4},
        },
        "tool": {"name": "powstream", "version": "5.0.0"},
        "participants": [source],
        "run": {"start-time": stamp, "end-time": stamp, "href": href, "state": "finished"},
        "result": {
            "schema": 1,
            "succeeded": True,
            "packets-sent": 600,
            "packets-received": 600 - lost,
            "packets-lost": lost,
            "histogram-latency": histogram,
            "histogram-ttl": {"252": 600 - lost},
        },
        "reference": None,
    }


def measure(
    service: ServiceProcess, templates_file: Path, seconds: float, connections: int
) -> dict[str, float]:
    """wrk at `connections` for `seconds`, then until the service applied what it took."""
    before, cpu, machine = _applied(service.url), cpu_seconds(service.pid), sample_cpu()
    wrk = _wrk(service.url, templates_file, seconds, connections)
    accepted = wrk["statuses"].get("202", 0)
    drained_at = _wait_applied(service.url, before + accepted, time.monotonic())
    service_cpu = cpu_seconds(service.pid) - cpu
    others = other_cores(machine, sample_cpu()) - service_cpu / (wall_of(wrk) + drained_at)
    wall = wall_of(wrk)
    return {
        "connections": connections,
        "requests": wrk["requests"],
        "accepted": accepted,
        "other_statuses": wrk["requests"] - accepted,
        "statuses": dict(wrk["statuses"]),
        "transport_errors": transport_errors(wrk),
        "accepted_per_s": accepted / wall,
        "applied_per_s": accepted / (wall + drained_at),
        "drain_seconds": drained_at,
        **latency_ms(wrk),
        "service_cpu_us_per_run": service_cpu / max(accepted, 1) * 1e6,
        "other_cores": max(0.0, others),
    }


def wall_of(wrk: dict[str, Any]) -> float:
    return float(wrk["duration_us"]) / 1e6


def _wrk(url: str, templates_file: Path, seconds: float, connections: int) -> dict[str, Any]:
    script = LUA_SCRIPT.read_text() + REQUEST_LUA
    target = f"{url}{PSCHEDULER_DESTINATION}"
    return wrk_summary(
        wrk_command(seconds, connections), script, target, [str(templates_file), TOKEN]
    )


def _applied(url: str) -> float:
    """Runs the service counted so far, whatever their outcome."""
    return sum(labelled_samples(url, "nettel_pscheduler_runs_total").values())


def _wait_applied(url: str, target: float, since: float, timeout: float = 120.0) -> float:
    """Seconds from `since` until the service counted `target` runs."""
    while _applied(url) < target:
        if time.monotonic() - since > timeout:
            raise RuntimeError(f"the service did not apply the runs within {timeout:.0f} s")
        time.sleep(0.05)
    return time.monotonic() - since


def queued_memory(templates: Sequence[bytes], count: int = 20_000) -> dict[str, float]:
    """Bytes per result waiting in the ingest queue (bodies as the route reads them)."""
    batcher = FrameBatcher(lambda frames: frames, lambda frames: None, max_queued=count + 1)
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    for i in range(count):  # each body a bytes object of its own, as the route reads it
        body = bytes(bytearray(templates[i % len(templates)]))
        batcher.offer([(PSCHEDULER_DESTINATION, body, PostedBy("127.0.0.1"))], 1 << 40)
    per_result = (tracemalloc.get_traced_memory()[0] - before) / count
    tracemalloc.stop()
    mean_body = batcher.queued_bytes() / batcher.queued()
    return {"mean_body_bytes": mean_body, "bytes_per_queued_result": per_result}


def _refusals(run: dict[str, Any]) -> str:
    """Answers other than 202 by status, and transport errors (e.g. `503: 1,852`)."""
    parts = [f"{code}: {n:,}" for code, n in sorted(run["statuses"].items()) if code != "202"]
    if run["transport_errors"]:
        parts.append(f"errors: {run['transport_errors']:,}")
    return ", ".join(parts) or "0"
