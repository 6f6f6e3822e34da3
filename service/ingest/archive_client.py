"""The esmond-compatible archive REST API (perfSONAR 4 esmond, perfSONAR 5 elmond), read over
HTTP/1.1 keep-alive connections, one per calling thread.

Metadata is listed per event type and paged by `offset`; a series' records are paged by time:
the next request starts at the last record's `ts` + 1, as esmond's own clients do, until a page
comes back shorter than `limit`. elmond answers at most 10,000 per request, so pages larger than
that would look short and end the paging early: `page_size` is at most `MAX_PAGE_SIZE`.

This adapter uses the standard library's http.client, not httpx as nettel's other HTTP clients
do: a backfill of 15,000 links makes 30,000 requests, and httpx's client and transport cost
about 1 ms of CPU per request here against 0.25 ms, which alone would take most of the 30 s a
backfill of that size may take. Proxies from the environment are not used.
"""

from __future__ import annotations

import http.client
import ssl
import threading
from typing import Any
from urllib.parse import urlencode, urlsplit

import orjson

from service.parse.records import MeasurementKind

ARCHIVE_PATH = "/esmond/perfsonar/archive/"
#: The most objects or records elmond returns for one request, whatever `limit` asks.
MAX_PAGE_SIZE = 10_000
#: A kept-alive connection the server has closed meanwhile fails at once: retried on a new one.
_STALE_CONNECTION = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError)


class ArchiveUnavailable(Exception):
    """A request to the archive got no usable answer: a timeout, a connection or HTTP error, or
    a body that is not a JSON list."""


class ArchiveClient:
    """Reads metadata and records of the archive at `url` (http(s)://host[:port][/prefix])."""

    def __init__(self, url: str, timeout: float, page_size: int = MAX_PAGE_SIZE) -> None:
        """`timeout`: seconds for the connect and for each read (as httpx times them)."""
        if not 0 < page_size <= MAX_PAGE_SIZE:
            raise ValueError(f"page_size must be 1..{MAX_PAGE_SIZE}")
        parts = urlsplit(url)
        self._tls = ssl.create_default_context() if parts.scheme == "https" else None
        self._host, self._port = parts.hostname or "", parts.port
        self._prefix = parts.path.rstrip("/")
        self._timeout = timeout
        self._page_size = page_size
        self._local = threading.local()
        self._opened: list[http.client.HTTPConnection] = []
        self._lock = threading.Lock()

    def metadata(self, kind: MeasurementKind, seconds: int) -> list[Any]:
        """Every metadata object with `kind` data in the last `seconds`."""
        found: list[Any] = []
        query = {"event-type": kind.value, "time-range": seconds, "limit": self._page_size}
        while True:
            page = self._get_list(ARCHIVE_PATH, query | {"offset": len(found)})
            found += page
            if len(page) < self._page_size:
                return found

    def records(self, base_uri: str, start: int, end: int) -> list[Any]:
        """A series' records with `start` <= ts <= `end` (epoch s), oldest first."""
        found: list[Any] = []
        while True:
            query = {"time-start": start, "time-end": end, "limit": self._page_size}
            page = self._get_list(base_uri, query)
            found += page
            if len(page) < self._page_size:
                return found
            start = _after_last(page, start)

    def close(self) -> None:
        """Close every connection opened so far (requests in flight fail)."""
        with self._lock:
            opened, self._opened = self._opened, []
        for connection in opened:
            connection.close()

    def _get_list(self, path: str, query: dict[str, Any]) -> list[Any]:
        try:
            status, body = self._get(f"{self._prefix}{path}?{urlencode(query)}")
        except (OSError, http.client.HTTPException) as error:
            raise ArchiveUnavailable(f"{path}: {type(error).__name__} {error}".strip()) from None
        if status != 200:
            raise ArchiveUnavailable(f"{path}: HTTP {status}")
        try:
            page = orjson.loads(body)
        except orjson.JSONDecodeError:
            raise ArchiveUnavailable(f"{path}: not JSON") from None
        if not isinstance(page, list):
            raise ArchiveUnavailable(f"{path}: not a JSON list")
        return page

    def _get(self, target: str) -> tuple[int, bytes]:
        """GET on this thread's connection; once more on a new one if a kept-alive one was gone."""
        reused = getattr(self._local, "connection", None) is not None
        try:
            return self._exchange(target)
        except _STALE_CONNECTION:
            if not reused:
                raise
            return self._exchange(target)

    def _exchange(self, target: str) -> tuple[int, bytes]:
        connection = self._connection()
        try:
            connection.request("GET", target, headers={"Accept": "application/json"})
            response = connection.getresponse()
            return response.status, response.read()
        except BaseException:
            self._local.connection = None
            with self._lock:
                self._opened.remove(connection)
            connection.close()
            raise

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


def _after_last(page: list[Any], start: int) -> int:
    """The `time-start` of the page after `page`: its last record's `ts` + 1."""
    last = page[-1].get("ts") if isinstance(page[-1], dict) else None
    if type(last) is not int or last < start:
        raise ArchiveUnavailable("a full page whose last record has no later ts to page on")
    return last + 1
