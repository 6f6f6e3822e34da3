"""A flood of distinct fake links through a real broker: the memory a running service uses per
link, and how long its per-request views take, at 100,000 links and at the link cap.

    python -m benchmarks.link_flood [--stages 100000 160000] [--max-links 150000] [-- FLAGS]

(In the suite: `python -m benchmarks --only link_flood`.)

A private ActiveMQ and `nettel serve --subscription plain` (the shipped model when there is one,
default settings otherwise) start; then, per stage, loss messages for new links are published
(loopback, one message a link, `sources` fake source addresses x as many destinations, so
that no producer passes --new-links-per-minute) until that many links were offered in all. Once
the service has taken them in (links tracked and link_limit refusals add up) and a matrix cycle
ran since, the figures are read: VmRSS of the service (and its growth per link over the RSS
before the flood), and the time of GET /metrics, /costmatrix, /costmatrix?level=site,
/costmatrix?source=<one address>, /alto/costmap/priv:nettel-cost and /healthz (median of 5, each
on a new connection). A stage past the cap shows the refusals (`link_limit`) and that RSS stops
growing. Prints one JSON document and writes it to `<output>/link_flood.json`.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
import orjson

from benchmarks.broker import connect, private_broker
from benchmarks.environment import REPO_ROOT, describe_environment
from benchmarks.model import model_description, serve_model_args
from benchmarks.proc import memory_of
from benchmarks.service_process import parse_metrics
from devtools.service_process import ServiceProcess, launch_service, wait_for_status
from service.config import LOSS_TOPIC

MIB = 2**20
#: Destinations per fake source address (below --new-links-per-minute's default 1,000).
DESTINATIONS = 400
#: Prometheus' default scrape timeout: /metrics must answer well within it at the cap.
SCRAPE_TIMEOUT_SECONDS = 10.0
#: What is timed: a figure's key -> the request's path.
VIEWS = {
    "metrics": "/metrics",
    "costmatrix": "/costmatrix",
    "site_view": "/costmatrix?level=site",
    "source_filter": "/costmatrix?source=10.0.0.1",
    "alto_costmap": "/alto/costmap/priv:nettel-cost",
    "healthz": "/healthz",
}


def fake_link(number: int) -> tuple[str, str]:
    """Source 10.x.y.z (one per DESTINATIONS links) -> destination 172.16.a.b."""
    source, destination = divmod(number, DESTINATIONS)
    return f"10.{source >> 16 & 255}.{source >> 8 & 255}.{source & 255}", (
        f"172.16.{destination >> 8}.{destination & 255}"
    )


def publish_links(brokers: str, first: int, last: int) -> float:
    """One loss message for each fake link numbered first..last-1; returns seconds taken."""
    connection = connect(brokers)
    started = time.monotonic()
    minute = int(time.time() // 60) * 60 - 60
    for number in range(first, last):
        source, destination = fake_link(number)
        body = orjson.dumps(
            {
                "meta": {"source": source, "destination": destination, "tool_name": "powstream"},
                "datapoints": {str(minute): 0.0},
            }
        )
        connection.send(LOSS_TOPIC, body, headers={"persistent": "false"})
    connection.disconnect()
    return time.monotonic() - started


def timed_get(url: str) -> float:
    """Median seconds of 5 GETs of `url`, each on a new connection (the body read whole)."""
    times = []
    for _ in range(5):
        started = time.perf_counter()
        response = httpx.get(url, timeout=120)
        response.raise_for_status()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def metrics(url: str) -> dict[str, float]:
    return parse_metrics(httpx.get(url + "/metrics", timeout=120).text)


def settle(service: ServiceProcess, offered: int, max_links: int, timeout: float) -> None:
    """Wait until every offered link is tracked or refused, then for a cycle after it."""
    expected = min(offered, max_links)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        service.check_alive()
        seen = metrics(service.url)
        refused = seen.get("nettel_rejected_total", 0.0)
        if seen.get("nettel_links_tracked", 0) >= expected and (
            offered <= max_links or refused >= offered - max_links
        ):
            break
        time.sleep(1.0)
    else:
        raise RuntimeError(f"the service did not take {offered:,} links in {timeout:.0f} s")
    count = metrics(service.url).get("nettel_cycle_duration_seconds_count", 0.0)
    while metrics(service.url).get("nettel_cycle_duration_seconds_count", 0.0) < count + 2:
        time.sleep(0.5)


def stage(service: ServiceProcess, offered: int, baseline: int, max_links: int) -> dict[str, Any]:
    seen = metrics(service.url)
    rss = memory_of(service.pid)["VmRSS"]
    links = int(seen["nettel_links_tracked"])
    times = {key: round(timed_get(service.url + path), 4) for key, path in VIEWS.items()}
    return {
        "links_offered": offered,
        "links_tracked": links,
        "refused_link_limit": int(_labelled(service.url, "link_limit")),
        "rss_mib": round(rss / MIB, 1),
        "rss_growth_per_link_bytes": round((rss - baseline) / max(links, 1)),
        "rss_per_link_bytes": round(rss / max(links, 1)),
        "seconds": times,
        "metrics_within_scrape_timeout": times["metrics"] < SCRAPE_TIMEOUT_SECONDS,
        "cycle_seconds_mean": round(
            seen["nettel_cycle_duration_seconds_sum"] / seen["nettel_cycle_duration_seconds_count"],
            3,
        ),
    }


def _labelled(url: str, reason: str) -> float:
    text = httpx.get(url + "/metrics", timeout=120).text
    prefix = f'nettel_rejected_total{{reason="{reason}"}} '
    for line in text.splitlines():
        if line.startswith(prefix):
            return float(line.split()[-1])
    return 0.0


def run_flood(
    stages: Sequence[int], max_links: int, extra: list[str], output: Path
) -> dict[str, Any]:
    """Flood a fresh service stage by stage (see the module); the figures of each stage."""
    work, logs = output / "work" / "link-flood", output / "logs"
    results: list[dict[str, Any]] = []
    with private_broker(work, "link-flood", logs) as broker:
        args = [*serve_model_args(), "--subscription", "plain", "--max-links", str(max_links)]
        service = launch_service(broker.brokers, args + extra, logs / "link-flood.log")
        try:
            wait_for_status(service, "/readyz", timeout=120)
            time.sleep(2.0)
            baseline = memory_of(service.pid)["VmRSS"]
            offered = 0
            for target in stages:
                publish_seconds = publish_links(broker.brokers, offered, target)
                offered = target
                settle(service, offered, max_links, timeout=900)
                result = stage(service, offered, baseline, max_links)
                result["publish_seconds"] = round(publish_seconds, 1)
                results.append(result)
                print(json.dumps(result), file=sys.stderr)
        finally:
            service.stop()
    return {
        "max_links": max_links,
        "rss_before_flood_mib": round(baseline / MIB, 1),
        "stages": results,
        "other_serve_arguments": extra,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.link_flood", allow_abbrev=False)
    parser.add_argument("--stages", type=int, nargs="+", default=[100_000, 160_000])
    parser.add_argument("--max-links", type=int, default=150_000)
    parser.add_argument("--output", type=Path, default=REPO_ROOT / "out" / "bench")
    parser.add_argument("serve_args", nargs="*", help="more `nettel serve` flags, after --")
    args = parser.parse_args(argv)
    result = run_flood(args.stages, args.max_links, args.serve_args, args.output)
    result["environment"] = describe_environment("none", model_description())
    args.output.mkdir(parents=True, exist_ok=True)
    (args.output / "link_flood.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0 if all(s["metrics_within_scrape_timeout"] for s in result["stages"]) else 1


if __name__ == "__main__":
    sys.exit(main())
