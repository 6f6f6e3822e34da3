"""POST and PUT /ingest/pscheduler: pScheduler's `http` archiver sends one run record a request.

The route only decides whether to take a run in: the token (bearer, or HTTP Basic with the token
as password), the client's rate, the body's size and room in the ingest queue, in that order.
A run taken in is queued as a frame of PSCHEDULER_DESTINATION and answered 202 at once; the
frame batcher parses and applies it with the bus messages, so what becomes of it (applied,
duplicate, failed, ignored, refused) shows in the metrics, not in the response. Refusals are
counted in `nettel_rejected_total` like refused messages; 429 and 503 carry `Retry-After`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, NoReturn

from fastapi import APIRouter, Depends, Header, HTTPException, Request, Response

from service.errors import RejectReason
from service.ingest.frame_batcher import FrameBatcher
from service.ingest.http_auth import require_token
from service.ingest.pipeline import PSCHEDULER_DESTINATION, IngestPipeline
from service.ingest.rate_limit import ClientRateLimiter

#: Seconds a client is asked to wait when ingest is behind (its queue full).
QUEUE_FULL_RETRY_SECONDS = 10
RESPONSES: dict[int | str, dict[str, str]] = {
    202: {"description": "queued; applied with the next ingest batch"},
    401: {"description": "missing or wrong token (bearer, or Basic password)"},
    404: {"description": "ingest disabled (no NETTEL_INGEST_TOKEN configured)"},
    413: {"description": "body larger than the input limit"},
    429: {"description": "this client's rate exceeded; see Retry-After"},
    503: {"description": "ingest is behind and its queue full; see Retry-After"},
}


@dataclass
class PschedulerIntake:
    """What the route takes runs in with; `token` None disables the route (404)."""

    token: str | None
    batcher: FrameBatcher
    pipeline: IngestPipeline
    rate: ClientRateLimiter
    max_body_bytes: int
    max_queued_bytes: int

    def refuse(
        self, status: int, reason: RejectReason, detail: str, retry_after: float = 0
    ) -> NoReturn:
        """Count the refusal, then raise it as the HTTP answer."""
        self.pipeline.refuse(reason, detail, PSCHEDULER_DESTINATION)
        headers = {"Retry-After": str(max(1, math.ceil(retry_after)))} if retry_after else None
        raise HTTPException(status, f"{reason.value}: {detail}", headers=headers)


def build_pscheduler_router(current_intake: Callable[..., PschedulerIntake | None]) -> APIRouter:
    """PUT and POST over the intake the `current_intake` dependency gives (None: disabled)."""
    router = APIRouter()

    async def ingest_pscheduler_run(
        request: Request,
        authorization: Annotated[str | None, Header()] = None,
        content_length: Annotated[str | None, Header()] = None,
        intake: PschedulerIntake | None = Depends(current_intake),
    ) -> Response:
        """One pScheduler run record, the body pScheduler's `http` archiver sends (any type)."""
        if intake is None:
            raise HTTPException(404, "Not Found")
        client = request.client.host if request.client else "unknown"
        _authorize(intake, authorization, client)
        wait = intake.rate.admit(client)
        if wait:
            intake.refuse(429, RejectReason.RATE_LIMITED, f"client {client}", retry_after=wait)
        if content_length and content_length.isdigit():
            _check_size(intake, int(content_length))
        if intake.batcher.queued_bytes() >= intake.max_queued_bytes:
            _queue_full(intake)
        body = await _read_body(request, intake.max_body_bytes + 1)
        _check_size(intake, len(body))
        if not intake.batcher.offer(PSCHEDULER_DESTINATION, body, intake.max_queued_bytes):
            _queue_full(intake)
        return Response(b'{"status":"queued"}', status_code=202, media_type="application/json")

    for method in ("PUT", "POST"):  # one operation each, so each has its own operation id
        router.add_api_route(
            PSCHEDULER_DESTINATION,
            ingest_pscheduler_run,
            methods=[method],
            status_code=202,
            response_class=Response,
            responses=RESPONSES,
        )
    return router


def _authorize(intake: PschedulerIntake, authorization: str | None, client: str) -> None:
    try:
        require_token(intake.token, authorization, basic=True)
    except HTTPException as refusal:
        if refusal.status_code == 401:
            intake.pipeline.refuse(RejectReason.UNAUTHORIZED, client, PSCHEDULER_DESTINATION)
        raise


def _check_size(intake: PschedulerIntake, size: int) -> None:
    if size > intake.max_body_bytes:
        detail = f"body over {intake.max_body_bytes} bytes"
        intake.refuse(413, RejectReason.TOO_LARGE, detail)


def _queue_full(intake: PschedulerIntake) -> NoReturn:
    detail = "ingest is behind; its queue is full"
    intake.refuse(503, RejectReason.QUEUE_FULL, detail, retry_after=QUEUE_FULL_RETRY_SECONDS)


async def _read_body(request: Request, limit: int) -> bytes:
    """The body, read up to `limit` bytes (a longer one is cut there: too large either way)."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        chunks.append(chunk)
        size += len(chunk)
        if size >= limit:
            break
    return b"".join(chunks)
