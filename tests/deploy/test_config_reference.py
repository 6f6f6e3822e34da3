"""docs/configuration.md is exactly what scripts/gen_config_reference.py makes from Settings,
documents every field, and names the flags the real `nettel serve` parser accepts."""

from __future__ import annotations

import doctest
import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

from service.cli import ENV_ONLY_SETTINGS, build_parser
from service.config import Settings
from tests.deploy.support import REPO_ROOT

SCRIPT = REPO_ROOT / "scripts" / "gen_config_reference.py"
REFERENCE = REPO_ROOT / "docs" / "configuration.md"
REGENERATE = "run `python scripts/gen_config_reference.py` and commit docs/configuration.md"


@pytest.fixture(scope="module")
def generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_config_reference", SCRIPT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def rows(text: str) -> dict[str, list[str]]:
    """Setting name -> table cells, from the generated markdown."""
    table = {}
    for line in text.splitlines():
        cells = [cell.strip() for cell in line.strip("|").split(" | ")]
        if line.startswith("| `") and len(cells) == 7:
            table[cells[0].strip("`")] = cells
    return table


def test_committed_reference_is_current(generator: ModuleType) -> None:
    current = REFERENCE.read_text()
    assert current == generator.render(), f"docs/configuration.md is stale: {REGENERATE}"


def test_every_setting_is_documented_once() -> None:
    table = rows(REFERENCE.read_text())
    assert list(table) == list(Settings.model_fields), REGENERATE
    for name, cells in table.items():
        assert cells[2] == f"`NETTEL_{name.upper()}`", name
        if name in ENV_ONLY_SETTINGS:
            assert cells[1].startswith("*env only*"), name
        else:
            assert cells[1] == f"`--{name.replace('_', '-')}`", name


@pytest.mark.parametrize("name", sorted(set(Settings.model_fields) - ENV_ONLY_SETTINGS))
def test_documented_flag_sets_the_setting(generator: ModuleType, name: str) -> None:
    flag = generator.cli_flag(name)
    args = build_parser().parse_args(["serve", flag, "value"])
    assert getattr(args, name) == "value", f"{flag} does not set {name}"


@pytest.mark.parametrize("name", sorted(ENV_ONLY_SETTINGS))
def test_env_only_settings_have_no_flag(name: str) -> None:
    args = build_parser().parse_args(["serve"])
    assert getattr(args, name, None) is None


@pytest.mark.parametrize("name", sorted(ENV_ONLY_SETTINGS))
def test_env_only_settings_are_read_from_the_environment(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(f"NETTEL_{name.upper()}", "from-env")
    value = getattr(Settings(), name)
    assert value is not None and value.get_secret_value() == "from-env"


def test_generator_doctests(generator: ModuleType) -> None:
    result = doctest.testmod(generator)
    assert result.attempted > 0 and result.failed == 0


def test_check_mode(generator: ModuleType, tmp_path: Path) -> None:
    output = tmp_path / "configuration.md"
    assert generator.main(["--check", "--output", str(output)]) == 1  # missing
    assert generator.main(["--output", str(output)]) == 0
    assert generator.main(["--check", "--output", str(output)]) == 0
    output.write_text(output.read_text() + "edited by hand\n")
    assert generator.main(["--check", "--output", str(output)]) == 1


@pytest.mark.parametrize(
    "name", sorted(n for n, f in Settings.model_fields.items() if f.annotation is bool)
)
def test_a_boolean_flag_alone_means_true(name: str) -> None:
    flag = f"--{name.replace('_', '-')}"
    assert getattr(build_parser().parse_args(["serve", flag]), name) == "true"
    assert getattr(build_parser().parse_args(["serve", flag, "false"]), name) == "false"
