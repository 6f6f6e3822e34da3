"""Durability: applied frames are journaled before they are acknowledged; snapshots bound replay.

A batch of frames is applied to link state, appended to the journal and fsynced, and only then
acknowledged to the broker, so a crash at any moment loses nothing: unacknowledged frames are
redelivered, journaled ones replayed at start, and both are applied idempotently. Every
`interval` seconds (and at shutdown) the state is snapshotted and the journal segments it covers
are deleted, so a restart replays at most one interval of frames.

Every frame's ack token goes back through its own channel (`AckToken.channel`, the source that
received it), which sends what its broker needs (ActiveMQ's cumulative acks: the last frame of
each subscription; RabbitMQ's individual ones: every frame). If the journal cannot be written (a
full or failing disk), the batch stays applied but is not acknowledged, and neither is anything
after it (a later cumulative ack would cover the unjournaled batch). Held tokens wait for a
snapshot that covers what they carried; the broker stops delivering once `prefetch` frames per
subscription are unacknowledged, which bounds both the wait and the tokens held.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence

from service.broker.ack_token import AckToken, acknowledge_all
from service.ingest.pipeline import Frame, IngestPipeline, ParsedFrames
from service.lifecycle import BackgroundLoop
from service.persistence.journal import Damage, DamageKind, Journal
from service.persistence.snapshot_codec import encode_state
from service.persistence.snapshot_store import SnapshotStore

TICK_SECONDS = 0.5
REPLAY_BATCH = 1024


class Persistence:
    """Journals each applied batch before acknowledging it, and snapshots the state every
    `interval` seconds (and at stop)."""

    name = "persistence"

    def __init__(
        self,
        pipeline: IngestPipeline,
        store: SnapshotStore,
        journal: Journal,
        interval: float = 60.0,
        log: logging.Logger | None = None,
    ) -> None:
        self.store = store
        self.last_written_at: float | None = None
        self.last_duration: float | None = None
        self._pipeline = pipeline
        self._journal = journal
        self._log = log or logging.getLogger("nettel.snapshot")
        self._write_lock = threading.Lock()
        self._ack_lock = threading.Lock()
        self._holding_acks = False
        self._held_acks: list[AckToken] = []
        self._journal_failed_since_capture = False
        #: Damaged stretches the journal replay found, by kind (`torn`, `corrupt`).
        self.journal_damage: dict[DamageKind, int] = {}
        self._loop = BackgroundLoop(self.name, self._snapshot_quietly, interval, wait_first=True)

    def replay_journal(self) -> int:
        """Apply the journaled frames the restored snapshot may lack; returns how many."""
        frames: list[Frame] = []
        replayed = 0
        for destination, body in self._journal.replay():
            frames.append((destination, body, None))
            if len(frames) == REPLAY_BATCH:
                replayed += self._replay(frames)
        replayed += self._replay(frames)
        for damage in self._journal.damage:
            self._report(damage)
        if replayed:
            self._log.info("journal replayed", extra={"frames": replayed})
        return replayed

    def _report(self, damage: Damage) -> None:
        """Log and count one damaged stretch of the journal found by the replay."""
        self.journal_damage[damage.kind] = self.journal_damage.get(damage.kind, 0) + 1
        extra = {
            "segment": damage.segment,
            "offset": damage.offset,
            "bytes": damage.length,
            "records_after": damage.records_after,
        }
        if damage.kind == "torn":
            self._log.warning(
                "journal segment ends in a torn record (a crash mid-append; never acknowledged)",
                extra=extra,
            )
            return
        self._log.error(
            "journal record corrupt; skipped, the intact records after it replayed",
            extra={**extra, "kept_as": damage.kept_as},
        )

    def apply_batch(self, frames: Sequence[Frame]) -> None:
        """Parse, apply, journal, fsync, then acknowledge one batch."""
        self.apply_parsed(self._pipeline.parse_frames(frames))

    def apply_parsed(self, parsed: ParsedFrames) -> None:
        """Apply, journal, fsync, then acknowledge one parsed batch (the frame batcher's sink)."""
        self._pipeline.apply_parsed(parsed)
        journaled = self._journal_batch(parsed.frames)
        tokens = [token for _, _, token in parsed.frames if isinstance(token, AckToken)]
        with self._ack_lock:
            if not journaled:
                self._holding_acks = self._journal_failed_since_capture = True
            if self._holding_acks:
                self._held_acks.extend(tokens)
                return
        acknowledge_all(tokens)

    def _journal_batch(self, frames: Sequence[Frame]) -> bool:
        try:
            self._journal.append(
                [
                    (dest, body if isinstance(body, bytes) else body.encode())
                    for dest, body, _ in frames
                ]
            )
        except OSError:
            self._log.exception("journal append failed; acknowledgements wait for a snapshot")
            return False
        return True

    def start(self) -> None:
        self._loop.start()

    def stop(self) -> None:
        """Stop the schedule and write a final snapshot."""
        self._loop.stop(timeout=None)
        self.snapshot()
        self._journal.close()

    def snapshot(self) -> int:
        """Write a snapshot now and drop the journal segments it covers; returns its size."""
        with self._write_lock:
            started = time.perf_counter()
            with self._ack_lock:
                covered = len(self._held_acks)  # their batches are applied: the state has them
                self._journal_failed_since_capture = False
            with self._pipeline.state.frozen() as state:  # nothing applied between the two
                data = encode_state(state)
                first_uncovered = self._journal.rotate()
            self.store.write(data)
            self._journal.drop_before(first_uncovered)
            self.last_written_at = time.time()
            self.last_duration = time.perf_counter() - started
            self._release_held_acks(covered)
            return len(data)

    def _release_held_acks(self, covered: int) -> None:
        """Acknowledge the first `covered` held tokens, which the snapshot covers, and those
        held since if they were all journaled."""
        with self._ack_lock:
            if self._journal_failed_since_capture:  # keep holding what came after the capture
                released = self._held_acks[:covered]
                del self._held_acks[:covered]
            else:
                released, self._held_acks = self._held_acks, []
                self._holding_acks = False
        if released:
            acknowledge_all(released)

    def _replay(self, frames: list[Frame]) -> int:
        count = len(frames)
        if frames:
            self._pipeline.handle_frames(frames)
            frames.clear()
        return count

    def _snapshot_quietly(self) -> None:
        """The schedule's step: a failed snapshot is logged, the next one tried."""
        try:
            self.snapshot()
        except OSError:
            self._log.exception("state snapshot failed; the journal keeps growing")
