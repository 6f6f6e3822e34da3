"""`python -m benchmarks [--quick] [--only ingest,cycle,...] [--output out/bench]`.

`main(argv)` is the entry point (a `nettel bench` command can call it as is). Exit status: 0 when
every selected measurement ran (targets missed still count as ran), 1 when one failed, 2 on bad
arguments.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
import traceback
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

from benchmarks.context import SuiteContext
from benchmarks.environment import REPO_ROOT, describe_environment
from benchmarks.interference import other_cores, sample_cpu
from benchmarks.machine_speed import reference_seconds
from benchmarks.measurements import (
    api,
    cycle,
    freshness,
    ingest,
    ingest_rabbitmq,
    link_flood,
    memory,
    start,
)
from benchmarks.model import model_description
from benchmarks.report import (
    MeasurementResult,
    build_report,
    format_value,
    render_markdown,
    write_json,
)
from benchmarks.sizes import FULL, QUICK

MEASUREMENTS: dict[str, ModuleType] = {
    module.NAME: module
    for module in (ingest, ingest_rabbitmq, cycle, memory, link_flood, api, freshness, start)
}
DEFAULT_OUTPUT = REPO_ROOT / "out" / "bench"
DEFAULT_DOCS = REPO_ROOT / "docs" / "performance.md"


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.from_report:
        return _render_only(args.from_report, _docs_path(args))
    selected = _selected(args.only)
    if selected is None:
        print(f"benchmarks: --only takes names from {', '.join(MEASUREMENTS)}", file=sys.stderr)
        return 2
    ctx = SuiteContext(
        QUICK if args.quick else FULL, args.output, args.quick, _load_generator(args)
    )
    return _run_suite(ctx, selected, _docs_path(args))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks", description="nettel's performance suite", allow_abbrev=False
    )
    parser.add_argument("--quick", action="store_true", help="tiny sizes (smoke test)")
    parser.add_argument(
        "--only", default="", help=f"comma-separated subset of {','.join(MEASUREMENTS)}"
    )
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT, help="report directory")
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
    names = [name.strip() for name in only.split(",") if name.strip()] or list(MEASUREMENTS)
    return names if all(name in MEASUREMENTS for name in names) else None


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


def _run_suite(ctx: SuiteContext, selected: list[str], docs: Path | None) -> int:
    environment = describe_environment(ctx.load_generator, model_description())
    environment["reference_start"] = reference_seconds()
    results: list[MeasurementResult] = []
    errors: dict[str, str] = {}
    for name in selected:
        ctx.log(f"--- {name} ---")
        outcome = _run_one(ctx, MEASUREMENTS[name])
        if isinstance(outcome, MeasurementResult):
            results.append(outcome)
        else:
            errors[name] = outcome
            ctx.log(f"{name} FAILED: {outcome.splitlines()[-1]}")
    environment["reference_end"] = reference_seconds()
    duration = time.monotonic() - ctx.began
    report = build_report(environment, results, errors, quick=ctx.quick, duration_seconds=duration)
    write_json(report, ctx.output / "report.json")
    if docs is not None:
        docs.parent.mkdir(parents=True, exist_ok=True)
        docs.write_text(render_markdown(report))
    _print_summary(report, ctx.output / "report.json", docs)
    return 1 if errors else 0


def _run_one(ctx: SuiteContext, module: ModuleType) -> MeasurementResult | str:
    """Run one measurement; its result with the CPU other processes took, or a traceback."""
    shutil.rmtree(ctx.work, ignore_errors=True)
    ctx.work.mkdir(parents=True, exist_ok=True)
    ctx.logs.mkdir(parents=True, exist_ok=True)
    before = sample_cpu()
    try:
        result: MeasurementResult = module.run(ctx)
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


def _print_summary(report: dict, json_path: Path, docs: Path | None) -> None:
    for name, measurement in report["measurements"].items():
        for t in measurement["targets"]:
            met = {True: "met", False: "NOT MET", None: "not measured"}[t["met"]]
            value = format_value(t["value"], t["unit"])
            print(f"{name:10} {t['label']:45} {value:>16}  {t['comparison']} {t['limit']:g}  {met}")
    for name in report["errors"]:
        print(f"{name:10} FAILED (traceback in {json_path})")
    print(f"report: {json_path}" + (f"; docs: {docs}" if docs else ""))


def _render_only(report_path: Path, docs: Path | None) -> int:
    report = json.loads(report_path.read_text())
    target = docs or DEFAULT_DOCS
    target.write_text(render_markdown(report))
    print(f"docs: {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
