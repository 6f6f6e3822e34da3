"""The Prometheus config, alert rules and Grafana dashboard under deploy/.

Parser checks always run: YAML/JSON structure, and every metric an expression selects is a
nettel one or Prometheus' `up` (that nettel really exports each one, with the labels the queries
use, is tests/deploy/test_metrics_in_use.py's job: it scrapes a running service). With promtool
installed (or PROMTOOL=/path), `promtool check rules|config` and the rule unit tests in
alerts_test.yml run too, and every dashboard query is parsed by promtool.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.deploy.support import (
    ALERTS,
    PROMETHEUS_BUILTINS,
    PROMETHEUS_CONFIG,
    PROMETHEUS_DIR,
    REPO_ROOT,
    alert_rules,
    all_panels,
    dashboard_exprs,
    find_tool,
    load_dashboard,
    metric_names_in,
    nettel_metric_names,
    query_panels,
)

ALERT_UNIT_TESTS = Path(__file__).with_name("alerts_test.yml")
GRAFANA_DIR = REPO_ROOT / "deploy" / "grafana"
DATASOURCES = GRAFANA_DIR / "provisioning" / "datasources" / "prometheus.yml"
DASHBOARD_PROVIDERS = GRAFANA_DIR / "provisioning" / "dashboards" / "nettel.yml"

RULE_KEYS = {"alert", "expr", "for", "keep_firing_for", "labels", "annotations"}
SEVERITIES = {"critical", "warning", "info"}
DURATION = re.compile(r"^(\d+(ms|s|m|h|d|w|y))+$")
PANEL_TYPES = {"stat", "timeseries", "table", "state-timeline", "bargauge", "gauge", "row", "text"}
DATASOURCE_REF = {"type": "prometheus", "uid": "${datasource}"}
GRID_WIDTH = 24

PROMTOOL = find_tool("promtool", "PROMTOOL")
needs_promtool = pytest.mark.skipif(
    PROMTOOL is None,
    reason="promtool not installed (Debian package `prometheus` ships it; or set "
    "PROMTOOL=/path/to/promtool); the parser-based checks in this file ran instead",
)


# ---- fixtures and helpers --------------------------------------------------------------------


@pytest.fixture(scope="module")
def rules() -> list[dict[str, Any]]:
    return alert_rules()


@pytest.fixture(scope="module")
def dashboard() -> dict[str, Any]:
    return load_dashboard()


def is_known(name: str) -> bool:
    return name.startswith("nettel_") or name in PROMETHEUS_BUILTINS


def squeeze(expr: str) -> str:
    """The expression without label matchers and whitespace, for substring checks."""
    return re.sub(r"\s+", "", re.sub(r"\{[^{}]*\}", "", expr))


def run(*command: str | Path, cwd: Path = REPO_ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(part) for part in command], cwd=cwd, capture_output=True, text=True, timeout=120
    )


# ---- metric names ----------------------------------------------------------------------------


def test_metric_name_extraction() -> None:
    assert metric_names_in('up{job="nettel"} == 1 unless on (job, instance) age_seconds') == {
        "up",
        "age_seconds",
    }
    assert metric_names_in('topk(10, cost{a=~"$x"})') == {"cost"}
    assert metric_names_in("x > bool 5 or rate(y[5m] offset 1h) * 1e3") == {"x", "y"}
    assert metric_names_in("max by (i) (a) * on (i) group_left (name) max by (i, name) (b)") == {
        "a",
        "b",
    }


# ---- alert rules -----------------------------------------------------------------------------


def test_alert_file_structure() -> None:
    document = yaml.safe_load(ALERTS.read_text())
    assert set(document) == {"groups"}
    names = [group["name"] for group in document["groups"]]
    assert names and len(names) == len(set(names)), "group names must be unique"
    for group in document["groups"]:
        assert set(group) <= {"name", "interval", "rules", "limit"}
        assert group["rules"], f"group {group['name']} has no rules"


def test_every_rule_is_a_complete_alert(rules: list[dict[str, Any]]) -> None:
    names = [rule.get("alert") for rule in rules]
    assert len(names) == len(set(names)), "alert names must be unique"
    for rule in rules:
        name = rule.get("alert")
        assert name and re.fullmatch(r"Nettel[A-Z][A-Za-z]+", name), rule
        assert set(rule) <= RULE_KEYS, f"{name}: unknown keys {set(rule) - RULE_KEYS}"
        assert isinstance(rule["expr"], str) and rule["expr"].strip(), name
        assert DURATION.match(str(rule["for"])), f"{name}: for={rule['for']!r}"
        assert rule["labels"]["severity"] in SEVERITIES, name
        for key in ("summary", "description"):
            text = rule["annotations"].get(key)
            assert isinstance(text, str) and text.strip(), f"{name}: no {key}"


def test_alerts_only_use_nettel_metrics_and_up(rules: list[dict[str, Any]]) -> None:
    for rule in rules:
        used = metric_names_in(rule["expr"])
        assert used, f"{rule['alert']}: no metric found in {rule['expr']!r}"
        unknown = {name for name in used if not is_known(name)}
        assert not unknown, f"{rule['alert']}: not nettel's nor Prometheus' own: {unknown}"


def test_required_alerts(rules: list[dict[str, Any]]) -> None:
    by_name = {rule["alert"]: rule for rule in rules}
    expected = {  # alert: (fragments its squeezed expr contains, for)
        "NettelNoMessages": (
            [
                "nettel_seconds_since_last_message>300",
                "rate(nettel_messages_received_total[5m]))==0",
            ],
            "1m",
        ),
        "NettelBrokerDisconnected": (["nettel_broker_connected==0"], "1m"),
        "NettelIngestLagging": (["nettel_ingest_arrival_lag_seconds>60"], "10m"),
        "NettelHighRejectRatio": (
            ["rate(nettel_rejected_total[5m]))/", "rate(nettel_messages_received_total[5m]))>0.05"],
            "10m",
        ),
        "NettelCostMatrixStale": (["nettel_snapshot_age_seconds>120"], "5m"),
        "NettelStateSnapshotStale": (["nettel_state_snapshot_age_seconds>"], "5m"),
        "NettelHALeaseQueueShared": (["nettel_ha_lease_shared==1"], "2m"),
        "NettelLinkLimit": (["increase(nettel_rejected_total", "[10m])>0"], "1m"),
    }
    for name, (fragments, duration) in expected.items():
        assert name in by_name, f"missing alert {name}"
        expr = squeeze(by_name[name]["expr"])
        for fragment in fragments:
            assert fragment in expr, f"{name}: {fragment!r} not in {expr!r}"
        assert by_name[name]["for"] == duration, name


def test_state_snapshot_alert_is_silent_without_persistence(rules: list[dict[str, Any]]) -> None:
    """The metric exists only with --state-dir: absent()/absent_over_time() or an `or` arm would
    make the alert fire on every nettel that runs without persistence."""
    [rule] = [r for r in rules if "nettel_state_snapshot_age_seconds" in r["expr"]]
    assert nettel_metric_names(rule["expr"]) == {"nettel_state_snapshot_age_seconds"}
    assert "absent" not in rule["expr"], rule["alert"]
    assert " or " not in f" {rule['expr']} ", f"{rule['alert']}: an `or` arm could fire"


def test_every_alert_has_a_promtool_unit_test(rules: list[dict[str, Any]]) -> None:
    document = yaml.safe_load(ALERT_UNIT_TESTS.read_text())
    assert (ALERT_UNIT_TESTS.parent / document["rule_files"][0]).resolve() == ALERTS
    firing = {
        case["alertname"]
        for test in document["tests"]
        for case in test.get("alert_rule_test", [])
        if case.get("exp_alerts")
    }
    assert {rule["alert"] for rule in rules} <= firing


# ---- prometheus.yml --------------------------------------------------------------------------


def test_prometheus_scrapes_nettel_and_loads_the_rules() -> None:
    config = yaml.safe_load(PROMETHEUS_CONFIG.read_text())
    rule_files = [(PROMETHEUS_DIR / path).resolve() for path in config["rule_files"]]
    assert ALERTS in rule_files
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    targets = [t for static in jobs["nettel"]["static_configs"] for t in static["targets"]]
    assert targets == ["nettel:8080"]
    assert jobs["nettel"].get("metrics_path", "/metrics") == "/metrics"


@needs_promtool
def test_promtool_accepts_rules_and_config() -> None:
    for command in (("check", "rules", ALERTS), ("check", "config", PROMETHEUS_CONFIG)):
        result = run(PROMTOOL, *command)
        assert result.returncode == 0, result.stdout + result.stderr


@needs_promtool
def test_promtool_rule_unit_tests() -> None:
    result = run(PROMTOOL, "test", "rules", ALERT_UNIT_TESTS.name, cwd=ALERT_UNIT_TESTS.parent)
    assert result.returncode == 0, result.stdout + result.stderr


@needs_promtool
def test_promtool_parses_every_dashboard_query(dashboard: dict[str, Any], tmp_path: Path) -> None:
    """Each query, with Grafana variables filled in, as a recording rule for `check rules`."""
    values = {"$job": ".*", "$instance": ".*", "$__rate_interval": "1m", "$__interval": "1m"}
    records = []
    for number, expr in enumerate(dashboard_exprs(dashboard)):
        for variable, value in values.items():
            expr = expr.replace(variable, value)
        assert "$" not in expr, f"unhandled Grafana variable in {expr!r}"
        records.append({"record": f"dashboard:query_{number}", "expr": expr})
    rules_file = tmp_path / "dashboard_rules.yml"
    rules_file.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": records}]}))
    result = run(PROMTOOL, "check", "rules", rules_file)
    assert result.returncode == 0, result.stdout + result.stderr


# ---- Grafana dashboard -----------------------------------------------------------------------


def test_dashboard_top_level(dashboard: dict[str, Any]) -> None:
    assert dashboard["uid"] and dashboard["title"]
    assert isinstance(dashboard["schemaVersion"], int) and 36 <= dashboard["schemaVersion"] <= 41
    assert "id" not in dashboard or dashboard["id"] is None, "provisioned dashboards carry no id"
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    source = variables["datasource"]
    assert (source["type"], source["query"]) == ("datasource", "prometheus")
    for name in ("job", "instance"):
        assert variables[name]["datasource"] == DATASOURCE_REF, name


def test_dashboard_panels_structure(dashboard: dict[str, Any]) -> None:
    ids = [panel["id"] for panel in all_panels(dashboard)]
    assert len(ids) == len(set(ids)), "panel ids must be unique"
    for panel in all_panels(dashboard):
        assert panel["type"] in PANEL_TYPES, panel["type"]
        assert panel.get("title"), panel["id"]
        grid = panel["gridPos"]
        assert all(isinstance(grid[k], int) for k in "xywh"), panel["title"]
        assert grid["w"] > 0 and grid["h"] > 0 and grid["x"] >= 0 and grid["y"] >= 0
        assert grid["x"] + grid["w"] <= GRID_WIDTH, panel["title"]
    for panel in query_panels(dashboard):
        title = panel["title"]
        assert panel["datasource"] == DATASOURCE_REF, title
        assert panel["targets"], f"{title}: no targets"
        ref_ids = [target["refId"] for target in panel["targets"]]
        assert len(ref_ids) == len(set(ref_ids)), f"{title}: duplicate refId"
        for target in panel["targets"]:
            assert target["expr"].strip(), title
            assert target.get("datasource", DATASOURCE_REF) == DATASOURCE_REF, title


def test_dashboard_panels_do_not_overlap(dashboard: dict[str, Any]) -> None:
    cells: dict[tuple[int, int], str] = {}
    for panel in dashboard["panels"]:
        grid = panel["gridPos"]
        for x in range(grid["x"], grid["x"] + grid["w"]):
            for y in range(grid["y"], grid["y"] + grid["h"]):
                assert (x, y) not in cells, f"{panel['title']} overlaps {cells[(x, y)]}"
                cells[(x, y)] = panel["title"]


def test_dashboard_only_uses_nettel_metrics(dashboard: dict[str, Any]) -> None:
    for expr in dashboard_exprs(dashboard):
        used = metric_names_in(expr)
        assert used, f"no metric in {expr!r}"
        assert all(name.startswith("nettel_") for name in used), f"not nettel's: {expr!r}"


def test_dashboard_queries_follow_the_job_and_instance_variables(dashboard: dict[str, Any]) -> None:
    for expr in dashboard_exprs(dashboard):
        selectors = re.findall(r"\bnettel_\w+(\{[^}]*\})?", expr)
        assert selectors and all("$job" in sel and "$instance" in sel for sel in selectors), (
            f"every selector should filter on $job and $instance: {expr!r}"
        )


def test_dashboard_has_the_required_panels(dashboard: dict[str, Any]) -> None:
    exprs = [squeeze(expr) for expr in dashboard_exprs(dashboard)]
    required = {  # what: fragments one query must all contain
        "messages by topic": ["by(topic)", "rate(nettel_messages_received_total[5m])"],
        "datapoints applied": ["rate(nettel_datapoints_applied_total[5m])"],
        "rejects by reason": ["by(reason)", "rate(nettel_rejected_total[5m])"],
        "broker state": ["nettel_broker_connected"],
        "cycle time": ["histogram_quantile(", "nettel_cycle_duration_seconds_bucket"],
        "congested links": ["nettel_congested_links"],
        "top-10 costliest site pairs": ["topk(10,nettel_link_cost)"],
        "snapshot age": ["nettel_snapshot_age_seconds"],
        "since last message": ["nettel_seconds_since_last_message"],
        "arrival lag": ["nettel_ingest_arrival_lag_seconds"],
    }
    for what, fragments in required.items():
        assert any(all(f in expr for f in fragments) for expr in exprs), f"no {what} query"


def test_top_links_table_is_an_instant_table_query(dashboard: dict[str, Any]) -> None:
    [panel] = [p for p in query_panels(dashboard) if "topk(10" in p["targets"][0]["expr"]]
    assert panel["type"] == "table"
    target = panel["targets"][0]
    assert target.get("instant") is True and target.get("format") == "table"


DASHBOARD_SCHEMA = {  # the subset of Grafana's dashboard model these files rely on
    "type": "object",
    "required": ["uid", "title", "schemaVersion", "panels", "templating"],
    "properties": {
        "schemaVersion": {"type": "integer"},
        "templating": {
            "type": "object",
            "required": ["list"],
            "properties": {"list": {"type": "array", "items": {"required": ["name", "type"]}}},
        },
        "panels": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "required": ["id", "type", "title", "gridPos"],
                "properties": {
                    "id": {"type": "integer"},
                    "gridPos": {
                        "type": "object",
                        "required": ["x", "y", "w", "h"],
                        "properties": {k: {"type": "integer", "minimum": 0} for k in "xywh"},
                    },
                    "targets": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "required": ["refId", "expr"],
                            "properties": {"expr": {"type": "string", "minLength": 1}},
                        },
                    },
                },
            },
        },
    },
}


def test_dashboard_matches_schema(dashboard: dict[str, Any]) -> None:
    jsonschema = pytest.importorskip("jsonschema", reason="jsonschema not installed")
    jsonschema.validate(dashboard, DASHBOARD_SCHEMA)


# ---- Grafana provisioning --------------------------------------------------------------------


def test_datasource_provisioning_matches_the_dashboard(dashboard: dict[str, Any]) -> None:
    document = yaml.safe_load(DATASOURCES.read_text())
    assert document["apiVersion"] == 1
    [source] = document["datasources"]
    assert source["type"] == "prometheus"
    assert source["url"] == "http://prometheus:9090"
    assert source.get("isDefault") is True
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["current"]["value"] == source["uid"]


def test_dashboard_provider() -> None:
    document = yaml.safe_load(DASHBOARD_PROVIDERS.read_text())
    assert document["apiVersion"] == 1
    [provider] = document["providers"]
    assert provider["type"] == "file"
    assert provider["options"]["path"] == "/etc/grafana/dashboards"  # compose mounts it there
