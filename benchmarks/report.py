"""Results of the measurements, the JSON report and its markdown rendering (docs/performance.md).

Each measurement returns a `MeasurementResult`: figures (every number it measured, with units),
targets (a figure compared with a limit) and notes on method. `build_report` assembles them with
the machine description into one JSON-ready dict; `render_markdown` turns that dict (and only
that dict, so a saved report.json can be re-rendered) into the committed tables, with the dict
embedded in HTML comments so that `read_page` gets it back from the page alone: a partial run in
a checkout without report.json keeps the page's other sections.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar

import numpy as np

REPORT_SCHEMA = 1
#: Starts of the one-line HTML comments (invisible when rendered) that carry the report in the
#: page: the run's data under the title, each measurement's under its heading.
RUN_DATA = "<!-- benchmark-run "
SECTION_DATA = "<!-- benchmark-data "
MET_TEXT: dict[bool | None, str] = {True: "yes", False: "**no**", None: "not measured"}
QUICK_SIZES = ", quick sizes (not representative)"
Value = float | int | str | bool | None
V = TypeVar("V", float, int, str, bool, None, float | None)


@dataclass(frozen=True)
class Figure:
    key: str
    label: str
    value: Value
    unit: str = ""


@dataclass(frozen=True)
class Target:
    """`value comparison limit`, e.g. service msg/s >= 10,000; None value = not measured."""

    key: str
    label: str
    value: float | None
    comparison: Literal[">=", "<="]
    limit: float
    unit: str = ""

    @property
    def met(self) -> bool | None:
        if self.value is None or (isinstance(self.value, float) and math.isnan(self.value)):
            return None
        return self.value >= self.limit if self.comparison == ">=" else self.value <= self.limit


@dataclass
class MeasurementResult:
    name: str
    title: str
    method: str
    figures: list[Figure] = field(default_factory=list)
    targets: list[Target] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)

    def add(self, key: str, label: str, value: V, unit: str = "") -> V:
        """Record a figure and hand its value back (so it can be used in a ratio)."""
        self.figures.append(Figure(key, label, _plain(value), unit))
        return value

    def target(
        self,
        key: str,
        label: str,
        value: float | None,
        comparison: Literal[">=", "<="],
        limit: float,
        unit: str = "",
    ) -> None:
        self.targets.append(Target(key, label, _plain(value), comparison, limit, unit))

    def as_dict(self) -> dict[str, Any]:
        return {
            "title": self.title,
            "method": self.method,
            "figures": {
                f.key: {"label": f.label, "value": f.value, "unit": f.unit} for f in self.figures
            },
            "targets": [asdict(t) | {"met": t.met} for t in self.targets],
            "notes": self.notes,
            "details": _plain_tree(self.details),
        }


def median(values: list[float]) -> float:
    return float(np.median(values)) if values else math.nan


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else math.nan


def build_report(
    environment: dict[str, Any],
    results: list[MeasurementResult],
    outcomes: Outcomes,
    *,
    quick: bool,
    duration_seconds: float,
) -> dict[str, Any]:
    """One run's report; each measurement carries when, at which commit and at which sizes it
    ran, so that reports of several runs can be merged (`merge_reports`)."""
    run = {
        "date": environment["date"],
        "git_commit": environment["git_commit"],
        "git_dirty": environment["git_dirty"],
        "quick": quick,
    }
    return _totals(
        {
            "schema": REPORT_SCHEMA,
            "quick": quick,
            "environment": environment,
            "duration_seconds": round(duration_seconds, 1),
            "measurements": {r.name: r.as_dict() | {"run": run} for r in results},
            "errors": outcomes.errors,
            "skipped": outcomes.skipped,
        }
    )


@dataclass
class Outcomes:
    """Measurements that did not give a result: a traceback, or why they could not run."""

    errors: dict[str, str] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)


def merge_reports(
    earlier: dict[str, Any], later: dict[str, Any], order: Sequence[str]
) -> dict[str, Any]:
    """`later` with `earlier`'s sections of the measurements it did not run; a name's latest
    outcome (result, error or skip) wins; sections in `order`."""
    ran = set(later["measurements"]) | set(later["errors"]) | set(later.get("skipped", {}))

    def kept(key: str) -> dict[str, Any]:
        merged = {k: v for k, v in earlier.get(key, {}).items() if k not in ran}
        return merged | later.get(key, {})

    measurements = kept("measurements")
    merged = later | {
        "measurements": {name: measurements[name] for name in order if name in measurements},
        "errors": kept("errors"),
        "skipped": kept("skipped"),
    }
    merged["quick"] = all(
        m.get("run", {}).get("quick", later["quick"]) for m in measurements.values()
    )
    return _totals(merged)


def _totals(report: dict[str, Any]) -> dict[str, Any]:
    targets = [t for m in report["measurements"].values() for t in m["targets"]]
    report["targets_met"] = sum(1 for t in targets if t["met"])
    report["targets_total"] = len(targets)
    return report


def write_json(report: dict[str, Any], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=2, allow_nan=False) + "\n")


def render_markdown(report: dict[str, Any]) -> str:
    """docs/performance.md from a report dict."""
    lines = _header(report) + _environment_table(report["environment"])
    lines += _targets_table(report)
    for name, measurement in report["measurements"].items():
        lines += _measurement_section(name, measurement)
    if report["errors"]:
        lines += ["## Errors", ""]
        lines += [
            f"- **{name}**: `{text.splitlines()[-1]}`" for name, text in report["errors"].items()
        ]
        lines.append("")
    if report.get("skipped"):
        lines += ["## Not run", ""]
        lines += [f"- **{name}**: {reason}" for name, reason in report["skipped"].items()]
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


#: Other processes' CPU (cores, averaged over a measurement) above which the page warns.
SHARED_MACHINE_CORES = 0.25


def _header(report: dict[str, Any]) -> list[str]:
    env = report["environment"]
    mode = " (quick mode: tiny sizes, figures not representative)" if report["quick"] else ""
    lines = [
        "# Performance",
        _data_comment(RUN_DATA, _run_data(report)),
        "",
        "Generated by `python -m benchmarks` (the suite in `benchmarks/`); do not edit by hand.",
        "`python -m benchmarks --only NAME` measures one section again and re-renders this page "
        "with the others kept; each section says when and at which commit it was measured.",
        f"Last run on {env['date']}{mode}, {report['duration_seconds']:.0f} s; "
        f"targets met: **{report['targets_met']} of {report['targets_total']}**. "
        "Raw figures: `out/bench/report.json`.",
        "",
    ]
    return lines + _shared_machine_warning(report)


def _shared_machine_warning(report: dict[str, Any]) -> list[str]:
    busy = {
        name: m["figures"].get("other_cpu_cores", {}).get("value") or 0.0
        for name, m in report["measurements"].items()
    }
    shared = {name: cores for name, cores in busy.items() if cores > SHARED_MACHINE_CORES}
    if not shared:
        return []
    listed = ", ".join(f"{name} {cores:.2f}" for name, cores in shared.items())
    return [
        f"> The machine was shared: other processes kept cores busy during some measurements "
        f"({listed} cores on average, of {report['environment']['cores']}). Those figures are "
        "pessimistic; rerun on a quiet machine to compare with the targets.",
        "",
    ]


def _environment_table(env: dict[str, Any]) -> list[str]:
    rows = [
        ("CPU", env["cpu_model"]),
        ("cores", env["cores"]),
        ("RAM", f"{env['ram_bytes'] / 2**30:.1f} GiB"),
        ("OS", env["os"]),
        ("Python", env["python"]),
        ("numpy", env["numpy"]),
        ("stomp.py", env["stomp_py"]),
        ("orjson / FastAPI / uvicorn", f"{env['orjson']} / {env['fastapi']} / {env['uvicorn']}"),
        ("ActiveMQ (Java)", f"{env['activemq']} ({env['java']})"),
        ("RabbitMQ", env.get("rabbitmq")),
        ("load generator", env["load_generator"]),
        (
            "nettel commit",
            f"`{env['git_commit']}`" + (" (uncommitted changes)" if env["git_dirty"] else ""),
        ),
        ("model", env["model"]),
        ("date", env["date"]),
        ("reference work (s, lower is faster)", _reference_speed(env)),
    ]
    return (
        ["## Machine and versions", "", "| | |", "|---|---|"]
        + [f"| {k} | {v} |" for k, v in rows]
        + [""]
    )


def _reference_speed(env: dict[str, Any]) -> str:
    """benchmarks/support/machine_speed.py's fixed work at the start and end of the run."""

    def timing(key: str) -> str:
        seconds = env.get(key)
        if not seconds:
            return "-"
        return f"Python {seconds['python']:.3f}, numpy {seconds['numpy']:.3f}"

    if env.get("reference_start") and env.get("reference_end") == env["reference_start"]:
        # --quick times it once
        return f"{timing('reference_start')} at the start (timed once: quick sizes)"
    return f"{timing('reference_start')} at the start; {timing('reference_end')} at the end"


