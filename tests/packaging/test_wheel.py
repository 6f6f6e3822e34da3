"""What `pip wheel .` puts in nettel's wheel: the serving packages, never the development tools.

Each build runs on a copy of the checkout (as a maintainer has it, devtools/ and tests/ included)
so builds never write into the working tree, with the venv's setuptools (no build isolation).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Mapping
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
LOCAL_STATE = shutil.ignore_patterns(
    ".git", ".venv", "build", "dist", "run", "out", "*.egg-info", "__pycache__", "*.so", ".*cache"
)


def build_wheel(work: Path, env: Mapping[str, str] | None = None) -> Path:
    """Build the wheel from a copy of the checkout in `work`; return its path."""
    source = work / "src"
    shutil.copytree(REPO_ROOT, source, ignore=LOCAL_STATE)
    result = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation"]
        + ["--disable-pip-version-check", "-w", str(work / "dist"), str(source)],
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    [wheel] = (work / "dist").glob("nettel-*.whl")
    return wheel


def file_names(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as archive:
        return archive.namelist()


def scanner_binaries(names: list[str]) -> list[str]:
    return [n for n in names if n.startswith("service/parse/_histogram_scan") and ".so" in n]


@pytest.fixture(scope="module")
def wheel_names(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    return file_names(build_wheel(tmp_path_factory.mktemp("wheel")))


def test_wheel_holds_the_serving_packages(wheel_names: list[str]) -> None:
    for name in (
        "service/__init__.py",
        "service/cli.py",
        "service/parse/perfsonar.py",
        "service/parse/histogram_scan.py",
        "service/web/index.html",
        "models/__init__.py",
        "models/bundle/model.keras",
        "models/bundle/scaler.json",
        "models/bundle/model_card.json",
        "models/bundle/calibration.json",
    ):
        assert name in wheel_names, f"{name} missing from the wheel"


def test_wheel_holds_the_family_c_scenario_that_cppyy_compiles(wheel_names: list[str]) -> None:
    assert "simulation/ns3_scenario.cpp" in wheel_names  # `nettel simulate --family C` reads it


def test_wheel_holds_no_development_tools(wheel_names: list[str]) -> None:
    development = [
        name
        for name in wheel_names
        if name.split("/")[0] in {"devtools", "tests", "benchmarks"}
        or "/devtools/" in name
        or "service_process" in name
        or "activemq" in name
    ]
    assert development == []


@pytest.mark.skipif(shutil.which("gcc") is None, reason="no C compiler to build the scanner")
def test_wheel_built_with_a_compiler_holds_the_scanner(wheel_names: list[str]) -> None:
    assert len(scanner_binaries(wheel_names)) == 1


@pytest.mark.slow
def test_wheel_builds_without_a_c_compiler_and_parses_in_python(tmp_path: Path) -> None:
    wheel = build_wheel(tmp_path, env={"CC": "/bin/false"})  # every compile fails
    names = file_names(wheel)
    assert scanner_binaries(names) == []
    assert "service/parse/histogram_scan.py" in names and "models/bundle/model.keras" in names

    target = tmp_path / "installed"
    install = [sys.executable, "-m", "pip", "install", "--no-deps", "--disable-pip-version-check"]
    subprocess.run([*install, "--target", str(target), str(wheel)], check=True, timeout=120)
    probe = "import service.parse.histogram_scan as s; print(s.__file__, s.SCANNER_IMPLEMENTATION)"
    result = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(target)},
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    location, implementation = result.stdout.split()
    assert Path(location).is_relative_to(target), "imported the checkout, not the wheel"
    assert implementation == "python"
