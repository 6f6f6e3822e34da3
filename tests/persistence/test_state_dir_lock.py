"""One process per --state-dir: a second is refused with the holder's pid, the lock goes with its
holder (release, or the process's end, even by SIGKILL), and `nettel backfill` respects it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from service.cli import main
from service.errors import ConfigError
from service.persistence.state_dir_lock import LOCK_FILE, StateDirLock

HOLD = """
import sys, time
from pathlib import Path
from service.persistence.state_dir_lock import StateDirLock
lock = StateDirLock(Path(sys.argv[1]))
print("held", flush=True)
time.sleep(120)
"""


def hold_in_child(directory: Path) -> subprocess.Popen[str]:
    child = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(directory)], stdout=subprocess.PIPE, text=True
    )
    assert child.stdout is not None and child.stdout.readline() == "held\n"
    return child


def test_a_second_holder_is_refused_until_the_first_releases(tmp_path: Path) -> None:
    directory = tmp_path / "state"
    first = StateDirLock(directory)  # creates the directory
    assert (directory / LOCK_FILE).read_text() == f"pid {os.getpid()} on {os.uname().nodename}\n"
    with pytest.raises(ConfigError, match=rf"in use by pid {os.getpid()} on .*own"):
        StateDirLock(directory)
    first.release()
    first.release()  # twice: harmless
    StateDirLock(directory).release()


def test_the_lock_goes_with_a_killed_process(tmp_path: Path) -> None:
    child = hold_in_child(tmp_path)
    with pytest.raises(ConfigError, match=f"in use by pid {child.pid} "):
        StateDirLock(tmp_path)
    child.send_signal(signal.SIGKILL)
    child.wait(10)
    StateDirLock(tmp_path).release()  # no stale lock to clean up by hand


def test_backfill_refuses_a_directory_another_process_holds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    child = hold_in_child(tmp_path)
    try:
        argv = ["backfill", "--state-dir", str(tmp_path), "--backfill-from", "http://127.0.0.1:9"]
        assert main(argv) == 2
        assert f"is in use by pid {child.pid}" in capsys.readouterr().err
    finally:
        child.kill()
        child.wait(10)
    assert [p.name for p in tmp_path.iterdir()] == [LOCK_FILE]  # nothing read or written
