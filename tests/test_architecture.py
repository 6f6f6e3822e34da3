"""The data flow the README draws holds in the code: read every import and check its direction.

The packages stand on floors, each importing only from the floors below it:

    service < simulation < training < devtools < benchmarks

`service` (what `nettel serve` runs) imports none of the others. `simulation` (the numpy
simulators and the demo feed's command options) may use service's config, parser and state.
`training` builds datasets from the simulators and real archives through service's ingest and
analysis, and holds the commands that run it (simulate, train, evaluate, dataset), which the
`nettel` command finds through entry points instead of importing them. `devtools` (brokers,
archive server, `nettel serve` processes for tests) stands above what it serves, though today it
imports none of it; `benchmarks` measures everything, with devtools. These rules count every
import, also those inside functions and `if TYPE_CHECKING:` blocks, and no module of these
packages imports one that imports it back.

broker -> parse -> topology -> state -> ingest -> persistence -> analysis -> model -> matrix ->
publish: each folder of `service` imports only from folders before it (no import loop), and the
core folders (parse, topology, state, analysis, model, matrix) never from the adapters (broker,
ingest, publish) or the composition root (runtime, cli). Shared modules (errors, config, ...)
may be imported from anywhere. Serving imports neither `training` nor the simulators, Keras,
TensorFlow or h5py, and nothing shipped imports the development packages.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: Top-level modules of `service` that any part may import (each imports only shared modules).
SHARED = {"errors", "config", "log_format", "memory", "build_info", "lifecycle", "bounded_yaml"}
#: What each folder of `service` may import from `service`, beyond SHARED.
ALLOWED = {
    "broker": set(),
    "parse": set(),
    "topology": {"parse"},
    "state": {"parse", "topology"},
    "ingest": {"broker", "parse", "topology", "state"},
    "persistence": {"broker", "parse", "topology", "state", "ingest"},
    "analysis": {"parse", "state"},
    "model": {"analysis"},
    "matrix": {"parse", "state", "analysis"},
    "alarms": {"parse", "topology", "state", "analysis", "matrix"},
    "rucio": set(),
    "publish": {
        "broker", "ingest", "parse", "topology", "state", "persistence", "analysis", "model",
        "matrix", "alarms",
    },
    #: The `nettel` command's subcommands (beside cli.py): like it, they may import any part.
    "commands": {
        "broker", "parse", "topology", "state", "ingest", "persistence", "analysis", "model",
        "matrix", "alarms", "rucio", "publish", "runtime",
    },
}  # fmt: skip
#: The packages from the lowest floor up: each imports only from the ones before it.
FLOORS = ("service", "simulation", "training", "devtools", "benchmarks")
DEVELOPMENT_PACKAGES = {"devtools", "tests", "benchmarks"}
#: Heavy packages serving never imports: training's and the simulators, and the HDF5 reader (a
#: model bundle's weights load it when they are read, not when code is imported).
NOT_FOR_SERVING = ("training", "simulation", "keras", "tensorflow", "h5py", "sklearn", "pandas")
#: What `nettel serve` imports to start.
SERVING_MODULES = (
    "service.cli",
    "service.runtime",
    "service.publish.app",
    "service.publish.lifespan",
)


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


def sources(package: str, root: Path = ROOT) -> list[Path]:
    return sorted((root / package).rglob("*.py"))


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


def module_graph(packages: tuple[str, ...], root: Path = ROOT) -> dict[str, set[str]]:
    """Module -> the modules of `packages` it imports, at any depth (inside functions and `if
    TYPE_CHECKING:` blocks too: a loop through them still ties the modules to each other)."""
    paths = {
        ".".join(path.with_suffix("").relative_to(root).parts): path
        for package in packages
        for path in sources(package, root)
    }
    names = {name.removesuffix(".__init__"): path for name, path in paths.items()}
    graph: dict[str, set[str]] = {}
    for name, path in names.items():
        imported: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                imported.add(node.module)
                imported.update(f"{node.module}.{alias.name}" for alias in node.names)
            elif isinstance(node, ast.Import):
                imported.update(alias.name for alias in node.names)
        graph[name] = {module for module in imported if module in names and module != name}
    return graph


def import_loop(graph: dict[str, set[str]]) -> list[str] | None:
    """One chain of imports that leads back to where it started, if any (depth-first)."""
    done: set[str] = set()

    def visit(module: str, chain: list[str]) -> list[str] | None:
        if module in chain:
            return chain[chain.index(module) :] + [module]
        if module in done:
            return None
        for imported in sorted(graph[module]):
            if loop := visit(imported, [*chain, module]):
                return loop
        done.add(module)
        return None

    return next((loop for module in sorted(graph) if (loop := visit(module, []))), None)


@pytest.mark.parametrize("floor", FLOORS)
def test_each_package_imports_only_from_the_floors_below_it(floor: str) -> None:
    below = FLOORS[: FLOORS.index(floor)]
    wrong = [
        f"{path.relative_to(ROOT)} imports {module}"
        for path in sources(floor)
        for module in imported_modules(path)
        if module.split(".")[0] in FLOORS and module.split(".")[0] not in {floor, *below}
    ]
    assert not wrong, "\n".join(wrong)


def test_no_module_imports_one_that_imports_it_back() -> None:
    """Over all the floors, so a loop through devtools' brokers or training's commands counts."""
    assert import_loop(module_graph(FLOORS)) is None


def test_an_import_loop_is_found() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert import_loop(graph) == ["a", "b", "c", "a"]
    assert import_loop({"a": {"b"}, "b": set()}) is None


def test_a_loop_through_a_type_checking_import_is_found(tmp_path: Path) -> None:
    (tmp_path / "tools").mkdir()
    (tmp_path / "tools" / "broker.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from tools.tls import Tls\n"
    )
    (tmp_path / "tools" / "tls.py").write_text("def f():\n    from tools import broker\n")
    loop = import_loop(module_graph(("tools",), tmp_path))
    assert loop == ["tools.broker", "tools.tls", "tools.broker"]


def test_shared_modules_import_only_shared_modules() -> None:
    wrong = []
    for name in sorted(SHARED):
        path = ROOT / "service" / f"{name}.py"
        for module in imported_modules(path):
            part = service_part(module)
            if part is not None and part not in SHARED:
                wrong.append(f"{path.relative_to(ROOT)} imports {module}")
    assert not wrong, "\n".join(wrong)


def test_serving_imports_neither_training_nor_keras_nor_h5py() -> None:
    """Nor the simulators: `nettel serve`'s parser loads none of the commands other packages add."""
    probe = (
        "import importlib, sys\n"
        f"for name in {SERVING_MODULES!r}: importlib.import_module(name)\n"
        "sys.modules['service.cli'].build_parser('serve').parse_args(['serve'])\n"
        f"print(sorted(m for m in sys.modules if m.split('.')[0] in {NOT_FOR_SERVING!r}))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()
    assert loaded == "[]"


def test_simulation_is_numpy_only() -> None:
    wrong = [
        f"{path.relative_to(ROOT)} imports {module}"
        for path in sources("simulation")
        for module in imported_modules(path)
        if module.split(".")[0] in {"training", "keras", "tensorflow", "sklearn", "pandas"}
        or service_part(module)
        not in {None, "errors", "parse", "state", "analysis", "config", "log_format"}
    ]
    assert not wrong, "\n".join(wrong)


def test_shipped_code_imports_no_development_package() -> None:
    wrong = [
        f"{path.relative_to(ROOT)} imports {module}"
        for package in ("service", "models", "training", "simulation")
        for path in sources(package)
        for module in imported_modules(path)
        if module.split(".")[0] in DEVELOPMENT_PACKAGES
    ]
    assert not wrong, "\n".join(wrong)


def test_a_wrong_import_is_found(tmp_path: Path) -> None:
    module = tmp_path / "cycle.py"
    module.write_text("def f():\n    from service.ingest.backlog import BacklogWatch\n")
    assert service_part(next(iter(imported_modules(module)))) == "ingest"
