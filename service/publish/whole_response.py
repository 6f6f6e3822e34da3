"""uvicorn's HTTP protocol with a response's writes leaving in one system call.

uvicorn writes a response's status line and headers when the app starts the response, and its
body in a second write. A replica killed between the two (SIGKILL, OOM) leaves a client behind a
load balancer with headers and no body; HAProxy cannot retry that request once it passed the
headers on, while it retries one whose connection closed before any byte came back. Here the
writes made in one event-loop turn are held and leave together through `writelines` (one
`writev` with uvloop), so a response leaves whole or not at all. Once `FLUSH_BYTES` are held
they leave at once: a large body (a full `/costmatrix`) leaves in several writes anyway, and
holding all of it would only delay it (and cost uvloop a copy of what the socket did not take).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

Data = bytes | bytearray | memoryview
#: Held writes beyond this many bytes leave without waiting for the end of the turn.
FLUSH_BYTES = 64 * 1024


class TurnBufferedTransport(asyncio.Transport):
    """A transport whose writes within one event-loop turn go out in one `writelines` call."""

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(extra=None)
        self._transport = transport
        self._loop = loop
        self._pending: list[Data] = []
        self._pending_bytes = 0

    def write(self, data: Data) -> None:
        if not self._pending:
            self._loop.call_soon(self.flush)
        self._pending.append(data)
        self._pending_bytes += len(data)
        if self._pending_bytes >= FLUSH_BYTES:
            self.flush()

    def writelines(self, list_of_data: Iterable[Data]) -> None:
        for data in list_of_data:
            self.write(data)

    def flush(self) -> None:
        """Hand what this turn wrote to the socket's transport (dropped once it is closing)."""
        pending, self._pending, self._pending_bytes = self._pending, [], 0
        if pending and not self._transport.is_closing():
            self._transport.writelines(pending)

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def write_eof(self) -> None:
        self.flush()
        self._transport.write_eof()

    def abort(self) -> None:
        self._pending, self._pending_bytes = [], 0
        self._transport.abort()

    def can_write_eof(self) -> bool:
        return self._transport.can_write_eof()

    def is_closing(self) -> bool:
        return self._transport.is_closing()

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self._transport.get_extra_info(name, default)

    def pause_reading(self) -> None:
        self._transport.pause_reading()

    def resume_reading(self) -> None:
        self._transport.resume_reading()

    def is_reading(self) -> bool:
        return self._transport.is_reading()

    def set_protocol(self, protocol: asyncio.BaseProtocol) -> None:
        self._transport.set_protocol(protocol)

    def get_protocol(self) -> asyncio.BaseProtocol:
        return self._transport.get_protocol()

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        self._transport.set_write_buffer_limits(high, low)

    def get_write_buffer_size(self) -> int:
        return self._transport.get_write_buffer_size() + self._pending_bytes

    def get_write_buffer_limits(self) -> tuple[int, int]:
        return self._transport.get_write_buffer_limits()


class WholeResponseProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol over a `TurnBufferedTransport`."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(TurnBufferedTransport(transport, self.loop))
