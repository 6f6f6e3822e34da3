"""`nettel simulate`: the capture's options are checked before ns-3 is loaded; the demo feed's
passcode comes from a file or the environment, and its mesh has the shared default size."""

from __future__ import annotations

from pathlib import Path

import pytest

from service.cli import build_parser, main
from simulation.commands import demo_feed_passcode
from simulation.defaults import DEFAULT_SITES
from simulation.simulator import build_mesh


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--output", "{dir}"], "--output writes family C only"),
        (["--family", "C"], "--output writes family C only"),
        (["--family", "C", "--output", "{dir}", "--minutes", "32"], "must exceed the 32-minute"),
        (["--family", "C", "--output", "{dir}", "--links", "0"], "must be >= 1"),
        (["--family", "C", "--output", "{dir}", "--processes", "0"], "must be >= 1"),
    ],
)
def test_unusable_capture_options_are_refused_with_a_message(
    options: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["simulate", *(option.format(dir=tmp_path / "out") for option in options)]
    assert main(argv) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_the_feeds_passcode_never_comes_from_the_command_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["simulate", "--password", "secret"])
    monkeypatch.setenv("NETTEL_BROKER_PASSWORD", "from-env")
    assert demo_feed_passcode(None) == "from-env"
    secret = tmp_path / "passcode"
    secret.write_text("from-file\n")
    assert demo_feed_passcode(secret) == "from-file"  # the file wins, as for `serve`
    argv = ["simulate", "--password-file", str(tmp_path / "missing"), "--no-realtime"]
    assert main(argv) == 2
    assert "--password-file" in capsys.readouterr().err


def test_the_demo_mesh_has_the_shared_default_size() -> None:
    assert build_parser().parse_args(["simulate"]).sites == DEFAULT_SITES
    assert len(build_mesh(seed=0).site_names) == DEFAULT_SITES
