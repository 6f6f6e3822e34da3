"""stomp.py's STOMP 1.2 connection with a receive path that splits a whole read in one pass.

stomp.py 9.0's receive loop (`BaseTransport.__read`) appends each read of 16 KiB to a buffer,
then, for every frame in it, searches the frame with a regex for the end of its headers and
with another for `content-length`, and copies the rest of the buffer (`buf[pos:]`) once per
frame; `process_frame` then notifies the listeners twice per MESSAGE (`before_message`,
`message`), sorting them under a lock each time. At full rate that was a third of the
receiver thread's time (py-spy, docs/performance.md).

`BufferedTransport` keeps stomp.py's socket handling, connection, failover, heart-beats and
sending, and replaces only the step of its I/O loop that reads and dispatches frames:
`split_frames` cuts a read into frames with `bytes.find` and no copy of the remainder per frame,
`stomp_frames.parse_frame` parses each, and MESSAGE frames go straight to the listeners' own
handlers (those that override `ConnectionListener`'s no-op ones, looked up once per change of
listeners). Other frames take stomp.py's `process_frame`, receipts and errors included.
Bodies stay bytes (no auto-decode).
"""

from __future__ import annotations

import re
import ssl
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import stomp
from stomp import exception
from stomp import log as stomp_log
from stomp.connect import BaseConnection
from stomp.constants import CMD_ACK, HDR_ID
from stomp.listener import ConnectionListener
from stomp.protocol import Protocol12
from stomp.utils import HEARTBEAT_FRAME, Frame, convert_frame, pack

from service.broker.stomp_frames import parse_frame, preamble_bounds

#: Bytes asked of each `recv` (stomp.py's default is 16 KiB): fewer reads and splits per frame.
RECV_BYTES = 128 * 1024
_CONTENT_LENGTH = b"\ncontent-length:"
#: What stomp.py's reader takes for the length after `content-length:` (blanks, then digits).
_LENGTH_VALUE = re.compile(rb"\s*([0-9]+)")

FrameHandlers = tuple[tuple[Callable[[Frame], Any], ...], tuple[Callable[[Frame], Any], ...]]


def split_frames(buffer: bytes) -> tuple[list[bytes], bytes]:
    """The whole frames at the start of `buffer` (without their NUL) and the bytes after them.

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


def _overriding(listener: object, name: str) -> Callable[[Frame], Any] | None:
    """The listener's `name` handler; None if it has none or only ConnectionListener's no-op."""
    handler: Callable[[Frame], Any] | None = getattr(listener, name, None)
    if handler is None or getattr(type(listener), name, None) is getattr(ConnectionListener, name):
        return None
    return handler


class BufferedTransport(stomp.transport.Transport):
    """stomp.py's Transport whose I/O loop reads and dispatches frames as described above."""

    def __init__(self, host_and_ports: Sequence[tuple[str, int]], **options: Any) -> None:
        super().__init__(host_and_ports, auto_decode=False, recv_bytes=RECV_BYTES, **options)
        self._unsplit = b""
        self._message_handlers: FrameHandlers | None = None
        #: The headers of the broker's CONNECTED frame (`server` names the broker), once come.
        self.connected_headers: dict[str, str] = {}

    def set_listener(self, name: str, listener: object) -> None:
        super().set_listener(name, listener)
        self._message_handlers = None

    def remove_listener(self, name: str) -> None:
        super().remove_listener(name)
        self._message_handlers = None

    def _BaseTransport__read_frames(self) -> None:  # noqa: N802 - replaces stomp.py's private step
        received = self._receive_to_frame_end()
        if not received:
            return
        if received == b"\n" and not self._unsplit:  # a heart-beat between frames
            self.process_frame(HEARTBEAT_FRAME, received)
            return
        frames, self._unsplit = split_frames(self._unsplit + received)
        for raw in frames:
            frame = parse_frame(raw)
            if frame is not None:
                self.process_frame(frame, raw)

    def process_frame(self, f: Frame, frame_str: bytes) -> None:
        if f.cmd != "MESSAGE":
            if f.cmd == "CONNECTED":  # kept before stomp.py lets connect(wait=True) return
                self.connected_headers = dict(f.headers)
            super().process_frame(f, frame_str)
            return
        if stomp_log.isEnabledFor(stomp_log.DEBUG):
            stomp_log.debug("received frame: %r, headers=%r, body=%r", f.cmd, f.headers, f.body)
        before, on_message = self._message_handlers or self._look_up_message_handlers()
        for handler in before:
            handler(f)
        for handler in on_message:
            handler(f)

    def _look_up_message_handlers(self) -> FrameHandlers:
        listeners = [listener for _, listener in sorted(list(self.listeners.items()))]
        before = tuple(h for li in listeners if (h := _overriding(li, "on_before_message")))
        on_message = tuple(h for li in listeners if (h := _overriding(li, "on_message")))
        self._message_handlers = (before, on_message)
        return self._message_handlers

    def _receive_to_frame_end(self) -> bytes:
        """Read until a chunk holds a NUL, as stomp.py's reader does; b"" when nothing came.

        Raises ConnectionClosedException when the peer closed a blocking socket.
        """
        chunks: list[bytes] = []
        while self.running:
            try:
                chunk: bytes = self.receive()
            except (ssl.SSLWantReadError, ssl.SSLWantWriteError):
                break
            except exception.InterruptedException:
                continue
            except Exception:  # noqa: BLE001 - stomp.py treats any read error as a closed socket
                stomp_log.debug("socket read error", exc_info=True)
                chunk = b""
            if not chunk:
                if not self.blocking:
                    break  # a TLS socket may have nothing to hand out yet
                self._unsplit = b""
                raise exception.ConnectionClosedException()
            if chunk == b"\n" and not chunks:
                return chunk
            chunks.append(chunk)
            if b"\x00" in chunk:
                break
        return b"".join(chunks)


