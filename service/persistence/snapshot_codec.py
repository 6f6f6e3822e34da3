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
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

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


def decode_state(data: bytes | bytearray, topology: Topology) -> LinkState:
    """Rebuild a LinkState from snapshot bytes; SnapshotFormatError when they cannot be trusted."""
    view = memoryview(data)  # slices without copies
    if view[:8] != MAGIC:
        raise SnapshotFormatError("not a nettel state snapshot of format version 1")
    body = view[40:]
    if hashlib.sha256(body).digest() != view[8:40]:
        raise SnapshotFormatError("checksum mismatch (corrupt or truncated)")
    try:
        with np.load(io.BytesIO(body), allow_pickle=False) as archive:
            arrays = {name: archive[name] for name in archive.files}
        return _restore(arrays, topology)
    except (OSError, ValueError, KeyError) as error:
        raise SnapshotFormatError(f"unreadable payload: {error}") from None


def _index_document(state: LinkState) -> dict[str, Any]:
    i = state.index
    return {
        "version": FORMAT_VERSION,
        "window_minutes": WINDOW_MINUTES,
        "links": [i.sources, i.destinations, i.source_hosts, i.destination_hosts],
    }


def _restore(arrays: dict[str, np.ndarray], topology: Topology) -> LinkState:
    index = orjson.loads(arrays.pop("index").tobytes())
    if index.get("version") != FORMAT_VERSION or index.get("window_minutes") != WINDOW_MINUTES:
        raise SnapshotFormatError("snapshot of another format version or window length")
    sources, destinations, source_hosts, destination_hosts = index["links"]
    state = LinkState(topology, capacity=max(len(sources), 1))
    _fill_buffers(state.buffers, arrays, len(sources))
    state.index.add_restored(sources, destinations, source_hosts, destination_hosts)
    return state


def _fill_buffers(buffers: LinkBuffers, arrays: dict[str, np.ndarray], n: int) -> None:
    targets: dict[str, np.ndarray] = {"slot_minute": buffers.slot_minute}
    targets |= {f"series/{k}": buffers.series[k] for k in SERIES}
    targets |= {f"archive/{k}": buffers.archive[k] for k in ARCHIVE}
    targets |= {name: getattr(buffers, name) for name in _PER_LINK}
    if set(arrays) != set(targets):
        raise SnapshotFormatError("snapshot arrays do not match this version's link state")
    for name, target in targets.items():
        source = arrays[name]
        if source.shape != (n, *target.shape[1:]) or source.dtype != target.dtype:
            raise SnapshotFormatError(f"array {name} has shape {source.shape} / {source.dtype}")
        target[:n] = source
