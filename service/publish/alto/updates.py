"""ALTO incremental updates over server-sent events (RFC 8895): update streams and their control.

A client POSTs an `UpdateStreamReq` (`application/alto-updatestreamparams+json`) to the update
stream service; `add` names substreams by client-id, each one resource of the directory (the
network map or a cost map; with `input`, a filtered cost map or endpoint costs). The reply is a
`text/event-stream`:

- first a control update (event `application/alto-updatestreamcontrol+json`) carrying the
  stream's `control-uri`;
- per substream, its full document (event `<the resource's media type>,<client-id>`) as soon as
  a matrix exists; then, after every recompute that changes it, a JSON merge patch from the
  last document sent (event `application/merge-patch+json,<client-id>`), or with
  `incremental-changes: false` the whole document again. Network map substreams go first, so a
  cost map never names a network map version (`dependent-vtags`) the client has not been sent;
- stream control (POST to the control URI, 204): added substreams are announced by a control
  update `{"started": [...]}` and then sent in full, removed ones by `{"stopped": [...]}`.

A document is built once per snapshot per (resource, input) and shared by every substream that
asks for it, and so is the patch between two shared documents; building runs on a worker
thread, never on the event loop.
"""

from __future__ import annotations

import asyncio
import secrets
import threading
from collections.abc import AsyncIterator, Callable, Hashable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar

import anyio.to_thread
import orjson

from service.matrix.snapshot import CostMatrix
from service.publish.alto.merge_patch import merge_patch
from service.publish.alto.protocol import (
    COST_MAP_MEDIA,
    E_INVALID_FIELD_VALUE,
    E_MISSING_FIELD,
    ENDPOINT_COST_MEDIA,
    MERGE_PATCH_MEDIA,
    NETWORK_MAP_MEDIA,
    UPDATE_STREAM_CONTROL_MEDIA,
    AltoError,
)
from service.publish.alto.request_bodies import (
    MAX_SUBSTREAMS,
    AddUpdate,
    EndpointCostQuery,
    UpdateStreamQuery,
    endpoint_cost_query,
    filtered_cost_map_query,
)
from service.publish.alto.view import (
    ENDPOINT_COST_ID,
    METRICS,
    NETWORK_MAP_ID,
    AltoView,
    CostMetric,
)
from service.publish.stream import KEEPALIVE, sse_event
from service.publish.wakeups import Wakeups

#: At most this many update streams open at once (beyond: 503).
MAX_UPDATE_STREAMS = 256
Document = dict[str, Any]
T = TypeVar("T")


class TooManyStreams(Exception):
    """The update stream service holds MAX_UPDATE_STREAMS streams already, or is stopping."""


@dataclass(frozen=True)
class UpdateSource:
    """What a substream follows: equal `key`s give equal documents of one snapshot."""

    key: Hashable
    media_type: str
    document: Callable[[AltoView], Document]
    #: a GET-mode resource with a vtag: a client holding its current version (`tag`) is not
    #: sent it again in full (RFC 8895 section 6.5)
    versioned: bool = False


@dataclass
class Substream:
    client_id: str
    source: UpdateSource
    incremental: bool
    tag: str | None
    sent: Document | None = None  # the document the client holds, as of the last update


def resolve_source(add: AddUpdate, client: str | None) -> UpdateSource:
    """The resource an `AddUpdateReq` names, with its `input` checked as the resource checks
    its POST body (errors name the field under `add/<client-id>/input`)."""
    rid = add.resource_id
    if rid == NETWORK_MAP_ID:
        _refuse_input(add)
        return UpdateSource(rid, NETWORK_MAP_MEDIA, AltoView.network_map_document, True)
    if rid in _COST_MAPS:
        _refuse_input(add)
        return _cost_map_source(rid, _COST_MAPS[rid], None, None)
    if rid in _FILTERED_COST_MAPS:
        metric = _FILTERED_COST_MAPS[rid]
        query = _checked_input(add, partial(filtered_cost_map_query, metrics=[metric.name]))
        return _cost_map_source((rid, query), metric, query.srcs, query.dsts)
    if rid == ENDPOINT_COST_ID:
        ecs = _checked_input(add, partial(endpoint_cost_query, metrics=METRICS, client=client))
        return _endpoint_cost_source((rid, ecs), ecs)
    raise AltoError(E_INVALID_FIELD_VALUE, f"add/{add.client_id}/resource-id", rid)


_COST_MAPS = {metric.cost_map_id: metric for metric in METRICS.values()}
_FILTERED_COST_MAPS = {metric.filtered_cost_map_id: metric for metric in METRICS.values()}


def _cost_map_source(
    key: Hashable, metric: CostMetric, srcs: Sequence[str] | None, dsts: Sequence[str] | None
) -> UpdateSource:
    return UpdateSource(
        key, COST_MAP_MEDIA, lambda view: view.cost_map_document(metric, srcs, dsts)
    )


