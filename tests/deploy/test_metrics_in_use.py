"""Every metric the alert rules, the Grafana dashboard and the README name is really exported.

Checked twice, never by reading nettel's source: (a) on the /metrics of a running service (fed
real messages over the in-memory broker, persistence and the shipped model on), together with the
labels the queries group by, match on or show, and the values of `nettel_link_cost` against
/costmatrix?level=site; (b) with `get_sample_value` on the registry `build_runtime` makes, over
a runtime fed the same messages.
"""

from __future__ import annotations

import json
import math
import platform
from collections.abc import Iterator
from importlib.metadata import version
from pathlib import Path

import httpx
import pytest
from prometheus_client import CollectorRegistry, Metric
from prometheus_client.parser import text_string_to_metric_families

from devtools.waiting import wait_for
from service.alarms.records import AlarmKind
from service.config import LOSS_TOPIC, Settings
from service.errors import RejectReason
from service.ingest.archive_backfill import DatapointOutcome, LinkOutcome
from service.ingest.archive_client import CutReason
from service.matrix.views import aggregate_sites
from service.parse.histogram_scan import SCANNER_IMPLEMENTATION
from service.parse.pscheduler import RunOutcome
from service.persistence.snapshot_checks import ContentCheck
from service.persistence.warm_start import WarmOutcome
from service.publish.http_guard import HttpRefusal
from service.runtime import Runtime, build_runtime
from tests.deploy.site_mesh import LINKS, UNSITED, host_of, mesh_messages, write_topology
from tests.deploy.support import (
    alert_rules,
    family_for,
    labels_in,
    load_dashboard,
    named_metrics,
    nettel_metric_names,
    query_panels,
    target_labels,
    template_labels,
)
from tests.integration.wire import get_json

TOP_SITE_PAIRS = 4
#: Table columns Grafana makes itself, not labels.
TABLE_FIELDS = {"Time", "Value", "__name__"}


def missing_metrics(families: list[Metric]) -> dict[str, set[str]]:
    """Named metrics no family exposes (with the right type), with where they are named."""
    return {
        name: places
        for name, places in sorted(named_metrics().items())
        if family_for(name, families) is None
    }


# ---- (a) a running nettel serve ---------------------------------------------------------------


def every_mesh_link_predicted(url: str) -> bool:
    matrix = get_json(f"{url}/costmatrix") or {"links": []}
    predicted = {
        (link["source"], link["destination"])
        for link in matrix["links"]
        if link["utilisation"] is not None
    }
    return {(source, destination) for source, destination, _ in LINKS} <= predicted


def scrape_between_reads_of_one_matrix(url: str) -> tuple[list[dict], list[Metric]] | None:
    """Site-level links and a /metrics scrape of the same matrix, once a snapshot is on disk."""
    before = get_json(f"{url}/costmatrix", level="site")
    families = list(text_string_to_metric_families(httpx.get(f"{url}/metrics").text))
    after = get_json(f"{url}/costmatrix", level="site")
    if not before or not after or before["generated_at"] != after["generated_at"]:
        return None
    if math.isnan(sample_values(families, "nettel_state_snapshot_duration_seconds")[()]):
        return None
    return before["links"], families


def sample_values(families: list[Metric], name: str) -> dict[tuple[tuple[str, str], ...], float]:
    """Sorted label items -> value, of every sample named `name`."""
    return {
        tuple(sorted(sample.labels.items())): sample.value
        for family in families
        for sample in family.samples
        if sample.name == name
    }


