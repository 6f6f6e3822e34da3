"""What routes take from the running service, as FastAPI dependencies.

`create_app` puts the running service (`ServedService`, with its publishers and metrics
registry) on `app.state`; routes declare what they need with the aliases below, so a test can
replace any of them through `app.dependency_overrides` (e.g. `latest_matrix` with a hand-built
snapshot). The ones that only read an attribute are `async`, so FastAPI runs them on the event
loop rather than sending each to a worker thread; those that may build a view on a new snapshot
stay in the thread pool.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated

from fastapi import Depends, HTTPException, Request
from prometheus_client import CollectorRegistry

from service.matrix.link_record import LinkRecord
from service.matrix.snapshot import CostMatrix
from service.publish.alarm_feed import AlarmFeed
from service.publish.alto.updates import AltoUpdates
from service.publish.alto.view import AltoView
from service.publish.publishers import Publishers
from service.publish.served import ServedService
from service.publish.stream import MatrixStream


async def get_runtime(request: Request) -> ServedService:
    runtime: ServedService = request.app.state.runtime
    return runtime


RuntimeDep = Annotated[ServedService, Depends(get_runtime)]


async def get_publishers(runtime: RuntimeDep) -> Publishers:
    return runtime.publishers


async def get_registry(runtime: RuntimeDep) -> CollectorRegistry:
    return runtime.registry


PublishersDep = Annotated[Publishers, Depends(get_publishers)]


#: Before the first matrix: the first one follows the first data within about --interval (10 s).
NO_MATRIX_RETRY_AFTER = "10"


async def latest_matrix(runtime: RuntimeDep) -> CostMatrix:
    """The cost matrix being served; 503 (with Retry-After) until the first one is computed."""
    matrix = runtime.cycle.latest
    if matrix is None:
        headers = {"Retry-After": NO_MATRIX_RETRY_AFTER}
        raise HTTPException(503, "no cost matrix computed yet", headers=headers)
    return matrix


LatestMatrix = Annotated[CostMatrix, Depends(latest_matrix)]


def site_links(matrix: LatestMatrix, publishers: PublishersDep) -> Sequence[LinkRecord]:
    """The latest matrix aggregated by site pair (built once per snapshot)."""
    return publishers.site_links(matrix)


def alto_view(matrix: LatestMatrix, publishers: PublishersDep) -> AltoView:
    """The ALTO maps of the latest matrix (built once per snapshot)."""
    return publishers.alto_view(matrix)


def rse_map(publishers: PublishersDep) -> dict[str, str] | None:
    return publishers.rse_map


def get_stream(publishers: PublishersDep) -> MatrixStream:
    return publishers.stream


def get_alto_updates(publishers: PublishersDep) -> AltoUpdates:
    return publishers.alto_updates


async def alarm_feed(publishers: PublishersDep) -> AlarmFeed:
    """The alarm book and stream; 503 when this instance raises no alarms."""
    if publishers.alarms is None:
        raise HTTPException(503, "this instance raises no alarms (--alarms false)")
    return publishers.alarms


AlarmFeedDep = Annotated[AlarmFeed, Depends(alarm_feed)]


async def served_matrix(runtime: RuntimeDep) -> CostMatrix | None:
    """The cost matrix being served, None before the first one."""
    return runtime.cycle.latest


async def topology_sites(runtime: RuntimeDep) -> list[str]:
    """The sites of the topology in use."""
    return runtime.state.index.topology.sites
