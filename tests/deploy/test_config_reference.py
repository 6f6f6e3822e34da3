"""docs/configuration.md is exactly what scripts/gen_config_reference.py makes from the settings
classes, documents every field, and names the flags the real `nettel serve` and `nettel
rucio-sync` parsers accept."""

from __future__ import annotations

import doctest
import importlib.util
from pathlib import Path
from types import ModuleType

import pytest
from pydantic_settings import BaseSettings

from service.cli import ENV_ONLY_SETTINGS, build_parser
from service.config import Settings, environment_variable
from service.rucio.settings import RucioSyncSettings
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


#: Each command's settings class, as its section of the reference is headed.
COMMANDS: dict[str, type[BaseSettings]] = {"serve": Settings, "rucio-sync": RucioSyncSettings}


def rows(text: str, command: str) -> dict[str, list[str]]:
    """Setting name -> table cells, from the generated markdown's section of `command`."""
    section = text.split(f"## `nettel {command}`\n", 1)[1].split("\n## ", 1)[0]
    table = {}
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip("|").split(" | ")]
        if line.startswith("| `") and len(cells) == 7:
            table[cells[0].strip("`")] = cells
    return table


def test_committed_reference_is_current(generator: ModuleType) -> None:
    current = REFERENCE.read_text()
    assert current == generator.render(), f"docs/configuration.md is stale: {REGENERATE}"


@pytest.mark.parametrize("command", COMMANDS)
def test_every_setting_is_documented_once(command: str) -> None:
    kind = COMMANDS[command]
    table = rows(REFERENCE.read_text(), command)
    assert list(table) == list(kind.model_fields), REGENERATE
    for name, cells in table.items():
        assert cells[2] == f"`{environment_variable(name, kind)}`", name
        if name in ENV_ONLY_SETTINGS:
            assert cells[1].startswith("*env only*"), name
        else:
            assert cells[1] == f"`--{name.replace('_', '-')}`", name


@pytest.mark.parametrize(
    ("command", "name"),
    [
        (command, name)
        for command, kind in COMMANDS.items()
        for name in sorted(set(kind.model_fields) - ENV_ONLY_SETTINGS)
    ],
)
def test_documented_flag_sets_the_setting(generator: ModuleType, command: str, name: str) -> None:
    flag = generator.cli_flag(name)
    args = build_parser().parse_args([command, flag, "value"])
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
    ("command", "name"),
    [
        (command, name)
        for command, kind in COMMANDS.items()
        for name, field in kind.model_fields.items()
        if field.annotation is bool
    ],
)
def test_a_boolean_flag_alone_means_true(command: str, name: str) -> None:
    flag = f"--{name.replace('_', '-')}"
    assert getattr(build_parser().parse_args([command, flag]), name) == "true"
    assert getattr(build_parser().parse_args([command, flag, "false"]), name) == "false"
