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
    #: The flooded service's --interval (s): each stage waits for two cycles after the flood.
    flood_interval: float
    alto_links: int
    alto_endpoints: int
    alto_seconds: float
    alto_connections: tuple[int, ...]
    alto_update_minutes: int
    backfill_links: int
    front_door_links: int
    front_door_seconds: float
    front_door_header_mib: int
    front_door_slow: int
    front_door_streams: int
    ha_kills: int
    ha_links: int
    ha_threads: int
    pscheduler_links: int
    pscheduler_seconds: float
    pscheduler_connections: tuple[int, ...]
    rucio_sites: int
    calibration_sites: int
    spark_sites: int
    spark_days: float
    spark_scales: tuple[int, ...]
    spark_points_per_group: int | None
    spark_archive_sites: int
    spark_archive_days: float
    topology_sites: int
    topology_prefixes: int
    topology_links: int
    topology_repeats: int
    warm_links: tuple[int, ...]
    #: Fault sets (seeds) of the alarm replays; hours of the fault-free replay (24: a UTC day,
    #: and AAAS's day of faults after it); fault-free minutes before the other seeds' faults.
    alarm_seeds: int
    alarm_calm_hours: float
    alarm_warmup_minutes: int
    #: Sites of the demo mesh the result alarms (throughput tests, traceroutes) are replayed on.
    result_alarm_sites: int


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
    flood_interval=10.0,
    alto_links=15_000,
    alto_endpoints=100,
    alto_seconds=15.0,
    alto_connections=(1, 4, 16),
    alto_update_minutes=4,
    backfill_links=15_000,
    front_door_links=15_000,
    front_door_seconds=40.0,
    front_door_header_mib=128,
    front_door_slow=3_000,
    front_door_streams=2_000,
    ha_kills=5,
    ha_links=120,
    ha_threads=4,
    pscheduler_links=2_500,
    pscheduler_seconds=20.0,
    pscheduler_connections=(16, 64, 256),
    rucio_sites=120,
    calibration_sites=8,
    spark_sites=8,
    spark_days=0.5,
    spark_scales=(1, 2, 4),
    spark_points_per_group=20_000,
    spark_archive_sites=100,
    spark_archive_days=0.1,
    topology_sites=400,
    topology_prefixes=10_000,
    topology_links=15_000,
    topology_repeats=5,
    warm_links=(15_000, 100_000),
    alarm_seeds=5,
    alarm_calm_hours=24.0,
    alarm_warmup_minutes=120,
    result_alarm_sites=20,
)

QUICK = Sizes(
    ingest_messages=1_000,
    ingest_links=100,
    producer_threads=2,
    cycle_links=(100, 400, 1_000),
    cycle_repeats=3,
    memory_links=(1_000,),
    api_links=400,
    api_seconds=1.0,
    api_connections=4,
    freshness_links=100,
    freshness_rate=200.0,
    freshness_markers=5,
    freshness_marker_interval=0.2,
    start_links=400,
    start_repeats=1,
    flood_stages=(1_000, 2_500),
    flood_max_links=2_000,
    flood_interval=0.5,
    alto_links=1_600,
    alto_endpoints=10,
    alto_seconds=1.0,
    alto_connections=(1, 4),
    alto_update_minutes=2,
    backfill_links=60,
    front_door_links=400,
    front_door_seconds=2.0,
    front_door_header_mib=4,
    front_door_slow=50,
    front_door_streams=300,
    ha_kills=1,
    ha_links=20,
    ha_threads=2,
    pscheduler_links=200,
    pscheduler_seconds=2.0,
    pscheduler_connections=(16,),
    rucio_sites=8,
    calibration_sites=4,
    spark_sites=4,
    spark_days=0.02,
    spark_scales=(1, 2),
    spark_points_per_group=2_000,
    spark_archive_sites=10,
    spark_archive_days=0.02,
    topology_sites=40,
    topology_prefixes=400,
    topology_links=1_000,
    topology_repeats=2,
    warm_links=(60,),
    alarm_seeds=2,
    alarm_calm_hours=1.0,
    alarm_warmup_minutes=60,
    result_alarm_sites=8,
)
