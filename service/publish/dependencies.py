"""What routes take from the running service, as FastAPI dependencies.

`create_app` puts the runtime, the publishers and the metrics registry on `app.state`; routes
declare what they need with the aliases below, so a test can replace any of them through
`app.dependency_overrides` (e.g. `latest_matrix` with a hand-built snapshot). The ones that
only read an attribute are `async`, so FastAPI runs them on the event loop rather than sending
each to a worker thread; those that may build a view on a new snapshot stay in the thread pool.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated

from fastapi import Depends, HTTPException, Request
from prometheus_client import CollectorRegistry

from service.matrix.link_record import LinkRecord
from service.matrix.snapshot import CostMatrix
from service.publish.alto.updates import AltoUpdates
from service.publish.alto.view import AltoView
from service.publish.publishers import Ecosystem
from service.publish.stream import MatrixStream
from service.runtime import Runtime


async def get_runtime(request: Request) -> Runtime:
    runtime: Runtime = request.app.state.runtime
    return runtime


async def get_ecosystem(request: Request) -> Ecosystem:
    ecosystem: Ecosystem = request.app.state.ecosystem
    return ecosystem


async def get_registry(request: Request) -> CollectorRegistry:
    registry: CollectorRegistry = request.app.state.registry
    return registry


RuntimeDep = Annotated[Runtime, Depends(get_runtime)]
EcosystemDep = Annotated[Ecosystem, Depends(get_ecosystem)]


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


def site_links(matrix: LatestMatrix, ecosystem: EcosystemDep) -> Sequence[LinkRecord]:
    """The latest matrix aggregated by site pair (built once per snapshot)."""
    return ecosystem.site_links(matrix)


def alto_view(matrix: LatestMatrix, ecosystem: EcosystemDep) -> AltoView:
    """The ALTO maps of the latest matrix (built once per snapshot)."""
    return ecosystem.alto_view(matrix)


def rse_map(ecosystem: EcosystemDep) -> dict[str, str] | None:
    return ecosystem.rse_map


def get_stream(ecosystem: EcosystemDep) -> MatrixStream:
    return ecosystem.stream


def get_alto_updates(ecosystem: EcosystemDep) -> AltoUpdates:
    return ecosystem.alto_updates