def _targets_table(report: dict[str, Any]) -> list[str]:
    lines = [
        "## Targets",
        "",
        "| measurement | target | measured | limit | met |",
        "|---|---|---:|---:|---|",
    ]
    for name, measurement in report["measurements"].items():
        lines += [_target_row(name, measurement, t) for t in measurement["targets"]]
    return lines + [""]


def _target_row(name: str, m: dict[str, Any], t: dict[str, Any]) -> str:
    if "row" in t:
        return t["row"]
    shown = f"{name} (quick)" if m.get("run", {}).get("quick") else name
    return (
        f"| [{shown}](#{_anchor(m['title'], name)}) | {t['label']} "
        f"| {format_value(t['value'], t['unit'])} "
        f"| {t['comparison']} {format_value(t['limit'], t['unit'])} | {MET_TEXT[t['met']]} |"
    )


def _measurement_section(name: str, m: dict[str, Any]) -> list[str]:
    if "kept_text" in m:
        return m["kept_text"].split("\n") + [""]
    lines = [f"## {m['title']} (`{name}`)", _data_comment(SECTION_DATA, m), ""]
    lines += _run_line(name, m) + [m["method"], ""]
    lines += ["| figure | value |", "|---|---:|"]
    lines += [
        f"| {f['label']} | {format_value(f['value'], f['unit'])} |" for f in m["figures"].values()
    ]
    lines.append("")
    lines += [f"- {note}" for note in m["notes"]]
    if m["notes"]:
        lines.append("")
    for table in m["details"].get("tables", []):
        lines += _detail_table(table)
    return lines


