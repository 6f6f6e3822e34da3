"""Link flood: what a running service's memory and views cost per link, at 100k and at the cap."""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence
from typing import Any

import httpx
import orjson

from benchmarks.context import SuiteContext
from benchmarks.report import MeasurementResult
from benchmarks.support.broker import connect, measurement_broker
from benchmarks.support.model import serve_model_args
from benchmarks.support.proc import memory_of
from benchmarks.support.service_process import labelled_samples, parse_metrics
from devtools.service_process import ServiceProcess, launch_service, wait_for_status
from service.config import LOSS_TOPIC

NAME = "link_flood"
#: A link's memory in the running service, with its matrix records, JSON body and views.
RSS_PER_LINK_LIMIT = 8 * 1024
METHOD = (
    "A private ActiveMQ and `nettel serve --subscription plain --max-links M --interval I` (the "
    "shipped model when there is one; I is 10 s, 0.5 s at quick sizes) start; then, per stage, one "
    "loss message for each new made-up link is published through the broker (non-persistent, 400 "
    "destinations per fake source address, so no producer passes --new-links-per-minute) until that"
    " many links were offered in all. Once the service tracked (or refused as `link_limit`) all of "
    "them and two matrix cycles ran, VmRSS of the service is read, and its growth over the RSS "
    "before the flood divided by the links tracked is the memory a running service uses per link. "
    "Then GET /metrics, /costmatrix, /costmatrix?level=site, /costmatrix?source=<one address>, "
    "/alto/costmap/priv:nettel-cost and /healthz are timed (median of 5, one GET at quick sizes; "
    "each on a new connection). The `memory` measurement's 1 KiB per link is the link state alone "
    "(32-minute buffers and index); a running service also holds, per link, the matrix's record (a "
    "dict of ~20 values and a nested delay dict), its JSON in the served body and the gzip body, "
    "the previous snapshot while the next is built, the site view, the endpoint index for "
    "`?source=`, ALTO's host costs, the analysis' numpy copies of the state during a cycle and the "
    "allocator's free lists; that is the difference."
)


def run(ctx: SuiteContext) -> MeasurementResult:
    sizes = ctx.sizes
    ctx.log(f"link_flood: stages {sizes.flood_stages}, --max-links {sizes.flood_max_links:,}")
    flood = run_flood(ctx, sizes.flood_stages, sizes.flood_max_links, sizes.flood_interval)
    result = MeasurementResult(NAME, "Link flood: memory and views per link", METHOD)
    result.add("rss_before", "RSS before the flood", flood["rss_before_flood_mib"], "MiB")
    for stage in flood["stages"]:
        key = f"{stage['links_offered'] // 1000}k"
        label = f"{stage['links_offered']:,} offered"
        result.add(f"links_{key}", f"{label}: links tracked", stage["links_tracked"])
        result.add(f"refused_{key}", f"{label}: refused (link_limit)", stage["refused_link_limit"])
        result.add(f"rss_{key}", f"{label}: RSS", stage["rss_mib"], "MiB")
        result.add(
            f"rss_per_link_{key}",
            f"{label}: RSS growth per link tracked",
            stage["rss_growth_per_link_bytes"],
            "B",
        )
        for view, path in VIEWS.items():
            result.add(f"{view}_{key}", f"{label}: GET {path}", stage["seconds"][view], "s")
    at_cap = flood["stages"][-1]
    result.target(
        "metrics_at_cap",
        f"GET /metrics at {at_cap['links_tracked']:,} links (the cap)",
        at_cap["seconds"]["metrics"],
        "<=",
        SCRAPE_TIMEOUT_SECONDS,
        "s",
    )
    result.target(
        "rss_per_link",
        "RSS growth per link at the cap",
        at_cap["rss_growth_per_link_bytes"],
        "<=",
        RSS_PER_LINK_LIMIT,
        "B",
    )
    result.target(
        "cap_holds",
        "links tracked beyond --max-links",
        max(0, at_cap["links_tracked"] - flood["max_links"]),
        "<=",
        0,
        "",
    )
    result.details["flood"] = flood
    return result


MIB = 2**20
#: Destinations per fake source address (below --new-links-per-minute's default 1,000).
DESTINATIONS = 400
#: Prometheus' default scrape timeout: /metrics must answer well within it at the cap.
SCRAPE_TIMEOUT_SECONDS = 10.0
REJECTED = "nettel_rejected_total"
#: GETs of each view per stage (median taken), and the wait for the service to settle after
#: /readyz before the RSS baseline; at quick sizes (a smoke test) one GET and half a second.
VIEW_REPEATS = 5
QUICK_VIEW_REPEATS = 1
BASELINE_WAIT_SECONDS = 2.0
QUICK_BASELINE_WAIT_SECONDS = 0.5
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


def timed_get(url: str, repeats: int) -> float:
    """Median seconds of `repeats` GETs of `url`, each on a new connection (the body read
    whole)."""
    times = []
    for _ in range(repeats):
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


def stage(service: ServiceProcess, offered: int, baseline: int, repeats: int) -> dict[str, Any]:
    seen = metrics(service.url)
    rss = memory_of(service.pid)["VmRSS"]
    links = int(seen["nettel_links_tracked"])
    times = {key: round(timed_get(service.url + path, repeats), 4) for key, path in VIEWS.items()}
    return {
        "links_offered": offered,
        "links_tracked": links,
        "refused_link_limit": int(
            labelled_samples(service.url, REJECTED).get(f"{REJECTED}_link_limit", 0)
        ),
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


def run_flood(
    ctx: SuiteContext, stages: Sequence[int], max_links: int, interval: float
) -> dict[str, Any]:
    """Flood a fresh service stage by stage (see METHOD); the figures of each stage."""
    logs = ctx.logs
    results: list[dict[str, Any]] = []
    with measurement_broker(ctx, "link-flood") as broker:
        args = [*serve_model_args(), "--subscription", "plain", "--max-links", str(max_links)]
        args += ["--interval", str(interval)]
        service = launch_service(broker.brokers, args, logs / "link-flood.log")
        try:
            wait_for_status(service, "/readyz", timeout=120)
            time.sleep(QUICK_BASELINE_WAIT_SECONDS if ctx.quick else BASELINE_WAIT_SECONDS)
            baseline = memory_of(service.pid)["VmRSS"]
            offered = 0
            for target in stages:
                publish_seconds = publish_links(broker.brokers, offered, target)
                offered = target
                settle(service, offered, max_links, timeout=900)
                repeats = QUICK_VIEW_REPEATS if ctx.quick else VIEW_REPEATS
                result = stage(service, offered, baseline, repeats)
                result["publish_seconds"] = round(publish_seconds, 1)
                results.append(result)
                ctx.log(f"link_flood: {offered:,} offered, {result['links_tracked']:,} tracked")
        finally:
            service.stop()
    return {
        "max_links": max_links,
        "rss_before_flood_mib": round(baseline / MIB, 1),
        "stages": results,
    }
