"""The data flow the README draws holds in the code: read every import and check its direction.

broker -> ingest -> parse -> state -> analysis -> matrix -> publish: the core folders (parse,
state, analysis, matrix) import only from folders before them and never from the adapters
(broker, ingest, publish) or the composition root (runtime, persistence, cli); ingest drives
parse and state over the broker connection; publish reads the matrix and the runtime. Shared
modules (errors, config, ...) may be imported from anywhere. `models/` sits after analysis;
nothing serving imports `training/` but the `nettel` command, and nothing shipped imports the
development packages.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: Top-level modules of `service` that any part may import (each imports only shared modules).
SHARED = {"errors", "config", "log_format", "memory", "build_info"}
#: What each folder of `service` may import from `service`, beyond SHARED.
ALLOWED = {
    "broker": set(),
    "parse": set(),
    "state": {"parse"},
    "ingest": {"broker", "parse", "state"},
    "analysis": {"parse", "state"},
    "matrix": {"parse", "state", "analysis"},
    "publish": {
        "broker", "ingest", "parse", "state", "analysis", "matrix", "model_slot", "runtime",
    },
}  # fmt: skip
DEVELOPMENT_PACKAGES = {"devtools", "tests", "benchmarks"}


def imported_modules(path: Path) -> set[str]:
    """Absolute names of every module `path` imports (at any depth, lazily or not)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def service_part(module: str) -> str | None:
    """The folder or top-level module of `service` that `module` names, if any."""
    parts = module.split(".")
    return parts[1] if parts[0] == "service" and len(parts) > 1 else None


def sources(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


def test_the_rules_cover_every_folder_of_service() -> None:
    folders = {
        path.name for path in (ROOT / "service").iterdir() if (path / "__init__.py").exists()
    }
    assert folders - {"web"} == set(ALLOWED)


@pytest.mark.parametrize("folder", sorted(ALLOWED))
def test_each_folder_imports_only_from_the_ones_before_it(folder: str) -> None:
    wrong = []
    for path in sources(f"service/{folder}"):
        for module in imported_modules(path):
            part = service_part(module)
            if part is not None and part != folder and part not in SHARED | ALLOWED[folder]:
                wrong.append(f"{path.relative_to(ROOT)} imports {module}")
    assert not wrong, "\n".join(wrong)


def test_shared_modules_import_only_shared_modules_and_models() -> None:
    wrong = []
    for name in sorted(SHARED):
        path = ROOT / "service" / f"{name}.py"
        for module in imported_modules(path):
            part = service_part(module)
            if part is not None and part not in SHARED:
                wrong.append(f"{path.relative_to(ROOT)} imports {module}")
    assert not wrong, "\n".join(wrong)


def test_models_come_after_analysis() -> None:
    wrong = [
        f"{path.relative_to(ROOT)} imports {module}"
        for path in sources("models")
        for module in imported_modules(path)
        if module.split(".")[0] == "training"
        or service_part(module) not in {None, "errors", "parse", "state", "analysis"}
    ]
    assert not wrong, "\n".join(wrong)


def test_only_the_command_line_reaches_into_training() -> None:
    importers = {
        str(path.relative_to(ROOT))
        for package in ("service", "models")
        for path in sources(package)
        if any(module.split(".")[0] == "training" for module in imported_modules(path))
    }
    assert importers <= {"service/cli.py"}


def test_shipped_code_imports_no_development_package() -> None:
    wrong = [
        f"{path.relative_to(ROOT)} imports {module}"
        for package in ("service", "models", "training")
        for path in sources(package)
        for module in imported_modules(path)
        if module.split(".")[0] in DEVELOPMENT_PACKAGES
    ]
    assert not wrong, "\n".join(wrong)


def test_a_wrong_import_is_found(tmp_path: Path) -> None:
    module = tmp_path / "cycle.py"
    module.write_text("def f():\n    from service.ingest.backlog import BacklogWatch\n")
    assert service_part(next(iter(imported_modules(module)))) == "ingest"
