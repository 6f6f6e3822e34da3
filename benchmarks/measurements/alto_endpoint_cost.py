"""ALTO endpoint cost service: requests/s and latency for 100 x 100 endpoints at 15,000 links."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx
import orjson

from benchmarks.context import SuiteContext
from benchmarks.report import MeasurementResult
from benchmarks.support.alto_mesh import METRIC, SITES, cric_rcsite, request_bodies, site_networks
from benchmarks.support.interference import other_cores, sample_cpu
from benchmarks.support.link_fill import write_snapshot
from benchmarks.support.load import (
    LUA_SCRIPT,
    latency_ms,
    require_wrk,
    transport_errors,
    wrk_command,
    wrk_summary,
)
from benchmarks.support.model import serve_model_args
from benchmarks.support.proc import cpu_seconds
from devtools.activemq import free_port
from devtools.service_process import ServiceProcess, launch_service, wait_for_status
from service.matrix.views import aggregate_sites
from service.publish.alto.request_bodies import parse_endpoint_cost
from service.publish.alto.view import METRICS, AltoView

NAME = "alto_endpoint_cost"
PARAMS_MEDIA = "application/alto-endpointcostparams+json"
REPLY_MEDIA = "application/alto-endpointcost+json"
#: wrk_report.lua counts statuses and prints the summary; this makes every request the POST of
#: the body in the file named by the first script argument.
REQUEST_LUA = f"""
function init(args)
  statuses = {{}}
  local file = io.open(args[1], "rb")
  wrk.body = file:read("*a")
  file:close()
  wrk.method = "POST"
  wrk.headers["Content-Type"] = "{PARAMS_MEDIA}"
end
"""
METHOD = (
    "A state snapshot of L full links (`benchmarks/support/link_fill.py`: a full mesh of hosts "
    "10.0.N.10) and a CRIC rcsite topology (20 sites; each host's /24 is a netroute of its site) "
    "are written, and `nettel serve --state-dir --topology --interval 3600` starts on them with "
    "no broker listening, so one matrix is served throughout. wrk (one thread, keep-alive "
    "connections) POSTs one `application/alto-endpointcostparams+json` request per scenario: "
    "`hosts`, E mesh hosts to as many mesh hosts (every value a measured host link; a host's "
    "pair with itself: its site's value); `sites`, the same sources to as many addresses inside "
    "the sites' networks that no link measures (every value from the site level, longest "
    f"prefix). Metric `{METRIC}`. Each reply is checked first (status, media type, one value "
    "per pair); a 2 s warm-up precedes the runs. Per snapshot, in the suite's process over the "
    "service's own /costmatrix records: the time to build what requests read (network map with "
    "prefix lookup, host- and site-level values of the metric) and the time of one request's "
    "lookups and JSON once built, without HTTP (mean of 20)."
)


def run(ctx: SuiteContext) -> MeasurementResult:
    require_wrk()
    sizes = ctx.sizes
    write_snapshot(ctx.work / "state", sizes.alto_links, time.time())
    networks = site_networks(sizes.alto_links)
    topology = ctx.work / "cric-rcsite.json"
    topology.write_bytes(orjson.dumps(cric_rcsite(networks)))
    bodies = request_bodies(sizes.alto_links, sizes.alto_endpoints)
    extra = [*serve_model_args(), "--state-dir", str(ctx.work / "state")]
    extra += ["--topology", str(topology), "--interval", "3600", "--snapshot-interval", "3600"]
    service = launch_service(  # nothing listens at --brokers: the served matrix stays the same
        f"127.0.0.1:{free_port()}", extra, ctx.logs / "alto-endpoint-cost.log"
    )
    try:
        wait_for_status(service, "/alto/networkmap", timeout=180)
        scenarios = {name: _scenario(ctx, service, name, body) for name, body in bodies.items()}
        snapshot = snapshot_costs(service.url, networks, bodies)
    finally:
        service.stop()
    return _result(ctx, scenarios, snapshot)


def _scenario(ctx: SuiteContext, service: ServiceProcess, name: str, body: bytes) -> dict[str, Any]:
    sizes = ctx.sizes
    body_file = ctx.work / f"{name}.json"
    body_file.write_bytes(body)
    reply_bytes = check_reply(service.url, body, sizes.alto_endpoints**2)
    measure(service, body_file, 2, 1)  # warm-up
    runs = []
    for connections in sizes.alto_connections:
        ctx.log(f"alto_endpoint_cost: {name}, {connections} connections")
        runs.append(measure(service, body_file, sizes.alto_seconds, connections))
    service.check_alive()
    return {"request_bytes": len(body), "reply_bytes": reply_bytes, "runs": runs}


def _result(
    ctx: SuiteContext, scenarios: dict[str, Any], snapshot: dict[str, float]
) -> MeasurementResult:
    sizes = ctx.sizes
    n = sizes.alto_endpoints
    result = MeasurementResult(NAME, "ALTO endpoint cost service under load", METHOD)
    result.add("links", "links in the served matrix", sizes.alto_links)
    result.add("sites", "sites", SITES)
    result.add("endpoints", "sources x destinations per request", f"{n} x {n}")
    result.add("seconds", "seconds per run", sizes.alto_seconds, "s")
    rows = []
    for name, scenario in scenarios.items():
        result.add(f"{name}_request_bytes", f"{name}: request", scenario["request_bytes"], "B")
        result.add(f"{name}_reply_bytes", f"{name}: reply", scenario["reply_bytes"], "B")
        for r in scenario["runs"]:
            c = r["connections"]
            result.add(
                f"{name}_rate_{c}", f"{name}, {c} connections: requests/s", r["rate"], "req/s"
            )
            result.add(
                f"{name}_p99_{c}", f"{name}, {c} connections: p99 latency", r["p99_ms"], "ms"
            )
            rows.append(
                [
                    name,
                    c,
                    f"{r['rate']:,.1f}",
                    f"{r['rate'] * n * n:,.0f}",
                    f"{r['p50_ms']:.1f}",
                    f"{r['p99_ms']:.1f}",
                    f"{r['max_ms']:.1f}",
                    r["errors"],
                    f"{r['service_cpu_ms']:.1f}",
                    f"{r['other_cores']:.2f}",
                ]
            )
    result.add("build_ms", "per snapshot: view built (in process)", snapshot["build_ms"], "ms")
    for name in scenarios:
        result.add(
            f"{name}_lookup_ms",
            f"per request, {name}: lookups and JSON (in process)",
            snapshot[f"{name}_lookup_ms"],
            "ms",
        )
    errors = sum(r["errors"] for s in scenarios.values() for r in s["runs"])
    result.target("errors", "errors over all runs", errors, "<=", 0)
    result.details["tables"] = [
        {
            "title": "Runs",
            "columns": [
                "scenario",
                "connections",
                "requests/s",
                "pairs/s",
                "p50 ms",
                "p99 ms",
                "max ms",
                "errors",
                "service CPU ms / request",
                "other cores busy",
            ],
            "rows": rows,
        }
    ]
    result.details["scenarios"] = scenarios
    return result


def check_reply(url: str, body: bytes, pairs: int) -> int:
    """POST `body` once; the reply's size, after checking it holds a value for every pair."""
    response = httpx.post(
        f"{url}/alto/endpointcost", content=body, headers={"Content-Type": PARAMS_MEDIA}
    )
    response.raise_for_status()
    if response.headers["content-type"] != REPLY_MEDIA:
        raise RuntimeError(f"reply media type {response.headers['content-type']!r}")
    values = sum(len(row) for row in response.json()["endpoint-cost-map"].values())
    if values != pairs:
        raise RuntimeError(f"{values} values in the reply, expected {pairs}")
    return len(response.content)


