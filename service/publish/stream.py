"""`GET /costmatrix/stream`: the cost matrix as server-sent events.

On connect a client gets the whole matrix (event `matrix`), then after every recompute an event
`changes` with the links whose cost moved by more than `stream_cost_step` (or whose congested
flag flipped, or that have a new throughput test) since the stream last sent them, and under
`removed` the source and destination
of every link sent that the matrix no longer has (retired, or a site pair whose last link went);
empty lists still tell the client a new matrix exists. Event ids are the snapshot's
`generated_at`. Nothing is replayed: a client that reconnects (with or without
`Last-Event-ID`) gets the whole matrix again. A comment line every `keepalive` seconds keeps
proxies from closing an idle stream.

Subscribers share the work: each level's `changes` event is built once per matrix, in the
matrix cycle's thread, against one memory of what was sent, and every subscriber is handed the
same bytes (as is the `matrix` event, built once per matrix). What a subscriber has not read
waits in its socket: one that falls `BACKLOG_EVENTS` events behind, or whose write has waited
`send_timeout` seconds, is dropped (`nettel_http_refused_total{reason="slow_reader"}`); at most
`max_streams` are open (503 beyond, `stream_limit`), counted together with the other streams
that share its `StreamLimit` (/alarms/stream).
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

import orjson
from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response, StreamingResponse
from starlette.types import Receive, Scope, Send

from service.matrix.link_record import LinkKey, LinkRecord, link_key
from service.matrix.snapshot import CostMatrix
from service.publish.http_guard import ABORT_EXTENSION, HttpRefusal
from service.publish.wakeups import Wakeups

Level = Literal["host", "site"]
#: Per link sent: its cost, congested flag and throughput (a new test is sent).
Sent = dict[LinkKey, tuple[float | None, bool, int | None]]
KEEPALIVE = b": keep-alive\n\n"
#: Response headers of every SSE stream: not cached, and not buffered by nginx-style proxies.
SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
#: Events are written in pieces of at most this size, each once the client has read the last
#: (the server's write buffer holds one piece per subscriber, not a whole matrix).
SEND_PIECE_BYTES = 64 * 1024
#: `changes` events kept for subscribers still writing an earlier one; one further behind is
#: dropped.
BACKLOG_EVENTS = 8
#: Counts and logs a subscriber refused or dropped: why, the client, a detail for the log.
Refuse = Callable[[HttpRefusal, str, str], None]


def sse_event(event: str, event_id: str | None, data: bytes) -> bytes:
    """One server-sent event (with an `id` line unless `event_id` is None); `data` is
    single-line JSON."""
    id_line = b"" if event_id is None else b"id: %s\n" % event_id.encode()
    return b"event: %s\n%sdata: %s\n\n" % (event.encode(), id_line, data)


def event_id(matrix: CostMatrix) -> str:
    return f"{matrix.generated_at:.3f}"


def moved_links(links: Sequence[LinkRecord], sent: Sent, step: float) -> list[LinkRecord]:
    """Links new to `sent`, whose cost moved by more than `step`, whose congestion flipped, or
    with a new throughput result."""
    return [link for link in links if _moved(link, sent.get(link_key(link)), step)]


def _moved(
    link: LinkRecord, last: tuple[float | None, bool, int | None] | None, step: float
) -> bool:
    if last is None or last[1] != link["congested"] or last[2] != link["throughput_bps"]:
        return True
    cost: float | None = link["cost"]
    last_cost = last[0]
    if cost is None or last_cost is None:
        return cost != last_cost
    return abs(cost - last_cost) > step


def removed_links(links: Sequence[LinkRecord], sent: Sent) -> list[LinkKey]:
    """Links in `sent` that `links` no longer has."""
    present = {link_key(link) for link in links}
    return [key for key in sent if key not in present]


def _remember(sent: Sent, links: Sequence[LinkRecord]) -> None:
    sent.update(
        {
            link_key(link): (link["cost"], link["congested"], link["throughput_bps"])
            for link in links
        }
    )


@dataclass
class _Feed:
    """One level's `changes` events, built once per matrix, and the memory of what was sent."""

    sent: Sent = field(default_factory=dict)
    #: (generated_at, event) of the last BACKLOG_EVENTS matrices, oldest first.
    events: deque[tuple[float, bytes]] = field(default_factory=lambda: deque(maxlen=BACKLOG_EVENTS))
    #: The newest matrix whose event left `events` (a subscriber before it is too far behind).
    forgotten: float = float("-inf")
    subscribers: int = 0
    #: The `matrix` event of the newest matrix a subscriber started from.
    full: tuple[CostMatrix | None, bytes] = (None, b"")

    def since(self, generated_at: float) -> list[tuple[float, bytes]] | None:
        """The events after the matrix of `generated_at`; None when some were forgotten."""
        if self.forgotten > generated_at:
            return None
        return [event for event in self.events if event[0] > generated_at]