def _endpoint_cost_source(key: Hashable, query: EndpointCostQuery) -> UpdateSource:
    metric = METRICS[query.metric]
    return UpdateSource(
        key,
        ENDPOINT_COST_MEDIA,
        lambda view: view.endpoint_cost_document(metric, query.srcs, query.dsts),
    )


def _refuse_input(add: AddUpdate) -> None:
    if add.input is not None:  # a GET-mode resource takes none
        raise AltoError(E_INVALID_FIELD_VALUE, f"add/{add.client_id}/input", add.input)


def _checked_input(add: AddUpdate, check: Callable[[dict[str, Any]], T]) -> T:
    field = f"add/{add.client_id}/input"
    if add.input is None:
        raise AltoError(E_MISSING_FIELD, field)
    try:
        return check(add.input)
    except AltoError as error:
        error.field = field if error.field is None else f"{field}/{error.field}"
        raise


def control_event(update: dict[str, Any]) -> bytes:
    """A control update message (`UpdateStreamControlEvent`, RFC 8895 section 6.6)."""
    return sse_event(UPDATE_STREAM_CONTROL_MEDIA, None, orjson.dumps(update))


class UpdateStream:
    """One client's update stream: its substreams, touched only by the stream's own task, and
    the stream control requests waiting for that task."""

    def __init__(self, substreams: Sequence[Substream]) -> None:
        self.id = secrets.token_urlsafe(18)  # the control URI is the stream's only credential
        self._substreams = {substream.client_id: substream for substream in substreams}
        self._lock = threading.Lock()
        self._client_ids = set(self._substreams)  # as control requests will have left them
        self._pending: list[tuple[tuple[str, ...], list[Substream]]] = []
        self._wake: tuple[asyncio.AbstractEventLoop, asyncio.Event] | None = None

    def request(self, remove: tuple[str, ...], add: list[Substream]) -> None:
        """A stream control request (any thread): refused whole (AltoError) or queued whole."""
        with self._lock:
            unknown = [client_id for client_id in remove if client_id not in self._client_ids]
            if unknown:
                raise AltoError(E_INVALID_FIELD_VALUE, "remove", unknown)
            kept = self._client_ids - set(remove)
            taken = [substream.client_id for substream in add if substream.client_id in kept]
            if taken:
                raise AltoError(E_INVALID_FIELD_VALUE, "add", taken)
            if len(kept) + len(add) > MAX_SUBSTREAMS:
                too_many = f"{len(kept) + len(add)} substreams, more than {MAX_SUBSTREAMS}"
                raise AltoError(E_INVALID_FIELD_VALUE, "add", too_many)
            self._client_ids = kept | {substream.client_id for substream in add}
            self._pending.append((remove, add))
            wake = self._wake
        if wake is not None:
            loop, event = wake
            loop.call_soon_threadsafe(event.set)

    def attach(self, loop: asyncio.AbstractEventLoop, wake: asyncio.Event) -> None:
        with self._lock:
            self._wake = (loop, wake)

    def updates(self, matrix: CostMatrix | None, fresh: bool, documents: SharedDocuments) -> bytes:
        """The messages due (worker thread): control updates for the requests queued, then per
        substream its document if never sent, or (`fresh`: a new matrix) what changed."""
        with self._lock:
            pending, self._pending = self._pending, []
        messages = []
        for removed, added in pending:
            for client_id in removed:
                del self._substreams[client_id]
            if removed:
                messages.append(control_event({"stopped": list(removed)}))
            self._substreams |= {substream.client_id: substream for substream in added}
            if added:
                messages.append(control_event({"started": [s.client_id for s in added]}))
        if matrix is not None:
            for substream in sorted(self._substreams.values(), key=_network_map_first):
                if substream.sent is None or fresh:
                    messages.append(documents.update(matrix, substream))
        return b"".join(messages)


def _network_map_first(substream: Substream) -> bool:
    return substream.source.media_type != NETWORK_MAP_MEDIA


