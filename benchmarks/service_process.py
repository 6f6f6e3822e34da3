"""Prometheus scraping and /proc readings of benchmarked `nettel serve` processes."""

from __future__ import annotations

import os
from pathlib import Path

import httpx

from service.devtools.service_process import ServiceProcess

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


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


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds a live process has used so far (0.0 once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def children_of(pid: int) -> list[int]:
    """Live child processes of `pid` (e.g. the service's parser processes)."""
    children = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text().rpartition(")")[2].split()
            except OSError:
                continue
            if int(stat[1]) == pid:
                children.append(int(entry.name))
    return children
