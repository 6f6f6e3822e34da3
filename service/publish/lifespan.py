"""The app's lifespans: what starts and stops with the HTTP server, and its signal handling.

`service_lifespan` (what `nettel serve` runs) starts the service's parts in order and stops them
in reverse, and on SIGHUP has it re-read what can change (`ServedService.reload`: the topology,
the token files and the model); `publishers_lifespan` (tests of the HTTP side) runs only the
publishers (SSE streams, broker telemetry) over a runtime that is otherwise not started. Both
end the SSE streams on SIGTERM/SIGINT.
"""

from __future__ import annotations

import asyncio
import os
import signal
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from functools import partial
from types import FrameType

from fastapi import FastAPI

from service.publish.publishers import Publishers
from service.publish.served import ServedService


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
    asyncio.get_running_loop().add_signal_handler(signal.SIGHUP, runtime.reload)
    try:
        yield
    finally:
        runtime.stop()


def _end_process(error: BaseException) -> None:
    """Stop serving as a failed start would have (uvicorn's SIGTERM handling: shutdown)."""
    os.kill(os.getpid(), signal.SIGTERM)


def _runtime(app: FastAPI) -> ServedService:
    runtime: ServedService = app.state.runtime
    return runtime


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
