"""Warm start: a starting replica takes the link state of a peer instead of filling its window
from live data for 32 minutes.

The peer is a running `nettel serve` (its `GET /admin/state`: the snapshot format, streamed,
behind the admin token) or a shared directory of replica state dirs, each written by one replica
(`<dir>/<replica>/link-state.snapshot`, replaced atomically, so a reader sees a whole file or the
previous one). Nothing a peer sends is trusted: the transfer is bounded (`max_bytes`, no content
coding, `deadline` for the whole), the bytes are checked (magic, format version, SHA-256, the
archive's layout) and so is the content, as strictly as live input
(`service.persistence.snapshot_checks`). A failure has an outcome and a reason, and the caller
starts from its own state instead.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

import httpx

from service.persistence.snapshot_checks import ContentCheck, ContentLimits, SnapshotContentError
from service.persistence.snapshot_codec import (
    CHUNK_BYTES,
    MEDIA_TYPE,
    SnapshotFormatError,
    decode_state,
)
from service.persistence.snapshot_store import SNAPSHOT_NAME
from service.state.link_state import LinkState
from service.topology.topology import Topology

#: A snapshot's bytes per link at most: the arrays take about 900, the index 4 names of up to
#: 255 characters (at most 4 bytes each in UTF-8); plus 1 MiB for headers.
BYTES_PER_LINK = 4096 + 1024
BASE_BYTES = 1 << 20


def max_snapshot_bytes(max_links: int) -> int:
    """The size cap of a state from elsewhere for --max-links `max_links`."""
    return BASE_BYTES + max_links * BYTES_PER_LINK


class WarmOutcome(StrEnum):
    """How a warm start ended (`nettel_warm_start_total{outcome}`)."""

    LOADED = "loaded"
    #: No connection, a timeout or a broken transfer.
    UNREACHABLE = "unreachable"
    #: The peer answered, but not with a snapshot (a wrong token: 401; admin disabled: 404).
    REFUSED = "refused"
    #: Bytes that fail the magic, version, checksum or layout check.
    CORRUPT = "corrupt"
    #: A state that decodes but fails a content check (`snapshot_checks`; which one is counted
    #: in `nettel_warm_start_rejected_total{check}`).
    REJECTED = "rejected"
    #: More bytes than the size cap (Content-Length, the bytes received, or the file's size).
    TOO_LARGE = "too_large"
    #: Not done within --warm-deadline (e.g. a peer trickling its bytes).
    DEADLINE = "deadline"
    #: No valid peer snapshot in the directory newer than this replica's own.
    NOT_FOUND = "not_found"
    #: Anything unforeseen (logged with its traceback).
    FAILED = "failed"


class WarmStartError(Exception):
    """A warm start that did not produce a state, with its outcome and reason."""

    def __init__(
        self, outcome: WarmOutcome, reason: str, check: ContentCheck | None = None
    ) -> None:
        super().__init__(reason)
        self.outcome = outcome
        #: The content check that refused the state (outcome REJECTED).
        self.check = check


@dataclass(frozen=True)
class WarmSource:
    """Where a warm start takes the state from: a peer's base URL (with its admin token) or a
    shared directory; `own_snapshot`, this replica's, which directory snapshots must be newer
    than."""

    location: str
    token: str | None = None
    timeout: float = 30.0
    own_snapshot: Path | None = None
    #: --max-links: more links are refused (and sizes the byte cap).
    max_links: int = 150_000
    #: The whole warm start (request, transfer, checks, decode) at most, in seconds.
    deadline: float = 120.0

    @property
    def max_bytes(self) -> int:
        return max_snapshot_bytes(self.max_links)


@dataclass(frozen=True)
class WarmState:
    """A state taken from a peer: where from, its size on the wire or disk, the time taken."""

    state: LinkState
    source: str
    size: int
    seconds: float


def warm_state(
    source: WarmSource,
    topology: Topology,
    bindings: Mapping[tuple[str, int], str] | None = None,
    cancelled: threading.Event | None = None,
) -> WarmState:
    """The state at `source` (a peer's base URL or a shared directory), checked against
    `bindings` (this replica's host bindings) and --max-links; WarmStartError if none. From a
    directory only snapshots newer than `source.own_snapshot` are taken. A transfer ends (as
    DEADLINE) at its next piece once `cancelled` is set."""
    started, location = time.monotonic(), source.location
    limits = ContentLimits(time.time(), source.max_links, bindings or {})
    if location.startswith(("http://", "https://")):
        state, size = fetch_peer_state(location, topology, source, limits, cancelled)
        where = location
    else:
        directory = Path(location)
        state, path, size = newest_directory_state(directory, topology, source, limits)
        where = str(path)
    return WarmState(state, where, size, time.monotonic() - started)


def fetch_peer_state(
    base_url: str,
    topology: Topology,
    source: WarmSource,
    limits: ContentLimits,
    cancelled: threading.Event | None = None,
) -> tuple[LinkState, int]:
    """GET `base_url`/admin/state streamed into one buffer of at most `source.max_bytes`,
    checked and decoded; its size."""
    url = base_url.rstrip("/") + "/admin/state"
    headers = {"Accept": MEDIA_TYPE, "Accept-Encoding": "identity"}
    if source.token:
        headers["Authorization"] = f"Bearer {source.token}"
    cap = source.max_bytes
    try:
        with httpx.stream("GET", url, headers=headers, timeout=source.timeout) as response:
            _check_response(response, cap)
            data = bytearray()
            for chunk in response.iter_raw(CHUNK_BYTES):  # no decoding: the bytes as sent
                data += chunk
                if len(data) > cap:
                    raise WarmStartError(WarmOutcome.TOO_LARGE, f"over {cap:,} bytes received")
                if cancelled is not None and cancelled.is_set():
                    reason = f"transfer cut at {len(data):,} bytes"
                    raise WarmStartError(WarmOutcome.DEADLINE, reason)
    except httpx.HTTPError as error:
        raise WarmStartError(WarmOutcome.UNREACHABLE, f"{type(error).__name__}: {error}") from None
    return _decoded(data, topology, limits), len(data)


def _decoded(data: bytes | bytearray, topology: Topology, limits: ContentLimits) -> LinkState:
    try:
        return decode_state(data, topology, limits)
    except SnapshotContentError as error:
        reason = f"{len(data)} bytes: {error}"
        raise WarmStartError(WarmOutcome.REJECTED, reason, error.check) from None
    except SnapshotFormatError as error:
        raise WarmStartError(WarmOutcome.CORRUPT, f"{len(data)} bytes: {error}") from None


def _check_response(response: httpx.Response, cap: int) -> None:
    if response.status_code != 200:
        hint = {401: " (wrong or missing warm token)", 404: " (admin disabled on the peer?)"}
        reason = f"peer answered HTTP {response.status_code}{hint.get(response.status_code, '')}"
        raise WarmStartError(WarmOutcome.REFUSED, reason)
    kind = response.headers.get("content-type", "")
    if kind.partition(";")[0].strip() != MEDIA_TYPE:
        raise WarmStartError(WarmOutcome.REFUSED, f"not a state snapshot (content-type {kind!r})")
    coding = response.headers.get("content-encoding", "identity").strip().lower()
    if coding != "identity":
        raise WarmStartError(WarmOutcome.REFUSED, f"content-encoding {coding!r} (identity asked)")
    length = response.headers.get("content-length")
    if length is not None and (not length.isdigit() or int(length) > cap):
        reason = f"Content-Length {length[:20]} over the cap of {cap:,} bytes"
        raise WarmStartError(WarmOutcome.TOO_LARGE, reason)


def newest_directory_state(
    directory: Path, topology: Topology, source: WarmSource, limits: ContentLimits
) -> tuple[LinkState, Path, int]:
    """The newest valid snapshot among `directory`'s replica state dirs (and the directory
    itself) that is newer than `source.own_snapshot`, with its path and size. Damaged,
    oversized and refused ones are skipped (logged); when every one fails, the outcome is the
    worst seen (REJECTED before TOO_LARGE before NOT_FOUND)."""
    log = logging.getLogger("nettel.warm_start")
    refused: WarmStartError | None = None
    for path in _peer_snapshots(directory, source.own_snapshot):
        try:
            data = _read_capped(path, source.max_bytes)
            return _decoded(data, topology, limits), path, len(data)
        except OSError as error:
            log.warning("peer snapshot skipped", extra={"path": str(path), "error": str(error)})
        except WarmStartError as error:
            extra = {"path": str(path), "outcome": error.outcome.value, "error": str(error)}
            log.warning("peer snapshot skipped", extra=extra)
            if error.outcome is not WarmOutcome.CORRUPT:
                rank = (WarmOutcome.REJECTED, WarmOutcome.TOO_LARGE)
                if refused is None or rank.index(error.outcome) < rank.index(refused.outcome):
                    refused = error
    if refused is not None:
        raise refused
    reason = f"no valid snapshot in {directory} or its subdirectories"
    raise WarmStartError(WarmOutcome.NOT_FOUND, reason + " newer than this replica's own")


def _read_capped(path: Path, cap: int) -> bytes:
    """The file's bytes; TOO_LARGE beyond `cap` (checked before and while reading)."""
    with open(path, "rb") as handle:
        data = handle.read(cap + 1)
    if len(data) > cap:
        raise WarmStartError(WarmOutcome.TOO_LARGE, f"{path}: over {cap:,} bytes")
    return data


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


@dataclass
class WarmResult:
    """How a warm start ended: the state (None on failure), the outcome, and the content check
    that refused the state (outcome REJECTED)."""

    state: LinkState | None
    outcome: WarmOutcome
    check: ContentCheck | None = None
    reason: str = field(default="")


def warm_start(
    source: WarmSource,
    topology: Topology,
    log: logging.Logger | None = None,
    bindings: Mapping[tuple[str, int], str] | None = None,
    cancelled: threading.Event | None = None,
) -> WarmResult:
    """`warm_state` within `source.deadline` that never raises, logged with the reason on
    failure, so that the caller starts from its own state instead.

    The work runs on a thread of its own; past the deadline (or once `cancelled` is set) this
    returns DEADLINE at once and the thread, abandoned, ends at its next piece of transfer."""
    log = log or logging.getLogger("nettel.warm_start")
    abandon = threading.Event()
    results: list[WarmResult | WarmState] = []

    def work() -> None:
        results.append(_attempt(source, topology, bindings, abandon, log))

    worker = threading.Thread(target=work, name="warm-start-transfer", daemon=True)
    ends = time.monotonic() + source.deadline
    worker.start()
    while worker.is_alive() and time.monotonic() < ends:
        if cancelled is not None and cancelled.is_set():
            break
        worker.join(min(0.1, max(ends - time.monotonic(), 0.0)))
    if not results:
        abandon.set()
        stopped = cancelled is not None and cancelled.is_set()
        reason = "stopped" if stopped else f"not done within --warm-deadline {source.deadline:g} s"
        return _failed(log, WarmStartError(WarmOutcome.DEADLINE, reason))
    result = results[0]
    if isinstance(result, WarmResult):
        return result
    extra = {"source": result.source, "links": len(result.state), "bytes": result.size}
    log.info("warm start: state taken", extra=extra | {"seconds": round(result.seconds, 3)})
    return WarmResult(result.state, WarmOutcome.LOADED)


def _attempt(
    source: WarmSource,
    topology: Topology,
    bindings: Mapping[tuple[str, int], str] | None,
    abandon: threading.Event,
    log: logging.Logger,
) -> WarmResult | WarmState:
    try:
        return warm_state(source, topology, bindings, abandon)
    except WarmStartError as error:
        return _failed(log, error)
    except Exception:  # e.g. out of memory for the body: still start, from our own state
        log.exception("warm start failed; starting from this replica's own state")
        return WarmResult(None, WarmOutcome.FAILED, reason="unforeseen error (logged)")


def _failed(log: logging.Logger, error: WarmStartError) -> WarmResult:
    extra = {"outcome": error.outcome.value, "reason": str(error)}
    if error.check is not None:
        extra["check"] = error.check.value
    log.error("warm start failed; starting from this replica's own state", extra=extra)
    return WarmResult(None, error.outcome, error.check, str(error))
