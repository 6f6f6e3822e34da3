"""HTTP routes (FastAPI): the cost matrix, link detail, health, readiness and Prometheus metrics.

Routes take what they need through the dependencies of `service.publish.dependencies`; the app
is put together by `service.publish.app.create_app`.
"""

from __future__ import annotations

import time
from typing import Annotated, Literal

import orjson
from fastapi import APIRouter, Depends, Header, HTTPException, Query, Request, Response
from fastapi.responses import StreamingResponse
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from starlette.concurrency import run_in_threadpool
from starlette.types import Receive, Scope, Send

from service.errors import ModelBundleError
from service.ingest.http_auth import require_token
from service.matrix.link_detail import build_link_detail
from service.matrix.link_record import LinkRecord
from service.matrix.matrix_body import MatrixBody
from service.matrix.snapshot import CostMatrix
from service.matrix.views import aggregate_sites, dense_matrix
from service.persistence.snapshot_codec import MEDIA_TYPE as STATE_MEDIA_TYPE
from service.persistence.snapshot_codec import encode_state_parts
from service.publish.content_coding import accepts_gzip
from service.publish.dependencies import LatestMatrix, RuntimeDep, get_registry
from service.publish.schemas import (
    CostMatrixOut,
    DenseMatrixOut,
    LinkDetailOut,
    ModelOut,
    ReadinessOut,
)

JSON = "application/json"
#: Selections up to this many links are answered on the event loop (well under a millisecond,
#: no thread hop); larger ones in the thread pool so that they do not hold up other requests.
INLINE_LINKS = 500
Endpoint = Annotated[str | None, Query(max_length=255, description="IP, host name or site name")]


router = APIRouter()


@router.get(
    "/costmatrix",
    response_model=CostMatrixOut | DenseMatrixOut,
    responses={
        304: {"description": "unchanged since the ETag given in If-None-Match"},
        404: {
            "description": "source or destination names no site, host name or address of any "
            "link (a known name without links in that direction: 200 with no links)"
        },
        503: {"description": "no cost matrix computed yet"},
    },
)
async def costmatrix(
    request: Request,
    matrix: LatestMatrix,
    source: Endpoint = None,
    destination: Endpoint = None,
    level: Literal["host", "site"] = "host",
    format: Literal["links", "matrix"] = "links",
) -> Response:
    """The current link cost matrix, optionally filtered, aggregated by site or dense."""
    if source is None and destination is None and level == "host" and format == "links":
        return _full_matrix_response(request, matrix)
    filters = {"source": source, "destination": destination}
    unknown = [
        f"{side}={name}" for side, name in filters.items() if name and not matrix.knows(name)
    ]
    if unknown:
        detail = f"no site, host name or address in the matrix matches {' and '.join(unknown)}"
        raise HTTPException(404, detail)
    if source is None and destination is None and level == "site":
        links = list(matrix.site_links)  # aggregated once per snapshot
        level = "host"  # nothing to aggregate again
    else:
        links = matrix.select(source, destination)
    if len(links) > INLINE_LINKS:
        return await run_in_threadpool(_selection_response, matrix, links, level, format)
    return _selection_response(matrix, links, level, format)


@router.get(
    "/links/{source}/{destination}",
    response_model=LinkDetailOut,
    responses={404: {"description": "no such link"}},
)
def link_detail(source: str, destination: str, runtime: RuntimeDep) -> Response:
    """One link's buffered series and current features, its latest throughput test and its
    current network path with its recent changes (endpoints by IP or host name)."""
    state, now = runtime.state, time.time()
    with state.frozen():  # the series, results and path of one moment
        view = state.view_link(source, destination, now)
        row = state.index.find_by_name(source, destination)
        if view is None or row is None:
            raise HTTPException(404, f"no link {source} -> {destination}")
        results = state.results(now, [row])
        hops = state.path_of(source, destination)
    detail = build_link_detail(view, runtime.cycle.predictor, results, hops)
    return Response(orjson.dumps(detail), media_type=JSON)


