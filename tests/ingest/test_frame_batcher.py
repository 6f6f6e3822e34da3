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
        batcher.put(("/topic/t", str(number).encode(), None))
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
            batcher.put(("/topic/t", body, None))
        batcher.stop()

    assert applied == [b"a", b"b", b"c"]
    assert [r.getMessage() for r in caplog.records] == [
        "parsing a batch of frames failed",
        "applying a batch of frames failed",
    ]


def test_a_full_queue_blocks_the_receiver_until_the_parse_stage_takes_frames() -> None:
    applied: list[int] = []
    gate = threading.Event()

    def prepare(frames):
        gate.wait(5)
        return [int(body) for _, body, _ in frames]

    batcher = FrameBatcher(prepare, applied.extend, max_batch=2, max_queued=3)
    batcher.start()

    def receive() -> None:
        for number in range(10):
            batcher.put(("/topic/t", str(number).encode(), None))

    receiver = threading.Thread(target=receive)
    receiver.start()
    receiver.join(0.5)
    assert receiver.is_alive()  # blocked: one batch in prepare, three frames queued
    assert batcher.queued() == 3
    gate.set()
    receiver.join(5)
    assert not receiver.is_alive()
    batcher.stop()
    assert applied == list(range(10))
