"""`nettel simulate --family C --output DIR`: its options are checked before ns-3 is loaded."""

from __future__ import annotations

from pathlib import Path

import pytest

from service.cli import main


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
