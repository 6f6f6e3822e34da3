"""How big each measurement is: the full suite, and `--quick` (tiny, for the smoke test)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Sizes:
    """Every size knob of the suite in one place."""

    ingest_messages: int
    ingest_links: int
    producer_threads: int
    cycle_links: tuple[int, ...]
    cycle_repeats: int
    memory_links: tuple[int, ...]
    api_links: int
    api_seconds: float
    api_connections: int
    freshness_links: int
    freshness_rate: float
    freshness_markers: int
    freshness_marker_interval: float
    start_links: int
    start_repeats: int
    flood_stages: tuple[int, ...]
    flood_max_links: int


FULL = Sizes(
    ingest_messages=200_000,
    ingest_links=15_000,
    producer_threads=3,
    cycle_links=(1_000, 15_000, 100_000),
    cycle_repeats=20,
    memory_links=(15_000, 100_000),
    api_links=15_000,
    api_seconds=10.0,
    api_connections=8,
    freshness_links=15_000,
    freshness_rate=5_000.0,
    freshness_markers=100,
    freshness_marker_interval=0.5,
    start_links=15_000,
    start_repeats=3,
    flood_stages=(100_000, 160_000),
    flood_max_links=150_000,
)

QUICK = Sizes(
    ingest_messages=2_000,
    ingest_links=200,
    producer_threads=2,
    cycle_links=(100, 400, 1_000),
    cycle_repeats=3,
    memory_links=(400, 1_000),
    api_links=400,
    api_seconds=1.0,
    api_connections=4,
    freshness_links=200,
    freshness_rate=200.0,
    freshness_markers=5,
    freshness_marker_interval=0.3,
    start_links=400,
    start_repeats=1,
    flood_stages=(1_000, 2_500),
    flood_max_links=2_000,
)
