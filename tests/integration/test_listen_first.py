"""A `nettel serve` on an HTTP port in use stops at once, before it connects to a broker: the
broker's address (a bare listening socket standing in for it) never sees a connection, so a
running replica with the same client id would keep its own ("client already connected")."""

from __future__ import annotations

import socket
import subprocess
import sys
import time

import pytest

from devtools.service_process import REPO_ROOT

pytestmark = pytest.mark.slow


def listening() -> socket.socket:
    server = socket.create_server(("127.0.0.1", 0))
    server.setblocking(False)
    return server


def test_a_port_in_use_stops_the_service_before_it_connects_to_the_broker() -> None:
    with listening() as broker, listening() as taken:
        brokers = f"127.0.0.1:{broker.getsockname()[1]}"
        listen = f"127.0.0.1:{taken.getsockname()[1]}"
        started = time.monotonic()
        second = subprocess.run(
            [sys.executable, "-m", "service", "serve", "--brokers", brokers],
            env={"NETTEL_LISTEN": listen, "PATH": "/usr/bin:/bin"},
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert second.returncode == 2, second.stderr
        assert time.monotonic() - started < 20
        assert f"--listen / NETTEL_LISTEN: cannot listen on {listen}" in second.stderr
        assert "Address already in use" in second.stderr
        with pytest.raises(BlockingIOError):  # a connection made would wait in the backlog
            broker.accept()
