"""`nettel rucio-sync`'s flags and its loop (no Rucio needed)."""

from __future__ import annotations

import threading

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from service.cli import main
from service.rucio.sync import SyncFailed, SyncMetrics, SyncReport, run_loop
from tests.deploy.support import DOCS, RUCIO_SYNC_PREFIX, docs_metric_names, family_for


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


def test_every_rucio_sync_metric_the_docs_name_is_exported():
    registry = CollectorRegistry()
    SyncMetrics(registry)
    families = list(text_string_to_metric_families(generate_latest(registry).decode()))
    named = {
        name
        for document in DOCS.glob("*.md")
        for name in docs_metric_names(document.read_text())
        if name.startswith(RUCIO_SYNC_PREFIX)
    }
    assert len(named) >= 7
    assert {name for name in named if family_for(name, families) is None} == set()
