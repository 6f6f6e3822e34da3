"""The STOMP receive path alone: stomp.py's reader and nettel's on the same bytes, in-process.

The corpus is laid out as ActiveMQ 5.17 sends MESSAGE frames (the headers it sets, as read off a
real broker, plus the publisher's) and handed to each transport's read step in reads of that
transport's own size (stomp.py 16 KiB, nettel 128 KiB), with a listener that only counts. No
broker and no socket, so the figure is the CPU time per message of reading, splitting, parsing
and dispatching frames, which the drains over the wire cannot separate from the broker's.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import stomp

from benchmarks.support.corpus import WireMessage
from service.broker.stomp_transport import RECV_BYTES, BufferedTransport

STOMP_PY_RECV_BYTES = 16 * 1024
#: Headers ActiveMQ 5.17 adds to a MESSAGE frame of a persistent topic message.
_BROKER_HEADERS = ("expires", "destination", "subscription", "priority", "message-id", "timestamp")


def activemq_stream(messages: Sequence[WireMessage], first_timestamp_ms: int) -> bytes:
    """`messages` as the MESSAGE frames an ActiveMQ subscription would receive, one stream."""
    frames = []
    for number, message in enumerate(messages, start=1):
        headers = {
            "content-length": str(len(message.body)),
            "expires": "0",
            "destination": message.destination,
            "subscription": "0",
            "priority": "4",
            "message-id": f"ID\\cbench-40155-1732200000000-3\\c3\\c-1\\c1\\c{number}",
            "persistent": "true",
            "timestamp": str(first_timestamp_ms + number),
        }
        headers |= {k: v for k, v in message.headers.items() if k not in _BROKER_HEADERS}
        preamble = "".join(f"{key}:{value}\n" for key, value in headers.items())
        frames.append(b"MESSAGE\n" + preamble.encode() + b"\n" + message.body + b"\x00\n")
    return b"".join(frames)


class ReplayedReads:
    """Mixin for a stomp.py transport whose socket hands out `reads` one per receive, then b""
    (as a non-blocking socket with nothing more to read)."""

    def __init__(self, reads: list[bytes], **options: Any) -> None:
        super().__init__([("localhost", 61613)], **options)  # type: ignore[call-arg]
        self.reads = reads[::-1]
        self.running = True
        self.blocking = False

    def receive(self) -> bytes:
        return self.reads.pop() if self.reads else b""

    def read_all(self) -> None:
        """Run the transport's own read-and-dispatch step until every read was consumed."""
        while self.reads:
            self._BaseTransport__read_frames()  # type: ignore[attr-defined]


class _StompPyReplay(ReplayedReads, stomp.transport.Transport):
    pass


class _BufferedReplay(ReplayedReads, BufferedTransport):
    pass


class _Counter(stomp.ConnectionListener):
    def __init__(self) -> None:
        self.messages = 0

    def on_message(self, frame: stomp.utils.Frame) -> None:
        self.messages += 1


def cut(stream: bytes, size: int) -> list[bytes]:
    return [stream[at : at + size] for at in range(0, len(stream), size)]


def receive_cpu_us(messages: Sequence[WireMessage], repeats: int = 3) -> dict[str, float]:
    """Best-of-`repeats` CPU microseconds per message for stomp.py's reader and nettel's."""
    stream = activemq_stream(messages, int(time.time() * 1000))
    readers = {
        "stomp_py": lambda: _StompPyReplay(cut(stream, STOMP_PY_RECV_BYTES), auto_decode=False),
        "nettel": lambda: _BufferedReplay(cut(stream, RECV_BYTES)),
    }
    best = {name: float("inf") for name in readers}
    for _ in range(repeats):
        for name, build in readers.items():
            reader, counter = build(), _Counter()
            reader.set_listener("counter", counter)
            started = time.process_time()
            reader.read_all()
            seconds = time.process_time() - started
            if counter.messages != len(messages):
                raise RuntimeError(f"{name} reader dispatched {counter.messages} messages")
            best[name] = min(best[name], seconds / len(messages) * 1e6)
    return best
