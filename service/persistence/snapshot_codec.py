"""Versioned, checksummed binary encoding of the whole link state (no pickle).

Layout: ``MAGIC (8 bytes) | sha256 of payload (32 bytes) | payload``, where the payload is an
uncompressed numpy ``.npz`` archive holding every LinkBuffers array (``series/<name>``,
``archive/<name>``, ``slot_minute``, ``latest_*``, ``clock_suspect_minute``) cut to the number
of links, and ``index`` (UTF-8 JSON as uint8: format version, window, sources, destinations and
host names in row order). Sites are not stored: they are derived from the topology at load.
"""

from __future__ import annotations

import hashlib
import io
import zipfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import orjson

from service.state.link_buffers import ARCHIVE, SERIES, WINDOW_MINUTES, LinkBuffers
from service.state.link_state import LinkState
from service.topology.topology import Topology

FORMAT_VERSION = 1
MAGIC = b"NETTEL\x00\x01"
#: The media type of snapshot bytes on the wire (GET /admin/state).
MEDIA_TYPE = "application/vnd.nettel.state-snapshot"
CHUNK_BYTES = 1 << 20
_PER_LINK = ("latest_delay_minute", "latest_p95", "latest_minute", "clock_suspect_minute")


class SnapshotFormatError(ValueError):
    """The bytes are not a snapshot this version can restore (corrupt, truncated, other format)."""


@dataclass(frozen=True)
class EncodedState:
    """Snapshot bytes as their header (magic, checksum) and payload, kept apart so that sending
    them never joins a second copy of the whole."""

    header: bytes
    payload: memoryview

    @property
    def size(self) -> int:
        return len(self.header) + len(self.payload)

    def chunks(self, chunk_bytes: int = CHUNK_BYTES) -> Iterator[bytes]:
        """The bytes in order, in pieces of at most `chunk_bytes` after the header."""
        yield self.header
        for start in range(0, len(self.payload), chunk_bytes):
            yield bytes(self.payload[start : start + chunk_bytes])


def encode_state(state: LinkState) -> bytes:
    """The state as snapshot bytes, as it is at one moment (the state is held still meanwhile)."""
    encoded = encode_state_parts(state)
    return b"".join((encoded.header, encoded.payload))


def encode_state_parts(state: LinkState) -> EncodedState:
    """`encode_state` without joining header and payload (one copy of the payload in memory)."""
    with state.frozen():
        n = len(state)
        b = state.buffers
        arrays: dict[str, np.ndarray] = {"slot_minute": b.slot_minute[:n]}
        arrays |= {f"series/{k}": b.series[k][:n] for k in SERIES}
        arrays |= {f"archive/{k}": b.archive[k][:n] for k in ARCHIVE}
        arrays |= {name: getattr(b, name)[:n] for name in _PER_LINK}
        arrays["index"] = np.frombuffer(orjson.dumps(_index_document(state)), dtype=np.uint8)
        payload = io.BytesIO()
        np.savez(payload, allow_pickle=False, **arrays)  # numbers only, read back without pickle
    body = payload.getbuffer()
    return EncodedState(MAGIC + hashlib.sha256(body).digest(), body)


class ContentChecks(Protocol):
    """What a state from elsewhere must pass before it is built (`snapshot_checks.ContentLimits`):
    the link list first (before any array is read), then the arrays."""

    def check_links(self, links: list[list[str]], topology: Topology) -> None: ...

    def check_arrays(self, arrays: Mapping[str, np.ndarray]) -> None: ...


def decode_state(
    data: bytes | bytearray, topology: Topology, checks: ContentChecks | None = None
) -> LinkState:
    """Rebuild a LinkState from snapshot bytes; SnapshotFormatError when they cannot be trusted.

    The archive's members must be exactly this version's arrays, stored uncompressed (so the
    bytes decoded are the bytes received), each with the shape and type its header declares
    checked before its data is read. With `checks` (a state from elsewhere), the content is
    checked too, the link list before any array is read."""
    view = memoryview(data)  # slices without copies
    if view[:8] != MAGIC:
        raise SnapshotFormatError("not a nettel state snapshot of format version 1")
    body = view[40:]
    if hashlib.sha256(body).digest() != view[8:40]:
        raise SnapshotFormatError("checksum mismatch (corrupt or truncated)")
    try:
        with zipfile.ZipFile(io.BytesIO(body)) as archive:
            return _restore(archive, topology, checks)
    except (OSError, ValueError, KeyError, zipfile.BadZipFile, EOFError) as error:
        if isinstance(error, SnapshotFormatError):
            raise
        raise SnapshotFormatError(f"unreadable payload: {error}") from None


