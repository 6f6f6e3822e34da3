"""`python -m benchmarks [--quick] [--only NAMES or GROUPS] [--output out/bench] [--fresh]`.

`main(argv)` is the entry point (a `nettel bench` command can call it as is). Exit status: 0 when
every selected measurement ran or was skipped for a missing prerequisite (targets missed still
count as ran), 1 when one failed, 2 on bad arguments or a docs page that a partial run cannot
merge into (nothing is measured then).
"""

from __future__ import annotations

import argparse
import importlib
import json
import shutil
import subprocess
import sys
import time
import traceback
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

from benchmarks.context import SuiteContext, Unavailable
from benchmarks.report import (
    MeasurementResult,
    Outcomes,
    UnreadablePage,
    build_report,
    format_value,
    merge_reports,
    read_page,
    render_markdown,
    write_json,
)
from benchmarks.sizes import FULL, QUICK
from benchmarks.support.environment import REPO_ROOT, describe_environment
from benchmarks.support.interference import other_cores, sample_cpu
from benchmarks.support.machine_speed import REPEATS, reference_seconds
from benchmarks.support.model import model_description

#: The suite's measurements, in the order they run and render: each is the module
#: `benchmarks.measurements.<name>`, imported only when it runs (`measurement`), so a run pays
#: for no other measurement's imports (scipy, scikit-learn, ns-3).
MEASUREMENTS: tuple[str, ...] = (
    "ingest",
    "ingest_rabbitmq",
    "ingest_mixed",
    "cycle",
    "memory",
    "link_flood",
    "api",
    "freshness",
    "start",
    "warm_start",
    "backfill",
    "front_door",
    "ha_failover",
    "ha_failover_rabbitmq",
    "pscheduler_ingest",
    "topology_refresh",
    "alto_endpoint_cost",
    "alto_updates",
    "rucio_sync",
    "rucio_staleness",
    "served_calibration",
    "decisions",
    "alarms",
    "alarm_detection",
    "result_alarms",
    "cycle_results",
    "spark_dataset",
    "spark_dataset_archive",
)


def measurement(name: str) -> ModuleType:
    """The module of measurement `name` (one of `MEASUREMENTS`)."""
    return importlib.import_module(f"benchmarks.measurements.{name}")


#: What runs without --only: the service's hot paths, about ten minutes on two cores.
CORE = ("ingest", "ingest_rabbitmq", "cycle", "memory", "link_flood", "api", "freshness", "start")
#: Names --only takes besides the measurements'.
GROUPS: dict[str, tuple[str, ...]] = {
    "core": CORE,
    "extra": tuple(name for name in MEASUREMENTS if name not in CORE),
    "all": tuple(MEASUREMENTS),
}
DEFAULT_OUTPUT = REPO_ROOT / "out" / "bench"
QUICK_OUTPUT = REPO_ROOT / "out" / "bench-quick"
DEFAULT_DOCS = REPO_ROOT / "docs" / "performance.md"


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.from_report:
        return _render_only(args.from_report, _docs_path(args))
    selected = _selected(args.only)
    if selected is None:
        known = ", ".join([*GROUPS, *MEASUREMENTS])
        print(f"benchmarks: --only takes names from {known}", file=sys.stderr)
        return 2
    output = args.output or (QUICK_OUTPUT if args.quick else DEFAULT_OUTPUT)
    ctx = SuiteContext(QUICK if args.quick else FULL, output, args.quick, _load_generator(args))
    return _run_suite(ctx, selected, _docs_path(args), merge=not args.fresh)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description="nettel's performance suite. Without --only it runs the core group (about "
        "ten minutes on two cores); `--only all` runs every measurement (over an hour: "
        "spark_dataset_archive alone takes ~20 minutes and ~14 GB). Results are merged into the "
        "report the docs page carries (or, with --docs none, the output's report.json), so a "
        "partial run replaces only its own sections.",
        allow_abbrev=False,
    )
    parser.add_argument("--quick", action="store_true", help="tiny sizes (smoke test)")
    groups = f"core: {','.join(CORE)}; extra: {','.join(GROUPS['extra'])}; all: both"
    parser.add_argument(
        "--only",
        default="core",
        help=f"comma-separated measurements or groups (default core). Groups: {groups}",
    )
    parser.add_argument(
        "--output",
        type=Path,
        default=None,
        help="report directory (default out/bench, out/bench-quick with --quick)",
    )
    parser.add_argument(
        "--fresh",
        action="store_true",
        help="start a new report instead of merging into the docs page's (or report.json's)",
    )
    parser.add_argument(
        "--docs",
        default=None,
        help="markdown file to write ('none' to skip); default docs/performance.md, "
        "none with --quick",
    )
    parser.add_argument(
        "--load-generator",
        choices=("auto", "wrk", "python"),
        default="auto",
        help="HTTP load generator for the api measurement (auto: wrk, installed if missing)",
    )
    parser.add_argument("--from-report", type=Path, help="only re-render DOCS from a report.json")
    return parser


def _selected(only: str) -> list[str] | None:
    """The measurements named, groups expanded, in the registry's order; None if one is
    unknown."""
    names = [name.strip() for name in only.split(",") if name.strip()] or list(CORE)
    if not all(name in MEASUREMENTS or name in GROUPS for name in names):
        return None
    wanted = {m for name in names for m in GROUPS.get(name, (name,))}
    return [name for name in MEASUREMENTS if name in wanted]


