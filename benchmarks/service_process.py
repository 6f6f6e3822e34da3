"""Prometheus scraping of benchmarked `nettel serve` processes."""

from __future__ import annotations

import httpx

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
