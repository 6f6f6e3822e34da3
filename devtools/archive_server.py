"""A local stand-in for an esmond-compatible perfSONAR archive, for tests and benchmarks.

The real esmond (perfSONAR 4) needs Cassandra and elmond (perfSONAR 5) OpenSearch, neither of
which runs here; this server answers the same paths in the documented layout, from data it is
given, and pages like elmond:

- `GET /esmond/perfsonar/archive/?event-type=&source=&destination=&time-range=` (also
  `time-start`, `time-end`, `limit`, `offset`): metadata objects of the links with that event
  type (updated within the time range, when one is given);
- `GET /esmond/perfsonar/archive/<metadata-key>/<event-type>/base?time-start=&time-end=&limit=`:
  `[{"ts": ..., "val": ...}, ...]` with time-start <= ts <= time-end, oldest first.

`limit` defaults to 1,000 and is capped at 10,000, as elmond caps it. A link can be made to fail
(HTTP 500), stall (no answer until the server stops) or answer something else than a list (a
JSON object, as a wrong URL behind a proxy might) on its data requests, and the metadata listing
can stall too. Hostile links: `endless` answers 200 and sends records as fast as the client
reads, never closing the list, until the client goes (`endless_open` counts such answers in
progress, `endless_bytes` what they sent); `full_pages` answers every page with `limit` records
all stamped `time-start`, so that paging by time never ends by itself. Every request is
recorded (`requests`) for tests to inspect paging.
"""

from __future__ import annotations

import asyncio
import hashlib
import threading
import time
from bisect import bisect_left, bisect_right
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import parse_qsl

import orjson
import uvicorn

from devtools.activemq import free_port

ARCHIVE_PATH = "/esmond/perfsonar/archive/"
DEFAULT_LIMIT = 1000
LIMIT_CAP = 10_000
Record = dict[str, Any]
Fault = Literal["fail", "stall", "not_a_list", "endless", "full_pages"]
#: What an `endless` answer sends at a time: records of the real histogram's size.
ENDLESS_CHUNK = orjson.dumps({"ts": 1_700_000_040, "val": {"2.6": 300, "2.7": 300}}) + b","
ENDLESS_CHUNK *= (64 << 10) // len(ENDLESS_CHUNK)
Scope = dict[str, Any]
Send = Callable[[dict[str, Any]], Awaitable[None]]


def elmond_histogram(buckets: dict[str, int]) -> dict[str, int]:
    """A histogram's buckets keyed as elmond writes them, `str(float(delay))`: "2.6", not "2.60".

    >>> elmond_histogram({"2.60": 3, "2.57": 1, "10.00": 2})
    {'2.6': 3, '2.57': 1, '10.0': 2}
    """
    return {str(float(delay)): count for delay, count in buckets.items()}


@dataclass
class ArchivedLink:
    """One measured link in the archive: its records per event type, oldest first (any sequence:
    benchmarks pass ones that make records on demand), and a fault for its data requests."""

    source: str
    destination: str
    source_host: str | None = None
    destination_host: str | None = None
    series: dict[str, Sequence[Record]] = field(default_factory=dict)
    fault: Fault | None = None

    @property
    def key(self) -> str:
        """The metadata key: 32 hex digits, as esmond's."""
        return hashlib.md5(f"{self.source}>{self.destination}".encode()).hexdigest()

    def metadata(self) -> dict[str, Any]:
        """The link's metadata object in esmond's layout."""
        uri = f"{ARCHIVE_PATH}{self.key}/"
        return {
            "source": self.source,
            "destination": self.destination,
            "input-source": self.source_host or self.source,
            "input-destination": self.destination_host or self.destination,
            "measurement-agent": self.source,
            "metadata-key": self.key,
            "subject-type": "point-to-point",
            "tool-name": "pscheduler/powstream",
            "time-duration": "60",
            "ip-transport-protocol": "udp",
            "uri": uri,
            "event-types": [
                {
                    "event-type": event_type,
                    "base-uri": f"{uri}{event_type}/base",
                    "summaries": [],
                    "time-updated": records[-1]["ts"] if records else None,
                }
                for event_type, records in self.series.items()
            ],
        }


