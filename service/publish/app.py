"""The app factory: routes over one runtime, which built everything they read; nothing else here.

Start and stop belong to a lifespan (`service.publish.lifespan`), passed in by the caller:
`nettel serve` gives `service_lifespan`; tests give none or `publishers_lifespan`. Building a
second app over the same runtime adds nothing to it.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager

from fastapi import FastAPI
from fastapi_offline import FastAPIOffline

from service.build_info import package_version
from service.ingest.pscheduler_http import PschedulerIngest
from service.publish import alarm_routes, dependencies, rest
from service.publish.alto.router import build_alto_router
from service.publish.rucio import build_rucio_router
from service.publish.served import ServedService
from service.publish.stream import build_stream_router
from service.publish.web import add_redoc, add_web_view

Lifespan = Callable[[FastAPI], AbstractAsyncContextManager[None]]


def create_app(runtime: ServedService, lifespan: Lifespan | None = None) -> FastAPI:
    """The HTTP API over `runtime`; `lifespan` starts and stops what the caller wants run.

    `/docs` (Swagger UI) and `/redoc` load their scripts, styles and icon from the installed
    fastapi-offline package (under /static-offline-docs), never from a CDN: the pages work on a
    machine without internet access (`service.publish.web`).
    """
    app = FastAPIOffline(
        title="nettel",
        summary="Live network link cost matrix from perfSONAR delay and loss.",
        version=package_version(),
        lifespan=lifespan,
        redoc_url=None,  # add_api_docs serves it, without ReDoc's one remote image
        swagger_ui_parameters={"validatorUrl": None},  # no badge from validator.swagger.io
    )
    app.state.runtime = runtime
    app.include_router(rest.router)
    app.include_router(build_alto_router(dependencies.alto_view, dependencies.get_alto_updates))
    app.include_router(build_rucio_router(dependencies.site_links, dependencies.rse_map))
    app.include_router(build_stream_router(dependencies.get_stream))
    app.include_router(alarm_routes.router)
    app.add_middleware(PschedulerIngest, intake=runtime.intake)
    add_web_view(app)
    add_redoc(app)
    return app
