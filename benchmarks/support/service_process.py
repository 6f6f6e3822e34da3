"""Reading benchmarked `nettel serve` processes: Prometheus metrics, the served matrix."""

from __future__ import annotations

import httpx
from prometheus_client.parser import text_string_to_metric_families

from devtools.service_process import ServiceProcess


def parse_metrics(text: str) -> dict[str, float]:
    """Prometheus text -> {metric name: value summed over its label sets}."""
    totals: dict[str, float] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        name_part, _, value = line.rpartition(" ")
        name = name_part.split("{", 1)[0]
        try:
            totals[name] = totals.get(name, 0.0) + float(value)
        except ValueError:
            continue
    return totals


def scrape(client: httpx.Client, service: ServiceProcess) -> dict[str, float]:
    return parse_metrics(client.get(service.url + "/metrics").text)


def links_with_full_window(url: str) -> int:
    """Links of a service's /costmatrix whose window holds all 32 minutes."""
    matrix = httpx.get(f"{url}/costmatrix", timeout=120).json()
    return sum(1 for link in matrix["links"] if link["samples"] == 32)


def labelled_samples(url: str, prefix: str) -> dict[str, float]:
    """The samples of a service's /metrics whose name starts with `prefix`: name with its labels'
    values (`nettel_rejected_total_link_limit`), without `_created` samples."""
    return labelled_values(httpx.get(f"{url}/metrics", timeout=120).text, prefix)


def labelled_values(text: str, prefix: str) -> dict[str, float]:
    """`labelled_samples` of a Prometheus text."""
    return {
        "_".join([sample.name, *sample.labels.values()]): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name.startswith(prefix) and not sample.name.endswith("_created")
    }
