"""`nettel rucio-sync`'s flags, environment variables and loop (no Rucio needed)."""

from __future__ import annotations

import threading

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from service.cli import main
from service.rucio.settings import RucioSyncSettings
from service.rucio.sync import SyncFailed, SyncMetrics, SyncReport, run_loop
from tests.deploy.support import DOCS, RUCIO_SYNC_PREFIX, docs_metric_names, family_for


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--min-change", "0"], "--min-change / NETTEL_RUCIO_SYNC_MIN_CHANGE: Input should be"),
        (["--calm-cost", "1"], "--calm-cost / NETTEL_RUCIO_SYNC_CALM_COST: Input should be less"),
        (["--interval", "0"], "--interval / NETTEL_RUCIO_SYNC_INTERVAL: Input should be greater"),
        (["--fine-cost", "1"], "--fine-cost / NETTEL_RUCIO_SYNC_FINE_COST: Input should be less"),
        (["--hysteresis", "-0.1"], "--hysteresis / NETTEL_RUCIO_SYNC_HYSTERESIS: Input should"),
        (
            ["--calm-cost", "0"],
            "--fine-cost / NETTEL_RUCIO_SYNC_FINE_COST 0.2 needs --calm-cost / "
            "NETTEL_RUCIO_SYNC_CALM_COST above 0",
        ),
        (
            ["--max-penalty", "5"],
            "--max-penalty / NETTEL_RUCIO_SYNC_MAX_PENALTY 5 is below the 5.32 steps",
        ),
        (["--concurrency", "0"], "--concurrency / NETTEL_RUCIO_SYNC_CONCURRENCY: Input should"),
        (
            ["--metrics-listen", "9100"],
            "--metrics-listen / NETTEL_RUCIO_SYNC_METRICS_LISTEN: '9100' is not host:port",
        ),
        (["--nettel-url", "nettel:8080"], "--nettel-url / NETTEL_RUCIO_SYNC_NETTEL_URL: not an"),
        (["--baselines", "/nonexistent.yaml"], "--baselines / NETTEL_RUCIO_SYNC_BASELINES: file"),
    ],
)
def test_bad_flags_stop_the_command_with_the_flag_named(tmp_path, capsys, flags, message):
    assert main(["rucio-sync", "--state-dir", str(tmp_path), *flags]) == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        ("NETTEL_RUCIO_SYNC_INTERVAL", "0", "--interval / NETTEL_RUCIO_SYNC_INTERVAL: Input"),
        ("NETTEL_RUCIO_SYNC_MAX_PENALTY", "ten", "--max-penalty / NETTEL_RUCIO_SYNC_MAX_PENALTY"),
        ("NETTEL_RUCIO_SYNC_ADD_MISSING", "maybe", "--add-missing / NETTEL_RUCIO_SYNC_ADD_MISS"),
        ("NETTEL_RUCIO_SYNC_LOG_LEVEL", "LOUD", "--log-level / NETTEL_RUCIO_SYNC_LOG_LEVEL"),
    ],
)
def test_bad_environment_variables_stop_the_command_with_both_names(
    tmp_path, capsys, monkeypatch, variable, value, message
):
    monkeypatch.setenv(variable, value)
    assert main(["rucio-sync", "--state-dir", str(tmp_path), "--once"]) == 2
    assert message in capsys.readouterr().err


def test_a_missing_state_dir_names_the_flag_and_the_variable(capsys):
    assert main(["rucio-sync", "--once"]) == 2
    assert "--state-dir / NETTEL_RUCIO_SYNC_STATE_DIR: Field required" in capsys.readouterr().err


def test_variables_set_what_flags_do_not_and_flags_win(tmp_path, monkeypatch):
    monkeypatch.setenv("NETTEL_RUCIO_SYNC_STATE_DIR", str(tmp_path))
    monkeypatch.setenv("NETTEL_RUCIO_SYNC_METRICS_LISTEN", "127.0.0.1:9311")
    monkeypatch.setenv("NETTEL_RUCIO_SYNC_INTERVAL", "30")
    monkeypatch.setenv("NETTEL_INTERVAL", "5")  # nettel serve's: not rucio-sync's
    settings = RucioSyncSettings(interval="120")
    assert (settings.state_dir, settings.metrics_listen) == (tmp_path, ("127.0.0.1", 9311))
    assert settings.interval == 120.0
    monkeypatch.delenv("NETTEL_RUCIO_SYNC_INTERVAL")
    assert RucioSyncSettings().interval == 60.0


def test_a_bad_baseline_file_is_named(tmp_path, capsys):
    baselines = tmp_path / "baselines.yaml"
    baselines.write_text("A_DISK:\n  B_DISK: 2.5\n")
    assert main(["rucio-sync", "--state-dir", str(tmp_path), "--baselines", str(baselines)]) == 2
    assert "--baselines / NETTEL_RUCIO_SYNC_BASELINES: " in capsys.readouterr().err
    baselines.write_text("A_DISK: &row\n  B_DISK: 2\nC_DISK: *row\n")  # no aliases
    assert main(["rucio-sync", "--state-dir", str(tmp_path), "--baselines", str(baselines)]) == 2
    assert "an alias (*row) is not accepted in a baselines file" in capsys.readouterr().err


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
