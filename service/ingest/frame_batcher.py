"""Hands frames from the STOMP receiver thread to two worker stages that work on whole batches.

The receiver only appends to a bounded queue (a deque, see FrameBatcher). The parse stage
drains up to `max_batch` frames at a time and prepares them (parsing, in the ingest thread or in
parser processes); the apply stage stores each prepared batch. The stages overlap: while one
batch is applied, the next is being parsed, and a small hand-off queue keeps their order. A full
queue blocks the stage before it, and in the end the receiver, which pushes back on the broker
over TCP instead of dropping anything. HTTP ingest cannot block its event loop: it `offer`s
frames, which a full queue refuses (the client is told to retry later). Sources reach it through
`service.ingest.entry.IngestEntry`.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from service.ingest.pipeline import Frame
from service.lifecycle import BackgroundLoop

_STOP = object()
#: Prepared batches waiting for the apply stage; one in hand plus one waiting is enough overlap.
_HANDOFF_BATCHES = 2
#: How long the parse stage lets frames gather before taking less than a full batch. Numpy
#: calls cost the same for 20 frames as for 500 (~0.2 ms a batch in all); under load, batches of
#: a few dozen frames spent ~4 us a message on them. 20 ms is 1/50 of the freshness budget.
LINGER_SECONDS = 0.02


class FrameBatcher:
    """`sink` receives each prepared batch (replaceable before `start`, e.g. by persistence).

    Received frames wait in a deque, not a `queue.Queue`: appending is one atomic call, where a
    Queue takes two lock round trips per frame on the receiver's thread (~1.2 us of its GIL time
    per message at full rate); the parse stage is woken by an event, once per batch.
    """

    name = "frame-batcher"

    def __init__(
        self,
        prepare: Callable[[Sequence[Frame]], Any],
        sink: Callable[[Any], object],
        max_batch: int = 512,
        max_queued: int = 50_000,
        linger: float = LINGER_SECONDS,
        log: logging.Logger | None = None,
    ) -> None:
        self.sink = sink
        self._linger = linger
        self._prepare = prepare
        self._max_batch = max_batch
        self._max_queued = max_queued
        self._frames: deque[Frame | object] = deque()
        # Bytes of the bodies queued = put + offered - taken; each count has one writing thread
        # (the receiver, the HTTP event loop, the parse stage), so none loses an update.
        self._bytes_put = self._bytes_offered = self._bytes_taken = 0
        self._arrived = threading.Event()  # set after an append; the parse stage clears it
        self._room = threading.Condition()  # the receiver waits here while the deque is full
        self._receiver_waits = False
        self._prepared: queue.Queue[Any] = queue.Queue(_HANDOFF_BATCHES)
        self._log = log or logging.getLogger("nettel.ingest")
        self._stages = [
            BackgroundLoop.once("ingest-parse", self._parse_stage),
            BackgroundLoop.once("ingest-apply", self._apply_stage),
        ]

    def start(self) -> None:
        for stage in self._stages:
            stage.start()

    def queued(self) -> int:
        """Received frames not yet taken by the parse stage."""
        return len(self._frames)

    def queued_bytes(self) -> int:
        """Bytes of the bodies of those frames."""
        return self._bytes_put + self._bytes_offered - self._bytes_taken

    def put(self, frame: Frame) -> None:
        """Queue a frame; blocks while `max_queued` frames wait."""
        if len(self._frames) >= self._max_queued:
            with self._room:
                self._receiver_waits = True
                while len(self._frames) >= self._max_queued:
                    self._room.wait()
        self._bytes_put += len(frame[1])
        self._frames.append(frame)
        if not self._arrived.is_set():
            self._arrived.set()

    def offer(self, frames: Sequence[Frame], max_bytes: int | None = None) -> bool:
        """Queue `frames` (all or none) unless `max_queued` frames would wait or the bodies would
        pass `max_bytes`; never blocks (for an HTTP event loop)."""
        size = sum(len(body) for _, body, _ in frames)
        if len(self._frames) + len(frames) > self._max_queued:
            return False
        if max_bytes is not None and self.queued_bytes() + size > max_bytes:
            return False
        self._bytes_offered += size
        self._frames.extend(frames)
        if not self._arrived.is_set():
            self._arrived.set()
        return True

    def stop(self, timeout: float = 5.0) -> None:
        """Apply everything already queued, then end both stages."""
        self._frames.append(_STOP)
        self._arrived.set()
        for stage in self._stages:
            stage.join(timeout)

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
        """Wait for frames, then take those queued, up to max_batch."""
        while not self._frames:
            self._arrived.wait()
            self._arrived.clear()  # an append after this sets it again; the deque is checked after
        if len(self._frames) < self._max_batch:
            time.sleep(self._linger)  # let a batch gather: the per-batch work is then shared
        batch: list[Frame] = []
        take = self._frames.popleft
        stopping = False
        for _ in range(min(len(self._frames), self._max_batch)):
            item = take()
            if item is _STOP:
                stopping = True
                break
            batch.append(item)  # type: ignore[arg-type]
        self._bytes_taken += sum(len(body) for _, body, _ in batch)
        if self._receiver_waits:
            with self._room:
                self._receiver_waits = False
                self._room.notify_all()
        return batch, stopping
