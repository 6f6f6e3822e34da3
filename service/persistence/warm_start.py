"""Warm start: a starting replica takes the link state of a peer instead of filling its window
from live data for 32 minutes.

The peer is a running `nettel serve` (its `GET /admin/state`: the snapshot format, streamed,
behind the admin token) or a shared directory of replica state dirs, each written by one replica
(`<dir>/<replica>/link-state.snapshot`, replaced atomically, so a reader sees a whole file or the
previous one). Either way the bytes are checked (magic, format version, SHA-256) before use; a
failure has an outcome and a reason, and the caller starts from its own state instead.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

import httpx

from service.persistence.snapshot_codec import (
    CHUNK_BYTES,
    MEDIA_TYPE,
    SnapshotFormatError,
    decode_state,
)
from service.persistence.snapshot_store import SNAPSHOT_NAME
from service.state.link_state import LinkState
from service.topology.topology import Topology


class WarmOutcome(StrEnum):
    """How a warm start ended (`nettel_warm_start_total{outcome}`)."""

    LOADED = "loaded"
    #: No connection, a timeout or a broken transfer.
    UNREACHABLE = "unreachable"
    #: The peer answered, but not with a snapshot (a wrong token: 401; admin disabled: 404).
    REFUSED = "refused"
    #: Bytes that fail the magic, version, checksum or layout check.
    CORRUPT = "corrupt"
    #: No valid peer snapshot in the directory newer than this replica's own.
    NOT_FOUND = "not_found"
    #: Anything unforeseen (logged with its traceback).
    FAILED = "failed"


class WarmStartError(Exception):
    """A warm start that did not produce a state, with its outcome and reason."""

    def __init__(self, outcome: WarmOutcome, reason: str) -> None:
        super().__init__(reason)
        self.outcome = outcome


@dataclass(frozen=True)
class WarmSource:
    """Where a warm start takes the state from: a peer's base URL (with its admin token) or a
    shared directory; `own_snapshot`, this replica's, which directory snapshots must be newer
    than."""

    location: str
    token: str | None = None
    timeout: float = 30.0
    own_snapshot: Path | None = None


@dataclass(frozen=True)
class WarmState:
    """A state taken from a peer: where from, its size on the wire or disk, the time taken."""

    state: LinkState
    source: str
    size: int
    seconds: float


def warm_state(source: WarmSource, topology: Topology) -> WarmState:
    """The state at `source` (a peer's base URL or a shared directory); WarmStartError if none.

    From a directory only snapshots newer than `source.own_snapshot` are taken.
    """
    started, location = time.monotonic(), source.location
    if location.startswith(("http://", "https://")):
        state, size = fetch_peer_state(location, topology, source.token, source.timeout)
        where = location
    else:
        directory = Path(location)
        state, path, size = newest_directory_state(directory, topology, source.own_snapshot)
        where = str(path)
    return WarmState(state, where, size, time.monotonic() - started)


def fetch_peer_state(
    base_url: str, topology: Topology, token: str | None, timeout: float
) -> tuple[LinkState, int]:
    """GET `base_url`/admin/state streamed into one buffer, checked and decoded; its size."""
    url = base_url.rstrip("/") + "/admin/state"
    headers = {"Accept": MEDIA_TYPE} | ({"Authorization": f"Bearer {token}"} if token else {})
    try:
        with httpx.stream("GET", url, headers=headers, timeout=timeout) as response:
            _check_response(response)
            data = bytearray()
            for chunk in response.iter_bytes(CHUNK_BYTES):
                data += chunk
    except httpx.HTTPError as error:
        raise WarmStartError(WarmOutcome.UNREACHABLE, f"{type(error).__name__}: {error}") from None
    try:
        return decode_state(data, topology), len(data)
    except SnapshotFormatError as error:
        raise WarmStartError(WarmOutcome.CORRUPT, f"{len(data)} bytes: {error}") from None


def _check_response(response: httpx.Response) -> None:
    if response.status_code != 200:
        hint = {401: " (wrong or missing warm token)", 404: " (admin disabled on the peer?)"}
        reason = f"peer answered HTTP {response.status_code}{hint.get(response.status_code, '')}"
        raise WarmStartError(WarmOutcome.REFUSED, reason)
    kind = response.headers.get("content-type", "")
    if kind.partition(";")[0].strip() != MEDIA_TYPE:
        raise WarmStartError(WarmOutcome.REFUSED, f"not a state snapshot (content-type {kind!r})")


def newest_directory_state(
    directory: Path, topology: Topology, own_snapshot: Path | None
) -> tuple[LinkState, Path, int]:
    """The newest valid snapshot among `directory`'s replica state dirs (and the directory
    itself) that is newer than `own_snapshot`, with its path and size; damaged ones are skipped."""
    log = logging.getLogger("nettel.warm_start")
    for path in _peer_snapshots(directory, own_snapshot):
        try:
            data = path.read_bytes()
            return decode_state(data, topology), path, len(data)
        except (OSError, SnapshotFormatError) as error:
            log.warning("peer snapshot skipped", extra={"path": str(path), "error": str(error)})
    reason = f"no valid snapshot in {directory} or its subdirectories"
    raise WarmStartError(WarmOutcome.NOT_FOUND, reason + " newer than this replica's own")


def _peer_snapshots(directory: Path, own_snapshot: Path | None) -> list[Path]:
    """Other replicas' snapshot files, newest first; only those newer than our own."""
    own = own_snapshot.resolve() if own_snapshot is not None else None
    own_time = _modified(own) if own is not None else None
    found = [directory / SNAPSHOT_NAME, *directory.glob(f"*/{SNAPSHOT_NAME}")]
    times = {path: _modified(path) for path in found if path.resolve() != own}
    newer = [p for p, t in times.items() if t is not None and (own_time is None or t > own_time)]
    return sorted(newer, key=lambda path: times[path] or 0.0, reverse=True)


def _modified(path: Path) -> float | None:
    try:
        return path.stat().st_mtime
    except OSError:
        return None


def warm_start(
    source: WarmSource, topology: Topology, log: logging.Logger | None = None
) -> tuple[LinkState | None, WarmOutcome]:
    """`warm_state` that never raises: the state (None on failure) and the outcome, logged
    with the reason, so that the caller starts from its own state instead."""
    log = log or logging.getLogger("nettel.warm_start")
    try:
        warm = warm_state(source, topology)
    except WarmStartError as error:
        log.error(
            "warm start failed; starting from this replica's own state",
            extra={"outcome": error.outcome.value, "reason": str(error)},
        )
        return None, error.outcome
    except Exception:  # e.g. out of memory for the body: still start, from our own state
        log.exception("warm start failed; starting from this replica's own state")
        return None, WarmOutcome.FAILED
    extra = {"source": warm.source, "links": len(warm.state), "bytes": warm.size}
    log.info("warm start: state taken", extra=extra | {"seconds": round(warm.seconds, 3)})
    return warm.state, WarmOutcome.LOADED
