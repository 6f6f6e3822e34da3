"""Stands where the ingest entry is, for tests of a source alone: keeps the frames it delivers."""

from __future__ import annotations

from collections.abc import Callable

from service.ingest.entry import LiveBatch
from service.ingest.pipeline import Frame


class FrameRecorder:
    """Records each delivered frame in `frames` (and calls `on_frame` with it, on the source's
    thread: a test can hold that thread there)."""

    def __init__(self, on_frame: Callable[[Frame], object] | None = None) -> None:
        self.frames: list[Frame] = []
        self._on_frame = on_frame

    def deliver(self, batch: LiveBatch) -> bool:
        for frame in batch.frames:
            self.frames.append(frame)
            if self._on_frame is not None:
                self._on_frame(frame)
        return True

    @property
    def bodies(self) -> list[bytes | str]:
        return [body for _, body, _ in self.frames]