def measure(
    service: ServiceProcess, body_file: Path, seconds: float, connections: int
) -> dict[str, Any]:
    """wrk at `connections` for `seconds`: requests/s, latency percentiles, the service's CPU
    per request, and the cores other processes kept busy meanwhile (the machine may be shared)."""
    cpu_before, machine_before = cpu_seconds(service.pid), sample_cpu()
    command = wrk_command(seconds, connections, timeout="10s")
    script = LUA_SCRIPT.read_text() + REQUEST_LUA
    wrk = wrk_summary(command, script, f"{service.url}/alto/endpointcost", [str(body_file)])
    service_cpu, machine = cpu_seconds(service.pid) - cpu_before, sample_cpu()
    ok = wrk["statuses"].get("200", 0)
    wall = machine.wall - machine_before.wall
    return {
        "connections": connections,
        "requests": wrk["requests"],
        "errors": wrk["requests"] - ok + transport_errors(wrk),
        "rate": ok / (wrk["duration_us"] / 1e6),
        **latency_ms(wrk),
        "service_cpu_ms": service_cpu / max(wrk["requests"], 1) * 1000,
        "other_cores": max(0.0, other_cores(machine_before, machine) - service_cpu / wall),
    }


def snapshot_costs(
    url: str, networks: dict[str, list[str]], bodies: dict[str, bytes]
) -> dict[str, float]:
    """Milliseconds, in this process over the served records: building a snapshot's view, and
    one request's lookups (parsed request to reply document) once it is built."""
    links = httpx.get(f"{url}/costmatrix", timeout=60).json()["links"]
    site_links = aggregate_sites(links)
    metric = METRICS[METRIC]
    started = time.perf_counter()
    view = AltoView(links, site_links, version="bench", networks_of=lambda s: networks.get(s, ()))
    view.network_map_document()
    view.host_costs(metric)
    view.site_costs(metric)
    built = time.perf_counter()
    figures = {"build_ms": (built - started) * 1000}
    for name, body in bodies.items():
        query = parse_endpoint_cost(body, METRICS, None)
        began = time.perf_counter()
        for _ in range(20):
            orjson.dumps(view.endpoint_cost_document(metric, query.srcs, query.dsts))
        figures[f"{name}_lookup_ms"] = (time.perf_counter() - began) / 20 * 1000
    return figures
