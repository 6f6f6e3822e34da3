"""stomp.py's STOMP 1.2 connection with a receive path that splits a whole read in one pass.

stomp.py 9.0's receive loop (`BaseTransport.__read`) appends each read of 16 KiB to a buffer,
then, for every frame in it, searches the frame with a regex for the end of its headers and
with another for `content-length`, and copies the rest of the buffer (`buf[pos:]`) once per
frame; `process_frame` then notifies the listeners twice per MESSAGE (`before_message`,
`message`), sorting them under a lock each time. At full rate that was a third of the
receiver thread's time (py-spy, docs/performance.md).

`BufferedTransport` keeps stomp.py's socket handling, connection, failover, heart-beats and
sending, and replaces only the step of its I/O loop that reads and dispatches frames:
`FrameReader` cuts the reads into frames with `bytes.find`, each byte appended, searched and
copied out once (no copy of the remainder per frame or per read), and keeps at most
`MAX_FRAME_BYTES` of a frame,
`stomp_frames.parse_frame` parses each, and MESSAGE frames go straight to the listeners' own
handlers (those that override `ConnectionListener`'s no-op ones, looked up once per change of
listeners). Other frames take stomp.py's `process_frame`, receipts and errors included.
Bodies stay bytes (no auto-decode).
"""

from __future__ import annotations

import re
import ssl
import time
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

from service.broker.connection import ConnectionListener as NettelListener
from service.broker.stomp_frames import parse_frame, preamble_bounds

#: Bytes asked of each `recv` (stomp.py's default is 16 KiB): fewer reads and splits per frame.
RECV_BYTES = 128 * 1024
_CONTENT_LENGTH = b"\ncontent-length:"
#: What stomp.py's reader takes for the length after `content-length:` (blanks, then digits).
_LENGTH_VALUE = re.compile(rb"\s*([0-9]+)")

FrameHandlers = tuple[tuple[Callable[[Frame], Any], ...], tuple[Callable[[Frame], Any], ...]]


#: The most of one frame kept in memory (`FrameReader`): the body limit (1 MiB,
#: `service.parse.limits`) and room for headers, so a frame cut to it is still refused as
#: `too_large` by the parser.
MAX_FRAME_BYTES = 2 * 1024 * 1024
_NOT_LF = re.compile(rb"[^\n]")


