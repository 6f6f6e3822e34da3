"""Runs the FastAPI app under uvicorn; SIGTERM and SIGINT end in a clean exit status 0."""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator

import uvicorn
from fastapi import FastAPI

from service.publish.whole_response import WholeResponseProtocol


class GracefulServer(uvicorn.Server):
    """uvicorn re-raises the stop signal after shutdown (exit 143); operators expect 0."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, self.handle_exit)
        yield


def serve_http(app: FastAPI, host: str, port: int) -> None:
    config = uvicorn.Config(
        app, host=host, port=port, log_config=None, access_log=False, http=WholeResponseProtocol
    )
    GracefulServer(config).run()
