"""Helpers for the deployment-file tests: where the files are, which metric and label names the
alert rules, the dashboard and the README name, how those names map onto the metric families of
an exposition, and where the optional external linters are.

Which metrics nettel really exports is never read from its source: tests/deploy/
test_metrics_in_use.py scrapes a running service and asks a registry built over a runtime.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml
from prometheus_client import Metric

from service.rucio.settings import RucioSyncSettings

REPO_ROOT = Path(__file__).resolve().parents[2]
PROMETHEUS_DIR = REPO_ROOT / "deploy" / "prometheus"
ALERTS = PROMETHEUS_DIR / "alerts.yml"
PROMETHEUS_CONFIG = PROMETHEUS_DIR / "prometheus.yml"
DASHBOARD = REPO_ROOT / "deploy" / "grafana" / "dashboards" / "nettel.json"
README = REPO_ROOT / "README.md"
DOCS = REPO_ROOT / "docs"
#: Metrics of `nettel rucio-sync`, a process of its own (not `nettel serve`): checked against
#: its registry in tests/rucio/test_rucio_sync_command.py.
RUCIO_SYNC_PREFIX = "nettel_rucio_sync_"

#: Series Prometheus itself writes for every scrape target.
PROMETHEUS_BUILTINS = frozenset({"up"})

#: Types a family may have when a sample name carries the suffix (text format 0.0.4 exposes an
#: info metric as a gauge `<name>_info`, a registry's collect() as type info).
SUFFIX_TYPES = {
    "_bucket": frozenset({"histogram"}),
    "_count": frozenset({"histogram", "summary"}),
    "_sum": frozenset({"histogram", "summary"}),
    "_total": frozenset({"counter"}),
    "_info": frozenset({"info", "gauge"}),
}
#: Families whose samples all carry a suffix, so documentation names them by the family.
SUFFIXED_FAMILY_TYPES = frozenset({"histogram", "summary"})

PROMQL_KEYWORDS = frozenset(
    {
        "and",
        "or",
        "unless",
        "bool",
        "offset",
        "by",
        "without",
        "on",
        "ignoring",
        "group_left",
        "group_right",
        "inf",
        "nan",
        "atan2",
    }
)
_STRING = re.compile(r'"(?:\\.|[^"\\])*"' r"|'(?:\\.|[^'\\])*'" r"|`[^`]*`")
_GRAFANA_VARIABLE = re.compile(r"\$\{[^}]*\}|\$\w+")
_MATCHERS = re.compile(r"\{[^{}]*\}")
_RANGE = re.compile(r"\[[^\]]*\]")
_GROUPING = re.compile(
    r"\b(by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)", re.IGNORECASE
)
_IDENTIFIER = re.compile(r"(?<![\w:.])([A-Za-z_:][\w:]*)(\s*\()?")
_LABEL_MATCHER = re.compile(r"([A-Za-z_]\w*)\s*(?:=~|!~|!=|=)")
_TEMPLATE_LABEL = re.compile(r"\{\{\s*\$?labels\.(\w+)|\{\{\s*(\w+)\s*\}\}")
_README_METRIC = re.compile(r"`(nettel_\w+)")


def metric_names_in(expr: str) -> set[str]:
    """Metric names a PromQL expression selects (Grafana `$variables` allowed).

    Not a parser: strips strings, label matchers, ranges and grouping clauses, then keeps
    identifiers that are neither functions (followed by `(`) nor keywords.

    >>> sorted(metric_names_in('sum by (topic) (rate(a_total{job=~"$job"}[5m])) / on (x) b > 0'))
    ['a_total', 'b']
    >>> sorted(metric_names_in('histogram_quantile(0.9, sum(rate(h[$__rate_interval])) by (le))'))
    ['h']
    """
    text = _STRING.sub('""', expr)
    text = _MATCHERS.sub("", text)
    text = _RANGE.sub("", text)
    text = _GRAFANA_VARIABLE.sub("0", text)
    text = _GROUPING.sub(" ", text)
    return {
        match.group(1)
        for match in _IDENTIFIER.finditer(text)
        if not match.group(2) and match.group(1).lower() not in PROMQL_KEYWORDS
    }


def nettel_metric_names(expr: str) -> set[str]:
    """The nettel metrics an expression selects.

    >>> sorted(nettel_metric_names('sum(rate(nettel_a_total{x="nettel_b"}[5m])) / up'))
    ['nettel_a_total']
    """
    return {name for name in metric_names_in(expr) if name.startswith("nettel_")}


def labels_in(expr: str) -> set[str]:
    """Label names an expression matches on or groups by (Grafana `$variables` allowed).

    >>> sorted(labels_in('sum by (job, le) (rate(h{instance=~"$i", x!="a=b"}[5m]))'))
    ['instance', 'job', 'le', 'x']
    """
    text = _STRING.sub('""', expr)
    names = {m for selector in _MATCHERS.findall(text) for m in _LABEL_MATCHER.findall(selector)}
    for _, grouped in _GROUPING.findall(text):
        names |= {name.strip() for name in grouped.split(",") if name.strip()}
    return names


def template_labels(text: str) -> set[str]:
    """Labels a Grafana legend (`{{topic}}`) or an alert annotation (`{{ $labels.x }}`) shows.

    >>> sorted(template_labels("{{ $labels.instance }}: {{ $value }}, {{topic}}"))
    ['instance', 'topic']
    """
    return {a or b for a, b in _TEMPLATE_LABEL.findall(text)} - {"value", "__auto"}


def alert_rules() -> list[dict[str, Any]]:
    document = yaml.safe_load(ALERTS.read_text())
    return [rule for group in document["groups"] for rule in group["rules"]]


def load_dashboard() -> dict[str, Any]:
    return json.loads(DASHBOARD.read_text())


def all_panels(dashboard: dict[str, Any]) -> list[dict[str, Any]]:
    """Top-level panels and those nested in collapsed rows."""
    panels = []
    for panel in dashboard["panels"]:
        panels.append(panel)
        panels.extend(panel.get("panels", []))
    return panels


def query_panels(dashboard: dict[str, Any]) -> list[dict[str, Any]]:
    return [panel for panel in all_panels(dashboard) if panel["type"] not in {"row", "text"}]


def dashboard_exprs(dashboard: dict[str, Any]) -> list[str]:
    return [target["expr"] for panel in query_panels(dashboard) for target in panel["targets"]]


def readme_metric_names(text: str) -> set[str]:
    r"""The metric names in the README's `GET /metrics` bullet (with its continuation lines).

    >>> sorted(readme_metric_names("- `GET /x`: `nettel_no`\n- `GET /metrics`: `nettel_a{t}`,\n"
    ...     "  `nettel_b_total`.\n- next: `nettel_c`"))
    ['nettel_a', 'nettel_b_total']
    """
    lines = text.splitlines()
    [start] = [i for i, line in enumerate(lines) if line.startswith("- `GET /metrics`")]
    bullet = [lines[start]]
    for line in lines[start + 1 :]:
        if not line.startswith("  "):
            break
        bullet.append(line)
    return set(_README_METRIC.findall("\n".join(bullet)))


def docs_metric_names(text: str) -> set[str]:
    """Metric names written as code in a document (`nettel_...`).

    >>> sorted(docs_metric_names("see `nettel_a_total` and `nettel_b{x}`; nettel_c is prose"))
    ['nettel_a_total', 'nettel_b']
    """
    return set(_README_METRIC.findall(text))


def named_metrics() -> dict[str, set[str]]:
    """Every nettel metric the alert rules, the dashboard, the README or docs/ name -> where."""
    where: dict[str, set[str]] = {}

    def note(names: Iterable[str], place: str) -> None:
        for name in names:
            where.setdefault(name, set()).add(place)

    for rule in alert_rules():
        note(nettel_metric_names(rule["expr"]), f"alert {rule['alert']}")
    for panel in query_panels(load_dashboard()):
        for target in panel["targets"]:
            note(nettel_metric_names(target["expr"]), f"panel {panel['title']!r}")
    note(readme_metric_names(README.read_text()), "README /metrics")
    for document in sorted(DOCS.glob("*.md")):
        note(docs_metric_names(document.read_text()), f"docs/{document.name}")
    settings = set(RucioSyncSettings.model_fields)  # `nettel_url` in docs/configuration.md
    return {
        name: places
        for name, places in where.items()
        if not name.startswith(RUCIO_SYNC_PREFIX) and name not in settings
    }


def target_labels() -> set[str]:
    """Labels Prometheus puts on every series it scrapes from nettel (prometheus.yml)."""
    config = yaml.safe_load(PROMETHEUS_CONFIG.read_text())
    [job] = [job for job in config["scrape_configs"] if job["job_name"] == "nettel"]
    static = {label for group in job["static_configs"] for label in group.get("labels", {})}
    return {"job", "instance"} | static


def family_for(name: str, families: Iterable[Metric]) -> Metric | None:
    """The family that exposes `name`: the one with a sample of that name, if its type fits the
    suffix (`_bucket`, `_total`, ...; none: a gauge), else a histogram or summary named so."""
    suffix = next((s for s in SUFFIX_TYPES if name.endswith(s)), None)
    allowed = SUFFIX_TYPES[suffix] if suffix else frozenset({"gauge"})
    named = None
    for family in families:
        if any(sample.name == name for sample in family.samples):
            return family if family.type in allowed else None
        if family.name == name and family.type in SUFFIXED_FAMILY_TYPES and family.samples:
            named = family
    return named


def find_tool(name: str, env_var: str) -> str | None:
    """A linter binary: $ENV_VAR, then PATH, then next to this interpreter (a venv's bin/)."""
    explicit = os.environ.get(env_var)
    if explicit:
        return explicit if Path(explicit).is_file() else None
    found = shutil.which(name)
    if found:
        return found
    beside = Path(sys.executable).parent / name
    return str(beside) if beside.is_file() and os.access(beside, os.X_OK) else None
