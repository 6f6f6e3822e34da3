"""The full /costmatrix over a real uvicorn server: a body of several blocks arrives whole."""

from __future__ import annotations

import gzip
from collections.abc import Iterator

import httpx
import pytest

from service.config import Settings
from service.matrix.matrix_body import BLOCK_LINKS
from service.matrix.snapshot import CostMatrix
from service.publish.app import create_app
from service.runtime import Runtime, build_runtime
from tests.publish.served_app import serve_app
from tests.publish.support import host_link, make_matrix

LINK_COUNT = 2 * BLOCK_LINKS + 7  # three blocks, the last one short


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[str, Runtime]]:
    runtime = build_runtime(Settings(model="none", publish_telemetry=False))
    with serve_app(create_app(runtime)) as url:
        yield url, runtime


@pytest.fixture(scope="module")
def matrix(served: tuple[str, Runtime]) -> CostMatrix:
    links = [host_link(f"10.{n // 256}.{n % 256}.1", "192.0.2.1") for n in range(LINK_COUNT)]
    served[1].cycle.latest = latest = make_matrix(links)
    assert len(latest.encoded.blocks) == 3
    return latest


def test_the_blocked_body_arrives_whole_with_its_length(served, matrix) -> None:
    response = httpx.get(f"{served[0]}/costmatrix", headers={"Accept-Encoding": "identity"})
    assert response.status_code == 200
    assert response.content == matrix.body
    assert int(response.headers["content-length"]) == len(matrix.body)
    assert response.headers["etag"] == matrix.etag
    assert response.headers["content-type"] == "application/json"
    assert len(response.json()["links"]) == LINK_COUNT


def test_gzip_and_not_modified(served, matrix) -> None:
    zipped = httpx.get(f"{served[0]}/costmatrix", headers={"Accept-Encoding": "gzip"})
    assert zipped.headers["content-encoding"] == "gzip"
    assert zipped.content == matrix.body  # httpx decodes the gzip body
    assert gzip.decompress(matrix.gzip_body) == matrix.body
    again = httpx.get(f"{served[0]}/costmatrix", headers={"If-None-Match": matrix.etag})
    assert again.status_code == 304 and again.content == b""


@pytest.mark.parametrize("accept", ["gzip;q=0", "*;q=0", "identity", "br, *;q=0.5, gzip;q=0"])
def test_a_client_that_refuses_gzip_gets_the_plain_body(served, matrix, accept: str) -> None:
    response = httpx.get(f"{served[0]}/costmatrix", headers={"Accept-Encoding": accept})
    assert "content-encoding" not in response.headers
    assert response.content == matrix.body