class BufferedConnection12(stomp.Connection12):
    """stomp.Connection12 over a BufferedTransport; `options` go to the transport.

    `heartbeats` and `heart_beat_receive_scale` are stomp.py's: what the CONNECT frame asks
    (cx, cy in ms) and how many of the agreed receive periods pass without a byte from the
    broker before the connection counts as lost. With `send_every_ms`, heart-beats go out at
    least that often even when cx promised the broker fewer: sending sooner than promised is
    always allowed, and the broker's own timeout then leaves room for this process to stall.
    """

    def __init__(
        self,
        host_and_ports: Sequence[tuple[str, int]],
        heartbeats: tuple[int, int] = (0, 0),
        heart_beat_receive_scale: float = 1.5,
        send_every_ms: int = 0,
        **options: Any,
    ) -> None:
        # Built as stomp.Connection12 builds itself, with the other transport.
        transport = BufferedTransport(host_and_ports, **options)
        BaseConnection.__init__(self, transport)
        Protocol12.__init__(
            self, transport, heartbeats, heart_beat_receive_scale=heart_beat_receive_scale
        )
        self._send_every = send_every_ms / 1000

    def on_connected(self, frame: Frame) -> None:
        super().on_connected(frame)
        if self._send_every and getattr(self, "send_sleep", 0):
            self.send_sleep = min(self.send_sleep, self._send_every)

    @property
    def server(self) -> str | None:
        """The `server` header of the broker's CONNECTED frame; None before it or without one."""
        headers: dict[str, str] = self.transport.connected_headers
        return headers.get("server")

    def ack_all(self, ack_ids: Iterable[str]) -> None:
        """ACK each frame of `ack_ids` (their `ack` headers) in one write to the socket.

        As stomp.py's `ack`, one ACK frame per id, without a listener call per frame: with
        `client-individual` acknowledgement every received message needs its own.
        """
        frames = []
        for ack_id in ack_ids:
            headers = {HDR_ID: ack_id}
            self._escape_headers(headers)
            frames.append(pack(convert_frame(Frame(CMD_ACK, headers))))
        if frames:
            self.transport.send(b"".join(frames))
