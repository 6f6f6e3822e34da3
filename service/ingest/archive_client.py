"""The esmond-compatible archive REST API (perfSONAR 4 esmond, perfSONAR 5 elmond), read over
HTTP/1.1 keep-alive connections, one per calling thread.

Metadata is listed per event type and paged by `offset`; a series' records are paged by time:
the next request starts at the last record's `ts` + 1, as esmond's own clients do, until a page
comes back shorter than `limit`. elmond answers at most 10,000 per request, so pages larger than
that would look short and end the paging early: `page_size` is at most `MAX_PAGE_SIZE`.

An archive is untrusted, so every read is bounded: a response's body is read in pieces of
`READ_CHUNK` bytes and cut beyond `max_response_bytes`, all responses together beyond
`max_total_bytes`, a listing or series beyond its page limit, and `cancel()` (at the backfill's
bound) shuts the connections down under the reads in flight, which end at once, raising
`ArchiveCut` with its `CutReason`. A server that keeps sending is therefore never read past
the bound, whatever its timeouts.

This adapter uses the standard library's http.client, not httpx as nettel's other HTTP clients
do: a backfill of 15,000 links makes 30,000 requests, and httpx's client and transport cost
about 1 ms of CPU per request here against 0.25 ms, which alone would take most of the 30 s a
backfill of that size may take. Proxies from the environment are not used.
"""

from __future__ import annotations

import http.client
import mmap
import socket
import ssl
import threading
from enum import StrEnum
from typing import Any
from urllib.parse import urlencode, urlsplit

import orjson

from service.parse.records import MeasurementKind

ARCHIVE_PATH = "/esmond/perfsonar/archive/"
#: The most objects or records elmond returns for one request, whatever `limit` asks.
MAX_PAGE_SIZE = 10_000
#: A kept-alive connection the server has closed meanwhile fails at once: retried on a new one.
_STALE_CONNECTION = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError)
#: Bytes read from a response at a time; caps and cancellation are checked between pieces.
READ_CHUNK = 64 << 10
#: Largest response body read (bytes). A page of 10,000 records of 35-bucket histograms is
#: about 6 MB; --backfill-concurrency of them at once stay within a few hundred MB.
MAX_RESPONSE_BYTES = 16 << 20
#: Most bytes one backfill reads from the archive: 15,000 links with 32 minutes each are about
#: 0.35 GB, with a day of history about 13 GB.
MAX_BACKFILL_BYTES = 16 << 30
#: Most metadata objects listed per event type (WLCG has about 60,000 possible directed links):
#: the listing's page limit is this over the page size.
MAX_LISTED = 1_000_000


class CutReason(StrEnum):
    """Why a read was cut; the labels of `nettel_backfill_cut_total`."""

    RESPONSE_BYTES = "response_bytes"  # a response beyond MAX_RESPONSE_BYTES
    BACKFILL_BYTES = "backfill_bytes"  # the backfill read MAX_BACKFILL_BYTES: it stops
    PAGES = "pages"  # a listing or series paged beyond its page limit
    BOUND = "bound"  # still in flight when the backfill ended (its bound, the byte cap, a stop)


class ArchiveUnavailable(Exception):
    """A request to the archive got no usable answer: a timeout, a connection or HTTP error, or
    a body that is not a JSON list."""


