"""ALTO's HTTP resources (RFC 7285): directory, network map, cost maps (GET, and POST for a
filtered one) and the endpoint cost service (POST); RFC 8895's update stream service and the
stream control of its streams (`updates`).

Replies carry their media type exactly as the RFC writes it, with no parameters (deployed
clients compare the whole header). A POST body must come as the resource's media type (415
otherwise) and within MAX_REQUEST_BYTES (413); an `Accept` header, when there is one, must admit
the reply's media type (406). Every refusal is an ALTO error document (`protocol`).
FastAPI sees none of this (the bodies are read raw, the path's metric from the request), so the
OpenAPI document gets it from `openapi`: request bodies, the metric, every status.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

import orjson
from fastapi import APIRouter, Depends, HTTPException, Request, Response
from fastapi.responses import StreamingResponse
from fastapi.routing import APIRoute
from starlette.types import Receive

from service.publish.alto.openapi import (
    METRIC_PARAMETER,
    STREAM_CONTROL_RESPONSES,
    UPDATE_STREAM_RESPONSES,
    get_responses,
    post_responses,
    request_body_schema,
)
from service.publish.alto.protocol import (
    COST_MAP_FILTER_MEDIA,
    COST_MAP_MEDIA,
    DIRECTORY_MEDIA,
    E_INVALID_FIELD_VALUE,
    E_SYNTAX,
    ENDPOINT_COST_MEDIA,
    ENDPOINT_COST_PARAMS_MEDIA,
    ERROR_MEDIA,
    EVENT_STREAM_MEDIA,
    NETWORK_MAP_MEDIA,
    UPDATE_STREAM_PARAMS_MEDIA,
    AltoError,
    accepts,
    bare_media_type,
)
from service.publish.alto.request_bodies import (
    parse_endpoint_cost,
    parse_filtered_cost_map,
    parse_update_stream,
)
from service.publish.alto.updates import AltoUpdates, TooManyStreams, UpdateStream
from service.publish.alto.view import METRICS, AltoView, CostMetric, directory_document
from service.publish.stream import SSE_HEADERS

MAX_REQUEST_BYTES = 1 << 20


class AltoRoute(APIRoute):
    """A route whose AltoError, raised by the handler or a dependency, answers as ALTO error."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def handle(request: Request) -> Response:
            try:
                return await handler(request)
            except AltoError as error:
                return alto_response(error.document(), ERROR_MEDIA, error.status)

        return handle


class UpdateStreamResponse(StreamingResponse):
    """An update stream's reply: the stream closes to control the moment the client's disconnect
    arrives, before its byte stream unwinds, so a control request sent after the client closed
    the stream is 404, never a 204 for a stream nobody reads."""

    def __init__(
        self, updates: AltoUpdates, stream: UpdateStream, control_uri: str, headers: dict[str, str]
    ) -> None:
        super().__init__(updates.events(stream, control_uri), headers=headers)
        self._updates, self._stream = updates, stream

    async def listen_for_disconnect(self, receive: Receive) -> None:
        await super().listen_for_disconnect(receive)
        self._updates.end(self._stream)


def alto_response(document: dict[str, Any], media_type: str, status_code: int = 200) -> Response:
    return Response(orjson.dumps(document), status_code=status_code, media_type=media_type)


def replying(media_type: str) -> Callable[[Request], Awaitable[None]]:
    """A dependency refusing (406) a request whose `Accept` rules out `media_type`."""

    async def check(request: Request) -> None:  # async: no worker thread for a header check
        accept = request.headers.get("accept")
        if not accepts(accept, media_type):
            raise AltoError(E_INVALID_FIELD_VALUE, "Accept", accept, status=406)

    return check


def request_body(media_type: str) -> Callable[[Request], Awaitable[bytes]]:
    """A dependency giving the body of a request sent as `media_type` (else 415; 413 if big)."""

    async def body(request: Request) -> bytes:
        content_type = request.headers.get("content-type")
        if bare_media_type(content_type) != media_type:
            raise AltoError(E_INVALID_FIELD_VALUE, "Content-Type", content_type, status=415)
        data = bytearray()
        async for chunk in request.stream():
            data += chunk
            if len(data) > MAX_REQUEST_BYTES:  # read no further
                too_large = f"request body over {MAX_REQUEST_BYTES} bytes"
                raise AltoError(E_SYNTAX, status=413, syntax_error=too_large)
        return bytes(data)

    return body


async def offered_metric(request: Request) -> CostMetric:
    """The cost map's metric from the path; one nettel does not offer is 404. Read from the
    request, not a parameter, so FastAPI documents no 422 that cannot happen (`openapi`
    documents the parameter)."""
    metric: str = request.path_params["metric"]
    if metric not in METRICS:
        raise AltoError(E_INVALID_FIELD_VALUE, "cost-metric", metric, status=404)
    return METRICS[metric]


def _client(request: Request) -> str | None:
    return request.client.host if request.client else None


