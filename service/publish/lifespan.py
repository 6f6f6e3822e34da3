"""The app's lifespans: what starts and stops with the HTTP server, and its signal handling.

`service_lifespan` (what `nettel serve` runs) starts the runtime's parts in order and stops
them in reverse (`service.runtime.running_parts`), and on SIGHUP re-reads the topology, the
token files and the model; `publishers_lifespan` (tests of the HTTP side) runs only the
publishers (SSE streams, broker telemetry) over a runtime that is otherwise not started.
Both end the SSE streams on SIGTERM/SIGINT.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from functools import partial
from types import FrameType

from fastapi import FastAPI

from service.errors import ModelBundleError
from service.publish.publishers import Publishers
from service.runtime import Runtime


@asynccontextmanager
async def publishers_lifespan(app: FastAPI) -> AsyncIterator[None]:
    publishers = _runtime(app).publishers
    publishers.start()
    _close_streams_on_exit_signals(publishers)
    try:
        yield
    finally:
        publishers.stop()


@asynccontextmanager
async def service_lifespan(app: FastAPI) -> AsyncIterator[None]:
    runtime = _runtime(app)
    runtime.on_start_failure = _end_process  # a part started after the warm start failed
    runtime.start()
    _close_streams_on_exit_signals(runtime.publishers)
    asyncio.get_running_loop().add_signal_handler(signal.SIGHUP, _reload_quietly, runtime)
    try:
        yield
    finally:
        runtime.stop()


def _end_process(error: BaseException) -> None:
    """Stop serving as a failed start would have (uvicorn's SIGTERM handling: shutdown)."""
    os.kill(os.getpid(), signal.SIGTERM)


def _runtime(app: FastAPI) -> Runtime:
    runtime: Runtime = app.state.runtime
    return runtime


def _reload_quietly(runtime: Runtime) -> None:
    """SIGHUP: re-read the topology (on its own thread), the token files and the model; a
    refused bundle, topology or token file is logged and the old one kept."""
    runtime.reload_tokens()
    if runtime.topology is not None:
        runtime.topology.request()
    try:
        runtime.reload_model()
    except ModelBundleError as error:
        logging.getLogger("nettel.model").error("model reload refused", extra={"error": str(error)})


def _close_streams_on_exit_signals(publishers: Publishers) -> None:
    """uvicorn waits for open responses before the lifespan shutdown, so SSE streams would hold
    SIGTERM/SIGINT forever: end them first, then let the server's own handler run."""
    if threading.current_thread() is not threading.main_thread():
        return  # e.g. a test client's lifespan thread; there is no server signal handling
    for signum in (signal.SIGINT, signal.SIGTERM):
        previous = signal.getsignal(signum)
        if callable(previous):
            signal.signal(signum, partial(_close_then, publishers, previous))


def _close_then(
    publishers: Publishers,
    previous: Callable[[int, FrameType | None], object],
    signum: int,
    frame: FrameType | None,
) -> None:
    publishers.close_streams()
    previous(signum, frame)
