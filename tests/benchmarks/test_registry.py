"""The suite's registry, sizes, report merging and rendering, and the docs that quote it: unit
level, no measurement runs."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from benchmarks.__main__ import CORE, GROUPS, MEASUREMENTS, _selected, main, measurement
from benchmarks.report import (
    MeasurementResult,
    Outcomes,
    UnreadablePage,
    build_report,
    merge_reports,
    read_page,
    render_markdown,
)
from benchmarks.sizes import FULL, QUICK

REPO_ROOT = Path(__file__).resolve().parents[2]
MEASUREMENT_DIR = REPO_ROOT / "benchmarks" / "measurements"
#: Helpers that run as processes of their own (`python -m`), the only entry points beside the
#: suite's.
PROCESS_HELPERS = {"bare_consumer.py", "paced_producer.py", "memory_probe.py"}


def test_every_measurement_module_is_registered_under_its_name() -> None:
    modules = {p.stem for p in MEASUREMENT_DIR.glob("*.py") if p.stem != "__init__"}
    assert set(MEASUREMENTS) == modules
    for name in MEASUREMENTS:
        module = measurement(name)
        assert module.NAME == name and callable(module.run)


def test_the_suite_is_the_only_way_in() -> None:
    entry_points = {
        p.relative_to(REPO_ROOT).as_posix()
        for p in (REPO_ROOT / "benchmarks").rglob("*.py")
        if "__main__" in p.read_text() and p.name != "__main__.py"
    }
    assert {Path(p).name for p in entry_points} == PROCESS_HELPERS


def test_groups_cover_every_measurement_once() -> None:
    assert set(GROUPS["core"]) | set(GROUPS["extra"]) == set(GROUPS["all"]) == set(MEASUREMENTS)
    assert not set(GROUPS["core"]) & set(GROUPS["extra"])


def test_only_expands_groups_in_registry_order() -> None:
    assert _selected("") == list(CORE)
    assert _selected("all") == list(MEASUREMENTS)
    assert _selected("warm_start,start,core") == [*CORE, "warm_start"]
    assert _selected("ingest,no_such_thing") is None


def test_quick_sizes_are_no_larger_than_full_ones() -> None:
    for field in dataclasses.fields(FULL):
        full, quick = getattr(FULL, field.name), getattr(QUICK, field.name)
        if isinstance(full, tuple):
            full, quick = max(full), max(quick)
        if isinstance(full, int | float):
            assert quick <= full, field.name


def _report(
    names: list[str], date: str, *, quick: bool = False, rate: float = 12_345.6, **outcomes: Any
) -> dict:
    results = [_result(name, rate) for name in names]
    for result in results:
        result.add("other_cpu_cores", "CPU used by other processes", 0.5, "cores")
    environment = _environment(date)
    return build_report(
        environment, results, Outcomes(**outcomes), quick=quick, duration_seconds=1.0
    )


def _result(name: str, rate: float) -> MeasurementResult:
    result = MeasurementResult(name, f"Title of {name}", f"Method of {name}.")
    result.add("rate", "rate", rate, "msg/s")
    result.target("rate", "rate", rate, ">=", 10_000, "msg/s")
    return result


def _environment(date: str) -> dict[str, Any]:
    keys = "cpu_model cores ram_bytes os python numpy stomp_py orjson fastapi uvicorn".split()
    return {key: "x" for key in keys} | {
        "ram_bytes": 2**30,
        "activemq": "5",
        "java": "17",
        "load_generator": "wrk",
        "git_commit": "abc123",
        "git_dirty": False,
        "model": "none",
        "date": date,
    }


def test_a_partial_run_replaces_only_its_own_sections() -> None:
    earlier = _report(["ingest", "cycle", "start"], "2026-01-01")
    later = _report(["start"], "2026-02-02", errors={"cycle": "Traceback\nBoom"})
    merged = merge_reports(earlier, later, list(MEASUREMENTS))
    assert list(merged["measurements"]) == ["ingest", "start"]
    assert merged["measurements"]["ingest"]["run"]["date"] == "2026-01-01"
    assert merged["measurements"]["start"]["run"]["date"] == "2026-02-02"
    assert merged["errors"] == {"cycle": "Traceback\nBoom"}
    assert (merged["targets_met"], merged["targets_total"]) == (2, 2)
    skipped = _report([], "2026-03-03", skipped={"ingest": "no broker"})
    again = merge_reports(merged, skipped, list(MEASUREMENTS))
    assert list(again["measurements"]) == ["start"] and again["skipped"] == {"ingest": "no broker"}


def test_rendering_links_targets_to_sections_and_says_when_each_ran() -> None:
    report = merge_reports(
        _report(["ingest"], "2026-01-01"),
        _report(["spark_dataset"], "2026-02-02", quick=True, skipped={"rucio_sync": "no venv"}),
        list(MEASUREMENTS),
    )
    markdown = render_markdown(report)
    headings = re.findall(r"^## (.+)$", markdown, flags=re.MULTILINE)
    assert "Title of ingest (`ingest`)" in headings
    anchors = {_github_anchor(h) for h in headings}
    links = re.findall(r"\]\(#([^)]+)\)", markdown)
    assert len(links) == 2 and set(links) <= anchors
    assert "[spark_dataset (quick)]" in markdown
    assert "_Measured 2026-01-01 at `abc123`: `python -m benchmarks --only ingest`._" in markdown
    assert "`python -m benchmarks --only spark_dataset --quick`" in markdown
    assert "## Not run" in markdown and "- **rucio_sync**: no venv" in markdown
    assert "12,346 msg/s" in markdown


def _github_anchor(heading: str) -> str:
    text = heading.lower()
    return "".join(c for c in text if c.isalnum() or c in " -_").replace(" ", "-")


def test_from_report_renders_a_saved_report(tmp_path: Path) -> None:
    saved, docs = tmp_path / "report.json", tmp_path / "performance.md"
    saved.write_text(json.dumps(_report(["cycle"], "2026-01-01")))
    assert main(["--from-report", str(saved), "--docs", str(docs)]) == 0
    assert docs.read_text() == render_markdown(json.loads(saved.read_text()))


def test_the_page_carries_its_report_exactly() -> None:
    report = merge_reports(
        _report(["ingest", "cycle"], "2026-01-01"),
        _report(
            ["spark_dataset"],
            "2026-02-02",
            quick=True,
            errors={"start": "Traceback\n  x --> y\nValueError: a > b"},
            skipped={"rucio_sync": "no venv"},
        ),
        list(MEASUREMENTS),
    )
    page = render_markdown(report)
    assert read_page(page) == report
    assert render_markdown(read_page(page)) == page
    comments = [line for line in page.split("\n") if "<!--" in line or "-->" in line]
    assert len(comments) == 4
    assert all(line.startswith("<!-- benchmark-") and line.count("-->") == 1 for line in comments)


def _without_data(page: str, *names: str) -> str:
    """`page` as rendered before it carried data: all of it, or only `names`' sections."""
    if not names:
        return re.sub(r"^<!-- benchmark-.*\n", "", page, flags=re.MULTILINE)
    heading = rf"^(## .* \(`(?:{'|'.join(names)})`\)\n)"
    return re.sub(heading + r"<!-- benchmark-data .*\n", r"\1", page, flags=re.MULTILINE)


