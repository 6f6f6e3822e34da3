"""`GET /costmatrix/stream`: the cost matrix as server-sent events.

On connect a client gets the whole matrix (event `matrix`), then after every recompute an event
`changes` with the links whose cost moved by more than `stream_cost_step` (or whose congested
flag flipped) since they were last sent to that client, and under `removed` the source and
destination of every link sent to it that the matrix no longer has (retired, or a site pair
whose last link went); empty lists still tell the client a new matrix exists. Event ids are the
snapshot's `generated_at`. Nothing is replayed: a client that reconnects (with or without
`Last-Event-ID`) gets the whole matrix again. A comment line every `keepalive` seconds keeps
proxies from closing an idle stream.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Literal

import orjson
from fastapi import APIRouter, Depends
from fastapi.responses import StreamingResponse

from service.matrix.link_record import LinkKey, LinkRecord, link_key
from service.matrix.snapshot import CostMatrix
from service.publish.wakeups import Wakeups

Level = Literal["host", "site"]
Sent = dict[LinkKey, tuple[float | None, bool]]
KEEPALIVE = b": keep-alive\n\n"
#: Response headers of every SSE stream: not cached, and not buffered by nginx-style proxies.
SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


def sse_event(event: str, event_id: str | None, data: bytes) -> bytes:
    """One server-sent event (with an `id` line unless `event_id` is None); `data` is
    single-line JSON."""
    id_line = b"" if event_id is None else b"id: %s\n" % event_id.encode()
    return b"event: %s\n%sdata: %s\n\n" % (event.encode(), id_line, data)


def event_id(matrix: CostMatrix) -> str:
    return f"{matrix.generated_at:.3f}"


def moved_links(links: Sequence[LinkRecord], sent: Sent, step: float) -> list[LinkRecord]:
    """Links new to `sent`, whose cost moved by more than `step`, or whose congestion flipped."""
    return [link for link in links if _moved(link, sent.get(link_key(link)), step)]


def _moved(link: LinkRecord, last: tuple[float | None, bool] | None, step: float) -> bool:
    if last is None or last[1] != link["congested"]:
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
    sent.update({link_key(link): (link["cost"], link["congested"]) for link in links})


class MatrixStream:
    """Wakes every connected client when a new snapshot exists (a matrix observer)."""

    def __init__(
        self,
        latest: Callable[[], CostMatrix | None],
        site_links: Callable[[CostMatrix], Sequence[LinkRecord]],
        cost_step: float,
        keepalive: float = 15.0,
    ) -> None:
        self._latest = latest
        self._site_links = site_links
        self._step = cost_step
        self._keepalive = keepalive
        self._wakeups = Wakeups()

    @property
    def closed(self) -> bool:
        return self._wakeups.closed

    def open_streams(self) -> int:
        return self._wakeups.count

    def observe(self, previous: CostMatrix | None, current: CostMatrix) -> None:
        """Matrix observer (cycle thread): only wakes the clients' event loops."""
        self._wakeups.wake_all()

    def close(self) -> None:
        """End every open stream (at shutdown); safe from any thread or a signal handler."""
        self._wakeups.close()

    async def events(self, level: Level) -> AsyncIterator[bytes]:
        """The byte stream of one client."""
        with self._wakeups.registered() as wake:
            async for chunk in self._client_events(level, wake):
                yield chunk

    async def _client_events(self, level: Level, wake: asyncio.Event) -> AsyncIterator[bytes]:
        sent: Sent | None = None
        shown: CostMatrix | None = None
        yield b"retry: 3000\n\n"
        while not self.closed:
            wake.clear()
            matrix = self._latest()
            if matrix is not None and matrix is not shown:
                links = self._links(matrix, level)
                if sent is None:
                    sent = {}
                    _remember(sent, links)
                    yield self._matrix_event(matrix, links, level)
                else:
                    yield self._changes_event(matrix, links, sent)
                shown = matrix
            try:
                await asyncio.wait_for(wake.wait(), self._keepalive)
            except TimeoutError:
                yield KEEPALIVE

    def _links(self, matrix: CostMatrix, level: Level) -> Sequence[LinkRecord]:
        return self._site_links(matrix) if level == "site" else matrix.links

    def _matrix_event(self, matrix: CostMatrix, links: Sequence[LinkRecord], level: Level) -> bytes:
        body = matrix.body if level == "host" else orjson.dumps(matrix.document(list(links)))
        return sse_event("matrix", event_id(matrix), body)

    def _changes_event(self, matrix: CostMatrix, links: Sequence[LinkRecord], sent: Sent) -> bytes:
        moved = moved_links(links, sent, self._step)
        removed = removed_links(links, sent)
        for key in removed:
            del sent[key]
        _remember(sent, moved)
        body = orjson.dumps(
            {
                "generated_at": matrix.generated_at,
                "links": moved,
                "removed": [{"source": source, "destination": dest} for source, dest in removed],
            }
        )
        return sse_event("changes", event_id(matrix), body)


def build_stream_router(get_stream: Callable[..., MatrixStream]) -> APIRouter:
    """`GET /costmatrix/stream` over the dependency `get_stream`."""
    router = APIRouter(tags=["stream"])

    @router.get(
        "/costmatrix/stream",
        response_class=StreamingResponse,
        responses={200: {"content": {"text/event-stream": {}}}},
    )
    async def costmatrix_stream(
        level: Level = "host", stream: MatrixStream = Depends(get_stream)
    ) -> StreamingResponse:
        """Server-sent events: `matrix` on connect, then `changes` (moved and removed links)
        after every recompute."""
        return StreamingResponse(
            stream.events(level), media_type="text/event-stream", headers=SSE_HEADERS
        )

    return router
