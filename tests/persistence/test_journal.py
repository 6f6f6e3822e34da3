"""The frame journal: batches read back in order, torn tails ignored, covered segments dropped."""

from __future__ import annotations

import logging
import struct
import zlib
from pathlib import Path

from service.broker.ack_token import AckToken
from service.ingest.pipeline import IngestPipeline
from service.parse.records import MeasurementKind
from service.persistence.durability import Persistence
from service.persistence.journal import MAGIC, REJECTED_SUFFIX, Damage, Journal, read_segment
from service.persistence.snapshot_store import SnapshotStore
from service.publish.metrics.persistence import PersistenceCollector
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


def new_persistence(directory: Path) -> tuple[IngestPipeline, Persistence]:
    store = SnapshotStore(directory)
    state = store.read(Topology()) or LinkState()
    pipeline = IngestPipeline(state, {LOSS_TOPIC: MeasurementKind.LOSS}, clock=lambda: NOW)
    persistence = Persistence(pipeline, store, Journal(directory), interval=3600)
    persistence.replay_journal()
    return pipeline, persistence


def test_restart_after_a_crash_has_every_acknowledged_frame(tmp_path: Path) -> None:
    pipeline, persistence = new_persistence(tmp_path)
    persistence.apply_batch([(*loss_frame("10.0.0.1"), None)])
    persistence.snapshot()
    persistence.apply_batch([(*loss_frame("10.0.0.2"), None)])  # journaled, not in the snapshot
    # crash: no stop(), no final snapshot
    restarted, _ = new_persistence(tmp_path)
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


class Acknowledged(list[AckToken]):
    """The acknowledgements a source would send, in order (its tokens' channel)."""

    def acknowledge(self, tokens) -> int:
        tokens = list(tokens)
        self.extend(tokens)
        return len(tokens)


ACKED = Acknowledged()


def token(number: int) -> AckToken:
    return AckToken(generation=1, subscription="0", ack_id=f"id-{number}", channel=ACKED)


def test_after_a_journal_failure_acks_wait_for_the_snapshot_that_covers_the_batch(
    tmp_path: Path, caplog
) -> None:
    acked = ACKED
    acked.clear()
    pipeline = IngestPipeline(LinkState(), {LOSS_TOPIC: MeasurementKind.LOSS}, clock=lambda: NOW)
    journal = FailingJournal(tmp_path)
    persistence = Persistence(pipeline, SnapshotStore(tmp_path), journal)
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


# ---- damage: a torn tail against corruption in the middle (issue 40, section 5) --------------


def numbered_frames(count: int) -> list[tuple[str, bytes]]:
    """`count` loss frames, each on its own link (10.1.x.y -> the default destination)."""
    return [
        (LOSS_TOPIC, body({str(NOW - 120): 0.25}, meta(source=f"10.1.{n // 250}.{n % 250 + 1}")))
        for n in range(count)
    ]


def record_offsets(data: bytes) -> list[int]:
    """Where each record of an undamaged segment starts."""
    offsets, offset = [], 0
    while offset < len(data):
        offsets.append(offset)
        length = int.from_bytes(data[offset + 4 : offset + 8], "little")
        offset += 16 + length
    return offsets


def written_segment(directory: Path, frames: list[tuple[str, bytes]]) -> Path:
    journal = Journal(directory)
    journal.append(frames)
    journal.close()
    (segment,) = journal.segments()
    return segment


