"""Hands frames from the STOMP receiver thread to two worker stages that work on whole batches.

The receiver only appends to a bounded queue. The parse stage drains up to `max_batch` frames at
a time and prepares them (parsing, in parser processes when configured); the apply stage stores
each prepared batch. The stages overlap: while one batch is applied, the next is being parsed,
and a small hand-off queue keeps their order. A full queue blocks the stage before it, and in the
end the receiver, which pushes back on the broker over TCP instead of dropping anything.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable, Sequence
from typing import Any

from service.ingest.ack_token import AckToken
from service.ingest.pipeline import Frame

_STOP = object()
#: Prepared batches waiting for the apply stage; one in hand plus one waiting is enough overlap.
_HANDOFF_BATCHES = 2


class FrameBatcher:
    """`sink` receives each prepared batch (replaceable before `start`, e.g. by persistence)."""

    def __init__(
        self,
        prepare: Callable[[Sequence[Frame]], Any],
        sink: Callable[[Any], object],
        max_batch: int = 512,
        max_queued: int = 50_000,
        log: logging.Logger | None = None,
    ) -> None:
        self.sink = sink
        self._prepare = prepare
        self._max_batch = max_batch
        self._queue: queue.Queue[Frame | object] = queue.Queue(max_queued)
        self._prepared: queue.Queue[Any] = queue.Queue(_HANDOFF_BATCHES)
        self._log = log or logging.getLogger("nettel.ingest")
        self._threads = [
            threading.Thread(target=self._parse_stage, name="ingest-parse", daemon=True),
            threading.Thread(target=self._apply_stage, name="ingest-apply", daemon=True),
        ]

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def queued(self) -> int:
        """Received frames not yet taken by the parse stage (approximate, as queues are)."""
        return self._queue.qsize()

    def put(self, destination: str, body: bytes, ack: AckToken | None) -> None:
        self._queue.put((destination, body, ack))

    def stop(self, timeout: float = 5.0) -> None:
        """Apply everything already queued, then end both stages."""
        self._queue.put(_STOP)
        for thread in self._threads:
            thread.join(timeout)

    def _parse_stage(self) -> None:
        while True:
            batch, stopping = self._next_batch()
            if batch:
                try:
                    self._prepared.put(self._prepare(batch))
                except Exception:  # the consumer must outlive any bug in the pipeline
                    self._log.exception("parsing a batch of frames failed")
            if stopping:
                self._prepared.put(_STOP)
                return

    def _apply_stage(self) -> None:
        while (prepared := self._prepared.get()) is not _STOP:
            try:
                self.sink(prepared)
            except Exception:  # the consumer must outlive any bug in the pipeline
                self._log.exception("applying a batch of frames failed")

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