class SharedDocuments:
    """The latest matrix's documents and patches, shared by every substream (any thread)."""

    def __init__(self, view_of: Callable[[CostMatrix], AltoView]) -> None:
        self._view_of = view_of
        self._lock = threading.Lock()
        self._matrix: CostMatrix | None = None
        self._documents: dict[Hashable, tuple[Document, bytes]] = {}
        self._patches: dict[tuple[Hashable, int], tuple[Document, bytes]] = {}

    def update(self, matrix: CostMatrix, substream: Substream) -> bytes:
        """The message bringing `substream`'s client to `matrix`'s document (b"": none due),
        which becomes the document the client holds."""
        source, sent = substream.source, substream.sent
        document, full = self._document(matrix, source)
        substream.sent = document
        event = f"{source.media_type},{substream.client_id}"  # of a whole document
        if sent is None:
            if source.versioned and substream.tag == document["meta"]["vtag"]["tag"]:
                return b""  # the client holds this version already
            return sse_event(event, None, full)
        if not substream.incremental:
            return (
                sse_event(event, None, full) if document is not sent and document != sent else b""
            )
        patch = self._patch(matrix, source, sent, document)
        return (
            sse_event(f"{MERGE_PATCH_MEDIA},{substream.client_id}", None, patch) if patch else b""
        )

    def _document(self, matrix: CostMatrix, source: UpdateSource) -> tuple[Document, bytes]:
        with self._lock:
            if self._newer(matrix):
                self._matrix, self._documents, self._patches = matrix, {}, {}
            built = self._documents.get(source.key) if matrix is self._matrix else None
        if built is None:  # two threads may build the same document: either one is kept
            document = source.document(self._view_of(matrix))
            built = (document, orjson.dumps(document))
            with self._lock:
                if matrix is self._matrix:
                    built = self._documents.setdefault(source.key, built)
        return built

    def _newer(self, matrix: CostMatrix) -> bool:
        """Whether `matrix` replaces the cached one: a stream still on an older matrix (it read
        `latest` just before a recompute) is served without the cache, not by flushing it."""
        cached = self._matrix
        return cached is None or (
            matrix is not cached and matrix.generated_at >= cached.generated_at
        )

    def _patch(
        self, matrix: CostMatrix, source: UpdateSource, sent: Document, document: Document
    ) -> bytes:
        """The serialised merge patch from `sent` to `document` (b"" when they are equal)."""
        key = (source.key, id(sent))
        with self._lock:
            cached = self._patches.get(key) if matrix is self._matrix else None
        if cached is not None and cached[0] is sent:  # the same object, not a reused id
            return cached[1]
        patch = merge_patch(sent, document) if document is not sent else {}
        serialised = orjson.dumps(patch) if patch else b""
        with self._lock:
            if matrix is self._matrix:
                self._patches[key] = (sent, serialised)
        return serialised


class AltoUpdates:
    """The update stream service: the open streams, woken by every new matrix (an observer)."""

    def __init__(
        self,
        latest: Callable[[], CostMatrix | None],
        view_of: Callable[[CostMatrix], AltoView],
        *,
        keepalive: float = 15.0,
        max_streams: int = MAX_UPDATE_STREAMS,
    ) -> None:
        self._latest = latest
        self._documents = SharedDocuments(view_of)
        self._keepalive = keepalive
        self._max_streams = max_streams
        self._wakeups = Wakeups()
        self._streams: dict[str, UpdateStream] = {}
        self._lock = threading.Lock()

    def open_streams(self) -> int:
        with self._lock:
            return len(self._streams)

    def observe(self, previous: CostMatrix | None, current: CostMatrix) -> None:
        """Matrix observer (cycle thread): only wakes the streams' event loops."""
        self._wakeups.wake_all()

    def close(self) -> None:
        """End every open stream (at shutdown); safe from any thread or a signal handler."""
        self._wakeups.close()

    def open(self, query: UpdateStreamQuery, client: str | None) -> UpdateStream:
        """A new stream for an `UpdateStreamReq` (AltoError if refused, TooManyStreams)."""
        if not query.add:
            raise AltoError(E_MISSING_FIELD, "add")
        if query.remove:  # a new stream has no substream to remove
            raise AltoError(E_INVALID_FIELD_VALUE, "remove", list(query.remove))
        substreams = [_substream(add, client) for add in query.add]
        if self._wakeups.closed or self.open_streams() >= self._max_streams:
            raise TooManyStreams
        return UpdateStream(substreams)

    def control(self, stream_id: str, query: UpdateStreamQuery, client: str | None) -> None:
        """A stream control request for the open stream `stream_id` (AltoError, 404 if none)."""
        with self._lock:
            stream = self._streams.get(stream_id)
        if stream is None:
            raise AltoError(E_INVALID_FIELD_VALUE, "control-uri", stream_id, status=404)
        stream.request(query.remove, [_substream(add, client) for add in query.add])

    def end(self, stream: UpdateStream) -> None:
        """Close `stream` to control (its control URI is 404 from now on), as soon as its client
        is known to have gone: its byte stream may take longer to unwind (a worker thread)."""
        with self._lock:
            self._streams.pop(stream.id, None)

    async def events(self, stream: UpdateStream, control_uri: str) -> AsyncIterator[bytes]:
        """The byte stream of one update stream; it is open (controllable) while this runs and
        its client is connected (`end`)."""
        with self._lock:
            self._streams[stream.id] = stream
        try:
            with self._wakeups.registered() as wake:
                stream.attach(asyncio.get_running_loop(), wake)
                yield control_event({"control-uri": control_uri})
                shown: CostMatrix | None = None
                while not self._wakeups.closed:
                    wake.clear()
                    matrix = self._latest()
                    fresh = matrix is not None and matrix is not shown
                    messages = await anyio.to_thread.run_sync(
                        stream.updates, matrix, fresh, self._documents
                    )
                    if messages:
                        yield messages
                    shown = matrix
                    try:
                        await asyncio.wait_for(wake.wait(), self._keepalive)
                    except TimeoutError:
                        yield KEEPALIVE
        finally:
            self.end(stream)


def _substream(add: AddUpdate, client: str | None) -> Substream:
    return Substream(add.client_id, resolve_source(add, client), add.incremental, add.tag)