def test_a_partial_run_keeps_sections_without_data_verbatim() -> None:
    earlier = merge_reports(
        _report(["ingest", "cycle"], "2026-01-01"),
        _report(["spark_dataset"], "2026-01-02", quick=True),
        list(MEASUREMENTS),
    )
    later = _report(["cycle"], "2026-02-02", rate=9_000.0)
    legacy = read_page(_without_data(render_markdown(earlier)))
    merged = merge_reports(legacy, later, list(MEASUREMENTS))
    page = render_markdown(merged)
    expected = render_markdown(merge_reports(earlier, later, list(MEASUREMENTS)))
    assert page == _without_data(expected, "ingest", "spark_dataset")
    assert (
        "targets met: **2 of 3**" in page and "| 9,000 msg/s | >= 10,000 msg/s | **no** |" in page
    )
    assert "(ingest 0.50, cycle 0.50, spark_dataset 0.50 cores on average" in page
    assert render_markdown(read_page(page)) == page


@pytest.fixture
def fake_cycle(monkeypatch: pytest.MonkeyPatch) -> None:
    """`--only cycle` measures 9,000 msg/s (target missed) and describes the machine as
    `_environment` does."""
    fake = SimpleNamespace(NAME="cycle", run=lambda ctx: _result("cycle", 9_000.0))
    monkeypatch.setattr(
        "benchmarks.__main__.measurement",
        lambda name: fake if name == "cycle" else measurement(name),
    )
    monkeypatch.setattr(
        "benchmarks.__main__.describe_environment", lambda *_: _environment("2026-02-02")
    )
    monkeypatch.setattr("benchmarks.__main__.reference_seconds", lambda *_: None)
    monkeypatch.setattr("benchmarks.__main__.model_description", lambda: "none")


