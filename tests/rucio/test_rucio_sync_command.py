"""`nettel rucio-sync`'s flags and its loop (no Rucio needed)."""

from __future__ import annotations

import threading

import pytest

from service.cli import main
from service.rucio_sync import SyncFailed, SyncReport, run_loop


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--min-change", "0"], "--max-penalty/--calm-cost/--min-change"),
        (["--calm-cost", "1"], "--max-penalty/--calm-cost/--min-change"),
        (["--interval", "0"], "--interval > 0"),
        (["--concurrency", "0"], "--concurrency >= 1"),
        (["--metrics-listen", "9100"], "--metrics-listen: '9100' is not host:port"),
    ],
)
def test_bad_flags_stop_the_command_with_the_flag_named(tmp_path, capsys, flags, message):
    assert main(["rucio-sync", "--state-dir", str(tmp_path), *flags]) == 2
    assert message in capsys.readouterr().err


def test_a_bad_baseline_file_is_named(tmp_path, capsys):
    baselines = tmp_path / "baselines.yaml"
    baselines.write_text("A_DISK:\n  B_DISK: 2.5\n")
    assert main(["rucio-sync", "--state-dir", str(tmp_path), "--baselines", str(baselines)]) == 2
    assert "--baselines" in capsys.readouterr().err


def test_the_loop_goes_on_after_failed_syncs_until_stopped():
    stop = threading.Event()
    outcomes = [SyncFailed("rucio down"), SyncReport(errors=1), SyncReport(), SyncReport()]
    calls = []

    def sync() -> SyncReport:
        calls.append(len(calls))
        outcome = outcomes[len(calls) - 1]
        if len(calls) == len(outcomes):
            stop.set()
        if isinstance(outcome, SyncFailed):
            raise outcome
        return outcome

    loop = threading.Thread(target=run_loop, args=(sync, 0.01, stop))
    loop.start()
    loop.join(10)
    assert not loop.is_alive() and calls == [0, 1, 2, 3]
