"""README command 1 (`bash scripts/run.sh`): broker, demo feed and service up; Ctrl-C stops all.

What only the real thing shows: the command starts its own ActiveMQ, and the demo feed and the
service find each other through it."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import httpx
import pytest

from devtools.activemq import free_port
from devtools.waiting import wait_for
from tests.integration.wire import get_json

REPO_ROOT = Path(__file__).resolve().parents[2]
DEMO_SITES = 20

pytestmark = [pytest.mark.broker, pytest.mark.slow]


def _sigint_as_at_a_terminal() -> None:
    """Ctrl-C at a terminal reaches run.sh with SIGINT's default disposition. A test run started
    as a background job or under nohup passes SIGINT down ignored, and a shell cannot trap a
    signal that was ignored when it started: run.sh would never see the Ctrl-C."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.skipif(not (REPO_ROOT / ".venv").is_dir(), reason="run via scripts/test.sh (.venv)")
def test_run_command_serves_the_demo_mesh_and_stops_on_ctrl_c(tmp_path):
    port = free_port()
    env = {
        **os.environ,
        "NETTEL_LISTEN": f"127.0.0.1:{port}",
        "NETTEL_BROKER_PORT": str(free_port()),
        "NETTEL_RUN_DIR": str(tmp_path / "run"),
    }
    env.pop("NETTEL_BROKERS", None)
    log = (tmp_path / "run.out").open("wb")
    process = subprocess.Popen(
        ["bash", "scripts/run.sh"],
        cwd=REPO_ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        preexec_fn=_sigint_as_at_a_terminal,
    )
    try:
        full_mesh = DEMO_SITES * (DEMO_SITES - 1)
        matrix = wait_for(
            lambda: (
                (m := get_json(f"http://127.0.0.1:{port}/costmatrix"))
                and len(m["links"]) == full_mesh
                and all(link["samples"] >= 30 for link in m["links"])  # back-filled 40 minutes
                and m
            ),
            timeout=180,
            interval=1.0,  # each look serializes and parses the whole 380-link matrix
            what=f"{full_mesh} back-filled demo links in /costmatrix",
        )
        assert any(link["clock_suspect"] for link in matrix["links"])
        # run.sh passes the demo mesh's CRIC export as --topology: a site-to-site view
        assert all(link["source_site"] and link["destination_site"] for link in matrix["links"])
        by_site = get_json(f"http://127.0.0.1:{port}/costmatrix", level="site")
        assert len(by_site["links"]) == full_mesh
        # and the demo's RSE map (one disk per site): the Rucio table has every (site, RSE)
        rucio = httpx.get(f"http://127.0.0.1:{port}/costmatrix.csv", params={"format": "rucio"})
        assert rucio.status_code == 200
        rows = [line.split(",") for line in rucio.text.splitlines()]
        assert len(rows) == DEMO_SITES * DEMO_SITES
        assert ["SITE-01", "SITE-01_DATADISK", "0.0000"] in rows
        assert "http://127.0.0.1" in (tmp_path / "run.out").read_text()
    finally:
        os.killpg(process.pid, signal.SIGINT)
        status = process.wait(timeout=60)
    assert status == 130
    wait_for(
        lambda: not _processes_under(tmp_path / "run"),
        timeout=2,
        what=f"no process left under {tmp_path / 'run'}",
    )


def _processes_under(run_dir: Path) -> list[str]:
    """Pids of processes whose command line names `run_dir`."""
    found = subprocess.run(["pgrep", "-f", str(run_dir)], capture_output=True, text=True)
    return found.stdout.split()
