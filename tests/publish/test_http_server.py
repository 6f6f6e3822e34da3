"""SIGTERM ends the HTTP server with exit status 0: the canary for uvicorn's pinned internals.

`GracefulServer` overrides uvicorn's `Server.capture_signals`, which uvicorn 0.54 enters around
serving and which re-raises the stop signal after shutdown. Should uvicorn stop calling it, the
override would be skipped and a stopped `nettel serve` would exit 143 again.
"""

from __future__ import annotations

import signal
import subprocess
import sys

import httpx

from devtools.activemq import free_port
from devtools.waiting import wait_for

#: argv[1]: "graceful" (nettel's server) or "plain" (uvicorn's own); argv[2]: the port.
SERVER = """
import sys
import uvicorn
from fastapi import FastAPI
from service.publish.http_server import bind_listener, serve_http

app, port = FastAPI(), int(sys.argv[2])
if sys.argv[1] == "graceful":
    serve_http(app, bind_listener("127.0.0.1", port))
else:
    uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_config=None)).run()
"""


def exit_status_after_sigterm(kind: str) -> int:
    port = free_port()
    server = subprocess.Popen([sys.executable, "-c", SERVER, kind, str(port)])
    try:

        def answering() -> bool:
            assert server.poll() is None, f"the {kind} server exited before answering"
            try:
                httpx.get(f"http://127.0.0.1:{port}/", timeout=1.0)
            except httpx.HTTPError:
                return False
            return True

        wait_for(answering, 30, 0.1, what=f"the {kind} server answering")
        server.send_signal(signal.SIGTERM)
        return server.wait(15)
    finally:
        server.kill()
        server.wait()


def test_sigterm_exits_zero() -> None:
    assert exit_status_after_sigterm("graceful") == 0


def test_plain_uvicorn_reraises_sigterm() -> None:
    """Why the override exists; if uvicorn exits 0 by itself, GracefulServer can go."""
    assert exit_status_after_sigterm("plain") == -signal.SIGTERM