def _index_document(state: LinkState) -> dict[str, Any]:
    i = state.index
    return {
        "version": FORMAT_VERSION,
        "window_minutes": WINDOW_MINUTES,
        "links": [i.sources, i.destinations, i.source_hosts, i.destination_hosts],
    }


def _restore(
    archive: zipfile.ZipFile, topology: Topology, checks: ContentChecks | None
) -> LinkState:
    templates = _templates()
    members = {info.filename: info for info in archive.infolist()}
    expected = {f"{name}.npy" for name in (*templates, "index")}
    if len(members) != len(archive.infolist()) or set(members) != expected:
        raise SnapshotFormatError("snapshot arrays do not match this version's link state")
    for info in members.values():
        if info.compress_type != zipfile.ZIP_STORED:
            raise SnapshotFormatError(f"array {info.filename} is compressed (never written so)")
    raw_index = _read_member(archive, members["index.npy"], None, np.dtype(np.uint8))
    links = _links(orjson.loads(raw_index.tobytes()))
    if checks is not None:
        checks.check_links(links, topology)
    n = len(links[0])
    arrays = {
        name: _read_member(
            archive, members[f"{name}.npy"], (n, *template.shape[1:]), template.dtype
        )
        for name, template in templates.items()
    }
    if checks is not None:
        checks.check_arrays(arrays)
    state = LinkState(topology, capacity=max(n, 1))
    targets = _targets(state.buffers)
    for name, target in targets.items():
        target[:n] = arrays[name]
    state.index.add_restored(*links)
    return state


def _links(index: Any) -> list[list[str]]:
    """The index document's four per-link lists, checked for type and length."""
    if not isinstance(index, dict):
        raise SnapshotFormatError("snapshot index is not an object")
    if index.get("version") != FORMAT_VERSION or index.get("window_minutes") != WINDOW_MINUTES:
        raise SnapshotFormatError("snapshot of another format version or window length")
    links = index.get("links")
    if (
        not isinstance(links, list)
        or len(links) != 4
        or not all(isinstance(c, list) for c in links)
    ):
        raise SnapshotFormatError("snapshot index has no four link lists")
    if len({len(column) for column in links}) != 1:
        raise SnapshotFormatError("snapshot index lists differ in length")
    if not all(isinstance(value, str) for column in links for value in column):
        raise SnapshotFormatError("snapshot index holds a name that is not a string")
    return links


def _templates() -> dict[str, np.ndarray]:
    """This version's arrays (one row each), by archive name: their row shape and type."""
    return _targets(LinkBuffers(1))


def _targets(buffers: LinkBuffers) -> dict[str, np.ndarray]:
    targets: dict[str, np.ndarray] = {"slot_minute": buffers.slot_minute}
    targets |= {f"series/{k}": buffers.series[k] for k in SERIES}
    targets |= {f"archive/{k}": buffers.archive[k] for k in ARCHIVE}
    targets |= {name: getattr(buffers, name) for name in _PER_LINK}
    return targets


def _read_member(
    archive: zipfile.ZipFile,
    info: zipfile.ZipInfo,
    shape: tuple[int, ...] | None,
    dtype: np.dtype[Any],
) -> np.ndarray:
    """One .npy member, its header checked (`shape`, or any 1-D length for None; `dtype`; C
    order) before exactly the bytes it declares are read."""
    with archive.open(info) as member:
        version = np.lib.format.read_magic(member)
        if version == (1, 0):
            declared, fortran, kind = np.lib.format.read_array_header_1_0(member)
        elif version == (2, 0):
            declared, fortran, kind = np.lib.format.read_array_header_2_0(member)
        else:
            raise SnapshotFormatError(f"array {info.filename}: .npy version {version}")
        one_dimensional = shape is None and len(declared) == 1
        if fortran or kind != dtype or not (one_dimensional or declared == shape):
            shown = f"{declared} / {kind}{' (Fortran order)' if fortran else ''}"
            raise SnapshotFormatError(f"array {info.filename[:-4]} has shape {shown}")
        size = int(np.prod(declared, dtype=np.int64)) * dtype.itemsize
        if size > info.file_size:
            raise SnapshotFormatError(f"array {info.filename[:-4]} declares more than it holds")
        data = member.read(size)
    if len(data) != size:
        raise SnapshotFormatError(f"array {info.filename[:-4]} is truncated")
    return np.frombuffer(data, dtype=dtype).reshape(declared)
