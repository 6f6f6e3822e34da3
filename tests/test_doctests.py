"""The packages' doctests are collected with the tests (pyproject.toml's pytest options), and
collecting them imports no module without an example (conftest.py): no Keras, no TensorFlow."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("service", "models", "training")

# Collects in a fresh interpreter, then says whether Keras was imported on the way.
COLLECT = """
import sys
import pytest
status = pytest.main(["--collect-only", "-q", "-p", "no:cacheprovider", *sys.argv[1:]])
print("keras imported:", "keras" in sys.modules)
sys.exit(status)
"""


def collected(*paths: str) -> list[str]:
    result = subprocess.run(
        [sys.executable, "-c", COLLECT, *paths],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "keras imported: False" in result.stdout.splitlines(), result.stdout
    return [line for line in result.stdout.splitlines() if "::" in line]


def modules_with_examples() -> set[str]:
    return {
        path.relative_to(ROOT).as_posix()
        for package in PACKAGES
        for path in (ROOT / package).rglob("*.py")
        if ">>>" in path.read_text(encoding="utf-8")
    }


def test_every_module_with_an_example_has_its_doctests_collected() -> None:
    items = collected(*PACKAGES)
    assert "service/publish/rucio.py::service.publish.rucio.build_rucio_table" in items
    assert {item.split("::")[0] for item in items} == modules_with_examples()