class FrameReader:
    """Cuts received bytes into frames as stomp.py's reader does, in time linear in the bytes,
    keeping at most `max_frame_bytes` of a frame.

    A frame ends at its first NUL unless its headers carry a `content-length` that reaches past
    it (a body holding NULs); the line feeds after a frame's NUL are dropped (heart-beats).
    Every received byte is appended once, searched for a NUL once and copied out once with its
    frame (`bytes_copied`, `bytes_scanned` count this work). A frame longer than the bound is
    cut: its first `max_frame_bytes` bytes are kept and delivered once its end has arrived, the
    rest is read and dropped (`frames_cut`). The frame is still delivered, so that a broker's
    oversized message is refused (`too_large`) and acknowledged like any other bad message
    instead of being redelivered forever; a frame that never ends is the link's to drop
    (`frame_started`: when the frame being read began, for its deadline).
    """

    def __init__(
        self,
        max_frame_bytes: int | None = MAX_FRAME_BYTES,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_frame_bytes = max_frame_bytes
        self._clock = clock
        self._buffer = bytearray()  # the current frame's bytes (only its start once cut)
        self._nul_from = 0  # the current frame has no NUL in _buffer before this
        self._frame_end = -1  # where the current frame ends (its content-length), once known
        self._declared = -1  # a cut frame's declared end, before a NUL was seen
        self._seen = 0  # bytes of a cut frame received so far
        self._cut = False
        #: When the first byte of the frame being read came (clock); None between frames.
        self.frame_started: float | None = None
        self.bytes_copied = 0
        self.bytes_scanned = 0
        self.frames_cut = 0

    @property
    def between_frames(self) -> bool:
        """No frame is partly read."""
        return not self._buffer

    @property
    def pending(self) -> bytes:
        """The kept bytes of the frame not yet complete."""
        return bytes(self._buffer)

    def feed(self, data: bytes) -> list[bytes]:
        """The frames (without their NUL) that `data` completes."""
        frames: list[bytes] = []
        position, size = 0, len(data)
        while position < size:
            if self._cut:
                position = self._skip(data, position, frames)
                continue
            if self.frame_started is None and _NOT_LF.search(data, position):
                self.frame_started = self._clock()  # line feeds alone are heart-beats
            self._buffer += data if position == 0 else memoryview(data)[position:]
            self.bytes_copied += size - position
            position = size
            self._split(frames)
            bound = self.max_frame_bytes
            if bound is not None and len(self._buffer) > bound:
                self._start_cut(bound)
        return frames

    def _split(self, frames: list[bytes]) -> None:
        """Move the whole frames at the start of the buffer to `frames`."""
        buffer, start, size = self._buffer, 0, len(self._buffer)
        while True:
            end = self._frame_end
            if end < 0:
                scan_from = max(start, self._nul_from)
                end = buffer.find(b"\x00", scan_from)
                self.bytes_scanned += (size if end < 0 else end) - scan_from
                if end < 0:
                    self._nul_from = size
                    break
                self.bytes_scanned += end - start  # the header block, once per frame
                declared = _declared_end(buffer, start, end)
                if declared > end:
                    self._frame_end = end = declared
            if end >= size:
                break  # the rest of the body has not arrived yet
            self._emit(frames, buffer, start, end)
            start = _after_line_feeds(buffer, end + 1)
            self._frame_end, self._nul_from = -1, start
        if start:
            del buffer[:start]
            self.bytes_copied += size - start
            self._nul_from -= start
            if self._frame_end >= 0:
                self._frame_end -= start
            self.frame_started = self._clock() if buffer else None

    def _emit(self, frames: list[bytes], buffer: bytearray, start: int, end: int) -> None:
        bound = self.max_frame_bytes
        if bound is not None and end - start > bound:
            end = start + bound
            self.frames_cut += 1
        frames.append(bytes(buffer[start:end]))
        self.bytes_copied += end - start

    def _start_cut(self, bound: int) -> None:
        """The frame passed the bound: keep its start, read the rest without keeping it."""
        buffer = self._buffer
        if self._frame_end < 0:  # no NUL yet: the frame ends at the first one or its length
            self._declared = _declared_end(buffer, 0, len(buffer))
        self._seen = len(buffer)
        del buffer[bound:]
        self._cut = True

    def _skip(self, data: bytes, position: int, frames: list[bytes]) -> int:
        """Read on through a cut frame; past its end once it came (the kept part delivered)."""
        size = len(data)
        if self._frame_end < 0:
            nul = data.find(b"\x00", position)
            self.bytes_scanned += (size if nul < 0 else nul) - position
            if nul < 0:
                self._seen += size - position
                return size
            at = self._seen + nul - position  # the first NUL, counted from the frame's start
            self._frame_end = max(at, self._declared)
        remaining = self._frame_end - self._seen  # bytes before the frame's end
        if remaining >= size - position:
            self._seen += size - position
            return size
        frames.append(bytes(self._buffer))
        self.bytes_copied += len(self._buffer)
        self.frames_cut += 1
        self._buffer.clear()
        self._cut, self._frame_end, self._declared, self._nul_from = False, -1, -1, 0
        self.frame_started = None
        return _after_line_feeds(data, position + remaining + 1)


def _declared_end(buffer: bytes | bytearray, start: int, end: int) -> int:
    """Where a frame starting at `start` ends by its `content-length` header (found in its
    header block before `end`); -1 without one."""
    preamble_end, body_start = preamble_bounds(buffer, start, end)
    declared = buffer.find(_CONTENT_LENGTH, start, preamble_end) if preamble_end < end else -1
    if declared < 0:
        return -1
    value = _LENGTH_VALUE.match(buffer, declared + len(_CONTENT_LENGTH), preamble_end)
    return body_start + int(value[1]) if value else -1


def _after_line_feeds(buffer: bytes | bytearray, start: int) -> int:
    """`start`, moved past line feeds (stomp.py drops LFs only; a CR stays for the next frame)."""
    found = _NOT_LF.search(buffer, start)
    return len(buffer) if found is None else found.start()


def split_frames(buffer: bytes) -> tuple[list[bytes], bytes]:
    """The whole frames at the start of `buffer` (without their NUL) and the bytes after them."""
    reader = FrameReader(max_frame_bytes=None)
    frames = reader.feed(buffer)
    return frames, reader.pending


def _overriding(listener: object, name: str) -> Callable[[Frame], Any] | None:
    """The listener's `name` handler; None if it has none or only a base class's no-op
    (stomp.py's `ConnectionListener`, or nettel's `connection.ConnectionListener`)."""
    handler: Callable[[Frame], Any] | None = getattr(listener, name, None)
    own = getattr(type(listener), name, None)
    no_ops = (getattr(ConnectionListener, name, None), getattr(NettelListener, name, None))
    if handler is None or (own is not None and own in no_ops):
        return None
    return handler


class BufferedTransport(stomp.transport.Transport):
    """stomp.py's Transport whose I/O loop reads and dispatches frames as described above."""

    def __init__(
        self,
        host_and_ports: Sequence[tuple[str, int]],
        max_frame_bytes: int | None = MAX_FRAME_BYTES,
        **options: Any,
    ) -> None:
        super().__init__(host_and_ports, auto_decode=False, recv_bytes=RECV_BYTES, **options)
        #: Cuts the received bytes into frames (bounded, linear: `FrameReader`).
        self.frames = FrameReader(max_frame_bytes)
        #: Why `drop` closed the connection; None when it did not.
        self.dropped_for: str | None = None
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
        """Read until a chunk holds a NUL (as stomp.py's reader does), handing each chunk to the
        frame reader at once, so that nothing but the reader's bounded buffer holds a frame."""
        while self.running:
            chunk = self._receive_chunk()
            if not chunk:
                return
            if chunk == b"\n" and self.frames.between_frames:  # a heart-beat between frames
                self.process_frame(HEARTBEAT_FRAME, chunk)
                return
            for raw in self.frames.feed(chunk):
                frame = parse_frame(raw)
                if frame is not None:
                    self.process_frame(frame, raw)
            if b"\x00" in chunk:
                return

    def frame_seconds(self) -> float:
        """How long the frame being read has been arriving; 0 between frames."""
        started = self.frames.frame_started
        return 0.0 if started is None else time.monotonic() - started

    def drop(self, reason: str) -> None:
        """Close the socket under the connection (the receiver sees it closed), for `reason`."""
        self.dropped_for = reason
        self.disconnect_socket()

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

    def _receive_chunk(self) -> bytes:
        """One read of the socket; b"" when nothing came (a non-blocking socket).

        Raises ConnectionClosedException when the peer closed a blocking socket.
        """
        while self.running:
            try:
                chunk: bytes = self.receive()
            except (ssl.SSLWantReadError, ssl.SSLWantWriteError):
                return b""
            except exception.InterruptedException:
                continue
            except Exception:  # noqa: BLE001 - stomp.py treats any read error as a closed socket
                stomp_log.debug("socket read error", exc_info=True)
                chunk = b""
            if not chunk and self.blocking:
                self.frames = FrameReader(self.frames.max_frame_bytes)
                raise exception.ConnectionClosedException()
            return chunk  # a TLS socket may have nothing to hand out yet
        return b""


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