class ArchiveServer:
    """The archive on a free loopback port, served by uvicorn on a thread of this process:
    `with ArchiveServer(links) as archive:` ... `archive.url` ...; stopped at the end."""

    def __init__(self, links: Sequence[ArchivedLink], stall_metadata: bool = False) -> None:
        self.links = {link.key: link for link in links}
        self.stall_metadata = stall_metadata
        self.requests: list[tuple[str, dict[str, str]]] = []
        #: `endless` answers in progress, and the bytes they sent.
        self.endless_open = 0
        self.endless_bytes = 0
        self.url = ""
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._released: asyncio.Event | None = None

    def start(self) -> ArchiveServer:
        port = free_port()
        config = uvicorn.Config(
            self._app, "127.0.0.1", port, log_config=None, lifespan="off", interface="asgi3"
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, name="archive-server", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("the archive server did not start")
            time.sleep(0.01)
        self.url = f"http://127.0.0.1:{port}"
        return self

    def stop(self) -> None:
        """Answer the stalled requests (503), then shut down."""
        if self._server is None or self._thread is None:
            return
        loop, released = self._loop, self._released
        if loop is not None and released is not None:
            loop.call_soon_threadsafe(released.set)
        self._server.should_exit = True
        self._thread.join(10)

    def __enter__(self) -> ArchiveServer:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()

    def data_requests(self, key: str) -> list[dict[str, str]]:
        """The query of every data request made for the link with metadata key `key`."""
        return [query for path, query in self.requests if path.startswith(ARCHIVE_PATH + key)]

    async def _app(self, scope: Scope, receive: object, send: Send) -> None:
        if self._released is None:
            self._loop, self._released = asyncio.get_running_loop(), asyncio.Event()
        query = dict(parse_qsl(scope["query_string"].decode()))
        self.requests.append((scope["path"], query))
        if self._fault_of(scope["path"]) == "endless":
            await self._send_endless(receive, send)  # type: ignore[arg-type]
            return
        try:
            status, body = await self._answer(scope["path"], query)
        except ValueError as error:
            status, body = 400, orjson.dumps({"error": str(error)})
        headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    async def _answer(self, path: str, query: dict[str, str]) -> tuple[int, bytes]:
        if path == ARCHIVE_PATH:
            if self.stall_metadata:
                return await self._stall()
            return 200, orjson.dumps(self._metadata(query))
        key, _, rest = path.removeprefix(ARCHIVE_PATH).partition("/")
        event_type = rest.removesuffix("/base")
        link = self.links.get(key)
        if link is None or event_type not in link.series or not rest.endswith("/base"):
            return 404, b'{"error": "not found"}'
        if link.fault == "fail":
            return 500, b'{"error": "internal server error"}'
        if link.fault == "stall":
            return await self._stall()
        if link.fault == "not_a_list":
            return 200, b'{"detail": "this is not the archive"}'
        if link.fault == "full_pages":
            record = {"ts": int(query["time-start"]), "val": 0.0}
            return 200, orjson.dumps([record] * _limit(query))
        return 200, orjson.dumps(_page(link.series[event_type], query))

    def _fault_of(self, path: str) -> Fault | None:
        key = path.removeprefix(ARCHIVE_PATH).partition("/")[0]
        link = self.links.get(key) if path.startswith(ARCHIVE_PATH) else None
        return link.fault if link is not None else None

    async def _send_endless(
        self, receive: Callable[[], Awaitable[dict[str, Any]]], send: Send
    ) -> None:
        """A 200 answer whose list of records never ends, sent as fast as it is read, until
        the client disconnects or the server stops."""
        assert self._released is not None
        gone = asyncio.Event()

        async def watch() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass
            gone.set()

        watcher = asyncio.create_task(watch())
        self.endless_open += 1
        try:
            headers = [(b"content-type", b"application/json")]
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            body = b"[" + ENDLESS_CHUNK
            while not gone.is_set() and not self._released.is_set():
                await send({"type": "http.response.body", "body": body, "more_body": True})
                self.endless_bytes += len(body)
                body = ENDLESS_CHUNK
                await asyncio.sleep(0)  # a fast reader never pauses the transport
            if not gone.is_set():
                await send({"type": "http.response.body", "body": b"{}]"})
        finally:
            self.endless_open -= 1
            watcher.cancel()

    async def _stall(self) -> tuple[int, bytes]:
        assert self._released is not None
        await self._released.wait()
        return 503, b'{"error": "stopped"}'

    def _metadata(self, query: dict[str, str]) -> list[dict[str, Any]]:
        start, _ = _time_range(query)
        event_type = query.get("event-type")
        found = []
        for link in self.links.values():
            if query.get("source", link.source) != link.source:
                continue
            if query.get("destination", link.destination) != link.destination:
                continue
            types = [event_type] if event_type else list(link.series)
            if any(_updated_since(link.series.get(t), start) for t in types):
                found.append(link.metadata())
        offset = int(query.get("offset", 0))
        return found[offset : offset + _limit(query)]


def _page(records: Sequence[Record], query: dict[str, str]) -> list[Record]:
    start, end = _time_range(query)
    first = bisect_left(records, start, key=_ts)
    last = bisect_right(records, end, key=_ts)
    return [records[i] for i in range(first, min(last, first + _limit(query)))]


def _ts(record: Record) -> int:
    ts: int = record["ts"]
    return ts


def _time_range(query: dict[str, str]) -> tuple[float, float]:
    end = float(query.get("time-end", "inf"))
    if "time-range" in query:
        return time.time() - float(query["time-range"]), end
    return float(query.get("time-start", 0)), end


def _updated_since(records: Sequence[Record] | None, start: float) -> bool:
    return records is not None and len(records) > 0 and records[-1]["ts"] >= start


def _limit(query: dict[str, str]) -> int:
    return min(int(query.get("limit", DEFAULT_LIMIT)), LIMIT_CAP)