def build_alto_router(
    current_view: Callable[..., AltoView], get_updates: Callable[..., AltoUpdates]
) -> APIRouter:
    """The ALTO resources under `/alto`; `current_view` is the dependency giving the latest
    matrix's view (it may raise 503), `get_updates` the one giving the update stream service."""
    router = APIRouter(prefix="/alto", tags=["ALTO"], route_class=AltoRoute)
    latest = Depends(current_view)
    update_params = Depends(request_body(UPDATE_STREAM_PARAMS_MEDIA))

    @router.get(
        "",
        response_class=Response,
        dependencies=[Depends(replying(DIRECTORY_MEDIA))],
        responses=get_responses(DIRECTORY_MEDIA, matrix=False),
    )
    def directory(request: Request) -> Response:
        """ALTO information resource directory (RFC 7285 section 9)."""
        return alto_response(directory_document(str(request.base_url)), DIRECTORY_MEDIA)

    @router.get(
        "/networkmap",
        response_class=Response,
        dependencies=[Depends(replying(NETWORK_MAP_MEDIA))],
        responses=get_responses(NETWORK_MAP_MEDIA),
    )
    def network_map(view: AltoView = latest) -> Response:
        """ALTO network map: one PID per site with its prefixes (section 11.2.1)."""
        return alto_response(view.network_map_document(), NETWORK_MAP_MEDIA)

    cost_map_media = [Depends(replying(COST_MAP_MEDIA))]

    @router.get(
        "/costmap/{metric}",
        response_class=Response,
        dependencies=cost_map_media,
        responses=get_responses(COST_MAP_MEDIA, metric=True),
        openapi_extra=METRIC_PARAMETER,
    )
    def cost_map(metric: CostMetric = Depends(offered_metric), view: AltoView = latest) -> Response:
        """ALTO numerical cost map of one metric of the directory (11.2.3)."""
        return alto_response(view.cost_map_document(metric), COST_MAP_MEDIA)

    @router.post(
        "/costmap/{metric}",
        response_class=Response,
        dependencies=cost_map_media,
        responses=post_responses(COST_MAP_MEDIA, metric=True),
        openapi_extra=METRIC_PARAMETER | request_body_schema(COST_MAP_FILTER_MEDIA),
    )
    def filtered_cost_map(
        metric: CostMetric = Depends(offered_metric),
        body: bytes = Depends(request_body(COST_MAP_FILTER_MEDIA)),
        view: AltoView = latest,
    ) -> Response:
        """ALTO filtered cost map: `application/alto-costmapfilter+json` (section 11.3.2)."""
        query = parse_filtered_cost_map(body, [metric.name])
        document = view.cost_map_document(metric, query.srcs, query.dsts)
        return alto_response(document, COST_MAP_MEDIA)

    @router.post(
        "/endpointcost",
        response_class=Response,
        dependencies=[Depends(replying(ENDPOINT_COST_MEDIA))],
        responses=post_responses(ENDPOINT_COST_MEDIA),
        openapi_extra=request_body_schema(ENDPOINT_COST_PARAMS_MEDIA),
    )
    def endpoint_cost(
        request: Request,
        body: bytes = Depends(request_body(ENDPOINT_COST_PARAMS_MEDIA)),
        view: AltoView = latest,
    ) -> Response:
        """ALTO endpoint cost service: `application/alto-endpointcostparams+json` (11.5)."""
        query = parse_endpoint_cost(body, METRICS, _client(request))
        document = view.endpoint_cost_document(METRICS[query.metric], query.srcs, query.dsts)
        return alto_response(document, ENDPOINT_COST_MEDIA)

    @router.post(
        "/updates",
        response_class=StreamingResponse,
        dependencies=[Depends(replying(EVENT_STREAM_MEDIA))],
        responses=UPDATE_STREAM_RESPONSES,
        openapi_extra=request_body_schema(UPDATE_STREAM_PARAMS_MEDIA),
    )
    def update_stream(
        request: Request,
        body: bytes = update_params,
        updates: AltoUpdates = Depends(get_updates),
    ) -> UpdateStreamResponse:
        """ALTO update stream service (RFC 8895): `text/event-stream` of the substreams asked
        for, each in full then as JSON merge patches; first event: the stream's control URI."""
        try:
            stream = updates.open(parse_update_stream(body), _client(request))
        except TooManyStreams:
            refused = "too many update streams open, or stopping"
            raise HTTPException(503, refused, {"Retry-After": "60"}) from None
        control_uri = f"{request.base_url}alto/updates/streams/{stream.id}"
        headers = SSE_HEADERS | {"Content-Type": EVENT_STREAM_MEDIA}  # no charset parameter
        return UpdateStreamResponse(updates, stream, control_uri, headers)

    @router.post(
        "/updates/streams/{stream_id}",
        status_code=204,
        response_class=Response,
        responses=STREAM_CONTROL_RESPONSES,
        openapi_extra=request_body_schema(UPDATE_STREAM_PARAMS_MEDIA),
    )
    def stream_control(
        stream_id: str,
        request: Request,
        body: bytes = update_params,
        updates: AltoUpdates = Depends(get_updates),
    ) -> Response:
        """ALTO stream control (RFC 8895 section 7): add or remove substreams of an open update
        stream; 204, the stream then announces them (`started`, `stopped`)."""
        updates.control(stream_id, parse_update_stream(body), _client(request))
        return Response(status_code=204)

    return router
