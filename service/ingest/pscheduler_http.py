"""PUT and POST /ingest/pscheduler: pScheduler's `http` archiver sends one run record a request.

The endpoint only decides whether to take a run in: the token (bearer, or HTTP Basic with the
token as password), the client's rate, the body's size, room in the ingest queue, then whether
the body is a run record at all (400: not JSON, not an object, no `test`, `run` or `result`) and
the delay histogram's buckets (413), in that order. A run taken in is queued as a frame of
PSCHEDULER_DESTINATION with the client's address (the new links it brings are charged to that
client), delivered to the ingest entry without waiting (`service.ingest.entry.LiveBatch`,
`wait=False`) and answered 202 at once; the frame batcher parses and applies it with the bus
messages, so what becomes of a run record (applied, duplicate, failed, ignored, refused) shows
in the metrics, not in the response. Refusals are counted in `nettel_rejected_total` like
refused messages; 429 and 503 carry `Retry-After`, 400 and 413 do not (the same run would be
refused again). The intake is a source (`service.ingest.source`): it takes runs between `start`
and `stop` only (503 otherwise, uncounted).

It is an ASGI middleware in front of the FastAPI app rather than a route of it: a toolkit mesh
posts thousands of runs a second, and FastAPI's routing, dependencies and response handling cost
several times what taking a run in does. Without an ingest token it is not there (404).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import orjson
from starlette.types import ASGIApp, Receive, Scope, Send

from service.errors import RejectReason
from service.ingest.entry import IngestEntry, LiveBatch
from service.ingest.http_auth import carries_token
from service.ingest.pipeline import PSCHEDULER_DESTINATION, PostedBy
from service.ingest.rate_limit import ClientRateLimiter
from service.ingest.source import SourceDescription
from service.parse.pscheduler import screen_run_record

#: Seconds a client is asked to wait when ingest is behind (its queue full).
QUEUE_FULL_RETRY_SECONDS = 10
METHODS = ("PUT", "POST")


@dataclass(frozen=True)
class Answer:
    """An HTTP answer: status, JSON body and any further headers."""

    status: int
    body: bytes
    headers: tuple[tuple[bytes, bytes], ...] = ()


QUEUED = Answer(202, b'{"status":"queued"}')
UNAUTHORIZED = Answer(
    401,
    b'{"detail":"bearer token required"}',
    ((b"www-authenticate", b'Bearer, Basic realm="nettel"'),),
)
NOT_ALLOWED = Answer(405, b'{"detail":"Method Not Allowed"}', ((b"allow", b"PUT, POST"),))
INCOMPLETE = Answer(400, b'{"detail":"the body ended early"}')
#: Before the service takes input, and while it stops (not a refusal of the run: not counted).
NOT_ACCEPTING = Answer(
    503,
    b'{"detail":"not taking runs now: the service is starting or stopping"}',
    ((b"retry-after", str(QUEUE_FULL_RETRY_SECONDS).encode()),),
)


@dataclass
class PschedulerIntake:
    """The source behind the endpoint: what it takes runs in with; `token` None disables it.
    Runs are taken between `start` and `stop` (503 with Retry-After otherwise)."""

    token: str | None
    entry: IngestEntry
    rate: ClientRateLimiter
    max_body_bytes: int
    max_queued_bytes: int
    max_buckets: int
    name: str = "pscheduler-http"
    accepting: bool = False

    def start(self) -> None:
        self.accepting = True

    def stop(self) -> None:
        self.accepting = False

    def describe(self) -> SourceDescription:
        return SourceDescription(
            kind="pscheduler-http",
            reads=(PSCHEDULER_DESTINATION,),
            running=self.accepting and self.token is not None,
            detail={"enabled": self.token is not None, "queued_bytes": self.entry.queued_bytes()},
        )

    def admit(self, client: str, authorization: str | None, length: int | None) -> Answer | None:
        """Why a request is refused before its body is read; None: read it."""
        if not self.accepting:
            return NOT_ACCEPTING
        if self.token is None or not carries_token(self.token, authorization, basic=True):
            return self._refuse(UNAUTHORIZED, RejectReason.UNAUTHORIZED, "no valid token", client)
        wait = self.rate.admit(client)
        if wait:
            return self._refusal(429, RejectReason.RATE_LIMITED, f"client {client}", client, wait)
        if length is not None and length > self.max_body_bytes:
            return self._too_large(client)
        if self.entry.queued_bytes() >= self.max_queued_bytes:
            return self._queue_full(client)
        return None

    def take(self, body: bytes, client: str) -> Answer:
        """Queue the run; 202, or why not."""
        if len(body) > self.max_body_bytes:
            return self._too_large(client)
        refusal = screen_run_record(body, self.max_buckets)
        if refusal is not None:
            status = 413 if refusal.reason is RejectReason.TOO_LARGE else 400
            return self._refusal(status, refusal.reason, refusal.detail, client)
        frame = (PSCHEDULER_DESTINATION, body, PostedBy(client))
        if not self.entry.deliver(LiveBatch([frame], False, self.max_queued_bytes)):
            return self._queue_full(client)
        return QUEUED

    def _too_large(self, client: str) -> Answer:
        detail = f"body over {self.max_body_bytes} bytes"
        return self._refusal(413, RejectReason.TOO_LARGE, detail, client)

    def _queue_full(self, client: str) -> Answer:
        detail = "ingest is behind; its queue is full"
        return self._refusal(503, RejectReason.QUEUE_FULL, detail, client, QUEUE_FULL_RETRY_SECONDS)

    def _refusal(
        self, status: int, reason: RejectReason, detail: str, client: str, retry: float = 0
    ) -> Answer:
        body = orjson.dumps({"detail": f"{reason.value}: {detail}"})
        headers = ((b"retry-after", str(max(1, math.ceil(retry))).encode()),) if retry else ()
        return self._refuse(Answer(status, body, headers), reason, detail, client)

    def _refuse(self, answer: Answer, reason: RejectReason, detail: str, client: str) -> Answer:
        """Count the refusal in `nettel_rejected_total` (and the rate-limited log, which names
        the client: the connection's peer, or a trusted proxy's X-Forwarded-For)."""
        self.entry.pipeline.refuse(reason, detail, PSCHEDULER_DESTINATION, client)
        return answer


class PschedulerIngest:
    """ASGI middleware: answers requests to /ingest/pscheduler, passes every other one on."""

    def __init__(self, app: ASGIApp, intake: PschedulerIntake | None) -> None:
        self.app = app
        self.intake = intake if intake is not None and intake.token is not None else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            self.intake is None
            or scope["type"] != "http"
            or scope["path"] != PSCHEDULER_DESTINATION
        ):
            await self.app(scope, receive, send)
            return
        answer = await self._answer(self.intake, scope, receive)
        length = str(len(answer.body)).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", length)]
        headers += answer.headers
        await send({"type": "http.response.start", "status": answer.status, "headers": headers})
        await send({"type": "http.response.body", "body": answer.body})

    async def _answer(self, intake: PschedulerIntake, scope: Scope, receive: Receive) -> Answer:
        if scope["method"] not in METHODS:
            return NOT_ALLOWED
        authorization, length = _request_headers(scope)
        client = scope["client"][0] if scope.get("client") else "unknown"
        refusal = intake.admit(client, authorization, length)
        if refusal is not None:
            return refusal
        body = await _read_body(receive, intake.max_body_bytes + 1)
        return INCOMPLETE if body is None else intake.take(body, client)


def _request_headers(scope: Scope) -> tuple[str | None, int | None]:
    """`Authorization` and `Content-Length` (None where absent or not a length)."""
    authorization = length = None
    for name, value in scope["headers"]:
        if name == b"authorization":
            authorization = value.decode("latin-1")
        elif name == b"content-length" and value.isdigit():
            length = int(value)
    return authorization, length


async def _read_body(receive: Receive, limit: int) -> bytes | None:
    """The body, read up to `limit` bytes (a longer one is cut there: too large either way);
    None when the client went away before sending all of it."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunk = message.get("body", b"")
        chunks.append(chunk)
        size += len(chunk)
        if size >= limit or not message.get("more_body", False):
            return b"".join(chunks)
