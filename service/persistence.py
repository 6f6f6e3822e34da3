"""Periodic state snapshots, and the broker acknowledgements that wait for them.

A frame is acknowledged only after a snapshot containing what it carried is on disk, so a crash
at any moment loses nothing: unacknowledged frames are redelivered and applied idempotently.
Snapshots are taken every `interval` seconds, when `max_unacked` frames wait for one (so the
broker's prefetch window never fills), and at shutdown.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable

from service.ingest.ack_token import AckToken
from service.ingest.pipeline import IngestPipeline
from service.state.snapshot_codec import encode_state
from service.state.snapshot_store import SnapshotStore

TICK_SECONDS = 0.5


class Persistence:
    def __init__(
        self,
        pipeline: IngestPipeline,
        store: SnapshotStore,
        acknowledge: Callable[[Iterable[AckToken]], int],
        interval: float = 60.0,
        max_unacked: int = 10_000,
        log: logging.Logger | None = None,
    ) -> None:
        self.store = store
        self.last_written_at: float | None = None
        self.last_duration: float | None = None
        self._pipeline = pipeline
        self._acknowledge = acknowledge
        self._interval = interval
        self._max_unacked = max_unacked
        self._log = log or logging.getLogger("nettel.snapshot")
        self._write_lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="state-snapshots", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Stop the schedule and write a final snapshot (acknowledging what it holds)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        self.snapshot()

    def snapshot(self) -> int:
        """Write a snapshot now, then acknowledge the frames it contains; returns its size."""
        with self._write_lock:
            started = time.perf_counter()
            with self._pipeline.lock:
                data = encode_state(self._pipeline.state)
                tokens = self._pipeline.take_pending_acks()
            self.store.write(data)
            self._acknowledge(tokens)
            self.last_written_at = time.time()
            self.last_duration = time.perf_counter() - started
            return len(data)

    def _run(self) -> None:
        due = time.monotonic() + self._interval
        while not self._stop.wait(TICK_SECONDS):
            if time.monotonic() < due and self._pipeline.unacked_count < self._max_unacked:
                continue
            try:
                self.snapshot()
            except OSError:
                self._log.exception("state snapshot failed; frames stay unacknowledged")
            due = time.monotonic() + self._interval
