"""`nettel backfill` on a state dir (a real process, a local archive server): the snapshot and
journal it finds stay, the archived links are added, a snapshot is written."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from devtools.archive_server import ArchivedLink, ArchiveServer
from devtools.service_process import REPO_ROOT
from service.config import LOSS_TOPIC
from service.parse.records import MeasurementKind
from service.persistence.journal import Journal
from service.persistence.snapshot_codec import encode_state
from service.persistence.snapshot_store import SnapshotStore
from service.state.link_buffers import WINDOW_MINUTES
from service.state.link_state import LinkState, StateView
from service.topology.topology import Topology
from tests.integration.wire import current_minute_ts, sample_body
from tests.message_factory import link, loss_message

LOSS = "packet-loss-rate"


def archived(number: int, minutes: int = 50) -> ArchivedLink:
    stamps = [current_minute_ts(k) for k in range(minutes - 1, -1, -1)]
    records = [{"ts": ts, "val": 0.001 * (ts // 60 % 7)} for ts in stamps]
    return ArchivedLink(f"192.0.2.{number}", "198.51.100.20", series={LOSS: records})


def backfill(state_dir: Path, archive: str, *args: str) -> tuple[int, dict]:
    command = [sys.executable, "-m", "service", "backfill", "--state-dir", str(state_dir)]
    command += ["--backfill-from", archive, "--backfill-history", "3600", *args]
    done = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, timeout=120, check=False)
    assert done.stdout, done.stderr.decode()[-2000:]
    return done.returncode, json.loads(done.stdout)


def fill_a_stopped_services_state(state_dir: Path) -> tuple[int, dict, int, dict, StateView]:
    """Backfill twice from an archive of minutes counted back from now, into the state dir a
    stopped service left: (status, summary, second status, second summary, the state's view)."""
    now = time.time()
    state = LinkState()  # what a stopped service left: a snapshot with one link ...
    state.apply(loss_message({current_minute_ts(2): 0.5}, link("192.0.2.200")), now)
    SnapshotStore(state_dir).write(encode_state(state))
    journal = Journal(state_dir)  # ... and a journaled frame of another after it
    frame = sample_body("packet-loss-rate.json", [current_minute_ts(1)], source="192.0.2.201")
    journal.append([(LOSS_TOPIC, orjson.dumps(frame))])
    journal.close()
    with ArchiveServer([archived(1), archived(2)]) as archive:
        status, summary = backfill(state_dir, archive.url)
        again_status, again = backfill(state_dir, archive.url)
    restored = SnapshotStore(state_dir).read(Topology())
    assert restored is not None
    return status, summary, again_status, again, restored.view(time.time())


def test_backfill_adds_the_archived_links_to_a_state_dir(tmp_path: Path) -> None:
    # The figures count minutes back from now: a run that crosses a minute boundary (slow on a
    # loaded machine) splits window and all-time one minute apart, so it is made again.
    for attempt in range(3):
        minute = time.time() // 60
        outcome = fill_a_stopped_services_state(tmp_path / f"attempt-{attempt}")
        if time.time() // 60 == minute:
            break
    else:
        pytest.fail("each of three backfill runs crossed a minute boundary")
    status, summary, again_status, again, view = outcome
    state_dir = tmp_path / f"attempt-{attempt}"
    assert status == again_status == 0
    assert summary["links"] == again["links"] == {"filled": 2, "unfinished": 0}
    assert summary["datapoints"] == {"window": 2 * 33, "all_time": 2 * 17, "covered": 0}
    assert again["datapoints"] == {"window": 2 * 32, "all_time": 0, "covered": 2 * 18}
    rows = {source: row for row, source in enumerate(view.sources)}
    assert sorted(rows) == ["192.0.2.1", "192.0.2.2", "192.0.2.200", "192.0.2.201"]
    for source in ("192.0.2.1", "192.0.2.2"):
        assert (view.slot_minute[rows[source]] >= 0).sum() == WINDOW_MINUTES
        assert view.archive["loss_n"][rows[source]] == 50 - WINDOW_MINUTES
    assert [path.name for path in state_dir.glob("journal-*.log")] != []  # a fresh, empty one
    assert all(path.stat().st_size == 0 for path in state_dir.glob("journal-*.log"))


def test_backfill_exits_1_when_the_archive_does_not_answer_and_still_writes_a_snapshot(
    tmp_path: Path,
) -> None:
    request_timeout = 30  # what an exit waiting for the stuck reads would take at least
    with ArchiveServer([archived(1)], stall_metadata=True) as archive:
        started = time.monotonic()
        status, summary = backfill(
            tmp_path,
            archive.url,
            *("--backfill-bound", "1", "--backfill-timeout", str(request_timeout)),
        )
        took = time.monotonic() - started
    listings = len(MeasurementKind)  # one stalled metadata listing per event type
    assert (status, summary["failed_requests"], summary["links"]) == (
        1,
        listings,
        {"unfinished": 0},
    )
    # stuck reads hold up no exit (they run on daemon threads): the process, started and all,
    # ends well before any of them could time out, however loaded the machine
    assert took < request_timeout / 2
    assert (tmp_path / "link-state.snapshot").exists()


def test_backfill_needs_a_state_dir_and_an_archive(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "service", "backfill", "--state-dir", str(tmp_path)]
    done = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, timeout=60, check=False)
    assert done.returncode == 2
    assert b"needs --state-dir and --backfill-from" in done.stderr
