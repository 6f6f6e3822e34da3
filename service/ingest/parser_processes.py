"""Parses frame batches in child processes, off the GIL of the process that receives and serves.

stomp.py's receive loop alone keeps a core busy at ~20,000 frames/s. Parsing JSON and histogram
statistics in the same process would take the GIL from it, so a batch is split across `count`
spawned child processes (spawn, never fork: the parent has threads) that run the same pure
`parse_messages` and answer in the compact tuple form of `parse_codec`. The caller blocks
without the GIL while they work. A child that dies, or does not answer within `timeout`
seconds, is replaced and the batch is parsed in-process, so no frame is lost to a parser failure.

Children ignore SIGTERM and SIGINT (a stop sent to the whole process group is the service's to
handle: it still drains its queue through them) and end when their pipe closes: on `stop`, when
the owner is garbage-collected, and at interpreter exit, before multiprocessing's own exit hook
(which would wait for daemon children it cannot terminate with SIGTERM).
"""

from __future__ import annotations

import logging
import multiprocessing
import signal
import threading
import weakref
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess

from service.memory import relax_garbage_collection
from service.parse.limits import InputLimits
from service.parse.parse_codec import (
    WireResult,
    decode_request,
    decode_results,
    encode_request,
    encode_results,
)
from service.parse.perfsonar import ParseInput, ParseResult, parse_messages

#: Batches smaller than this per process are not worth splitting.
MIN_SPLIT = 64


class ParserProcesses:
    """`parse(frames)` has the result of `parse_messages(frames, limits)`; thread-safe."""

    def __init__(
        self,
        count: int,
        limits: InputLimits = InputLimits(),
        timeout: float = 30.0,
        log: logging.Logger | None = None,
    ) -> None:
        if count < 1:
            raise ValueError("count must be at least 1")
        self._limits = limits
        self._timeout = timeout
        self._log = log or logging.getLogger("nettel.ingest")
        self._context = multiprocessing.get_context("spawn")
        self._lock = threading.Lock()
        self._children: list[tuple[BaseProcess, Connection]] = [self._spawn() for _ in range(count)]
        self._finalizer = weakref.finalize(self, _end_children, self._children, self._lock)

    @property
    def pids(self) -> list[int]:
        return [process.pid for process, _ in self._children if process.pid is not None]

    def parse(self, frames: ParseInput) -> list[ParseResult]:
        if not frames:
            return []
        with self._lock:
            if not self._children:  # stopped
                return parse_messages(frames, self._limits)
            chunks = _split(frames, len(self._children))
            try:
                connections = [connection for _, connection in self._children[: len(chunks)]]
                for connection, chunk in zip(connections, chunks, strict=True):
                    connection.send(encode_request(chunk))
                wire = [self._answer(connection) for connection in connections]
            except (EOFError, OSError, TimeoutError) as error:
                self._log.error(
                    "a parser process failed; restarting them, parsing in-process",
                    extra={"error": type(error).__name__},
                )
                self._restart()
                return parse_messages(frames, self._limits)
        return [result for part in wire for result in decode_results(part)]

    def stop(self) -> None:
        self._finalizer()

    def _answer(self, connection: Connection) -> list[WireResult]:
        if not connection.poll(self._timeout):
            raise TimeoutError
        answer: list[WireResult] = connection.recv()
        return answer

    def _restart(self) -> None:
        """Replace every child: a half-answered exchange leaves the others' pipes out of step."""
        count = len(self._children)
        for process, connection in self._children:
            connection.close()
            process.kill()
            process.join()
        self._children[:] = [self._spawn() for _ in range(count)]

    def _spawn(self) -> tuple[BaseProcess, Connection]:
        ours, theirs = self._context.Pipe()
        process = self._context.Process(
            target=_serve, args=(theirs, self._limits), name="nettel-parser", daemon=True
        )
        process.start()
        theirs.close()
        return process, ours


def _end_children(children: list[tuple[BaseProcess, Connection]], lock: threading.Lock) -> None:
    """Close every child's pipe (it ends on EOF); kill one that has not ended after 2 s."""
    with lock:
        for _, connection in children:
            connection.close()
        for process, _ in children:
            process.join(2.0)
            if process.is_alive():
                process.kill()
                process.join()
        children.clear()


def _split(frames: ParseInput, parts: int) -> list[ParseInput]:
    """At most `parts` contiguous chunks of at least MIN_SPLIT frames (one chunk if fewer)."""
    parts = max(1, min(parts, len(frames) // MIN_SPLIT))
    size = -(-len(frames) // parts)
    return [frames[start : start + size] for start in range(0, len(frames), size)]


def _serve(connection: Connection, limits: InputLimits) -> None:
    """Child main loop: parse each request until the parent closes the pipe."""
    for signum in (signal.SIGINT, signal.SIGTERM):  # the parent's to handle (Ctrl-C, a stop
        signal.signal(signum, signal.SIG_IGN)  # sent to the whole group); it closes our pipe
    relax_garbage_collection()
    while True:
        try:
            request = connection.recv()
        except EOFError:
            return
        connection.send(encode_results(parse_messages(decode_request(request), limits)))
