"""The frame journal: batches read back in order, torn tails ignored, covered segments dropped."""

from __future__ import annotations

from pathlib import Path

from service.ingest.pipeline import IngestPipeline
from service.parse.records import MeasurementKind
from service.persistence import Persistence
from service.state.journal import Journal
from service.state.link_state import LinkState
from service.state.snapshot_store import SnapshotStore
from service.state.topology import Topology
from tests.message_factory import body, meta

LOSS_TOPIC = "/topic/perfsonar.raw.packet-loss-rate"
NOW = 1_700_000_000


def loss_frame(source: str, ts: int = NOW - 120) -> tuple[str, bytes]:
    return LOSS_TOPIC, body({str(ts): 0.25}, meta(source=source))


def test_batches_read_back_in_order_across_rotations(tmp_path: Path) -> None:
    journal = Journal(tmp_path)
    journal.append([loss_frame("10.0.0.1"), loss_frame("10.0.0.2")])
    journal.rotate()
    journal.append([loss_frame("10.0.0.3")])
    journal.close()
    reopened = Journal(tmp_path)
    assert [frame for frame in reopened.replay()] == [
        loss_frame("10.0.0.1"),
        loss_frame("10.0.0.2"),
        loss_frame("10.0.0.3"),
    ]


def test_a_torn_last_record_is_ignored(tmp_path: Path) -> None:
    journal = Journal(tmp_path)
    journal.append([loss_frame("10.0.0.1"), loss_frame("10.0.0.2")])
    journal.close()
    (segment,) = journal.segments()
    segment.write_bytes(segment.read_bytes()[:-5])
    assert list(Journal(tmp_path).replay()) == [loss_frame("10.0.0.1")]


def test_drop_before_keeps_only_uncovered_segments(tmp_path: Path) -> None:
    journal = Journal(tmp_path)
    journal.append([loss_frame("10.0.0.1")])
    first_uncovered = journal.rotate()
    journal.append([loss_frame("10.0.0.2")])
    journal.drop_before(first_uncovered)
    assert list(journal.replay()) == [loss_frame("10.0.0.2")]


def new_persistence(directory: Path, acked: list) -> tuple[IngestPipeline, Persistence]:
    store = SnapshotStore(directory)
    state = store.read(Topology()) or LinkState()
    pipeline = IngestPipeline(state, {LOSS_TOPIC: MeasurementKind.LOSS}, clock=lambda: NOW)
    persistence = Persistence(pipeline, store, Journal(directory), acked.extend, interval=3600)
    persistence.replay_journal()
    return pipeline, persistence


def test_restart_after_a_crash_has_every_acknowledged_frame(tmp_path: Path) -> None:
    acked: list = []
    pipeline, persistence = new_persistence(tmp_path, acked)
    persistence.apply_batch([(*loss_frame("10.0.0.1"), None)])
    persistence.snapshot()
    persistence.apply_batch([(*loss_frame("10.0.0.2"), None)])  # journaled, not in the snapshot
    # crash: no stop(), no final snapshot
    restarted, _ = new_persistence(tmp_path, acked)
    assert sorted(restarted.state.index.sources) == ["10.0.0.1", "10.0.0.2"]
    assert restarted.counters.datapoints_applied == 1  # only the journaled frame was replayed
