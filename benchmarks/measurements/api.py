"""API: GET /costmatrix on a service holding 15,000 links, under concurrent load."""

from __future__ import annotations

import time
from urllib.parse import urlencode

import httpx

from benchmarks.context import SuiteContext
from benchmarks.report import MeasurementResult
from benchmarks.support.broker import measurement_broker
from benchmarks.support.link_fill import link_endpoints, write_snapshot
from benchmarks.support.load import LoadResult, run_load
from benchmarks.support.model import serve_model_args
from devtools.service_process import ServiceProcess, launch_service, wait_for_status

NAME = "api"
METHOD = (
    "A state snapshot of L full links (`encode_state` + `SnapshotStore`) is written to a temp "
    "dir and `python -m service serve --state-dir DIR --interval 3600 --snapshot-interval 3600` "
    "starts on it against a private broker, so the matrix stays the same (one ETag) during the "
    "load. After a first GET (checks the link count, takes the ETag), a separate load-generator "
    "process (wrk, 1 thread, C keep-alive connections, per-status counting in "
    "`benchmarks/support/wrk_report.lua` - except for the two full-matrix scenarios, where that "
    "hook "
    "would copy every body into Lua and cap wrk below the server, so wrk's own count of >= 400 "
    "responses and the bytes per response (>= the body size) stand for it; or the Python "
    "fallback) runs each scenario for the stated "
    "time: the full matrix as JSON, the full matrix with `Accept-Encoding: gzip`, the full matrix "
    "with `If-None-Match: <ETag>` (expects 304) and a one-pair query "
    "`?source=IP&destination=IP`. Errors = transport errors + responses with another status."
)


def scenarios(
    url: str, etag: str, source: str, destination: str
) -> dict[str, tuple[str, dict[str, str], int]]:
    pair = urlencode({"source": source, "destination": destination})
    return {
        "full": (f"{url}/costmatrix", {}, 200),
        "full_gzip": (f"{url}/costmatrix", {"Accept-Encoding": "gzip"}, 200),
        "not_modified": (f"{url}/costmatrix", {"If-None-Match": etag}, 304),
        "one_pair": (f"{url}/costmatrix?{pair}", {}, 200),
    }


def run(ctx: SuiteContext) -> MeasurementResult:
    sizes = ctx.sizes
    result = MeasurementResult(NAME, "API: GET /costmatrix under load", METHOD)
    result.add("links", "links in the served matrix", sizes.api_links)
    result.add("connections", "concurrent connections", sizes.api_connections)
    result.add("seconds", "seconds per scenario", sizes.api_seconds, "s")
    result.add("generator", "load generator", ctx.load_generator)
    state_dir = ctx.work / "api-state"
    write_snapshot(state_dir, sizes.api_links, time.time())
    with measurement_broker(ctx, "api") as broker:
        args = [*serve_model_args(), "--state-dir", str(state_dir), "--interval", "3600"]
        args += ["--snapshot-interval", "3600", "--client-id", "bench-api"]
        service = launch_service(broker.brokers, args, ctx.logs / "api-service.log")
        try:
            loads = _measure(ctx, result, service)
        finally:
            service.stop()
    _figures(result, loads)
    return result


def _measure(
    ctx: SuiteContext, result: MeasurementResult, service: ServiceProcess
) -> dict[str, LoadResult]:
    wait_for_status(service, "/costmatrix", 200, timeout=120)
    response = httpx.get(f"{service.url}/costmatrix", timeout=30)
    links = response.json()["links"]
    if len(links) != ctx.sizes.api_links:
        raise RuntimeError(f"service serves {len(links)} links, expected {ctx.sizes.api_links}")
    large_bodies = {
        "full": result.add("body_bytes", "full JSON body", len(response.content), "B"),
        "full_gzip": result.add(
            "gzip_bytes", "gzip body (as sent)", _gzip_wire_size(service.url), "B"
        ),
    }
    source, destination = link_endpoints(ctx.sizes.api_links)[ctx.sizes.api_links // 2]
    loads = {}
    for name, (url, headers, status) in scenarios(
        service.url, response.headers["etag"], source, destination
    ).items():
        ctx.log(f"api: {name}")
        loads[name] = run_load(
            ctx.load_generator,
            url,
            headers,
            ctx.sizes.api_seconds,
            ctx.sizes.api_connections,
            status,
            large_body=large_bodies.get(name),
        )
        service.check_alive()
    return loads


def _gzip_wire_size(url: str) -> int:
    """Bytes of the gzip-encoded body as sent (httpx would decode it, so read it raw)."""
    with httpx.stream("GET", f"{url}/costmatrix", headers={"Accept-Encoding": "gzip"}) as response:
        return sum(len(chunk) for chunk in response.iter_raw())


LABELS = {
    "full": "full matrix (JSON)",
    "full_gzip": "full matrix (gzip)",
    "not_modified": "If-None-Match (304)",
    "one_pair": "one-pair query",
}


def _figures(result: MeasurementResult, loads: dict[str, LoadResult]) -> None:
    for name, load in loads.items():
        label = LABELS[name]
        result.add(f"{name}_rate", f"{label}: requests/s", load.rate, "req/s")
        result.add(f"{name}_p50", f"{label}: p50 latency", load.p50_ms, "ms")
        result.add(f"{name}_p99", f"{label}: p99 latency", load.p99_ms, "ms")
        result.add(f"{name}_errors", f"{label}: errors", load.errors)
    full, pair, not_modified = loads["full"], loads["one_pair"], loads["not_modified"]
    share = not_modified.expected_share
    result.add("not_modified_share", "If-None-Match: share answered 304", share)
    ratio = not_modified.rate / full.rate if full.rate else None
    result.add("not_modified_vs_full", "304 rate / full JSON rate (same run)", ratio, "x")
    result.target("full_rate", "full matrix requests/s", full.rate, ">=", 300, "req/s")
    result.target("full_p99", "full matrix p99 latency", full.p99_ms, "<=", 100, "ms")
    result.target("one_pair_rate", "one-pair requests/s", pair.rate, ">=", 2000, "req/s")
    result.target("one_pair_p99", "one-pair p99 latency", pair.p99_ms, "<=", 10, "ms")
    result.target("not_modified_share", "If-None-Match answered 304 (share)", share, ">=", 1.0)
    errors = float(sum(load.errors for load in loads.values()))
    result.target("errors", "errors over all scenarios", errors, "<=", 0)
    result.details["loads"] = {
        name: vars(load) | {"rate": load.rate} for name, load in loads.items()
    }
    result.details["tables"] = [_scenario_table(loads)]


def _scenario_table(loads: dict[str, LoadResult]) -> dict[str, object]:
    columns = ["scenario", "requests", "req/s", "p50 ms", "p99 ms", "max ms", "errors", "statuses"]
    rows = [
        [
            LABELS[name],
            f"{load.requests:,}",
            f"{load.rate:,.0f}",
            f"{load.p50_ms:.2f}",
            f"{load.p99_ms:.2f}",
            f"{load.max_ms:.1f}",
            load.errors,
            _statuses(load),
        ]
        for name, load in loads.items()
    ]
    return {"title": "Scenarios", "columns": columns, "rows": rows}


def _statuses(load: LoadResult) -> str:
    return ", ".join(f"{code}: {n:,}" for code, n in sorted(load.statuses.items()))