def _run_line(name: str, m: dict[str, Any]) -> list[str]:
    """When, at which commit and at which sizes the section was measured (reports since the
    suite merges runs)."""
    run = m.get("run")
    if run is None:
        return []
    dirty = " with uncommitted changes" if run["git_dirty"] else ""
    quick = QUICK_SIZES if run["quick"] else ""
    command = f"python -m benchmarks --only {name}" + (" --quick" if run["quick"] else "")
    return [f"_Measured {run['date']} at `{run['git_commit']}`{dirty}{quick}: `{command}`._", ""]


def _anchor(title: str, name: str) -> str:
    """The GitHub anchor of a section headed `title (`name`)`."""
    text = f"{title} ({name})".lower()
    return "".join(c for c in text if c.isalnum() or c in " -_").replace(" ", "-")


def _detail_table(table: dict[str, Any]) -> list[str]:
    header = table["columns"]
    lines = [f"**{table['title']}**", "", "| " + " | ".join(header) + " |"]
    lines.append("|" + "|".join("---" for _ in header) + "|")
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in table["rows"]]
    return lines + [""]


class UnreadablePage(ValueError):
    """A page that neither carries data nor has sections this suite renders."""


def read_page(page: str) -> dict[str, Any]:
    """The report `page` was rendered from, so that `render_markdown(read_page(page)) == page`.

    A measurement section without data (rendered before data was embedded) comes back as its
    text and its summary rows (`kept_text`, a `row` per target), rendered again verbatim."""
    preamble, sections = _split_sections(page)
    run = _embedded(RUN_DATA, preamble)
    headings = (re.fullmatch(r"(.+) \(`(\w+)`\)", heading) for heading in sections)
    measurements = {
        match[2]: _embedded(SECTION_DATA, sections[match[0]])
        or _kept(match[2], match[1], sections[match[0]], sections.get("Targets", []), preamble)
        for match in headings
        if match
    }
    if run is None and (not measurements or {"Errors", "Not run"} & set(sections)):
        raise UnreadablePage("it carries no data and is not a page this suite rendered")
    return _totals((run or {"errors": {}, "skipped": {}}) | {"measurements": measurements})


