"""State snapshots: exact round trip, refusal of damaged bytes, atomic files surviving SIGKILL."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from service.persistence.snapshot_codec import SnapshotFormatError, decode_state, encode_state
from service.persistence.snapshot_store import SNAPSHOT_NAME, SnapshotStore
from service.state.link_buffers import ARCHIVE, SERIES
from service.state.link_state import LinkState
from service.topology.topology import Topology
from tests.message_factory import delay_message, link, loss_message

NOW = 1_700_000_000 // 60 * 60
REPO_ROOT = Path(__file__).resolve().parents[2]


def filled_state(links: int = 5, minutes: int = 50, topology: Topology | None = None) -> LinkState:
    """Links with 50 minutes of data, so slots have been evicted into the archive."""
    state = LinkState(topology, capacity=2)
    ends = [
        link(source=f"10.0.0.{number + 1}", source_host=f"host-{number}.example")
        for number in range(links)
    ]
    for minute in range(minutes):  # a minute of every link in one batch, as ingest applies them
        ts = NOW - (minutes - minute) * 60
        batch = []
        for number, endpoints in enumerate(ends):
            batch.append(delay_message({ts: 5.0 + number + (minute % 7) * 0.5}, endpoints))
            batch.append(loss_message({ts: (minute % 3) * 0.001}, endpoints))
        state.apply_batch(batch, ts + 90)
    return state


def assert_same_state(left: LinkState, right: LinkState) -> None:
    n = len(left)
    assert len(right) == n
    for name in ("sources", "destinations", "source_hosts", "destination_hosts"):
        assert getattr(right.index, name) == getattr(left.index, name)
    a, b = left.buffers, right.buffers
    np.testing.assert_array_equal(a.slot_minute[:n], b.slot_minute[:n])
    for key in SERIES:
        np.testing.assert_array_equal(a.series[key][:n], b.series[key][:n])
    for key in ARCHIVE:
        np.testing.assert_array_equal(a.archive[key][:n], b.archive[key][:n])
    for name in ("latest_delay_minute", "latest_p95", "latest_minute", "clock_suspect_minute"):
        np.testing.assert_array_equal(getattr(a, name)[:n], getattr(b, name)[:n])


def test_round_trip_restores_every_array_and_the_index_exactly() -> None:
    state = filled_state()
    assert state.buffers.archive["delay_n"][:5].min() == 18  # 50 minutes, 32 in the window
    restored = decode_state(encode_state(state), Topology())
    assert_same_state(state, restored)
    assert restored.index.find_by_name("host-3.example", "198.51.100.20") == 3


def test_restored_state_keeps_accepting_data_in_new_rows() -> None:
    restored = decode_state(encode_state(filled_state(links=2)), Topology())
    outcome = restored.apply(loss_message({NOW: 0.5}, link(source="10.9.9.9")), NOW + 30)
    assert outcome.applied == 1 and len(restored) == 3


def test_sites_come_from_the_topology_given_at_load() -> None:
    data = encode_state(filled_state(links=2))
    topology = Topology.from_mapping({"CERN": ["host-0.example"], "RAL": ["198.51.100.20"]})
    restored = decode_state(data, topology)
    assert restored.index.source_sites == ["CERN", None]
    assert restored.index.destination_sites == ["RAL", "RAL"]


@pytest.mark.parametrize(
    "damage",
    [
        lambda data: data[:-100],
        lambda data: data[:60] + bytes([data[60] ^ 0xFF]) + data[61:],
        lambda data: b"NOTNETTEL" + data[9:],
        lambda data: b"",
    ],
    ids=["truncated", "bit-flip", "wrong-magic", "empty"],
)
def test_damaged_snapshots_are_refused(damage) -> None:
    with pytest.raises(SnapshotFormatError):
        decode_state(damage(encode_state(filled_state(links=2))), Topology())


def test_store_round_trip_and_corrupt_file_moved_aside(tmp_path: Path) -> None:
    store = SnapshotStore(tmp_path / "state")
    assert store.read(Topology()) is None
    state = filled_state(links=3)
    store.write(encode_state(state))
    assert_same_state(state, store.read(Topology()))
    store.path.write_bytes(store.path.read_bytes()[:-10])
    assert store.read(Topology()) is None
    assert not store.path.exists()
    assert len(list((tmp_path / "state").glob(f"{SNAPSHOT_NAME}.rejected-*"))) == 1


WRITER = """
import sys
from pathlib import Path
from service.persistence.snapshot_store import SnapshotStore
store = SnapshotStore(Path(sys.argv[1]))
snapshot = Path(sys.argv[2]).read_bytes()
print("ready", flush=True)
while True:
    store.write(snapshot)
"""


@pytest.mark.slow
def test_sigkill_during_snapshot_writes_leaves_a_loadable_snapshot(tmp_path: Path) -> None:
    directory = tmp_path / "state"
    snapshot = tmp_path / "snapshot.bytes"  # encoded once; each writer only writes it again
    snapshot.write_bytes(encode_state(filled_state(links=400, minutes=40)))
    expected = decode_state(snapshot.read_bytes(), Topology())
    rng = random.Random(7)
    for _ in range(5):
        writer = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(directory), str(snapshot)],
            cwd=REPO_ROOT,
            stdout=subprocess.PIPE,
            env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        )
        assert writer.stdout.readline().strip() == b"ready"
        time.sleep(rng.uniform(0.05, 0.5))
        writer.send_signal(signal.SIGKILL)
        writer.wait()
        restored = SnapshotStore(directory).read(Topology())
        assert restored is not None
        assert_same_state(expected, restored)