class StreamLimit:
    """One `--sse-max-streams` for the SSE endpoints that share it: each takes a wake-up hub
    from it (`hub`), and a new subscriber is refused (503, `stream_limit`) once `max_streams`
    are open over all hubs; a subscriber whose write waits `send_timeout` seconds is dropped
    (`slow_reader`). `close` ends the streams of every hub (at shutdown)."""

    def __init__(
        self, max_streams: int = 256, send_timeout: float = 30.0, refuse: Refuse | None = None
    ) -> None:
        self.max_streams = max_streams
        self.send_timeout = send_timeout
        self.refuse: Refuse = refuse or (lambda reason, client, detail: None)
        self._hubs: list[Wakeups] = []
        self.closed = False

    def hub(self) -> Wakeups:
        """A new wake-up hub whose streams count against the limit."""
        wakeups = Wakeups()
        self._hubs.append(wakeups)
        return wakeups

    def open_streams(self) -> int:
        return sum(hub.count for hub in self._hubs)

    def full(self) -> bool:
        """Whether `max_streams` are open (or the streams are closing): a new one is refused."""
        return self.closed or self.open_streams() >= self.max_streams

    def close(self) -> None:
        """End every open stream of every hub; safe from any thread or a signal handler."""
        self.closed = True
        for hub in self._hubs:
            hub.close()

    def respond(
        self, path: str, client: str, events: Callable[[], AsyncIterator[bytes]]
    ) -> Response:
        """The event stream `events()` for `client` at `path`, or 503 (with Retry-After) when
        the limit is reached."""
        if self.full():
            detail = f"{self.max_streams} event streams are open already (--sse-max-streams)"
            self.refuse(HttpRefusal.STREAM_LIMIT, client, f"{path}: {detail}")
            return Response(
                orjson.dumps({"detail": detail}),
                status_code=503,
                media_type="application/json",
                headers={"Retry-After": "30"},
            )
        slow = f"{path} subscriber read nothing for {self.send_timeout} s"
        return EventStreamResponse(
            events(),
            self.send_timeout,
            lambda: self.refuse(HttpRefusal.SLOW_READER, client, slow),
        )


