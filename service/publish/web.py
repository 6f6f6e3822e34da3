"""The operators' live web page: `/` and its static files under `/web/` (package data); and
`/redoc`, the API reference, from fastapi-offline's copy of ReDoc."""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_redoc_html
from fastapi.responses import FileResponse, HTMLResponse
from fastapi.staticfiles import StaticFiles

WEB_DIR = Path(__file__).resolve().parents[1] / "web"
#: The page loads nothing but its own files and talks only to this service.
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:",
    "X-Content-Type-Options": "nosniff",
}


#: Where FastAPIOffline mounts its Swagger UI and ReDoc files.
API_DOCS_STATIC = "/static-offline-docs"
#: ReDoc's sidebar shows an image from its vendor's CDN; offline it only fails, online it
#: tells a third party who reads the docs: images come from this service only.
REDOC_HEADERS = {"Content-Security-Policy": "img-src 'self' data:"}


def add_redoc(app: FastAPI) -> None:
    @app.get("/redoc", include_in_schema=False)
    def redoc(request: Request) -> HTMLResponse:
        root = f"{request.scope.get('root_path', '')}"
        page = get_redoc_html(
            openapi_url=f"{root}{app.openapi_url}",
            title=f"{app.title} - ReDoc",
            redoc_js_url=f"{root}{API_DOCS_STATIC}/redoc.standalone.js",
            redoc_favicon_url=f"{root}{API_DOCS_STATIC}/favicon.png",
            with_google_fonts=False,
        )
        page.headers.update(REDOC_HEADERS)
        return page


def add_web_view(app: FastAPI) -> None:
    app.mount("/web", StaticFiles(directory=WEB_DIR), name="web")

    @app.get("/", include_in_schema=False)
    def index() -> FileResponse:
        return FileResponse(WEB_DIR / "index.html", headers=SECURITY_HEADERS)