@router.post(
    "/admin/reload-model",
    response_model=ModelOut,
    responses={
        401: {"description": "missing or wrong bearer token"},
        404: {"description": "admin endpoints disabled (no token configured)"},
        409: {"description": "bundle refused; the previous model stays in service"},
    },
)
def reload_model(
    runtime: RuntimeDep, authorization: Annotated[str | None, Header()] = None
) -> Response:
    """Load the model bundle again (bearer token from NETTEL_ADMIN_TOKEN)."""
    require_token(runtime.admin_token, authorization)
    try:
        info = runtime.reload_model()
    except ModelBundleError as error:
        raise HTTPException(409, str(error)) from None
    return Response(orjson.dumps(vars(info)), media_type=JSON)


@router.get(
    "/admin/state",
    response_class=Response,
    responses={
        200: {
            "description": "the state snapshot: magic, format version, SHA-256, numpy .npz "
            "(what --warm-from loads), streamed with its Content-Length",
            "content": {STATE_MEDIA_TYPE: {"schema": {"type": "string", "format": "binary"}}},
        },
        401: {"description": "missing or wrong bearer token"},
        404: {"description": "admin endpoints disabled (no token configured)"},
    },
)
async def admin_state(
    runtime: RuntimeDep, authorization: Annotated[str | None, Header()] = None
) -> Response:
    """This instance's link state in the snapshot format, for a replica's --warm-from (bearer
    token from NETTEL_ADMIN_TOKEN)."""
    require_token(runtime.admin_token, authorization)
    encoded = await run_in_threadpool(encode_state_parts, runtime.state)
    headers = {"Content-Length": str(encoded.size), "Cache-Control": "no-store"}
    return StreamingResponse(encoded.chunks(), media_type=STATE_MEDIA_TYPE, headers=headers)


@router.get("/healthz")
def healthz() -> dict[str, str]:
    """The process is alive."""
    return {"status": "ok"}


@router.get("/readyz", response_model=ReadinessOut, responses={503: {"model": ReadinessOut}})
def readyz(runtime: RuntimeDep) -> Response:
    """Connected to a broker (unless --brokers none) and at least one matrix computed (503
    otherwise); what each source is doing; with --ha-group also this replica's role in the
    telemetry publisher's election."""
    ready, problems = runtime.ready()
    sources = [source.describe().to_json() for source in runtime.sources]
    readiness: dict[str, object] = {"ready": ready, "problems": problems, "sources": sources}
    if (election := runtime.election) is not None:
        readiness["ha"] = {
            "group": election.group,
            "role": election.role.value,
            "lease_shared": election.lease_shared,
        }
    body = orjson.dumps(readiness)
    return Response(body, status_code=200 if ready else 503, media_type=JSON)


@router.get("/metrics", response_class=Response)
def metrics(registry: Annotated[CollectorRegistry, Depends(get_registry)]) -> Response:
    """Prometheus text exposition."""
    return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)


def _selection_response(
    matrix: CostMatrix, links: list[LinkRecord], level: Literal["host", "site"], format: str
) -> Response:
    """A filtered matrix, aggregated by site and/or dense as asked."""
    if level == "site":
        links = aggregate_sites(links)
    document = matrix.document(links)
    if format == "matrix":
        document = {k: v for k, v in document.items() if k != "links"} | dense_matrix(links)
    return Response(orjson.dumps(document), media_type=JSON)


def _full_matrix_response(request: Request, matrix: CostMatrix) -> Response:
    """The pre-serialised snapshot: 304 on a matching ETag, gzip when the client accepts it."""
    headers = {"ETag": matrix.etag, "Vary": "Accept-Encoding", "Cache-Control": "no-cache"}
    if matrix.etag in request.headers.get("if-none-match", ""):
        return Response(status_code=304, headers=headers)
    if accepts_gzip(request.headers.get("accept-encoding", "")):
        headers["Content-Encoding"] = "gzip"
        return Response(matrix.gzip_body, media_type=JSON, headers=headers)
    return ChunkedBodyResponse(matrix.encoded, media_type=JSON, headers=headers)


class ChunkedBodyResponse(Response):
    """A body sent as its pieces, one after another, without joining them (Content-Length set)."""

    def __init__(self, body: MatrixBody, media_type: str, headers: dict[str, str]) -> None:
        self.chunks = body.chunks
        length = str(body.size)
        super().__init__(media_type=media_type, headers=headers | {"Content-Length": length})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send(
            {"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers}
        )
        for chunk in self.chunks:
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b""})
