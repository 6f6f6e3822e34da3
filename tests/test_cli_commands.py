"""The `nettel` command finds the commands of training and simulation through the
`nettel.commands` entry points: the installed ones are pyproject.toml's, help lists them all, a
command imports only its own, and one whose optional package is missing names the extra."""

from __future__ import annotations

import argparse
import re
import tomllib
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest

from service import cli

ROOT = Path(__file__).resolve().parents[1]
#: The commands registered by the stand-in entry points below, in the order they were.
REGISTERED: list[str] = []


def add_probe_command(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """A stand-in added command whose run imports a package that is not installed."""
    REGISTERED.append("probe")
    subparsers.add_parser("probe").set_defaults(run=_import_a_missing_package)


def add_other_command(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    REGISTERED.append("other")
    subparsers.add_parser("other").set_defaults(run=_import_a_missing_package)


def _import_a_missing_package(args: argparse.Namespace) -> int:
    import nettel_test_package_never_installed  # type: ignore[import-not-found]  # noqa: F401

    return 0


def stand_ins(probe_extras: str) -> dict[str, EntryPoint]:
    entries = [
        EntryPoint("probe", f"{__name__}:add_probe_command{probe_extras}", cli.COMMAND_GROUP),
        EntryPoint("other", f"{__name__}:add_other_command", cli.COMMAND_GROUP),
    ]
    return {entry.name: entry for entry in entries}


@pytest.fixture
def two_added_commands(monkeypatch: pytest.MonkeyPatch) -> None:
    REGISTERED.clear()
    monkeypatch.setattr(cli, "added_commands", lambda: stand_ins(" [training,spark]"))


def test_the_installed_commands_are_the_ones_pyproject_declares() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = project["entry-points"][cli.COMMAND_GROUP]
    installed = {name: entry.value for name, entry in cli.added_commands().items()}
    assert installed == declared, "stale install: run .venv/bin/pip install -e . --no-deps"
    assert set(installed) == {"simulate", "train", "evaluate", "dataset"}
    assert all(value.startswith("training.commands.") for value in installed.values())


def test_help_lists_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        cli.main(["--help"])
    assert stopped.value.code == 0
    listed = re.findall(r"^    (\S+)", capsys.readouterr().out, re.MULTILINE)  # name, then help
    assert listed == [*cli.OWN_COMMANDS, *sorted(cli.added_commands())]


@pytest.mark.usefixtures("two_added_commands")
@pytest.mark.parametrize(
    ("command", "registered"),
    [
        ("serve", []),  # one of service's own: no added command is imported
        ("probe", ["probe"]),
        ("other", ["other"]),
        (None, ["probe", "other"]),  # help lists them all
        ("bogus", ["probe", "other"]),  # so does the error for an unknown command
    ],
)
def test_the_parser_loads_only_the_added_command_it_needs(
    command: str | None, registered: list[str]
) -> None:
    cli.build_parser(command)
    assert REGISTERED == registered


@pytest.mark.usefixtures("two_added_commands")
def test_an_unknown_command_is_refused_naming_every_command(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as stopped:
        cli.main(["bogus"])
    assert stopped.value.code == 2
    assert "'serve', 'backfill', 'costmatrix', 'rucio-sync', 'probe', 'other'" in (
        capsys.readouterr().err
    )


@pytest.mark.usefixtures("two_added_commands")
def test_a_missing_optional_package_names_the_extra_to_install(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert cli.main(["probe"]) == 2
    assert capsys.readouterr().err == (
        "nettel: probe needs the module 'nettel_test_package_never_installed', which is not "
        "installed: pip install 'nettel[training,spark]'\n"
    )


def test_a_command_without_extras_lets_a_missing_module_through(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(cli, "added_commands", lambda: stand_ins(""))
    with pytest.raises(ModuleNotFoundError, match="nettel_test_package_never_installed"):
        cli.main(["probe"])