def unknown_labels(families: list[Metric]) -> list[str]:
    """Labels a query groups by, matches on or shows that neither Prometheus' target labels nor
    the samples of the metrics it selects carry."""
    target = target_labels()

    def carried(names: set[str]) -> set[str]:
        found = [family_for(name, families) for name in names]
        return {label for f in found if f for sample in f.samples for label in sample.labels}

    problems = []
    for rule in alert_rules():
        shown = set().union(*(template_labels(text) for text in rule["annotations"].values()))
        used = labels_in(rule["expr"]) | shown
        unknown = used - target - carried(nettel_metric_names(rule["expr"]))
        problems += [f"alert {rule['alert']}: {label}" for label in sorted(unknown)]
    for panel in query_panels(load_dashboard()):
        names = {name for t in panel["targets"] for name in nettel_metric_names(t["expr"])}
        used = set()
        for target_query in panel["targets"]:
            used |= labels_in(target_query["expr"])
            used |= template_labels(target_query.get("legendFormat", ""))
        for transformation in panel.get("transformations", []):
            options = transformation["options"]
            for key in ("excludeByName", "indexByName", "renameByName"):
                used |= set(options.get(key, {})) - TABLE_FIELDS
        unknown = used - target - carried(names)
        problems += [f"panel {panel['title']!r}: {label}" for label in sorted(unknown)]
    return problems


@pytest.mark.slow
def test_a_running_service_exports_what_deploy_and_readme_name(
    memory_broker, memory_service, tmp_path: Path
) -> None:
    service = memory_service(
        memory_broker,
        *("--interval", "30", "--subscription", "plain"),
        *("--topology", str(write_topology(tmp_path)), "--publish-telemetry", "false"),
        *("--state-dir", str(tmp_path / "state"), "--snapshot-interval", "1"),
        *("--metrics-top-site-pairs", str(TOP_SITE_PAIRS)),
    )
    wait_for(lambda: get_json(f"{service.url}/readyz"), what="ready (subscribed)")
    publisher = service.publisher()
    for topic, body in mesh_messages():
        publisher.send(topic, body)
    publisher.close()
    wait_for(lambda: every_mesh_link_predicted(service.url), what="every mesh link predicted")
    site_links, families = wait_for(
        lambda: scrape_between_reads_of_one_matrix(service.url),
        what="a scrape between two reads of one matrix, after a state snapshot",
    )

    assert not missing_metrics(families), f"named but not on /metrics: {missing_metrics(families)}"
    assert not unknown_labels(families), f"labels nowhere on /metrics: {unknown_labels(families)}"

    site_costs = {
        (pair["source"], pair["destination"]): pair["cost"]
        for pair in site_links
        if pair["cost"] is not None
    }
    assert ("SITE-A", "SITE-B") in site_costs and (host_of(UNSITED), "SITE-A") in site_costs
    assert len(site_costs) > TOP_SITE_PAIRS
    link_cost = sample_values(families, "nettel_link_cost")
    exported = [dict(labels) | {"cost": value} for labels, value in link_cost.items()]
    assert all(set(sample) == {"source_site", "destination_site", "cost"} for sample in exported)
    by_pair = {(s["source_site"], s["destination_site"]): s["cost"] for s in exported}
    assert all(value == site_costs[pair] for pair, value in by_pair.items()), (by_pair, site_costs)
    assert ("SITE-A", "SITE-B") in by_pair, "the two-host-pair site pair should be among the top"
    costliest = sorted(site_costs.values(), reverse=True)[:TOP_SITE_PAIRS]
    assert sorted(by_pair.values(), reverse=True) == costliest

    [age] = sample_values(families, "nettel_state_snapshot_age_seconds").values()
    [duration] = sample_values(families, "nettel_state_snapshot_duration_seconds").values()
    assert 0 <= age < 5 and 0 < duration < 5, (age, duration)
    [build] = map(dict, sample_values(families, "nettel_build_info"))
    assert build == {
        "version": version("nettel"),
        "histogram_scanner": SCANNER_IMPLEMENTATION,
        "python": platform.python_version(),
    }
    assert sample_values(families, "nettel_links_predicted")[()] >= len(LINKS)


# ---- (b) the registry of a runtime ------------------------------------------------------------


