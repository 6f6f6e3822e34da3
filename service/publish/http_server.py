"""Runs the FastAPI app under uvicorn; SIGTERM and SIGINT end in a clean exit status 0.

`bind_listener` takes the HTTP port before anything else starts (the broker connection, the
backfill), so a second `nettel serve` on a port in use stops at once, before its broker sees a
second connection with the same client-id.
"""

from __future__ import annotations

import contextlib
import signal
import socket
from collections.abc import Iterator

import uvicorn
from fastapi import FastAPI

from service.config import setting_name
from service.errors import ConfigError
from service.publish.whole_response import WholeResponseProtocol


class GracefulServer(uvicorn.Server):
    """uvicorn re-raises the stop signal after shutdown (exit 143); operators expect 0."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, self.handle_exit)
        yield


def bind_listener(host: str, port: int) -> socket.socket:
    """A socket bound to host:port as uvicorn binds one (listening starts with the server);
    ConfigError naming --listen when the address is in use or not this machine's."""
    listener = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind((host, port))
    except OSError as error:
        listener.close()
        reason = error.strerror or str(error)
        message = f"{setting_name('listen')}: cannot listen on {host}:{port}: {reason}"
        raise ConfigError(message) from None
    return listener


def serve_http(app: FastAPI, listener: socket.socket) -> None:
    """Serve `app` on the bound `listener` until SIGTERM or SIGINT."""
    host, port = listener.getsockname()[:2]
    config = uvicorn.Config(
        app, host=host, port=port, log_config=None, access_log=False, http=WholeResponseProtocol
    )
    GracefulServer(config).run(sockets=[listener])