def flip(data: bytes, bit: int) -> bytes:
    damaged = bytearray(data)
    damaged[bit // 8] ^= 1 << (bit % 8)
    return bytes(damaged)


def test_a_flipped_bit_anywhere_in_record_3_of_601_loses_that_record_only(tmp_path: Path) -> None:
    frames = numbered_frames(601)
    segment = written_segment(tmp_path, frames)
    data = segment.read_bytes()
    offsets = record_offsets(data)
    assert len(offsets) == 601
    third, fourth = offsets[2], offsets[3]
    # every bit of the 16-byte header (magic, length, payload CRC, header CRC), then the payload's
    # first, middle and last bytes
    payload_bytes = [third + 16, (third + 16 + fourth) // 2, fourth - 1]
    bits = [*range(third * 8, (third + 16) * 8)]
    bits += [b * 8 + k for b in payload_bytes for k in range(8)]
    for bit in bits:
        damage: list[Damage] = []
        replayed = list(read_segment(flip(data, bit), damage))
        assert replayed == frames[:2] + frames[3:], f"bit {bit - third * 8} of record 3"
        assert damage == [Damage("corrupt", third, fourth - third, records_after=598)]


def test_the_corrupt_segment_is_kept_as_rejected_and_the_replay_goes_on(tmp_path: Path) -> None:
    frames = numbered_frames(601)
    segment = written_segment(tmp_path, frames)
    data = segment.read_bytes()
    third = record_offsets(data)[2]
    damaged = flip(data, (third + 40) * 8 + 3)
    segment.write_bytes(damaged)
    journal = Journal(tmp_path)
    assert list(journal.replay()) == frames[:2] + frames[3:]
    kept = tmp_path / (segment.name + REJECTED_SUFFIX)
    assert kept.read_bytes() == damaged  # the evidence, byte for byte
    assert journal.damage == [
        Damage("corrupt", third, record_offsets(data)[3] - third, segment.name, 598, str(kept))
    ]
    assert journal.segments() == sorted([segment, tmp_path / journal.segments()[-1].name])
    journal.drop_before(journal.rotate())  # a snapshot deletes the segment, not the evidence
    assert kept.exists() and not segment.exists()


def test_a_torn_tail_is_told_from_corruption_and_kept_no_copy_of(tmp_path: Path) -> None:
    frames = numbered_frames(5)
    segment = written_segment(tmp_path, frames)
    data = segment.read_bytes()
    last = record_offsets(data)[-1]
    for cut in (1, 5, 16, 17, len(data) - last - 1):  # a partial header, then a partial payload
        segment.write_bytes(data[: last + cut])
        journal = Journal(tmp_path)
        assert list(journal.replay()) == frames[:4]
        assert journal.damage == [Damage("torn", last, cut, segment.name)]
        journal.close()
    assert not list(tmp_path.glob(f"*{REJECTED_SUFFIX}"))


def test_damage_in_several_places_loses_only_the_damaged_records(tmp_path: Path) -> None:
    frames = numbered_frames(20)
    data = written_segment(tmp_path, frames).read_bytes()
    offsets = record_offsets(data)
    damaged = data
    for record in (0, 7, 8, 15):
        damaged = flip(damaged, (offsets[record] + 20) * 8)
    damaged += data[offsets[19] : offsets[19] + 30]  # and a torn append at the end
    damage: list[Damage] = []
    replayed = list(read_segment(damaged, damage))
    assert replayed == [f for n, f in enumerate(frames) if n not in (0, 7, 8, 15)]
    assert [(d.kind, d.offset, d.records_after) for d in damage] == [
        ("corrupt", 0, 16),
        ("corrupt", offsets[7], 10),  # records 7 and 8: one stretch
        ("corrupt", offsets[15], 4),
        ("torn", len(data), 0),
    ]


def test_a_body_holding_the_magic_is_not_taken_for_a_record(tmp_path: Path) -> None:
    fake = MAGIC + (5).to_bytes(4, "little") * 3 + b"12345"  # a record's shape, wrong CRCs
    frames = [(LOSS_TOPIC, b"x" + fake), (LOSS_TOPIC, fake * 3), (LOSS_TOPIC, b"{}")]
    data = written_segment(tmp_path, frames).read_bytes()
    damage: list[Damage] = []
    assert list(read_segment(flip(data, 8 * 20), damage)) == frames[1:]
    assert [d.kind for d in damage] == ["corrupt"]


def legacy_record(destination: str, payload_body: bytes) -> bytes:
    """A record as journals wrote them before the magic: length, CRC32, payload."""
    payload = destination.encode() + b"\x00" + payload_body
    return struct.pack("<II", len(payload), zlib.crc32(payload)) + payload


def test_segments_written_before_the_magic_still_replay(tmp_path: Path) -> None:
    frames = numbered_frames(4)
    legacy = b"".join(legacy_record(d, b) for d, b in frames)
    (tmp_path / "journal-000000000001.log").write_bytes(legacy)
    journal = Journal(tmp_path)  # a new-format segment after it (number 2)
    journal.append(frames[:1])
    journal.close()
    journal = Journal(tmp_path)
    assert list(journal.replay()) == frames + frames[:1]
    assert journal.damage == []
    # damage in an old segment: what follows it cannot be found again, and it is reported
    cut = len(legacy_record(*frames[0]))
    damage: list[Damage] = []
    assert list(read_segment(flip(legacy, (cut + 12) * 8), damage)) == frames[:1]
    assert [(d.kind, d.offset) for d in damage] == [("corrupt", cut)]
    damage = []
    assert list(read_segment(legacy[:-3], damage)) == frames[:3]
    assert [d.kind for d in damage] == ["torn"]


def test_restart_replays_the_600_intact_frames_logs_and_counts_the_bad_one(
    tmp_path: Path, caplog
) -> None:
    frames = numbered_frames(601)
    _, persistence = new_persistence(tmp_path)
    persistence.apply_batch([(*frame, None) for frame in frames])  # journaled; then a crash
    (segment,) = [s for s in Journal(tmp_path).segments() if s.stat().st_size]
    data = segment.read_bytes()
    segment.write_bytes(flip(data, (record_offsets(data)[2] + 30) * 8))
    with caplog.at_level(logging.INFO, "nettel.snapshot"):
        restarted, persistence = new_persistence(tmp_path)
    assert len(restarted.state.index.sources) == 600
    assert "10.1.0.3" not in restarted.state.index.sources  # record 3's link
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert [r.getMessage() for r in errors] == [
        "journal record corrupt; skipped, the intact records after it replayed"
    ]
    assert errors[0].records_after == 598 and errors[0].segment == segment.name
    assert errors[0].kept_as == str(segment) + REJECTED_SUFFIX
    assert persistence.journal_damage == {"corrupt": 1}
    collected = {
        tuple(sample.labels.values()): sample.value
        for family in PersistenceCollector(persistence, lambda: 0.0).collect()
        if family.name == "nettel_journal_damaged_records"
        for sample in family.samples
        if sample.name.endswith("_total")
    }
    assert collected == {("torn",): 0, ("corrupt",): 1}