class ArchiveCut(ArchiveUnavailable):
    """A read cut by one of the client's bounds."""

    def __init__(self, reason: CutReason, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason


class ArchiveClient:
    """Reads metadata and records of the archive at `url` (http(s)://host[:port][/prefix])."""

    def __init__(
        self,
        url: str,
        timeout: float,
        page_size: int = MAX_PAGE_SIZE,
        max_response_bytes: int = MAX_RESPONSE_BYTES,
        max_total_bytes: int = MAX_BACKFILL_BYTES,
    ) -> None:
        """`timeout`: seconds for the connect and for each read (as httpx times them)."""
        if not 0 < page_size <= MAX_PAGE_SIZE:
            raise ValueError(f"page_size must be 1..{MAX_PAGE_SIZE}")
        if not 0 < max_response_bytes <= 1 << 30:
            raise ValueError("max_response_bytes must be 1..1 GiB (each read maps that much)")
        self.max_response_bytes = max_response_bytes
        self.max_total_bytes = max_total_bytes
        #: Response bytes read so far (bodies, all requests).
        self.bytes_read = 0
        self._in_flight = 0
        self._cancelled = threading.Event()
        parts = urlsplit(url)
        self._tls = ssl.create_default_context() if parts.scheme == "https" else None
        self._host, self._port = parts.hostname or "", parts.port
        self._prefix = parts.path.rstrip("/")
        self._timeout = timeout
        self._page_size = page_size
        self._local = threading.local()
        self._opened: list[http.client.HTTPConnection] = []
        self._lock = threading.Lock()

    @property
    def exhausted(self) -> bool:
        """The backfill's bytes are spent: every further read is cut."""
        with self._lock:
            return self.bytes_read >= self.max_total_bytes

    def metadata(self, kind: MeasurementKind, seconds: int) -> list[Any]:
        """Every metadata object with `kind` data in the last `seconds` (at most MAX_LISTED)."""
        found: list[Any] = []
        query = {"event-type": kind.value, "time-range": seconds, "limit": self._page_size}
        pages = -(-MAX_LISTED // self._page_size)
        while True:
            if pages == 0:
                raise ArchiveCut(
                    CutReason.PAGES, f"{ARCHIVE_PATH}: more than {MAX_LISTED:,} objects listed"
                )
            pages -= 1
            page = self._get_list(ARCHIVE_PATH, query | {"offset": len(found)})
            found += page
            if len(page) < self._page_size:
                return found

    def records(self, base_uri: str, start: int, end: int) -> list[Any]:
        """A series' records with `start` <= ts <= `end` (epoch s), oldest first. Each page
        starts at least a second after the last, so a series of one record a second at most
        needs (`end` - `start` + 1) / limit pages and one more: more pages are cut."""
        found: list[Any] = []
        pages = (end - start) // self._page_size + 2
        while True:
            if pages == 0:
                raise ArchiveCut(CutReason.PAGES, f"{base_uri}: more pages than its time span")
            pages -= 1
            query = {"time-start": start, "time-end": end, "limit": self._page_size}
            page = self._get_list(base_uri, query)
            found += page
            if len(page) < self._page_size:
                return found
            start = _after_last(page, start)

    def cancel(self) -> int:
        """Cut every read: those in flight end at once (their sockets are shut down under them,
        and each piece read is checked), later ones before they start. Returns how many were in
        flight."""
        self._cancelled.set()
        with self._lock:
            in_flight, opened = self._in_flight, list(self._opened)
        for connection in opened:
            if connection.sock is not None:
                try:  # the plain socket's shutdown, also under TLS: it wakes a blocked recv
                    socket.socket.shutdown(connection.sock, socket.SHUT_RDWR)
                except OSError:
                    pass
        return in_flight

    def close(self) -> None:
        """Close every connection opened so far (requests in flight fail)."""
        with self._lock:
            opened, self._opened = self._opened, []
        for connection in opened:
            connection.close()

    def _get_list(self, path: str, query: dict[str, Any]) -> list[Any]:
        try:
            status, body = self._get(f"{self._prefix}{path}?{urlencode(query)}")
        except (OSError, ValueError, http.client.HTTPException) as error:
            if self._cancelled.is_set():  # the socket shut down under the read
                raise ArchiveCut(CutReason.BOUND, f"{path}: cut when the backfill ended") from None
            raise ArchiveUnavailable(f"{path}: {type(error).__name__} {error}".strip()) from None
        with body:
            if status != 200:
                raise ArchiveUnavailable(f"{path}: HTTP {status}")
            try:
                with body.view() as view:
                    page = orjson.loads(view)
            except orjson.JSONDecodeError:
                raise ArchiveUnavailable(f"{path}: not JSON") from None
        if not isinstance(page, list):
            raise ArchiveUnavailable(f"{path}: not a JSON list")
        return page

    def _get(self, target: str) -> tuple[int, _Body]:
        """GET on this thread's connection; once more on a new one if a kept-alive one was gone."""
        reused = getattr(self._local, "connection", None) is not None
        try:
            return self._exchange(target)
        except _STALE_CONNECTION:
            if not reused or self._cancelled.is_set():
                raise
            return self._exchange(target)

    def _exchange(self, target: str) -> tuple[int, _Body]:
        self._check_not_cut(target)
        connection = self._connection()
        with self._lock:
            self._in_flight += 1
        try:
            connection.request("GET", target, headers={"Accept": "application/json"})
            self._check_not_cut(target)
            response = connection.getresponse()
            return response.status, self._body(response, target)
        except BaseException:
            self._local.connection = None
            with self._lock:
                if connection in self._opened:
                    self._opened.remove(connection)
            connection.close()
            raise
        finally:
            with self._lock:
                self._in_flight -= 1

    def _body(self, response: http.client.HTTPResponse, target: str) -> _Body:
        """The response's body, read a piece at a time within the caps, unless cut."""
        path = target.partition("?")[0]
        if response.length is not None and response.length > self.max_response_bytes:
            raise self._response_cut(path)
        body = _Body(self.max_response_bytes)
        try:
            while chunk := response.read1(READ_CHUNK):
                self._check_not_cut(target)
                if not body.append(chunk):
                    raise self._response_cut(path)
                with self._lock:
                    self.bytes_read += len(chunk)
            self._check_not_cut(target)  # a socket shut down under the read looks like an end
        except BaseException:
            body.close()
            raise
        response.close()  # read1 leaves a response of known length open at its end
        return body

    def _response_cut(self, path: str) -> ArchiveCut:
        return ArchiveCut(
            CutReason.RESPONSE_BYTES, f"{path}: response over {self.max_response_bytes:,} bytes"
        )

    def _check_not_cut(self, target: str) -> None:
        path = target.partition("?")[0]
        if self._cancelled.is_set():
            raise ArchiveCut(CutReason.BOUND, f"{path}: cut when the backfill ended")
        if self.exhausted:
            raise ArchiveCut(
                CutReason.BACKFILL_BYTES,
                f"{path}: the backfill read its {self.max_total_bytes:,} bytes",
            )

    def _connection(self) -> http.client.HTTPConnection:
        connection: http.client.HTTPConnection | None = getattr(self._local, "connection", None)
        if connection is None:
            if self._tls is None:
                connection = http.client.HTTPConnection(self._host, self._port, self._timeout)
            else:
                connection = http.client.HTTPSConnection(
                    self._host, self._port, timeout=self._timeout, context=self._tls
                )
            self._local.connection = connection
            with self._lock:
                self._opened.append(connection)
        return connection


class _Body:
    """A response body in an anonymous memory map of the cap's size: only the pages written
    take memory, and closing it gives them back to the system at once (a bytearray of that
    size would come from the allocator's per-thread arenas, which keep what they once held)."""

    def __init__(self, capacity: int) -> None:
        self._map = mmap.mmap(-1, max(capacity, 1))
        self._size = 0

    def append(self, chunk: bytes) -> bool:
        """Add `chunk`; False (nothing added) when it would go beyond the capacity."""
        if self._size + len(chunk) > len(self._map):
            return False
        self._map[self._size : self._size + len(chunk)] = chunk
        self._size += len(chunk)
        return True

    def view(self) -> memoryview:
        """The bytes so far; release the view (`with`) before closing."""
        return memoryview(self._map)[: self._size]

    def close(self) -> None:
        self._map.close()

    def __enter__(self) -> _Body:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


def _after_last(page: list[Any], start: int) -> int:
    """The `time-start` of the page after `page`: its last record's `ts` + 1."""
    last = page[-1].get("ts") if isinstance(page[-1], dict) else None
    if type(last) is not int or last < start:
        raise ArchiveUnavailable("a full page whose last record has no later ts to page on")
    return last + 1
