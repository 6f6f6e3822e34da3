"""The Prometheus collectors over a real runtime: site-pair costs, state snapshots, build info."""

from __future__ import annotations

import math
import platform
import time
from collections.abc import Iterator
from importlib.metadata import version
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

import service.matrix.snapshot as snapshot
from service.config import Settings, load_settings
from service.errors import ConfigError
from service.matrix.views import aggregate_sites
from service.parse.histogram_scan import SCANNER_IMPLEMENTATION
from service.publish.metrics.links import LinkStateCollector
from service.publish.metrics.matrix import MatrixCollector
from service.runtime import Runtime, build_runtime
from tests.publish.support import host_link, make_matrix

LINKS = [  # site pairs by cost: CERN->RAL 0.6 (mean of 0.4 and 0.8), ps.b->CERN 0.5, ...
    host_link("192.0.2.1", "198.51.100.1", source_site="CERN", destination_site="RAL", cost=0.4),
    host_link("192.0.2.2", "198.51.100.2", source_site="CERN", destination_site="RAL", cost=0.8),
    host_link("192.0.2.9", "192.0.2.1", source_host="ps.b", destination_site="CERN", cost=0.5),
    host_link("198.51.100.1", "192.0.2.1", source_site="RAL", destination_site="CERN", cost=0.2),
    host_link("198.51.100.1", "192.0.2.9", source_site="RAL", destination_host="ps.b", cost=None),
]


def build(**settings: object) -> Runtime:
    return build_runtime(Settings(**{"model": "none", "publish_telemetry": False} | settings))


def link_costs(registry: CollectorRegistry) -> dict[tuple[str, str], float]:
    [family] = [f for f in registry.collect() if f.name == "nettel_link_cost"]
    for sample in family.samples:
        assert set(sample.labels) == {"source_site", "destination_site"}, sample
    return {
        (sample.labels["source_site"], sample.labels["destination_site"]): sample.value
        for sample in family.samples
    }


def test_link_cost_is_the_site_level_cost_of_the_costliest_site_pairs() -> None:
    runtime = build(metrics_top_site_pairs=2)
    registry = runtime.registry
    runtime.cycle.latest = make_matrix(LINKS)
    assert link_costs(registry) == {("CERN", "RAL"): 0.6, ("ps.b", "CERN"): 0.5}
    site_level = {(s["source"], s["destination"]): s["cost"] for s in aggregate_sites(LINKS)}
    assert all(site_level[pair] == cost for pair, cost in link_costs(registry).items())


def test_every_site_pair_with_a_cost_when_the_top_is_large_and_none_at_zero() -> None:
    everything = build(metrics_top_site_pairs=1000)
    registry = everything.registry
    everything.cycle.latest = make_matrix(LINKS)
    assert set(link_costs(registry)) == {("CERN", "RAL"), ("ps.b", "CERN"), ("RAL", "CERN")}
    nothing = build(metrics_top_site_pairs=0)
    registry = nothing.registry
    nothing.cycle.latest = make_matrix(LINKS)
    assert link_costs(registry) == {}


def test_no_link_cost_before_the_first_matrix() -> None:
    registry = build().registry
    assert "nettel_link_cost" not in {family.name for family in registry.collect()}


def test_sites_are_aggregated_once_per_matrix_in_the_cycle_not_per_scrape(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls = []

    def counting(links):
        calls.append(links)
        return aggregate_sites(links)

    monkeypatch.setattr(snapshot, "aggregate_sites", counting)
    runtime = build()
    registry = runtime.registry
    first = make_matrix(LINKS)
    for prepare in runtime.cycle.observers.prepare:  # as the cycle does once it serves it
        prepare(first)
    assert len(calls) == 1 and calls[0] is first.links
    runtime.cycle.latest = first
    for _ in range(3):
        assert link_costs(registry)[("CERN", "RAL")] == 0.6
    assert len(calls) == 1
    runtime.cycle.latest = make_matrix(LINKS[2:])
    assert ("CERN", "RAL") not in link_costs(registry)
    assert len(calls) == 2


@pytest.fixture
def persistent(tmp_path: Path) -> Iterator[Runtime]:
    runtime = build(state_dir=tmp_path / "state")
    yield runtime
    assert runtime.persistence is not None
    runtime.persistence.stop()


def test_state_snapshot_age_counts_from_start_until_the_first_snapshot(persistent) -> None:
    registry = persistent.registry
    persistent.started_at = time.time() - 100
    age = registry.get_sample_value("nettel_state_snapshot_age_seconds")
    assert age is not None and 100 <= age < 110
    assert math.isnan(registry.get_sample_value("nettel_state_snapshot_duration_seconds"))
    assert persistent.persistence is not None
    persistent.persistence.snapshot()
    assert registry.get_sample_value("nettel_state_snapshot_age_seconds") < 5
    duration = registry.get_sample_value("nettel_state_snapshot_duration_seconds")
    assert duration == persistent.persistence.last_duration and 0 < duration < 5


def test_no_state_snapshot_metrics_without_persistence() -> None:
    registry = build().registry
    assert registry.get_sample_value("nettel_state_snapshot_age_seconds") is None
    assert registry.get_sample_value("nettel_state_snapshot_duration_seconds") is None


def test_build_info() -> None:
    registry = build().registry
    labels = {
        "version": version("nettel"),
        "histogram_scanner": SCANNER_IMPLEMENTATION,
        "python": platform.python_version(),
    }
    assert registry.get_sample_value("nettel_build_info", labels) == 1.0


def test_a_registry_refuses_two_collectors_exporting_one_name() -> None:
    runtime = build()
    with pytest.raises(ValueError, match="nettel_links_tracked"):
        runtime.registry.register(LinkStateCollector(runtime.state, max_links=1))
    with pytest.raises(ValueError, match="nettel_link_cost"):  # described before any matrix
        runtime.registry.register(MatrixCollector(runtime.cycle.served, top=1))


def test_top_site_pairs_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    assert Settings().metrics_top_site_pairs == 10
    monkeypatch.setenv("NETTEL_METRICS_TOP_SITE_PAIRS", "25")
    assert load_settings().metrics_top_site_pairs == 25
    assert load_settings(metrics_top_site_pairs="3").metrics_top_site_pairs == 3  # the flag wins
    with pytest.raises(
        ConfigError, match="--metrics-top-site-pairs / NETTEL_METRICS_TOP_SITE_PAIRS"
    ):
        load_settings(metrics_top_site_pairs="-1")
