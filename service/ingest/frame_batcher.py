"""Hands frames from the STOMP receiver thread to one worker that applies them in batches.

The receiver only appends to a bounded queue; the worker drains up to `max_batch` frames at a
time so parsing and histogram statistics run once per batch. A full queue blocks the receiver,
which pushes back on the broker over TCP instead of dropping anything.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable, Sequence

from service.ingest.ack_token import AckToken
from service.ingest.pipeline import Frame

_STOP = object()


class FrameBatcher:
    """`sink` receives each batch (replaceable before `start`, e.g. by the persistence layer)."""

    def __init__(
        self,
        apply: Callable[[Sequence[Frame]], object],
        max_batch: int = 512,
        max_queued: int = 50_000,
        log: logging.Logger | None = None,
    ) -> None:
        self.sink = apply
        self._max_batch = max_batch
        self._queue: queue.Queue[Frame | object] = queue.Queue(max_queued)
        self._log = log or logging.getLogger("nettel.ingest")
        self._thread = threading.Thread(target=self._run, name="ingest-batcher", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def put(self, destination: str, body: bytes, ack: AckToken | None) -> None:
        self._queue.put((destination, body, ack))

    def stop(self, timeout: float = 5.0) -> None:
        """Apply everything already queued, then end the worker."""
        self._queue.put(_STOP)
        self._thread.join(timeout)

    def _run(self) -> None:
        while True:
            batch, stopping = self._next_batch()
            if batch:
                try:
                    self.sink(batch)
                except Exception:  # the consumer must outlive any bug in the pipeline
                    self._log.exception("applying a batch of frames failed")
            if stopping:
                return

    def _next_batch(self) -> tuple[list[Frame], bool]:
        """Block for one frame, then take whatever else is queued, up to max_batch."""
        batch: list[Frame] = []
        item = self._queue.get()
        while item is not _STOP:
            batch.append(item)  # type: ignore[arg-type]
            if len(batch) >= self._max_batch:
                return batch, False
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                return batch, False
        return batch, True