@pytest.fixture
def fed_runtime(tmp_path: Path) -> Iterator[tuple[Runtime, CollectorRegistry]]:
    """A runtime (persistence, topology, shipped model) fed the mesh, with a state snapshot
    written and one matrix computed after its registry was built."""
    settings = Settings(
        state_dir=tmp_path / "state",
        topology=write_topology(tmp_path),
        publish_telemetry=False,
        metrics_top_site_pairs=TOP_SITE_PAIRS,
    )
    runtime = build_runtime(settings)
    registry = runtime.registry
    runtime.pipeline.handle_frames([(t, json.dumps(body), None) for t, body in mesh_messages()])
    assert runtime.persistence is not None
    runtime.persistence.snapshot()
    runtime.cycle.recompute()
    yield runtime, registry
    runtime.persistence.stop()


def sample_labels(runtime: Runtime) -> dict[str, dict[str, str]]:
    """The labels of one sample of each labelled metric, as the runtime's state says they are."""
    assert runtime.cycle.latest is not None and runtime.model is not None
    costliest = max(aggregate_sites(runtime.cycle.latest.links), key=lambda pair: pair["cost"])
    model = runtime.model.current.info
    return {
        "nettel_messages_received_total": {"topic": LOSS_TOPIC},
        "nettel_rejected_total": {"reason": next(iter(RejectReason)).value},
        "nettel_backfill_links_total": {"outcome": LinkOutcome.FILLED.value},
        "nettel_backfill_datapoints_total": {"outcome": DatapointOutcome.WINDOW.value},
        "nettel_backfill_cut_total": {"reason": CutReason.BOUND.value},
        "nettel_broker_connections_dropped_total": {"reason": "frame_timeout"},
        "nettel_journal_damaged_records_total": {"kind": "corrupt"},
        "nettel_pscheduler_runs_total": {"outcome": RunOutcome.APPLIED.value},
        "nettel_topology_refreshes_total": {"outcome": "ok"},
        "nettel_warm_start_total": {"outcome": WarmOutcome.LOADED.value},
        "nettel_warm_start_rejected_total": {"check": ContentCheck.LINK_LIMIT.value},
        "nettel_cycle_duration_seconds_bucket": {"le": "+Inf"},
        "nettel_sse_streams": {"endpoint": "alto_updates"},
        "nettel_alarms_open": {"kind": AlarmKind.FIREWALL_ISSUE.value},
        "nettel_alarm_events_total": {"kind": AlarmKind.FIREWALL_ISSUE.value, "action": "open"},
        "nettel_site_alarms_open": {"kind": AlarmKind.FIREWALL_ISSUE.value, "site": "SITE-A"},
        "nettel_http_refused_total": {"reason": next(iter(HttpRefusal)).value},
        "nettel_inference_duration_seconds_bucket": {"le": "+Inf"},
        "nettel_link_cost": {
            "source_site": costliest["source"],
            "destination_site": costliest["destination"],
        },
        "nettel_model_info": {"name": model.name, "version": model.version, "sha256": model.sha256},
        "nettel_build_info": {
            "version": version("nettel"),
            "histogram_scanner": SCANNER_IMPLEMENTATION,
            "python": platform.python_version(),
        },
    }


def test_the_runtime_registry_has_a_sample_for_every_named_metric(fed_runtime) -> None:
    runtime, registry = fed_runtime
    families = list(registry.collect())
    assert not missing_metrics(families), f"named but not collected: {missing_metrics(families)}"
    labels = sample_labels(runtime)
    absent = {}
    for name in named_metrics():
        family = family_for(name, families)
        assert family is not None
        named_by_family = all(sample.name != name for sample in family.samples)
        sample = f"{name}_count" if named_by_family else name
        wanted = labels.get(sample, {})
        if registry.get_sample_value(sample, wanted) is None:
            absent[sample] = wanted
    assert not absent, f"no sample with these labels (new labels? add them above): {absent}"
    assert registry.get_sample_value("nettel_links_tracked") == len(LINKS)
    assert registry.get_sample_value("nettel_links_unmapped") == 1  # the UNSITED host's link
    assert registry.get_sample_value("nettel_cycle_duration_seconds_count") == 1
