"""Prometheus scraping and /proc readings of benchmarked `nettel serve` processes."""

from __future__ import annotations

from pathlib import Path

import httpx

from service.devtools.service_process import ServiceProcess


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


def memory_of(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM (peak RSS) of a process, in bytes."""
    values = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            values[key] = int(rest.split()[0]) * 1024
    return values


def maps_mention(pid: int, word: str) -> bool:
    """Whether any file mapped into the process has `word` in its path (e.g. tensorflow)."""
    try:
        return word in Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return False
