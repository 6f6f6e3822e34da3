"""A real Rucio server (PyPI `rucio`, its own venv) for the session, and nettel's REST API on a
real HTTP server serving hand-set site costs.

- `rucio_server` (session): one private server (`devtools.rucio_server`, ~7 s cold start); tests
  keep apart by giving their RSEs a group of their own (`rucio_setup(side, {"group": ...})`,
  attribute `nettel_test`, selected with `--rses nettel_test=GROUP`).
- `rucio_side` (session): one process in the server's venv that runs `devtools/rucio_side.py`'s
  commands against its database for `rucio_setup` and `transfer_ranking` (Rucio's core imports
  take seconds, once instead of once per command).
- `nettel_costs` (function): `nettel_costs.set({("CERN", "PIC"): 0.9, ...})` makes nettel's
  matrix hold those site pairs (one host link each); `.url` is its base URL.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from devtools.rucio_server import (
    RUCIO_SIDE,
    RucioServer,
    RucioServerError,
    install_server_venv,
    start_rucio_server,
)
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


#: Reads {"command": ..., "spec": ...} lines and answers each with one JSON line: the command's
#: output ({"output": ...}) or its traceback ({"error": ...}); nothing else goes to stdout.
SIDE_LOOP = """
import contextlib, io, json, runpy, sys, traceback
answers = sys.stdout
sys.stdout = sys.stderr
side = runpy.run_path(sys.argv[1], run_name="rucio_side")
for line in sys.stdin:
    request = json.loads(line)
    printed = io.StringIO()
    try:
        with contextlib.redirect_stdout(printed):
            side[request["command"]](*([request["spec"]] if "spec" in request else []))
        answer = {"output": json.loads(printed.getvalue())}
    except Exception:
        answer = {"error": traceback.format_exc()}
    answers.write(json.dumps(answer) + "\\n")
    answers.flush()
"""


class RucioSide:
    """`devtools/rucio_side.py`'s commands in one lasting process in the server's venv."""

    def __init__(self, server: RucioServer) -> None:
        self._log = (server.base_dir / "rucio-side.log").open("ab")
        self._process = subprocess.Popen(
            [str(server.python), "-c", SIDE_LOOP, str(RUCIO_SIDE)],
            env=server.environment(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
        )

    def run(self, command: str, spec: object = None) -> Any:
        """`rucio_side.py COMMAND` with `spec` (if any): its JSON output."""
        assert self._process.stdin is not None and self._process.stdout is not None
        request = {"command": command} | ({} if spec is None else {"spec": spec})
        self._process.stdin.write(json.dumps(request) + "\n")
        self._process.stdin.flush()
        line = self._process.stdout.readline()
        if not line:
            raise RucioServerError(f"rucio side process exited; see {self._log.name}")
        answer = json.loads(line)
        if "error" in answer:
            raise RucioServerError(f"rucio side {command} failed:\n{answer['error']}")
        return answer["output"]

    def close(self) -> None:
        if self._process.stdin is not None:
            self._process.stdin.close()
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        self._log.close()


@pytest.fixture(scope="session")
def rucio_side(rucio_server: RucioServer) -> Iterator[RucioSide]:
    side = RucioSide(rucio_server)
    try:
        yield side
    finally:
        side.close()


def rucio_setup(side: RucioSide, spec: Mapping[str, object]) -> None:
    """RSEs, distance rows and an optional queued transfer (devtools/rucio_side.py)."""
    side.run("setup", spec)


def transfer_ranking(side: RucioSide) -> dict[str, list[list[object]]]:
    """Destination RSE -> its queued transfer's [source RSE, distance], as the conveyor ranks."""
    ranking: dict[str, list[list[object]]] = side.run("ranking")
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
