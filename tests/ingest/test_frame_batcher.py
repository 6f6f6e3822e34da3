"""FrameBatcher: two overlapping stages keep the order of frames and lose none at stop."""

from __future__ import annotations

import logging
import threading

import pytest

from service.ingest.frame_batcher import FrameBatcher


def test_every_frame_reaches_the_sink_once_in_order_and_in_batches() -> None:
    applied: list[int] = []
    batches: list[int] = []
    gate = threading.Event()

    def prepare(frames):
        gate.wait(5)  # frames pile up meanwhile, so later batches are full
        return [int(body) for _, body, _ in frames]

    def sink(numbers):
        batches.append(len(numbers))
        applied.extend(numbers)

    batcher = FrameBatcher(prepare, sink, max_batch=100)
    batcher.start()
    for number in range(1000):
        batcher.put("/topic/t", str(number).encode(), None)
    gate.set()
    batcher.stop()

    assert applied == list(range(1000))
    assert max(batches) == 100 and len(batches) < 1000


def test_a_failing_batch_is_logged_and_the_stages_go_on(caplog: pytest.LogCaptureFixture) -> None:
    applied: list[bytes] = []

    def prepare(frames):
        if any(body == b"bad-parse" for _, body, _ in frames):
            raise RuntimeError("parser bug")
        return [body for _, body, _ in frames]

    def sink(bodies):
        if b"bad-apply" in bodies:
            raise RuntimeError("apply bug")
        applied.extend(bodies)

    batcher = FrameBatcher(prepare, sink, max_batch=1)
    batcher.start()
    with caplog.at_level(logging.ERROR, "nettel.ingest"):
        for body in (b"a", b"bad-parse", b"b", b"bad-apply", b"c"):
            batcher.put("/topic/t", body, None)
        batcher.stop()

    assert applied == [b"a", b"b", b"c"]
    assert [r.getMessage() for r in caplog.records] == [
        "parsing a batch of frames failed",
        "applying a batch of frames failed",
    ]
