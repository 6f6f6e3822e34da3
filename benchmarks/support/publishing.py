"""Publish a corpus persistently from a few producer threads, and time it."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass

import stomp

from benchmarks.support.broker import connect
from benchmarks.support.corpus import WireMessage

RECEIPT_TIMEOUT = 600.0


@dataclass(frozen=True)
class PublishResult:
    messages: int
    body_bytes: int
    seconds: float
    threads: int

    @property
    def rate(self) -> float:
        return self.messages / self.seconds if self.seconds > 0 else float("nan")


class _ReceiptWaiter(stomp.ConnectionListener):
    def __init__(self) -> None:
        self.received: set[str] = set()
        self.arrived = threading.Condition()

    def on_receipt(self, frame: stomp.utils.Frame) -> None:
        with self.arrived:
            self.received.add(frame.headers.get("receipt-id", ""))
            self.arrived.notify_all()

    def wait(self, receipt: str, timeout: float) -> bool:
        with self.arrived:
            return self.arrived.wait_for(lambda: receipt in self.received, timeout)


def send(connection: stomp.Connection12, message: WireMessage, **extra: str) -> None:
    connection.send(message.destination, message.body, headers=message.headers | extra)


def publish_all(brokers: str, messages: Sequence[WireMessage], threads: int) -> PublishResult:
    """Send `messages` (interleaved over `threads` connections), persistent; time from the first
    send to the broker's receipt for every thread's last message."""
    slices = [messages[i::threads] for i in range(threads)]
    start = threading.Barrier(threads + 1)
    errors: list[BaseException] = []
    workers = [
        threading.Thread(target=_produce, args=(brokers, part, start, f"bench-{i}", errors))
        for i, part in enumerate(slices)
    ]
    for worker in workers:
        worker.start()
    start.wait()
    began = time.perf_counter()
    for worker in workers:
        worker.join()
    seconds = time.perf_counter() - began
    if errors:
        raise RuntimeError(f"producer failed: {errors[0]!r}") from errors[0]
    return PublishResult(len(messages), sum(len(m.body) for m in messages), seconds, threads)


def _produce(
    brokers: str,
    messages: Sequence[WireMessage],
    start: threading.Barrier,
    name: str,
    errors: list[BaseException],
) -> None:
    waiter = _ReceiptWaiter()
    try:
        connection = connect(brokers, listener=waiter)
    except BaseException as error:  # report, and release the barrier for the others
        errors.append(error)
        start.abort()
        return
    try:
        start.wait()
        for message in messages[:-1]:
            send(connection, message)
        receipt = f"{name}-last"
        send(connection, messages[-1], receipt=receipt)
        if not waiter.wait(receipt, RECEIPT_TIMEOUT):
            raise TimeoutError(f"no receipt for {receipt}")
    except BaseException as error:
        errors.append(error)
    finally:
        connection.disconnect()
