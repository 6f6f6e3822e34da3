"""/docs (Swagger UI) and /redoc render the API's operations in headless Chromium with no route
to the internet: every request goes to the service itself (a black-hole proxy and host
resolver stand in for a machine without internet; FastAPI's default pages load their scripts
from a CDN and stay blank there)."""

from __future__ import annotations

import pytest

from tests.e2e.test_web_view import CHROMIUM, CHROMIUM_ARGS, sync_api

pytestmark = [pytest.mark.slow]
INGEST_TOKEN = "docs-offline-token"
#: Everything but loopback goes to a closed port, and no name resolves.
OFFLINE_ARGS = [
    "--proxy-server=http://127.0.0.1:9",
    "--proxy-bypass-list=127.0.0.1",
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
]
#: Operations Swagger UI must show (method, path), and ReDoc (by their summaries).
OPERATIONS = [("get", "/costmatrix"), ("get", "/links/{source}/{destination}"), ("get", "/alto")]
SUMMARIES = ["Costmatrix", "Link Detail", "Readyz"]


def test_swagger_ui_and_redoc_render_without_internet(nettel_service):
    service = nettel_service("none", "--model", "none", env={"NETTEL_INGEST_TOKEN": INGEST_TOKEN})
    requested: list[str] = []
    failed: list[tuple[str, str | None]] = []
    errors: list[str] = []
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(CHROMIUM), args=CHROMIUM_ARGS + OFFLINE_ARGS
        )
        page = browser.new_page()
        page.on("request", lambda request: requested.append(request.url))
        page.on("requestfailed", lambda request: failed.append((request.url, request.failure)))
        page.on("pageerror", lambda error: errors.append(str(error)))

        page.goto(f"{service.url}/docs")
        expect = sync_api.expect
        expect(page.locator(".swagger-ui .info .title")).to_contain_text("nettel", timeout=20_000)
        for method, path in OPERATIONS:
            block = page.locator(f".opblock-{method}", has=page.get_by_text(path, exact=True))
            expect(block.first).to_be_visible()
        assert page.locator(".opblock").count() >= 15

        page.goto(f"{service.url}/redoc")
        expect(page.get_by_role("heading", name="nettel (", level=1)).to_be_visible(timeout=20_000)
        for summary in SUMMARIES:
            expect(page.locator("h2", has_text=summary).first).to_be_attached()
            expect(page.get_by_role("menuitem", name=summary, exact=True)).to_be_visible()
        get_costmatrix = page.locator("span.http-verb.get + span", has_text="/costmatrix")
        expect(get_costmatrix.first).to_be_attached()
        browser.close()
    assert errors == []
    # ReDoc's vendor logo is refused by the page's own Content-Security-Policy, in the browser.
    blocked = {url for url, failure in failed if failure == "csp"}
    assert blocked <= {"https://cdn.redoc.ly/redoc/logo-mini.svg"}
    assert [(url, failure) for url, failure in failed if failure != "csp"] == []
    local = (service.url, f"blob:{service.url}", "data:")
    assert [url for url in requested if not url.startswith(local) and url not in blocked] == []
    assert any(url.endswith("/static-offline-docs/swagger-ui-bundle.js") for url in requested)
    assert any(url.endswith("/static-offline-docs/redoc.standalone.js") for url in requested)