def _docs_path(args: argparse.Namespace) -> Path | None:
    if args.docs is None:
        return None if args.quick else DEFAULT_DOCS
    return None if args.docs.lower() == "none" else Path(args.docs)


def _load_generator(args: argparse.Namespace) -> str:
    if args.load_generator != "auto":
        return args.load_generator
    return "wrk" if ensure_wrk() else "python"


def ensure_wrk() -> bool:
    """wrk on PATH, installed with apt-get when missing (False if that fails)."""
    if shutil.which("wrk"):
        return True
    try:
        subprocess.run(
            ["apt-get", "install", "-y", "wrk"], capture_output=True, timeout=300, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return shutil.which("wrk") is not None


def _run_suite(ctx: SuiteContext, selected: list[str], docs: Path | None, *, merge: bool) -> int:
    json_path = ctx.output / "report.json"
    try:
        earlier = _earlier_report(json_path, docs) if merge else None
    except UnreadablePage as unreadable:
        print(
            f"benchmarks: {docs} cannot be read back: {unreadable}. A partial run would lose its "
            "other sections; --fresh overwrites it.",
            file=sys.stderr,
        )
        return 2
    environment = describe_environment(ctx.load_generator, model_description())
    # --quick figures are not representative anyway: one pass of the reference, at the start only
    environment["reference_start"] = reference_seconds(1 if ctx.quick else REPEATS)
    results: list[MeasurementResult] = []
    outcomes = Outcomes()
    with ctx.closing:  # what the measurements shared
        for name in selected:
            ctx.log(f"--- {name} ---")
            outcome = _run_one(ctx, measurement(name))
            if isinstance(outcome, MeasurementResult):
                results.append(outcome)
            elif isinstance(outcome, Unavailable):
                outcomes.skipped[name] = str(outcome)
                ctx.log(f"{name} NOT RUN: {outcome}")
            else:
                outcomes.errors[name] = outcome
                ctx.log(f"{name} FAILED: {outcome.splitlines()[-1]}")
    environment["reference_end"] = (
        environment["reference_start"] if ctx.quick else reference_seconds(REPEATS)
    )
    duration = time.monotonic() - ctx.began
    report = build_report(
        environment, results, outcomes, quick=ctx.quick, duration_seconds=duration
    )
    if earlier is not None:
        report = merge_reports(earlier, report, list(MEASUREMENTS))
        _warn_kept_as_text(report)
    write_json(report, json_path)
    if docs is not None:
        docs.parent.mkdir(parents=True, exist_ok=True)
        docs.write_text(render_markdown(report))
    _print_summary(report, selected, json_path, docs)
    return 1 if outcomes.errors else 0


def _earlier_report(json_path: Path, docs: Path | None) -> dict | None:
    """What this run merges into: the docs page it will overwrite (committed, so never older than
    a report.json left in out/ before a pull), else the output's report.json."""
    if docs is not None and docs.exists():
        return read_page(docs.read_text())
    if json_path.exists():
        return json.loads(json_path.read_text())
    return None


def _warn_kept_as_text(report: dict) -> None:
    """Name the sections kept as text (`read_page`), once per run."""
    as_text = [name for name, m in report["measurements"].items() if "kept_text" in m]
    if as_text:
        print(
            f"benchmarks: no data for {', '.join(as_text)} (rendered before the page carried "
            "it): their sections and summary rows are kept as text until they are measured again",
            file=sys.stderr,
        )


def _run_one(ctx: SuiteContext, module: ModuleType) -> MeasurementResult | Unavailable | str:
    """Run one measurement; its result with the CPU other processes took, why it could not
    run, or a traceback."""
    shutil.rmtree(ctx.work, ignore_errors=True)
    ctx.work.mkdir(parents=True, exist_ok=True)
    ctx.logs.mkdir(parents=True, exist_ok=True)
    before = sample_cpu()
    try:
        result: MeasurementResult = module.run(ctx)
    except Unavailable as missing:
        return missing
    except Exception:
        return traceback.format_exc()
    finally:
        shutil.rmtree(ctx.work, ignore_errors=True)
    after = sample_cpu()
    result.add("wall_seconds", "measurement wall time", after.wall - before.wall, "s")
    result.add(
        "other_cpu_cores",
        "CPU used by other processes meanwhile (machine shared?)",
        other_cores(before, after),
        "cores",
    )
    return result


def _print_summary(report: dict, selected: list[str], json_path: Path, docs: Path | None) -> None:
    """This run's targets and outcomes (the report may hold earlier runs' sections too)."""
    for name in selected:
        for t in report["measurements"].get(name, {}).get("targets", []):
            met = {True: "met", False: "NOT MET", None: "not measured"}[t["met"]]
            value = format_value(t["value"], t["unit"])
            print(f"{name:20} {t['label']:50} {value:>16}  {t['comparison']} {t['limit']:g}  {met}")
        if name in report["errors"]:
            print(f"{name:20} FAILED (traceback in {json_path})")
        if name in report["skipped"]:
            print(f"{name:20} NOT RUN: {report['skipped'][name]}")
    print(f"report: {json_path}" + (f"; docs: {docs}" if docs else ""))


def _render_only(report_path: Path, docs: Path | None) -> int:
    report = json.loads(report_path.read_text())
    target = docs or DEFAULT_DOCS
    target.write_text(render_markdown(report))
    print(f"docs: {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
