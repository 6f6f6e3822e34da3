"""The HTTP front door's limits: request header size, time to send the headers, open connections.

uvicorn's httptools protocol takes request headers of any size (llhttp keeps a header that is
still arriving in memory: 128 MiB stalled the event loop for half a minute), waits for them
forever (a half-sent request holds its connection, and its file descriptor, open), and accepts
every connection. `GuardedProtocol` checks each before uvicorn sees it:

- more than `max_header_bytes` before the end of a request's headers: 431, closed;
- a request's headers not complete `header_timeout` seconds after connect (or after the first
  byte of a later request on the connection): 408, closed;
- over `max_connections` open: the new one is answered 503 and closed at once.

Each is counted (`nettel_http_refused_total{reason}`) and logged at most once a minute per
reason, with the client. The shipped HAProxy config has `timeout http-request 10s` and
`maxconn`; the service is safe without them.
"""

from __future__ import annotations

import asyncio
import logging
import resource
from collections import Counter
from collections.abc import Sized
from dataclasses import dataclass, field
from enum import StrEnum
from typing import ClassVar

from service.config import Settings
from service.ingest.reject_log import RateLimitedRejectLog
from service.publish.whole_response import WholeResponseProtocol

#: File descriptors kept for everything but HTTP connections (broker, journal, model, pipes).
RESERVED_FILES = 256
#: Seconds a refused connection is still read from (what comes is discarded) after the answer,
#: so that closing it with unread data does not reset it before the client has read the answer;
#: beyond LINGER_BYTES it is no longer read (a client still sending that much gets a reset).
LINGER_SECONDS = 1.0
LINGER_BYTES = 1 << 20
#: The ASGI scope extension through which a response may drop its connection at once (a
#: stream subscriber that does not read): {"abort": callable}.
ABORT_EXTENSION = "nettel.abort"


class HttpRefusal(StrEnum):
    """Why the front door closed a connection or refused a stream; a metric label."""

    HEADER_TOO_LARGE = "header_too_large"
    HEADER_TIMEOUT = "header_timeout"
    CONNECTION_LIMIT = "connection_limit"
    #: /costmatrix/stream at --sse-max-streams subscribers.
    STREAM_LIMIT = "stream_limit"
    #: A /costmatrix/stream subscriber that did not read its backlog was dropped.
    SLOW_READER = "slow_reader"


@dataclass(frozen=True)
class HttpLimits:
    max_header_bytes: int = 64 << 10
    header_timeout: float = 10.0
    max_connections: int = 10_000


def http_limits(settings: Settings) -> HttpLimits:
    """The limits --http-max-header-bytes, --http-header-timeout, --http-max-connections set."""
    return HttpLimits(
        settings.http_max_header_bytes, settings.http_header_timeout, settings.http_max_connections
    )


@dataclass
class HttpGuard:
    """The limits in force and what they refused; shared by every connection of a server."""

    limits: HttpLimits = HttpLimits()
    refused: Counter[str] = field(default_factory=Counter)
    #: The server's open connections (uvicorn's set), once the first has been made.
    connections: Sized = field(default_factory=set)
    log: RateLimitedRejectLog = field(
        default_factory=lambda: RateLimitedRejectLog(logging.getLogger("nettel.http"))
    )

    def refuse(self, reason: HttpRefusal, client: str, detail: str) -> None:
        """Count a refusal and log it (at most once a minute per reason)."""
        self.refused[reason.value] += 1
        self.log.record(reason, detail, "http", client=client)

    def fit_open_files(self) -> None:
        """Raise the open-file limit to what `max_connections` needs (up to the hard limit),
        and lower `max_connections` to what the limit allows, with a warning."""
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        wanted = self.limits.max_connections + RESERVED_FILES
        if soft != resource.RLIM_INFINITY and soft < wanted:
            soft = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
            resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
        if soft != resource.RLIM_INFINITY and soft < wanted:
            fitted = max(16, soft - RESERVED_FILES)
            logging.getLogger("nettel.http").warning(
                "the open-file limit is too low for --http-max-connections; lowered",
                extra={"open_file_limit": soft, "http_max_connections": fitted},
            )
            self.limits = HttpLimits(
                self.limits.max_header_bytes, self.limits.header_timeout, fitted
            )


def guarded_protocol(guard: HttpGuard) -> type[GuardedProtocol]:
    """The protocol class uvicorn instantiates per connection, bound to `guard`."""
    return type("GuardedHttpProtocol", (GuardedProtocol,), {"guard": guard})


_REASONS = {
    431: b"Request Header Fields Too Large",
    408: b"Request Timeout",
    503: b"Service Unavailable",
}


class GuardedProtocol(WholeResponseProtocol):
    """`WholeResponseProtocol` behind `guard`'s limits (see the module)."""

    guard: ClassVar[HttpGuard]
    _header_bytes = 0
    _tail = b""  # the last bytes received, where a header's end may begin
    _awaiting_headers = True
    _header_timer: asyncio.TimerHandle | None = None
    _refused = False  # answered and closing: what arrives is discarded
    _discarded = 0

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        guard = self.guard
        guard.connections = self.connections
        if len(self.connections) > guard.limits.max_connections:
            detail = f"over {guard.limits.max_connections} connections open"
            self._refuse(503, HttpRefusal.CONNECTION_LIMIT, detail)
            return
        self._start_header_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_header_timer()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._refused:
            self._discarded += len(data)
            if self._discarded > LINGER_BYTES:
                self.transport.pause_reading()
            return
        if self._awaiting_headers:
            if self._header_timer is None:
                self._start_header_timer()
            allowed = self.guard.limits.max_header_bytes - self._header_bytes
            if len(data) > allowed and b"\r\n\r\n" not in self._tail + data[: allowed + 4]:
                detail = f"request headers over {self.guard.limits.max_header_bytes} bytes"
                self._refuse(431, HttpRefusal.HEADER_TOO_LARGE, detail)
                return
            self._header_bytes += len(data)
            self._tail = data[-3:]
        super().data_received(data)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self.scope["extensions"] = {ABORT_EXTENSION: {"abort": self.transport.abort}}

    def on_headers_complete(self) -> None:
        self._awaiting_headers = False
        self._stop_header_timer()
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._awaiting_headers, self._header_bytes, self._tail = True, 0, b""

    def _start_header_timer(self) -> None:
        self._header_timer = self.loop.call_later(
            self.guard.limits.header_timeout, self._header_timed_out
        )

    def _stop_header_timer(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _header_timed_out(self) -> None:
        self._header_timer = None
        if self._awaiting_headers and not self.transport.is_closing():
            detail = f"request headers not complete within {self.guard.limits.header_timeout} s"
            self._refuse(408, HttpRefusal.HEADER_TIMEOUT, detail)

    def _refuse(self, status: int, reason: HttpRefusal, detail: str) -> None:
        """Answer `status` with `detail`, stop writing, and close the connection after
        LINGER_SECONDS (discarding what the client still sends meanwhile)."""
        self._stop_header_timer()
        self._awaiting_headers, self._refused = False, True
        client = self.client[0] if self.client else "unknown"
        self.guard.refuse(reason, client, detail)
        body = detail.encode()
        head = b"HTTP/1.1 %d %s\r\n" % (status, _REASONS[status])
        headers = b"content-type: text/plain; charset=utf-8\r\nconnection: close\r\n"
        length = b"content-length: %d\r\n\r\n" % len(body)
        self.transport.write(head + headers + length + body)
        if self.transport.can_write_eof():
            self.transport.write_eof()
        self.loop.call_later(LINGER_SECONDS, self.transport.close)
