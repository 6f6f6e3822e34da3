"""ALTO endpoint cost service: requests/s and latency for 100 x 100 endpoints at 15,000 links.

    python -m benchmarks.alto_endpoint_cost [--links 15000] [--endpoints 100] [--seconds 15]
                                            [--connections 1,4,16] [--output out/bench-alto]

A state snapshot of `--links` full links (`benchmarks.link_fill`: a full mesh of hosts
10.0.N.10) and a CRIC rcsite topology (20 sites; each host's /24 is a netroute of its site) are
written to the output dir, and `nettel serve --state-dir --topology --interval 3600` starts on
them with no broker listening, so one matrix is served throughout. wrk (one thread, keep-alive
connections) POSTs one `application/alto-endpointcostparams+json` request per scenario:

- `hosts`: `--endpoints` mesh hosts to as many mesh hosts: every value is a measured host link
  (a host's pair with itself: its site's value);
- `sites`: the same sources to as many addresses inside the sites' networks that no link
  measures: every value comes from the site level (longest prefix).

Each reply is checked first (status, media type, one value per pair). Per snapshot, in this
process over the service's own /costmatrix records: the time to build what requests read (network
map with prefix lookup, host- and site-level values of the metric) and the time of one request's
lookups once built, without HTTP.
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
import orjson

from benchmarks.corpus import sites_for
from benchmarks.environment import describe_environment
from benchmarks.interference import other_cores, sample_cpu
from benchmarks.link_fill import host_ip, write_snapshot
from benchmarks.load import (
    LUA_SCRIPT,
    latency_ms,
    transport_errors,
    wrk_command,
    wrk_parser,
    wrk_summary,
)
from benchmarks.model import model_description, serve_model_args
from benchmarks.proc import cpu_seconds
from devtools.activemq import free_port
from devtools.service_process import ServiceProcess, launch_service, wait_for_status
from service.matrix.views import aggregate_sites
from service.publish.alto.request_bodies import parse_endpoint_cost
from service.publish.alto.view import METRICS, AltoView

SITES = 20
METRIC = "priv:nettel-cost"
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


def site_networks(n_links: int) -> dict[str, list[str]]:
    """Site -> the /24 of each of its hosts (host i goes to site i mod SITES)."""
    networks: dict[str, list[str]] = {}
    for host in range(sites_for(n_links)):
        network = ipaddress.ip_network(f"{host_ip(host)}/24", strict=False)
        networks.setdefault(f"SITE-{host % SITES:02d}", []).append(str(network))
    return networks


def cric_rcsite(networks: dict[str, list[str]]) -> dict[str, Any]:
    """A CRIC rcsite export of the sites: no services, one netroute holding their networks."""
    return {
        site: {
            "name": site,
            "services": [],
            "netroutes": {f"{site}-LHCONE": {"networks": {"ipv4": cidrs, "ipv6": []}}},
        }
        for site, cidrs in networks.items()
    }


def request_bodies(n_links: int, endpoints: int) -> dict[str, bytes]:
    """Scenario -> the endpoint cost request it posts."""
    hosts = [host_ip(host) for host in range(sites_for(n_links))][:endpoints]
    unmeasured = [str(ipaddress.ip_address(ip) + 190) for ip in hosts]  # .200: same /24, no link
    cost_type = {"cost-mode": "numerical", "cost-metric": METRIC}
    return {
        name: orjson.dumps(
            {
                "cost-type": cost_type,
                "endpoints": {
                    "srcs": [f"ipv4:{ip}" for ip in hosts],
                    "dsts": [f"ipv4:{ip}" for ip in destinations],
                },
            }
        )
        for name, destinations in (("hosts", hosts), ("sites", unmeasured))
    }


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


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    output: Path = args.output
    output.mkdir(parents=True, exist_ok=True)
    write_snapshot(output / "state", args.links, time.time())
    networks = site_networks(args.links)
    topology = output / "cric-rcsite.json"
    topology.write_bytes(orjson.dumps(cric_rcsite(networks)))
    bodies = request_bodies(args.links, args.endpoints)
    extra = [*serve_model_args(), "--state-dir", str(output / "state"), "--topology", str(topology)]
    extra += ["--interval", "3600", "--snapshot-interval", "3600"]
    service = launch_service(  # nothing listens at --brokers: the served matrix stays the same
        f"127.0.0.1:{free_port()}", extra, output / "service.log"
    )
    try:
        report = _run(service, args, networks, bodies)
    finally:
        service.stop()
    (output / "report.json").write_text(json.dumps(report, indent=1))
    print(render(report))
    return 0


def _run(
    service: ServiceProcess,
    args: argparse.Namespace,
    networks: dict[str, list[str]],
    bodies: dict[str, bytes],
) -> dict[str, Any]:
    wait_for_status(service, "/alto/networkmap", timeout=180)
    pairs = args.endpoints * args.endpoints
    scenarios: dict[str, Any] = {}
    for name, body in bodies.items():
        body_file = args.output / f"{name}.json"
        body_file.write_bytes(body)
        reply_bytes = check_reply(service.url, body, pairs)
        measure(service, body_file, 2, 1)  # warm-up
        runs = [measure(service, body_file, args.seconds, n) for n in args.connections]
        scenarios[name] = {"request_bytes": len(body), "reply_bytes": reply_bytes, "runs": runs}
        service.check_alive()
    return {
        "environment": describe_environment("wrk", model_description()),
        "links": args.links,
        "endpoints": args.endpoints,
        "sites": SITES,
        "metric": METRIC,
        "seconds": args.seconds,
        "scenarios": scenarios,
        "snapshot": snapshot_costs(service.url, networks, bodies),
    }


def render(report: dict[str, Any]) -> str:
    n = report["endpoints"]
    lines = [
        f"{report['links']:,} links, {report['sites']} sites, {n} x {n} endpoints "
        f"({report['metric']}), {report['seconds']:g} s per run",
        "| scenario | connections | requests/s | pairs/s | p50 ms | p99 ms | max ms | errors "
        "| service CPU ms/request | other cores busy |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, scenario in report["scenarios"].items():
        for r in scenario["runs"]:
            lines.append(
                f"| {name} | {r['connections']} | {r['rate']:,.1f} | {r['rate'] * n * n:,.0f} "
                f"| {r['p50_ms']:.1f} | {r['p99_ms']:.1f} | {r['max_ms']:.1f} | {r['errors']} "
                f"| {r['service_cpu_ms']:.1f} | {r['other_cores']:.1f} |"
            )
    sizes = ", ".join(
        f"{name} {s['request_bytes']:,} B -> {s['reply_bytes']:,} B"
        for name, s in report["scenarios"].items()
    )
    snapshot = report["snapshot"]
    lines.append(f"request -> reply: {sizes}")
    lines.append(
        f"per snapshot (in process): view built in {snapshot['build_ms']:.0f} ms; one request's "
        f"lookups and JSON: hosts {snapshot['hosts_lookup_ms']:.1f} ms, "
        f"sites {snapshot['sites_lookup_ms']:.1f} ms"
    )
    return "\n".join(lines)


def _parser() -> argparse.ArgumentParser:
    parser = wrk_parser("python -m benchmarks.alto_endpoint_cost", 15.0, [1, 4, 16], "bench-alto")
    parser.add_argument("--links", type=int, default=15_000, help="links in the served matrix")
    parser.add_argument("--endpoints", type=int, default=100, help="sources and destinations")
    return parser


if __name__ == "__main__":
    sys.exit(main())
