"""Link flood: what a running service's memory and views cost per link, at 100k and at the cap."""

from __future__ import annotations

from typing import Any

from benchmarks.context import SuiteContext
from benchmarks.link_flood import SCRAPE_TIMEOUT_SECONDS, VIEWS, run_flood
from benchmarks.report import MeasurementResult

NAME = "link_flood"
#: A link's memory in the running service, with its matrix records, JSON body and views.
RSS_PER_LINK_LIMIT = 8 * 1024
METHOD = (
    "A private ActiveMQ and `nettel serve --subscription plain --max-links M` (the shipped model "
    "when there is one) start; then, per stage, one loss message for each new made-up link is "
    "published through the broker (non-persistent, 400 destinations per fake source address, so "
    "no producer passes --new-links-per-minute) until that many links were offered in all. Once "
    "the service tracked (or refused as `link_limit`) all of them and two matrix cycles ran, "
    "VmRSS of the service is read, and its growth over the RSS before the flood divided by the "
    "links tracked is the memory a running service uses per link. Then GET /metrics, "
    "/costmatrix, /costmatrix?level=site, /costmatrix?source=<one address>, "
    "/alto/costmap/priv:nettel-cost and /healthz are timed (median of 5, each on a new "
    "connection). The `memory` measurement's 1 KiB per link is the link state alone (32-minute "
    "buffers and index); a running service also holds, per link, the matrix's record (a dict of "
    "~20 values and a nested delay dict), its JSON in the served body and the gzip body, the "
    "previous snapshot while the next is built, the site view, the endpoint index for "
    "`?source=`, ALTO's host costs, the analysis' numpy copies of the state during a cycle and "
    "the allocator's free lists; that is the difference."
)


def run(ctx: SuiteContext) -> MeasurementResult:
    sizes = ctx.sizes
    ctx.log(f"link_flood: stages {sizes.flood_stages}, --max-links {sizes.flood_max_links:,}")
    return flood_result(run_flood(sizes.flood_stages, sizes.flood_max_links, [], ctx.output))


def flood_result(flood: dict[str, Any]) -> MeasurementResult:
    """The figures and targets of a `run_flood` result (also of `benchmarks.link_flood`'s
    JSON output)."""
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
