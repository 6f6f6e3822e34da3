"""The one entry into the pipeline: every source (`service.ingest.source`) delivers here.

A batch is live or history:
- `LiveBatch`: frames as they arrive (bus messages, posted pScheduler runs). They go to the frame
  batcher, which parses and applies them in batches (journaled first with --state-dir). A
  source that may wait (the bus receiver) blocks while the batcher's queue is full, which pushes
  back on the broker; one that cannot (an HTTP event loop) is refused instead (`wait=False`).
- `HistoryBatch`: archived messages (the backfill). They are parsed and applied at once, in the
  caller's thread, with `LinkState.apply_history`: minutes older than the window fold into the
  all-time moments. The caller gets what became of each, for its own report.

Without a batcher (`nettel backfill`, tests) live frames are applied in the caller's thread.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import overload

from service.ingest.frame_batcher import FrameBatcher
from service.ingest.pipeline import Frame, HistoryApplied, IngestPipeline, Parser
from service.parse.perfsonar import ParseInput


@dataclass(frozen=True, slots=True)
class LiveBatch:
    """Frames as they arrive: (destination, body, ack token or posting client)."""

    frames: Sequence[Frame]
    #: False: refuse the batch rather than wait while the queue is full (or would pass
    #: `max_queued_bytes`).
    wait: bool = True
    max_queued_bytes: int | None = None


@dataclass(frozen=True, slots=True)
class HistoryBatch:
    """Archived messages (kind, bus body) to apply at `now`, parsed with `parse` (None: the
    pipeline's parser)."""

    inputs: ParseInput
    now: float
    parse: Parser | None = None


class IngestEntry:
    """Where every source hands over what it read."""

    def __init__(self, pipeline: IngestPipeline, batcher: FrameBatcher | None = None) -> None:
        self.pipeline = pipeline
        self._batcher = batcher

    @overload
    def deliver(self, batch: LiveBatch) -> bool: ...

    @overload
    def deliver(self, batch: HistoryBatch) -> HistoryApplied: ...

    def deliver(self, batch: LiveBatch | HistoryBatch) -> bool | HistoryApplied:
        """Hand a batch over. Live: True once queued (or applied), False when refused for
        want of room (only with `wait=False`). History: what became of each message."""
        if isinstance(batch, HistoryBatch):
            return self.pipeline.apply_history(batch.inputs, batch.now, batch.parse)
        batcher = self._batcher
        if batcher is None:
            self.pipeline.handle_frames(batch.frames)
            return True
        if batch.wait:
            for frame in batch.frames:
                batcher.put(frame)
            return True
        return batcher.offer(batch.frames, batch.max_queued_bytes)

    def queued_bytes(self) -> int:
        """Bytes of the live frames waiting to be parsed."""
        return 0 if self._batcher is None else self._batcher.queued_bytes()
