"""Helpers for the deployment-file tests: which metrics nettel exports, which metric names a
PromQL expression uses, and where the optional external linters are.

The exported names come from reading service/publish/metrics.py (no runtime needed): every call
whose first argument is a literal `"nettel_..."` string defines a metric, and the callee's name
says its kind (Counter, Histogram, Summary, Info, else Gauge), hence its exposition suffixes.
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
METRICS_MODULE = REPO_ROOT / "service" / "publish" / "metrics.py"

#: Metrics other owners have announced but not exported yet: name -> kind.
PLANNED_METRICS = {
    "nettel_link_cost": "gauge",  # per-link gauge for the top-N links (dashboard top-10 table)
    "nettel_state_snapshot_age_seconds": "gauge",  # age of the on-disk link-state snapshot
}

#: Series Prometheus itself writes for every scrape target.
PROMETHEUS_BUILTINS = frozenset({"up"})

SUFFIXES = {
    "counter": ("_total", "_created"),
    "histogram": ("_bucket", "_sum", "_count", "_created"),
    "summary": ("", "_sum", "_count", "_created"),
    "info": ("_info",),
    "gauge": ("",),
}

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
    r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", re.IGNORECASE
)
_IDENTIFIER = re.compile(r"(?<![\w:.])([A-Za-z_:][\w:]*)(\s*\()?")


def metric_kind(callee: str) -> str:
    """The metric kind a constructor or helper name implies.

    >>> [metric_kind(n) for n in ("CounterMetricFamily", "_labelled_counter", "Histogram", "Gauge")]
    ['counter', 'counter', 'histogram', 'gauge']
    """
    lowered = callee.lower()
    for kind in ("counter", "histogram", "summary", "info"):
        if kind in lowered:
            return kind
    return "gauge"


def declared_metrics(source: str) -> dict[str, str]:
    """Metric base name -> kind, for every call with a literal `nettel_*` first argument."""
    found: dict[str, str] = {}
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call) or not node.args:
            continue
        first = node.args[0]
        if isinstance(first, ast.Constant) and str(first.value).startswith("nettel_"):
            callee = node.func.attr if isinstance(node.func, ast.Attribute) else node.func
            name = callee.id if isinstance(callee, ast.Name) else str(callee)
            found[first.value] = metric_kind(name)
    return found


def exposed_names(metrics: dict[str, str]) -> frozenset[str]:
    """The series names Prometheus stores for metrics of the given kinds.

    >>> sorted(exposed_names({"x": "counter", "y": "gauge"}))
    ['x_created', 'x_total', 'y']
    """
    return frozenset(base + suffix for base, kind in metrics.items() for suffix in SUFFIXES[kind])


def exported_series() -> frozenset[str]:
    """Series names nettel exports today (from service/publish/metrics.py)."""
    return exposed_names(declared_metrics(METRICS_MODULE.read_text()))


def planned_series() -> frozenset[str]:
    return exposed_names(PLANNED_METRICS)


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
