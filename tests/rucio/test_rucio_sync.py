"""`nettel rucio-sync` against a real Rucio server and nettel's real REST API.

The conveyor's own source ranking (`build_transfer_paths` over a fresh `Topology`) must put the
source behind a congested link last after a sync, and every distance must come back exactly to
its baseline when the link calms.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from devtools.activemq import free_port
from devtools.metrics_reader import sample_value
from devtools.rucio_server import RucioServer
from devtools.waiting import wait_for
from service.cli import main
from service.rucio.distances import reread_slice
from service.rucio.sync import REREAD_SYNCS
from tests.rucio.conftest import NettelCosts, rucio_setup, transfer_ranking

pytestmark = pytest.mark.slow


def rucio_sync(
    server: RucioServer, nettel: NettelCosts, state: Path, group: str, *flags: str
) -> int:
    """`nettel rucio-sync --once` in this process for the RSEs of `group`."""
    args = ["--nettel-url", nettel.url, "--state-dir", str(state), "--rses", f"nettel_test={group}"]
    return rucio_sync_command(*args, *flags)


def rucio_sync_command(*flags: str) -> int:
    """`nettel rucio-sync --once FLAGS` in this process (the root logger's handlers put back)."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    try:
        return main(["rucio-sync", "--once", *flags])
    finally:
        root.handlers[:], root.level = handlers, level


def distance(server: RucioServer, source: str, destination: str) -> int | None:
    from rucio.client import Client

    rows = Client().get_distance(source, destination)
    return int(rows[0]["distance"]) if rows else None


@pytest.fixture(autouse=True)
def rucio_client_config(rucio_server: RucioServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """Rucio's client finds the server as every Rucio client does: RUCIO_CONFIG."""
    monkeypatch.setenv("RUCIO_CONFIG", str(rucio_server.config))


def test_congested_source_is_ranked_last_and_returns_to_its_baseline(
    rucio_server, rucio_side, nettel_costs, tmp_path
):
    rses = {"R1_CERN": "CERN", "R1_RAL": "RAL", "R1_PIC": "PIC"}
    baselines = [["R1_CERN", "R1_PIC", 3], ["R1_RAL", "R1_PIC", 4], ["R1_PIC", "R1_CERN", 5]]
    transfer = {"replicas": ["R1_CERN", "R1_RAL"], "rule": "R1_PIC"}
    rucio_setup(
        rucio_side, {"group": "rank", "rses": rses, "distances": baselines, "transfer": transfer}
    )
    assert transfer_ranking(rucio_side)["R1_PIC"] == [["R1_CERN", 3], ["R1_RAL", 4]]

    metrics = tmp_path / "metrics.prom"
    congested = {("CERN", "PIC"): 0.9, ("RAL", "PIC"): 0.05, ("PIC", "CERN"): 0.1}
    nettel_costs.set(congested)
    assert (
        rucio_sync(rucio_server, nettel_costs, tmp_path, "rank", "--metrics-file", str(metrics))
        == 0
    )
    # penalty(0.9) = 27; the calm pairs keep their order: 0.05 -> 4, 0.1 -> 5
    assert distance(rucio_server, "R1_CERN", "R1_PIC") == 3 + 27
    assert distance(rucio_server, "R1_RAL", "R1_PIC") == 4 + 4
    assert distance(rucio_server, "R1_PIC", "R1_CERN") == 5 + 5
    assert transfer_ranking(rucio_side)["R1_PIC"] == [["R1_RAL", 8], ["R1_CERN", 30]]
    exported = metrics.read_text()
    assert 'nettel_rucio_sync_rucio_requests_total{operation="update_distance"} 3.0' in exported
    assert "nettel_rucio_sync_pairs_changed_total 3.0" in exported
    assert 'nettel_rucio_sync_pairs{state="penalised"} 3.0' in exported

    # the same costs again (a new process): nothing to write; only the pairs whose turn it is
    # in the rotation of re-reads (drift repair) are read
    assert (
        rucio_sync(rucio_server, nettel_costs, tmp_path, "rank", "--metrics-file", str(metrics))
        == 0
    )
    managed = [("R1_CERN", "R1_PIC"), ("R1_RAL", "R1_PIC"), ("R1_PIC", "R1_CERN")]
    turn = len(reread_slice(managed, 1, REREAD_SYNCS))
    exported = metrics.read_text()
    assert 'nettel_rucio_sync_rucio_requests_total{operation="update_distance"} 0.0' in exported
    assert f'nettel_rucio_sync_rucio_requests_total{{operation="get_distance"}} {turn}.0' in (
        exported
    )

    for cost in (0.6, 1.0, 0.35):  # the link stays busy for a while, then calms
        nettel_costs.set(congested | {("CERN", "PIC"): cost})
        assert rucio_sync(rucio_server, nettel_costs, tmp_path, "rank") == 0
    assert distance(rucio_server, "R1_CERN", "R1_PIC") == 3 + 10  # 0.35: 5.32 + 24.68 * 0.15/0.8
    nettel_costs.set(congested | {("CERN", "PIC"): 0.004})  # calm: no penalty at all
    assert rucio_sync(rucio_server, nettel_costs, tmp_path, "rank") == 0
    assert distance(rucio_server, "R1_CERN", "R1_PIC") == 3
    assert transfer_ranking(rucio_side)["R1_PIC"] == [["R1_CERN", 3], ["R1_RAL", 8]]


def test_pairs_without_a_row_are_left_alone_unless_add_missing(
    rucio_server, rucio_side, nettel_costs, tmp_path
):
    rses = {"R2_A": "SITE-A", "R2_B": "SITE-B"}
    rucio_setup(rucio_side, {"group": "missing", "rses": rses, "distances": [["R2_A", "R2_B", 2]]})
    nettel_costs.set({("SITE-A", "SITE-B"): 1.0, ("SITE-B", "SITE-A"): 1.0})
    assert rucio_sync(rucio_server, nettel_costs, tmp_path, "missing") == 0
    assert distance(rucio_server, "R2_A", "R2_B") == 2 + 30
    assert distance(rucio_server, "R2_B", "R2_A") is None  # no row: Rucio's choice, kept

    assert rucio_sync(rucio_server, nettel_costs, tmp_path / "add", "missing", "--add-missing") == 0
    assert distance(rucio_server, "R2_B", "R2_A") == 10 + 30  # --added-baseline 10 + penalty


def test_without_nettel_data_every_pair_returns_to_its_baseline(
    rucio_server, rucio_side, nettel_costs, tmp_path, capsys
):
    rses = {"R3_A": "SITE-A", "R3_B": "SITE-B"}
    rows = [["R3_A", "R3_B", 7], ["R3_B", "R3_A", 7]]
    rucio_setup(rucio_side, {"group": "nodata", "rses": rses, "distances": rows})
    nettel_costs.set({("SITE-A", "SITE-B"): 0.9, ("SITE-B", "SITE-A"): 0.5})
    assert rucio_sync(rucio_server, nettel_costs, tmp_path, "nodata") == 0
    assert (distance(rucio_server, "R3_A", "R3_B"), distance(rucio_server, "R3_B", "R3_A")) == (
        7 + 27,
        7 + 15,
    )

    nettel_costs.runtime.cycle.latest = None  # nettel restarted: 503 until its first matrix
    assert rucio_sync(rucio_server, nettel_costs, tmp_path, "nodata") == 1  # counted as an error
    assert (distance(rucio_server, "R3_A", "R3_B"), distance(rucio_server, "R3_B", "R3_A")) == (
        7,
        7,
    )


def test_a_distance_set_by_hand_becomes_the_baseline(
    rucio_server, rucio_side, nettel_costs, tmp_path
):
    from rucio.client import Client

    rses = {"R4_A": "SITE-A", "R4_B": "SITE-B"}
    rucio_setup(rucio_side, {"group": "edit", "rses": rses, "distances": [["R4_A", "R4_B", 1]]})
    nettel_costs.set({("SITE-A", "SITE-B"): 1.0})
    assert rucio_sync(rucio_server, nettel_costs, tmp_path, "edit") == 0
    assert distance(rucio_server, "R4_A", "R4_B") == 1 + 30
    Client().update_distance("R4_A", "R4_B", {"distance": 30})  # an operator's new baseline
    nettel_costs.set({("SITE-A", "SITE-B"): 0.0})
    assert rucio_sync(rucio_server, nettel_costs, tmp_path, "edit") == 0
    assert distance(rucio_server, "R4_A", "R4_B") == 30  # kept; without a penalty now
    nettel_costs.set({("SITE-A", "SITE-B"): 1.0})
    assert rucio_sync(rucio_server, nettel_costs, tmp_path, "edit") == 0
    assert distance(rucio_server, "R4_A", "R4_B") == 60


def test_dry_run_prints_what_would_change_and_writes_nothing(
    rucio_server, rucio_side, nettel_costs, tmp_path, capsys
):
    rses = {"R5_A": "SITE-A", "R5_B": "SITE-B"}
    rucio_setup(rucio_side, {"group": "dry", "rses": rses, "distances": [["R5_A", "R5_B", 2]]})
    nettel_costs.set({("SITE-A", "SITE-B"): 0.6})
    assert rucio_sync(rucio_server, nettel_costs, tmp_path, "dry", "--dry-run") == 0
    assert capsys.readouterr().out == (
        "would set R5_A -> R5_B: 2 -> 20 (baseline 2)\n1 distance(s) would change\n"
    )
    assert distance(rucio_server, "R5_A", "R5_B") == 2
    assert not (tmp_path / "rucio-sync.json").exists()


def test_refused_writes_are_counted_every_pair_is_tried_and_nothing_is_lost(
    rucio_server, rucio_side, nettel_costs, tmp_path
):
    """A Rucio account without admin rights may read distances but not set them."""
    rses = {"R6_A": "SITE-A", "R6_B": "SITE-B", "R6_C": "SITE-C"}
    rows = [["R6_A", "R6_B", 2], ["R6_A", "R6_C", 2], ["R6_B", "R6_C", 2]]
    spec = {"group": "denied", "rses": rses, "distances": rows, "users": ["reader6"]}
    rucio_setup(rucio_side, spec)
    nettel_costs.set(
        {("SITE-A", "SITE-B"): 1.0, ("SITE-A", "SITE-C"): 1.0, ("SITE-B", "SITE-C"): 1.0}
    )
    metrics = tmp_path / "metrics.prom"
    command = [sys.executable, "-m", "service", "rucio-sync", "--nettel-url", nettel_costs.url]
    command += ["--state-dir", str(tmp_path), "--rses", "nettel_test=denied", "--once"]
    env = os.environ | {"RUCIO_CONFIG": str(rucio_server.client_config("reader6"))}
    done = subprocess.run(
        [*command, "--metrics-file", str(metrics)], env=env, capture_output=True, text=True
    )
    assert done.returncode == 1, done.stderr
    assert done.stderr.count("distance write(s) failed") == 1  # one line for the sync
    assert "rucio: 3 distance write(s) failed, first R6_A -> R6_B" in done.stderr
    exported = metrics.read_text()
    assert 'nettel_rucio_sync_errors_total{stage="rucio_write"} 3.0' in exported
    assert 'nettel_rucio_sync_rucio_requests_total{operation="update_distance"} 3.0' in exported
    assert 'nettel_rucio_sync_syncs_total{outcome="errors"} 1.0' in exported
    assert "nettel_rucio_sync_last_success_timestamp_seconds 0.0" in exported
    assert [distance(rucio_server, *pair[:2]) for pair in rows] == [2, 2, 2]

    # with an admin account the next sync writes them, from the baselines recorded before
    assert rucio_sync(rucio_server, nettel_costs, tmp_path, "denied") == 0
    assert [distance(rucio_server, *pair[:2]) for pair in rows] == [32, 32, 32]


def test_one_pair_rucio_cannot_store_fails_alone_retried_counted_and_logged(
    rucio_server, rucio_side, nettel_costs, tmp_path
):
    """A distance past Rucio's 64-bit INTEGER column (an operator's baseline of 2**63 - 1, plus a
    penalty) is refused by Rucio's database with a server error: that pair's write is retried,
    then counted and logged, and the other pairs of the sync are written."""
    rses = {"R8_A": "SITE-A", "R8_B": "SITE-B", "R8_C": "SITE-C"}
    rows = [["R8_A", "R8_B", 2], ["R8_A", "R8_C", 2], ["R8_B", "R8_C", 2]]
    rucio_setup(rucio_side, {"group": "onefails", "rses": rses, "distances": rows})
    nettel_costs.set(
        {("SITE-A", "SITE-B"): 1.0, ("SITE-A", "SITE-C"): 1.0, ("SITE-B", "SITE-C"): 1.0}
    )
    baselines = tmp_path / "baselines.yaml"
    baselines.write_text(f"R8_A:\n  R8_B: {2**63 - 1}\n")
    metrics = tmp_path / "metrics.prom"
    state = tmp_path / "state"
    state.mkdir()
    command = [sys.executable, "-m", "service", "rucio-sync", "--nettel-url", nettel_costs.url]
    command += ["--state-dir", str(state), "--rses", "nettel_test=onefails", "--once"]
    command += ["--baselines", str(baselines), "--metrics-file", str(metrics)]
    env = os.environ | {"RUCIO_CONFIG": str(rucio_server.config)}
    done = subprocess.run(command, env=env, capture_output=True, text=True)

    assert done.returncode == 1, done.stderr
    assert [distance(rucio_server, *pair[:2]) for pair in rows] == [2, 32, 32]
    assert "rucio: 1 distance write(s) failed, first R8_A -> R8_B" in done.stderr
    (line,) = [json.loads(s) for s in done.stderr.splitlines() if '"message":"rucio sync"' in s]
    assert (line["visited"], line["written"], line["errors"]) == (3, 2, 1)
    assert line["requests"]["update_distance"] == 2 + 3  # the failing write tried three times
    exported = metrics.read_text()
    assert 'nettel_rucio_sync_errors_total{stage="rucio_write"} 1.0' in exported
    assert 'nettel_rucio_sync_rucio_requests_total{operation="update_distance"} 5.0' in exported
    assert "nettel_rucio_sync_pairs_changed_total 2.0" in exported
    assert 'nettel_rucio_sync_syncs_total{outcome="errors"} 1.0' in exported

    # a storable baseline: the next sync writes the pair, the others stay as written
    baselines.write_text("R8_A:\n  R8_B: 3\n")
    assert (
        rucio_sync(rucio_server, nettel_costs, state, "onefails", "--baselines", str(baselines))
        == 0
    )
    assert [distance(rucio_server, *pair[:2]) for pair in rows] == [33, 32, 32]


def test_settings_come_from_the_environment_and_flags_win(
    rucio_server, rucio_side, nettel_costs, tmp_path, monkeypatch
):
    rses = {"R9_A": "SITE-A", "R9_B": "SITE-B"}
    rucio_setup(rucio_side, {"group": "environ", "rses": rses, "distances": [["R9_A", "R9_B", 2]]})
    nettel_costs.set({("SITE-A", "SITE-B"): 1.0})
    monkeypatch.setenv("NETTEL_RUCIO_SYNC_NETTEL_URL", nettel_costs.url)
    monkeypatch.setenv("NETTEL_RUCIO_SYNC_STATE_DIR", str(tmp_path))
    monkeypatch.setenv("NETTEL_RUCIO_SYNC_RSES", "nettel_test=environ")
    monkeypatch.setenv("NETTEL_RUCIO_SYNC_MAX_PENALTY", "20")
    assert rucio_sync_command() == 0
    assert distance(rucio_server, "R9_A", "R9_B") == 2 + 20
    nettel_costs.set({("SITE-A", "SITE-B"): 0.6})
    assert rucio_sync_command("--max-penalty", "10", "--fine-cost", "0", "--calm-cost", "0.2") == 0
    assert distance(rucio_server, "R9_A", "R9_B") == 2 + 5  # linear: ceil(10 * 0.4 / 0.8)


def test_the_daemon_syncs_every_interval_serves_metrics_and_stops_on_sigterm(
    rucio_server, rucio_side, nettel_costs, tmp_path
):
    rses = {"R7_A": "SITE-A", "R7_B": "SITE-B"}
    rucio_setup(rucio_side, {"group": "daemon", "rses": rses, "distances": [["R7_A", "R7_B", 4]]})
    nettel_costs.set({("SITE-A", "SITE-B"): 1.0})
    port = free_port()
    command = [sys.executable, "-m", "service", "rucio-sync", "--nettel-url", nettel_costs.url]
    command += ["--state-dir", str(tmp_path), "--rses", "nettel_test=daemon", "--interval", "0.5"]
    command += ["--metrics-listen", f"127.0.0.1:{port}"]
    env = os.environ | {"RUCIO_CONFIG": str(rucio_server.config)}
    daemon = subprocess.Popen(command, env=env, stderr=subprocess.PIPE, text=True)
    try:

        def synced_twice() -> bool:
            try:
                text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=2).text
            except httpx.HTTPError:
                return False
            return sample_value(text, "nettel_rucio_sync_syncs_total", 0.0, outcome="ok") >= 2

        wait_for(synced_twice, timeout=60, what="two syncs")
        assert distance(rucio_server, "R7_A", "R7_B") == 4 + 30
        nettel_costs.set({("SITE-A", "SITE-B"): 0.0})
        wait_for(lambda: distance(rucio_server, "R7_A", "R7_B") == 4, what="back to baseline")
    finally:
        daemon.send_signal(signal.SIGTERM)
        _, stderr = daemon.communicate(timeout=30)
    assert daemon.returncode == 0, stderr
    assert '"message":"rucio sync"' in stderr


def test_distances_restored_behind_rucio_syncs_back_are_repaired_within_the_rotation(
    rucio_server, rucio_side, nettel_costs, tmp_path
):
    """The reported drift: Rucio's distances were put back (a restored database) while the costs
    stayed, so the congested source ranked first again. Each sync reads again the managed pairs
    whose turn it is, so within REREAD_SYNCS syncs every pair holds its distance again, and the
    restored values (the baseline, an older distance of rucio-sync's) are not taken for new
    baselines."""
    from rucio.client import Client

    rses = {"R10_CERN": "CERN", "R10_RAL": "RAL", "R10_PIC": "PIC"}
    cern, ral = ("R10_CERN", "R10_PIC"), ("R10_RAL", "R10_PIC")
    rows = [[*cern, 3], [*ral, 4]]
    transfer = {"replicas": ["R10_CERN", "R10_RAL"], "rule": "R10_PIC"}
    rucio_setup(
        rucio_side, {"group": "drift", "rses": rses, "distances": rows, "transfer": transfer}
    )
    nettel_costs.set({("CERN", "PIC"): 1.0, ("RAL", "PIC"): 0.05})
    assert rucio_sync(rucio_server, nettel_costs, tmp_path, "drift") == 0  # sync 0
    assert (distance(rucio_server, *cern), distance(rucio_server, *ral)) == (3 + 30, 4 + 4)
    nettel_costs.set({("CERN", "PIC"): 0.9, ("RAL", "PIC"): 0.05})
    assert rucio_sync(rucio_server, nettel_costs, tmp_path, "drift") == 0  # sync 1
    assert (distance(rucio_server, *cern), distance(rucio_server, *ral)) == (3 + 27, 4 + 4)

    # a backup taken after the first sync for CERN and before any for RAL is restored
    Client().update_distance(*cern, {"distance": 33})
    Client().update_distance(*ral, {"distance": 4})
    assert transfer_ranking(rucio_side)["R10_PIC"] == [["R10_RAL", 4], ["R10_CERN", 33]]
    # the report: a restore to the baselines puts the congested source first again
    repaired_at = {
        pair: next(
            n for n in range(2, 2 + REREAD_SYNCS) if pair in reread_slice([pair], n, REREAD_SYNCS)
        )
        for pair in (cern, ral)
    }
    for sync_number in range(2, 2 + REREAD_SYNCS):
        assert rucio_sync(rucio_server, nettel_costs, tmp_path, "drift") == 0
        for pair, restored, wanted in ((cern, 33, 30), (ral, 4, 8)):
            expected = wanted if sync_number >= repaired_at[pair] else restored
            assert distance(rucio_server, *pair) == expected, (pair, sync_number)
    assert transfer_ranking(rucio_side)["R10_PIC"] == [["R10_RAL", 8], ["R10_CERN", 30]]
    state = json.loads((tmp_path / "rucio-sync.json").read_text())
    assert state["pairs"]["R10_CERN"]["R10_PIC"]["baseline"] == 3  # not adopted
    assert state["pairs"]["R10_RAL"]["R10_PIC"]["baseline"] == 4
