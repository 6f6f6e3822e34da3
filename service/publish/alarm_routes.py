"""`GET /alarms` (open alarms and the recent closed ones, filtered) and `GET /alarms/stream`
(their open and close events as server-sent events), with the response schemas.

Both answer 503 when this instance raises no alarms (`--alarms false`): an empty list would
read as "no alarm" to a dashboard or a script, which it is not.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import orjson
from fastapi import APIRouter, Depends, HTTPException, Query, Request, Response
from fastapi.responses import StreamingResponse
from pydantic import AwareDatetime, BaseModel, Field

from service.alarms.book import AlarmBook
from service.alarms.records import Alarm, AlarmKind
from service.matrix.snapshot import CostMatrix
from service.publish.alarm_view import alarm_record
from service.publish.dependencies import AlarmFeedDep, served_matrix, topology_sites

JSON = "application/json"
#: Closed alarms /alarms returns at most by default (the most recently ended).
CLOSED_DEFAULT = 1000
CLOSED_MAX = 10_000


class AlarmLinkOut(BaseModel):
    source: str = Field(description="source IP")
    destination: str = Field(description="destination IP")


class SitePairOut(BaseModel):
    source: str = Field(description="source site (a host without a site stands for itself)")
    destination: str = Field(description="destination site")


class AlarmOut(BaseModel):
    id: str = Field(description="stable: the same alarm keeps it across restarts and replicas")
    kind: AlarmKind
    category: str = Field(description='pS-Dash\'s category, "Networking"')
    event: str = Field(description="pS-Dash's event name: the kind")
    subject: str = Field(description='"source host -> destination host", a host or a site')
    body: str = Field(description="one line for a human: what, where, value and threshold")
    tags: list[str] = Field(description="the sites concerned (pS-Dash's tags)")
    sites: list[str]
    hosts: list[str]
    links: list[AlarmLinkOut] = Field(description="the links concerned")
    site_pairs: list[SitePairOut] = Field(
        description="the cells of the site-level matrix its links join (as the matrix served "
        "now has them)"
    )
    started_at: float = Field(description="epoch s the condition began")
    opened_at: float = Field(
        description="epoch s it was raised, the condition having held long enough"
    )
    ended_at: float | None = Field(description="epoch s it closed; null while open")
    status: Literal["open", "closed"]
    source: dict[str, float | int | str] = Field(
        description="the evidence: values seen and the threshold crossed (pS-Dash's source)"
    )


class AlarmsOut(BaseModel):
    open: list[AlarmOut] = Field(description="open alarms, oldest opened first")
    closed: list[AlarmOut] = Field(
        description="recent closed alarms (kept a week), most recently ended last"
    )


Site = Annotated[
    str | None,
    Query(min_length=1, max_length=255, description="only alarms about this site (a tag)"),
]
Kind = Annotated[AlarmKind | None, Query(description="only alarms of this kind")]
Since = Annotated[
    AwareDatetime | None,
    Query(
        description="only alarms in effect at or after this time: open, or started or ended "
        "since (epoch seconds, or ISO 8601 with a time zone, e.g. 2024-05-01T12:00:00Z)"
    ),
]
Limit = Annotated[
    int,
    Query(ge=0, le=CLOSED_MAX, description="closed alarms at most (the most recently ended)"),
]

#: 503 with --alarms false.
DISABLED: dict[int | str, dict[str, Any]] = {
    503: {"description": "this instance raises no alarms (--alarms false)"}
}
ServedMatrix = Annotated[CostMatrix | None, Depends(served_matrix)]
TopologySites = Annotated[list[str], Depends(topology_sites)]

router = APIRouter(tags=["alarms"])


@router.get(
    "/alarms",
    response_model=AlarmsOut,
    responses={
        404: {"description": "site names no site of the topology, the matrix or an alarm"},
        **DISABLED,
    },
)
def alarms(
    feed: AlarmFeedDep,
    matrix: ServedMatrix,
    sites: TopologySites,
    site: Site = None,
    kind: Kind = None,
    since: Since = None,
    limit: Limit = CLOSED_DEFAULT,
) -> Response:
    """Open network alarms and the recent closed ones, by site, kind and time."""
    found = feed.book.query(site, kind, None if since is None else since.timestamp())
    if site is not None and not found and not _known_site(site, sites, matrix, feed.book):
        raise HTTPException(404, f"no site named {site} in the topology, the matrix or an alarm")
    closed = [alarm for alarm in found if not alarm.is_open][::-1][:limit][::-1]
    document = {
        "open": _records([alarm for alarm in found if alarm.is_open], matrix),
        "closed": _records(closed, matrix),
    }
    return Response(orjson.dumps(document), media_type=JSON)


@router.get(
    "/alarms/stream",
    response_class=StreamingResponse,
    responses={
        200: {"content": {"text/event-stream": {}}},
        503: {
            "description": "--sse-max-streams subscribers (of this stream and "
            "/costmatrix/stream) are connected already, or this instance raises no alarms"
        },
    },
)
async def alarms_stream(request: Request, feed: AlarmFeedDep) -> Response:
    """Server-sent events: `alarms` (the open ones) on connect, then `open` and `close` with
    the alarm as data."""
    client = request.client.host if request.client else "unknown"
    stream = feed.stream
    return stream.limit.respond("/alarms/stream", client, lambda: stream.events(client))


def _records(alarms: list[Alarm], matrix: CostMatrix | None) -> list[dict[str, object]]:
    return [alarm_record(alarm, matrix) for alarm in alarms]


def _known_site(site: str, sites: list[str], matrix: CostMatrix | None, book: AlarmBook) -> bool:
    """Whether `site` is a site of the topology, an end of a matrix link or an alarm's site."""
    if site in sites or (matrix is not None and matrix.knows(site)):
        return True
    return any(site in alarm.sites for alarm in book.open_alarms() + book.closed_alarms())
