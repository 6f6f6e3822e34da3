"""Figures for issue 40, section 4: a 128 MiB unterminated frame and a 64 MiB body of NULs.

    .venv/bin/python scripts/hostile_frames.py

1. CPU time of the receive path's read step (`BufferedTransport`, frames parsed and dispatched
   to a counting listener, reads of 128 KiB replayed in-process) for a 64 MiB body of NUL bytes
   and for one of `x` bytes, each with `content-length`: with the 2 MiB bound (the frame is cut)
   and without it (the whole 64 MiB frame is split), and the same for the splitting of before
   (the unsplit buffer concatenated with every read that held a NUL).
2. A `nettel serve` (no model, plain subscription) against a hostile peer that answers CONNECT
   and SUBSCRIBE, then sends a MESSAGE frame of 128 MiB that never ends and holds the
   connection open: the service's RSS before and after, its /readyz while stuck, and its
   /metrics once it dropped and remade the connection.
"""

from __future__ import annotations

import re
import socket
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.support.receive_path import ReplayedReads  # noqa: E402
from devtools.service_process import launch_service, wait_for_status  # noqa: E402
from service.broker.stomp_frames import preamble_bounds  # noqa: E402
from service.broker.stomp_transport import (  # noqa: E402
    _CONTENT_LENGTH,
    _LENGTH_VALUE,
    RECV_BYTES,
    BufferedTransport,
)
from tests.broker.hostile_broker import HostileBroker, receipts  # noqa: E402

MIB = 1024 * 1024
TOPIC = b"/topic/perfsonar.raw.packet-loss-rate"


class Replay(ReplayedReads, BufferedTransport):
    pass


def frame(body: bytes) -> bytes:
    head = b"MESSAGE\ndestination:" + TOPIC + b"\nsubscription:0\nmessage-id:m1\n"
    return head + b"content-length:%d\n\n" % len(body) + body + b"\x00\n"


def reads(stream: bytes) -> list[bytes]:
    return [stream[at : at + RECV_BYTES] for at in range(0, len(stream), RECV_BYTES)]


def _old_split_frames(buffer: bytes) -> tuple[list[bytes], bytes]:
    """(The splitting of before, commit 3512b26.) The whole frames at the start of `buffer`
    (without their NUL) and the bytes after them.

    As stomp.py's reader: a frame ends at its first NUL unless its headers carry a
    `content-length` that reaches past it (a body holding NULs), and the line feeds after a
    frame's NUL are dropped.
    """
    frames: list[bytes] = []
    start, size = 0, len(buffer)
    while (end := buffer.find(b"\x00", start)) >= 0:
        preamble_end, body_start = preamble_bounds(buffer, start, end)
        declared = buffer.find(_CONTENT_LENGTH, start, preamble_end) if preamble_end < end else -1
        value_at = declared + len(_CONTENT_LENGTH)
        if 0 <= declared and (value := _LENGTH_VALUE.match(buffer, value_at, preamble_end)):
            frame_end = body_start + int(value[1])
            if frame_end > end:
                if frame_end >= size:
                    break  # the rest of the body has not arrived yet
                end = frame_end
        frames.append(buffer[start:end])
        start = end + 1
        while buffer.startswith(b"\n", start):  # stomp.py drops LFs only; a CR stays for the next
            start += 1
    return frames, buffer[start:]


def old_split_seconds(stream: bytes) -> float:
    """The splitting of before: `split_frames(unsplit + received)` on every read holding a NUL."""
    started = time.process_time()
    unsplit, received = b"", []
    for chunk in reads(stream):
        received.append(chunk)
        if b"\x00" in chunk:
            _, unsplit = _old_split_frames(unsplit + b"".join(received))
            received = []
    return time.process_time() - started


def transport_seconds(stream: bytes, bound: int | None) -> float:
    transport = Replay(reads(stream), max_frame_bytes=bound)
    started = time.process_time()
    transport.read_all()
    return time.process_time() - started


def cpu_figures() -> None:
    for label, body in (("NUL", bytes(64 * MIB)), ("x", b"x" * 64 * MIB)):
        stream = frame(body) + frame(b"{}")
        bounded = transport_seconds(stream, 2 * MIB)
        unbounded = transport_seconds(stream, None)
        old = old_split_seconds(stream)
        print(
            f"64 MiB body of {label}: read step {bounded:.3f} s CPU (2 MiB bound), "
            f"{unbounded:.3f} s unbounded; splitting of before {old:.3f} s"
        )


def rss_kib(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"VmRSS:\s+(\d+)", status)[1])  # type: ignore[index]


def endless_frame_figures() -> None:
    def script(number: int, sock: socket.socket) -> None:
        receipts(sock)
        if number == 0:
            sock.sendall(b"MESSAGE\ndestination:" + TOPIC + b"\nsubscription:0\nmessage-id:m\n\n")
            piece = b"y" * MIB
            for _ in range(128):
                sock.sendall(piece)
        time.sleep(120)

    broker = HostileBroker(script)
    with tempfile.TemporaryDirectory() as directory:
        service = launch_service(
            f"127.0.0.1:{broker.port}",
            ["--model", "none", "--subscription", "plain", "--publish-telemetry", "false"],
            Path(directory) / "serve.log",
        )
        try:
            wait_for_status(service, "/readyz", 200, timeout=60)
            before = rss_kib(service.pid)
            peak, unready_after, started = before, None, time.monotonic()
            while time.monotonic() - started < 60:
                peak = max(peak, rss_kib(service.pid))
                status = httpx.get(service.url + "/readyz").status_code
                if unready_after is None and status == 503:
                    unready_after = time.monotonic() - started
                metrics = httpx.get(service.url + "/metrics").text
                if 'nettel_broker_connections_dropped_total{reason="frame_timeout"} 1.0' in metrics:
                    if "nettel_broker_connections_total 2.0" in metrics and status == 200:
                        break
                time.sleep(0.2)
            took = time.monotonic() - started
            print(
                f"128 MiB unterminated frame: RSS {before / 1024:.0f} MiB before, peak "
                f"{peak / 1024:.0f} MiB (+{(peak - before) / 1024:.0f} MiB); /readyz 503 after "
                f"{unready_after} s; dropped, counted and reconnected, ready again after "
                f"{took:.1f} s"
            )
            for line in metrics.splitlines():
                if line.startswith(("nettel_broker_connections", "nettel_broker_frames_cut")):
                    print("  " + line)
        finally:
            service.stop()
            broker.close()


if __name__ == "__main__":
    cpu_figures()
    if "--cpu-only" not in sys.argv:
        endless_frame_figures()