class MatrixStream:
    """Wakes every connected client when a new snapshot exists (a matrix observer)."""

    def __init__(
        self,
        latest: Callable[[], CostMatrix | None],
        site_links: Callable[[CostMatrix], Sequence[LinkRecord]],
        cost_step: float,
        keepalive: float = 15.0,
        max_streams: int = 256,
        send_timeout: float = 30.0,
        refuse: Refuse = lambda reason, client, detail: None,
    ) -> None:
        self._latest = latest
        self._site_links = site_links
        self._step = cost_step
        self._keepalive = keepalive
        #: Shared with /alarms/stream: one --sse-max-streams for both.
        self.limit = StreamLimit(max_streams, send_timeout, refuse)
        self._wakeups = self.limit.hub()
        self._feeds: dict[Level, _Feed] = {"host": _Feed(), "site": _Feed()}
        self._lock = threading.Lock()

    @property
    def closed(self) -> bool:
        return self._wakeups.closed

    def open_streams(self) -> int:
        return self._wakeups.count

    def observe(self, previous: CostMatrix | None, current: CostMatrix) -> None:
        """Matrix observer (cycle thread): builds each subscribed level's `changes` event once,
        then wakes the clients' event loops."""
        for level, feed in self._feeds.items():
            with self._lock:
                if feed.subscribers:
                    self._advance(feed, current, self._links(current, level))
        self._wakeups.wake_all()

    def close(self) -> None:
        """End every open stream under its limit (at shutdown); safe from any thread or a
        signal handler."""
        self.limit.close()

    async def events(self, level: Level, client: str = "unknown") -> AsyncIterator[bytes]:
        """The byte stream of one client."""
        feed = self._feeds[level]
        with self._lock:
            feed.subscribers += 1
        try:
            with self._wakeups.registered() as wake:
                async for chunk in self._client_events(level, feed, wake, client):
                    yield chunk
        finally:
            with self._lock:
                feed.subscribers -= 1
                if not feed.subscribers:  # the next subscriber starts afresh
                    self._feeds[level] = _Feed()

    async def _client_events(
        self, level: Level, feed: _Feed, wake: asyncio.Event, client: str
    ) -> AsyncIterator[bytes]:
        shown: float | None = None
        yield b"retry: 3000\n\n"
        while not self.closed:
            wake.clear()
            if shown is None and (matrix := self._latest()) is not None:
                shown = matrix.generated_at
                yield self._start(feed, matrix, level)
            elif shown is not None:
                with self._lock:
                    events = feed.since(shown)
                if events is None:
                    detail = f"/costmatrix/stream subscriber over {BACKLOG_EVENTS} events behind"
                    self.limit.refuse(HttpRefusal.SLOW_READER, client, detail)
                    return
                for shown, event in events:  # noqa: B007 (shown: the last event sent)
                    yield event
            try:
                await asyncio.wait_for(wake.wait(), self._keepalive)
            except TimeoutError:
                yield KEEPALIVE

    def _start(self, feed: _Feed, matrix: CostMatrix, level: Level) -> bytes:
        """The `matrix` event of `matrix` (built once per matrix); the first subscriber's also
        starts the memory of what was sent."""
        with self._lock:
            if feed.full[0] is matrix:
                return feed.full[1]
        links = self._links(matrix, level)
        body = matrix.body if level == "host" else orjson.dumps(matrix.document(list(links)))
        event = sse_event("matrix", event_id(matrix), body)
        with self._lock:
            if not feed.sent and not feed.events:
                _remember(feed.sent, links)
            feed.full = (matrix, event)
        return event

    def _links(self, matrix: CostMatrix, level: Level) -> Sequence[LinkRecord]:
        return self._site_links(matrix) if level == "site" else matrix.links

    def _advance(self, feed: _Feed, matrix: CostMatrix, links: Sequence[LinkRecord]) -> None:
        """Append `matrix`'s `changes` event to `feed` (the state's lock held)."""
        moved = moved_links(links, feed.sent, self._step)
        removed = removed_links(links, feed.sent)
        for key in removed:
            del feed.sent[key]
        _remember(feed.sent, moved)
        body = orjson.dumps(
            {
                "generated_at": matrix.generated_at,
                "links": moved,
                "removed": [{"source": source, "destination": dest} for source, dest in removed],
            }
        )
        if len(feed.events) == feed.events.maxlen:
            feed.forgotten = feed.events[0][0]
        feed.events.append((matrix.generated_at, sse_event("changes", event_id(matrix), body)))


class EventStreamResponse(StreamingResponse):
    """A server-sent event stream written in pieces, each of which may wait `send_timeout`
    seconds for the client to read; then the connection is dropped (through the server's
    ABORT_EXTENSION) and `on_slow` called."""

    def __init__(
        self,
        content: AsyncIterator[bytes],
        send_timeout: float,
        on_slow: Callable[[], None],
    ) -> None:
        super().__init__(content, media_type="text/event-stream", headers=SSE_HEADERS)
        self._send_timeout = send_timeout
        self._on_slow = on_slow
        self._abort: Callable[[], None] | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self._abort = scope.get("extensions", {}).get(ABORT_EXTENSION, {}).get("abort")
        await super().__call__(scope, receive, send)

    async def stream_response(self, send: Send) -> None:
        head = {"type": "http.response.start", "status": self.status_code}
        await send(head | {"headers": self.raw_headers})
        async for chunk in self.body_iterator:
            for offset in range(0, len(chunk), SEND_PIECE_BYTES):
                piece = chunk[offset : offset + SEND_PIECE_BYTES]
                message = {"type": "http.response.body", "body": piece, "more_body": True}
                try:
                    await asyncio.wait_for(send(message), self._send_timeout)
                except TimeoutError:
                    self._on_slow()
                    if self._abort is not None:
                        self._abort()
                    return
        await send({"type": "http.response.body", "body": b"", "more_body": False})


def build_stream_router(get_stream: Callable[..., MatrixStream]) -> APIRouter:
    """`GET /costmatrix/stream` over the dependency `get_stream`."""
    router = APIRouter(tags=["stream"])

    @router.get(
        "/costmatrix/stream",
        response_class=StreamingResponse,
        responses={
            200: {"content": {"text/event-stream": {}}},
            503: {
                "description": "--sse-max-streams subscribers (of this stream and "
                "/alarms/stream) are connected already"
            },
        },
    )
    async def costmatrix_stream(
        request: Request, level: Level = "host", stream: MatrixStream = Depends(get_stream)
    ) -> Response:
        """Server-sent events: `matrix` on connect, then `changes` (moved and removed links)
        after every recompute."""
        client = request.client.host if request.client else "unknown"
        return stream.limit.respond(
            "/costmatrix/stream", client, lambda: stream.events(level, client)
        )

    return router
