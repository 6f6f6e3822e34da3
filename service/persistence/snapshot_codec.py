"""Versioned, checksummed binary encoding of the whole link state (no pickle).

Layout: ``MAGIC (8 bytes) | sha256 of payload (32 bytes) | payload``, where the payload is an
uncompressed numpy ``.npz`` archive holding every LinkBuffers array (``series/<name>``,
``archive/<name>``, ``slot_minute``, ``latest_*``, ``clock_suspect_minute``) cut to the number
of links, and ``index`` (UTF-8 JSON as uint8: format version, window, sources, destinations and
host names in row order). Sites are not stored: they are derived from the topology at load.

Format version 2 adds the throughput and path columns (``throughput/<name>``, ``paths/<name>``,
`ThroughputState` and `PathState`), the hop table's AS numbers (``paths/hop_asn``) and its
addresses (``hop_addresses`` in the index). Version 1 snapshots (written before throughput and
traces were read) still load: their links start without throughput results or paths. The
format version is the index's; MAGIC names the container and has not changed.
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

from service.state.hop_addresses import HopAddresses
from service.state.link_buffers import ARCHIVE, SERIES, WINDOW_MINUTES, LinkBuffers
from service.state.link_state import LinkState
from service.topology.topology import Topology

FORMAT_VERSION = 2
#: Versions this code restores (each newer one adds arrays to the one before).
READABLE_VERSIONS = (1, 2)
MAGIC = b"NETTEL\x00\x01"
#: The media type of snapshot bytes on the wire (GET /admin/state).
MEDIA_TYPE = "application/vnd.nettel.state-snapshot"
CHUNK_BYTES = 1 << 20
_PER_LINK = ("latest_delay_minute", "latest_p95", "latest_minute", "clock_suspect_minute")
_HOP_ASN = "paths/hop_asn"
#: The names of the arrays version 2 added.
_ADDED_IN_2 = ("throughput/", "paths/")


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
        arrays |= {name: column[:n] for name, column in _result_columns(state).items()}
        arrays[_HOP_ASN] = state.paths.addresses.asn_array()
        arrays["index"] = np.frombuffer(orjson.dumps(_index_document(state)), dtype=np.uint8)
        payload = io.BytesIO()
        np.savez(payload, allow_pickle=False, **arrays)  # numbers only, read back without pickle
    body = payload.getbuffer()
    return EncodedState(MAGIC + hashlib.sha256(body).digest(), body)


class ContentChecks(Protocol):
    """What a state from elsewhere must pass before it is built (`snapshot_checks.ContentLimits`):
    the link list and hop addresses first (before any array is read), then the arrays."""

    def check_links(self, links: list[list[str]], topology: Topology) -> None: ...

    def check_hop_addresses(self, addresses: list[str]) -> None: ...

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
        raise SnapshotFormatError("not a nettel state snapshot")
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
        "hop_addresses": state.paths.addresses.addresses,
    }


def _restore(
    archive: zipfile.ZipFile, topology: Topology, checks: ContentChecks | None
) -> LinkState:
    templates = _templates()
    members = {info.filename: info for info in archive.infolist()}
    version = _version_of(set(members), templates)
    if len(members) != len(archive.infolist()) or version is None:
        raise SnapshotFormatError("snapshot arrays do not match this version's link state")
    for info in members.values():
        if info.compress_type != zipfile.ZIP_STORED:
            raise SnapshotFormatError(f"array {info.filename} is compressed (never written so)")
    raw_index = _read_member(archive, members["index.npy"], None, np.dtype(np.uint8))
    index = orjson.loads(raw_index.tobytes())
    links = _links(index, version)
    hop_addresses = _hop_addresses(index, version)
    if checks is not None:
        checks.check_links(links, topology)
        checks.check_hop_addresses(hop_addresses)
    n = len(links[0])
    arrays = {
        name: _member(archive, members.get(f"{name}.npy"), name, template, n)
        for name, template in templates.items()
    }
    if len(arrays[_HOP_ASN]) != len(hop_addresses):
        raise SnapshotFormatError("snapshot hop AS numbers and addresses differ in length")
    if checks is not None:
        checks.check_arrays(arrays)
    state = LinkState(topology, capacity=max(n, 1))
    for name, target in _targets(state.buffers).items():
        target[:n] = arrays[name]
    for prefix, columns in (
        ("throughput/", state.throughput.columns),
        ("paths/", state.paths.columns),
    ):
        columns.restore({name: arrays[prefix + name] for name in columns})
    state.paths.addresses = HopAddresses(hop_addresses, arrays[_HOP_ASN])
    state.index.add_restored(*links)
    return state


def _version_of(members: set[str], templates: Mapping[str, np.ndarray]) -> int | None:
    """The format version whose arrays are exactly `members` (None: no version's)."""
    current = {f"{name}.npy" for name in (*templates, "index")}
    if members == current:
        return FORMAT_VERSION
    added = {f"{name}.npy" for name in templates if name.startswith(_ADDED_IN_2)}
    return 1 if members == current - added else None


def _member(
    archive: zipfile.ZipFile,
    info: zipfile.ZipInfo | None,
    name: str,
    template: np.ndarray,
    n: int,
) -> np.ndarray:
    """A member of `n` rows of its template's shape and type (the hop table's AS numbers: any
    length, checked against the addresses after); without one (a snapshot of version 1), `n`
    empty rows (no hop addresses)."""
    if info is None:
        return np.zeros(0, template.dtype) if name == _HOP_ASN else np.repeat(template, n, axis=0)
    shape = None if name == _HOP_ASN else (n, *template.shape[1:])
    return _read_member(archive, info, shape, template.dtype)


def _links(index: Any, version: int) -> list[list[str]]:
    """The index document's four per-link lists, checked for type and length."""
    if not isinstance(index, dict):
        raise SnapshotFormatError("snapshot index is not an object")
    if index.get("version") != version or index.get("window_minutes") != WINDOW_MINUTES:
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


def _hop_addresses(index: dict[str, Any], version: int) -> list[str]:
    """The index's hop addresses (none before version 2), checked for type."""
    addresses = index.get("hop_addresses", []) if version >= 2 else []
    if not isinstance(addresses, list) or not all(isinstance(a, str) for a in addresses):
        raise SnapshotFormatError("snapshot hop addresses are not a list of strings")
    return addresses


def _result_columns(state: LinkState) -> dict[str, np.ndarray]:
    """The throughput and path columns, by archive name."""
    columns = {f"throughput/{k}": v for k, v in state.throughput.columns.items()}
    return columns | {f"paths/{k}": v for k, v in state.paths.columns.items()}


def _templates() -> dict[str, np.ndarray]:
    """This version's arrays (one row each), by archive name: their row shape and type."""
    state = LinkState(capacity=1)
    templates = _targets(LinkBuffers(1)) | _result_columns(state)
    templates[_HOP_ASN] = np.zeros(1, np.uint32)
    return templates


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