def _run_cycle(tmp_path: Path, docs: Path, *flags: str) -> int:
    output = ["--output", str(tmp_path / "out"), "--docs", str(docs)]
    return main(["--only", "cycle", *output, "--load-generator", "python", *flags])


def test_a_partial_run_without_report_json_merges_into_the_page(
    tmp_path: Path, fake_cycle: None, capsys: pytest.CaptureFixture[str]
) -> None:
    earlier = _without_data(render_markdown(_report(["ingest", "cycle"], "2026-01-01")))
    docs = tmp_path / "performance.md"
    docs.write_text(earlier)
    assert _run_cycle(tmp_path, docs) == 0
    page = docs.read_text()
    ingest = re.compile(r"^(?:## .*\(`ingest`\)\n(?:(?!## ).*\n)*|\| \[ingest\].*\n)", re.MULTILINE)
    assert ingest.findall(page) == ingest.findall(earlier) and len(ingest.findall(page)) == 2
    assert (
        "| [cycle](#title-of-cycle-cycle) | rate | 9,000 msg/s | >= 10,000 msg/s | **no** |" in page
    )
    assert "targets met: **1 of 2**" in page
    warnings = capsys.readouterr().err
    assert warnings.count("no data for") == 1 and "no data for ingest (rendered before" in warnings
    assert json.loads((tmp_path / "out" / "report.json").read_text()) == read_page(page)


@pytest.mark.parametrize(
    "page",
    [
        "# Notes\n\nWritten by hand.\n",
        "# Performance\n<!-- benchmark-run {broken -->\n",
        "# Performance\n\n## Title of cycle (`cycle`)\n\n## Not run\n\n- **ingest**: no broker\n",
    ],
)
def test_a_page_that_cannot_be_read_back_is_not_overwritten(
    page: str, tmp_path: Path, fake_cycle: None, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(UnreadablePage):
        read_page(page)
    docs = tmp_path / "performance.md"
    docs.write_text(page)
    assert _run_cycle(tmp_path, docs) == 2
    assert docs.read_text() == page and not (tmp_path / "out").exists()
    assert f"{docs} cannot be read back" in capsys.readouterr().err
    assert _run_cycle(tmp_path, docs, "--fresh") == 0
    assert read_page(docs.read_text())["targets_met"] == 0


def test_the_committed_page_has_a_section_for_every_measurement() -> None:
    page = (REPO_ROOT / "docs" / "performance.md").read_text()
    for name in MEASUREMENTS:
        assert f"(`{name}`)\n" in page, name


def test_docs_quote_the_suite_not_standalone_scripts() -> None:
    pages = [REPO_ROOT / "README.md", *(REPO_ROOT / "docs").glob("*.md")]
    for page in pages:
        text = page.read_text()
        assert not re.search(r"python -m benchmarks\.\w", text), page.name
        for name in re.findall(r"--only ([a-z_,]+)", text):
            assert _selected(name) is not None, (page.name, name)


def test_links_into_the_page_name_its_sections() -> None:
    page = (REPO_ROOT / "docs" / "performance.md").read_text()
    anchors = {_github_anchor(h) for h in re.findall(r"^## (.+)$", page, flags=re.MULTILINE)}
    for doc in [REPO_ROOT / "README.md", *(REPO_ROOT / "docs").glob("*.md")]:
        for anchor in re.findall(r"performance\.md#([a-z0-9_-]+)", doc.read_text()):
            assert anchor in anchors, (doc.name, anchor)
