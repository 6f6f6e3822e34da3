"""A real Rucio server (PyPI `rucio`, its own venv) for the session, and nettel's REST API on a
real HTTP server serving hand-set site costs.

- `rucio_server` (session): one private server (`devtools.rucio_server`, ~7 s cold start); tests
  keep apart by giving their RSEs a group of their own (`rucio_setup(group, ...)`, attribute
  `nettel_test`, selected with `--rses nettel_test=GROUP`).
- `nettel_costs` (function): `nettel_costs.set({("CERN", "PIC"): 0.9, ...})` makes nettel's
  matrix hold those site pairs (one host link each); `.url` is its base URL.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import pytest

from devtools.rucio_server import RucioServer, install_server_venv, start_rucio_server
from service.config import Settings
from service.publish.app import create_app
from service.runtime import Runtime, build_runtime
from tests.publish.served_app import serve_app
from tests.publish.support import host_link, make_matrix


@pytest.fixture(scope="session")
def rucio_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RucioServer]:
    install_server_venv()  # done by scripts/test.sh; idempotent
    server = start_rucio_server(tmp_path_factory.mktemp("rucio"))
    try:
        yield server
    finally:
        server.stop()


def rucio_setup(server: RucioServer, spec: Mapping[str, object]) -> None:
    """RSEs, distance rows and an optional queued transfer (devtools/rucio_side.py)."""
    server.run_script("setup", spec)


def transfer_ranking(server: RucioServer) -> dict[str, list[list[object]]]:
    """Destination RSE -> its queued transfer's [source RSE, distance], as the conveyor ranks."""
    ranking: dict[str, list[list[object]]] = server.run_script("ranking")
    return ranking


class NettelCosts:
    """nettel's real app on a real HTTP server; its matrix is set by hand."""

    def __init__(self, runtime: Runtime, url: str) -> None:
        self.runtime = runtime
        self.url = url

    def set(self, costs: Mapping[tuple[str, str], float]) -> None:
        links = [
            host_link(
                f"192.0.2.{i}", f"198.51.100.{i}", source_site=src, destination_site=dst, cost=cost
            )
            for i, ((src, dst), cost) in enumerate(sorted(costs.items()), start=1)
        ]
        self.runtime.cycle.latest = make_matrix(links)


@pytest.fixture
def nettel_costs() -> Iterator[NettelCosts]:
    runtime = build_runtime(Settings(model="none", publish_telemetry=False))
    with serve_app(create_app(runtime)) as url:
        yield NettelCosts(runtime, url)
