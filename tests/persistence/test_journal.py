"""The frame journal: batches read back in order, torn tails ignored, covered segments dropped."""

from __future__ import annotations

import logging
from pathlib import Path

from service.broker.ack_token import AckToken
from service.ingest.pipeline import IngestPipeline
from service.parse.records import MeasurementKind
from service.persistence.durability import Persistence
from service.persistence.journal import Journal
from service.persistence.snapshot_store import SnapshotStore
from service.state.link_state import LinkState
from service.topology.topology import Topology
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


class FailingJournal(Journal):
    """A journal whose next `failures` appends fail as on a full disk."""

    failures = 0

    def append(self, frames) -> None:
        if self.failures:
            self.failures -= 1
            raise OSError(28, "No space left on device")
        super().append(frames)


def token(number: int) -> AckToken:
    return AckToken(generation=1, subscription="0", ack_id=f"id-{number}")


def test_after_a_journal_failure_acks_wait_for_the_snapshot_that_covers_the_batch(
    tmp_path: Path, caplog
) -> None:
    acked: list[AckToken] = []
    pipeline = IngestPipeline(LinkState(), {LOSS_TOPIC: MeasurementKind.LOSS}, clock=lambda: NOW)
    journal = FailingJournal(tmp_path)
    persistence = Persistence(pipeline, SnapshotStore(tmp_path), journal, acked.extend)
    persistence.apply_batch([(*loss_frame("10.0.0.1"), token(1))])
    assert acked == [token(1)]

    journal.failures = 1
    with caplog.at_level(logging.ERROR, "nettel.snapshot"):
        persistence.apply_batch([(*loss_frame("10.0.0.2"), token(2))])  # applied, not journaled
    assert "journal append failed" in caplog.text
    persistence.apply_batch([(*loss_frame("10.0.0.3"), token(3))])  # journaled, but an ack of 3
    assert acked == [token(1)]  # would cover 2 as well: both wait

    persistence.snapshot()  # has 10.0.0.2 and 10.0.0.3: every held token is released, in order
    assert acked == [token(1), token(2), token(3)]  # (the source acks what its broker needs)
    persistence.apply_batch([(*loss_frame("10.0.0.4"), token(4))])
    assert acked == [token(1), token(2), token(3), token(4)]  # acknowledged as it comes again
    assert sorted(pipeline.state.index.sources) == [f"10.0.0.{n}" for n in range(1, 5)]