def _data_comment(prefix: str, data: Any) -> str:
    """One line of JSON; `>` escaped so that no string in it can close the comment."""
    text = json.dumps(data, separators=(",", ":"), allow_nan=False).replace(">", "\\u003e")
    return f"{prefix}{text} -->"


def _embedded(prefix: str, lines: list[str]) -> Any:
    """The data of the first `prefix` comment in `lines`, None without one."""
    for line in lines:
        if line.startswith(prefix) and line.endswith(" -->"):
            try:
                return json.loads(line[len(prefix) : -len(" -->")])
            except json.JSONDecodeError as bad:
                raise UnreadablePage(f"its embedded data is not JSON ({bad})") from None
    return None


def _run_data(report: dict[str, Any]) -> dict[str, Any]:
    """What the page says besides its measurements (the totals are counted again)."""
    left_out = ("measurements", "targets_met", "targets_total")
    return {key: value for key, value in report.items() if key not in left_out}


def _split_sections(page: str) -> tuple[list[str], dict[str, list[str]]]:
    """The lines before the first `## ` heading, and each section's lines by heading."""
    preamble: list[str] = []
    sections: dict[str, list[str]] = {}
    current = preamble
    for line in page.split("\n"):
        if line.startswith("## "):
            current = sections.setdefault(line.removeprefix("## "), [])
        current.append(line)
    return preamble, sections


def _kept(
    name: str, title: str, section: list[str], targets: list[str], preamble: list[str]
) -> dict[str, Any]:
    """A section without data as text: its summary rows (found by their link to it), whether
    it ran at quick sizes and the cores the shared-machine warning lists for it."""
    link = f"](#{_anchor(title, name)})"
    met = {text: flag for flag, text in MET_TEXT.items()}
    cores = _shared_cores(preamble).get(name)
    return {
        "kept_text": "\n".join(section).rstrip("\n"),
        "targets": [
            {"row": row, "met": met[row.rsplit("|", 2)[1].strip()]}
            for row in targets
            if link in row
        ],
        "figures": {} if cores is None else {"other_cpu_cores": {"value": cores}},
        "run": {"quick": any(QUICK_SIZES in line for line in section)},
    }


def _shared_cores(preamble: list[str]) -> dict[str, float]:
    """The cores `_shared_machine_warning` lists, by measurement."""
    for line in preamble:
        listed = re.search(r"during some measurements \((.+) cores on average, of ", line)
        if listed:
            pairs = (item.rsplit(" ", 1) for item in listed[1].split(", "))
            return {name: float(cores) for name, cores in pairs}
    return {}


def format_value(value: Value, unit: str = "") -> str:
    if value is None:
        return "n/a"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        text = f"{value:,}"
    elif isinstance(value, float):
        text = _format_float(value)
    else:
        return str(value)
    return f"{text} {unit}".strip()


def _format_float(value: float) -> str:
    if math.isnan(value):
        return "n/a"
    magnitude = abs(value)
    if magnitude >= 1000:
        return f"{value:,.0f}"
    if magnitude >= 100:
        return f"{value:.1f}"
    if magnitude >= 1 or magnitude == 0:
        return f"{value:.2f}"
    return f"{value:.3g}"


def _plain(value: Any) -> Any:
    """numpy scalars -> Python; NaN/inf -> None (JSON has neither)."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _plain_tree(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _plain_tree(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain_tree(v) for v in value]
    return _plain(value)
